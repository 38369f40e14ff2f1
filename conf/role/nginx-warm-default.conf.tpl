# Rendered by the rdmalb sidecar of node {{node}} at the top of its warm
# file (source: conf/role/nginx-warm-default.conf.tpl): nginx's default
# server for {{listen}}, answering requests whose Host is none of the warm
# sites' with 421, so that such a request is never served by whichever
# site's block happens to come first.
server {
    listen {{listen}} default_server;
    return 421 "node {{node}} serves no site for this host\n";
}
