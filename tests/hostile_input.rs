//! Hostile input against the real `heron acp --validate` process: garbage, broken framing,
//! broken envelopes, floods and oversized lines. Each is answered exactly as JSON-RPC 2.0
//! and ACP say, the process keeps serving, stdout carries nothing but JSON-RPC lines, and
//! stdin EOF ends the process with status 0 within two seconds.

use std::io::Write;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Launch, Process};

/// How long the process may take to exit once stdin is closed.
const EXIT_WAIT: Duration = Duration::from_secs(2);

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// The default `--max-line-bytes`.
const DEFAULT_MAX_LINE: usize = 64 * 1024 * 1024;

const MIB: usize = 1024 * 1024;

/// An `initialize` request under `id`, as one line without its terminator.
fn initialize(id: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1}}).to_string()
}

/// `heron acp --validate extra...` with its log kept, validation on by the flag alone.
fn launch(extra: &[&str]) -> Launch {
    let mut command = Command::new(support::heron_bin());
    command.args(["acp", "--validate"]).args(extra);
    Launch::command(command).env_remove("HERON_VALIDATE").capture_stderr()
}

/// [`launch`], logging at `warn`, its stdout read (and every line checked) at once.
fn start(extra: &[&str]) -> Process {
    launch(extra).env("HERON_LOG", "warn").start()
}

/// Reads the next message and checks it is error `code` under `id`; returns the error.
fn expect_error(heron: &Process, id: Value, code: i64) -> Value {
    let answer = heron.next();
    assert_eq!((&answer["id"], &answer["error"]["code"]), (&id, &json!(code)), "answer: {answer}");
    assert!(answer.get("result").is_none(), "an error answer carries a result: {answer}");
    answer["error"].clone()
}

/// Reads the next message and checks it is a successful `initialize` answer under `id`.
fn expect_initialized(heron: &Process, id: Value) {
    let answer = heron.next();
    assert_eq!(answer["id"], id, "answer: {answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1, "answer: {answer}");
}

/// Proves the connection still serves: an `initialize` under `id` gets its answer next.
fn assert_serves(heron: &mut Process, id: Value) {
    heron.send_line(&initialize(id.clone()));
    expect_initialized(heron, id);
}

/// Closes stdin; the process must exit 0 within [`EXIT_WAIT`] and write nothing more than
/// `rest` answers. Returns those answers and everything logged to stderr.
fn finish_with(heron: Process, rest: usize) -> (Vec<Value>, String) {
    let exited = heron.finish(EXIT_WAIT);
    assert!(
        exited.status.success(),
        "heron exited with {} after EOF; stderr:\n{}",
        exited.status,
        exited.stderr
    );
    assert!(exited.rest.len() <= rest, "unexpected output after the last answer: {:?}", exited.rest);
    (exited.rest, exited.stderr)
}

/// Closes stdin and checks a clean exit with no output beyond what was read.
fn finish(heron: Process) -> String {
    finish_with(heron, 0).1
}

#[test]
fn leading_garbage_blank_lines_and_crlf_are_tolerated() {
    let mut heron = start(&[]);
    heron.send_bytes(b"Windows PowerShell profile loaded.\r\n\n\r\n   \t\r\n\n");
    heron.send_bytes(format!("{}\r\n\r\n", initialize(json!(1))).as_bytes());
    expect_error(&heron, Value::Null, PARSE_ERROR);
    expect_initialized(&heron, json!(1));
    finish(heron);
}

#[test]
fn a_byte_order_mark_before_the_first_message_is_dropped() {
    let mut heron = start(&[]);
    heron.send_bytes(format!("\u{feff}{}\r\n", initialize(json!(1))).as_bytes());
    expect_initialized(&heron, json!(1));
    finish(heron);
}

#[test]
fn a_byte_order_mark_alone_on_a_line_is_skipped_like_a_blank_line() {
    let mut heron = start(&[]);
    heron.send_bytes("\u{feff}\r\n".as_bytes());
    assert_serves(&mut heron, json!(1));
    finish(heron);
}

#[test]
fn invalid_utf8_in_a_line_is_a_parse_error_and_the_next_line_is_served() {
    let mut heron = start(&[]);
    heron.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"x\":\"\xff\xfe\xc3\"}}\n");
    let error = expect_error(&heron, Value::Null, PARSE_ERROR);
    assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("UTF-8")), "error: {error}");
    assert_serves(&mut heron, json!(1));
    finish(heron);
}

#[test]
fn a_message_split_inside_a_multibyte_character_is_reassembled() {
    let mut heron = start(&[]);
    let line = format!("{}\n", initialize(json!("héron-🦩")));
    let bytes = line.as_bytes();
    // The flamingo is four bytes; cut after its second.
    let cut = line.find('🦩').expect("the id holds the emoji") + 2;
    heron.send_bytes(&bytes[..cut]);
    thread::sleep(Duration::from_millis(100));
    heron.send_bytes(&bytes[cut..]);
    expect_initialized(&heron, json!("héron-🦩"));
    finish(heron);
}

