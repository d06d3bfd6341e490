//! `heron doctor --mcp FILE` over the real binary: real servers (the stdio fixture
//! `tests/fixtures/mcp_server.py`, the HTTP fixture on the `mcp` package, commands that fail
//! as real ones do) from Zed settings, an ACP list and an `mcpServers` map; what a failure
//! says, that no env or header value is ever printed, and a file that is not JSON.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;

use super::{home_with, refuses_and_quotes_the_key, server, stdout};
use crate::support::heron_bin;
use crate::support::mcp_python::HttpServer;

const SECRET_ENV: &str = "SECRET_TOKEN_VALUE_123";
const SECRET_HEADER: &str = "SECRET_HEADER_VALUE_456";

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py").display().to_string()
}

/// Runs `heron doctor --mcp FILE` with HERON_HOME at `home`, in `cwd`.
fn doctor_mcp(home: &Path, cwd: &Path, file: &Path) -> Output {
    Command::new(heron_bin())
        .args(["doctor", "--mcp"])
        .arg(file)
        .env("HERON_HOME", home)
        .env("HERON_LOG", "warn")
        .current_dir(cwd)
        .output()
        .expect("heron runs")
}

/// A home with nothing set up, a workspace, and `text` written to `name` in the workspace:
/// doctor's output, the file's path, and the folder of both (removed when dropped).
fn check(name: &str, text: &str) -> (Output, String, tempfile::TempDir) {
    check_with_config("", name, text)
}

/// [`check`] with `config` as the home's `config.toml`.
fn check_with_config(config: &str, name: &str, text: &str) -> (Output, String, tempfile::TempDir) {
    let home = home_with(&[]);
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).expect("workspace");
    let home_dir = home.path().join("home");
    std::fs::create_dir(&home_dir).expect("home");
    std::fs::write(home_dir.join("config.toml"), config).expect("config");
    let file = ws.join(name);
    std::fs::write(&file, text).expect("the file");
    let output = doctor_mcp(&home_dir, &ws, &file);
    (output, file.display().to_string(), home)
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[test]
fn zed_settings_with_comments_report_each_failing_server_and_never_a_secret() {
    let url = server(refuses_and_quotes_the_key);
    let settings = format!(
        r#"{{
  // Zed's settings.json: comments and trailing commas, as Zed writes them.
  "theme": "One Dark",
  "context_servers": {{
    "missing": {{
      "source": "custom",
      "command": "heron-test-no-such-mcp-server",
      "args": [],
      "env": {{ "API_TOKEN": "{SECRET_ENV}", }},
    }},
    /* Says its token on stderr, as a server refusing it may, then exits. */
    "talker": {{
      "command": "sh",
      "args": ["-c", "echo \"bad token $API_TOKEN\" >&2; exit 3"],
      "env": {{ "API_TOKEN": "{SECRET_ENV}" }},
    }},
    "remote": {{ "url": "{url}/mcp", "headers": {{ "Authorization": "Bearer {SECRET_HEADER}", }}, }},
  }},
}}
"#
    );
    let (output, file, _dirs) = check("settings.json", &settings);
    let text = stdout(&output);
    let all = format!("{text}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{all}");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("ok   {file}: Zed settings (context_servers), 3 MCP servers")),
        "{text}"
    );
    assert!(first.ends_with("as you, without Heron's keys"), "{text}");
    let line =
        |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{text}"));
    assert!(
        line("fail missing (stdio): ").contains("cannot start `heron-test-no-such-mcp-server`"),
        "{text}"
    );
    let talker = line("fail talker (stdio): ");
    assert!(
        talker.contains("its stderr ends: bad token ***"),
        "the stderr is quoted, its secret hidden: {talker}"
    );
    assert!(line("fail remote (http): ").contains("the server answered HTTP 401"), "{text}");
    assert_eq!(text.lines().count(), 4, "one line for the file, one per server: {text}");
    assert!(!text.contains("agent_servers"), "no Zed snippet after an MCP check: {text}");
    for secret in [SECRET_ENV, SECRET_HEADER] {
        assert!(!all.contains(secret), "`{secret}` was printed:\n{all}");
    }
}

