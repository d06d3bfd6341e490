//! The classification of every update, content block and capability (`x-variants`): what
//! it covers, and the build failing when the schema and it disagree.

use std::collections::BTreeMap;
use std::path::Path;

use heron_codegen::variants::{rows, schema_variants};
use heron_codegen::{Version, generate, read_inputs};
use serde_json::{Value, json};

fn v1() -> heron_codegen::Inputs {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let version = Version::ALL.iter().find(|v| v.name == "v1").expect("v1");
    read_inputs(&root, version).expect("reads the v1 schemas")
}

fn v1_version() -> &'static Version {
    Version::ALL.iter().find(|v| v.name == "v1").expect("v1")
}

/// A small schema: a two-variant update union and a capability set with a nested object.
fn defs() -> BTreeMap<String, Value> {
    let mut defs = BTreeMap::new();
    let arm = |tag: &str, value: &str| json!({ "properties": { tag: { "const": value } } });
    defs.insert(
        "SessionUpdate".into(),
        json!({ "oneOf": [arm("sessionUpdate", "a"), arm("sessionUpdate", "b")] }),
    );
    defs.insert("ContentBlock".into(), json!({ "oneOf": [arm("type", "text")] }));
    defs.insert(
        "ClientCapabilities".into(),
        json!({ "properties": {
            "fs": { "allOf": [{ "$ref": "#/$defs/Fs" }] },
            "marker": { "anyOf": [{ "$ref": "#/$defs/Marker" }, { "type": "null" }] },
            "_meta": { "type": "object" }
        } }),
    );
    defs.insert("Fs".into(), json!({ "properties": { "read": { "type": "boolean" }, "_meta": {} } }));
    defs.insert("Marker".into(), json!({ "properties": { "_meta": {} } }));
    defs.insert("AgentCapabilities".into(), json!({ "properties": { "load": { "type": "boolean" } } }));
    defs
}

#[test]
fn nested_capability_objects_are_walked_and_markers_are_paths() {
    let found = schema_variants(&defs()).expect("walks");
    let paths: Vec<String> = found.iter().map(|(group, variant)| format!("{group}:{variant}")).collect();
    assert_eq!(
        paths,
        [
            "SessionUpdate:a",
            "SessionUpdate:b",
            "ContentBlock:text",
            "ClientCapabilities:fs.read",
            "ClientCapabilities:marker",
            "AgentCapabilities:load"
        ]
    );
}

fn vendor(update_b: Option<Value>) -> Value {
    let mut updates = json!({ "a": ["sends", "why a"] });
    if let Some(b) = update_b {
        updates["b"] = b;
    }
    json!({ "x-variants": {
        "SessionUpdate": updates,
        "ContentBlock": { "text": ["accepts", "why"] },
        "ClientCapabilities": { "fs.read": ["uses", "why"], "marker": ["declined", "why"] },
        "AgentCapabilities": { "load": ["advertises", "why"] }
    } })
}

#[test]
fn a_variant_the_classification_lacks_fails_generation_naming_it() {
    let err = rows(&vendor(None), &defs()).expect_err("b is not classified");
    assert!(err.to_string().contains("`SessionUpdate` has `b`"), "{err}");
}

#[test]
fn a_classification_of_nothing_or_in_other_words_fails() {
    let mut stale = vendor(Some(json!(["sends", "why b"])));
    stale["x-variants"]["SessionUpdate"]["gone"] = json!(["sends", "why"]);
    let err = rows(&stale, &defs()).expect_err("gone is not in the schema");
    assert!(err.to_string().contains("names `gone`"), "{err}");
    let err =
        rows(&vendor(Some(json!(["maybe", "why b"]))), &defs()).expect_err("not a word of the vocabulary");
    assert!(err.to_string().contains("x-variants.SessionUpdate.b"), "{err}");
    let classified =
        rows(&vendor(Some(json!(["declined", "why b"]))), &defs()).expect("classified").expect("rows");
    assert_eq!(classified.len(), 6);
}

#[test]
fn the_vendored_v1_schema_is_classified_whole_and_the_table_lists_every_row() {
    let output = generate(&v1(), v1_version()).expect("generates v1");
    for union in ["SessionUpdate", "ContentBlock"] {
        assert!(output.rust.contains(&format!("pub enum {union}Kind")), "{union}Kind");
        assert_eq!(output.methods_md.matches(&format!("| `{union}` | Heron | Why |")).count(), 1);
    }
    assert!(output.methods_md.contains("| `notice` | sends when advertised |"), "{}", output.methods_md);
    assert!(output.methods_md.contains("| `audio` | declined |"));
}

#[test]
fn a_new_update_in_the_schema_stops_generation_until_it_is_classified() {
    let mut inputs = v1();
    let arms = inputs.stable["$defs"]["SessionUpdate"]["oneOf"].as_array_mut().expect("SessionUpdate arms");
    let mut arm = arms[0].clone();
    arm["properties"]["sessionUpdate"]["const"] = json!("future_update");
    arms.push(arm);
    let err = generate(&inputs, v1_version()).expect_err("future_update is not classified");
    assert!(err.to_string().contains("`future_update`"), "{err}");
}
