# Rendered by the rdmalb sidecar of node {{node}} for site {{site}}, one of
# the sites this node keeps warm: the sidecar writes every site's block into
# one file at start-up and then switches sites by renaming the gate marker,
# without reloading nginx (source: conf/role/nginx-warm-site.conf.tpl).
# Do not edit the rendered file: the sidecar replaces it.
server {
    listen {{listen}};
    server_name {{hosts}};
    root {{root}};

    # The gate: while the node does not serve {{site}}, the marker
    # {{gate}} is absent and every request is refused with 421 Misdirected
    # Request (RFC 9110 15.5.20) before anything else runs, so the proxy
    # replays it on another node. `-f` is one stat(2) per request; the
    # open file cache is off here so the answer can never come from a cache
    # that is up to open_file_cache_valid (60 s by default) old.
    open_file_cache off;
    if (!-f {{gate}}) {
        return 421 "node {{node}} does not serve {{site}} now\n";
    }

    # The site header sits in each location, not at server level, so that a
    # 421 from the gate names no site. It lets the sidecar's probe
    # (verify_header) and every client see which site answered.
    location = {{health_path}} {
        add_header X-Rdmalb-Site {{site}} always;
        default_type text/plain;
        return 200 "{{site}} ok\n";
    }
    location / {
        add_header X-Rdmalb-Site {{site}} always;
        try_files $uri $uri/ =404;
    }
}
