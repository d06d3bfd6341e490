//! The conformance kit's model server (`heron model-server`) over the real binary, with a
//! real client of each API it speaks: Heron's own OpenAI (Chat Completions and Responses)
//! and Anthropic providers, pointed at it by `base_url` as another agent would be, complete
//! a turn with a tool call and its permission request; Google's Gen AI SDK reads a Gemini turn streamed and the next whole;
//! and a request of the wrong shape is refused.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::{self, Dirs, Process};

/// A scripted turn that writes NOTES.md, then says it is done.
const SCRIPT: &str = r#"{"steps": [{"thought": "A note, then."}, {"text": "I'll leave a note."}, {"tool_call": {"name": "write_file", "arguments": {"path": "NOTES.md", "content": "kit\n"}}}]}
{"steps": [{"text": "Left the note."}, {"usage": {"input": 10, "output": 3}}]}
"#;

/// `heron model-server` playing `script`, and the URL it printed.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn served(dirs: &Dirs, script: &str) -> Served {
    let path = dirs.home().join("kit.jsonl");
    std::fs::write(&path, script).expect("script");
    let mut child = Command::new(support::heron_bin())
        .args(["model-server", "--script"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the model server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its address");
    assert!(line.starts_with("http://127.0.0.1:"), "{line}");
    Served { child, url: line.trim().to_owned() }
}

/// One turn of `heron acp` whose model `kit/m` is a provider of `kind` at the server.
fn turn_against(kind: &str) -> (Vec<Value>, Value, std::sync::Arc<Dirs>) {
    let dirs = Dirs::new();
    let server = served(&dirs, SCRIPT);
    let config = format!(
        "default_model = \"kit/m\"\n[providers.kit]\nkind = \"{kind}\"\nbase_url = \"{}/v1\"\napi_key_env = \"KIT_KEY\"\nmodels = [\"m\"]\nmax_retries = 0\n",
        server.url
    );
    dirs.write_home("config.toml", &config);
    dirs.write_home(".env", "KIT_KEY=any-key-will-do\n");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let session = heron.new_session(&dirs.ws());
    heron.send_prompt(json!("p"), &session, "Leave a note");
    let mut seen = Vec::new();
    let answer = heron.until_answer(&json!("p"), |heron, message| {
        if message["method"] == "session/request_permission" {
            heron.reply(message, json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } }));
        }
        seen.push(message.clone());
    });
    drop(server);
    (seen, answer, dirs)
}

fn checked(kind: &str) {
    let (seen, answer, dirs) = turn_against(kind);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{kind}: {answer}");
    let said: String = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(said.contains("I'll leave a note.") && said.contains("Left the note."), "{kind}: {said}");
    assert!(
        seen.iter().any(|m| m["params"]["update"]["sessionUpdate"] == "agent_thought_chunk"),
        "{kind}: a thought"
    );
    assert!(seen.iter().any(|m| m["method"] == "session/request_permission"), "{kind}: asked");
    let written = std::fs::read_to_string(std::path::Path::new(&dirs.ws()).join("NOTES.md"));
    assert_eq!(written.ok().as_deref(), Some("kit\n"), "{kind}");
}

#[test]
fn an_openai_chat_completions_client_completes_a_turn_with_a_tool_call() {
    checked("openai");
}

#[test]
fn an_openai_responses_client_completes_a_turn_with_a_tool_call() {
    checked("openai-responses");
}

#[test]
fn an_anthropic_messages_client_completes_a_turn_with_a_tool_call() {
    checked("anthropic");
}

#[test]
fn a_request_of_the_wrong_shape_or_place_is_refused_and_the_server_serves_on() {
    let dirs = Dirs::new();
    let server = served(&dirs, SCRIPT);
    let address = server.url.trim_start_matches("http://").to_owned();
    let exchange = |request: &str| {
        use std::io::{Read, Write};
        let mut socket = std::net::TcpStream::connect(&address).expect("connect");
        socket.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).expect("read");
        answer
    };
    let bad = exchange("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\nnope!");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    let missing = exchange("POST /v1/elsewhere HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let models = exchange("GET /v1/models HTTP/1.1\r\n\r\n");
    assert!(models.starts_with("HTTP/1.1 200") && models.contains("\"scripted\""), "{models}");
    let huge = exchange("POST /v1/messages HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n{}");
    assert!(huge.starts_with("HTTP/1.1 400"), "{huge}");
}

