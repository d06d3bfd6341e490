//! Hostile input against the real `heron acp --validate` process: garbage, broken framing,
//! broken envelopes, floods and oversized lines. Each is answered exactly as JSON-RPC 2.0
//! and ACP say, the process keeps serving, stdout carries nothing but JSON-RPC lines, and
//! stdin EOF ends the process with status 0 within two seconds.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one answer may take: a debug build on two cores shared with other builds.
const WAIT: Duration = Duration::from_secs(30);

/// How long the process may take to exit once stdin is closed.
const EXIT_WAIT: Duration = Duration::from_secs(2);

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// The default `--max-line-bytes`.
const DEFAULT_MAX_LINE: u64 = 64 * 1024 * 1024;

const MIB: usize = 1024 * 1024;

/// An `initialize` request under `id`, as one line without its terminator.
fn initialize(id: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1}}).to_string()
}

/// A running `heron acp --validate` with piped stdio.
struct Heron {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Every stdout line, checked and parsed by the reader thread; `Err` says what was wrong.
    answers: Option<Receiver<Result<Value, String>>>,
    stderr: Option<JoinHandle<String>>,
}

impl Heron {
    /// Starts the process with `extra` arguments and reads its stdout at once.
    fn start(extra: &[&str]) -> Self {
        let mut heron = Self::start_unread(extra, &[("HERON_LOG", "warn")]);
        heron.read_stdout();
        heron
    }

    /// Starts the process without reading its stdout until [`Heron::read_stdout`].
    fn start_unread(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_heron"));
        command
            .args(["acp", "--validate"])
            .args(extra)
            .env_remove("HERON_VALIDATE")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn heron");
        let mut stderr = child.stderr.take().expect("piped stderr");
        // Drained all along, so a chatty log can never block the process on a full pipe.
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            answers: None,
            stderr: Some(stderr),
        }
    }

    /// Starts the thread that reads, checks and parses every stdout line.
    fn read_stdout(&mut self) {
        let stdout = self.stdout.take().expect("stdout is read once");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(check_stdout_line(&line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        self.answers = Some(rx);
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).and_then(|()| stdin.flush()).expect("write to heron");
    }

    fn send_line(&mut self, line: &str) {
        self.send(format!("{line}\n").as_bytes());
    }

    /// The next stdout message; fails the test on a bad line or after [`WAIT`].
    fn next(&self) -> Value {
        let answers = self.answers.as_ref().expect("stdout is being read");
        match answers.recv_timeout(WAIT) {
            Ok(Ok(message)) => message,
            Ok(Err(problem)) => panic!("{problem}"),
            Err(RecvTimeoutError::Timeout) => panic!("no answer within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout closed while an answer was due"),
        }
    }

    /// Reads the next message and checks it is error `code` under `id`; returns the error.
    fn expect_error(&self, id: Value, code: i64) -> Value {
        let answer = self.next();
        assert_eq!((&answer["id"], &answer["error"]["code"]), (&id, &json!(code)), "answer: {answer}");
        assert!(answer.get("result").is_none(), "an error answer carries a result: {answer}");
        answer["error"].clone()
    }

    /// Reads the next message and checks it is a successful `initialize` answer under `id`.
    fn expect_initialized(&self, id: Value) {
        let answer = self.next();
        assert_eq!(answer["id"], id, "answer: {answer}");
        assert_eq!(answer["result"]["protocolVersion"], 1, "answer: {answer}");
    }

    /// Proves the connection still serves: an `initialize` under `id` gets its answer next.
    fn assert_serves(&mut self, id: Value) {
        self.send_line(&initialize(id.clone()));
        self.expect_initialized(id);
    }

    /// The peak resident memory of the process so far (`VmHWM`), in bytes.
    fn peak_memory(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read status");
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in status");
        let kib: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmHWM in kB");
        kib * 1024
    }

    /// Closes stdin; the process must exit 0 within [`EXIT_WAIT`] and write nothing more
    /// than `rest` answers. Returns those answers and everything logged to stderr.
    fn finish_with(mut self, rest: usize) -> (Vec<Value>, String) {
        drop(self.stdin.take());
        let closed = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for heron") {
                break status;
            }
            assert!(closed.elapsed() < EXIT_WAIT, "heron still running {EXIT_WAIT:?} after stdin EOF");
            thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.take().expect("stderr joined once").join().expect("stderr thread");
        assert!(status.success(), "heron exited with {status} after EOF; stderr:\n{stderr}");
        let mut answers = Vec::new();
        if let Some(rx) = self.answers.take() {
            // The process is gone, so the reader thread ends at EOF and this terminates.
            for message in rx {
                answers.push(message.unwrap_or_else(|problem| panic!("{problem}")));
            }
        }
        assert!(answers.len() <= rest, "unexpected output after the last answer: {answers:?}");
        (answers, stderr)
    }

    /// Closes stdin and checks a clean exit with no output beyond what was read.
    fn finish(self) -> String {
        self.finish_with(0).1
    }
}

