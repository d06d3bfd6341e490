//! Costs of Heron's agent core behind the real `serve`: one prompt turn on the scripted model
//! (text only, and with a `todo_write` round), `session/load` of long stored sessions (time per
//! replayed event), and memory of the optimised binary (peak while loading, resident per open
//! session). Timings in process run over in-memory pipes, so they hold Heron's own work and no
//! process or pipe cost; memory is read from `/proc/<pid>/status` of a spawned `heron acp` and
//! printed as a summary after each case.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use heron::cli::acp::{AcpArgs, serve};
use heron_core::config::Home;
use heron_core::session::event::Event;
use heron_core::session::settings::{Effort, Mode, Posture, Preset, Settings};
use heron_store::{NewSession, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::runtime::Runtime;

#[path = "agent/history.rs"]
mod history;
use history::turn_events;

/// The binary the memory cases spawn: this build's, or `HERON_BENCH_BIN` (another build's,
/// to compare two versions with the same driver in the same run).
fn heron_bin() -> PathBuf {
    std::env::var_os("HERON_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_heron")), PathBuf::from)
}

/// How long the bench waits for any one line before it calls the agent stuck.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// Every agent notification starts with these bytes (`envelope::encode_notification`), so
/// the client tells them from answers without parsing them.
const NOTIFICATION: &str = r#"{"jsonrpc":"2.0","method":"#;

/// The advertisement that follows every `session/new` and `session/load` answer.
const COMMANDS_ADVERT: &str = r#""sessionUpdate":"available_commands_update""#;

/// Two scripted models: `text/m` answers with one short text, `tool/m` makes a plan with
/// `todo_write` (allowed without asking: it changes nothing) and then answers.
const CONFIG: &str = "[providers.text]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"text.jsonl\"\n\n\
                      [providers.tool]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"tool.jsonl\"\n";

const TEXT_SCRIPT: &str = r#"{"steps": [{"text": "The build passes on this branch; nothing needs to change."}]}
"#;

const TOOL_SCRIPT: &str = r#"{"steps": [{"text": "I'll plan this first."}, {"tool_call": {"name": "todo_write", "arguments": {"todos": [{"content": "Read the failing test", "status": "in_progress"}, {"content": "Fix the parser", "status": "pending"}, {"content": "Run the tests", "status": "pending", "priority": "low"}]}}}]}
{"steps": [{"text": "The plan is in place; starting with the failing test."}]}
"#;

const PROMPT: &str = "Does the build pass on this branch? Check before changing anything.";

/// Stored session sizes replayed by `session/load`.
const LOAD_SIZES: [usize; 3] = [1_000, 5_000, 10_000];

/// Open-session counts at which the idle resident memory is read.
const IDLE_CHECKPOINTS: [usize; 4] = [1, 50, 200, 1_000];

// ---------------------------------------------------------------------------------------------
// The editor's side of a connection.

/// An editor's end of one ACP connection, in process or to a spawned binary.
struct Client<W, R> {
    input: W,
    output: Lines<BufReader<R>>,
    next_id: u64,
}

/// What arrived for one request: the notification lines before its answer, and its `result`.
struct Reply {
    notes: Vec<String>,
    result: Value,
}

impl<W: AsyncWrite + Unpin, R: AsyncRead + Unpin> Client<W, R> {
    fn new(input: W, output: R) -> Self {
        Self { input, output: BufReader::new(output).lines(), next_id: 0 }
    }

    async fn next_line(&mut self, waiting_on: &str) -> String {
        tokio::time::timeout(LINE_TIMEOUT, self.output.next_line())
            .await
            .unwrap_or_else(|_| panic!("nothing from the agent for {LINE_TIMEOUT:?} during {waiting_on}"))
            .expect("read from the agent")
            .unwrap_or_else(|| panic!("the agent closed its output during {waiting_on}"))
    }

    /// Sends a request and reads until its answer; any error answer is a bench failure.
    async fn call(&mut self, method: &str, params: Value) -> Reply {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        line.push('\n');
        self.input.write_all(line.as_bytes()).await.expect("write a request");
        let mut notes = Vec::new();
        loop {
            let line = self.next_line(method).await;
            if line.starts_with(NOTIFICATION) {
                notes.push(line);
                continue;
            }
            let message: Value = serde_json::from_str(&line).expect("the agent writes JSON lines");
            assert!(
                message.get("method").is_none(),
                "the agent asked something the bench cannot answer: {line}"
            );
            assert!(message["id"] == id, "an answer to another request: {line}");
            match message.get("result") {
                Some(result) => return Reply { notes, result: result.clone() },
                None => panic!("{method} failed: {line}"),
            }
        }
    }

