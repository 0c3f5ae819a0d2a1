//! The Landlock layer: a second, independent wall around writes, plus TCP and scoping.
//!
//! The mount layer already makes everything but the writable roots read-only. Landlock says
//! the same thing again in a different kernel mechanism, so that one mistake in the mount
//! tree (a bind missed, a mount the kernel re-exposed) does not open a write path:
//!
//! * read and execute everywhere; full access beneath the writable roots and a few devices;
//! * with the network off and ABI ≥ 4, no TCP bind or connect at all;
//! * with ABI ≥ 6, no connecting to abstract unix sockets and no signals to processes
//!   outside the sandbox.
//!
//! It asks the kernel for its ABI version, requests exactly what that ABI supports, and
//! returns what the kernel says it enforced — never a best-effort guess.

use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

/// What the Landlock layer enforced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0: none).
    pub abi: i64,
    /// `fully`, `partially` or `not` enforced, as the kernel answered.
    pub status: String,
    /// File-system writes limited to the writable roots.
    pub fs: bool,
    /// TCP bind/connect denied (network off or through the proxy, ABI ≥ 4).
    pub tcp: bool,
    /// The one port TCP may connect to (the proxy's), when `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_connect_port: Option<u16>,
    /// Abstract unix sockets and signals scoped to the sandbox (ABI ≥ 6).
    pub scoped: bool,
    /// Paths that got write access.
    pub writable: Vec<PathBuf>,
}

fn abi_from(v: i64) -> ABI {
    match v {
        ..=0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        8 => ABI::V8,
        9 => ABI::V9,
        // Newer kernels: ask for what this crate knows; the kernel supports all of it.
        _ => ABI::V10,
    }
}

/// Devices any command may write (and, for ttys, use ioctls on).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/ptmx"];

/// What TCP the command may do, where the kernel has Landlock network rules (ABI 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tcp {
    /// Not restricted by Landlock (the network is on).
    Open,
    /// No bind, no connect.
    Closed,
    /// Connect to this port only (the proxy's, in a namespace with nothing but loopback); no
    /// bind.
    ConnectOnly(u16),
}

/// Restrict the calling thread. `abi` is the kernel's, from [`crate::sys::landlock_abi`].
pub fn apply(abi_version: i64, writable: &[PathBuf], tcp_rule: Tcp) -> Result<LandlockReport, String> {
    let abi = abi_from(abi_version);
    if abi == ABI::Unsupported {
        return Err("Landlock is not available in this kernel".into());
    }
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let tcp = tcp_rule != Tcp::Open && abi_version >= 4;
    let scoped = abi_version >= 6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| format!("Landlock file-system rights: {e}"))?;
    if tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| format!("Landlock TCP rights: {e}"))?;
    }
    if scoped {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| format!("Landlock scoping: {e}"))?;
    }
    let mut created = ruleset.create().map_err(|e| format!("Landlock ruleset: {e}"))?;
    created = created
        .add_rule(PathBeneath::new(PathFd::new("/").map_err(|e| format!("open /: {e}"))?, read))
        .map_err(|e| format!("Landlock rule for /: {e}"))?;
    if let (true, Tcp::ConnectOnly(port)) = (tcp, tcp_rule) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| format!("Landlock rule for TCP port {port}: {e}"))?;
    }
    let mut granted = Vec::new();
    let dev_rights: BitFlags<AccessFs> = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    // Rights on a file are the file rights only; directories get them all.
    let for_path = |p: &std::path::Path, rights: BitFlags<AccessFs>| {
        if p.is_dir() { rights } else { rights & AccessFs::from_file(abi) }
    };
    for d in DEVICES {
        // Devices that are absent are simply not granted.
        if let Ok(fd) = PathFd::new(d) {
            let rights = for_path(std::path::Path::new(d), dev_rights);
            created = created.add_rule(PathBeneath::new(fd, rights)).map_err(|e| format!("Landlock rule for {d}: {e}"))?;
        }
    }
    for w in writable {
        let fd = PathFd::new(w).map_err(|e| format!("open writable root {}: {e}", w.display()))?;
        // Never let a command make device nodes, even where it may write.
        let rights = for_path(w, all & !(AccessFs::MakeChar | AccessFs::MakeBlock));
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| format!("Landlock rule for {}: {e}", w.display()))?;
        granted.push(w.clone());
    }
    let status = created.restrict_self().map_err(|e| format!("Landlock restrict_self: {e}"))?;
    let status_name = match status.ruleset {
        RulesetStatus::FullyEnforced => "fully",
        RulesetStatus::PartiallyEnforced => "partially",
        RulesetStatus::NotEnforced => "not",
    };
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!("the kernel enforced the Landlock ruleset {status_name}, not fully"));
    }
    let tcp_connect_port = match tcp_rule {
        Tcp::ConnectOnly(port) if tcp => Some(port),
        _ => None,
    };
    Ok(LandlockReport { abi: abi_version, status: status_name.into(), fs: true, tcp, tcp_connect_port, scoped, writable: granted })
}