impl Drop for Heron {
    fn drop(&mut self) {
        // Only on a failed test: the process is still running, so stop it by its own handle.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Checks one raw stdout line: LF-terminated, no ANSI escape, exactly one JSON-RPC 2.0
/// object (a response with exactly one of `result` and `error`, or a request or
/// notification with a string `method`).
fn check_stdout_line(line: &[u8]) -> Result<Value, String> {
    let shown = String::from_utf8_lossy(line);
    let text = line.strip_suffix(b"\n").ok_or_else(|| format!("stdout ended mid-line: {shown:?}"))?;
    if text.contains(&0x1b) {
        return Err(format!("ANSI escape on stdout: {shown:?}"));
    }
    let message: Value = serde_json::from_slice(text)
        .map_err(|err| format!("stdout line is not one JSON value ({err}): {shown:?}"))?;
    let Some(object) = message.as_object() else {
        return Err(format!("stdout line is not a JSON object: {shown:?}"));
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(format!("stdout line is not JSON-RPC 2.0: {shown:?}"));
    }
    let shape_ok = match (object.get("method"), object.get("result"), object.get("error")) {
        (Some(method), None, None) => method.is_string(),
        (None, Some(_), None) => object.contains_key("id"),
        (None, None, Some(error)) => {
            object.contains_key("id") && error["code"].is_i64() && error["message"].is_string()
        }
        _ => false,
    };
    if !shape_ok {
        return Err(format!("stdout line is not a JSON-RPC request, notification or response: {shown:?}"));
    }
    Ok(message)
}

#[test]
fn leading_garbage_blank_lines_and_crlf_are_tolerated() {
    let mut heron = Heron::start(&[]);
    heron.send(b"Windows PowerShell profile loaded.\r\n\n\r\n   \t\r\n\n");
    heron.send(format!("{}\r\n\r\n", initialize(json!(1))).as_bytes());
    heron.expect_error(Value::Null, PARSE_ERROR);
    heron.expect_initialized(json!(1));
    heron.finish();
}

#[test]
fn a_byte_order_mark_before_the_first_message_is_dropped() {
    let mut heron = Heron::start(&[]);
    heron.send(format!("\u{feff}{}\r\n", initialize(json!(1))).as_bytes());
    heron.expect_initialized(json!(1));
    heron.finish();
}

#[test]
fn a_byte_order_mark_alone_on_a_line_is_skipped_like_a_blank_line() {
    let mut heron = Heron::start(&[]);
    heron.send("\u{feff}\r\n".as_bytes());
    heron.assert_serves(json!(1));
    heron.finish();
}

#[test]
fn invalid_utf8_in_a_line_is_a_parse_error_and_the_next_line_is_served() {
    let mut heron = Heron::start(&[]);
    heron.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"x\":\"\xff\xfe\xc3\"}}\n");
    let error = heron.expect_error(Value::Null, PARSE_ERROR);
    assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("UTF-8")), "error: {error}");
    heron.assert_serves(json!(1));
    heron.finish();
}

#[test]
fn a_message_split_inside_a_multibyte_character_is_reassembled() {
    let mut heron = Heron::start(&[]);
    let line = format!("{}\n", initialize(json!("héron-🦩")));
    let bytes = line.as_bytes();
    // The flamingo is four bytes; cut after its second.
    let cut = line.find('🦩').expect("the id holds the emoji") + 2;
    heron.send(&bytes[..cut]);
    thread::sleep(Duration::from_millis(100));
    heron.send(&bytes[cut..]);
    heron.expect_initialized(json!("héron-🦩"));
    heron.finish();
}

