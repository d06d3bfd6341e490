//! Scale in one home: `session/new` and one `session/list` page (the first, one deep behind a
//! cursor, one filtered by `cwd`) answered by the optimised binary over real pipes while the
//! store holds 1,000 and 100,000 sessions. The store is seeded through `Store::create_sessions`
//! (one transaction per 10,000), so seeding takes seconds, not one commit per session.
//!
//! `HERON_BENCH_BIN` spawns another build instead of this one, to compare two versions with
//! the same driver in the same run.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use heron_core::config::Home;
use heron_store::{NewSession, Store};
use serde_json::{Value, json};

/// Stored sessions before the timed calls.
const STORED: [usize; 2] = [1_000, 100_000];

/// Sessions created per seeding transaction.
const SEED_BATCH: usize = 10_000;

/// Working directories the seeded sessions are spread over; the bench's own is one more.
const SEED_DIRS: usize = 100;

/// How many pages in the deep `session/list` case starts (50 sessions a page).
const DEEP_PAGES: usize = 10;

/// Every agent notification starts with these bytes, so answers are told apart unparsed.
const NOTIFICATION: &str = r#"{"jsonrpc":"2.0","method":"#;

fn heron_bin() -> PathBuf {
    std::env::var_os("HERON_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_heron")), PathBuf::from)
}

/// A HERON_HOME holding `count` sessions, beside a workspace.
struct Seeded {
    root: tempfile::TempDir,
}

impl Seeded {
    fn new(rt: &tokio::runtime::Runtime, count: usize) -> Seeded {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("ws")).expect("create the workspace");
        let seeded = Seeded { root };
        let ws = seeded.ws();
        let db = Home::at(seeded.home()).db_path();
        rt.block_on(async {
            let store = Store::open(db).await.expect("open the store");
            // Settings shaped like the ones Heron stores, so a listed row decodes as much.
            let settings = json!({
                "mode": "normal", "model": "demo/demo", "effort": "auto", "preset": "balanced", "posture": "ask"
            });
            let mut made = 0;
            while made < count {
                let batch = (made..count.min(made + SEED_BATCH))
                    .map(|n| NewSession {
                        title: Some(format!("Session {n}: fix the header parser")),
                        settings: settings.clone(),
                        // Every hundredth session is in the bench's workspace, the rest elsewhere.
                        ..NewSession::in_dir(if n % SEED_DIRS == 0 { ws.clone() } else { format!("/seed/{}", n % SEED_DIRS) })
                    })
                    .collect();
                made += store.create_sessions(batch).await.expect("seed sessions").len();
            }
        });
        seeded
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn ws(&self) -> String {
        self.root.path().join("ws").display().to_string()
    }
}

/// A spawned `heron acp --model demo/demo`, driven line by line.
struct Agent {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Agent {
    fn start(home: &Seeded) -> Agent {
        let mut child = Command::new(heron_bin())
            .args(["acp", "--model", "demo/demo"])
            .env("HERON_HOME", home.home())
            .env_remove("HERON_LOG")
            .env_remove("HERON_VALIDATE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn heron");
        let input = child.stdin.take().expect("piped stdin");
        let output = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut agent = Agent { child, input, output, next_id: 0 };
        agent.call("initialize", json!({ "protocolVersion": 1 }));
        agent
    }

    /// Sends a request and reads until its answer, skipping notifications; an error answer
    /// is a bench failure.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        line.push('\n');
        self.input.write_all(line.as_bytes()).expect("write a request");
        self.input.flush().expect("flush");
        loop {
            let mut line = String::new();
            let read = self.output.read_line(&mut line).expect("read from heron");
            assert!(read > 0, "heron closed its output during {method}");
            if line.starts_with(NOTIFICATION) {
                continue;
            }
            let mut message: Value = serde_json::from_str(&line).expect("heron writes JSON lines");
            assert!(message["id"] == id, "an answer to another request: {line}");
            match message.get_mut("result") {
                Some(result) => return result.take(),
                None => panic!("{method} failed: {line}"),
            }
        }
    }

    /// Time to the answer of one call.
    fn timed(&mut self, method: &str, params: Value) -> (Duration, Value) {
        let started = Instant::now();
        let result = self.call(method, params);
        (started.elapsed(), result)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Closing stdin ends heron; kill it if it lingers, so no bench leaves one behind.
        let _ = self.input.flush();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scale(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let mut group = c.benchmark_group("scale");
    group
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for stored in STORED {
        let started = Instant::now();
        let home = Seeded::new(&rt, stored);
        println!("scale/{stored}: seeded in {:.1} s", started.elapsed().as_secs_f64());
        let ws = home.ws();
        let mut agent = Agent::start(&home);

        // The first page, then the one `DEEP_PAGES` pages in, reached by its cursor.
        let first = agent.call("session/list", json!({}));
        assert_eq!(first["sessions"].as_array().map(Vec::len), Some(50), "a full first page");
        let mut cursor = first["nextCursor"].clone();
        for _ in 1..DEEP_PAGES {
            cursor = agent.call("session/list", json!({ "cursor": cursor }))["nextCursor"].clone();
        }
        assert!(cursor.is_string(), "{stored} sessions fill {DEEP_PAGES} pages");

        group.bench_function(BenchmarkId::new("session_new", stored), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (took, result) = agent.timed("session/new", json!({ "cwd": ws, "mcpServers": [] }));
                    total += took;
                    // Closed untimed, so the open sessions do not pile up across samples.
                    agent.call("session/close", json!({ "sessionId": result["sessionId"] }));
                }
                total
            });
        });
        let pages = [
            ("session_list_first", json!({})),
            ("session_list_deep", json!({ "cursor": cursor })),
            ("session_list_cwd", json!({ "cwd": ws })),
        ];
        for (name, params) in pages {
            group.bench_function(BenchmarkId::new(name, stored), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (took, result) = agent.timed("session/list", params.clone());
                        assert!(result["sessions"].as_array().is_some_and(|s| !s.is_empty()), "{result}");
                        total += took;
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scale);
criterion_main!(benches);
