//! The committed copy under `generated/` must match what `build.rs` produces.

use heron_protocol::{GENERATED_METHODS_MD, GENERATED_RUST, SCHEMA_JSON};

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
fn generated_code_has_no_positional_names() {
    for (line_no, line) in committed("acp.rs").lines().enumerate() {
        let positional = line.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').any(|word| {
            word.strip_prefix("Variant")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                || word.starts_with("subtype_")
        });
        assert!(!positional, "positional name at generated/acp.rs:{}: {line}", line_no + 1);
    }
}
