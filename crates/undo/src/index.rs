//! The entries of a git index (formats 2, 3 and 4): each staged path with its mode. Read
//! directly, as git lays the file out (`Documentation/gitformat-index.txt`), so that nothing
//! here runs git.

/// The paths `b` (an index file) stages, each with its mode. A malformed index gives what
/// could be read before the fault; anything that is not an index gives nothing.
pub fn entries(b: &[u8], hash_len: usize) -> Vec<(u32, Vec<u8>)> {
    let be32 = |at: usize| b.get(at..at + 4).map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]));
    let mut out = Vec::new();
    if b.get(..4) != Some(b"DIRC") {
        return out;
    }
    let (Some(version), Some(count)) = (be32(4), be32(8)) else { return out };
    if !(2..=4).contains(&version) {
        return out;
    }
    let mut at = 12;
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let Some(mode) = be32(at + 24) else { break };
        let flags_at = at + 40 + hash_len;
        let Some(flags) = b.get(flags_at..flags_at + 2).map(|x| u16::from_be_bytes([x[0], x[1]])) else { break };
        let mut p = flags_at + 2;
        if version >= 3 && flags & 0x4000 != 0 {
            p += 2;
        }
        let path = if version == 4 {
            // How much of the previous path to drop (git's offset varint), then the rest.
            let mut strip: usize = 0;
            let mut first = true;
            loop {
                let Some(&c) = b.get(p) else { return out };
                p += 1;
                strip = if first { (c & 127) as usize } else { strip.saturating_add(1).saturating_mul(128) | (c & 127) as usize };
                first = false;
                if c & 128 == 0 {
                    break;
                }
            }
            let Some(len) = b.get(p..).and_then(|r| r.iter().position(|&c| c == 0)) else { return out };
            let keep = prev.len().saturating_sub(strip);
            let mut path = prev[..keep].to_vec();
            path.extend_from_slice(&b[p..p + len]);
            at = p + len + 1;
            path
        } else {
            let Some(len) = b.get(p..).and_then(|r| r.iter().position(|&c| c == 0)) else { return out };
            let path = b[p..p + len].to_vec();
            // Entries are padded with NULs to a multiple of 8 bytes.
            at = start + ((p - start + len + 8) & !7);
            path
        };
        out.push((mode, path.clone()));
        prev = path;
    }
    out
}

/// Whether the repository whose config is `config` (its text) hashes with SHA-256.
pub fn sha256_repo(config: &[u8]) -> bool {
    String::from_utf8_lossy(config).to_ascii_lowercase().contains("objectformat = sha256")
}
