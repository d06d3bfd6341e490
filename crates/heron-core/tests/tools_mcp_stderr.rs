//! An MCP server's stderr has a budget: an endless line or a flood costs a few KiB of
//! Heron's memory, the failure it explains is short, and a server that fails the ordinary
//! way still reports its last lines.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::Dirs;
use heron_core::tools::mcp::{McpHub, ServerSpec, ServerState, TransportSpec};

/// The longest failure report a server's status may carry.
const MAX_REPORT: usize = 2048;

/// A "server" that is a shell line and never speaks MCP.
fn shell(name: &str, line: &str) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        transport: TransportSpec::Stdio {
            command: PathBuf::from("sh"),
            args: vec!["-c".to_owned(), line.to_owned()],
            env: Vec::new(),
        },
    }
}

/// Why the hub's only server failed, once it settled.
async fn failure(hub: &McpHub) -> String {
    tokio::time::timeout(Duration::from_secs(40), hub.started()).await.expect("the server settles");
    match &hub.statuses()[0].state {
        ServerState::Failed(reason) => reason.clone(),
        other => panic!("the server is {other:?}"),
    }
}

/// This process's resident memory, in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse::<u64>().ok()).expect("VmRSS in kB") * 1024
}

/// Samples [`resident`] on a thread of its own until dropped; the highest sample is kept.
struct PeakMemory {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl PeakMemory {
    fn watch() -> Self {
        let (peak, stop) = (Arc::new(AtomicU64::new(resident())), Arc::new(AtomicBool::new(false)));
        let (seen, done) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                seen.fetch_max(resident(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Self { peak, stop }
    }

    fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst).max(resident())
    }
}

impl Drop for PeakMemory {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_stderr_line_costs_little_memory_and_a_short_report() {
    let dirs = Dirs::new();
    let before = resident();
    let memory = PeakMemory::watch();
    let hub = McpHub::start(
        vec![shell("flood", "head -c 100000000 /dev/zero | tr '\\0' x >&2")],
        dirs.ws(),
        dirs.policy(),
    );

    let reason = failure(&hub).await;

    let grew = memory.peak().saturating_sub(before);
    assert!(grew < 48 * 1024 * 1024, "resident memory grew by {} MiB", grew / (1024 * 1024));
    assert!(reason.len() <= MAX_REPORT, "a {} byte report", reason.len());
    assert!(
        reason.contains("its stderr ends") && reason.contains("xxxx"),
        "{}",
        &reason[..200.min(reason.len())]
    );
    assert!(reason.ends_with("[cut]"), "the cut is marked: …{}", &reason[reason.len().saturating_sub(80)..]);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_failing_server_reports_its_last_stderr_lines() {
    let dirs = Dirs::new();
    let line = "i=1; while [ $i -le 30 ]; do echo \"line $i\" >&2; i=$((i+1)); done; exit 1";
    let hub = McpHub::start(vec![shell("crashy", line)], dirs.ws(), dirs.policy());

    let reason = failure(&hub).await;

    let (_, tail) = reason.split_once("its stderr ends: ").unwrap_or_else(|| panic!("no stderr: {reason}"));
    let expected: Vec<String> = (11..=30).map(|i| format!("line {i}")).collect();
    assert_eq!(tail.split(" | ").collect::<Vec<_>>(), expected, "the last 20 lines, in order");
    hub.shutdown().await;
}