    /// Reads until a notification containing `marker` (one sent after an answer).
    async fn drain_until(&mut self, marker: &str) {
        while !self.next_line(marker).await.contains(marker) {}
    }

    async fn initialize(&mut self) {
        self.call("initialize", json!({ "protocolVersion": 1 })).await;
    }

    /// `session/new` in `cwd`, with its command advertisement read; returns the session id.
    async fn new_session(&mut self, cwd: &str) -> String {
        let reply = self.call("session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
        self.drain_until(COMMANDS_ADVERT).await;
        reply.result["sessionId"].as_str().expect("a session id").to_owned()
    }

    async fn close_session(&mut self, session: &str) {
        self.call("session/close", json!({ "sessionId": session })).await;
    }
}

type InProcess = Client<tokio::io::DuplexStream, tokio::io::DuplexStream>;

/// `serve` with `--model model` on in-memory pipes, as `tests/support` starts it.
fn start_in_process(rt: &Runtime, home: &BenchHome, model: &str) -> InProcess {
    let (editor_in, agent_in) = tokio::io::duplex(1 << 20);
    let (agent_out, editor_out) = tokio::io::duplex(1 << 20);
    let args = AcpArgs { model: Some(model.to_owned()), ..AcpArgs::default() };
    let home = Home::at(home.home());
    rt.spawn(async move { serve(agent_in, agent_out, &args, &home).await.expect("serve ends cleanly") });
    Client::new(editor_in, editor_out)
}

/// A spawned optimised `heron acp --model demo/demo` on `home`, initialised.
struct Spawned {
    child: Child,
    client: Client<ChildStdin, ChildStdout>,
}

impl Spawned {
    async fn start(home: &BenchHome) -> Spawned {
        let mut child = Command::new(heron_bin())
            .args(["acp", "--model", "demo/demo"])
            .env("HERON_HOME", home.home())
            .env_remove("HERON_LOG")
            .env_remove("HERON_VALIDATE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn heron");
        let input = child.stdin.take().expect("piped stdin");
        let output = child.stdout.take().expect("piped stdout");
        let mut spawned = Spawned { child, client: Client::new(input, output) };
        spawned.client.initialize().await;
        spawned
    }

