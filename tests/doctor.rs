//! `heron doctor`, `heron models` and `heron setup` over the real binary, each on its own temporary
//! HERON_HOME, with model lists served by a small HTTP server on 127.0.0.1; `--mcp` in `mcp`.

mod mcp;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::heron_bin;

/// The key the tests put in `.env`; no part of it may be printed.
const KEY: &str = "sk-heron-test-7f3a9c1e5b2d";

/// Runs `heron ARGS` with HERON_HOME at `home`.
fn heron(home: &Path, args: &[&str]) -> Output {
    Command::new(heron_bin())
        .args(args)
        .env("HERON_HOME", home)
        .env("HERON_LOG", "warn")
        .output()
        .expect("heron runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A fresh home holding `files`, as (name, text) pairs; `.env` gets mode 0600.
fn home_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write into the home");
        if *name == ".env" {
            set_mode(&path, 0o600);
        }
    }
    dir
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Serves every request with `answer(request head)` as (status, JSON body); returns the
/// base URL (`http://127.0.0.1:PORT/v1`). The server lives until the test process ends.
fn server(answer: fn(&str) -> (u16, String)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match socket.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let (status, body) = answer(&String::from_utf8_lossy(&head));
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes());
            });
        }
    });
    url
}

fn lists_fast(_head: &str) -> (u16, String) {
    (200, r#"{"object":"list","data":[{"id":"fast","object":"model"}]}"#.to_owned())
}

/// Refuses the key the way some providers do: quoting what it got, and part of the key.
fn refuses_and_quotes_the_key(head: &str) -> (u16, String) {
    let sent = head.lines().find(|line| line.to_ascii_lowercase().starts_with("authorization")).unwrap_or("");
    let message = format!("Incorrect API key provided: {sent} (sk-heron-te***c1e5b2d)");
    (401, serde_json::json!({ "error": { "message": message } }).to_string())
}

/// A base URL on 127.0.0.1 where nothing listens.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    drop(listener);
    url
}

fn openai_provider(name: &str, url: &str, key: Option<&str>, models: &str) -> String {
    let key = key.map(|k| format!("api_key_env = \"{k}\"\n")).unwrap_or_default();
    format!("[providers.{name}]\nkind = \"openai\"\nbase_url = \"{url}\"\n{key}models = [{models}]\n")
}

#[test]
fn a_good_home_passes() {
    let url = server(lists_fast);
    let config = format!(
        "default_model = \"local/fast\"\n{}",
        openai_provider("local", &url, Some("LOCAL_API_KEY"), "\"fast\"")
    );
    let home = home_with(&[("config.toml", &config), (".env", &format!("LOCAL_API_KEY={KEY}\n"))]);
    heron_store::Store::open_blocking(&home.path().join("heron.db")).expect("a store Heron wrote");
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(!text.lines().any(|line| line.starts_with("fail")), "{text}");
    assert!(text.contains("ok   default_model: local/fast"), "{text}");
    assert!(text.contains("ok   provider local: ") && text.contains("lists 1 model"), "{text}");
    assert!(text.contains("ok   store: "), "{text}");
    assert!(text.contains("\"agent_servers\""), "the Zed snippet closes the report: {text}");
    // It names this binary by its full path: Zed started from the desktop may not see PATH.
    let bin = crate::support::heron_bin().canonicalize().expect("the binary");
    assert!(text.contains(&format!("\"command\": \"{}\"", bin.display())), "{text}");
}

