//! Rough per-parse time, split into tree-sitter's own parse and pinfold's whole parse (which
//! adds the completeness check and the walk):
//! `cargo run --release -p pinfold-shell --example parse_timing -- 'cmd'`.
//!
//! Each figure is the median of 15 batches of 2,000 parses, so a noisy moment of the machine
//! moves one batch, not the answer.
use std::time::{Duration, Instant};

fn median_per_call(mut f: impl FnMut()) -> Duration {
    let (batches, n) = (15, 2000u32);
    let mut times: Vec<Duration> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed() / n
        })
        .collect();
    times.sort();
    times[batches / 2]
}

fn main() {
    let text = std::env::args().nth(1).unwrap_or_else(|| "ls -la | grep foo | wc -l".into());
    // pinfold parses the text with a newline appended (see `walk::parse`); so does this.
    let padded = format!("{text}\n");
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&tree_sitter_bash::LANGUAGE.into()).unwrap();
    let raw = median_per_call(|| {
        std::hint::black_box(parser.parse(&padded, None).unwrap());
    });
    let whole = median_per_call(|| {
        std::hint::black_box(pinfold_shell::parse(&text).unwrap());
    });
    println!("tree-sitter parse {raw:?}, pinfold_shell::parse {whole:?} (medians per call)");
}
