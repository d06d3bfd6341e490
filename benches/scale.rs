//! Scale in one home: `session/new` and one `session/list` page (the first, one deep behind a
//! cursor, one filtered by `cwd`) answered by the optimised binary over real pipes while the
//! store holds 1,000 and 100,000 sessions. The store is seeded through `Store::create_sessions`
//! (one transaction per 10,000), so seeding takes seconds, not one commit per session.
//!
//! `HERON_BENCH_BIN` spawns another build instead of this one, to compare two versions with
//! the same driver in the same run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use heron_core::config::Home;
use heron_store::{NewSession, Store};
use serde_json::{Value, json};

#[path = "support/spawned.rs"]
mod spawned;
use spawned::Spawned;

/// Stored sessions before the timed calls.
const STORED: [usize; 2] = [1_000, 100_000];

/// Sessions created per seeding transaction.
const SEED_BATCH: usize = 10_000;

/// Working directories the seeded sessions are spread over; the bench's own is one more.
const SEED_DIRS: usize = 100;

/// How many pages in the deep `session/list` case starts (50 sessions a page).
const DEEP_PAGES: usize = 10;

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

/// A spawned `heron acp --model demo/demo` on a seeded home.
struct Agent(Spawned);

impl Agent {
    fn start(home: &Seeded) -> Agent {
        Agent(Spawned::start(&heron_bin(), &["acp", "--model", "demo/demo"], &home.home()))
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.0.call(method, params)
    }

    /// Time to the answer of one call.
    fn timed(&mut self, method: &str, params: Value) -> (Duration, Value) {
        let started = Instant::now();
        let result = self.call(method, params);
        (started.elapsed(), result)
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
