//! Sidecar config: `site` and `[role]`. The shipped role example validates,
//! defaults apply, and every rejected value has its own test whose message
//! names the file, the key and what would be accepted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rdmalb_sidecar::config::{self, ConfigErrors, SidecarConfig};
use rdmalb_window::SiteSlot;

struct Dir {
    dir: tempfile::TempDir,
}

const HEAD: &str = "node = \"n1\"\nnode_id = 1\nsites = [\"shop\", \"blog\", \"news\"]\n[window.shm]\npath = \"/dev/shm/rdmalb-test-n1\"\n[[collector]]\nkind = \"system\"\n";

impl Dir {
    /// A temp dir with templates `shop.tpl` and `idle.tpl` and a `conf/`
    /// directory for the rendered file.
    fn new() -> Dir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("conf")).unwrap();
        std::fs::write(
            dir.path().join("shop.tpl"),
            "server { server_name {{hosts}}; add_header X-Site {{site}}; root {{root}}; }\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("plain.tpl"), "site {{site}}\n").unwrap();
        std::fs::write(dir.path().join("idle.tpl"), "# idle {{node}}\n").unwrap();
        Dir { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("sidecar.toml")
    }

    fn parse(&self, text: &str) -> Result<SidecarConfig, ConfigErrors> {
        config::parse(text, &self.file())
    }

    /// `site = "shop"` plus a valid `[role]` whose role-level keys are
    /// `role_keys` (replacing the defaults below when they name the same key)
    /// and `tail` appended after the shop site.
    fn role(&self, role_keys: &str, tail: &str) -> String {
        let mut keys = [
            ("file", "\"conf/site.conf\"".to_string()),
            ("reload", "[\"nginx\", \"-s\", \"reload\"]".to_string()),
            ("verify", "\"127.0.0.1:8081\"".to_string()),
        ];
        let mut extra = String::new();
        for line in role_keys.lines() {
            let k = line.split('=').next().unwrap().trim();
            if let Some(slot) = keys.iter_mut().find(|(n, _)| *n == k) {
                slot.1 = line.split_once('=').unwrap().1.trim().to_string();
            } else {
                extra.push_str(line);
                extra.push('\n');
            }
        }
        let keys: String = keys
            .iter()
            .filter(|(_, v)| v != "DROP")
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        format!(
            "site = \"shop\"\n{HEAD}[role]\n{keys}{extra}[role.site.shop]\ntemplate = \"shop.tpl\"\nhosts = [\"shop.example\", \"www.shop.example\"]\nvars = {{ root = \"/srv/shop\" }}\n{tail}"
        )
    }

    fn reject(&self, text: &str, key: &str) -> String {
        let err = self.parse(text).expect_err("config should be rejected");
        let shown = err.to_string();
        assert!(
            shown.contains(&self.file().display().to_string()),
            "file not named: {shown}"
        );
        let p = err
            .problems
            .iter()
            .find(|p| p.key == key)
            .unwrap_or_else(|| panic!("no problem at `{key}`: {shown}"));
        assert!(shown.contains(&format!("{key}: ")), "{shown}");
        p.message.clone()
    }
}

// Keys are spliced at the top level of HEAD, which ends inside
// [[collector]]; put `site` before any table instead.
fn top(extra: &str) -> String {
    format!("{extra}\n{HEAD}")
}

