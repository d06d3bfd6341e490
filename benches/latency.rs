//! What Heron adds to a turn on top of the model: the time from the first model byte on the
//! wire to the first `agent_message_chunk` the editor reads, and the whole turn minus the
//! model's own time, against an OpenAI-compatible endpoint on loopback whose connection is
//! cold (the turn opens it) or warm (kept alive from the turn before), and for a scripted
//! text turn, where the model's own time is nil. The optimised binary runs over real pipes;
//! the endpoint runs in this process, so its clock and the editor's are the same clock.
//! Each criterion sample is one measured latency (`iter_custom`), so the reported median is
//! the latency itself, not a loop time. The workspace is a git repository, as a user's is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

#[path = "support/spawned.rs"]
mod spawned;
use spawned::Spawned;

const HERON: &str = env!("CARGO_BIN_EXE_heron");

/// The binary measured: `HERON_BENCH_BIN` when set (to compare two builds with one harness),
/// else the one this bench was built with.
fn heron() -> std::path::PathBuf {
    std::env::var_os("HERON_BENCH_BIN").map_or_else(|| HERON.into(), Into::into)
}

/// How long the endpoint "thinks" before its first byte, and between its two text deltas:
/// long enough that Heron's own work cannot hide inside the model's time.
const THINK: Duration = Duration::from_millis(3);

/// The samples each case takes; a cold one spawns a process per sample.
const SAMPLES: usize = 20;

/// When the endpoint received a request, sent its first body byte and its last byte.
#[derive(Debug, Clone, Copy)]
struct ModelTimes {
    received: Instant,
    first_byte: Instant,
    last_byte: Instant,
}

/// A loopback Chat Completions endpoint streaming two text deltas per request, with
/// keep-alive, reporting its timings on a channel.
fn start_endpoint() -> (u16, Receiver<ModelTimes>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    let (times, received) = channel();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let times = times.clone();
            thread::spawn(move || serve_connection(stream, &times));
        }
    });
    (port, received)
}

/// Answers requests on one connection until the client closes it.
fn serve_connection(stream: TcpStream, times: &Sender<ModelTimes>) {
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    while let Some(received) = read_request(&mut reader) {
        thread::sleep(THINK);
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let first = sse(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"The build "}}]}"#);
        let first_byte = Instant::now();
        if writer.write_all(format!("{head}{}", chunk(&first)).as_bytes()).is_err() {
            return;
        }
        thread::sleep(THINK);
        let rest = [
            sse(r#"{"choices":[{"index":0,"delta":{"content":"passes."}}]}"#),
            sse(
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#,
            ),
            "data: [DONE]\n\n".to_owned(),
        ];
        let body: String = rest.iter().map(|event| chunk(event)).collect();
        if writer.write_all(format!("{body}0\r\n\r\n").as_bytes()).is_err() {
            return;
        }
        let last_byte = Instant::now();
        let _ = times.send(ModelTimes { received, first_byte, last_byte });
    }
}

fn sse(data: &str) -> String {
    format!("data: {data}\n\n")
}

fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

/// Reads one request (head and `content-length` body); `None` once the client is gone.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Instant> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Instant::now())
}

/// A `heron acp` process with one open session.
struct Agent {
    heron: Spawned,
    session: String,
}

/// What one prompt looked like from the editor's side.
struct TurnSeen {
    sent: Instant,
    first_chunk: Instant,
    answered: Instant,
}

impl Agent {
    fn start(home: &Path, workspace: &Path) -> Self {
        let mut heron = Spawned::start(&heron(), &["acp"], home);
        let opened = heron.call("session/new", json!({ "cwd": workspace, "mcpServers": [] }));
        let session = opened["sessionId"].as_str().expect("a session id").to_owned();
        Self { heron, session }
    }

    /// Moves to a new session of the same process, on `model`.
    fn fresh_session(&mut self, workspace: &Path, model: &str) {
        let opened = self.heron.call("session/new", json!({ "cwd": workspace, "mcpServers": [] }));
        self.session = opened["sessionId"].as_str().expect("a session id").to_owned();
        self.set_model(model);
    }

    fn set_model(&mut self, model: &str) {
        self.heron.call("session/set_model", json!({ "sessionId": self.session, "modelId": model }));
    }

