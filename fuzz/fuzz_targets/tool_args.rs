//! Fuzzes the argument text a model writes for a tool call: every built-in tool's
//! `prepare` over a small fixed workspace. It must never panic, and a `Prepared` it returns
//! must describe the call truthfully: locations absolute and already resolved, writes
//! confined to the roots, `outside_roots` set exactly when a location is outside them, the
//! parsed arguments kept as `raw_input`, and no secret in the title.
//!
//! Input layout: byte 0 picks the tool (in name order), the rest is the argument text.
//! Nothing is run: preparing a call reads the file system (to resolve paths) but never
//! writes to it or starts a command.

#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use heron_core::paths::resolve_against;
use heron_core::sandbox::{Policy, PrivateTemp, Withheld};
use heron_core::secret::Secret;
use heron_core::tools::editor::NoEditor;
use heron_core::tools::roots::Roots;
use heron_core::tools::{Registry, Tool, ToolEnv, builtin};
use heron_core::types::ToolKind;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A secret the session knows; the dictionary offers it so inputs can carry it.
const SECRET: &str = "sk-fuzz-secret-0042";

struct Fixture {
    registry: Registry,
    names: Vec<String>,
    env: ToolEnv,
}

/// Creates the workspace once per process: a file, a nested file, a directory, a symlink
/// out of the workspace, a dangling symlink and a file with two hard links, beside a second
/// root and a directory outside both. Creation is idempotent, so runs and workers share
/// one fixed directory instead of leaving one behind each.
fn workspace() -> (PathBuf, PathBuf) {
    let base = std::env::temp_dir().join("heron-fuzz-tool-args");
    let ws = base.join("ws");
    let extra = base.join("extra");
    let outside = base.join("outside");
    for dir in [ws.join("src"), ws.join("dir"), extra.clone(), outside.clone()] {
        std::fs::create_dir_all(dir).expect("fixture directories");
    }
    std::fs::write(ws.join("a.txt"), "alpha\nbeta\n").expect("fixture file");
    std::fs::write(ws.join("src/lib.rs"), "fn main() {}\n").expect("fixture file");
    std::fs::write(outside.join("secret.txt"), SECRET).expect("fixture file");
    #[cfg(unix)]
    {
        // Already there from an earlier run: fine, it is the same link.
        let _ = std::os::unix::fs::symlink(&outside, ws.join("link_out"));
        let _ = std::os::unix::fs::symlink(base.join("missing"), ws.join("dangling"));
        let _ = std::fs::hard_link(ws.join("a.txt"), ws.join("hard"));
    }
    let ws = std::fs::canonicalize(ws).expect("canonical workspace");
    let extra = std::fs::canonicalize(extra).expect("canonical second root");
    (ws, extra)
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let (ws, extra) = workspace();
        let registry = builtin();
        let names = registry.specs(false).into_iter().map(|spec| spec.name).collect();
        let env = ToolEnv {
            cwd: ws.clone(),
            roots: Arc::new(Roots::new(ws.clone(), vec![extra.clone()])),
            cancel: CancellationToken::new(),
            editor: Arc::new(NoEditor),
            secrets: Arc::new(vec![Secret::new(SECRET)]),
            progress: Default::default(),
            witness: None,
            // Preparing a call never starts a process; the policy only has to be well formed.
            sandbox: Arc::new(Policy {
                enabled: false,
                home: ws.join(".heron"),
                roots: vec![ws, extra],
                writable: Vec::new(),
                credentials: Vec::new(),
                withheld: Withheld::default(),
                list_carved: false,
                readable: None,
                network: true,
                port: None,
                private_ports: Vec::new(),
                host_sockets: Vec::new(),
                temp: PrivateTemp::default(),
            }),
            deadlines: Default::default(),
        };
        Fixture { registry, names, env }
    })
}

/// Absolute, with no `.` or `..` left: what the confinement layer promises it resolved.
fn assert_resolved(tool: &str, path: &str, env: &ToolEnv) {
    let as_path = Path::new(path);
    assert!(as_path.is_absolute(), "{tool}: location {path:?} is not absolute");
    assert!(
        as_path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{tool}: location {path:?} is not normalized"
    );
    // Resolving a resolved path changes nothing.
    assert_eq!(resolve_against(&env.cwd, path), as_path, "{tool}: location {path:?} resolves further");
}

fn check(tool: &dyn Tool, name: &str, arguments: &str, env: &ToolEnv) {
    let Ok(prepared) = tool.prepare(arguments, env) else { return };
    assert_eq!(prepared.kind, tool.kind(), "{name} prepared a call of another kind");
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    let parsed: Value = serde_json::from_str(text).expect("prepare accepted text that is not JSON");
    assert_eq!(prepared.raw_input, parsed, "{name} changed the arguments it keeps");
    assert!(!prepared.title.contains(SECRET), "{name} shows a secret in its title: {:?}", prepared.title);
    for location in &prepared.locations {
        assert_resolved(name, &location.path, env);
    }
    let outside = prepared.locations.iter().any(|l| !env.roots.is_inside(Path::new(&l.path)));
    match prepared.kind {
        // A write must be confined: the permission gate trusts it never leaves the roots.
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move => {
            assert!(!outside, "{name} would change a file outside the roots: {:?}", prepared.locations);
            assert!(!prepared.outside_roots, "{name} marks a confined write as outside the roots");
        }
        _ => assert_eq!(
            prepared.outside_roots, outside,
            "{name}: outside_roots disagrees with its locations {:?}",
            prepared.locations
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, text @ ..] = data else { return };
    let Ok(arguments) = std::str::from_utf8(text) else { return };
    let fixture = fixture();
    let name = &fixture.names[usize::from(*selector) % fixture.names.len()];
    let tool = fixture.registry.get(name).expect("every listed tool is registered");
    check(tool.as_ref(), name, arguments, &fixture.env);
});