#[test]
fn a_broken_config_fails_and_names_its_line_and_column() {
    let home = home_with(&[(
        "config.toml",
        "default_model = \"demo/demo\"\n\n[providers.p]\nkind = \"openai\"\nbase_url = 5\n",
    )]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(!output.status.success(), "{text}");
    let line =
        text.lines().find(|line| line.starts_with("fail config.toml:")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("line 5, column 12"), "{line}");
}

#[test]
fn an_env_file_others_can_read_is_a_warning() {
    let home =
        home_with(&[("config.toml", "default_model = \"demo/demo\"\n"), (".env", "UNUSED_KEY=abcd1234\n")]);
    set_mode(&home.path().join(".env"), 0o644);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(text.contains("warn .env: readable by group or others (mode 0644)"), "{text}");
    assert!(output.status.success(), "a readable .env is a warning, not a failure: {text}");
}

#[test]
fn an_env_file_with_another_name_is_a_warning_saying_how_to_find_it() {
    let home =
        home_with(&[("config.toml", "default_model = \"demo/demo\"\n"), (".env", "UNUSED_KEY=abcd1234\n")]);
    set_mode(&home.path().join(".env"), 0o600);
    let elsewhere = tempfile::tempdir().expect("another folder");
    std::fs::hard_link(home.path().join(".env"), elsewhere.path().join("notes.txt")).expect("hard link");
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(text.contains("warn .env: the file has 2 names (hard links)"), "{text}");
    assert!(text.contains("-samefile"), "{text}");
    assert!(output.status.success(), "{text}");
}

#[test]
fn no_part_of_a_provider_key_is_printed_even_when_the_server_quotes_it() {
    let url = server(refuses_and_quotes_the_key);
    let config = openai_provider("local", &url, Some("LOCAL_API_KEY"), "\"fast\"");
    let home = home_with(&[("config.toml", &config), (".env", &format!("LOCAL_API_KEY={KEY}\n"))]);
    let output = heron(home.path(), &["doctor"]);
    let all = format!("{}{}", stdout(&output), String::from_utf8_lossy(&output.stderr));
    assert!(all.contains("provider local: ") && all.contains("refused the key (HTTP 401)"), "{all}");
    for window in KEY.as_bytes().windows(6) {
        let piece = std::str::from_utf8(window).expect("ascii");
        assert!(!all.contains(piece), "`{piece}` of the key was printed:\n{all}");
    }
}

#[test]
fn an_unreachable_provider_is_reported_as_a_warning() {
    let url = closed_port_url();
    let home = home_with(&[(
        "config.toml",
        &format!("default_model = \"demo/demo\"\n{}", openai_provider("far", &url, None, "\"m\"")),
    )]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(text.contains(&format!("warn provider far: cannot reach {url}")), "{text}");
    assert!(output.status.success(), "another provider can still serve: {text}");
}

#[test]
fn an_unreachable_default_provider_fails() {
    let url = closed_port_url();
    let home = home_with(&[(
        "config.toml",
        &format!("default_model = \"far/m\"\n{}", openai_provider("far", &url, None, "\"m\"")),
    )]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(text.contains(&format!("fail provider far: cannot reach {url}")), "{text}");
    assert!(!output.status.success(), "{text}");
}

#[test]
fn a_corrupted_store_fails_naming_the_store() {
    let garbage = "not a database at all\n".repeat(300);
    let home = home_with(&[("config.toml", "default_model = \"demo/demo\"\n"), ("heron.db", &garbage)]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(!output.status.success(), "{text}");
    let line = text.lines().find(|line| line.starts_with("fail store:")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("heron.db"), "{line}");
    let after = std::fs::read_to_string(home.path().join("heron.db")).expect("still there");
    assert_eq!(after, garbage, "the doctor must not touch the store");
}

#[test]
fn the_doctor_creates_nothing_in_a_missing_home() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("not-yet");
    let output = heron(&home, &["doctor"]);
    assert!(stdout(&output).contains("warn home: "), "{}", stdout(&output));
    assert!(!home.exists(), "the doctor must not create the home");
}

/// Runs `heron ARGS` with its stdout a pipe whose reader is already gone, as in
/// `heron models | head -1` once `head` has exited.
fn into_a_closed_pipe(home: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(heron_bin())
        .args(args)
        .env("HERON_HOME", home)
        .env("HERON_LOG", "warn")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("heron runs")
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_the_commands_own_status() {
    let home = home_with(&[("config.toml", "default_model = \"demo/demo\"\n")]);
    let transcript = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/error_auth_required.ndjson");
    for (args, status) in [
        (vec!["doctor"], 0),
        (vec!["models"], 0),
        (vec!["models", "--json"], 0),
        (vec!["manifest"], 0),
        // `true` is no agent, so the scenario fails: the status says so, pipe or not.
        (vec!["conformance", "--agent", "true", transcript], 1),
    ] {
        let output = into_a_closed_pipe(home.path(), &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(status), "{args:?}: {stderr}");
    }
}

#[test]
fn the_doctor_leaves_no_new_file_beside_an_existing_store() {
    let home = home_with(&[("config.toml", "default_model = \"demo/demo\"\n")]);
    drop(heron_store::Store::open_blocking(&home.path().join("heron.db")).expect("a store Heron wrote"));
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(home.path())
            .expect("list the home")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    assert_eq!(before, ["config.toml", "heron.db"]);
    let output = heron(home.path(), &["doctor"]);
    assert!(stdout(&output).contains("ok   store: "), "{}", stdout(&output));
    assert_eq!(listing(), before, "no heron.db-wal or heron.db-shm left behind");
}

#[test]
fn models_lists_provider_slash_model_with_demo() {
    let config = openai_provider("local", "http://127.0.0.1:1/v1", None, "\"fast\", \"smart\"");
    let home = home_with(&[("config.toml", &config)]);
    let output = heron(home.path(), &["models"]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), "demo/demo\nlocal/fast\nlocal/smart\n");
}

#[test]
fn models_json_names_each_model_and_marks_the_default() {
    let config = format!(
        "default_model = \"local/smart\"\n{}",
        openai_provider("local", "http://127.0.0.1:1/v1", None, "\"fast\", \"smart\"")
    );
    let home = home_with(&[("config.toml", &config)]);
    let output = heron(home.path(), &["models", "--json"]);
    let models: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let ids: Vec<&str> =
        models.as_array().expect("an array").iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["demo/demo", "local/fast", "local/smart"]);
    let defaults: Vec<&str> = models
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["default"] == true)
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(defaults, ["local/smart"]);
    assert_eq!(models[1]["provider"], "local");
    assert_eq!(models[1]["kind"], "openai");
}

#[test]
fn models_with_a_broken_config_fails_naming_the_line() {
    let home = home_with(&[("config.toml", "default_model = \"demo/demo\"\nbogus = 1\n")]);
    let output = heron(home.path(), &["models"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("line 2, column 1"), "{output:?}");
}

/// Anthropic's model list, only to a request with the key in `x-api-key` and a version:
/// dated snapshots, not the aliases a config names, in pages of `limit` (asked for as
/// 1000, its maximum) that go on after `after_id` while `has_more` says so.
fn anthropic_lists_claude(head: &str) -> (u16, String) {
    let lower = head.to_ascii_lowercase();
    let keyed = lower.contains(&format!("x-api-key: {}", KEY.to_ascii_lowercase()));
    if !keyed || !lower.contains("anthropic-version: ") || lower.contains("authorization") {
        let body =
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        return (401, body.to_owned());
    }
    let target = head.split(' ').nth(1).unwrap_or("");
    if !target.contains("limit=1000") {
        let body =
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"expected limit=1000"}}"#;
        return (400, body.to_owned());
    }
    // Two models a page, as if `limit` were 2.
    let page = if target.contains("after_id=claude-opus-4-1-20250805") {
        r#"{"data":[{"type":"model","id":"claude-3-5-haiku-20241022"}],"has_more":false,"first_id":"claude-3-5-haiku-20241022","last_id":"claude-3-5-haiku-20241022"}"#
    } else {
        r#"{"data":[{"type":"model","id":"claude-sonnet-4-5-20250929"},{"type":"model","id":"claude-opus-4-1-20250805"}],"has_more":true,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-opus-4-1-20250805"}"#
    };
    (200, page.to_owned())
}

