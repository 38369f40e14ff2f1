# Rendered by the rdmalb sidecar of node {{node}} for site {{site}}.
# Do not edit: the sidecar replaces this file whenever a proxy moves the node
# to another site (source: conf/role/nginx-site.conf.tpl).
server {
    listen {{listen}};
    server_name {{hosts}};
    root {{root}};
    # Lets the sidecar's probe (verify_header) and every client see which
    # site answered.
    add_header X-Rdmalb-Site {{site}} always;

    location = {{health_path}} {
        default_type text/plain;
        return 200 "{{site}} ok\n";
    }
    location / {
        try_files $uri $uri/ =404;
    }
}
