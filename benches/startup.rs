//! Cold start of `heron acp`: the time from spawning the optimised binary to reading its
//! `initialize` response, and the child's peak resident memory (`VmHWM`) at that moment.
//! Criterion measures the time; the memory is printed as a summary after each case.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

const HERON: &str = env!("CARGO_BIN_EXE_heron");

const INITIALIZE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"#,
    r#""clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"#,
    r#""clientInfo":{"name":"heron-bench","version":"0.0.0"}}}"#,
    "\n"
);

/// One start: the time to the `initialize` response and the peak RSS in KiB.
fn start_once(args: &[&str]) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new(HERON)
        .args(args)
        .env_remove("HERON_LOG")
        .env_remove("HERON_VALIDATE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn heron");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(INITIALIZE.as_bytes()).expect("write initialize");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read initialize response");
    let elapsed = started.elapsed();

    assert!(line.contains(r#""result":"#), "unexpected initialize response: {line}");
    let peak_kib = peak_rss_kib(&child);
    drop(stdin);
    let status = child.wait().expect("wait for heron");
    assert!(status.success(), "heron exited with {status}");
    (elapsed, peak_kib)
}

/// `VmHWM` of a live child, in KiB.
fn peak_rss_kib(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("read /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

fn print_rss_summary(name: &str, mut samples: Vec<u64>) {
    samples.sort_unstable();
    let mib = |kib: u64| kib as f64 / 1024.0;
    let (Some(&min), Some(&max)) = (samples.first(), samples.last()) else { return };
    let median = samples[samples.len() / 2];
    println!(
        "{name}: peak RSS (VmHWM) median {:.2} MiB, min {:.2}, max {:.2} over {} starts",
        mib(median),
        mib(min),
        mib(max),
        samples.len()
    );
}

fn startup(c: &mut Criterion) {
    let mut group = c.benchmark_group("startup");
    // Each iteration is a whole process; fewer, longer samples keep the run near a minute.
    group.sample_size(30).measurement_time(Duration::from_secs(15));
    for (name, args) in [("acp", &["acp"][..]), ("acp_validate", &["acp", "--validate"][..])] {
        let mut rss = Vec::new();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (elapsed, peak_kib) = start_once(args);
                    total += elapsed;
                    rss.push(peak_kib);
                }
                total
            });
        });
        print_rss_summary(&format!("startup/{name}"), rss);
    }
    group.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);
