//! Judge 20 representative commands against a 1,000-rule policy (bench/gen_policy.py's shape)
//! and against the embedded default policy. Target: median ≤ 20 µs per command. Also the
//! cache key's hash beside SipHash (`key_hash`), the reason that hash exists.
//!
//! `cargo bench -p pinfold-policy --bench judge`

mod common;

use std::path::Path;

use common::{generate, opts, COMMANDS};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pinfold_policy::config::{load_str, Format};
use pinfold_policy::Policy;

fn bench(c: &mut Criterion) {
    let big = Policy::new(load_str("big.toml", &generate(1000), Format::Toml, &opts()).unwrap()).unwrap();
    let default = Policy::new(
        load_str("default.toml", "extends = [\"pinfold:default\"]\n", Format::Toml, &opts()).unwrap(),
    )
    .unwrap();
    let cwd = Path::new("/work/project");
    let mut g = c.benchmark_group("judge_1000_rules");
    for (i, cmd) in COMMANDS.iter().enumerate() {
        g.bench_with_input(BenchmarkId::from_parameter(format!("{i:02}")), cmd, |b, cmd| {
            b.iter(|| big.judge(cmd, cwd))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("judge_default_policy");
    g.bench_function("all_20", |b| {
        b.iter(|| {
            for cmd in COMMANDS {
                std::hint::black_box(default.judge(cmd, cwd));
            }
        })
    });
    g.finish();
    let text = generate(1000);
    // The cache key hashes every policy file in full on every `check`: the custom hash
    // beside the std SipHash it replaced, over the same 1,000-rule file.
    let mut g = c.benchmark_group("key_hash");
    g.bench_function("pinfold", |b| b.iter(|| pinfold_policy::cache::key_hash(std::hint::black_box(text.as_bytes()))));
    g.bench_function("siphash", |b| {
        b.iter(|| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hint::black_box(text.as_bytes()).hash(&mut h);
            h.finish()
        })
    });
    g.finish();
    c.bench_function("load_and_compile_1000_rules", |b| {
        b.iter(|| Policy::new(load_str("big.toml", &text, Format::Toml, &opts()).unwrap()).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
