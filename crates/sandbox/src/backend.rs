//! Where a confined command runs. Every backend takes the same [`Policy`], enforces all of it
//! or refuses, and answers with the same [`SandboxReport`]; the caller knows only the name.
//!
//! * `process`: Linux namespaces, Landlock and seccomp around an ordinary process on the
//!   host kernel (the rest of this crate).
//! * `gvisor`: the same policy written as an OCI bundle and run by `runsc`, so the command
//!   talks to gVisor's user-space kernel, not the host's (see `gvisor.rs`).
//! * `container`: a container of a Docker Engine API (Docker, or Podman's compatible
//!   service) from the image the preset names (see `container/`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{Hooks, Outcome, Policy, Prestart, SandboxError};

/// The name of a backend, as a preset's `backend` key and `pinfold exec --backend` give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Namespaces, Landlock and seccomp on the host kernel.
    #[default]
    Process,
    /// gVisor's user-space kernel (`runsc`).
    Gvisor,
    /// A container of a Docker Engine API (Docker, Podman), from an image the preset names.
    Container,
}

impl BackendKind {
    /// Every backend this build has, in the order `doctor` lists them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Process, BackendKind::Gvisor, BackendKind::Container];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Process => "process",
            BackendKind::Gvisor => "gvisor",
            BackendKind::Container => "container",
        }
    }

    /// Whether the backend can tell pinfold of each change before it happens (what `pinfold
    /// undo` needs): only the process backend, whose seccomp filter sees the calls.
    pub fn records_changes(self) -> bool {
        self == BackendKind::Process
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that is not one of [`BackendKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}`: expected one of process, gvisor, container")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for BackendKind {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BackendKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

/// One way to run a confined command.
pub trait Backend: Sync {
    fn kind(&self) -> BackendKind;

    /// What this machine can do for the backend, asked now.
    fn status(&self) -> BackendStatus;

    /// Run `argv` under `policy` and wait for it, as [`Policy::run_with`] describes. `pre` is
    /// a process-backend sandbox started ahead; other backends drop it (which kills it).
    fn run(&self, policy: &Policy, argv: &[String], pre: Option<Prestart>, hooks: Hooks<'_>) -> Result<Outcome, SandboxError>;
}

/// What `pinfold doctor` says of a backend.
#[derive(Debug, Clone, Serialize)]
pub struct BackendStatus {
    pub name: &'static str,
    /// The backend can run a command here, as this user.
    pub available: bool,
    /// What was found (a version, the mode it runs in) or what is missing.
    pub detail: String,
    /// How to make it available, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The program the backend runs, when it runs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
}

/// The status of every backend of this build, then of the designs not built (a microVM).
pub fn statuses() -> Vec<BackendStatus> {
    let mut v: Vec<BackendStatus> = BackendKind::ALL.iter().map(|k| k.backend().status()).collect();
    v.push(BackendStatus {
        name: "microvm",
        available: false,
        detail: "not implemented: designed in docs/design/backends.md (Firecracker or libkrun, egress over vsock)".into(),
        fix: None,
        program: None,
    });
    v
}

/// Namespaces, Landlock and seccomp around a host process.
#[derive(Debug)]
pub(crate) struct ProcessBackend;

impl Backend for ProcessBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Process
    }

    fn status(&self) -> BackendStatus {
        let a = crate::probe();
        let problems = a.problems();
        BackendStatus {
            name: "process",
            available: problems.is_empty(),
            detail: if problems.is_empty() {
                format!("Landlock ABI {}, user namespaces, seccomp", a.landlock_abi)
            } else {
                problems.iter().map(|(layer, why, _)| format!("{layer}: {why}")).collect::<Vec<_>>().join("; ")
            },
            fix: (!problems.is_empty()).then(|| problems.iter().map(|(_, _, fix)| fix.clone()).collect::<Vec<_>>().join("; ")),
            program: None,
        }
    }

    fn run(&self, policy: &Policy, argv: &[String], pre: Option<Prestart>, hooks: Hooks<'_>) -> Result<Outcome, SandboxError> {
        crate::parent::run(policy, argv, pre, hooks)
    }
}
