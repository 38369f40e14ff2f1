//! The stats socket (issue 33) against the real HAProxy serving the same
//! farm (two nginx nodes, n1 weight 3, behind frontend `fe` and backend
//! `www`), every answer compared in the same test: the protocol (one
//! command per connection, `;`, `prompt`, the empty line after each
//! answer, long lines), the levels (`Permission denied` to a level-user
//! socket through `socat`), the error texts, and the commands the tools
//! use (`show stat` with its filters and typed form, `show servers state`,
//! `show backend`, `get/set weight`, `disable/enable server`). The tools
//! themselves (socat under wrk, haproxy_exporter, hatop) are in [`tools`].

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::haproxy::Haproxy;
use crate::support::*;

mod tools;

/// Where a stats socket listens.
#[derive(Clone, Debug)]
pub(super) enum Cli {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// Sends `input` and returns everything answered until the socket closes
/// (bounded by the read timeout).
pub(super) fn ask(cli: &Cli, input: &[u8]) -> String {
    fn talk<S: Read + Write>(mut s: S, input: &[u8]) -> String {
        s.write_all(input).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
    let timeout = Some(Duration::from_secs(15));
    for _ in 0..400 {
        match cli {
            Cli::Unix(p) => {
                if let Ok(s) = std::os::unix::net::UnixStream::connect(p) {
                    s.set_read_timeout(timeout).unwrap();
                    return talk(s, input);
                }
            }
            Cli::Tcp(a) => {
                if let Ok(s) = std::net::TcpStream::connect(a) {
                    s.set_read_timeout(timeout).unwrap();
                    return talk(s, input);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("stats socket {cli:?} never opened");
}

/// `echo COMMAND | socat stdio UNIX:PATH`, as deploy scripts drain nodes;
/// `None` (the test skips) without socat.
pub(super) fn socat(test: &str, socket: &Path, command: &str) -> Option<String> {
    if !Path::new("/usr/bin/socat").exists() {
        skip(
            test,
            "/usr/bin/socat is not installed (apt-get install socat)",
        );
        return None;
    }
    let mut child = Command::new("/usr/bin/socat")
        .args(["stdio", &format!("UNIX-CONNECT:{}", socket.display())])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("socat");
    writeln!(child.stdin.take().unwrap(), "{command}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "socat {command}");
    Some(String::from_utf8(out.stdout).unwrap())
}

/// The same farm behind rdmalb and behind HAProxy, each with an admin
/// socket, a level-user socket and an operator TCP socket.
pub(super) struct Farm {
    _nodes: Vec<GroupNginx>,
    _proxy: Proxy,
    _haproxy: Haproxy,
    pub web: SocketAddr,
    pub haproxy_web: SocketAddr,
    /// (rdmalb, HAProxy) sockets: admin, user, operator over TCP.
    pub admin: (Cli, Cli),
    pub user: (Cli, Cli),
    pub tcp: (Cli, Cli),
    _hdir: tempfile::TempDir,
    _ndir: tempfile::TempDir,
}

impl Farm {
    pub fn start(test: &str) -> Option<Farm> {
        if !nginx_available(test) {
            return None;
        }
        let ndir = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        let mut addrs = Vec::new();
        for name in ["n1", "n2"] {
            let d = ndir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            let (n, a) = super::runtime::nginx_node(&d, name)?;
            nodes.push(n);
            addrs.push(a);
        }
        let (a1, a2) = (addrs[0], addrs[1]);
        let pdir = tempfile::tempdir().unwrap();
        let hdir = tempfile::tempdir().unwrap();
        let (web, haproxy_web) = (free_addr(), free_addr());
        let (tcp, haproxy_tcp) = (free_addr(), free_addr());
        let config = format!(
            "[[listener]]\nname = \"fe\"\nlisten = \"{web}\"\n\n\
             [[stats_socket]]\npath = \"{{dir}}/admin.sock\"\nmode = \"600\"\nlevel = \"admin\"\n\n\
             [[stats_socket]]\npath = \"{{dir}}/user.sock\"\nlevel = \"user\"\n\n\
             [[stats_socket]]\nlisten = \"{tcp}\"\n\n\
             [global]\naccess_log = \"off\"\nbalance = \"roundrobin\"\n\n[health]\ninterval = \"100ms\"\n\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n\
             [[node]]\nname = \"n1\"\naddress = \"{a1}\"\nsite = \"www\"\nweight = 3\n\n\
             [[node]]\nname = \"n2\"\naddress = \"{a2}\"\nsite = \"www\"\n"
        );
        let proxy = Proxy::start_in(pdir, &config, &[web, tcp]);
        let h = hdir.path().display();
        let haproxy = Haproxy::start(
            test,
            hdir.path(),
            &format!(
                "global\n    stats socket {h}/admin.sock mode 600 level admin\n    \
                 stats socket {h}/user.sock level user\n    stats socket ipv4@{haproxy_tcp}\n\
                 defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
                 frontend fe\n    bind {haproxy_web}\n    default_backend www\n\
                 backend www\n    balance roundrobin\n    option httpchk GET /\n    server n1 {a1} check inter 100ms weight 3\n    \
                 server n2 {a2} check inter 100ms\n"
            ),
            &[haproxy_web, haproxy_tcp],
        )?;
        let ours = |f: &str| Cli::Unix(proxy.dir.path().join(f));
        let theirs = |f: &str| Cli::Unix(hdir.path().join(f));
        let farm = Farm {
            admin: (ours("admin.sock"), theirs("admin.sock")),
            user: (ours("user.sock"), theirs("user.sock")),
            tcp: (Cli::Tcp(tcp), Cli::Tcp(haproxy_tcp)),
            _nodes: nodes,
            _proxy: proxy,
            _haproxy: haproxy,
            web,
            haproxy_web,
            _hdir: hdir,
            _ndir: ndir,
        };
        // Both see both nodes up before anything is compared.
        for cli in [&farm.admin.0, &farm.admin.1] {
            let mut up = String::new();
            for _ in 0..200 {
                up = ask(cli, b"show stat -1 4 -1\n");
                if up.matches(",UP,").count() == 2 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert_eq!(up.matches(",UP,").count(), 2, "{up}");
            // And both have a first check result for both (HAProxy starts
            // a server UP before its first check has run: its
            // srv_check_result is 0 until then).
            let mut state = String::new();
            for _ in 0..600 {
                state = ask(cli, b"show servers state www\n");
                let checked = state
                    .lines()
                    .skip(2)
                    .filter(|l| !l.is_empty())
                    .filter(|l| l.split(' ').nth(11).is_some_and(|r| r != "0"))
                    .count();
                if checked == 2 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                state
                    .lines()
                    .skip(2)
                    .filter(|l| !l.is_empty())
                    .all(|l| l.split(' ').nth(11) != Some("0")),
                "{state}"
            );
        }
        Some(farm)
    }

    /// The same input to rdmalb's and HAProxy's socket.
    pub fn both(&self, pair: &(Cli, Cli), input: &str) -> (String, String) {
        (
            ask(&pair.0, input.as_bytes()),
            ask(&pair.1, input.as_bytes()),
        )
    }

    /// Asserts both answer `input` with the same bytes.
    pub fn same(&self, pair: &(Cli, Cli), input: &str) -> String {
        let (ours, theirs) = self.both(pair, input);
        assert_eq!(ours, theirs, "answers to {input:?} differ");
        ours
    }
}

/// `(pxname, svname, [columns…])` of each CSV row.
fn csv_rows(csv: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            columns
                .iter()
                .map(|c| f[header.iter().position(|h| h == c).unwrap()].to_string())
                .collect()
        })
        .collect()
}

#[test]
fn the_socket_speaks_haproxys_protocol() {
    let Some(farm) = Farm::start("the_socket_speaks_haproxys_protocol") else {
        return;
    };
    // Levels: each socket's, and lowering it in a session.
    for pair in [&farm.admin, &farm.user, &farm.tcp] {
        farm.same(pair, "show cli level\n");
    }
    farm.same(&farm.admin, "operator\nshow cli level\n");
    // Interactive mode: the prompt after each answer, until quit.
    farm.same(
        &farm.admin,
        "prompt\nshow backend\nuser\noperator\nshow cli level\nquit\nshow backend\n",
    );
    // `;` and pipelined commands, each answer followed by an empty line.
    farm.same(
        &farm.tcp,
        "get weight www/n1;get weight www/n2\nshow backend\n",
    );
    // HAProxy's error texts.
    for command in [
        "get weight www/nope\n",
        "get weight nope/n1\n",
        "set server www/n1 state sleepy\n",
        "set server www/n1 weight 300\n",
        "show servers state nope\n",
        "set server www/n1 addr 127.0.0.1\n",
    ] {
        farm.same(&farm.admin, command);
    }
    // Unknown commands and empty lines: HAProxy's first line and its last
    // three (help, prompt, quit); the matches in between are each one's
    // own commands.
    for input in [
        "frobnicate\n",
        "show stats\n",
        "\n",
        "\x00\x01\u{ff}\n",
        "help\n",
    ] {
        let (ours, theirs) = farm.both(&farm.admin, input);
        let first = |t: &str| t.lines().next().unwrap_or_default().to_string();
        let tail = |t: &str| {
            t.lines()
                .rev()
                .take(3)
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(first(&ours), first(&theirs), "{input:?}");
        assert_eq!(tail(&ours), tail(&theirs), "{input:?}:\n{ours}");
        assert!(ours.ends_with("\n\n") && theirs.ends_with("\n\n"));
    }
    // A line longer than the buffer: closed unanswered by both.
    let long = format!("{}\n", "x".repeat(20_000));
    let (ours, theirs) = farm.both(&farm.admin, &long);
    assert_eq!((ours.as_str(), theirs.as_str()), ("", ""));
    // The process keeps serving.
    farm.same(&farm.admin, "show backend\n");
}

#[test]
fn a_level_user_socket_refuses_disable_server_as_haproxy_does() {
    let test = "a_level_user_socket_refuses_disable_server_as_haproxy_does";
    let Some(farm) = Farm::start(test) else {
        return;
    };
    let (Cli::Unix(ours), Cli::Unix(theirs)) = &farm.user else {
        unreachable!()
    };
    let Some(refused) = socat(test, ours, "disable server www/n1") else {
        return;
    };
    assert_eq!(refused, "Permission denied\n\n");
    assert_eq!(
        socat(test, theirs, "disable server www/n1").unwrap(),
        refused
    );
    // Nothing changed, on either; reads are allowed at that level.
    let (ours, theirs) = farm.both(&farm.user, "show stat -1 4 -1\n");
    assert_eq!(
        csv_rows(&ours, &["svname", "status"]),
        csv_rows(&theirs, &["svname", "status"])
    );
    assert!(ours.contains(",UP,"), "{ours}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_the_tools_use_answer_as_haproxys() {
    let Some(farm) = Farm::start("the_commands_the_tools_use_answer_as_haproxys") else {
        return;
    };
    // The same 8 requests through each: 6 to n1, 2 to n2 (weights 3:1).
    let c = client();
    for web in [farm.web, farm.haproxy_web] {
        for _ in 0..8 {
            let r = c
                .get(format!("http://{web}/"))
                .header("host", "www.example.com")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
        }
    }
    let compared = [
        "pxname",
        "svname",
        "qcur",
        "scur",
        "stot",
        "bout",
        "econ",
        "status",
        "weight",
        "act",
        "bck",
        "type",
        "lbtot",
        "hrsp_2xx",
        "hrsp_5xx",
        "check_rise",
        "check_fall",
        "addr",
        "mode",
        "algo",
        "uweight",
    ];
    let (ours, theirs) = farm.both(&farm.admin, "show stat\n");
    assert_eq!(ours.lines().next(), theirs.lines().next(), "the CSV header");
    // FRONTEND, n1, n2, BACKEND in both, field by field (lbtot and bout
    // count per server, so they match too once each served the same).
    let mut ours_rows = csv_rows(&ours, &compared);
    let mut theirs_rows = csv_rows(&theirs, &compared);
    // Bytes out: each proxy adds its own headers; compare that both count.
    let bout = compared.iter().position(|c| *c == "bout").unwrap();
    for rows in [&mut ours_rows, &mut theirs_rows] {
        for r in rows.iter_mut() {
            r[bout] = (r[bout].parse::<u64>().unwrap_or(0) > 0).to_string();
        }
    }
    // A FRONTEND's scur and stot count connections: as many as the client
    // opened to each, which is its own business; both counted some.
    let (scur, stot) = (3, 4);
    for rows in [&mut ours_rows, &mut theirs_rows] {
        let fe = &mut rows[0];
        assert_eq!(fe[1], "FRONTEND");
        assert!(fe[stot].parse::<u64>().unwrap() > 0, "{fe:?}");
        fe[scur].clear();
        fe[stot].clear();
    }
    assert_eq!(ours_rows, theirs_rows, "show stat:\n{ours}\n{theirs}");
    assert!(ours.ends_with(",\n\n"));
    // How each node's last check ended, in HAProxy's words (HAProxy marks
    // a check running at that moment with "* ").
    let checks = |csv: &str| -> Vec<Vec<String>> {
        let columns = ["svname", "check_status", "check_code", "check_desc"];
        let mut rows = csv_rows(csv, &columns);
        for r in &mut rows {
            r[1] = r[1].trim_start_matches("* ").to_string();
        }
        rows
    };
    assert_eq!(checks(&ours), checks(&theirs), "{ours}\n{theirs}");
    assert!(checks(&ours).contains(
        &["n1", "L7OK", "200", "Layer7 check passed"]
            .map(String::from)
            .to_vec()
    ));
    // Filters: servers only, one backend's BACKEND row, a proxy by name.
    for filter in ["-1 4 -1", "www 2 -1", "fe -1 -1", "-1 -1 -1", "-1 1 -1"] {
        let (o, t) = farm.both(&farm.admin, &format!("show stat {filter}\n"));
        assert_eq!(
            csv_rows(&o, &["pxname", "svname"]),
            csv_rows(&t, &["pxname", "svname"]),
            "{filter}"
        );
    }
    // typed: each shared field with HAProxy's object letter, position,
    // name, tags, type and value (ids are each process's own).
    let (o, t) = farm.both(&farm.admin, "show stat -1 6 -1 typed\n");
    // Each line keyed by its object's names (taken from its pxname and
    // svname lines), letter, position and field name.
    let typed = |text: &str| {
        let (mut px, mut sv) = (String::new(), String::new());
        let mut out = std::collections::HashMap::new();
        for l in text.lines().filter(|l| !l.is_empty()) {
            let (head, rest) = l.split_once(':').unwrap();
            let h: Vec<&str> = head.split('.').collect();
            let value = rest.rsplit(':').next().unwrap().to_string();
            match h[4] {
                "pxname" => px = value,
                "svname" => sv = value,
                _ => {}
            }
            out.insert(
                format!("{px}/{sv} {}.{}.{}", h[0], h[3], h[4]),
                rest.to_string(),
            );
        }
        out
    };
    let theirs_typed = typed(&t);
    let mut shared = 0;
    for (k, v) in typed(&o) {
        let name = k.rsplit('.').next().unwrap();
        if compared.contains(&name) && !["bout", "lbtot", "stot"].contains(&name) {
            assert_eq!(Some(&v), theirs_typed.get(&k), "typed {k}");
            shared += 1;
        }
    }
    assert!(shared > 20, "{o}");
    // show info: HAProxy's order of the fields both have; in typed and
    // json forms the same position, tags and type for each.
    let (o, t) = farm.both(&farm.admin, "show info\n");
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, _)| k.to_string())
            .collect()
    };
    let theirs_names = names(&t);
    let in_both: Vec<String> = names(&o)
        .into_iter()
        .filter(|n| theirs_names.contains(n))
        .collect();
    let theirs_order: Vec<String> = theirs_names
        .iter()
        .filter(|n| in_both.contains(n))
        .cloned()
        .collect();
    assert_eq!(in_both, theirs_order);
    assert!(in_both.len() >= 20, "{in_both:?}");
    for field in ["Nbproc", "Process_num", "Maxpipes", "PipesUsed", "Stopping"] {
        let line = |text: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{field}: ")))
                .map(String::from)
        };
        assert_eq!(line(&o), line(&t));
    }
    let (o, t) = farm.both(&farm.admin, "show info typed\n");
    let typed = |text: &str| -> std::collections::HashMap<String, String> {
        text.lines()
            .filter_map(|l| {
                let (head, rest) = l.split_once(':')?;
                let name = head.split('.').nth(1)?.to_string();
                let pos = head.split('.').next()?;
                let (tags, rest) = rest.split_once(':')?;
                let ty = rest.split(':').next()?;
                Some((name, format!("{pos} {tags} {ty}")))
            })
            .collect()
    };
    let (ot, tt) = (typed(&o), typed(&t));
    for name in &in_both {
        assert_eq!(ot.get(name), tt.get(name), "show info typed {name}");
    }
    let (o, t) = farm.both(&farm.admin, "show info json\n");
    let json = |text: &str| -> std::collections::HashMap<String, serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let mut f = f.clone();
                let name = f["field"]["name"].as_str().unwrap().to_string();
                f["value"]["value"] = serde_json::Value::Null;
                (name, f)
            })
            .collect()
    };
    let (oj, tj) = (json(&o), json(&t));
    for name in &in_both {
        assert_eq!(oj.get(name), tj.get(name), "show info json {name}");
    }
    // show servers state: the header, and the columns rdmalb has.
    // HAProxy resets a server's check result to 0 while a check runs
    // (every 100 ms here, with bit 1 of check_state set): read its
    // state between two checks.
    let o = ask(&farm.admin.0, b"show servers state www\n");
    let t = between_checks(&farm.admin.1);
    let (ol, tl): (Vec<&str>, Vec<&str>) = (o.lines().collect(), t.lines().collect());
    assert_eq!(ol[..2], tl[..2]);
    assert_eq!(ol.len(), tl.len());
    for (a, b) in ol[2..].iter().zip(&tl[2..]).filter(|(a, _)| !a.is_empty()) {
        let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
        assert_eq!(a.len(), b.len());
        // be_name srv_name srv_addr op_state admin_state uweight iweight
        // check_status check_result check_health check_state … srv_port
        for i in [1, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 18] {
            assert_eq!(a[i], b[i], "column {i} of {a:?} / {b:?}");
        }
    }
    // Changes through each, then the same readings.
    for input in [
        // (a share that does not divide: HAProxy rounds down, rdmalb up)
        "set weight www/n1 200%\n",
        "get weight www/n1\n",
        "set server www/n1 weight 3\n",
        "disable server www/n2\n",
        "show servers state www\n",
        "enable server www/n2\n",
        "set server www/n2 state drain\n",
        "set server www/n2 state ready\n",
        "get weight www/n2\n",
    ] {
        let (o, t) = farm.both(&farm.admin, input);
        if input.starts_with("show servers") {
            let cols = |s: &str| {
                s.lines()
                    .nth(3)
                    .unwrap()
                    .split(' ')
                    .nth(6)
                    .unwrap()
                    .to_string()
            };
            assert_eq!(cols(&o), cols(&t), "admin state of n2 in maintenance");
        } else {
            assert_eq!(o, t, "{input}");
        }
    }
}

/// `show servers state www` at a moment when no check of HAProxy's is
/// in progress (its `srv_check_state`, column 13, has bit 1 clear).
fn between_checks(cli: &Cli) -> String {
    let mut state = String::new();
    for _ in 0..200 {
        state = ask(cli, b"show servers state www\n");
        let in_progress = state.lines().skip(2).filter(|l| !l.is_empty()).any(|l| {
            l.split(' ')
                .nth(13)
                .and_then(|s| s.parse::<u32>().ok())
                .is_some_and(|s| s & 1 == 1)
        });
        if !in_progress {
            return state;
        }
        std::thread::sleep(Duration::from_millis(7));
    }
    panic!("a check always in progress: {state}")
}

/// The `Pid:` of a `show info`.
fn pid_of(cli: &Cli) -> u32 {
    let info = ask(cli, b"show info\n");
    let pid = info.lines().find_map(|l| l.strip_prefix("Pid: "));
    pid.unwrap_or_else(|| panic!("no Pid in {info}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sockets_pass_to_the_process_a_restart_starts() {
    let backend = Backend::start("app").await;
    let (web, tcp) = (free_addr(), free_addr());
    let mut proxy = Proxy::start(
        &www_config(
            &format!(
                "[[listener]]\nlisten = \"{web}\"\n\n[[stats_socket]]\npath = \"{{dir}}/admin.sock\"\n\n\
                 [[stats_socket]]\nlisten = \"{tcp}\"\n\n"
            ),
            "",
            backend.addr,
        ),
        &[web, tcp],
    );
    let (unix, tcp) = (
        Cli::Unix(proxy.dir.path().join("admin.sock")),
        Cli::Tcp(tcp),
    );
    let old = proxy.pid();
    assert_eq!((pid_of(&unix), pid_of(&tcp)), (old, old));
    signal(old, super::restart::SIGUSR2);
    assert!(
        proxy.wait_for_text(&proxy.stderr, "the new process serves"),
        "{}",
        proxy.stderr_text()
    );
    let status = proxy.wait_exit();
    assert!(
        status.is_some_and(|s| s.success()),
        "{}",
        proxy.stderr_text()
    );
    let new = pid_of(&tcp);
    let _successor = super::restart::Successor(new);
    assert_ne!(new, old);
    // The old process left the new one's socket file in place.
    assert_eq!(pid_of(&unix), new);
}
