//! Where the time of judging goes, per command of the judge benchmark: parsing
//! (`pinfold_shell::parse`), judging the parsed tree, and the whole `Policy::judge`, against
//! the same generated 1,000-rule policy.
//!
//! `cargo bench -p pinfold-policy --bench judge_breakdown [-- FILTER]`
//!
//! Each figure is the median of 15 batches of 2,000 calls (dropping the result included), so a
//! noisy moment of the machine moves one batch, not the answer. Criterion (`--bench judge`)
//! remains the reference; this says which part to look at.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use pinfold_policy::config::{load_str, Format};
use pinfold_policy::Policy;

const BATCHES: usize = 15;
const PER_BATCH: usize = 2000;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` adds `--bench` to the arguments; the filter is the other one.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let policy =
        Policy::new(load_str("big.toml", &common::generate(1000), Format::Toml, &common::opts()).unwrap()).unwrap();
    let cwd = Path::new("/work/project");
    println!("{:>3}  {:>9} {:>9} {:>9}  command", "#", "parse", "judge", "whole");
    for (i, cmd) in common::COMMANDS.iter().enumerate() {
        if filter.as_deref().is_some_and(|f| !format!("{i:02}").contains(f) && !cmd.contains(f)) {
            continue;
        }
        let parse = median(
            (0..BATCHES)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..PER_BATCH {
                        std::hint::black_box(pinfold_shell::parse(cmd).unwrap());
                    }
                    t.elapsed() / PER_BATCH as u32
                })
                .collect(),
        );
        let tree = pinfold_shell::parse(cmd).unwrap();
        let judge = median(
            (0..BATCHES)
                .map(|_| {
                    let trees = vec![tree.clone(); PER_BATCH];
                    let t = Instant::now();
                    for tr in trees {
                        std::hint::black_box(policy.judge_tree(tr, cwd));
                    }
                    t.elapsed() / PER_BATCH as u32
                })
                .collect(),
        );
        let whole = median(
            (0..BATCHES)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..PER_BATCH {
                        std::hint::black_box(policy.judge(cmd, cwd));
                    }
                    t.elapsed() / PER_BATCH as u32
                })
                .collect(),
        );
        println!("{i:>3}  {:>9.2?} {:>9.2?} {:>9.2?}  {cmd}", parse, judge, whole);
    }
}
