//! A cache of the loaded policy, so that a `pinfold check` with a large policy does not parse
//! and validate every file on every call.
//!
//! **Never stale.** The cache key hashes everything the loaded policy depends on: pinfold's
//! version and its embedded presets, the load options (working directory, home, config home,
//! `-c` file), the project root (it moves when a `.git` appears), and the path and full content
//! of every layer file. Files pulled in through `extends` are listed in the entry with their
//! content hashes and checked on every hit. Any difference is a miss: the policy is loaded
//! and validated from the files, and a new entry written (atomically, by rename).
//!
//! **Lazy.** An entry stores the configuration without its rules, an index of rules by command
//! name, and each rule as its own JSON line. A hit decodes and compiles only the rules that
//! can match the commands judged. A rule that cannot be decoded makes its command ask.
//!
//! **Trust.** The cache directory must be writable only by the user, like the policy files
//! themselves: whoever can write it can change the verdicts. The sandbox keeps it read-only
//! for confined commands (see `docs/design/threat-model.md`).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{self, Config, ConfigError, LoadOptions};
use crate::judge::{Cells, Index, Policy, PolicyError, RuleStore};

const MAGIC: &str = "PINFOLD-POLICY-CACHE 1";
/// Old entries beyond this many are removed when a new one is written.
const MAX_ENTRIES: usize = 64;

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

impl LoadError {
    /// A suggestion for fixing the error, if there is one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            LoadError::Config(e) => e.hint(),
            LoadError::Policy(e) => e.hint(),
        }
    }
}

/// The first line after the magic. Sections follow in this order, their lengths here.
#[derive(Serialize, Deserialize)]
struct Header {
    /// Files read through `extends`, with the hash of their content.
    deps: Vec<(PathBuf, u64)>,
    /// The configuration without its rules.
    config: Config,
    wildcard: Vec<usize>,
    rule_count: usize,
    /// Bytes of the index section: sorted `key\tN,N,…\n` lines.
    index_len: usize,
}

// Entry layout:
//   MAGIC \n  header-json \n  index-lines  offset-records \n  rule-json \n rule-json \n …
// Offset records are 16 hex digits per rule (start and end, 8 each, absolute in the entry),
// so rule i is found without parsing the others.

/// The hash of cache keys, for the benchmark that weighs it against SipHash
/// (`cargo bench -p pinfold-policy --bench judge -- key_hash`); not an API.
#[doc(hidden)]
pub fn key_hash(b: &[u8]) -> u64 {
    hash_bytes(b)
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = KeyHasher::default();
    b.hash(&mut h);
    h.finish()
}

/// The hash of cache keys and of the files an entry depends on: 64 bits over the full
/// content, 16 bytes per step (a multiply folded to 64 bits, then mixed into a state that no
/// block can reset). It replaced SipHash, which spent a tenth of a whole `check` on a
/// 45 KB policy file (docs/performance.md). Like SipHash with its fixed public keys before it,
/// it is no defence against someone crafting a collision: whoever can write the policy files
/// or the cache decides the verdicts anyway. The `key_hash` benchmark (benches/judge.rs)
/// times both over a 1,000-rule policy file; keep this only while it wins there.
#[derive(Default)]
struct KeyHasher {
    state: u64,
}

const K0: u64 = 0x9e37_79b9_7f4a_7c15;
const K1: u64 = 0xc2b2_ae3d_27d4_eb4f;
const K2: u64 = 0x1656_67b1_9e37_79f9;
const K3: u64 = 0xd6e8_feb8_6659_fd93;

/// The 128-bit product of `a` and `b`, its halves xored.
fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

