//! A small OpenAI-compatible Chat Completions endpoint on 127.0.0.1 for the binary's tests:
//! request n gets reply n, streamed as server-sent events.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::{Value, json};

/// What the endpoint answers to one request.
pub enum Reply {
    /// These SSE events, then the end of the stream.
    Events(Vec<Value>),
    /// These events, then nothing until the client hangs up.
    Stall(Vec<Value>),
    /// `count` events made by `make(i)`, written as fast as the client takes them, then the
    /// end of the stream; it stops when the client hangs up.
    Generated {
        /// How many events.
        count: usize,
        /// The `i`th event.
        make: Box<dyn Fn(usize) -> Value + Send>,
    },
}

/// Starts the endpoint; returns its base URL (`http://127.0.0.1:PORT/v1`).
pub fn endpoint(replies: Vec<Reply>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for (reply, socket) in replies.into_iter().zip(listener.incoming()) {
            let Ok(socket) = socket else { return };
            std::thread::spawn(move || answer(socket, reply));
        }
    });
    url
}

fn send(socket: &mut TcpStream, event: &Value) -> bool {
    let piece = format!("data: {event}\n\n");
    socket.write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes()).is_ok()
}

fn answer(mut socket: TcpStream, reply: Reply) {
    read_request(&mut socket);
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    let _ = socket.write_all(head.as_bytes());
    match reply {
        Reply::Events(events) => {
            for event in &events {
                send(&mut socket, event);
            }
        }
        Reply::Stall(events) => {
            for event in &events {
                send(&mut socket, event);
            }
            let _ = socket.flush();
            let _ = socket.read(&mut [0u8; 64]);
            return;
        }
        Reply::Generated { count, make } => {
            for i in 0..count {
                if !send(&mut socket, &make(i)) {
                    return;
                }
            }
        }
    }
    let done = "data: [DONE]\n\n";
    let _ = socket.write_all(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes());
}

fn read_request(socket: &mut TcpStream) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    while !data.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf) {
            Ok(n) if n > 0 => data.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&data).to_ascii_lowercase();
    let length = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let head_end = data.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
    let mut body = data.len() - head_end;
    while body < length {
        match socket.read(&mut buf) {
            Ok(n) if n > 0 => body += n,
            _ => return,
        }
    }
}

/// A chunk whose choice 0 carries `delta`.
pub fn delta(delta: Value) -> Value {
    json!({ "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
}

/// The chunk that ends choice 0 with `reason`.
pub fn finish(reason: &str) -> Value {
    json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": reason }] })
}

/// `config.toml` for a provider `net` at `url` whose key is `NET_KEY`, default model `net/m`.
pub fn config(url: &str, extra: &str) -> String {
    format!(
        "default_model = \"net/m\"\n{extra}[providers.net]\nkind = \"openai\"\nbase_url = \"{url}\"\napi_key_env = \"NET_KEY\"\nmodels = [\"m\"]\nmax_retries = 0\n"
    )
}
