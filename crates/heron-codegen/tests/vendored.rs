//! Runs the whole generator over the vendored schemas of every protocol version.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use heron_codegen::{
    Inputs, Output, Version, generate, generate_all, merge, methods, normalize, read_inputs,
};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn vendored(version: &Version) -> Inputs {
    read_inputs(&repo_root(), version).unwrap_or_else(|e| panic!("reads the {} schemas: {e}", version.name))
}

fn generated(version: &Version) -> Output {
    generate(&vendored(version), version).unwrap_or_else(|e| panic!("generates {}: {e}", version.name))
}

fn vendored_table(version: &Version) -> Vec<methods::MethodSpec> {
    let inputs = vendored(version);
    let merged = merge::merge(&inputs).expect("merges");
    methods::method_table(&inputs, &merged).expect("builds the table")
}

/// Every `x-method` in a document's `$defs` (none when it has no `$defs`).
fn x_methods(doc: &Value) -> BTreeSet<String> {
    doc.get("$defs")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|defs| defs.values())
        .filter_map(|def| def.get("x-method").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Whether `text` has `Variant` followed by a digit: typify's name for an untitled variant.
fn has_numbered_variant(text: &str) -> bool {
    text.match_indices("Variant").any(|(i, m)| text[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

#[test]
fn numbered_variant_detector_finds_typify_names() {
    assert!(has_numbered_variant("enum X { Variant0(u8) }"));
    assert!(!has_numbered_variant("enum X { TaggedVariant(u8) }"));
}

#[test]
fn every_version_generates_into_its_own_files() {
    let files = generate_all(&repo_root()).expect("generates every version");
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["acp.rs", "schema.json", "v2/acp.rs", "v2/schema.json", "METHODS.md"]);
    let text = |name: &str| files.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()).unwrap_or("");
    assert!(text("acp.rs").contains("for crate::runtime::ClientPeer<O>"));
    assert!(text("v2/acp.rs").contains("for crate::v2::ClientPeer<O>"));
    assert!(text("schema.json").contains(r#""$id": "heron:acp/v1""#));
    assert!(text("v2/schema.json").contains(r#""$id": "heron:acp/v2""#));
    assert!(text("METHODS.md").starts_with("# ACP methods\n"));
    assert_eq!(text("METHODS.md").matches("\n## ACP v2\n").count(), 1);
}

#[test]
fn vendored_schemas_generate_rust_without_typify_fallback_names() {
    for version in &Version::ALL {
        let output = generated(version);
        assert!(
            !has_numbered_variant(&output.rust),
            "{}: typify named a variant by its position",
            version.name
        );
        assert!(!output.rust.contains("subtype_"), "{}: typify named a type `subtype_*`", version.name);
        assert!(!output.rust.contains("::chrono::"), "{}: a string became a chrono type", version.name);
    }
}

#[test]
fn methods_md_has_one_row_per_method() {
    for version in &Version::ALL {
        let output = generated(version);
        // The method table is the version's first; the extensions' table follows it.
        let rows: Vec<&str> = output
            .methods_md
            .lines()
            .skip_while(|l| !l.starts_with("| Method |"))
            .take_while(|l| l.starts_with('|'))
            .filter(|l| l.starts_with("| `"))
            .collect();
        let table = vendored_table(version);
        assert_eq!(rows.len(), table.len(), "{}", version.name);
        for (row, method) in rows.iter().zip(&table) {
            assert!(row.starts_with(&format!("| `{}` |", method.wire)), "{row} is not {}", method.wire);
        }
    }
}

#[test]
fn every_stable_and_vendor_method_is_in_the_table() {
    for version in &Version::ALL {
        let inputs = vendored(version);
        let wires: BTreeSet<String> = vendored_table(version).into_iter().map(|m| m.wire).collect();
        let expected: BTreeSet<String> =
            x_methods(&inputs.stable).into_iter().chain(x_methods(&inputs.vendor)).collect();
        let missing: Vec<&String> = expected.difference(&wires).collect();
        assert!(missing.is_empty(), "{}: missing from the table: {missing:?}", version.name);
    }
}

#[test]
fn unstable_methods_are_in_the_table_only_when_selected() {
    for version in &Version::ALL {
        let inputs = vendored(version);
        let wires: BTreeSet<String> = vendored_table(version).into_iter().map(|m| m.wire).collect();
        let selected = merge::merge(&inputs).expect("merges").unstable_methods;
        let known: BTreeSet<String> =
            x_methods(&inputs.stable).into_iter().chain(x_methods(&inputs.vendor)).collect();
        for wire in x_methods(&inputs.unstable).difference(&known) {
            assert_eq!(wires.contains(wire), selected.contains(wire), "`{wire}`: in table vs selected");
        }
    }
    let v1 = merge::merge(&vendored(&Version::V1)).expect("merges").unstable_methods;
    assert!(!v1.is_empty(), "the v1 vendor schema selects at least one unstable method");
}

#[test]
fn v2_table_has_the_v2_methods_and_nothing_of_heron_s_vendor_extension() {
    let table = vendored_table(&Version::V2);
    assert_eq!(table.len(), 18);
    assert!(table.iter().all(|m| !m.wire.starts_with("_heron/")), "v2 advertises no vendor method");
    assert!(table.iter().all(|m| m.aliases.is_empty()), "v2 has no legacy aliases");
}

/// Every schema keyword rule 2 should have removed, with its path, skipping property names
/// and `const`/`enum`/`examples` values.
fn leftover_annotations(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(map) = schema else { return };
    for (key, child) in map {
        let here = format!("{path}/{key}");
        if key.starts_with("x-") || key == "discriminator" || key == "default" {
            out.push(here.clone());
        }
        match (key.as_str(), child) {
            ("const" | "enum" | "examples", _) => {}
            ("properties", Value::Object(props)) => {
                for (name, prop) in props {
                    leftover_annotations(prop, &format!("{here}/{name}"), out);
                }
            }
            (_, Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    leftover_annotations(item, &format!("{here}/{i}"), out);
                }
            }
            (_, child) => leftover_annotations(child, &here, out),
        }
    }
}

#[test]
fn normalized_vendored_definitions_carry_no_annotations() {
    for version in &Version::ALL {
        let merged = merge::merge(&vendored(version)).expect("merges");
        let normalized = normalize::normalize(&merged.defs).expect("normalizes");
        let mut leftovers = Vec::new();
        for (name, def) in &normalized.defs {
            leftover_annotations(def, name, &mut leftovers);
        }
        assert!(leftovers.is_empty(), "{}: annotations left: {leftovers:?}", version.name);
    }
}
