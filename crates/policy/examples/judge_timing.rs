//! Rough per-judgement time against the embedded default policy:
//! `cargo run --release -p pinfold-policy --example judge_timing -- 'command'`.
use pinfold_policy::config::{load_str, Format, LoadOptions};
use pinfold_policy::Policy;

fn main() {
    let cmd = std::env::args().nth(1).unwrap_or_else(|| "git status".into());
    let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/u".into()), xdg_config_home: None };
    let policy = Policy::new(load_str("x.toml", "extends = [\"pinfold:default\"]\n", Format::Toml, &opts).unwrap()).unwrap();
    let n = 20000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(policy.judge(&cmd, "/p".as_ref()));
    }
    let j = policy.judge(&cmd, "/p".as_ref());
    println!("{:?} per judgement -> {}", t.elapsed() / n, j.decision);
}