#[test]
fn role_with_defaults_is_accepted() {
    let d = Dir::new();
    let c = d
        .parse(&d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"blog.example\"]\nhealth_path = \"/health?x=1\"\n[role.idle]\ntemplate = \"idle.tpl\"\n"))
        .unwrap();
    assert_eq!(c.site, SiteSlot::Site(0));
    let r = c.role.unwrap();
    assert_eq!(r.poll, None, "default: checked on every publish tick");
    assert_eq!(r.file, d.dir.path().join("conf/site.conf"));
    assert_eq!(r.reload, ["nginx", "-s", "reload"]);
    assert_eq!(r.reload_timeout, config::DEFAULT_RELOAD_TIMEOUT);
    assert_eq!(r.verify.port(), 8081);
    assert_eq!(r.verify_timeout, config::DEFAULT_VERIFY_TIMEOUT);
    assert!(r.verify_header.is_none());
    let shop = &r.sites["shop"];
    assert_eq!(shop.hosts, ["shop.example", "www.shop.example"]);
    assert_eq!(shop.health_path, "/");
    assert_eq!(shop.template.vars["root"], "/srv/shop");
    assert_eq!(shop.template.path, d.dir.path().join("shop.tpl"));
    assert_eq!(r.sites["blog"].health_path, "/health?x=1");
    assert!(r.idle.is_some());
    assert!(!r.sites.contains_key("news"), "a site may have no template");
}

#[test]
fn every_role_key_is_read() {
    let d = Dir::new();
    let c = d
        .parse(&d.role(
            "poll = \"5ms\"\nreload_timeout = \"2s\"\nverify_timeout = \"750ms\"\nverify_header = \"X-Site\"",
            "",
        ))
        .unwrap();
    let r = c.role.unwrap();
    assert_eq!(r.poll, Some(Duration::from_millis(5)));
    assert_eq!(r.reload_timeout, Duration::from_secs(2));
    assert_eq!(r.verify_timeout, Duration::from_millis(750));
    assert_eq!(r.verify_header.unwrap().as_str(), "x-site");
}

#[test]
fn without_role_the_site_defaults_to_idle_and_role_is_off() {
    let d = Dir::new();
    let c = d.parse(HEAD).unwrap();
    assert_eq!(c.site, SiteSlot::Idle);
    assert!(c.role.is_none());
    let c = d.parse(&top("site = \"news\"")).unwrap();
    assert_eq!(c.site, SiteSlot::Site(2));
    let c = d.parse(&top("site = \"idle\"")).unwrap();
    assert_eq!(c.site, SiteSlot::Idle);
}

#[test]
fn shipped_role_example_validates() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/role");
    let d = tempfile::tempdir().unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, d.path().join(p.file_name().unwrap())).unwrap();
    }
    for e in std::fs::read_dir(d.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml")
            && p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sidecar")
        {
            // The example writes into /etc/nginx/conf.d (or a testsrv dir);
            // point it at a temp dir on machines without one.
            let text = std::fs::read_to_string(&p).unwrap();
            let file_line = text.lines().find(|l| l.starts_with("file = ")).unwrap();
            let target = file_line.trim_start_matches("file = ").trim_matches('"');
            let dir = Path::new(target).parent().unwrap();
            if !dir.is_dir() {
                let text = text.replace(
                    file_line,
                    &format!("file = \"{}/site.conf\"", d.path().display()),
                );
                std::fs::write(&p, text).unwrap();
            }
            if let Err(e) = config::load(&p) {
                panic!("{} does not validate:\n{e}", p.display());
            }
            n += 1;
        }
    }
    assert!(n >= 1, "expected conf/role/sidecar-*.toml");
}

#[test]
fn rejects_initial_site_not_in_sites() {
    let d = Dir::new();
    let m = d.reject(&top("site = \"shopp\""), "site");
    assert!(
        m.contains("`shopp` is not in `sites`") && m.contains("\"idle\""),
        "{m}"
    );
}

#[test]
fn rejects_initial_site_of_wrong_type() {
    let d = Dir::new();
    let m = d.reject(&top("site = 3"), "site");
    assert!(m.contains("expected a site name"), "{m}");
}

#[test]
fn rejects_initial_site_without_template_when_role_is_on() {
    let d = Dir::new();
    let text = d.role("", "").replace("site = \"shop\"", "site = \"blog\"");
    let m = d.reject(&text, "site");
    assert!(
        m.contains("no [role.site.blog]") && m.contains("site = \"idle\""),
        "{m}"
    );
}

