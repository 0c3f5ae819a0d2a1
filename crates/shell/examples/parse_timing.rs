//! Rough per-parse time: `cargo run --release -p pinfold-shell --example parse_timing -- 'cmd'`.
fn main() {
    let text = std::env::args().nth(1).unwrap_or_else(|| "ls -la | grep foo | wc -l".into());
    let n = 20000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(pinfold_shell::parse(&text).unwrap());
    }
    println!("{:?} per parse", t.elapsed() / n);
}
