//! `show stat`'s arguments as HAProxy 2.6 reads them: `[{<iid>|<proxy>}
//! <type> <sid>]` (all three or none; `-1` means any; `<type>` is a mask:
//! 1 frontends, 2 backends, 4 servers) followed by any of `typed`, `json`,
//! `desc`, `up` (only servers that are up), `no-maint` (no server in
//! maintenance); other words are ignored, as HAProxy does.

use super::{Kind, Row, Value};

/// How the rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Typed,
    Json,
}

/// Which rows `show stat` prints, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// A proxy id, or a proxy (listener or site) name; `None`: all.
    proxy: Option<String>,
    types: i64,
    sid: i64,
    pub format: Format,
    up: bool,
    no_maint: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            proxy: None,
            types: -1,
            sid: -1,
            format: Format::Csv,
            up: false,
            no_maint: false,
        }
    }
}

/// HAProxy's `atoi`: the leading integer of `s`, 0 when there is none.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, digits) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    sign * digits[..end].parse::<i64>().unwrap_or(0)
}

impl Filter {
    /// Reads the words after `show stat`. `Err` holds HAProxy's answer to
    /// a proxy that does not exist (`names` lists the proxies).
    pub fn parse(args: &[&str], names: &[&str]) -> Result<Filter, &'static str> {
        let mut f = Filter::default();
        let mut rest = args;
        if let [proxy, types, sid, tail @ ..] = args {
            let known = names.contains(proxy);
            if !known && atoi(proxy) == 0 {
                return Err("No such proxy.");
            }
            f.proxy = (known || atoi(proxy) != -1).then(|| proxy.to_string());
            f.types = atoi(types);
            f.sid = atoi(sid);
            rest = tail;
        }
        for word in rest {
            match *word {
                "typed" => f.format = Format::Typed,
                "json" => f.format = Format::Json,
                "up" => f.up = true,
                "no-maint" => f.no_maint = true,
                _ => {}
            }
        }
        Ok(f)
    }

    /// Whether `row` is printed.
    pub fn keeps(&self, row: &Row) -> bool {
        if let Some(p) = &self.proxy {
            let name = matches!(row.get("pxname"), Some(Value::Text(t)) if t == p);
            if !name && row.number("iid").map(|i| i as i64) != Some(atoi(p)) {
                return false;
            }
        }
        if self.types & row.kind.bit() == 0 {
            return false;
        }
        if row.kind != Kind::Server {
            return true;
        }
        if self.sid != -1 && row.number("sid").map(|s| s as i64) != Some(self.sid) {
            return false;
        }
        let status = match row.get("status") {
            Some(Value::Text(t)) => t.as_str(),
            _ => "",
        };
        !(self.up && !status.starts_with("UP") && status != "no check"
            || self.no_maint && status.starts_with("MAINT"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_haproxy_arguments() {
        let names = ["web", "www"];
        assert_eq!(Filter::parse(&[], &names).unwrap(), Filter::default());
        assert_eq!(
            Filter::parse(&["-1", "-1", "-1"], &names).unwrap(),
            Filter::default()
        );
        let f = Filter::parse(&["www", "4", "-1", "typed"], &names).unwrap();
        assert_eq!(f.proxy.as_deref(), Some("www"));
        assert_eq!((f.types, f.sid, f.format), (4, -1, Format::Typed));
        assert_eq!(
            Filter::parse(&["zz", "4", "-1"], &names),
            Err("No such proxy.")
        );
        // Words HAProxy does not know are ignored.
        assert_eq!(Filter::parse(&["zz"], &names).unwrap(), Filter::default());
    }

    #[test]
    fn keeps_the_rows_asked_for() {
        let mut server = Row::of(Kind::Server);
        server
            .text("pxname", "www")
            .num("iid", 2)
            .num("sid", 3)
            .text("status", "MAINT");
        let mut frontend = Row::of(Kind::Frontend);
        frontend.text("pxname", "web").num("iid", 1);
        let only = |args: &[&str]| Filter::parse(args, &["web", "www"]).unwrap();
        assert!(only(&[]).keeps(&server) && only(&[]).keeps(&frontend));
        assert!(!only(&["-1", "2", "-1"]).keeps(&server));
        assert!(only(&["2", "4", "3"]).keeps(&server));
        assert!(!only(&["2", "4", "4"]).keeps(&server));
        assert!(!only(&["web", "-1", "-1"]).keeps(&server));
        assert!(only(&["web", "-1", "-1"]).keeps(&frontend));
        assert!(!only(&["no-maint"]).keeps(&server));
        assert!(!only(&["up"]).keeps(&server));
    }
}
