//! The committed copy under `generated/` must match what `build.rs` produces, for every
//! protocol version (v1 in `generated/`, v2 in `generated/v2/`).

use heron_protocol::{GENERATED_METHODS_MD, GENERATED_RUST, SCHEMA_JSON, v2};

fn committed(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../generated").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn assert_in_sync(name: &str, built: &str) {
    assert!(
        committed(name) == built,
        "generated/{name} is out of date; run `cargo run -p heron-codegen -- refresh` and review the diff"
    );
}

#[test]
fn committed_rust_matches_the_build() {
    assert_in_sync("acp.rs", GENERATED_RUST);
}

#[test]
fn committed_method_table_matches_the_build() {
    assert_in_sync("METHODS.md", GENERATED_METHODS_MD);
}

#[test]
fn committed_schema_matches_the_build() {
    assert_in_sync("schema.json", SCHEMA_JSON);
}

#[test]
fn committed_v2_rust_matches_the_build() {
    assert_in_sync("v2/acp.rs", v2::GENERATED_RUST);
}

#[test]
fn committed_v2_schema_matches_the_build() {
    assert_in_sync("v2/schema.json", v2::SCHEMA_JSON);
}

#[test]
fn generated_code_has_no_positional_names() {
    for name in ["acp.rs", "v2/acp.rs"] {
        for (line_no, line) in committed(name).lines().enumerate() {
            let positional = line.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').any(|word| {
                word.strip_prefix("Variant")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    || word.starts_with("subtype_")
            });
            assert!(!positional, "positional name at generated/{name}:{}: {line}", line_no + 1);
        }
    }
}