#[test]
fn an_acp_list_and_an_mcp_servers_map_each_start_a_working_server() {
    // MCP_FAKE_LOG adds the fixture's `log` tool: seven tools show that the env reached it.
    let list = json!([{
        "name": "fake",
        "command": "python3",
        "args": [fixture()],
        "env": [{ "name": "MCP_FAKE_LOG", "value": "1" }],
    }]);
    let (output, file, _dirs) = check("servers.json", &list.to_string());
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.starts_with(&format!("ok   {file}: ACP mcpServers (a list), 1 MCP server, ")), "{text}");
    assert!(has_line(&text, "ok   fake (stdio): 7 tools"), "{text}");

    let map = json!({ "mcpServers": { "fake": { "command": "python3", "args": [fixture()] } } });
    let (output, file, _dirs) = check("claude_desktop_config.json", &map.to_string());
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.starts_with(&format!("ok   {file}: mcpServers by name, 1 MCP server, ")), "{text}");
    assert!(has_line(&text, "ok   fake (stdio): 6 tools"), "{text}");
}

#[test]
fn a_remote_server_is_reached_with_the_files_headers_and_refuses_wrong_ones() {
    let Some(fixture) = HttpServer::start(&["--require-header", "X-Api-Key=k-right-4417"]) else { return };
    fixture.wait_listening();
    let url = fixture.url("/mcp");
    let list = json!({ "mcpServers": [
        { "type": "http", "name": "web", "url": url, "headers": [{ "name": "X-Api-Key", "value": "k-right-4417" }] },
        { "type": "http", "name": "wrong", "url": url, "headers": [{ "name": "X-Api-Key", "value": "k-wrong-9035" }] },
    ] });
    let (output, _file, _dirs) = check("servers.json", &list.to_string());
    let text = stdout(&output);
    let all = format!("{text}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(has_line(&text, "ok   web (http): 3 tools"), "{text}");
    assert!(has_line(&text, "fail wrong (http): the server answered HTTP 401 (Unauthorized)"), "{text}");
    assert!(!all.contains("k-right-4417") && !all.contains("k-wrong-9035"), "{all}");
}

#[test]
fn a_file_that_is_not_json_fails_naming_the_file_and_the_line() {
    let broken = "{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\" }\n    \"b\": { \"command\": \"y\" }\n  }\n}\n";
    let (output, file, _dirs) = check("broken.json", broken);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert_eq!(text, format!("fail {file}: is not JSON: line 4, column 5: expected `,` or `}}`\n"));

    let home = home_with(&[]);
    let absent = home.path().join("absent.json");
    let output = doctor_mcp(home.path(), home.path(), &absent);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.starts_with(&format!("fail {}: cannot be read: ", absent.display())), "{text}");
}

#[test]
fn the_servers_run_as_a_sessions_would_by_the_config() {
    let list = json!([{ "name": "gone", "command": "heron-test-no-such-mcp-server", "args": [], "env": [] }]);
    let first_line = |config: &str| {
        let (output, file, _dirs) = check_with_config(config, "servers.json", &list.to_string());
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(1), "{text}");
        let first = text.lines().next().unwrap_or_default().to_owned();
        first
            .strip_prefix(&format!("ok   {file}: ACP mcpServers (a list), 1 MCP server, started in "))
            .map_or_else(
                || panic!("{text}"),
                |rest| rest.split_once(' ').map(|(_, how)| how.to_owned()).unwrap_or_default(),
            )
    };
    assert_eq!(first_line(""), "as you, without Heron's keys");
    assert_eq!(first_line("sandbox_mcp = true\n"), "in Heron's OS sandbox (`sandbox_mcp = true`)");
    assert_eq!(first_line("sandbox = \"off\"\nsandbox_mcp = true\n"), "as you, without Heron's keys");
}

#[test]
fn a_broken_config_stops_the_check_before_any_server_starts() {
    let list = json!([{ "name": "fake", "command": "python3", "args": [fixture()], "env": [] }]);
    let (output, _file, _dirs) = check_with_config("bogus = 1\n", "servers.json", &list.to_string());
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.starts_with("fail config.toml: ") && text.contains("line 1, column 1"), "{text}");
    assert!(!text.contains("fake"), "no server is started with a sandbox policy unknown: {text}");
}
