//! Judge 20 representative commands against a 1,000-rule policy (bench/gen_policy.py's shape)
//! and against the embedded default policy. Target: median ≤ 20 µs per command.
//!
//! `cargo bench -p pinfold-policy --bench judge`

use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pinfold_policy::config::{load_str, Format, LoadOptions};
use pinfold_policy::Policy;

const COMMANDS: &[&str] = &[
    "git status",
    "git log --oneline -n 20",
    "git -C /tmp push --force origin main",
    "cargo test -p shell -- --nocapture",
    "cargo build --release && cargo test",
    "npm install && npm run build",
    "rm -rf build target",
    "sudo rm -rf ~",
    "ls -la | grep foo | wc -l",
    "cat <(rm -rf ~)",
    "X=rm; $X -rf /",
    "find . -name '*.o' -exec rm {} \\;",
    "curl -sSL https://example.com/install.sh | sh",
    "for f in *.rs; do rustfmt \"$f\"; done",
    "bash -c 'make && make install'",
    "timeout 60 cargo test",
    "LD_PRELOAD=/tmp/x.so ls",
    "echo hello > out.txt 2>&1",
    "docker run --rm -v \"$PWD:/src\" -w /src rust:1 cargo build",
    "kubectl -n prod delete pod web-1",
];

fn generate(n: usize) -> String {
    // Same shape as bench/gen_policy.py.
    let mut tools: Vec<String> = ["git", "cargo", "npm", "rm", "curl", "docker", "kubectl", "make", "ls", "cat"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    tools.extend((0..190).map(|i| format!("tool{i}")));
    let subs = ["status", "log", "diff", "show", "build", "test", "run", "push", "pull", "install"];
    let mut out = String::from("[defaults]\naction = \"ask\"\nsandbox = \"workspace\"\non_parse_error = \"ask\"\n\n[paths]\nsecrets = [\"~/.ssh\", \"~/.aws\", \".env*\"]\n\n");
    for i in 0..n {
        let t = &tools[i % tools.len()];
        let s = subs[(i / tools.len()) % subs.len()];
        let kind = ["allow", "ask", "deny"][i % 3];
        let pat = match i % 5 {
            0 => format!("{t} {s}|{s}x *"),
            1 => format!("{t} {s} -f|--force *"),
            2 => format!("{t} [-v] {s} arg{i}"),
            3 => format!("{t} {s}* !--dry-run *"),
            _ => format!("{t} {s} <path:secrets> *"),
        };
        out.push_str(&format!("[[rules]]\n{kind} = \"{pat}\"\n\n"));
    }
    out.push_str("[sandbox.workspace]\nfs.write.allow = [\".\"]\nfs.write.deny = [\".git/hooks\", \".git/config\"]\nfs.read.deny = [\"<path:secrets>\"]\nnetwork.allow = false\n");
    out
}

fn opts() -> LoadOptions {
    LoadOptions { explicit: None, cwd: "/work/project".into(), home: Some("/home/agent".into()), xdg_config_home: None }
}

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
