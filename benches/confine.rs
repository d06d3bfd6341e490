//! Starting a confined command: from building its command to its exit, for `true` run the
//! way `run_command` runs one (a session's policy, the keeper, every wall this machine
//! has), beside the same command with `sandbox = "off"` (keys withheld and the keeper
//! only). What the walls cost is the difference.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use heron_core::config::{Config, Home, Keys};
use heron_core::sandbox::{self, Policy};

/// A session's policy over a fresh workspace, from `config`.
fn policy(config: &str, home: &std::path::Path, ws: PathBuf) -> Arc<Policy> {
    let config = Config::parse(config).expect("config parses");
    let home = Home::at(home);
    Arc::new(Policy::from_config(&config, &home, &Keys::default(), vec![ws]))
}

async fn run_true(policy: &Arc<Policy>) {
    let mut command = tokio::process::Command::new("true");
    command.process_group(0);
    sandbox::confine_kept(&mut command, policy).await.expect("confined");
    let status = command.status().await.expect("runs");
    assert!(status.success(), "{status}");
}

fn confine(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    println!("walls here: {:?}", sandbox::support());
    let mut group = c.benchmark_group("confine");
    group.sample_size(50).measurement_time(Duration::from_secs(10));
    for (name, config) in [("walls", ""), ("off", "sandbox = \"off\"\n")] {
        let policy = policy(config, &home, ws.clone());
        group.bench_function(name, |b| b.iter(|| runtime.block_on(run_true(&policy))));
    }
    group.finish();
}

criterion_group!(benches, confine);
criterion_main!(benches);