    /// A `/proc/<pid>/status` memory field (`VmHWM`, `VmRSS`), in KiB.
    fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().expect("heron is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }

    /// Closes stdin and waits for a clean exit.
    async fn stop(self) {
        let Spawned { mut child, client } = self;
        drop(client);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("heron exits within 10 s of EOF")
            .expect("wait for heron");
        assert!(status.success(), "heron exited with {status}");
    }
}

/// A temporary HERON_HOME beside a workspace, removed on drop.
struct BenchHome {
    root: tempfile::TempDir,
}

impl BenchHome {
    fn new(files: &[(&str, &str)]) -> BenchHome {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("home")).expect("create HERON_HOME");
        std::fs::create_dir_all(root.path().join("ws")).expect("create the workspace");
        for (name, text) in files {
            std::fs::write(root.path().join("home").join(name), text).expect("write into HERON_HOME");
        }
        BenchHome { root }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The workspace, as the `cwd` a client sends.
    fn ws(&self) -> String {
        self.root.path().join("ws").display().to_string()
    }
}

fn runtime() -> Runtime {
    // The same runtime `heron acp` runs on: multi-threaded, one worker per core.
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn median(mut samples: Vec<u64>) -> u64 {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// 1. One prompt turn.

/// One turn in a fresh session: the time from sending `session/prompt` to reading its answer.
/// Creating and closing the session is not timed. A fresh session keeps every turn the same
/// size: the scripted model replays turn 0 and the history sent to it stays one prompt long.
async fn timed_turn(client: &mut InProcess, ws: &str) -> (Duration, Reply) {
    let session = client.new_session(ws).await;
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": PROMPT }] });
    let started = Instant::now();
    let reply = client.call("session/prompt", params).await;
    let elapsed = started.elapsed();
    assert_eq!(reply.result["stopReason"], "end_turn", "{}", reply.result);
    client.close_session(&session).await;
    (elapsed, reply)
}

fn turn(c: &mut Criterion) {
    let rt = runtime();
    let home =
        BenchHome::new(&[("config.toml", CONFIG), ("text.jsonl", TEXT_SCRIPT), ("tool.jsonl", TOOL_SCRIPT)]);
    let ws = home.ws();
    let mut group = c.benchmark_group("turn");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    let cases = [
        ("text", "text/m", &["agent_message_chunk"][..]),
        ("todo_write", "tool/m", &["agent_message_chunk", "tool_call", "plan", "tool_call_update"][..]),
    ];
    for (name, model, kinds) in cases {
        let mut client = start_in_process(&rt, &home, model);
        rt.block_on(client.initialize());
        // Check once, before timing, that the turn streams what the script says.
        let (_, reply) = rt.block_on(timed_turn(&mut client, &ws));
        for kind in kinds {
            let marker = format!(r#""sessionUpdate":"{kind}""#);
            assert!(reply.notes.iter().any(|n| n.contains(&marker)), "no {kind} in the {name} turn");
        }
        println!("turn/{name}: {} notifications before the answer", reply.notes.len());
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += timed_turn(&mut client, &ws).await.0;
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// 2. `session/load` of a long session.

/// A HERON_HOME holding one session of `count` events, and what its replay sends.
struct LoadFixture {
    home: BenchHome,
    session: String,
    /// Stored events that replay as at least one `session/update` (all but turn ends).
    shown: usize,
    /// `session/update` notifications a load replays (the command advertisement aside),
    /// as the first load counted them.
    replayed: std::sync::OnceLock<usize>,
    /// Bytes of event payload JSON stored.
    payload_bytes: usize,
}

impl LoadFixture {
    /// Writes the session through `Store`, 500 events per `append_events` transaction.
    fn build(rt: &Runtime, count: usize) -> LoadFixture {
        let home = BenchHome::new(&[]);
        let ws = home.ws();
        let events: Vec<Event> = (0..).flat_map(|n| turn_events(n, &ws)).take(count).collect();
        let shown = events.iter().filter(|e| !matches!(e, Event::TurnEnded { .. })).count();
        let encoded: Vec<(&str, Value)> =
            events.iter().map(|e| (e.kind(), serde_json::to_value(e).expect("encode an event"))).collect();
        let payload_bytes = encoded.iter().map(|(_, v)| v.to_string().len()).sum();
        let settings = Settings {
            mode: Mode::Normal,
            model: "demo/demo".to_owned(),
            effort: Effort::Auto,
            preset: Preset::Balanced,
            posture: Posture::Ask,
        };
        let session = rt.block_on(async {
            let store = Store::open(Home::at(home.home()).db_path()).await.expect("open the store");
            let new = NewSession {
                settings: serde_json::to_value(&settings).expect("encode settings"),
                ..NewSession::in_dir(ws.clone())
            };
            let record = store.create_session(new).await.expect("create the session");
            for batch in encoded.chunks(500) {
                store.append_events(&record.id, batch.iter().map(|(k, v)| (*k, v))).await.expect("append");
            }
            assert_eq!(store.event_count(&record.id).await.expect("count"), count as u64);
            record.id
        });
        LoadFixture { home, session, shown, replayed: std::sync::OnceLock::new(), payload_bytes }
    }

    fn load_params(&self) -> Value {
        json!({ "sessionId": self.session, "cwd": self.home.ws(), "mcpServers": [] })
    }

    /// Asserts a load replayed every event, and the same as the first load did.
    fn check(&self, reply: &Reply) {
        let replayed = reply.notes.iter().filter(|n| !n.contains(COMMANDS_ADVERT)).count();
        assert!(replayed >= self.shown, "{replayed} notifications for {} shown events", self.shown);
        assert_eq!(replayed, *self.replayed.get_or_init(|| replayed), "replayed notifications");
    }
}

/// One `session/load`, timed from sending the request to reading its answer (after every
/// replayed notification). The session is closed afterwards, untimed, so each load opens it
/// anew rather than attaching to a session still open.
async fn timed_load<W, R>(client: &mut Client<W, R>, fixture: &LoadFixture) -> (Duration, Reply)
where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let started = Instant::now();
    let reply = client.call("session/load", fixture.load_params()).await;
    let elapsed = started.elapsed();
    client.drain_until(COMMANDS_ADVERT).await;
    client.close_session(&fixture.session).await;
    (elapsed, reply)
}

fn session_load(c: &mut Criterion) {
    let rt = runtime();
    let fixtures: Vec<LoadFixture> = LOAD_SIZES.iter().map(|&count| LoadFixture::build(&rt, count)).collect();
    let mut group = c.benchmark_group("session_load");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    for (fixture, events) in fixtures.iter().zip(LOAD_SIZES) {
        let mut client = start_in_process(&rt, &fixture.home, "demo/demo");
        rt.block_on(client.initialize());
        fixture.check(&rt.block_on(timed_load(&mut client, fixture)).1);
        println!(
            "session_load/{events}: {} replayed notifications, {:.2} MiB of stored event JSON",
            fixture.replayed.get().copied().unwrap_or_default(),
            fixture.payload_bytes as f64 / (1024.0 * 1024.0)
        );
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(BenchmarkId::new("in_process", events), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += timed_load(&mut client, fixture).await.0;
                    }
                    total
                })
            });
        });
    }