#[test]
fn rejects_unknown_role_key() {
    let d = Dir::new();
    let m = d.reject(&d.role("reload_command = \"x\"", ""), "role");
    assert!(m.contains("reload_command"), "{m}");
}

#[test]
fn rejects_bad_poll() {
    let d = Dir::new();
    let m = d.reject(&d.role("poll = \"0ms\"", ""), "role.poll");
    assert!(m.contains("out of range"), "{m}");
}

#[test]
fn rejects_unparsable_poll() {
    let d = Dir::new();
    d.reject(&d.role("poll = \"often\"", ""), "role.poll");
}

#[test]
fn rejects_missing_file() {
    let d = Dir::new();
    let m = d.reject(&d.role("file = DROP", ""), "role.file");
    assert!(m.starts_with("missing"), "{m}");
}

#[test]
fn rejects_file_in_missing_directory() {
    let d = Dir::new();
    let m = d.reject(&d.role("file = \"nowhere/site.conf\"", ""), "role.file");
    assert!(m.contains("does not exist"), "{m}");
}

#[test]
fn rejects_file_that_is_a_directory() {
    let d = Dir::new();
    let m = d.reject(&d.role("file = \"conf\"", ""), "role.file");
    assert!(m.contains("is a directory"), "{m}");
}

#[test]
fn rejects_file_path_ending_in_slash() {
    let d = Dir::new();
    let m = d.reject(&d.role("file = \"conf/\"", ""), "role.file");
    assert!(m.contains("not a file path"), "{m}");
}

#[test]
fn rejects_missing_reload() {
    let d = Dir::new();
    let m = d.reject(&d.role("reload = DROP", ""), "role.reload");
    assert!(m.contains("argv list"), "{m}");
}

#[test]
fn rejects_empty_reload() {
    let d = Dir::new();
    let m = d.reject(&d.role("reload = []", ""), "role.reload");
    assert!(m.contains("empty list"), "{m}");
}

#[test]
fn rejects_empty_reload_program() {
    let d = Dir::new();
    d.reject(&d.role("reload = [\"\", \"reload\"]", ""), "role.reload[0]");
}

#[test]
fn rejects_reload_as_a_string() {
    // No implicit shell: a string is not split.
    let d = Dir::new();
    let m = d.reject(&d.role("reload = \"nginx -s reload\"", ""), "role");
    assert!(m.contains("sequence") || m.contains("array"), "{m}");
}

#[test]
fn rejects_bad_reload_timeout() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("reload_timeout = \"1h\"", ""),
        "role.reload_timeout",
    );
    assert!(m.contains("out of range"), "{m}");
}

#[test]
fn rejects_missing_verify() {
    let d = Dir::new();
    let m = d.reject(&d.role("verify = DROP", ""), "role.verify");
    assert!(m.contains("missing") && m.contains("127.0.0.1:8081"), "{m}");
}

#[test]
fn rejects_bad_verify_address() {
    let d = Dir::new();
    let m = d.reject(&d.role("verify = \"localhost\"", ""), "role.verify");
    assert!(m.contains("not an IP:port"), "{m}");
}

#[test]
fn rejects_bad_verify_timeout() {
    let d = Dir::new();
    d.reject(
        &d.role("verify_timeout = \"0s\"", ""),
        "role.verify_timeout",
    );
}

#[test]
fn rejects_bad_verify_header() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("verify_header = \"X Site\"", ""),
        "role.verify_header",
    );
    assert!(m.contains("not an HTTP header name"), "{m}");
}

#[test]
fn rejects_site_section_for_unknown_site() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.wiki]\ntemplate = \"plain.tpl\"\nhosts = [\"w\"]\n",
        ),
        "role.site.wiki",
    );
    assert!(m.contains("not in `sites`"), "{m}");
}