impl KeyHasher {
    /// One 16-byte block into the state: a bijection of the state for any block, so no
    /// block can make it forget what came before.
    fn block(&mut self, a: u64, b: u64) {
        self.state = (self.state ^ fold(a ^ K1, b ^ K2)).wrapping_mul(K3).rotate_left(23);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // The length first: bytes split differently across calls hash differently.
        self.block(bytes.len() as u64, K0);
        let mut blocks = bytes.chunks_exact(16);
        for c in &mut blocks {
            let (a, b) = c.split_at(8);
            self.block(u64::from_le_bytes(a.try_into().expect("8 bytes")), u64::from_le_bytes(b.try_into().expect("8 bytes")));
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 16];
            last[..rest.len()].copy_from_slice(rest);
            let (a, b) = last.split_at(8);
            self.block(u64::from_le_bytes(a.try_into().expect("8 bytes")), u64::from_le_bytes(b.try_into().expect("8 bytes")));
        }
    }

    fn finish(&self) -> u64 {
        fold(self.state ^ K0, self.state.rotate_left(32) ^ K1) ^ self.state
    }
}

/// Load the policy for `opts`, from the cache in `dir` when a valid entry exists.
pub fn load_cached(opts: &LoadOptions, dir: &Path) -> Result<Policy, LoadError> {
    let Some((key, layers)) = cache_key(opts) else {
        // Discovery failed (an ambiguous pair of files, say): the full load reports it.
        return Ok(Policy::new(config::load(opts)?)?);
    };
    let path = dir.join(format!("policy-{key:016x}.cache"));
    if let Some(policy) = from_entry(&path) {
        return Ok(policy);
    }
    let policy = Policy::new(config::load(opts)?)?;
    // Best effort: a cache that cannot be written only costs time.
    let _ = write_entry(&policy, &path, &layers, dir);
    Ok(policy)
}

/// The key for `opts`, and the layer files it covers. `None` if discovery fails.
fn cache_key(opts: &LoadOptions) -> Option<(u64, Vec<PathBuf>)> {
    let (layers, root) = config::layer_files(opts).ok()?;
    let mut h = KeyHasher::default();
    MAGIC.hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    // Covers this crate's code and its embedded presets (build.rs hashes both), so a build
    // that reads or indexes policy differently never trusts an older entry.
    env!("PINFOLD_POLICY_BUILD_HASH").hash(&mut h);
    opts.cwd.hash(&mut h);
    opts.home.hash(&mut h);
    opts.xdg_config_home.hash(&mut h);
    opts.explicit.hash(&mut h);
    root.hash(&mut h);
    for f in &layers {
        f.hash(&mut h);
        std::fs::read(f).ok()?.hash(&mut h);
    }
    Some((h.finish(), layers))
}

/// Open a cache entry: read the header, index and offset records; rules stay on disk until a
/// command needs them. `None` for anything amiss (the caller then loads from the files).
fn from_entry(path: &Path) -> Option<Policy> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    // Read front to back, into memory that is not zeroed first: the magic line and the
    // header line in 8 KiB steps until the second newline, then the rest of the index and
    // offset records after what those steps already brought in.
    let mut head = Vec::with_capacity(8192);
    let header_end = loop {
        let before = head.len();
        if (&file).take(8192).read_to_end(&mut head).ok()? == 0 {
            return None;
        }
        let mut newlines = head.iter().enumerate().filter(|(_, c)| **c == b'\n').map(|(i, _)| i);
        let first = newlines.next();
        if let (Some(_), Some(second)) = (first, newlines.next()) {
            break second + 1;
        }
        if before > (64 << 20) {
            return None;
        }
    };
    let magic_end = MAGIC.len() + 1;
    if head.get(..magic_end)? != format!("{MAGIC}\n").as_bytes() {
        return None;
    }
    let header: Header = serde_json::from_slice(&head[magic_end..header_end - 1]).ok()?;
    for (dep, hash) in &header.deps {
        if hash_bytes(&std::fs::read(dep).ok()?) != *hash {
            return None;
        }
    }
    // The index lines, then the offset records, each read into its own buffer (bytes the
    // header's read brought in moved over, not read again).
    let mut index = head.split_off(header_end);
    let mut records = if index.len() > header.index_len { index.split_off(header.index_len) } else { Vec::new() };
    let records_len = header.rule_count.checked_mul(16)?;
    for (buf, want) in [(&mut index, header.index_len), (&mut records, records_len)] {
        if buf.len() < want {
            let more = want - buf.len();
            buf.reserve_exact(more);
            (&file).take(more as u64).read_to_end(buf).ok()?;
        }
        if buf.len() < want {
            return None;
        }
        buf.truncate(want);
    }
    let cells = Cells::new(header.rule_count);
    Some(Policy {
        config: header.config,
        by_name: Index::Lines(index),
        store: RuleStore::Lazy { file, records, cells },
        wildcard: header.wildcard,
        undo: std::sync::OnceLock::new(),
    })
}

