//! CPU time of a process from `/proc/<pid>/stat`: the testbed's process
//! table and the proxy's compression cap read it the same way.

/// Clock ticks per second of `/proc/<pid>/stat`'s times (the kernel's
/// `USER_HZ`, 100 on every architecture Linux exposes to user space).
const USER_HZ: f64 = 100.0;

/// utime + stime of a `/proc/<pid>/stat` line, in seconds; `None` when the
/// line does not parse. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
pub fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// The calling process's CPU time so far, in seconds.
pub fn own_cpu_seconds() -> Option<f64> {
    cpu_seconds(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_counts_fields_after_the_command_name() {
        // A command name with a space and parentheses, utime 250, stime 50.
        let line =
            "4242 (rdmalb (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(cpu_seconds(line), Some(3.0));
        assert_eq!(cpu_seconds("4242 (short"), None);
        assert_eq!(cpu_seconds("4242 (a) S 1 2 3 4 5 6 7 8 9 10 x 50"), None);
    }

    #[test]
    fn own_cpu_time_is_read() {
        assert!(own_cpu_seconds().is_some_and(|s| s >= 0.0));
    }
}
