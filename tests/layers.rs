//! The layers of `docs/architecture.md`, as Cargo sees them: each workspace crate depends
//! only on the crates below it, and the agent core knows no protocol crate. And inside each
//! crate, as its source says: no module names a sibling that names it back, directly or
//! through others, at any depth (`imports`).

mod imports;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The workspace's packages, as `cargo metadata` describes them.
fn packages() -> Vec<Value> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    metadata["packages"].as_array().expect("packages").clone()
}

/// Each workspace crate and the workspace crates it depends on (normal and build).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let packages = packages();
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
        reaches(&graph, "heron-conformance"),
        set(&["heron-core", "heron-store"]),
        "the conformance kit speaks ACP as text and knows nothing of the adapter"
    );
    assert_eq!(
        reaches(&graph, "heron-client"),
        set(&["heron-codegen", "heron-core", "heron-protocol", "heron-rpc", "heron-store"]),
        "the headless client speaks the protocol and confines with the core, and knows nothing of the adapter"
    );
    assert_eq!(
        reaches(&graph, "heron"),
        set(&[
            "heron-client",
            "heron-codegen",
            "heron-conformance",
            "heron-core",
            "heron-protocol",
            "heron-rpc",
            "heron-store"
        ])
    );
}

#[test]
fn no_crate_reaches_itself() {
    let graph = workspace_graph();
    for name in graph.keys() {
        assert!(!reaches(&graph, name).contains(name), "{name} depends on itself through a cycle");
    }
}

/// Each workspace crate's library root (its `lib.rs`), by crate name.
fn library_roots() -> BTreeMap<String, PathBuf> {
    packages()
        .iter()
        .map(|package| {
            let lib = package["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "lib")))
                .expect("every workspace crate is a library");
            let name = package["name"].as_str().unwrap_or_default().to_owned();
            (name, PathBuf::from(lib["src_path"].as_str().expect("src_path")))
        })
        .collect()
}

#[test]
fn no_module_names_a_sibling_that_names_it_back() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = library_roots();
    assert_eq!(roots.len(), 8, "every workspace crate is checked: {:?}", roots.keys());
    let mut cycles = Vec::new();
    for (name, root) in &roots {
        let graph = imports::graph(root, workspace);
        if name == "heron-core" {
            // The scan sees what is there: the session uses the tools, at the top level and
            // inside the session (its turn records events).
            assert!(
                graph[&Vec::new()].contains_key(&("session".to_owned(), "tools".to_owned())),
                "{graph:?}"
            );
            let session = &graph[&vec!["session".to_owned()]];
            assert!(session.contains_key(&("turn".to_owned(), "event".to_owned())), "{session:?}");
        }
        cycles.extend(imports::cycles(&graph).into_iter().map(|cycle| format!("{name}: {cycle}")));
    }
    assert!(
        cycles.is_empty(),
        "module cycles (break each by moving what both use below both):\n{}",
        cycles.join("\n")
    );
}

/// A crate of `files` (path under `src/`, text) in a fresh folder, and its root.
fn scratch_crate(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
        std::fs::write(&path, text).expect("file");
    }
    let root = dir.path().join("src/lib.rs");
    (dir, root)
}

#[test]
fn the_cycle_check_follows_use_trees_and_super_paths_but_not_comments_or_literals() {
    let lib = "mod a;\nmod b;\nmod c;\n";
    let a = "// crate::c::Gone is a comment\nuse crate::{b::Thing, c as see};\nconst S: &str = \"crate::c::x\";\n";
    let inner = "pub fn f() -> char { let _ = r#\"crate::c\"#; super::super::a::g(); '\\'' }\n";
    let (dir, root) = scratch_crate(&[
        ("lib.rs", lib),
        ("a.rs", a),
        ("b/mod.rs", "mod inner;\npub struct Thing;\n"),
        ("b/inner.rs", inner),
        ("c.rs", "pub fn g() {}\n"),
    ]);
    let cycles = imports::cycles(&imports::graph(&root, dir.path()));
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].members, ["a", "b"]);
    assert_eq!(cycles[0].places, ["src/a.rs:2", "src/b/inner.rs:1"]);
    assert_eq!(
        cycles[0].to_string(),
        "among the modules of the crate root: a -> b (src/a.rs:2), b -> a (src/b/inner.rs:1)"
    );

    // Without the path back there is no cycle, and what comments and literals name is no edge.
    let (dir, root) = scratch_crate(&[
        ("lib.rs", lib),
        ("a.rs", a),
        ("b/mod.rs", "mod inner;\npub struct Thing;\n"),
        ("b/inner.rs", "pub fn f() { super::Thing; }\n"),
        ("c.rs", "// crate::a\n/* crate::a /* nested */ crate::a */ pub fn g() {}\n"),
    ]);
    let graph = imports::graph(&root, dir.path());
    assert!(imports::cycles(&graph).is_empty(), "{graph:?}");
    let edges: Vec<_> = graph[&Vec::new()].keys().cloned().collect();
    assert_eq!(edges, [("a".to_owned(), "b".to_owned()), ("a".to_owned(), "c".to_owned())]);
}

#[test]
fn every_tangle_is_reported_not_only_the_first() {
    let (dir, root) = scratch_crate(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "use crate::a::A;\npub struct B;\n"),
        ("c.rs", "use crate::d::D;\nuse crate::e::E;\npub struct C;\n"),
        ("d.rs", "use crate::e::E;\npub struct D;\n"),
        ("e.rs", "use crate::c::C;\npub struct E;\n"),
    ]);
    let cycles = imports::cycles(&imports::graph(&root, dir.path()));
    let members: Vec<_> = cycles.iter().map(|c| c.members.clone()).collect();
    assert_eq!(members.len(), 2, "{cycles:?}");
    assert_eq!(members[0], ["a", "b"]);
    // One cycle through the second tangle, each step an import that is there.
    assert!(members[1].len() >= 2 && members[1].iter().all(|m| ["c", "d", "e"].contains(&m.as_str())));
    assert_eq!(cycles[1].places.len(), members[1].len());
}