fn write_entry(policy: &Policy, path: &Path, layers: &[PathBuf], dir: &Path) -> std::io::Result<()> {
    let Index::Map(map) = &policy.by_name else { return Ok(()) };
    let mut keys: Vec<(&String, &Vec<usize>)> = map.iter().collect();
    keys.sort();
    let mut index = String::new();
    for (k, v) in keys {
        index.push_str(k);
        index.push('\t');
        let nums: Vec<String> = v.iter().map(usize::to_string).collect();
        index.push_str(&nums.join(","));
        index.push('\n');
    }
    let mut deps = Vec::new();
    for f in &policy.config.files {
        if !layers.contains(f) {
            deps.push((f.clone(), hash_bytes(&std::fs::read(f)?)));
        }
    }
    let mut config = policy.config.clone();
    config.rules.clear();
    let n = policy.config.rules.len();
    let header = Header { deps, config, wildcard: policy.wildcard.clone(), rule_count: n, index_len: index.len() };
    let head = format!("{MAGIC}\n{}\n", serde_json::to_string(&header)?);
    let rules_start = head.len() + index.len() + n * 16 + 1;
    let mut records = String::with_capacity(n * 16 + 1);
    let mut rules = String::new();
    for spec in &policy.config.rules {
        let start = rules_start + rules.len();
        rules.push_str(&serde_json::to_string(spec)?);
        let end = rules_start + rules.len();
        if end > u32::MAX as usize {
            return Ok(()); // Too large for 8 hex digits: do not cache.
        }
        records.push_str(&format!("{start:08x}{end:08x}"));
        rules.push('\n');
    }
    records.push('\n');
    // Only the user may write the cache: whoever can, changes the verdicts.
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), path.file_name().and_then(|n| n.to_str()).unwrap_or("x")));
    {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        for part in [head.as_bytes(), index.as_bytes(), records.as_bytes(), rules.as_bytes()] {
            f.write_all(part)?;
        }
    }
    std::fs::rename(&tmp, path)?;
    prune(dir);
    Ok(())
}