#[test]
fn rejects_site_that_is_not_a_table() {
    let d = Dir::new();
    let text = format!("{HEAD}[role]\nfile = \"conf/x\"\nreload = [\"true\"]\nverify = \"127.0.0.1:1\"\nsite = 5\n");
    let m = d.reject(&text, "role.site");
    assert!(m.contains("expected a table"), "{m}");
}

#[test]
fn rejects_unknown_key_in_site_section() {
    let d = Dir::new();
    let m = d.reject(&d.role("", "health = \"/\"\n"), "role.site.shop");
    assert!(m.contains("health"), "{m}");
}

#[test]
fn rejects_site_without_template() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.site.blog]\nhosts = [\"blog.example\"]\n"),
        "role.site.blog.template",
    );
    assert!(m.starts_with("missing"), "{m}");
}

#[test]
fn rejects_unreadable_template() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.blog]\ntemplate = \"missing.tpl\"\nhosts = [\"b\"]\n",
        ),
        "role.site.blog.template",
    );
    assert!(
        m.contains("cannot read") && m.contains("missing.tpl"),
        "{m}"
    );
}

#[test]
fn rejects_template_with_unterminated_tag() {
    let d = Dir::new();
    std::fs::write(d.dir.path().join("bad.tpl"), "ok\nserver {{site\n").unwrap();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.blog]\ntemplate = \"bad.tpl\"\nhosts = [\"b\"]\n",
        ),
        "role.site.blog.template",
    );
    assert!(m.contains("bad.tpl") && m.contains("line 2"), "{m}");
}

#[test]
fn rejects_template_with_bad_variable_name() {
    let d = Dir::new();
    std::fs::write(d.dir.path().join("bad.tpl"), "{{ server-name }}\n").unwrap();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.blog]\ntemplate = \"bad.tpl\"\nhosts = [\"b\"]\n",
        ),
        "role.site.blog.template",
    );
    assert!(m.contains("not a variable name"), "{m}");
}

#[test]
fn rejects_template_with_unknown_variable() {
    let d = Dir::new();
    // shop.tpl uses {{root}}; without vars it is unknown, not empty.
    let text = d
        .role("", "")
        .replace("vars = { root = \"/srv/shop\" }\n", "");
    let m = d.reject(&text, "role.site.shop.template");
    assert!(
        m.contains("unknown variable `root`") && m.contains("primary_host"),
        "{m}"
    );
}

#[test]
fn rejects_missing_hosts() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\n"),
        "role.site.blog.hosts",
    );
    assert!(m.starts_with("missing"), "{m}");
}

#[test]
fn rejects_empty_hosts() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = []\n",
        ),
        "role.site.blog.hosts",
    );
    assert!(m.contains("empty list"), "{m}");
}

#[test]
fn rejects_bad_host() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"ok.example\", \"two words\"]\n",
        ),
        "role.site.blog.hosts[1]",
    );
    assert!(m.contains("not a host name"), "{m}");
}

#[test]
fn rejects_relative_health_path() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"b\"]\nhealth_path = \"health\"\n"),
        "role.site.blog.health_path",
    );
    assert!(m.contains("not an absolute request path"), "{m}");
}

#[test]
fn rejects_var_redefining_a_builtin() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"b\"]\nvars = { site = \"x\" }\n"),
        "role.site.blog.vars.site",
    );
    assert!(m.contains("built-in"), "{m}");
}

#[test]
fn rejects_var_with_bad_name() {
    let d = Dir::new();
    d.reject(
        &d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"b\"]\nvars = { \"doc-root\" = \"x\" }\n"),
        "role.site.blog.vars.doc-root",
    );
}

#[test]
fn rejects_var_of_wrong_type() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.site.blog]\ntemplate = \"plain.tpl\"\nhosts = [\"b\"]\nvars = { roots = [\"a\"] }\n"),
        "role.site.blog.vars.roots",
    );
    assert!(m.contains("expected a string, integer or boolean"), "{m}");
}

