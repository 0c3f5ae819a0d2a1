//! Strictest Wins: one sandbox preset for commands that name several.
//!
//! When one input holds commands allowed under different presets and must run in one
//! sandbox (`pinfold exec -- 'a | b'`), the presets are merged so that the result allows no
//! more than any of them:
//!
//! * writable roots: the path-aware intersection — a root survives if it lies inside a root
//!   of every preset (a preset with no writable roots empties the set);
//! * write-deny and read-deny lists: the union;
//! * network: allowed only if every preset allows it; host allowlists intersect;
//! * kept environment variables: only those every preset keeps.
//!
//! Worked example: `workspace` (write `/p`, `~/.cargo/registry`) merged with `readonly`
//! (no writes) gives no writable roots; merged with `docs` (write `/p/docs`) gives `/p/docs`.

use std::path::Path;

use crate::config::{Location, SandboxPreset};

/// Whether `inner` is `outer` or lies beneath it (component-wise; globs compared as text).
fn within(inner: &str, outer: &str) -> bool {
    Path::new(inner).starts_with(Path::new(outer))
}

/// Merge presets; `None` for an empty list.
pub fn merge_presets(presets: &[&SandboxPreset]) -> Option<SandboxPreset> {
    let (first, rest) = presets.split_first()?;
    if rest.is_empty() {
        return Some((*first).clone());
    }
    let mut candidates: Vec<String> = presets.iter().flat_map(|p| p.write_allow.iter().cloned()).collect();
    candidates.sort();
    candidates.dedup();
    let write_allow: Vec<String> = candidates
        .into_iter()
        .filter(|c| presets.iter().all(|p| p.write_allow.iter().any(|w| within(c, w))))
        .collect();
    let union = |f: fn(&SandboxPreset) -> &Vec<String>| {
        let mut v: Vec<String> = presets.iter().flat_map(|p| f(p).iter().cloned()).collect();
        v.sort();
        v.dedup();
        v
    };
    let network_allow = presets.iter().all(|p| p.network_allow);
    let network_hosts: Vec<String> = first
        .network_hosts
        .iter()
        .filter(|h| rest.iter().all(|p| p.network_hosts.contains(h)))
        .cloned()
        .collect();
    let env_keep: Vec<String> = first.env_keep.iter().filter(|e| rest.iter().all(|p| p.env_keep.contains(e))).cloned().collect();
    let names: Vec<&str> = presets.iter().map(|p| p.name.as_str()).collect();
    Some(SandboxPreset {
        name: names.join("+"),
        write_allow,
        write_deny: union(|p| &p.write_deny),
        read_deny: union(|p| &p.read_deny),
        network_allow,
        network_hosts,
        env_keep,
        location: Location { file: "merged".into(), line: 0, col: 0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str, w: &[&str], net: bool) -> SandboxPreset {
        SandboxPreset {
            name: name.into(),
            write_allow: w.iter().map(|s| s.to_string()).collect(),
            write_deny: vec![format!("/deny/{name}")],
            read_deny: vec![],
            network_allow: net,
            network_hosts: vec![],
            env_keep: vec![],
            location: Location { file: "t".into(), line: 1, col: 1 },
        }
    }

    #[test]
    fn strictest_wins() {
        let ws = preset("workspace", &["/p", "/home/me/.cargo/registry"], false);
        let docs = preset("docs", &["/p/docs"], true);
        let ro = preset("readonly", &[], true);
        let m = merge_presets(&[&ws, &docs]).unwrap();
        assert_eq!(m.write_allow, ["/p/docs"]);
        assert_eq!(m.write_deny, ["/deny/docs", "/deny/workspace"]);
        assert!(!m.network_allow);
        assert!(merge_presets(&[&ws, &ro]).unwrap().write_allow.is_empty());
        assert_eq!(merge_presets(&[&ws]).unwrap().write_allow.len(), 2);
        assert!(!within("/p2", "/p"));
    }
}