#[test]
fn u2028_and_u2029_inside_strings_are_content_not_line_breaks() {
    let mut heron = Heron::start(&[]);
    // serde_json writes both characters raw, as Node's readline would wrongly split on.
    let id = json!("a\u{2028}b\u{2029}c");
    let line = initialize(id.clone());
    assert!(line.contains('\u{2028}'), "the request carries a raw U+2028: {line}");
    heron.send_line(&line);
    heron.expect_initialized(id);
    heron.finish();
}

#[test]
fn deep_nesting_is_answered_not_a_crash() {
    let mut heron = Heron::start(&[]);
    // 256 KiB of unclosed brackets: the line never becomes a value.
    heron.send_line(&"[".repeat(256 * 1024));
    heron.expect_error(Value::Null, PARSE_ERROR);
    // Balanced but 100,000 deep inside params: past serde_json's recursion limit of 128.
    let depth = 100_000;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"initialize","params":{{"protocolVersion":1,"_meta":{{"x":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    heron.send_line(&deep);
    heron.expect_error(json!(2), INVALID_PARAMS);
    heron.assert_serves(json!(3));
    heron.finish();
}

/// Writes a line of `len` bytes of `x` plus its LF, one MiB at a time, so the test never
/// holds the whole line.
fn send_long_line(heron: &mut Heron, len: usize) {
    let chunk = vec![b'x'; MIB];
    for _ in 0..len / MIB {
        heron.send(&chunk);
    }
    heron.send(&chunk[..len % MIB]);
    heron.send(b"\n");
}

/// A 70 MiB line with the default 64 MiB limit is answered -32600, the limit named in
/// `data`. Memory: the reader must hold up to the limit before it knows the line is too
/// long, so the peak may grow by one limit's worth (64 MiB) plus slack, never by the
/// 70 MiB line, let alone a doubling buffer's 128 MiB. The test below proves the discard
/// itself is unbuffered.
#[test]
fn a_line_over_the_default_limit_is_rejected_naming_the_limit() {
    let mut heron = Heron::start(&[]);
    heron.assert_serves(json!(1));
    let before = heron.peak_memory();
    send_long_line(&mut heron, 70 * MIB);
    let error = heron.expect_error(Value::Null, INVALID_REQUEST);
    assert_eq!(error["data"]["maxLineBytes"], DEFAULT_MAX_LINE, "error: {error}");
    heron.assert_serves(json!(2));
    let grown = heron.peak_memory().saturating_sub(before);
    assert!(grown < DEFAULT_MAX_LINE + 8 * MIB as u64, "peak memory grew {} MiB", grown / MIB as u64);
    heron.finish();
}

/// With a 1 MiB limit a 32 MiB line must cost about 1 MiB: the rest is dropped as it is
/// read. 8 MiB of slack covers allocator and runtime noise; buffering the line would
/// show as 32 MiB or more.
#[test]
fn an_endless_line_is_dropped_without_being_buffered() {
    let mut heron = Heron::start(&["--max-line-bytes", "1048576"]);
    heron.assert_serves(json!(1));
    let before = heron.peak_memory();
    send_long_line(&mut heron, 32 * MIB);
    let error = heron.expect_error(Value::Null, INVALID_REQUEST);
    assert_eq!(error["data"]["maxLineBytes"], MIB, "error: {error}");
    heron.assert_serves(json!(2));
    let grown = heron.peak_memory().saturating_sub(before);
    assert!(grown < 8 * MIB as u64, "peak memory grew {} MiB for a 1 MiB limit", grown / MIB as u64);
    heron.finish();
}

#[test]
fn a_batch_is_invalid_request_with_id_null() {
    let mut heron = Heron::start(&[]);
    heron.send_line(&format!("[{}]", initialize(json!(1))));
    let error = heron.expect_error(Value::Null, INVALID_REQUEST);
    assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("batch")), "error: {error}");
    heron.send_line("[]");
    heron.expect_error(Value::Null, INVALID_REQUEST);
    heron.assert_serves(json!(2));
    heron.finish();
}

#[test]
fn jsonrpc_1_0_is_invalid_request_under_the_request_id() {
    let mut heron = Heron::start(&[]);
    heron.send_line(r#"{"jsonrpc":"1.0","id":5,"method":"initialize","params":{"protocolVersion":1}}"#);
    heron.expect_error(json!(5), INVALID_REQUEST);
    heron.assert_serves(json!(6));
    heron.finish();
}

#[test]
fn ids_that_are_not_string_int64_or_null_are_invalid_request_with_id_null() {
    let mut heron = Heron::start(&[]);
    for id in ["1.5", "1e3", r#"{"a":1}"#, "[1]", "true", "18446744073709551616", "9223372036854775808"] {
        heron.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":1}}}}"#
        ));
        let error = heron.expect_error(Value::Null, INVALID_REQUEST);
        assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("id")), "id {id}: {error}");
    }
    // The int64 extremes are ids like any other.
    heron.assert_serves(json!(i64::MAX));
    heron.assert_serves(json!(i64::MIN));
    heron.finish();
}