#[test]
fn gemini_requests_are_answered_as_events_as_an_array_and_whole_each_turn_by_its_model_messages() {
    let dirs = Dirs::new();
    let server = served(&dirs, SCRIPT);
    let address = server.url.trim_start_matches("http://").to_owned();
    let post = |path: &str, body: &Value| {
        use std::io::{Read, Write};
        let body = body.to_string();
        let mut socket = std::net::TcpStream::connect(&address).expect("connect");
        let request = format!("POST {path} HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        socket.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 200"), "{answer}");
        body.to_owned()
    };
    let first = json!({ "contents": [{ "role": "user", "parts": [{ "text": "Leave a note" }] }] });
    let events = post("/v1beta/models/kit:streamGenerateContent?alt=sse", &first);
    let records: Vec<Value> = events
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON"))
        .collect();
    let parts: Vec<&Value> =
        records.iter().filter_map(|r| r["candidates"][0]["content"]["parts"].get(0)).collect();
    let text = |thought: bool| -> String {
        let wanted = |p: &&&Value| p.get("thought").is_some() == thought;
        parts.iter().filter(wanted).filter_map(|p| p["text"].as_str()).collect()
    };
    assert_eq!(
        (text(true).as_str(), text(false).as_str()),
        ("A note, then.", "I'll leave a note."),
        "{events}"
    );
    let calls: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionCall")).collect();
    assert_eq!(calls, [&json!({ "name": "write_file", "args": { "path": "NOTES.md", "content": "kit\n" } })]);
    assert_eq!(records.last().expect("a finish")["candidates"][0]["finishReason"], "STOP");
    assert!(records.iter().all(|r| r["modelVersion"] == "kit"), "the model named in the path: {events}");
    // The same turn as one JSON array.
    let array: Value =
        serde_json::from_str(&post("/v1beta/models/kit:streamGenerateContent", &first)).expect("JSON");
    assert_eq!(array.as_array().map(Vec::len), Some(records.len()));
    // With the model's reply and the call's result in the conversation, the second turn.
    let second = json!({ "contents": [
        first["contents"][0],
        { "role": "model", "parts": [{ "functionCall": { "name": "write_file", "args": {} } }] },
        { "role": "user", "parts": [{ "functionResponse": { "name": "write_file", "response": { "ok": true } } }] },
    ] });
    let whole: Value =
        serde_json::from_str(&post("/v1beta/models/kit:generateContent", &second)).expect("JSON");
    assert_eq!(whole["candidates"][0]["content"]["parts"], json!([{ "text": "Left the note." }]), "{whole}");
    assert_eq!(whole["usageMetadata"]["totalTokenCount"], 13, "{whole}");
}

#[test]
fn googles_gen_ai_sdk_streams_a_turn_with_a_tool_call_and_reads_the_next_whole() {
    // The SDK's client, installed pinned by `.ci/run` (`tests/clients/gemini`).
    let dir = std::env::var_os("HERON_GEMINI_SDK").map(std::path::PathBuf::from).filter(|p| p.exists());
    let Some(dir) = dir else {
        support::clients::skip("HERON_GEMINI_SDK", "Google's Gen AI SDK client");
        return;
    };
    let dirs = Dirs::new();
    let server = served(&dirs, SCRIPT);
    let output =
        Command::new("node").arg(dir.join("client.mjs")).arg(&server.url).output().expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let read: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(read["first"]["thought"], "A note, then.", "{read}");
    assert_eq!(read["first"]["text"], "I'll leave a note.", "{read}");
    assert_eq!(
        read["first"]["calls"],
        json!([{ "name": "write_file", "args": { "path": "NOTES.md", "content": "kit\n" } }])
    );
    assert_eq!(read["first"]["finish"], "STOP");
    assert_eq!(read["second"], json!({ "text": "Left the note.", "usage": 13 }), "{read}");
}

#[test]
fn a_server_told_whose_it_is_ends_with_that_process() {
    let mut owner = Command::new("sleep").arg("30").spawn().expect("sleep runs");
    let mut server = Command::new(support::heron_bin())
        .args(["model-server", "--exit-with", &owner.id().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the model server starts");
    // It serves while its owner lives: it answers a request.
    let mut address = String::new();
    BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut address).expect("its address");
    let models = {
        use std::io::{Read, Write};
        let host = address.trim().trim_start_matches("http://");
        let mut socket = std::net::TcpStream::connect(host).expect("connect");
        socket.write_all(b"GET /v1/models HTTP/1.1\r\n\r\n").expect("send");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).expect("read");
        answer
    };
    assert!(models.starts_with("HTTP/1.1 200"), "{models}");
    let _ = owner.kill();
    let _ = owner.wait();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.try_wait().expect("status") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the server outlived its owner");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
