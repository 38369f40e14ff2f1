use super::*;

#[test]
fn wildcard_patterns_render_with_star() {
    assert_eq!(
        pattern_text(&HostPattern::Wildcard(".example.com".into())),
        "*.example.com"
    );
    assert_eq!(
        pattern_text(&HostPattern::Exact("a.example.com".into())),
        "a.example.com"
    );
}
