//! llama-cpp-python's OpenAI-compatible server for the live provider tests: the Python and
//! model file `scripts/install-llama-server` installs (`.ci/run` sets `HERON_LLAMA_PYTHON`
//! and `HERON_LLAMA_MODEL`), started once for the whole test binary on a free loopback
//! port, ready once `/v1/models` answers, and lent to one test at a time ([`lease`]).
//!
//! One server, one test at a time: the server runs one request at a time anyway, a test
//! that cancels a generation must not hold up another's, and each request after the first
//! reuses the server's cache of the prompt it shares with the request before (Heron's system
//! prompt), which on a small machine is most of a request's time. The server's output goes
//! to a log the tests read for what it saw, and a failed test shows its part.
//!
//! The server is never dropped (it lives in a static), so it is started behind a watch on
//! its stdin, which only this process holds: when the test binary ends, however it ends,
//! the server exits.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::clients;

/// The server's context window, in tokens: the 4,096 a prompt of 6,500 digits once got
/// through to, and room for Heron's system prompt and a few short turns.
pub const WINDOW: u64 = 4096;

/// How long the server may take to load its model and answer: a cold page cache on two
/// shared cores.
const READY_WAIT: Duration = Duration::from_secs(120);

/// `python -m llama_cpp.server ARGS...`, exiting when stdin closes.
const WATCHED_SERVER: &str = "\
import os, runpy, sys, threading
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
sys.argv = ['llama_cpp.server', *sys.argv[1:]]
runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)
";

/// The running server.
pub struct LlamaServer {
    child: Child,
    /// Held open for the life of this process: its end stops the server.
    _stdin: ChildStdin,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The server, lent to one test: its output from the lease on is the test's.
pub struct Lease {
    server: MutexGuard<'static, LlamaServer>,
    /// Where the test's part of the log starts.
    from: usize,
}

/// The shared server, started on first use and then lent to one test at a time; `None`
/// after a loud skip when none is installed (a failure where `HERON_REQUIRE_CLIENTS`
/// requires one).
pub fn lease() -> Option<Lease> {
    static SERVER: OnceLock<Mutex<LlamaServer>> = OnceLock::new();
    let python = installed("HERON_LLAMA_PYTHON", "llama-cpp-python's server")?;
    let model = installed("HERON_LLAMA_MODEL", "the SmolLM2-135M-Instruct model file")?;
    // A test that failed holding the server leaves it usable: its request ended with it.
    let server = SERVER
        .get_or_init(|| Mutex::new(LlamaServer::start(&python, &model)))
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let from = server.log().len();
    Some(Lease { server, from })
}

impl LlamaServer {
    fn start(python: &PathBuf, model: &PathBuf) -> LlamaServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("server.log");
        let output = std::fs::File::create(&log).expect("server log");
        let port = free_port();
        let mut child = Command::new(python)
            .args(["-c", WATCHED_SERVER, "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--model")
            .arg(model)
            .args(["--n_ctx", &WINDOW.to_string(), "--verbose", "False"])
            // What it prints on a client's disconnect reaches the log when it happens.
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(output.try_clone().expect("server log"))
            .stderr(output)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let stdin = child.stdin.take().expect("the server's stdin");
        let mut server = LlamaServer { child, _stdin: stdin, port, log, _dir: dir };
        server.wait_ready();
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let began = Instant::now();
        while began.elapsed() < READY_WAIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the llama server exited ({status}) before it was ready:\n{}", self.log());
            }
            if answers_models(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the llama server was not ready within {READY_WAIT:?}:\n{}", self.log());
    }
}

impl Lease {
    /// The OpenAI API's root, for `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.server.port)
    }

    /// What the server printed during this lease.
    pub fn log(&self) -> String {
        self.server.log().get(self.from..).unwrap_or_default().to_owned()
    }

    /// How many requests for `path` the server answered during this lease (its access log).
    pub fn requests(&self, path: &str) -> usize {
        let line = format!("\"POST {path} HTTP/1.1\"");
        self.log().lines().filter(|l| l.contains(&line)).count()
    }

    /// Whether the server prints `words` within `limit` (it prints some events just after
    /// they happen).
    pub fn prints_within(&self, words: &str, limit: Duration) -> bool {
        let began = Instant::now();
        while began.elapsed() < limit {
            if self.log().contains(words) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // A failed test shows what the server saw.
        if std::thread::panicking() {
            eprintln!("the llama server's output during the test:\n{}", self.log());
        }
    }
}

/// The path in `var`, or `None` after a skip.
fn installed(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            clients::skip(var, what);
            None
        }
    }
}

/// A loopback port nothing listens on now. Another process could take it before the server
/// binds it; the server then exits and the test fails saying why.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Whether `GET /v1/models` answers 200.
fn answers_models(port: u16) -> bool {
    let Ok(mut socket) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if socket.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    socket.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}