#[test]
fn a_numeric_method_is_invalid_request_under_the_id() {
    let mut heron = Heron::start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":3,"method":42}"#);
    heron.expect_error(json!(3), INVALID_REQUEST);
    heron.assert_serves(json!(4));
    heron.finish();
}

#[test]
fn string_params_are_invalid_request_under_the_id() {
    let mut heron = Heron::start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":"protocolVersion=1"}"#);
    heron.expect_error(json!(4), INVALID_REQUEST);
    heron.assert_serves(json!(5));
    heron.finish();
}

#[test]
fn session_cancel_sent_with_an_id_is_method_not_found() {
    let mut heron = Heron::start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","id":9,"method":"session/cancel","params":{"sessionId":"s-1"}}"#);
    let error = heron.expect_error(json!(9), METHOD_NOT_FOUND);
    assert_eq!(error["data"]["method"], "session/cancel");
    heron.assert_serves(json!(10));
    heron.finish();
}

#[test]
fn unknown_notifications_get_no_answer() {
    let mut heron = Heron::start(&[]);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"_vendor/ping","params":{"n":1}}"#);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"does/not/exist"}"#);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"nobody"}}"#);
    // Its answer comes next, and `finish` checks nothing else was ever written.
    heron.assert_serves(json!(1));
    heron.finish();
}

/// 10,000 requests written before a single answer is read: the process must keep reading
/// while its output is stalled, then answer every id exactly once.
#[test]
fn ten_thousand_pipelined_requests_are_each_answered_once() {
    const COUNT: usize = 10_000;
    let mut heron = Heron::start_unread(&[], &[("HERON_LOG", "warn")]);
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
    match written.recv_timeout(WAIT) {
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
    heron.finish();
}

#[test]
fn stdout_carries_only_json_rpc_even_with_trace_logging_and_forced_colour() {
    let env =
        [("HERON_LOG", "trace"), ("CLICOLOR_FORCE", "1"), ("FORCE_COLOR", "1"), ("TERM", "xterm-256color")];
    let mut heron = Heron::start_unread(&[], &env);
    heron.read_stdout();
    heron.send(b"garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}\n");
    heron.expect_error(Value::Null, PARSE_ERROR);
    heron.expect_error(json!(1), METHOD_NOT_FOUND);
    heron.send_line(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s-1"}}"#);
    heron.assert_serves(json!(2));
    // `next` already checked every stdout line; the logs went to stderr.
    let stderr = heron.finish();
    assert!(stderr.contains("TRACE") || stderr.contains("DEBUG"), "no logs on stderr:\n{stderr}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escapes in the log:\n{stderr}");
}

#[test]
fn stdin_eof_exits_with_status_zero_within_two_seconds() {
    let mut heron = Heron::start(&[]);
    heron.assert_serves(json!(1));
    // `finish` closes stdin and enforces the exit status and deadline.
    heron.finish();
}

#[test]
fn eof_inside_a_message_answers_parse_error_then_exits_zero() {
    let mut heron = Heron::start(&[]);
    heron.assert_serves(json!(1));
    heron.send(br#"{"jsonrpc":"2.0","id":2,"method":"initia"#);
    let (rest, _) = heron.finish_with(1);
    assert_eq!(rest.len(), 1, "the cut message is answered: {rest:?}");
    assert_eq!((&rest[0]["id"], &rest[0]["error"]["code"]), (&Value::Null, &json!(PARSE_ERROR)));
}
