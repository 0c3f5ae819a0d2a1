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

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, PathFdError, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

/// What the Landlock layer enforced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0: none).
    pub abi: i64,
    /// `fully`, `partially` or `not` enforced, as the kernel answered.
    pub status: Enforcement,
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

/// How much of a ruleset the kernel enforced: the crate's [`RulesetStatus`], serialised as
/// `fully`, `partially` or `not`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    Fully,
    Partially,
    Not,
}

impl From<RulesetStatus> for Enforcement {
    fn from(s: RulesetStatus) -> Enforcement {
        match s {
            RulesetStatus::FullyEnforced => Enforcement::Fully,
            RulesetStatus::PartiallyEnforced => Enforcement::Partially,
            RulesetStatus::NotEnforced => Enforcement::Not,
        }
    }
}

impl std::fmt::Display for Enforcement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Enforcement::Fully => "fully",
            Enforcement::Partially => "partially",
            Enforcement::Not => "not",
        })
    }
}

/// A step of building or enforcing the ruleset that failed, with the crate's error as the
/// source.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("Landlock is not available in this kernel")]
    Unavailable,
    #[error("Landlock file-system rights: {0}")]
    HandleFs(#[source] RulesetError),
    #[error("Landlock TCP rights: {0}")]
    HandleTcp(#[source] RulesetError),
    #[error("Landlock scoping: {0}")]
    Scope(#[source] RulesetError),
    #[error("Landlock ruleset: {0}")]
    Create(#[source] RulesetError),
    #[error("open /: {0}")]
    OpenRoot(#[source] PathFdError),
    #[error("Landlock rule for /: {0}")]
    RootRule(#[source] RulesetError),
    #[error("Landlock rule for TCP port {port}: {source}")]
    PortRule { port: u16, source: RulesetError },
    /// A device's or a writable root's rule.
    #[error("Landlock rule for {}: {source}", path.display())]
    PathRule { path: PathBuf, source: RulesetError },
    #[error("open writable root {}: {source}", path.display())]
    OpenWritable { path: PathBuf, source: PathFdError },
    #[error("Landlock restrict_self: {0}")]
    RestrictSelf(#[source] RulesetError),
    /// The kernel answered with less than the whole ruleset.
    #[error("the kernel enforced the Landlock ruleset {status}, not fully")]
    NotFullyEnforced { status: Enforcement },
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

/// Devices any command may write (and, for ttys, use ioctls on) come in two groups.
///
/// Devices bound from the host into the sandbox's `/dev`: the same inodes on either side of
/// the mounts, so their rules may be added before init has built the tree.
pub const HOST_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Devices the sandbox makes for itself (`/dev/pts` and `/dev/shm` are new instances,
/// `/dev/ptmx` a link into the new `/dev/pts`): their rules need the finished tree.
pub const OWN_DEVICES: &[&str] = &["/dev/pts", "/dev/shm", "/dev/ptmx"];

/// A ruleset being filled, rule by rule, then enforced on the calling thread by
/// [`Pending::finish`]. `abi` is the kernel's, from [`crate::sys::landlock_abi`]. Landlock rules name inodes, not paths: a rule added for a path before
/// a bind mount lands on it holds for the bound path too (the same inode), which is what lets
/// the command process fill most of its ruleset while init is still mounting.
pub struct Pending {
    created: RulesetCreated,
    abi_version: i64,
    abi: ABI,
    all: BitFlags<AccessFs>,
    tcp_rule: Tcp,
    tcp: bool,
    scoped: bool,
    granted: Vec<PathBuf>,
}

impl Pending {
    /// The ruleset: every file-system right handled (and TCP, and scoping, as the ABI allows),
    /// read and execute granted everywhere, and the proxy's port when there is one.
    pub fn begin(abi_version: i64, tcp_rule: Tcp) -> Result<Pending, LandlockError> {
        let abi = abi_from(abi_version);
        if abi == ABI::Unsupported {
            return Err(LandlockError::Unavailable);
        }
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let tcp = tcp_rule != Tcp::Open && abi_version >= 4;
        let scoped = abi_version >= 6;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all)
            .map_err(LandlockError::HandleFs)?;
        if tcp {
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(LandlockError::HandleTcp)?;
        }
        if scoped {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .map_err(LandlockError::Scope)?;
        }
        let mut created = ruleset.create().map_err(LandlockError::Create)?;
        // `/` is the host's root inode on both sides of the pivot (the new root is a bind of it).
        created = created
            .add_rule(PathBeneath::new(PathFd::new("/").map_err(LandlockError::OpenRoot)?, read))
            .map_err(LandlockError::RootRule)?;
        if let (true, Tcp::ConnectOnly(port)) = (tcp, tcp_rule) {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|source| LandlockError::PortRule { port, source })?;
        }
        Ok(Pending { created, abi_version, abi, all, tcp_rule, tcp, scoped, granted: Vec::new() })
    }

    /// Rights on a file are the file rights only; directories get them all. Never the right
    /// to make device nodes, even where the command may write.
    fn rights_for(&self, p: &Path) -> BitFlags<AccessFs> {
        let rights = self.all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        if p.is_dir() { rights } else { rights & AccessFs::from_file(self.abi) }
    }

    /// Let the command use the device `d`; an absent device is simply not granted.
    pub fn device(mut self, d: &Path) -> Result<Pending, LandlockError> {
        if let Ok(fd) = PathFd::new(d) {
            let rights = self.rights_for(d);
            self.created = self
                .created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(|source| LandlockError::PathRule { path: d.to_path_buf(), source })?;
        }
        Ok(self)
    }

    /// Let the command write beneath `w`, which must exist — but make no FIFO there: a FIFO
    /// at a name a program opens outside the sandbox (`.gitignore`, `.git/HEAD`) hangs it
    /// (found by an outside attack: every `git status` on the host, a shell prompt's too,
    /// waited forever). FIFOs are made in the private temp dir ([`Pending::scratch`]).
    pub fn writable(self, w: &Path) -> Result<Pending, LandlockError> {
        self.writable_with(w, false)
    }

    /// Let the command write beneath `w` (the private temp dir), FIFOs included.
    pub fn scratch(self, w: &Path) -> Result<Pending, LandlockError> {
        self.writable_with(w, true)
    }

    fn writable_with(mut self, w: &Path, fifos: bool) -> Result<Pending, LandlockError> {
        let fd = PathFd::new(w).map_err(|source| LandlockError::OpenWritable { path: w.to_path_buf(), source })?;
        let rights = if fifos { self.rights_for(w) } else { self.rights_for(w) & !AccessFs::MakeFifo };
        self.created = self
            .created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|source| LandlockError::PathRule { path: w.to_path_buf(), source })?;
        self.granted.push(w.to_path_buf());
        Ok(self)
    }

    /// Enforce the ruleset on the calling thread; an error unless the kernel enforced it fully.
    pub fn finish(self) -> Result<LandlockReport, LandlockError> {
        let status = Enforcement::from(self.created.restrict_self().map_err(LandlockError::RestrictSelf)?.ruleset);
        if status != Enforcement::Fully {
            return Err(LandlockError::NotFullyEnforced { status });
        }
        let tcp_connect_port = match self.tcp_rule {
            Tcp::ConnectOnly(port) if self.tcp => Some(port),
            _ => None,
        };
        Ok(LandlockReport {
            abi: self.abi_version,
            status,
            fs: true,
            tcp: self.tcp,
            tcp_connect_port,
            scoped: self.scoped,
            writable: self.granted,
        })
    }
}