#[test]
fn models_remote_shows_what_each_endpoint_serves_next_to_the_config() {
    let openai = server(lists_fast);
    let anthropic = server(anthropic_lists_claude);
    let config = format!(
        "{}[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{anthropic}\"\napi_key_env = \"CLAUDE_KEY\"\nmodels = [\"claude-sonnet-4-5\", \"claude-old\"]\n{}",
        openai_provider("local", &openai, None, "\"fast\", \"smart\""),
        openai_provider("gone", &closed_port_url(), None, "\"x\""),
    );
    let home = home_with(&[("config.toml", &config), (".env", &format!("CLAUDE_KEY={KEY}\n"))]);
    let output = heron(home.path(), &["models", "--remote", "--timeout", "3"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    for line in [
        "claude (anthropic): the endpoint serves 3 models",
        "  claude/claude-sonnet-4-5  served",
        "  claude/claude-old  not served",
        "  claude/claude-opus-4-1-20250805  served, not configured",
        "  claude/claude-3-5-haiku-20241022  served, not configured",
        "  local/fast  served",
        "  local/smart  not served",
        "demo (scripted, not asked)",
        "  gone/x  unknown",
    ] {
        assert!(text.lines().any(|l| l == line), "no line `{line}` in:\n{text}");
    }
    assert!(!text.contains("claude-sonnet-4-5-20250929"), "the alias stands for its snapshot: {text}");
    assert!(text.contains("gone (openai): cannot reach"), "{text}");
    assert!(!text.contains(KEY), "{text}");

    let output = heron(home.path(), &["models", "--remote", "--json", "--timeout", "3"]);
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let find = |id: &str| value["models"].as_array().and_then(|m| m.iter().find(|m| m["id"] == id)).cloned();
    let alias = find("claude/claude-sonnet-4-5").expect("configured model");
    assert_eq!((alias["configured"].clone(), alias["served"].clone()), (true.into(), true.into()));
    let old = find("claude/claude-old").expect("configured model");
    assert_eq!((old["configured"].clone(), old["served"].clone()), (true.into(), false.into()));
    let extra = find("claude/claude-3-5-haiku-20241022").expect("a model of the second page");
    assert_eq!((extra["configured"].clone(), extra["served"].clone()), (false.into(), true.into()));
    assert_eq!(find("gone/x").expect("gone")["served"], serde_json::Value::Null);
    let gone = value["providers"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "gone")).cloned();
    assert!(gone.is_some_and(|g| g["error"].as_str().is_some_and(|e| e.contains("cannot reach"))), "{value}");
}

#[test]
fn the_doctor_finds_an_anthropic_alias_among_dated_snapshots_on_a_later_page() {
    let url = server(anthropic_lists_claude);
    let config = format!(
        "default_model = \"claude/claude-3-5-haiku-latest\"\n[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{url}\"\n\
         api_key_env = \"CLAUDE_KEY\"\nmodels = [\"claude-3-5-haiku-latest\", \"claude-sonnet-4-5\"]\n"
    );
    let home = home_with(&[("config.toml", &config), (".env", &format!("CLAUDE_KEY={KEY}\n"))]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("ok   provider claude: ") && text.contains("lists 3 models"), "{text}");
    assert!(!text.contains("does not list"), "{text}");
}

/// Azure's resource-level model list, at `/openai/models` with the `api-version` kept and
/// the key in `api-key`; a deployment path has no such route.
fn azure_lists_resource_models(head: &str) -> (u16, String) {
    let target = head.split(' ').nth(1).unwrap_or("");
    if target != "/openai/models?api-version=2024-10-21" {
        return (404, r#"{"error":{"code":"404","message":"Resource not found"}}"#.to_owned());
    }
    if !head.to_ascii_lowercase().contains(&format!("api-key: {}", KEY.to_ascii_lowercase())) {
        return (
            401,
            r#"{"error":{"code":"401","message":"Access denied due to invalid subscription key"}}"#
                .to_owned(),
        );
    }
    let body = r#"{"data":[{"id":"gpt-4o-2024-08-06","object":"model","status":"succeeded"},{"id":"gpt-35-turbo","object":"model","status":"succeeded"}],"object":"list"}"#;
    (200, body.to_owned())
}

#[test]
fn an_azure_deployment_is_checked_through_its_resources_model_list() {
    let origin = server(azure_lists_resource_models).trim_end_matches("/v1").to_owned();
    let config = format!(
        "default_model = \"azure/gpt-4o\"\n[providers.azure]\nkind = \"openai\"\nflavor = \"azure\"\n\
         base_url = \"{origin}/openai/deployments/gpt-4o?api-version=2024-10-21\"\napi_key_env = \"AZURE_KEY\"\nmodels = [\"gpt-4o\"]\n"
    );
    let home = home_with(&[("config.toml", &config), (".env", &format!("AZURE_KEY={KEY}\n"))]);
    let output = heron(home.path(), &["doctor"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok   provider azure: ")
                && l.contains("deployment `gpt-4o` has no model list")),
        "{text}"
    );
    let output = heron(home.path(), &["models", "--remote", "--timeout", "3"]);
    let text = stdout(&output);
    for line in [
        "azure (openai): deployment `gpt-4o` has no model list; its resource offers 2 models",
        "  azure/gpt-4o  unknown",
    ] {
        assert!(text.lines().any(|l| l == line), "no line `{line}` in:\n{text}");
    }
}

#[test]
fn setup_from_a_preset_gives_a_provider_that_models_lists() {
    use std::process::Stdio;
    let home = tempfile::tempdir().expect("tempdir");
    let mut setup = Command::new(heron_bin())
        .args(["setup", "--preset", "deepseek", "--key-stdin"])
        .env("HERON_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("heron setup runs");
    // Name, endpoint, models and key name as the preset offers them; then the key.
    setup.stdin.take().expect("stdin").write_all(format!("\n\n\n\n{KEY}\n").as_bytes()).expect("answers");
    let done = setup.wait_with_output().expect("setup ends");
    assert!(done.status.success(), "{done:?}");
    assert!(!String::from_utf8_lossy(&done.stderr).contains(KEY), "the key is not echoed");
    let output = heron(home.path(), &["models"]);
    assert_eq!(stdout(&output), "deepseek/deepseek-chat\ndemo/demo\n");
    let config = std::fs::read_to_string(home.path().join("config.toml")).expect("config");
    assert!(config.contains("flavor = \"deepseek\""), "{config}");
}
