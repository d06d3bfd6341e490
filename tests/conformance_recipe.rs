//! Recipes (`conformance/agents/*.toml`) run by the real binary: Heron's own takes it past
//! authentication to the kit's model server in both profiles (the v2-only refusal skipped,
//! since Heron serves v1 too), the v2-only refusal's other allowed answer in memory, and an
//! agent that serves itself on a port its recipe names, which the sandbox grants on the
//! agent's own loopback only.

use std::path::{Path, PathBuf};

use heron::conformance::Replayed;
use heron::conformance::bundled;

use crate::conformance_acp::{heron_conformance, table_rows};
use crate::support::conformance::replay_text;

/// Heron's own recipe (`conformance/agents/heron.toml`), its command this build and its
/// provider's base URL `base_url`.
fn heron_recipe(dir: &Path, base_url: &str) -> PathBuf {
    let recipe =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/agents/heron.toml"))
            .expect("the recipe");
    let heron = env!("CARGO_BIN_EXE_heron");
    let recipe = recipe
        .replace("command = \"heron acp", &format!("command = \"{heron} acp"))
        .replace("base_url = \"{model}/v1\"", &format!("base_url = \"{base_url}\""));
    let path = dir.join("heron.toml");
    std::fs::write(&path, recipe).expect("write");
    path
}

#[test]
fn a_recipe_takes_the_agent_past_authentication_to_the_kits_model_server() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let recipe = heron_recipe(cwd.path(), "{model}/v1");
    let recipe = recipe.to_str().expect("a path");
    let (ok, table) = heron_conformance(&["--profile", "acp", "--recipe", recipe], cwd.path());
    assert!(ok, "{table}");
    // The turns ran on the kit's model server: nothing was skipped for want of a key.
    assert!(
        table.contains("pass   acp_prompt_turn") && table.contains("pass   acp_permission_request"),
        "{table}"
    );
    assert!(!table.contains("requires authentication"), "{table}");
    // Pointed elsewhere, the same agent's turns fail: the server beside it is what answered.
    let recipe = heron_recipe(cwd.path(), "http://127.0.0.1:9/v1");
    let (ok, table) =
        heron_conformance(&["--profile", "acp", "--recipe", recipe.to_str().expect("a path")], cwd.path());
    assert!(!ok && table.contains("FAIL   acp_prompt_turn"), "{table}");
}

#[test]
fn heron_serving_both_versions_passes_the_acp_v2_profile_by_its_recipe_skipping_the_v2_only_refusal() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let recipe = heron_recipe(cwd.path(), "{model}/v1");
    let (ok, table) =
        heron_conformance(&["--profile", "acp-v2", "--recipe", recipe.to_str().expect("a path")], cwd.path());
    assert!(ok, "{table}");
    // `--protocol auto` answers a v1 `initialize` with 1, as negotiation asks: not a failure.
    let rows = table_rows(&table);
    let refusal = rows.iter().find(|(name, _, _)| name == "acp_v2_unsupported_version").expect("a row");
    assert_eq!(refusal.1, "skip", "{table}");
    assert!(refusal.2.contains("speaks ACP v1 too and answered version 1"), "{table}");
    assert!(table.contains(&format!("{} passed, 0 failed, 1 skipped", bundled::ACP_V2.len() - 1)), "{table}");
}

#[test]
fn the_v2_only_refusal_passes_a_refusal_skips_a_v1_answer_and_fails_anything_else() {
    let (_, text) =
        bundled::ACP_V2.iter().find(|(name, _)| *name == "acp_v2_unsupported_version").expect("bundled");
    let refused = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"no","data":{"requested":1,"supported":[2]}}}"#;
    assert_eq!(replay_text(text, &[&[refused]]).expect("passes"), Replayed::Passed);
    let v1 = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
    match replay_text(text, &[&[v1]]) {
        Ok(Replayed::Skipped(reason)) => assert!(reason.contains("speaks ACP v1 too"), "{reason}"),
        other => panic!("a v1 answer is allowed, so skipped: {other:?}"),
    }
    // Version 2 is above the one asked for: negotiation never gives it.
    let v2 = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}"#;
    assert!(replay_text(text, &[&[v2]]).is_err());
    let other_error = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}"#;
    assert!(replay_text(text, &[&[other_error]]).is_err());
}

/// Heron's recipe turned into an agent that serves itself: its provider points at a model
/// server the agent starts on `port` (not the kit's), which only the recipe's `ports`
/// lets it bind and reach.
fn serving_itself(dir: &Path, port: u16, granted: bool) -> PathBuf {
    let recipe = heron_recipe(dir, &format!("http://127.0.0.1:{port}/v1"));
    let text = std::fs::read_to_string(&recipe).expect("the recipe");
    let heron = env!("CARGO_BIN_EXE_heron");
    let own_server = format!(
        "command = \"{heron} model-server --script {{home}}/own.jsonl --listen 127.0.0.1:{port} --exit-with $$ >/dev/null 2>&1 & exec {heron} acp"
    );
    let mut text = text.replacen(&format!("command = \"{heron} acp"), &own_server, 1);
    let script = r#"{"steps": [{"text": "Hello from the server of the agent itself."}]}"#;
    text = text.replacen("[files]\n", &format!("[files]\n\"own.jsonl\" = '{script}'\n"), 1);
    if granted {
        text = text.replacen("\n[env]", &format!("\nports = [{port}]\n\n[env]"), 1);
    }
    std::fs::write(&recipe, text).expect("write");
    recipe
}

#[test]
fn an_agent_serving_itself_binds_the_ports_its_recipe_names_on_its_own_loopback_only() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let support = heron_core::sandbox::support();
    let recipe = serving_itself(cwd.path(), port, true);
    let (ok, table) =
        heron_conformance(&["--profile", "acp", "--recipe", recipe.to_str().expect("a path")], cwd.path());
    if support.walls.network_namespace || support.landlock.is_err() {
        // Its turns ran on the server it started itself, on the port its recipe names.
        assert!(ok && table.contains("pass   acp_prompt_turn"), "{table}");
    } else {
        assert!(!ok && table.contains("gives it no network namespace"), "{table}");
    }
    // Without `ports` the sandbox refuses the bind (Landlock ABI 4 on), so its turns fail.
    let recipe = serving_itself(cwd.path(), port, false);
    let (ok, table) =
        heron_conformance(&["--profile", "acp", "--recipe", recipe.to_str().expect("a path")], cwd.path());
    let tcp_refused = support.landlock.as_ref().is_ok_and(|abi| *abi >= 4);
    assert_eq!(!ok && table.contains("FAIL   acp_prompt_turn"), tcp_refused, "{table}");
}
