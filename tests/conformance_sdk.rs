//! The profiles against the ACP SDKs' own example agents, each pinned so a change on
//! either side shows: the Rust SDK's `simple_agent` (it answers `initialize` and nothing
//! else) and `simple_agent_v2`, built from the pinned crate by `scripts/build-v2-client`
//! and named by `HERON_RUST_SDK_AGENTS`; and the Python SDK's echo agent, installed by its
//! recipe and named by `HERON_PYTHON_SDK_AGENTS`. `.ci/run` provides and requires both.

use std::path::PathBuf;

use crate::conformance_acp::{heron_conformance, table_rows};
use crate::support::clients;

/// The folder holding the two examples, or `None` (said loudly) when they were not built.
fn agents() -> Option<PathBuf> {
    let dir = std::env::var_os("HERON_RUST_SDK_AGENTS").map(PathBuf::from).filter(|p| p.exists());
    if dir.is_none() {
        clients::skip("HERON_RUST_SDK_AGENTS", "the Rust SDK's example agents");
    }
    dir
}

/// Runs `profile` against `agent` and checks each scenario's result against `findings`.
fn findings_of(agent: &str, profile: &str, findings: &[(&str, &str)], summary: &str) {
    let Some(dir) = agents() else { return };
    let cwd = tempfile::tempdir().expect("tempdir");
    let agent = dir.join(agent);
    let (ok, table) =
        heron_conformance(&["--profile", profile, "--agent", &agent.display().to_string()], cwd.path());
    assert!(!ok, "a scenario fails, so the run fails:\n{table}");
    let rows: Vec<(String, String)> =
        table_rows(&table).into_iter().map(|(name, result, _)| (name, result)).collect();
    let wanted: Vec<(String, String)> =
        findings.iter().map(|(n, r)| ((*n).to_owned(), (*r).to_owned())).collect();
    assert_eq!(rows, wanted, "{table}");
    assert!(table.contains(summary), "{table}");
}

#[test]
fn the_acp_profile_reports_what_the_rust_sdks_simple_agent_does_not_serve() {
    // It answers `initialize` only: every session method is -32601, which the profile
    // reports where the spec asks for more (a session, -32602, -32002).
    findings_of(
        "simple_agent",
        "acp",
        &[
            ("acp_cancel_request", "FAIL"),
            ("acp_cancel_request_running", "advice"),
            ("acp_initialize", "pass"),
            ("acp_initialize_newer_version", "pass"),
            ("acp_invalid_params", "FAIL"),
            ("acp_invalid_request", "FAIL"),
            ("acp_parse_error", "FAIL"),
            ("acp_permission_request", "FAIL"),
            ("acp_prompt_turn", "FAIL"),
            ("acp_session_cancel", "FAIL"),
            ("acp_session_close", "skip"),
            ("acp_session_list", "skip"),
            ("acp_session_load", "skip"),
            ("acp_session_load_unadvertised", "pass"),
            ("acp_session_resume", "skip"),
            ("acp_unknown_method", "pass"),
            ("acp_unknown_session", "FAIL"),
            ("acp_unknown_session_load", "skip"),
        ],
        "4 passed, 8 failed, 5 skipped",
    );
}

#[test]
fn the_acp_v2_profile_passes_the_rust_sdks_simple_agent_v2_but_for_its_cancel() {
    findings_of(
        "simple_agent_v2",
        "acp-v2",
        &[
            ("acp_v2_cancel_request", "pass"),
            ("acp_v2_initialize", "pass"),
            ("acp_v2_prompt_turn", "pass"),
            ("acp_v2_session_cancel", "FAIL"),
            ("acp_v2_unknown_session", "pass"),
            ("acp_v2_unsupported_version", "pass"),
            ("acp_v2_v1_methods_gone", "pass"),
        ],
        "6 passed, 1 failed, 0 skipped",
    );
}

/// The ACP Python SDK's echo agent (`examples/echo_agent.py` of `agent-client-protocol`
/// 0.12.1), started by its recipe from the folder `.ci/run` installs it into
/// (`HERON_PYTHON_SDK_AGENTS`, required there). It needs no model; what the acp profile
/// finds in it is pinned: it answers a newer `initialize` with its own 65535, leaves a line
/// that is not JSON unanswered, and answers unknown methods, sessions and invalid requests
/// as if they were served.
#[test]
fn the_acp_profile_reports_what_the_python_sdks_echo_agent_does_not_serve() {
    let dir = std::env::var_os("HERON_PYTHON_SDK_AGENTS").map(PathBuf::from).filter(|p| p.exists());
    let Some(dir) = dir else {
        clients::skip("HERON_PYTHON_SDK_AGENTS", "the Python SDK's echo agent");
        return;
    };
    let recipe =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/agents/python-sdk-echo.toml");
    let cwd = tempfile::tempdir().expect("tempdir");
    let args = [
        "--profile",
        "acp",
        "--recipe",
        &recipe.display().to_string(),
        "--agents",
        &dir.display().to_string(),
    ];
    let (ok, table) = heron_conformance(&args, cwd.path());
    assert!(!ok, "a scenario fails, so the run fails:\n{table}");
    let rows: Vec<(String, String)> =
        table_rows(&table).into_iter().map(|(name, result, _)| (name, result)).collect();
    let findings = [
        ("acp_cancel_request", "pass"),
        ("acp_cancel_request_running", "pass"),
        ("acp_initialize", "pass"),
        ("acp_initialize_newer_version", "FAIL"),
        ("acp_invalid_params", "pass"),
        ("acp_invalid_request", "FAIL"),
        ("acp_parse_error", "FAIL"),
        ("acp_permission_request", "pass"),
        ("acp_prompt_turn", "pass"),
        ("acp_session_cancel", "pass"),
        ("acp_session_close", "skip"),
        ("acp_session_list", "skip"),
        ("acp_session_load", "skip"),
        ("acp_session_load_unadvertised", "FAIL"),
        ("acp_session_resume", "skip"),
        ("acp_unknown_method", "FAIL"),
        ("acp_unknown_session", "FAIL"),
        ("acp_unknown_session_load", "skip"),
    ];
    let wanted: Vec<(String, String)> =
        findings.iter().map(|(n, r)| ((*n).to_owned(), (*r).to_owned())).collect();
    assert_eq!(rows, wanted, "{table}");
    assert!(table.contains("7 passed, 6 failed, 5 skipped"), "{table}");
}
