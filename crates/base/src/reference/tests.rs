use serde_json::json;

use super::*;

/// A schema as schemars writes one: a root with `$defs`, an `Option` of a
/// struct, an array of tables, a map of tables, field docs with the
/// conventions paragraph.
fn schema() -> Value {
    json!({
        "description": "The file.",
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
            "name": { "type": "string", "description": "The name.\n\nExample: `\"n1\"`." },
            "global": { "anyOf": [{ "$ref": "#/$defs/Global" }, { "type": "null" }],
                        "description": "Process-wide." },
            "site": { "type": "array", "items": { "$ref": "#/$defs/Site" } },
            "role": { "type": ["object", "null"],
                      "additionalProperties": { "$ref": "#/$defs/Role" } }
        },
        "$defs": {
            "Global": { "type": "object", "properties": {
                "retries": { "type": ["integer", "null"],
                             "description": "How many times.\n\nDefault: `3`. Example: `5`." },
                "when": { "type": ["string", "null"],
                          "description": "When.\n\nDefault: by transport." }
            } },
            "Site": { "type": "object", "properties": {
                "hosts": { "type": "array", "items": { "type": "string" } },
                "candidates": { "anyOf": [{ "type": "integer" }, { "type": "string" }, { "type": "null" }] }
            } },
            "Role": { "type": "object", "properties": {
                "health_path": { "type": ["string", "null"], "description": "Probe.\n\nDefault: `\"/\"`." }
            } }
        }
    })
}

#[test]
fn sections_keys_types_and_conventions_come_from_the_schema() {
    let r = build(&schema());
    assert_eq!(r.doc, "The file.");
    let paths: Vec<(&str, bool)> = r
        .sections
        .iter()
        .map(|s| (s.path.as_str(), s.array))
        .collect();
    // serde_json keeps object keys sorted: tables come in name order.
    assert_eq!(
        paths,
        [
            ("", false),
            ("global", false),
            ("role.<name>", false),
            ("site", true)
        ]
    );
    let key = |p: &str| r.keys().find(|k| k.path == p).unwrap().clone();
    let retries = key("global.retries");
    assert_eq!(
        (retries.ty.as_str(), retries.doc.as_str()),
        ("integer", "How many times.")
    );
    assert_eq!(retries.literal_default(), Some("3"));
    assert_eq!(retries.example.as_deref(), Some("5"));
    // Words are a default, not a literal.
    assert_eq!(key("global.when").default.as_deref(), Some("by transport"));
    assert_eq!(key("global.when").literal_default(), None);
    // A required field without a Default says so.
    assert_eq!(key("name").default.as_deref(), Some("required"));
    assert_eq!(key("site.hosts").ty, "array of strings");
    assert_eq!(key("site.candidates").ty, "integer or string");
    assert_eq!(
        key("role.<name>.health_path").literal_default(),
        Some("\"/\"")
    );
    let md = r.markdown("the file");
    assert!(
        md.contains("| `retries` | integer | `3` | How many times. |"),
        "{md}"
    );
    assert!(
        md.contains("[[site]]") && md.contains("[role.shop]\nhealth_path = \"/\""),
        "{md}"
    );
}

#[test]
fn unknown_keys_are_named_with_their_path() {
    let s = schema();
    let r = build(&s);
    let text = "name = \"n1\"\nnmae = 1\n[global]\nretries = 2\nretry = 3\n\
                [[site]]\nhosts = []\n[[site]]\nhost = []\n[role.shop]\nhealth_path = \"/\"\nhealth = 1\n";
    assert_eq!(
        r.unknown_keys(&s, text).unwrap(),
        ["global.retry", "nmae", "role.shop.health", "site[1].host"]
    );
    assert_eq!(
        r.unknown_keys(&s, "name = \"n1\"\n").unwrap(),
        Vec::<String>::new()
    );
    assert!(r
        .unknown_keys(&s, "name = ")
        .unwrap_err()
        .contains("TOML syntax error"));
}

#[test]
fn with_key_writes_where_the_key_is_absent() {
    let base: toml::Table = "[[site]]\nname = \"a\"\nhash = {}\n[[site]]\nweight = 2\n\
                             [role.x]\nhealth_path = \"/h\"\n[role.y]\n"
        .parse()
        .unwrap();
    let v = toml::Value::Integer(7);
    let t = with_key(&base, "site.hash.len", v.clone()).unwrap();
    assert_eq!(t["site"][0]["hash"]["len"].as_integer(), Some(7));
    // The first site names itself: the second one gets it.
    let t = with_key(&base, "site.name", v.clone()).unwrap();
    assert_eq!(t["site"][1]["name"].as_integer(), Some(7));
    let t = with_key(&base, "role.<name>.health_path", v.clone()).unwrap();
    assert_eq!(t["role"]["y"]["health_path"].as_integer(), Some(7));
    assert!(with_key(&base, "global.retries", v).is_none());
}
