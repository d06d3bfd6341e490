//! A turn's workspace check (what its commands changed, for rewinds): stamping a workspace
//! of 1,000, 5,000 and 20,000 files of 4 KiB whose last change is older than the racy
//! window, the common case, and once, printed, the same 5,000 files just written (each
//! then hashed too, up to the check's byte budget). A turn that runs a command pays two
//! stampings.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use heron_core::session::side_effects;
use heron_core::tools::protected::Protected;
use tokio_util::sync::CancellationToken;

fn workspace(files: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = vec![b'x'; 4096];
    for n in 0..files {
        let sub = dir.path().join(format!("d{}", n / 100));
        std::fs::create_dir_all(&sub).expect("folder");
        std::fs::write(sub.join(format!("f{n}.rs")), &page).expect("file");
    }
    dir
}

fn stamp(dir: &std::path::Path) -> side_effects::Snapshot {
    side_effects::take(dir, &Protected::default(), &CancellationToken::new(), None)
}

fn workspace_check(c: &mut Criterion) {
    let fresh = workspace(5_000);
    let started = Instant::now();
    let snapshot = stamp(fresh.path());
    let stamped = matches!(snapshot, side_effects::Snapshot::Stamped(_));
    println!("5,000 files just written, stamped and hashed: {:?} (stamped: {stamped})", started.elapsed());
    let sizes = [1_000, 5_000, 20_000];
    let dirs: Vec<_> = sizes.iter().map(|&n| workspace(n)).collect();
    // Past the racy window, files are stamped without being read.
    std::thread::sleep(Duration::from_millis(2_100));
    let mut group = c.benchmark_group("workspace_check");
    group.sample_size(20).measurement_time(Duration::from_secs(8));
    for (n, dir) in sizes.iter().zip(&dirs) {
        group.bench_function(format!("{n}_files"), |b| {
            b.iter(|| assert!(matches!(stamp(dir.path()), side_effects::Snapshot::Stamped(_))));
        });
    }
    group.finish();
}

criterion_group!(benches, workspace_check);
criterion_main!(benches);