/// Keep the directory from growing without bound: drop the oldest entries past the limit.
fn prune(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("policy-"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if entries.len() <= MAX_ENTRIES {
        return;
    }
    entries.sort();
    for (_, p) in entries.iter().take(entries.len() - MAX_ENTRIES) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Action;

    fn opts(dir: &Path) -> LoadOptions {
        LoadOptions { explicit: None, cwd: dir.to_path_buf(), home: Some(dir.join("home")), xdg_config_home: None }
    }

    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).map(|r| r.count()).unwrap_or(0)
    }

    #[test]
    fn hit_miss_and_invalidation() {
        let tmp = tempfile::tempdir().unwrap();
        let proj = tmp.path().join("p");
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join("base.toml"), "[[rules]]\nallow = \"make *\"\n").unwrap();
        std::fs::write(proj.join("pinfold.toml"), "extends = [\"base.toml\"]\n[[rules]]\ndeny = \"rm *\"\n").unwrap();
        let o = opts(&proj);

        let p1 = load_cached(&o, &cache).unwrap();
        assert!(matches!(p1.store, RuleStore::Eager(_)), "first load is a miss");
        assert_eq!(entries(&cache), 1);
        let p2 = load_cached(&o, &cache).unwrap();
        assert!(matches!(p2.store, RuleStore::Lazy { .. }), "second load is a hit");
        assert_eq!(p2.judge("rm x", &proj).decision, Action::Deny);
        assert_eq!(p2.judge("make all", &proj).decision, Action::Allow);
        assert_eq!(p2.rule_count(), 2);

        // The project file changes (same size, same second): a miss, never the old verdict.
        std::fs::write(proj.join("pinfold.toml"), "extends = [\"base.toml\"]\n[[rules]]\nask = \"rm *\"\n").unwrap();
        let p3 = load_cached(&o, &cache).unwrap();
        assert!(matches!(p3.store, RuleStore::Eager(_)));
        assert_eq!(p3.judge("rm x", &proj).decision, Action::Ask);

        // A file reached through `extends` changes: the hit is refused.
        let _ = load_cached(&o, &cache).unwrap();
        std::fs::write(proj.join("base.toml"), "[[rules]]\ndeny = \"make *\"\n").unwrap();
        let p4 = load_cached(&o, &cache).unwrap();
        assert!(matches!(p4.store, RuleStore::Eager(_)));
        assert_eq!(p4.judge("make all", &proj).decision, Action::Deny);

        // A local layer appears: a different key.
        let _ = load_cached(&o, &cache).unwrap();
        std::fs::write(proj.join("pinfold.local.toml"), "[[rules]]\ndeny = \"ls *\"\n").unwrap();
        let p5 = load_cached(&o, &cache).unwrap();
        assert_eq!(p5.judge("ls", &proj).decision, Action::Deny);
    }

    #[test]
    fn a_damaged_rule_asks_and_a_damaged_entry_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let proj = tmp.path().join("p");
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join("pinfold.toml"), "[defaults]\naction = \"allow\"\n[[rules]]\ndeny = \"rm *\"\n").unwrap();
        let o = opts(&proj);
        let _ = load_cached(&o, &cache).unwrap();
        let entry = std::fs::read_dir(&cache).unwrap().next().unwrap().unwrap().path();
        let text = std::fs::read_to_string(&entry).unwrap();
        // Break the rule line but keep the header: the rule cannot be read, so `rm` asks.
        let broken = text.replace("\"deny\"", "\"dxny\"");
        std::fs::write(&entry, &broken).unwrap();
        let p = load_cached(&o, &cache).unwrap();
        assert_eq!(p.judge("rm x", &proj).decision, Action::Ask);
        // Truncate it: the header no longer parses, the entry is ignored and rewritten.
        std::fs::write(&entry, &text[..20]).unwrap();
        let p = load_cached(&o, &cache).unwrap();
        assert_eq!(p.judge("rm x", &proj).decision, Action::Deny);
    }

    /// Every one-byte change, and every one-bit change of a byte, anywhere in a file
    /// (blocks, the tail, the boundary) gives another hash; so do a byte added or removed.
    #[test]
    fn key_hash_sees_every_change() {
        let base: Vec<u8> = (0..100u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(hash_bytes(&base)));
        for i in 0..base.len() {
            for bit in 0..8 {
                let mut v = base.clone();
                v[i] ^= 1 << bit;
                assert!(seen.insert(hash_bytes(&v)), "byte {i} bit {bit}");
            }
        }
        for n in 0..base.len() {
            assert!(seen.insert(hash_bytes(&base[..n])), "prefix {n}");
        }
        let mut longer = base.clone();
        longer.push(0);
        assert!(seen.insert(hash_bytes(&longer)));
        // Blocks swapped, and the same bytes split across two writes differently.
        let mut swapped = base.clone();
        swapped[..32].rotate_left(16);
        assert!(seen.insert(hash_bytes(&swapped)));
        let split = |at: usize| {
            let mut h = KeyHasher::default();
            h.write(&base[..at]);
            h.write(&base[at..]);
            h.finish()
        };
        assert_ne!(split(10), split(11));
    }

    #[test]
    fn config_errors_are_reported_not_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let proj = tmp.path().join("p");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join("pinfold.toml"), "[[rule]]\n").unwrap();
        let e = load_cached(&opts(&proj), &tmp.path().join("c")).unwrap_err();
        assert_eq!(e.to_string(), "pinfold.toml:1:3: unknown key `rule` at the top level");
        assert_eq!(e.hint(), Some("did you mean `rules`?"), "{e}");
        assert_eq!(entries(&tmp.path().join("c")), 0);
    }
}
