//! The layers of `docs/architecture.md`, as Cargo sees them: each workspace crate depends
//! only on the crates below it, and the agent core knows no protocol crate.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Each workspace crate and the workspace crates it depends on (normal and build).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<String> =
        packages.iter().filter_map(|p| p["name"].as_str()).map(str::to_owned).collect();
    packages
        .iter()
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                // Dev-dependencies are test scaffolding, not layering.
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|name| members.contains(*name))
                .map(str::to_owned)
                .collect();
            (package["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect()
}

/// Every workspace crate `name` reaches, directly or not.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![name.to_owned()];
    while let Some(next) = todo.pop() {
        for dep in graph.get(&next).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn the_core_depends_on_no_protocol_crate() {
    let graph = workspace_graph();
    assert_eq!(reaches(&graph, "heron-core"), set(&["heron-store"]));
}

#[test]
fn each_crate_reaches_only_the_layers_below_it() {
    let graph = workspace_graph();
    assert_eq!(reaches(&graph, "heron-rpc"), set(&[]), "JSON-RPC knows no protocol and no agent");
    assert_eq!(reaches(&graph, "heron-store"), set(&[]), "the store knows nothing above it");
    assert_eq!(reaches(&graph, "heron-codegen"), set(&[]));
    assert_eq!(reaches(&graph, "heron-protocol"), set(&["heron-codegen", "heron-rpc"]));
    assert_eq!(
        reaches(&graph, "heron"),
        set(&["heron-codegen", "heron-core", "heron-protocol", "heron-rpc", "heron-store"])
    );
}

#[test]
fn no_crate_reaches_itself() {
    let graph = workspace_graph();
    for name in graph.keys() {
        assert!(!reaches(&graph, name).contains(name), "{name} depends on itself through a cycle");
    }
}