    // The optimised binary, one process per load: its peak memory, and the load over real pipes.
    for (fixture, events) in fixtures.iter().zip(LOAD_SIZES) {
        let (mut before, mut after, mut resident) = (Vec::new(), Vec::new(), Vec::new());
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(BenchmarkId::new("process", events), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut agent = Spawned::start(&fixture.home).await;
                        before.push(agent.memory_kib("VmHWM"));
                        let (elapsed, reply) = timed_load(&mut agent.client, fixture).await;
                        total += elapsed;
                        fixture.check(&reply);
                        after.push(agent.memory_kib("VmHWM"));
                        // The closed session's actor ends on its own task: let it finish.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        resident.push(agent.memory_kib("VmRSS"));
                        agent.stop().await;
                    }
                    total
                })
            });
        });
        if !after.is_empty() {
            let runs = after.len();
            let (before, after, resident) = (median(before), median(after), median(resident));
            let growth = after.saturating_sub(before);
            println!(
                "session_load/process/{events}: peak RSS (VmHWM) median {:.2} MiB after initialize, \
                 {:.2} MiB after the load (+{:.2} MiB, {:.0} bytes per event, {:.2}x the stored JSON); \
                 VmRSS after session/close {:.2} MiB (+{:.2} MiB over initialize); {runs} runs",
                mib(before),
                mib(after),
                mib(growth),
                growth as f64 * 1024.0 / events as f64,
                growth as f64 * 1024.0 / fixture.payload_bytes as f64,
                mib(resident),
                mib(resident.saturating_sub(before)),
            );
        }
    }
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// 3. Idle memory per open session.

fn idle_sessions(c: &mut Criterion) {
    let rt = runtime();
    let last = IDLE_CHECKPOINTS[IDLE_CHECKPOINTS.len() - 1];
    let mut group = c.benchmark_group("idle_sessions");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(last as u64));
    // VmRSS after `initialize`, then at each checkpoint; one row per process.
    let mut rows: Vec<Vec<u64>> = Vec::new();
    group.bench_function(BenchmarkId::new("session_new", last), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let home = BenchHome::new(&[]);
                    let ws = home.ws();
                    let mut agent = Spawned::start(&home).await;
                    // Let start-up work (the store's first writes) settle before reading.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let mut row = vec![agent.memory_kib("VmRSS")];
                    for open in 1..=last {
                        let started = Instant::now();
                        agent.client.call("session/new", json!({ "cwd": ws, "mcpServers": [] })).await;
                        total += started.elapsed();
                        agent.client.drain_until(COMMANDS_ADVERT).await;
                        if IDLE_CHECKPOINTS.contains(&open) {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            row.push(agent.memory_kib("VmRSS"));
                        }
                    }
                    agent.stop().await;
                    rows.push(row);
                }
                total
            })
        });
    });
    group.finish();
    if rows.is_empty() {
        return;
    }
    let column = |k: usize| median(rows.iter().map(|row| row[k]).collect());
    let idle = column(0);
    let mut report =
        format!("idle_sessions: VmRSS median over {} processes: {:.2} MiB idle", rows.len(), mib(idle));
    for (k, open) in IDLE_CHECKPOINTS.iter().enumerate() {
        report.push_str(&format!(", {:.2} MiB with {open}", mib(column(k + 1))));
    }
    let (first, end) = (column(1), column(IDLE_CHECKPOINTS.len()));
    let per_session_kib = end.saturating_sub(first) as f64 / (last - IDLE_CHECKPOINTS[0]) as f64;
    report.push_str(&format!(
        "; {:.1} KiB ({:.3} MiB) per session from {} to {last}",
        per_session_kib,
        per_session_kib / 1024.0,
        IDLE_CHECKPOINTS[0]
    ));
    println!("{report}");
}

criterion_group!(benches, turn, session_load, idle_sessions);
criterion_main!(benches);
