//! Append (with and without fsync) and verify throughput. Numbers in docs/performance.md.
//!
//! cargo bench -p pinfold-ledger --bench ledger

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use pinfold_ledger::{Ledger, Record, Status};
use serde_json::json;

fn record(i: u64) -> Record {
    Record::new(
        "check",
        json!({
            "command": format!("cargo test -p pinfold-policy -- --nocapture case_{i}"),
            "cwd": "/home/dev/src/pinfold",
            "decision": "allow",
            "reason": "allowed by rule `cargo build|test|check *` (pinfold.toml:12)",
            "rules": [{"action": "allow", "pattern": "cargo build|test|check *", "source": "pinfold.toml:12"}],
            "duration_us": 812,
        }),
    )
    .session("0d5c6a4e-agent-session")
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("append");
    let nosync = Ledger::open(&dir.path().join("nosync")).unwrap().with_fsync(false);
    let mut i = 0;
    g.bench_function("no_fsync", |b| {
        b.iter(|| {
            i += 1;
            nosync.append(record(i)).unwrap()
        })
    });
    let sync = Ledger::open(&dir.path().join("sync")).unwrap().with_fsync(true);
    g.sample_size(20);
    g.bench_function("fsync", |b| {
        b.iter(|| {
            i += 1;
            sync.append(record(i)).unwrap()
        })
    });
    // The whole cost a `pinfold check` pays once: open, lock, read tail, append, release.
    g.bench_function("open_and_append_no_fsync", |b| {
        b.iter_batched(
            || (),
            |()| {
                i += 1;
                Ledger::open(&dir.path().join("nosync")).unwrap().with_fsync(false).append(record(i)).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    const N: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path()).unwrap().with_fsync(false);
    for i in 0..N {
        ledger.append(record(i)).unwrap();
    }
    let mut g = c.benchmark_group("verify");
    g.throughput(Throughput::Elements(N + N / 1000));
    g.sample_size(10);
    g.bench_function("100k_records", |b| {
        b.iter(|| {
            let r = pinfold_ledger::verify(dir.path()).unwrap();
            assert_eq!(r.status(), Status::Intact);
            r
        })
    });
    g.finish();
}

criterion_group!(benches, append, verify);
criterion_main!(benches);
