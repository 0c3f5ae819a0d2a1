//! Where the time of one `pinfold check` goes: load, compile, judge.
//! `cargo run --release -p pinfold-policy --example load_timing -- FILE 'command'`
use std::time::Instant;

use pinfold_policy::config::{load, LoadOptions};
use pinfold_policy::Policy;

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().expect("FILE");
    let cmd = args.next().unwrap_or_else(|| "git status".into());
    let opts = LoadOptions { explicit: Some(file.into()), cwd: std::env::current_dir().unwrap(), home: std::env::var_os("HOME").map(Into::into), xdg_config_home: None };
    for _ in 0..3 {
        let t0 = Instant::now();
        let config = load(&opts).unwrap();
        let t1 = Instant::now();
        let policy = Policy::new(config).unwrap();
        let t2 = Instant::now();
        let j = policy.judge(&cmd, &opts.cwd);
        let t3 = Instant::now();
        println!("load {:?}  compile {:?}  judge {:?}  -> {}", t1 - t0, t2 - t1, t3 - t2, j.decision);
    }
}
