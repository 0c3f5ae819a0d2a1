//! Time a cached load and one judgement:
//! `cargo run --release -p pinfold-policy --example cache_timing -- [FILE] [COMMAND]`
//! (no FILE, or `-`: the layers found from the working directory).
use std::time::Instant;

use pinfold_policy::config::LoadOptions;

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().filter(|f| f != "-");
    let cmd = args.next().unwrap_or_else(|| "git status".into());
    let opts = LoadOptions { explicit: file.map(Into::into), cwd: std::env::current_dir().unwrap(), home: std::env::var_os("HOME").map(Into::into), xdg_config_home: None };
    let dir = std::env::temp_dir().join("pinfold-cache-timing");
    for i in 0..5 {
        let t0 = Instant::now();
        let p = pinfold_policy::load_cached(&opts, &dir).unwrap();
        let t1 = Instant::now();
        let j = p.judge(&cmd, &opts.cwd);
        let t2 = Instant::now();
        println!("run {i}: load {:?} judge {:?} -> {}", t1 - t0, t2 - t1, j.decision);
    }
}