#[test]
fn rejects_idle_without_template() {
    let d = Dir::new();
    let m = d.reject(
        &d.role("", "[role.idle]\nvars = { a = 1 }\n"),
        "role.idle.template",
    );
    assert!(m.starts_with("missing"), "{m}");
}

#[test]
fn rejects_idle_template_using_site_variables() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.idle]\ntemplate = \"shop.tpl\"\nvars = { root = \"/\" }\n",
        ),
        "role.idle.template",
    );
    assert!(m.contains("unknown variable `hosts`"), "{m}");
}

#[test]
fn rejects_unknown_key_in_idle_section() {
    let d = Dir::new();
    let m = d.reject(
        &d.role(
            "",
            "[role.idle]\ntemplate = \"idle.tpl\"\nhosts = [\"x\"]\n",
        ),
        "role.idle",
    );
    assert!(m.contains("hosts"), "{m}");
}

#[test]
fn all_role_problems_are_reported_together() {
    let d = Dir::new();
    let text = d.role(
        "poll = \"never\"\nreload = []\nverify = \"x\"",
        "[role.site.blog]\nhosts = []\n",
    );
    let err = d.parse(&text).unwrap_err();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    for k in [
        "role.poll",
        "role.reload",
        "role.verify",
        "role.site.blog.hosts",
        "role.site.blog.template",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
}

// Warm roles: `[role] mode = "warm"` and `gate`.

/// A template with the gate check, as the warm nginx template has it.
const WARM_TPL: &str = "server { server_name {{hosts}}; if (!-f {{gate}}) { return 421; } }\n";

impl Dir {
    /// A valid warm config: shop and blog with `warm.tpl`; `role_keys`
    /// replace or add `[role]` keys, `tail` is appended.
    fn warm(&self, role_keys: &str, tail: &str) -> String {
        std::fs::write(self.dir.path().join("warm.tpl"), WARM_TPL).unwrap();
        let mut keys = [("mode", "\"warm\""), ("gate", "\"run/gate\"")];
        let mut extra = String::new();
        for line in role_keys.lines() {
            let (k, v) = line.split_once('=').unwrap();
            match keys.iter_mut().find(|(n, _)| *n == k.trim()) {
                Some(slot) => slot.1 = v.trim(),
                None => {
                    extra.push_str(line);
                    extra.push('\n');
                }
            }
        }
        let keys: String = keys
            .iter()
            .filter(|(_, v)| *v != "DROP")
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        format!(
            "site = \"shop\"\n{HEAD}[role]\nfile = \"conf/sites.conf\"\nreload = [\"nginx\", \"-s\", \"reload\"]\nverify = \"127.0.0.1:8081\"\n{keys}{extra}\
             [role.site.shop]\ntemplate = \"warm.tpl\"\nhosts = [\"shop.example\"]\n\
             [role.site.blog]\ntemplate = \"warm.tpl\"\nhosts = [\"blog.example\"]\n{tail}"
        )
    }
}

#[test]
fn warm_mode_and_gate_are_read() {
    let d = Dir::new();
    let r = d.parse(&d.warm("", "")).unwrap().role.unwrap();
    assert_eq!(
        r.mode,
        config::RoleMode::Warm {
            gate: d.dir.path().join("run/gate")
        },
        "a relative gate is anchored at the config file's directory; it need not exist yet"
    );
    assert_eq!(r.sites.len(), 2);
    let r = d
        .parse(&d.role("mode = \"cold\"", ""))
        .unwrap()
        .role
        .unwrap();
    assert_eq!(r.mode, config::RoleMode::Cold);
    let r = d.parse(&d.role("", "")).unwrap().role.unwrap();
    assert_eq!(r.mode, config::RoleMode::Cold, "cold is the default");
}

#[test]
fn rejects_unknown_role_mode() {
    let d = Dir::new();
    let m = d.reject(&d.warm("mode = \"hot\"", ""), "role.mode");
    assert!(
        m.contains("`hot` is not a role mode") && m.contains("\"cold\"") && m.contains("\"warm\""),
        "{m}"
    );
}

#[test]
fn rejects_warm_mode_without_gate() {
    let d = Dir::new();
    let m = d.reject(&d.warm("gate = DROP", ""), "role.gate");
    assert!(m.contains("missing") && m.contains("/run/rdmalb/n1"), "{m}");
}

#[test]
fn rejects_gate_in_cold_mode() {
    let d = Dir::new();
    let m = d.reject(&d.role("gate = \"run/gate\"", ""), "role.gate");
    assert!(m.contains("only used with mode = \"warm\""), "{m}");
}

#[test]
fn rejects_gate_path_unsafe_in_the_apps_config() {
    let d = Dir::new();
    let m = d.reject(&d.warm("gate = \"/run/rdmalb/n 1\"", ""), "role.gate");
    assert!(
        m.contains("contains ' '") && m.contains("letters, digits, / . _ -"),
        "{m}"
    );
    let m = d.reject(&d.warm("gate = \"/run/x;y\"", ""), "role.gate");
    assert!(m.contains("contains ';'"), "{m}");
    let m = d.reject(&d.warm("gate = \"\"", ""), "role.gate");
    assert!(m.contains("empty path"), "{m}");
}

#[test]
fn rejects_gate_that_is_a_file() {
    let d = Dir::new();
    let m = d.reject(&d.warm("gate = \"shop.tpl\"", ""), "role.gate");
    assert!(m.contains("is not a directory"), "{m}");
}

#[test]
fn rejects_warm_site_template_without_the_gate() {
    let d = Dir::new();
    let text = d.warm("", "").replace(
        "[role.site.blog]\ntemplate = \"warm.tpl\"",
        "[role.site.blog]\ntemplate = \"plain.tpl\"",
    );
    let m = d.reject(&text, "role.site.blog.template");
    assert!(
        m.contains("plain.tpl") && m.contains("does not use {{gate}}") && m.contains("421"),
        "{m}"
    );
}

#[test]
fn rejects_gate_variable_in_cold_mode() {
    let d = Dir::new();
    std::fs::write(d.dir.path().join("warm.tpl"), WARM_TPL).unwrap();
    let text = d.role(
        "",
        "[role.site.blog]\ntemplate = \"warm.tpl\"\nhosts = [\"blog.example\"]\n",
    );
    let m = d.reject(&text, "role.site.blog.template");
    assert!(
        m.contains("uses {{gate}}") && m.contains("mode = \"warm\""),
        "{m}"
    );
}

#[test]
fn rejects_warm_site_name_unusable_in_a_marker_file_name() {
    let d = Dir::new();
    let text = d.warm("", "").replace(
        "sites = [\"shop\", \"blog\", \"news\"]",
        "sites = [\"shop\", \"blog\", \"my news\"]",
    ) + "[role.site.\"my news\"]\ntemplate = \"warm.tpl\"\nhosts = [\"news.example\"]\n";
    let m = d.reject(&text, "role.site.my news");
    assert!(
        m.contains("active-my news") && m.contains("letters, digits, . _ -"),
        "{m}"
    );
}

#[test]
fn rejects_warm_mode_without_sites() {
    let d = Dir::new();
    let text = format!(
        "site = \"idle\"\n{HEAD}[role]\nmode = \"warm\"\ngate = \"run/gate\"\nfile = \"conf/sites.conf\"\nreload = [\"nginx\", \"-s\", \"reload\"]\nverify = \"127.0.0.1:8081\"\n"
    );
    let m = d.reject(&text, "role.site");
    assert!(m.contains("at least one [role.site.<name>]"), "{m}");
}
