//! Hash this crate's sources and embedded presets into `PINFOLD_POLICY_BUILD_HASH`, so the
//! policy cache (src/cache.rs) never trusts an entry written by a build that loads, validates
//! or indexes policy differently.

use std::path::Path;

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, files);
        } else {
            files.push(p);
        }
    }
}

fn main() {
    let mut files = Vec::new();
    for d in ["src", "presets"] {
        println!("cargo:rerun-if-changed={d}");
        visit(Path::new(d), &mut files);
    }
    files.sort();
    // FNV-1a, 64 bit: enough to tell builds apart; not a security boundary.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        for b in f.to_string_lossy().bytes().chain(std::fs::read(f).unwrap_or_default()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=PINFOLD_POLICY_BUILD_HASH={h:016x}");
}