    fn prompt(&mut self) -> TurnSeen {
        let params = json!({
            "sessionId": self.session,
            "prompt": [{ "type": "text", "text": "Does the build pass?" }],
        });
        let mut first_chunk = None;
        let sent = Instant::now();
        let answer = self.heron.call_watching("session/prompt", params, |line| {
            if first_chunk.is_none() && line.contains(r#""sessionUpdate":"agent_message_chunk""#) {
                first_chunk = Some(Instant::now());
            }
        });
        let answered = Instant::now();
        assert_eq!(answer["stopReason"], "end_turn", "the turn did not end normally: {answer}");
        TurnSeen { sent, first_chunk: first_chunk.expect("the turn streamed a chunk"), answered }
    }
}

/// A home whose default model is the loopback endpoint (`http`) or the scripted one.
fn home(port: u16) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("a temporary HERON_HOME");
    let config = format!(
        "default_model = \"loopback/m\"\n\n[providers.loopback]\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:{port}/v1\"\nmodels = [\"m\"]\n\n\
         [providers.text]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"text.jsonl\"\n"
    );
    std::fs::write(home.path().join("config.toml"), config).expect("write config.toml");
    std::fs::write(home.path().join("text.jsonl"), "{\"steps\": [{\"text\": \"The build passes.\"}]}\n")
        .expect("write the script");
    home
}

/// A workspace that is a git repository with one commit, as an editor's user's is: each
/// turn starts by taking its git facts (branch, and whether tracked files changed).
fn repository() -> tempfile::TempDir {
    let workspace = tempfile::tempdir().expect("a workspace");
    std::fs::write(workspace.path().join("README.md"), "# A project\n").expect("write a file");
    for args in [&["init", "-q"][..], &["add", "README.md"], &["commit", "-q", "-m", "start"]] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(workspace.path())
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.com")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.com")
            .status()
            .expect("the latency bench works in a git repository: it needs git");
        assert!(status.success(), "git {args:?}");
    }
    workspace
}

/// The two figures of one HTTP turn.
fn http_turn(agent: &mut Agent, times: &Receiver<ModelTimes>) -> (Duration, Duration) {
    while times.try_recv().is_ok() {}
    let seen = agent.prompt();
    let model = times.recv_timeout(Duration::from_secs(30)).expect("the endpoint served the turn");
    let first_chunk = seen.first_chunk.saturating_duration_since(model.first_byte);
    let turn = seen.answered.duration_since(seen.sent);
    let model_time = model.last_byte.duration_since(model.received);
    (first_chunk, turn.saturating_sub(model_time))
}

fn latency(c: &mut Criterion) {
    let (port, times) = start_endpoint();
    let home = home(port);
    let workspace = repository();
    let mut group = c.benchmark_group("latency");
    group.sample_size(SAMPLES);

    // Cold: each sample is the first turn of a fresh process, so the turn opens the connection.
    let mut cold = Vec::new();
    group.bench_function("first_chunk_cold", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let mut agent = Agent::start(home.path(), workspace.path());
                    let (first_chunk, overhead) = http_turn(&mut agent, &times);
                    cold.push(overhead);
                    first_chunk
                })
                .sum()
        })
    });
    report("turn overhead, cold connection", &mut cold);

    // Warm: one process, one session; the connection from the turn before is reused.
    let mut agent = Agent::start(home.path(), workspace.path());
    http_turn(&mut agent, &times);
    let mut warm = Vec::new();
    group.bench_function("first_chunk_warm", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let (first_chunk, overhead) = http_turn(&mut agent, &times);
                    warm.push(overhead);
                    first_chunk
                })
                .sum()
        })
    });
    report("turn overhead, warm connection", &mut warm);

    // Scripted: the model takes no time, so the whole turn is Heron's.
    agent.set_model("text/m");
    group.bench_function("scripted_turn", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let seen = agent.prompt();
                    seen.answered.duration_since(seen.sent)
                })
                .sum()
        })
    });
    // The same in a session of its own each time: its second turn (the first sets the
    // title and writes the transcript whole), before a long history weighs on the request.
    group.bench_function("scripted_turn_fresh_session", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    agent.fresh_session(workspace.path(), "text/m");
                    agent.prompt();
                    let seen = agent.prompt();
                    seen.answered.duration_since(seen.sent)
                })
                .sum()
        })
    });
    group.finish();
}

/// Prints the median and spread of the overheads collected beside a timed case.
fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    if let (Some(low), Some(high)) = (samples.first(), samples.last()) {
        let median = samples[samples.len() / 2];
        println!("{what}: median {median:.2?} ({low:.2?} to {high:.2?}, {} turns)", samples.len());
    }
}

criterion_group!(benches, latency);
criterion_main!(benches);
