# Rendered by the rdmalb sidecar of node {{node}}: the node is in the idle
# pool and serves no site (source: conf/role/nginx-idle.conf.tpl).
server {
    listen {{listen}};
    add_header X-Rdmalb-Site idle always;
    return 503;
}