#[test]
fn u2028_and_u2029_inside_strings_are_content_not_line_breaks() {
    let mut heron = start(&[]);
    // serde_json writes both characters raw, as Node's readline would wrongly split on.
    let id = json!("a\u{2028}b\u{2029}c");
    let line = initialize(id.clone());
    assert!(line.contains('\u{2028}'), "the request carries a raw U+2028: {line}");
    heron.send_line(&line);
    expect_initialized(&heron, id);
    finish(heron);
}

#[test]
fn deep_nesting_is_answered_not_a_crash() {
    let mut heron = start(&[]);
    // 256 KiB of unclosed brackets: the line never becomes a value.
    heron.send_line(&"[".repeat(256 * 1024));
    expect_error(&heron, Value::Null, PARSE_ERROR);
    // Balanced but 100,000 deep inside params: past serde_json's recursion limit of 128.
    let depth = 100_000;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"initialize","params":{{"protocolVersion":1,"_meta":{{"x":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    heron.send_line(&deep);
    expect_error(&heron, json!(2), INVALID_PARAMS);
    assert_serves(&mut heron, json!(3));
    finish(heron);
}

/// Writes a line of `len` bytes of `x` plus its LF, one MiB at a time, so the test never
/// holds the whole line.
fn send_long_line(heron: &mut Process, len: usize) {
    let chunk = vec![b'x'; MIB];
    for _ in 0..len / MIB {
        heron.send_bytes(&chunk);
    }
    heron.send_bytes(&chunk[..len % MIB]);
    heron.send_bytes(b"\n");
}

/// A 70 MiB line with the default 64 MiB limit is answered -32600, the limit named in
/// `data`. Memory: the reader must hold up to the limit before it knows the line is too
/// long, so the peak may grow by one limit's worth (64 MiB) plus slack, never by the
/// 70 MiB line, let alone a doubling buffer's 128 MiB. The test below proves the discard
/// itself is unbuffered.
#[test]
fn a_line_over_the_default_limit_is_rejected_naming_the_limit() {
    let mut heron = start(&[]);
    assert_serves(&mut heron, json!(1));
    let before = heron.peak_memory();
    send_long_line(&mut heron, 70 * MIB);
    let error = expect_error(&heron, Value::Null, INVALID_REQUEST);
    assert_eq!(error["data"]["maxLineBytes"], DEFAULT_MAX_LINE, "error: {error}");
    assert_serves(&mut heron, json!(2));
    let grown = heron.peak_memory().saturating_sub(before);
    assert!(grown < DEFAULT_MAX_LINE + 8 * MIB, "peak memory grew {} MiB", grown / MIB);
    finish(heron);
}

/// With a 1 MiB limit a 32 MiB line must cost about 1 MiB: the rest is dropped as it is
/// read. 8 MiB of slack covers allocator and runtime noise; buffering the line would
/// show as 32 MiB or more.
#[test]
fn an_endless_line_is_dropped_without_being_buffered() {
    let mut heron = start(&["--max-line-bytes", "1048576"]);
    assert_serves(&mut heron, json!(1));
    let before = heron.peak_memory();
    send_long_line(&mut heron, 32 * MIB);
    let error = expect_error(&heron, Value::Null, INVALID_REQUEST);
    assert_eq!(error["data"]["maxLineBytes"], MIB, "error: {error}");
    assert_serves(&mut heron, json!(2));
    let grown = heron.peak_memory().saturating_sub(before);
    assert!(grown < 8 * MIB, "peak memory grew {} MiB for a 1 MiB limit", grown / MIB);
    finish(heron);
}

#[test]
fn a_batch_is_invalid_request_with_id_null() {
    let mut heron = start(&[]);
    heron.send_line(&format!("[{}]", initialize(json!(1))));
    let error = expect_error(&heron, Value::Null, INVALID_REQUEST);
    assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("batch")), "error: {error}");
    heron.send_line("[]");
    expect_error(&heron, Value::Null, INVALID_REQUEST);
    assert_serves(&mut heron, json!(2));
    finish(heron);
}

#[test]
fn jsonrpc_1_0_is_invalid_request_under_the_request_id() {
    let mut heron = start(&[]);
    heron.send_line(r#"{"jsonrpc":"1.0","id":5,"method":"initialize","params":{"protocolVersion":1}}"#);
    expect_error(&heron, json!(5), INVALID_REQUEST);
    assert_serves(&mut heron, json!(6));
    finish(heron);
}

#[test]
fn ids_that_are_not_string_int64_or_null_are_invalid_request_with_id_null() {
    let mut heron = start(&[]);
    for id in ["1.5", "1e3", r#"{"a":1}"#, "[1]", "true", "18446744073709551616", "9223372036854775808"] {
        heron.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":1}}}}"#
        ));
        let error = expect_error(&heron, Value::Null, INVALID_REQUEST);
        assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("id")), "id {id}: {error}");
    }
    // The int64 extremes are ids like any other.
    assert_serves(&mut heron, json!(i64::MAX));
    assert_serves(&mut heron, json!(i64::MIN));
    finish(heron);
}

