//! Strictest Wins: one sandbox preset for commands that name several.
//!
//! When one input holds commands allowed under different presets and must run in one
//! sandbox (`pinfold exec -- 'a | b'`), the presets are merged so that the result allows no
//! more than any of them:
//!
//! * writable roots: the path-aware intersection — a root survives if it lies inside a root
//!   of every preset (a preset with no writable roots empties the set);
//! * write-deny and read-deny lists: the union;
//! * network: allowed only if every preset allows it. Host allowlists intersect: a host on a
//!   port survives if every preset allows it (a preset with the full network, `allow` without
//!   `hosts`, restricts nothing), so `*.github.com` with `api.github.com:443` gives
//!   `api.github.com:443`. When the allowlists have nothing in common the network is off,
//!   never full;
//! * extra upstream roots (`upstream_ca`): only those every preset trusts;
//! * credential endpoints: only those every preset defines identically, and whose host the
//!   merged allowlist still allows;
//! * kept environment variables: only those every preset keeps.
//!
//! Worked example: `workspace` (write `/p`, `~/.cargo/registry`) merged with `readonly`
//! (no writes) gives no writable roots; merged with `docs` (write `/p/docs`) gives `/p/docs`.

use std::path::Path;

use crate::config::{Endpoint, Location, SandboxPreset};

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
    let mut network_allow = presets.iter().all(|p| p.network_allow);
    let lists: Vec<&[_]> = presets
        .iter()
        .filter(|p| !p.network_hosts.is_empty())
        .map(|p| p.network_hosts.as_slice())
        .collect();
    let mut network_hosts = Vec::new();
    if network_allow && !lists.is_empty() {
        network_hosts = pinfold_egress::intersect_lists(&lists);
        // Nothing in common: an empty list would read as the full network.
        network_allow = !network_hosts.is_empty();
    }
    let upstream_ca: Vec<String> = first
        .upstream_ca
        .iter()
        .filter(|c| rest.iter().all(|p| p.upstream_ca.contains(c)))
        .cloned()
        .collect();
    let same = |a: &Endpoint, b: &Endpoint| {
        (&a.host, &a.credential, &a.header, &a.format) == (&b.host, &b.credential, &b.header, &b.format)
    };
    let endpoints: Vec<Endpoint> = first
        .endpoints
        .iter()
        .filter(|e| rest.iter().all(|p| p.endpoints.iter().any(|f| same(e, f))))
        .filter(|e| network_allow && (network_hosts.is_empty() || network_hosts.iter().any(|h| h.covers(&e.host))))
        .cloned()
        .collect();
    let env_keep: Vec<String> = first.env_keep.iter().filter(|e| rest.iter().all(|p| p.env_keep.contains(e))).cloned().collect();
    let names: Vec<&str> = presets.iter().map(|p| p.name.as_str()).collect();
    // The most isolated backend any of them names.
    let rank = |b: &str| crate::config::BACKENDS.iter().position(|k| *k == b).unwrap_or(usize::MAX);
    let backend = presets.iter().map(|p| p.backend.as_str()).max_by_key(|b| rank(b)).unwrap_or("process").to_string();
    Some(SandboxPreset {
        name: names.join("+"),
        write_allow,
        write_deny: union(|p| &p.write_deny),
        read_deny: union(|p| &p.read_deny),
        network_allow,
        network_hosts,
        upstream_ca,
        endpoints,
        env_keep,
        container: merge_container(presets, &backend),
        backend,
        location: Location { file: "merged".into(), line: 0, col: 0 },
    })
}

/// The container keys of a merged preset: the image of the first preset that names one, the
/// most isolated runtime (`runsc` over any other), the lowest of each limit.
fn merge_container(presets: &[&SandboxPreset], backend: &str) -> crate::config::ContainerKeys {
    if backend != "container" {
        return Default::default();
    }
    let keys: Vec<&crate::config::ContainerKeys> = presets.iter().filter(|p| p.backend == "container").map(|p| &p.container).collect();
    let runtimes: Vec<&String> = keys.iter().filter_map(|k| k.runtime.as_ref()).collect();
    crate::config::ContainerKeys {
        image: keys.iter().find_map(|k| k.image.clone()),
        runtime: runtimes.iter().find(|r| r.as_str() == "runsc").or(runtimes.first()).map(|r| r.to_string()),
        cpus: keys.iter().filter_map(|k| k.cpus).reduce(f64::min),
        memory: keys.iter().filter_map(|k| k.memory).min(),
        pids: keys.iter().filter_map(|k| k.pids).min(),
    }
}

