//! The container's seccomp profile: the engine's own default (Podman's
//! `/usr/share/containers/seccomp.json`), or allow-by-default where there is none to read,
//! with the process sandbox's rules ([`crate::seccomp::RULES`]) laid over it. A call a rule
//! refuses is taken out of every rule that allows it, then refused with the rule's errno; a
//! call refused only for some arguments (namespace flags of `clone`/`unshare`, `TIOCSTI`) is
//! allowed again for every other argument. Podman's default allows `unshare`, `setns`,
//! `mount`, `ptrace` and `process_vm_writev` outright and leaves them to capabilities; with
//! this profile a container refuses them as the process sandbox does.

use std::path::Path;

use serde_json::{Value, json};

use crate::seccomp::{Action, Cond, RULES};

/// Where Podman keeps its default profile.
const PODMAN_DEFAULT: &[&str] = &["/etc/containers/seccomp.json", "/usr/share/containers/seccomp.json"];

/// The profile, and where its base came from.
pub(crate) fn profile() -> (Value, &'static str) {
    let base = PODMAN_DEFAULT.iter().find_map(|p| {
        let v: Value = serde_json::from_slice(&std::fs::read(Path::new(p)).ok()?).ok()?;
        v["syscalls"].is_array().then_some((v, *p))
    });
    let (v, from) = base.unwrap_or_else(|| (allow_by_default(), "allow by default"));
    (over(v, &[]), from)
}

/// Allow every call: the base where there is no engine default (and gVisor's: its own
/// kernel is the boundary; the rules are what the process sandbox refuses besides).
pub(crate) fn allow_by_default() -> Value {
    json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"], "syscalls": []})
}

/// The process sandbox's rules but those named in `except`, laid over the profile `v`.
pub(crate) fn over(mut v: Value, except: &[&str]) -> Value {
    let default_allows = v["defaultAction"] == "SCMP_ACT_ALLOW";
    let applies = |r: &&crate::seccomp::Rule| !r.network_off_only && !except.contains(&r.name);
    let ours: Vec<&str> = RULES.iter().filter(applies).map(|r| r.name).collect();
    // Out of every rule of the base that names them.
    if let Some(list) = v["syscalls"].as_array_mut() {
        for rule in list.iter_mut() {
            if let Some(names) = rule["names"].as_array_mut() {
                names.retain(|n| n.as_str().is_none_or(|n| !ours.contains(&n)));
            }
        }
        list.retain(|rule| rule["names"].as_array().is_none_or(|n| !n.is_empty()));
        for r in RULES.iter().filter(applies) {
            let Action::Errno(errno) = r.action;
            let refuse = |args: Value| json!({"names": [r.name], "action": "SCMP_ACT_ERRNO", "errnoRet": errno, "args": args});
            let allow = |args: Value| json!({"names": [r.name], "action": "SCMP_ACT_ALLOW", "args": args});
            match r.cond {
                Cond::Always => list.push(refuse(json!([]))),
                Cond::AnyBit { arg, mask } => {
                    // Refused when any bit is set (one rule per bit), allowed when none is.
                    for bit in (0..32).map(|b| 1u32 << b).filter(|b| mask & b != 0) {
                        list.push(refuse(json!([{"index": arg, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}])));
                    }
                    if !default_allows {
                        list.push(allow(json!([{"index": arg, "value": mask, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}])));
                    }
                }
                Cond::OneOf { arg, values } => {
                    for value in values {
                        list.push(refuse(json!([{"index": arg, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}])));
                    }
                    if !default_allows {
                        // Every other value: below the least, above the most, and each between.
                        let lo = *values.iter().min().unwrap_or(&0);
                        let hi = *values.iter().max().unwrap_or(&0);
                        list.push(allow(json!([{"index": arg, "value": lo, "valueTwo": 0, "op": "SCMP_CMP_LT"}])));
                        list.push(allow(json!([{"index": arg, "value": hi, "valueTwo": 0, "op": "SCMP_CMP_GT"}])));
                        for between in (lo + 1..hi).filter(|x| !values.contains(x)) {
                            list.push(allow(json!([{"index": arg, "value": between, "valueTwo": 0, "op": "SCMP_CMP_EQ"}])));
                        }
                    }
                }
                // Not used by a rule that applies with the network on (a container's network
                // namespace is empty either way).
                Cond::NoneOf { .. } => {}
            }
        }
    }
    v
}
