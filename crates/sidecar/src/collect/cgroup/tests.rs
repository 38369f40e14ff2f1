use super::*;

#[test]
fn cpu_stat_usage() {
    let t = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 0\n";
    assert_eq!(parse_cpu_stat_usage(t), Some(123456));
    assert_eq!(parse_cpu_stat_usage("user_usec 1\n"), None);
    assert_eq!(parse_cpu_stat_usage("usage_usec\n"), None);
    assert_eq!(parse_cpu_stat_usage("usage_usec -4\n"), None);
}

#[test]
fn cpu_max_quota() {
    assert_eq!(parse_cpu_max("max 100000\n"), Some(None));
    assert_eq!(parse_cpu_max("50000 100000\n"), Some(Some(0.5)));
    assert_eq!(parse_cpu_max("200000 100000"), Some(Some(2.0)));
    assert_eq!(parse_cpu_max(""), None);
    assert_eq!(parse_cpu_max("lots 100000"), None);
    assert_eq!(parse_cpu_max("100 0"), None);
}

#[test]
fn cpuset_lists() {
    assert_eq!(parse_cpuset("0-3,6,8-9\n"), Some(7));
    assert_eq!(parse_cpuset("0"), Some(1));
    assert_eq!(parse_cpuset(""), None);
    assert_eq!(parse_cpuset("3-1"), None);
    assert_eq!(parse_cpuset("0-4294967295"), None);
    assert_eq!(parse_cpuset("a-b"), None);
}

#[test]
fn memory_max() {
    assert_eq!(parse_memory_max("max\n"), Some(None));
    assert_eq!(parse_memory_max("1048576\n"), Some(Some(1 << 20)));
    assert_eq!(parse_memory_max("lots"), None);
}
