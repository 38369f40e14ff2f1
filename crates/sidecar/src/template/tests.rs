use super::*;

fn vars(kv: &[(&str, &str)]) -> Vars {
    let mut v = Vars::default();
    for (k, val) in kv {
        v.set(k, *val);
    }
    v
}

#[test]
fn substitutes_variables_and_keeps_single_braces() {
    let t = Template::parse(
        "server {\n    server_name {{hosts}};\n    add_header X-Site {{ site }};\n}\n",
    )
    .unwrap();
    let out = t
        .render(&vars(&[("hosts", "a.example b.example"), ("site", "shop")]))
        .unwrap();
    assert_eq!(
        out,
        "server {\n    server_name a.example b.example;\n    add_header X-Site shop;\n}\n"
    );
    assert_eq!(t.variables(), vec![("hosts", 2), ("site", 3)]);
}

#[test]
fn repeated_and_adjacent_variables() {
    let t = Template::parse("{{a}}{{b}}-{{a}}").unwrap();
    assert_eq!(t.render(&vars(&[("a", "1"), ("b", "2")])).unwrap(), "12-1");
    assert_eq!(t.variables(), vec![("a", 1), ("b", 1)]);
}

#[test]
fn escaped_braces_are_literal() {
    let t = Template::parse("x \\{{site}} y {{site}}").unwrap();
    assert_eq!(t.render(&vars(&[("site", "s")])).unwrap(), "x {{site}} y s");
    assert!(t.variables().iter().all(|(_, l)| *l == 1));
}

#[test]
fn closing_braces_alone_are_text() {
    let t = Template::parse("location / { if ($x) { return 200; }}\n").unwrap();
    assert_eq!(
        t.render(&Vars::default()).unwrap(),
        "location / { if ($x) { return 200; }}\n"
    );
}

#[test]
fn unknown_variable_is_an_error_not_an_empty_string() {
    let t = Template::parse("a\nb {{nope}}\n").unwrap();
    let e = t.render(&vars(&[("site", "s")])).unwrap_err();
    assert_eq!(
        e,
        TemplateError::Unknown {
            line: 2,
            name: "nope".into(),
            known: "site".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "line 2: unknown variable `nope` (known here: site)"
    );
    assert!(t.check(&["site"]).is_err());
    assert!(t.check(&["site", "nope"]).is_ok());
}

#[test]
fn unterminated_tag_is_reported_with_its_line() {
    assert_eq!(
        Template::parse("ok\nok\n{{site\n}}"),
        Err(TemplateError::Unterminated { line: 3 })
    );
    assert!(Template::parse("{{ site }")
        .unwrap_err()
        .to_string()
        .contains("line 1"));
}

#[test]
fn bad_names_are_rejected() {
    for bad in ["{{}}", "{{ 1x }}", "{{a-b}}", "{{ a b }}", "{{$x}}"] {
        assert!(
            matches!(Template::parse(bad), Err(TemplateError::BadName { .. })),
            "{bad}"
        );
    }
}

proptest::proptest! {
    /// Any input parses or fails with an error, never panics; text
    /// without `{{` renders to itself; every variable used is reported
    /// and renders to its value.
    #[test]
    fn parsing_arbitrary_text_never_panics(text in "\\PC*") {
        if let Ok(t) = Template::parse(&text) {
            let mut v = Vars::default();
            for (name, _) in t.variables() {
                v.set(name, "X");
            }
            let out = t.render(&v).unwrap();
            if !text.contains("{{") {
                proptest::prop_assert_eq!(out, text);
            }
        }
    }

    #[test]
    fn tags_render_between_arbitrary_text(a in "[^{\\\\]*", b in "[^{\\\\]*", name in "[a-z_][a-z0-9_]{0,8}") {
        let t = Template::parse(&format!("{a}{{{{{name}}}}}{b}")).unwrap();
        let mut v = Vars::default();
        v.set(&name, "VALUE");
        proptest::prop_assert_eq!(t.render(&v).unwrap(), format!("{a}VALUE{b}"));
    }
}

#[test]
fn text_without_tags_is_copied_exactly() {
    let text = "pid /run/x.pid;\n\u{e9}t\u{e9} {} \\ }}\n";
    let t = Template::parse(text).unwrap();
    assert_eq!(t.render(&Vars::default()).unwrap(), text);
    assert_eq!(
        Template::parse("")
            .unwrap()
            .render(&Vars::default())
            .unwrap(),
        ""
    );
}
