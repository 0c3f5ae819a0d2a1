//! The one matcher against the rule matcher it replaced, on the shapes the policy matches:
//! command names and arguments against rule tokens, paths against path-set entries (each
//! ancestor at once), and a non-ASCII text. Old and new run in one process, side by side.
//!
//! `cargo bench -p pinfold-glob --bench glob`

#[path = "../tests/old/mod.rs"]
mod old;

use criterion::{criterion_group, criterion_main, Criterion};
use pinfold_glob::{is_match, is_match_prefix, Syntax};
use std::hint::black_box;

/// (pattern, text) pairs as the judge sees them: tokens of rules against words of commands.
const TOKENS: &[(&str, &str)] = &[
    ("git", "git"),
    ("git", "cargo"),
    ("*.txt", "notes.txt"),
    ("*.txt", "notes.md"),
    ("-f*", "--force"),
    ("origin", "upstream"),
    ("*/.env*", "/work/project/.env.local"),
    ("f[0-9]", "f7"),
    ("*test*", "cargo-nextest-runner"),
    ("?", "x"),
];

/// Paths against path-set entries, with the byte offsets of the path's ancestors.
const PATHS: &[(&str, &str)] = &[
    ("/home/*/.ssh", "/home/me/.ssh/id_ed25519"),
    ("/work/project/.env*", "/work/project/src/main.rs"),
    ("/[a-h]*/?ssh*", "/home/me/.ssh/known_hosts"),
    ("/etc/*", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
];

fn ends(t: &str) -> Vec<usize> {
    let mut e: Vec<usize> = t.match_indices('/').map(|(i, _)| i.max(1)).collect();
    e.push(t.len());
    e
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tokens");
    g.bench_function("old", |b| b.iter(|| TOKENS.iter().filter(|(p, t)| old::policy::glob_match(black_box(p), black_box(t))).count()));
    g.bench_function("new", |b| b.iter(|| TOKENS.iter().filter(|(p, t)| is_match(black_box(p), black_box(t), Syntax::SHELL)).count()));
    g.finish();
    let paths: Vec<(&str, &str, Vec<usize>)> = PATHS.iter().map(|(p, t)| (*p, *t, ends(t))).collect();
    let mut g = c.benchmark_group("path_prefixes");
    g.bench_function("old", |b| b.iter(|| paths.iter().filter(|(p, t, e)| old::policy::glob_match_prefix(black_box(p), black_box(t), e)).count()));
    g.bench_function("new", |b| b.iter(|| paths.iter().filter(|(p, t, e)| is_match_prefix(black_box(p), black_box(t), e, Syntax::SHELL)).count()));
    g.finish();
    let mut g = c.benchmark_group("non_ascii");
    let (p, t) = ("*é*[à-ü]?", "résumé-über-naïve-çà");
    g.bench_function("old", |b| b.iter(|| old::policy::glob_match(black_box(p), black_box(t))));
    g.bench_function("new", |b| b.iter(|| is_match(black_box(p), black_box(t), Syntax::SHELL)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
