//! Heron's ACP registry entry: `docs/registry/agent.json` is what `heron manifest` writes
//! for this build, and it validates against the vendored registry schema
//! (`schema/registry/agent.schema.json`, formats checked too), which is the file its
//! `SOURCE` records.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::heron_bin;

fn repo_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn committed_entry() -> Value {
    serde_json::from_str(&repo_file("docs/registry/agent.json")).expect("agent.json is JSON")
}

#[test]
fn the_committed_entry_is_what_heron_manifest_writes() {
    let output = Command::new(heron_bin()).arg("manifest").output().expect("heron runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let generated = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(
        generated,
        repo_file("docs/registry/agent.json"),
        "docs/registry/agent.json is stale: run `cargo run -q -- manifest > docs/registry/agent.json`"
    );
}

#[test]
fn the_entry_validates_against_the_registry_schema() {
    let schema: Value =
        serde_json::from_str(&repo_file("schema/registry/agent.schema.json")).expect("the schema is JSON");
    let validator =
        jsonschema::options().should_validate_formats(true).build(&schema).expect("a valid schema");
    let entry = committed_entry();
    let errors: Vec<String> =
        validator.iter_errors(&entry).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "agent.json breaks the registry schema:\n{}", errors.join("\n"));
}

#[test]
fn the_schema_check_refuses_an_entry_without_a_distribution() {
    let schema: Value =
        serde_json::from_str(&repo_file("schema/registry/agent.schema.json")).expect("the schema is JSON");
    let validator =
        jsonschema::options().should_validate_formats(true).build(&schema).expect("a valid schema");
    let mut entry = committed_entry();
    entry.as_object_mut().expect("an object").remove("distribution");
    assert!(!validator.is_valid(&entry));
}

#[test]
fn every_platform_starts_heron_acp_at_this_version() {
    let entry = committed_entry();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(entry["version"], version);
    let binary = entry["distribution"]["binary"].as_object().expect("a binary distribution");
    assert!(!binary.is_empty());
    for (platform, target) in binary {
        assert_eq!(target["cmd"], "./heron", "{platform}");
        assert_eq!(target["args"], serde_json::json!(["acp"]), "{platform}");
        let archive = target["archive"].as_str().expect("an archive URL");
        assert!(archive.contains(&format!("/v{version}/")), "{platform}: {archive} names another version");
        assert!(!archive.contains("/latest/"), "{platform}: the registry refuses `latest`");
    }
}

#[test]
fn the_entry_names_the_repository_and_website_cargo_toml_gives() {
    let entry = committed_entry();
    assert_eq!(entry["repository"], env!("CARGO_PKG_REPOSITORY"));
    assert_eq!(entry["website"], env!("CARGO_PKG_HOMEPAGE"));
    assert!(entry["repository"].as_str().is_some_and(|url| url.starts_with("https://")), "{entry}");
}

/// `key = "value"` of a SOURCE file.
fn recorded(source: &str, key: &str) -> String {
    source
        .lines()
        .find_map(|line| {
            line.strip_prefix(key)?
                .trim_start()
                .strip_prefix('=')?
                .trim()
                .strip_prefix('"')?
                .strip_suffix('"')
        })
        .unwrap_or_else(|| panic!("SOURCE records no {key}"))
        .to_owned()
}

fn sha256_of(path: &str) -> String {
    use sha2::Digest as _;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_vendored_schema_and_license_are_the_files_source_records() {
    let source = repo_file("schema/registry/SOURCE");
    assert_eq!(sha256_of("schema/registry/agent.schema.json"), recorded(&source, "schema_sha256"));
    assert_eq!(sha256_of("schema/registry/LICENSE"), recorded(&source, "license_sha256"));
    for key in ["commit", "license_commit"] {
        let commit = recorded(&source, key);
        assert!(commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{key} = {commit}");
    }
}
