# Rendered by the rdmalb sidecar of node {{node}} for site {{site}}.
# Do not edit: the sidecar replaces this file whenever a proxy moves the node
# to another site (source: conf/role/testsrv-site.toml.tpl). testsrv re-reads
# it on SIGHUP.
site = "{{site}}"
hosts = [{{hosts_quoted}}]