// address-literal: never connected (allowlists merged only)
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
            upstream_ca: vec![],
            endpoints: vec![],
            env_keep: vec![],
            backend: "process".into(),
            container: Default::default(),
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

    #[test]
    fn the_most_isolated_backend_wins() {
        let ws = preset("workspace", &["/p"], false);
        let mut gv = preset("gv", &["/p"], false);
        gv.backend = "gvisor".into();
        assert_eq!(merge_presets(&[&ws, &gv]).unwrap().backend, "gvisor");
        assert_eq!(merge_presets(&[&gv, &ws]).unwrap().backend, "gvisor");
        assert_eq!(merge_presets(&[&ws, &ws]).unwrap().backend, "process");
    }

    fn hosts(p: &mut SandboxPreset, hosts: &[&str]) {
        p.network_hosts = hosts.iter().map(|h| h.parse().unwrap()).collect();
    }

    fn shown(p: &SandboxPreset) -> Vec<String> {
        let mut v: Vec<String> = p.network_hosts.iter().map(|h| h.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn host_allowlists_intersect() {
        let mut a = preset("a", &[], true);
        let mut b = preset("b", &[], true);
        let full = preset("full", &[], true);
        hosts(&mut a, &["crates.io", "*.github.com", "example.com:8443"]);
        hosts(&mut b, &["crates.io:443", "api.github.com", "*.example.com"]);
        let m = merge_presets(&[&a, &b]).unwrap();
        assert!(m.network_allow);
        assert_eq!(shown(&m), ["api.github.com", "crates.io:443"]);

        // Full network restricts nothing; the allowlist stays.
        let m = merge_presets(&[&full, &a]).unwrap();
        assert!(m.network_allow);
        assert_eq!(shown(&m), ["*.github.com", "crates.io", "example.com:8443"]);
        assert!(merge_presets(&[&full, &full]).unwrap().network_hosts.is_empty());

        // Disjoint allowlists: no network, never the full network an empty list would mean.
        let mut c = preset("c", &[], true);
        hosts(&mut c, &["pypi.org"]);
        let m = merge_presets(&[&a, &c]).unwrap();
        assert!(!m.network_allow);
        assert!(!m.has_allowlist());

        // Network off anywhere is off.
        let off = preset("off", &[], false);
        assert!(!merge_presets(&[&a, &off]).unwrap().network_allow);
    }

    #[test]
    fn endpoints_and_cas_need_every_preset() {
        let ep = Endpoint {
            host: "api.github.com".parse().unwrap(),
            credential: "github".into(),
            header: "Authorization".into(),
            format: "Bearer {}".into(),
            location: Location { file: "t".into(), line: 1, col: 1 },
        };
        let mut a = preset("a", &[], true);
        let mut b = preset("b", &[], true);
        hosts(&mut a, &["*.github.com"]);
        hosts(&mut b, &["api.github.com"]);
        a.endpoints = vec![ep.clone()];
        a.upstream_ca = vec!["/ca/corp.pem".into(), "/ca/extra.pem".into()];
        b.upstream_ca = vec!["/ca/corp.pem".into()];
        let m = merge_presets(&[&a, &b]).unwrap();
        assert!(m.endpoints.is_empty(), "b does not define the endpoint");
        assert_eq!(m.upstream_ca, ["/ca/corp.pem"]);
        b.endpoints = vec![ep.clone()];
        assert_eq!(merge_presets(&[&a, &b]).unwrap().endpoints, [ep.clone()]);
        // The endpoint's host no longer allowed after the intersection: dropped.
        hosts(&mut b, &["uploads.github.com"]);
        let m = merge_presets(&[&a, &b]).unwrap();
        assert!(m.endpoints.is_empty());
    }
}