#[test]
fn a_numeric_method_is_invalid_request_under_the_id() {
    let mut heron = start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":3,"method":42}"#);
    expect_error(&heron, json!(3), INVALID_REQUEST);
    assert_serves(&mut heron, json!(4));
    finish(heron);
}

#[test]
fn string_params_are_invalid_request_under_the_id() {
    let mut heron = start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":"protocolVersion=1"}"#);
    expect_error(&heron, json!(4), INVALID_REQUEST);
    assert_serves(&mut heron, json!(5));
    finish(heron);
}

#[test]
fn session_cancel_sent_with_an_id_is_method_not_found() {
    let mut heron = start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":9,"method":"session/cancel","params":{"sessionId":"s-1"}}"#);
    let error = expect_error(&heron, json!(9), METHOD_NOT_FOUND);
    assert_eq!(error["data"]["method"], "session/cancel");
    assert_serves(&mut heron, json!(10));
    finish(heron);
}

#[test]
fn unknown_notifications_get_no_answer() {
    let mut heron = start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"_vendor/ping","params":{"n":1}}"#);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"does/not/exist"}"#);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"nobody"}}"#);
    // Its answer comes next, and `finish` checks nothing else was ever written.
    assert_serves(&mut heron, json!(1));
    finish(heron);
}

/// 10,000 requests written before a single answer is read: the process must keep reading
/// while its output is stalled, then answer every id exactly once.
#[test]
fn ten_thousand_pipelined_requests_are_each_answered_once() {
    const COUNT: usize = 10_000;
    let mut heron = launch(&[]).env("HERON_LOG", "warn").unread().start();
    let mut stdin = heron.stdin.take().expect("stdin is open");
    let (done, written) = mpsc::channel();
    let writer = thread::spawn(move || {
        let mut batch = String::new();
        for n in 0..COUNT {
            // Half integer ids, half string ids.
            let id = if n % 2 == 0 { json!(n) } else { json!(format!("r{n}")) };
            batch.push_str(&initialize(id));
            batch.push('\n');
        }
        let result = stdin.write_all(batch.as_bytes()).and_then(|()| stdin.flush());
        let _ = done.send(result.map_err(|err| err.to_string()));
        stdin
    });
    match written.recv_timeout(support::PROCESS_WAIT) {
        Ok(result) => result.expect("write the requests"),
        Err(_) => panic!("heron stopped reading its input while its output was not being read"),
    }
    heron.stdin = Some(writer.join().expect("writer thread"));
    heron.read_stdout();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..COUNT {
        let answer = heron.next();
        assert_eq!(answer["result"]["protocolVersion"], 1, "answer: {answer}");
        assert!(seen.insert(answer["id"].to_string()), "answered twice: {answer}");
    }
    for n in 0..COUNT {
        let id = if n % 2 == 0 { json!(n) } else { json!(format!("r{n}")) };
        assert!(seen.contains(&id.to_string()), "never answered: {id}");
    }
    finish(heron);
}

#[test]
fn stdout_carries_only_json_rpc_even_with_trace_logging_and_forced_colour() {
    let mut heron = launch(&[])
        .env("HERON_LOG", "trace")
        .env("CLICOLOR_FORCE", "1")
        .env("FORCE_COLOR", "1")
        .env("TERM", "xterm-256color")
        .start();
    heron.send_bytes(b"garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}\n");
    expect_error(&heron, Value::Null, PARSE_ERROR);
    expect_error(&heron, json!(1), METHOD_NOT_FOUND);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s-1"}}"#);
    assert_serves(&mut heron, json!(2));
    // `next` already checked every stdout line; the logs went to stderr.
    let stderr = finish(heron);
    assert!(stderr.contains("TRACE") || stderr.contains("DEBUG"), "no logs on stderr:\n{stderr}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escapes in the log:\n{stderr}");
}

#[test]
fn stdin_eof_exits_with_status_zero_within_two_seconds() {
    let mut heron = start(&[]);
    assert_serves(&mut heron, json!(1));
    // `finish` closes stdin and enforces the exit status and deadline.
    finish(heron);
}

#[test]
fn eof_inside_a_message_answers_parse_error_then_exits_zero() {
    let mut heron = start(&[]);
    assert_serves(&mut heron, json!(1));
    heron.send_bytes(br#"{"jsonrpc":"2.0","id":2,"method":"initia"#);
    let (rest, _) = finish_with(heron, 1);
    assert_eq!(rest.len(), 1, "the cut message is answered: {rest:?}");
    assert_eq!((&rest[0]["id"], &rest[0]["error"]["code"]), (&Value::Null, &json!(PARSE_ERROR)));
}
