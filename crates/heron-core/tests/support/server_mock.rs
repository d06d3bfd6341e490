//! A loopback HTTP/1.1 server that plays one model server: every request is recorded and
//! handed to a function that checks the shape that server requires and answers as it
//! would (an SSE body, or an error status with that server's error body). Shared by the
//! engine tests and the binary's tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `POST /path?query HTTP/1.1`.
    pub request_line: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`null` when it was not JSON).
    pub body: Value,
    /// The body's bytes as sent, for comparing requests byte for byte.
    pub raw: String,
}

impl Seen {
    /// The request in `head` (up to the blank line) and the body read so far, and how many
    /// body bytes are still to come by its `content-length`. Shared by the mocks that read
    /// blocking and the ones that read async.
    pub fn parse(head: &[u8], body: &[u8]) -> Option<(Seen, usize)> {
        let head = String::from_utf8_lossy(head);
        let mut lines = head.split("\r\n");
        let request_line = lines.next()?.to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let missing = length.saturating_sub(body.len());
        Some((Seen { request_line, headers, body: Value::Null, raw: String::new() }, missing))
    }

    /// Sets the body from its bytes (`null` when they are not JSON).
    pub fn with_body(mut self, body: &[u8]) -> Seen {
        self.body = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.raw = String::from_utf8_lossy(body).into_owned();
        self
    }

    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The request's path and query.
    pub fn target(&self) -> &str {
        self.request_line.split(' ').nth(1).unwrap_or("")
    }

    /// The messages of the body.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }
}

/// What the server answers.
pub enum Answer {
    /// 200 with this `text/event-stream` body, exactly as written.
    Stream(String),
    /// An error status with this body.
    Status(u16, String),
    /// An error status with these headers and this body.
    #[allow(dead_code, reason = "the binary's tests share this file and send no headers yet")]
    StatusWith(u16, Vec<(&'static str, String)>, String),
    /// 200 with an event stream that says nothing: a keep-alive comment every this often,
    /// for as long as the client listens.
    KeepAlive(std::time::Duration),
    /// An error status whose body starts with this and never ends: the connection stays
    /// open, sending nothing more, until the client hangs up.
    #[allow(dead_code, reason = "the binary's tests share this file and use no endless error yet")]
    StatusEndless(u16, String),
}

/// A running mock: its address and what it saw.
pub struct MockServer {
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl MockServer {
    /// Starts a server answering request n (from 0) with `answer(n, &request)`.
    pub fn start(answer: impl Fn(usize, &Seen) -> Answer + Send + Sync + 'static) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let Ok(socket) = socket else { return };
                let (recorded, answer) = (Arc::clone(&recorded), Arc::clone(&answer));
                std::thread::spawn(move || serve(socket, &recorded, &*answer));
            }
        });
        MockServer { origin, seen }
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn serve(
    mut socket: TcpStream,
    recorded: &Mutex<Vec<Seen>>,
    answer: &(dyn Fn(usize, &Seen) -> Answer + Sync),
) {
    let Some(request) = read_request(&mut socket) else { return };
    let number = {
        let mut all = recorded.lock().expect("lock");
        all.push(request.clone());
        all.len() - 1
    };
    let mut extra = String::new();
    let (status, kind, body) = match answer(number, &request) {
        Answer::Stream(body) => (200, "text/event-stream", body),
        Answer::Status(status, body) => (status, "application/json", body),
        Answer::StatusWith(status, headers, body) => {
            extra = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
            (status, "application/json", body)
        }
        Answer::KeepAlive(every) => {
            // No length: the body ends when the connection does.
            let head = "HTTP/1.1 200 Answer\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
            let _ = socket.write_all(head.as_bytes());
            while socket.write_all(b": keep-alive\n\n").and_then(|()| socket.flush()).is_ok() {
                std::thread::sleep(every);
            }
            return;
        }
        Answer::StatusEndless(status, body) => {
            // No length: the body ends when the connection does, which the server never ends.
            let head = format!(
                "HTTP/1.1 {status} Answer\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
            );
            let _ = socket.write_all(head.as_bytes());
            let _ = socket.write_all(body.as_bytes());
            let _ = socket.flush();
            let mut sink = [0u8; 1024];
            while matches!(socket.read(&mut sink), Ok(n) if n > 0) {}
            return;
        }
    };
    let head = format!(
        "HTTP/1.1 {status} Answer\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes());
    let _ = socket.write_all(body.as_bytes());
    let _ = socket.flush();
}

fn read_request(socket: &mut TcpStream) -> Option<Seen> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut buf).ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let mut body = data[head_end + 4..].to_vec();
    let (seen, missing) = Seen::parse(&data[..head_end], &body)?;
    let length = body.len() + missing;
    while body.len() < length {
        let n = socket.read(&mut buf).ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&buf[..n]);
    }
    Some(seen.with_body(&body))
}

/// An SSE body of `data:` events for `chunks`, then `[DONE]`, with `\n` line ends.
pub fn sse(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

/// The tool result message answering `call_id` in `request`, if any.
pub fn tool_result<'a>(request: &'a Seen, call_id: &str) -> Option<&'a str> {
    request
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
}
