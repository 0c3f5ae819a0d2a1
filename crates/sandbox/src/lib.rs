//! Run a command so that the kernel — not pinfold's own process — stops it from writing
//! outside chosen places, reading chosen secrets, or reaching the network; and say exactly
//! what was enforced.
//!
//! # How the pieces fit
//!
//! * [`probe`] asks the kernel what it can do ([`Availability`]): the Landlock ABI (asked
//!   directly, never inferred from a best-effort call), user namespaces, seccomp.
//! * A [`Policy`] names writable roots, paths to keep read-only or unreadable, the network,
//!   and the environment. [`Policy::run`] refuses when the kernel cannot enforce it (unless
//!   [`Policy::allow_degraded`]), runs the command, and returns its [`Outcome`] with a
//!   [`SandboxReport`]: the roots actually granted (and those that did not exist), the paths
//!   protected, and each layer's status as the kernel answered.
//! * [`default_writable`] gives the usual writable roots for a project: the project, its git
//!   directory when it lives elsewhere, a private temp dir, toolchain caches that exist.
//!
//! The confined child is built in layers, each independent of the others (see
//! `docs/design/sandbox.md`): namespaces and a read-only mount tree; Landlock; seccomp;
//! process hygiene (no_new_privs, no capabilities, a new session, death with the parent, a
//! scrubbed environment).
//!
//! # Example
//!
//! ```no_run
//! use pinfold_sandbox::{Network, Policy};
//!
//! let mut policy = Policy::new("/work/project".into());
//! policy.writable.push("/work/project".into());
//! policy.read_deny.push("/home/me/.ssh".into());
//! policy.network = Network::Off;
//! let outcome = policy.run(&["cargo".into(), "test".into()]).expect("sandbox set up");
//! println!("exit {}; landlock {:?}", outcome.code, outcome.report.landlock);
//! ```
//!
//! # What it does not guarantee
//!
//! Reads are open by default (builds need them): only the paths in [`Policy::read_deny`] are
//! hidden, and a glob there is expanded once, at start — a matching file created later is not
//! hidden. Paths are protected by mounts of what existed at start; a path that did not exist
//! gets an empty placeholder for the run. The network is off, on, or only through a proxy the
//! caller runs ([`Network::Proxy`]); host allowlists are the proxy's business. See `docs/design/threat-model.md`.

mod backend;
mod child;
pub mod container;
mod env;
mod gvisor;
mod landlock_layer;
mod mounts;
mod parent;
mod probe;
mod seccomp;
#[allow(unsafe_code)]
mod sys;
mod tripwire;
#[allow(unsafe_code)]
mod watch;
pub mod worker;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use backend::{statuses as backend_statuses, Backend, BackendKind, BackendStatus, UnknownBackend};
pub use container::kept::remove_kept;
pub use container::{ContainerReport, ContainerSettings};
pub use gvisor::RUNSC_ENV;
pub use env::{is_secret_name, SECRET_PATTERNS};
pub use landlock_layer::{Enforcement, LandlockReport};
/// A sandbox started before its policy is known: [`Prestart::begin`] clones init into new
/// namespaces; it creates the others and the policy-independent part of the mount tree while the caller
/// is still deciding what to run; [`Policy::run_prestarted`] then sends it the spec. Dropped
/// unused, it is killed. What is enforced is the same either way.
pub use parent::{held_placeholder, look_through, Looked, Prestart, SecondName, LINKS_ENTRIES};
pub use probe::{probe, Availability};
pub use seccomp::RULES as SECCOMP_RULES;
pub use sys::note_caller_sigpipe;
pub use watch::{Change, Observer};

/// Entry point of `pinfold __sandbox-helper …` (the CLI routes [`HELPER_ARG`] here): the
/// kernel probe, the process sandbox's re-executed helper, or the gvisor backend's launcher.
/// Never returns.
pub fn helper_main(args: &[String]) -> ! {
    let code = match args.first().map(String::as_str) {
        Some("probe") => probe::probe_child(),
        Some("run") => child::run(args),
        Some("gvisor") => gvisor::helper(args),
        Some("container-reap") => container::reap_helper(args),
        Some("container-netns") => container::netns_helper(args),
        Some("container-stage") => container::stage_helper(args),
        Some("container-hold") => container::kept::hold_helper(args),
        Some("container-keep") => container::kept::keep_helper(),
        _ => {
            eprintln!("pinfold: internal helper called with unknown arguments");
            2
        }
    };
    std::process::exit(code)
}

/// Signals init and the helpers pass on to the command.
pub(crate) const FORWARDED: &[libc::c_int] =
    &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2, libc::SIGWINCH, libc::SIGCONT];

impl BackendKind {
    /// The implementation.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            BackendKind::Process => &backend::ProcessBackend,
            BackendKind::Gvisor => &gvisor::Gvisor,
            BackendKind::Container => &container::Container,
        }
    }
}

/// The hidden subcommand the CLI must route to [`helper_main`].
pub const HELPER_ARG: &str = "__sandbox-helper";

/// Network access for the confined command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// No network: a new, empty network namespace; no TCP in Landlock; no inet sockets.
    Off,
    /// The host's network.
    On,
    /// Only through a proxy the caller runs outside: a new network namespace with nothing but
    /// loopback, in which a TCP listener at `127.0.0.1:`[`Policy::proxy_port`] is made before
    /// the command starts and handed to the caller (see [`Policy::run_proxied`]); Landlock (ABI
    /// 4 and later) lets the command connect to that port only, and bind none.
    Proxy,
}

/// The port of the proxy listener inside the sandbox when [`Policy::proxy_port`] is not set.
pub const DEFAULT_PROXY_PORT: u16 = 3128;

fn default_proxy_port() -> u16 {
    DEFAULT_PROXY_PORT
}

/// What the confined command may do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Policy {
    /// Directories (or files) the command may write, with everything beneath them.
    pub writable: Vec<PathBuf>,
    /// Paths kept read-only even inside writable roots (deny wins). Globs are expanded at
    /// start; paths that do not exist get an empty placeholder for the run.
    pub write_deny: Vec<PathBuf>,
    /// Paths hidden: an empty directory or file in their place. Globs expanded at start.
    pub read_deny: Vec<PathBuf>,
    pub network: Network,
    /// Environment variables kept even though their names look like secrets.
    pub keep_env: Vec<String>,
    /// Environment variables removed whatever their names and `keep_env` say (the variables
    /// a credential is read from, say).
    #[serde(default)]
    pub remove_env: Vec<String>,
    /// Variables to set (after scrubbing), e.g. `TMPDIR` is set by [`Policy::run`].
    pub set_env: Vec<(String, String)>,
    /// Working directory of the command.
    pub cwd: PathBuf,
    /// Run with fewer layers when the kernel lacks some, instead of refusing; the report
    /// then lists what is missing.
    pub allow_degraded: bool,
    /// Give the command a private, writable temp dir (TMPDIR), removed afterwards.
    pub private_tmp: bool,
    /// With [`Network::Proxy`], the loopback port the proxy listener has inside.
    #[serde(default = "default_proxy_port")]
    pub proxy_port: u16,
    /// Report every change the command is about to make beneath these paths to the
    /// observer of [`Policy::run_with`], before it happens (see [`Change`]). Empty: nothing
    /// is watched, and the command runs without the watch filter.
    #[serde(default)]
    pub watch: Vec<PathBuf>,
    /// Where the command runs: this crate's process sandbox, or gVisor (see [`BackendKind`]).
    /// Every backend enforces the whole policy or refuses.
    #[serde(default)]
    pub backend: BackendKind,
    /// The container backend's image, runtime and limits.
    #[serde(default)]
    pub container: ContainerSettings,
    /// The caller's own hidden paths (pinfold's state and keys, among `read_deny`): nothing
    /// confined reaches them to make a link there, so they are not looked into for links.
    #[serde(default)]
    pub own: Vec<PathBuf>,
    /// Write-deny paths whose files may have other names (git's objects and packs, which
    /// `git clone --local` shares between repositories): not refused for it.
    #[serde(default)]
    pub shared: Vec<PathBuf>,
}

/// What the caller does while a run goes on (see [`Policy::run_with`]).
#[allow(missing_debug_implementations)]
pub struct Hooks<'a> {
    /// Called once the sandbox has its spec; an error kills the sandbox before the command
    /// starts ([`SandboxError::NotReleased`]).
    pub release: &'a mut dyn FnMut() -> Result<(), Refusal>,
    /// With [`Network::Proxy`]: the listener made inside the sandbox's network namespace.
    pub listener: &'a mut dyn FnMut(std::net::TcpListener),
    /// With [`Policy::watch`]: told of each change beneath the watched paths before it
    /// happens; the command's call waits for its answer.
    pub observer: Option<Observer<'a>>,
}

impl Policy {
    /// A policy that may write nothing, with the network off, running in `cwd`.
    pub fn new(cwd: PathBuf) -> Policy {
        Policy {
            writable: Vec::new(),
            write_deny: Vec::new(),
            read_deny: Vec::new(),
            network: Network::Off,
            keep_env: Vec::new(),
            remove_env: Vec::new(),
            set_env: Vec::new(),
            cwd,
            allow_degraded: false,
            private_tmp: true,
            proxy_port: DEFAULT_PROXY_PORT,
            watch: Vec::new(),
            backend: BackendKind::Process,
            container: ContainerSettings::default(),
            own: Vec::new(),
            shared: Vec::new(),
        }
    }

    /// Run `argv` confined and wait for it. `Err` means the sandbox could not be set up as
    /// asked (nothing ran, or the command was stopped before exec).
    pub fn run(&self, argv: &[String]) -> Result<Outcome, SandboxError> {
        self.backend.backend().run(self, argv, None, Hooks { release: &mut || Ok(()), listener: &mut |_| {}, observer: None })
    }

    /// [`Policy::run`] in a sandbox started ahead with [`Prestart::begin`] (or, given `None`
    /// or a prestart that does not fit, one started now).
    pub fn run_prestarted(&self, argv: &[String], pre: Option<Prestart>) -> Result<Outcome, SandboxError> {
        self.backend.backend().run(self, argv, pre, Hooks { release: &mut || Ok(()), listener: &mut |_| {}, observer: None })
    }

    /// [`Policy::run_prestarted`], with `release` called once the sandbox has its spec: the
    /// sandbox builds its mounts and the command process confines itself meanwhile, then
    /// waits for the parent's go before its `execve`. An error from `release` kills the
    /// sandbox there ([`SandboxError::NotReleased`]), before anything of the command has run.
    /// For work that must finish before the command starts but can overlap the setup (the CLI
    /// makes its `exec_start` audit record durable meanwhile).
    pub fn run_released(
        &self,
        argv: &[String],
        pre: Option<Prestart>,
        release: &mut dyn FnMut() -> Result<(), Refusal>,
    ) -> Result<Outcome, SandboxError> {
        self.backend.backend().run(self, argv, pre, Hooks { release, listener: &mut |_| {}, observer: None })
    }

    /// [`Policy::run_released`] for [`Network::Proxy`]: `listener` is called once, before the
    /// command starts, with the listening socket made inside the sandbox's network namespace
    /// (`127.0.0.1:`[`Policy::proxy_port`] there). Connections the command makes to it queue
    /// until the caller accepts them — from outside, serving them as it likes. If the
    /// listener cannot be made, nothing runs.
    pub fn run_proxied(
        &self,
        argv: &[String],
        pre: Option<Prestart>,
        release: &mut dyn FnMut() -> Result<(), Refusal>,
        listener: &mut dyn FnMut(std::net::TcpListener),
    ) -> Result<Outcome, SandboxError> {
        self.backend.backend().run(self, argv, pre, Hooks { release, listener, observer: None })
    }

    /// Every caller's work in one: [`Policy::run_proxied`] with the observer of
    /// [`Policy::watch`]. The observer runs on the calling thread; the command's watched call
    /// waits meanwhile.
    pub fn run_with(&self, argv: &[String], pre: Option<Prestart>, hooks: Hooks<'_>) -> Result<Outcome, SandboxError> {
        self.backend.backend().run(self, argv, pre, hooks)
    }

    /// Resolve what the sandbox would enforce, without running anything: the roots that
    /// exist, the paths that would get placeholders, what the kernel supports.
    pub fn plan(&self) -> Result<Plan, SandboxError> {
        parent::plan(self)
    }
}

/// What [`Policy::plan`] resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub writable: Vec<PathBuf>,
    pub missing_writable: Vec<PathBuf>,
    pub write_deny: Vec<PathBuf>,
    /// Deny paths that do not exist yet: protected by a placeholder during the run.
    pub placeholders: Vec<PathBuf>,
    pub read_deny: Vec<PathBuf>,
    pub network: Network,
    pub availability: Availability,
}

/// How a sandboxed run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit code to pass on: the command's status, 128+N for signal N, 127 when the
    /// command was not found, 126 when it could not be executed.
    pub code: i32,
    pub report: SandboxReport,
    /// The sandbox's last process, killed and on its way out (the kernel tears down its
    /// namespaces): reaped when the last clone of the outcome is dropped, unless
    /// [`Outcome::leave_unreaped`] was called.
    reaper: std::sync::Arc<parent::Reaper>,
}

impl Outcome {
    /// For a process that exits right after the run (the `pinfold exec` CLI): do not wait
    /// for the sandbox's last process to finish exiting. Everything that ran in the sandbox
    /// is already dead and reaped; the kernel hands this one to the system's reaper when the
    /// calling process exits. A process that goes on running should not call this: the
    /// process would stay a zombie until it exits.
    pub fn leave_unreaped(&self) {
        self.reaper.forget();
    }
}

/// Status of one enforcement layer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LayerStatus {
    Enforced,
    Partial,
    Missing,
}

/// What was enforced for one run.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SandboxReport {
    /// The backend that ran the command.
    #[serde(default)]
    pub backend: BackendKind,
    /// The kernel the command's calls went to, when it is not the host's (`gVisor (runsc)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Writable roots granted (they existed and were bound writable).
    pub writable: Vec<PathBuf>,
    /// Writable roots asked for that did not exist: nothing was granted for them.
    pub missing_writable: Vec<PathBuf>,
    /// Paths kept read-only inside writable roots.
    pub write_deny: Vec<PathBuf>,
    /// Placeholders created for deny paths that did not exist, removed after the run if
    /// still empty.
    pub placeholders: Vec<PathBuf>,
    /// Paths hidden.
    pub read_deny: Vec<PathBuf>,
    /// `off`, `on` or `proxy`.
    pub network: Option<Network>,
    /// With the network through a proxy: where the command reaches it (`127.0.0.1:PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The private temp dir given as TMPDIR.
    pub tmpdir: Option<PathBuf>,
    /// Namespaces and the mount tree.
    pub namespaces: Option<LayerStatus>,
    pub landlock: Option<LandlockReport>,
    /// Seccomp rules in force (names).
    pub seccomp: Vec<String>,
    /// no_new_privs set, capabilities dropped, new session.
    pub hygiene: Option<LayerStatus>,
    /// Environment variables removed as secrets (names only).
    pub env_removed: Vec<String>,
    /// Guarantees missing from this run, each with its reason (only with allow_degraded).
    pub degraded: Vec<String>,
    /// With the container backend: the engine, image, runtime and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerReport>,
}

/// Why the sandbox could not be set up: one variant per failure, naming the step and the path,
/// with the system's error kept as the source and what to do in [`SandboxError::hint`].
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce a layer the policy needs.
    #[error("the kernel cannot enforce {layer}: {why}")]
    Unsupported { layer: &'static str, why: String, hint: String },
    /// A step of the setup on this side of the sandbox failed.
    #[error("{step}: {source}")]
    Setup {
        step: Step,
        #[source]
        source: std::io::Error,
    },
    /// The backend asked for cannot run here (its program is missing, or this user cannot
    /// run it); nothing ran, and no other backend stands in.
    #[error("the {backend} backend cannot run here: {why}")]
    Backend { backend: &'static str, why: String, hint: String },
    /// Nothing to run.
    #[error("no command to run")]
    NoCommand,
    /// A deny path is a symbolic link whose target does not exist: nothing to protect, and no
    /// placeholder can stand in for it.
    #[error("the protected path {} is a symbolic link to nothing; remove it or point it somewhere real", path.display())]
    DanglingDenyLink { path: PathBuf },
    /// A deny path beneath a writable root passes through a symbolic link there: whoever may
    /// write that root could swap the link for a directory after pinfold looked, and the
    /// protection would be on the link's target while the path named a real directory.
    #[error("the protected path {} passes through the link {} in a directory the command may write; a command beside this one could swap it for a directory while this one runs. Remove the link, or name the real path in the policy", path.display(), link.display())]
    DenyThroughLink { path: PathBuf, link: PathBuf },
    /// A read-deny file (or a file in a read-deny directory a command may write), or a
    /// write-deny one beneath a writable root, has more than one name: covering one name
    /// leaves the file readable or writable through the others, which a command could have
    /// made (`ln .env leak` before the secret was written into `.env`; `ln .git/config x`
    /// once the user's `git config` had replaced it during a run).
    #[error("the protected file {} has {links} names (hard links): covering this name leaves the file open through the others, which a command may have made", path.display())]
    HardLinkedSecret { path: PathBuf, links: u64 },
    /// A hidden directory holds a link to a directory that holds the hidden directory itself,
    /// a writable root or the working directory: hiding what the link leads to (as pinfold
    /// does, or the link would be a way to it) would hide those too.
    #[error("the hidden directory's link {} leads to {}, which holds the project or the hidden directory itself: pinfold hides what a hidden link leads to, and cannot hide that", link.display(), target.display())]
    HiddenLinkTooWide { link: PathBuf, target: PathBuf },
    /// A protected path (or a directory on its way) was made, replaced or removed on the
    /// host while the command ran: the sandbox's cover of it no longer held (see
    /// `tripwire.rs`), so the run was stopped.
    #[error("{} was {} while the command ran, where the sandbox's cover cannot follow (a path the host replaces or removes loses it), so pinfold stopped the run", path.display(), if *created { "made or replaced" } else { "removed or renamed" })]
    ProtectedChanged { path: PathBuf, created: bool },
    /// A candidate for the run directory exists but is not the user's own, closed directory.
    #[error("{} is not a directory owned by uid {uid} and closed to others; remove it", path.display())]
    UnsafeRunDir { path: PathBuf, uid: u32 },
    /// No candidate for the run directory (none is ever missing: the temp dir is the last).
    #[error("no place for the run directory")]
    NoRunDir,
    /// A placeholder was removed or replaced between being made and being locked, again and
    /// again.
    #[error("the placeholder {} keeps changing under pinfold; is another program removing it?", path.display())]
    PlaceholderChanging { path: PathBuf },
    /// The spec could not be encoded for the helper.
    #[error("encode the spec: {0}")]
    EncodeSpec(#[source] serde_json::Error),
    /// Making the namespaces failed on this side (the sandbox's init is cloned into them).
    #[error("sandbox setup failed: create namespaces: {0}")]
    Namespaces(#[source] std::io::Error),
    /// The sandbox reported a failed step before the command ran; `step` is its message
    /// (the typed error stays in the sandbox's process: only its text crosses the pipe).
    #[error("sandbox setup failed: {step}")]
    Child { step: String, hint: Option<&'static str> },
    /// The sandbox exited as a failed setup does without saying which step failed.
    #[error("sandbox setup failed: the helper ended before the command started")]
    HelperEnded,
    /// The caller's `release` (see [`Policy::run_released`]) refused; nothing ran.
    #[error("{0}")]
    NotReleased(#[source] Refusal),
}

/// Why a caller's `release` (see [`Policy::run_released`]) refused to let the command start:
/// the caller's own error, kept whole.
pub type Refusal = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A step of the setup outside the sandbox, for [`SandboxError::Setup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Resolving the working directory.
    WorkingDir(PathBuf),
    /// Creating the run directory (`root/`, `tmp/`, `empty`).
    RunDir(PathBuf),
    CreatePlaceholder(PathBuf),
    OpenPlaceholder(PathBuf),
    LockPlaceholder(PathBuf),
    /// Opening a path to bind it (no link followed: one that became a link since it was
    /// resolved fails here).
    PinSource(PathBuf),
    SpecPipe,
    PassSpecPipe,
    PassReportPipe,
    FindExecutable,
    StartHelper,
    Signalfd,
    ReportChannel,
    PidfdOpen,
    Poll,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::WorkingDir(p) => write!(f, "working directory {}", p.display()),
            Step::RunDir(p) => write!(f, "create the run directory {}", p.display()),
            Step::CreatePlaceholder(p) => write!(f, "create the placeholder {}", p.display()),
            Step::OpenPlaceholder(p) => write!(f, "open the placeholder {}", p.display()),
            Step::LockPlaceholder(p) => write!(f, "lock the placeholder {}", p.display()),
            Step::PinSource(p) => write!(f, "open {} to bind it (did a command beside this one replace it with a link?)", p.display()),
            Step::SpecPipe => f.write_str("create the spec pipe"),
            Step::PassSpecPipe => f.write_str("pass the spec pipe on"),
            Step::PassReportPipe => f.write_str("pass the report pipe on"),
            Step::FindExecutable => f.write_str("find pinfold's own executable"),
            Step::StartHelper => f.write_str("start the sandbox helper"),
            Step::Signalfd => f.write_str("signalfd"),
            Step::ReportChannel => f.write_str("create the report channel"),
            Step::PidfdOpen => f.write_str("pidfd_open"),
            Step::Poll => f.write_str("poll"),
        }
    }
}

/// What to do when making user namespaces fails, on either side of the sandbox.
pub(crate) const USERNS_HINT: &str = "user namespaces may be disabled: check kernel.unprivileged_userns_clone, \
     kernel.apparmor_restrict_unprivileged_userns and user.max_user_namespaces; `pinfold doctor` tells";

impl SandboxError {
    /// What the user can do about it, when something can be done.
    pub fn hint(&self) -> Option<&str> {
        match self {
            SandboxError::Unsupported { hint, .. } | SandboxError::Backend { hint, .. } => Some(hint),
            SandboxError::Namespaces(_) => Some(USERNS_HINT),
            SandboxError::Child { hint, .. } => *hint,
            SandboxError::HiddenLinkTooWide { .. } => Some("remove the link from the hidden directory, or point it at the file it is meant for"),
            SandboxError::ProtectedChanged { .. } => Some(
                "run the command again once the change is done; the command could reach the new file until it was stopped, so check it if it steers programs (.git/config, a hook, a shell profile)",
            ),
            SandboxError::HardLinkedSecret { .. } => Some(
                "find its other names with `find / -xdev -samefile PATH`, then remove them, or give the file a name of its own: `cp -p PATH PATH.new && mv PATH.new PATH`",
            ),
            _ => None,
        }
    }

    /// A failure the sandbox reported from inside, by its message.
    pub(crate) fn child(step: String) -> SandboxError {
        let hint = step.starts_with("create namespaces").then_some(USERNS_HINT);
        SandboxError::Child { step, hint }
    }
}

/// The toolchain caches in the home directory a sandboxed build may write, when they exist:
/// where cargo, rustup, go, pip, uv, npm, pnpm, yarn, maven and gradle keep what they fetch
/// and build. Named one by one, never all of `~/.cache`: other programs keep code there that
/// they run later outside any sandbox (pre-commit's hook repositories, corepack, poetry's
/// virtualenvs, Playwright's browsers).
pub const HOME_CACHES: &[&str] = &[
    ".cargo/registry",
    ".cargo/git",
    ".rustup/tmp",
    ".cache/go-build",
    ".cache/pip",
    ".cache/uv",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/sccache",
    ".cache/ccache",
    ".npm/_cacache",
    ".npm/_logs",
    ".pnpm-store",
    ".yarn/berry/cache",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
];

/// Caches made before a run when the directory that holds them exists, so that the tool's
/// first sandboxed run can fill them (`~/.npm` exists once npm ran: its cache and logs).
const MADE_CACHES: &[&str] = &[".npm/_cacache", ".npm/_logs", ".cache/go-build", ".cache/pip"];

/// The usual writable roots for work in `project_root`, each existing one once:
///
/// * the project itself — the work;
/// * the git directory when it lives elsewhere (worktrees and submodules, where `.git` is a
///   file naming it), and the common directory of a worktree — so `git commit` works;
/// * `state_dir`, pinfold's own state (when given);
/// * the toolchain caches of [`HOME_CACHES`] that exist (those of `MADE_CACHES`
///   made first when the directory holding them exists) — so builds can fetch and reuse
///   dependencies without writing anywhere else in the home directory;
/// * `extra`.
///
/// The private temp dir is added by [`Policy::run`] itself.
pub fn default_writable(project_root: &Path, state_dir: Option<&Path>, home: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = vec![project_root.to_path_buf()];
    out.extend(git_dirs(project_root));
    if let Some(s) = state_dir {
        out.push(s.to_path_buf());
    }
    if let Some(h) = home {
        // Made only where each directory below the home directory is one, not a link: a run
        // in the home directory could have made `.npm` a directory holding links elsewhere
        // (found: pinfold made `_cacache` and `go-build` in a directory such a link led to).
        let real_below_home = |d: &Path| {
            let mut at = h.to_path_buf();
            d.strip_prefix(h).is_ok_and(|rel| rel.components().all(|c| {
                at.push(c);
                std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir())
            }))
        };
        for c in MADE_CACHES {
            let p = h.join(c);
            if p.parent().is_some_and(real_below_home) {
                let _ = std::fs::create_dir(&p);
            }
        }
        // Taken only where no link lies below the home directory on the way either: a run in
        // the home directory could have made `~/.npm/_cacache` a link to `~/.local/bin`, to
        // another repository's hooks, or (as root) to `/var/lib` (found by an outside attack:
        // later runs in any project wrote there). A cache kept elsewhere through a link is
        // named in a policy by its real path.
        for c in HOME_CACHES {
            let p = h.join(c);
            if real_below_home(&p) {
                out.push(p);
            }
        }
    }
    out.extend(extra.iter().cloned());
    let mut seen = Vec::new();
    out.retain(|p| {
        let fresh = !seen.contains(p);
        seen.push(p.clone());
        fresh
    });
    out
}

/// Paths under the project's `.git` mapped to where they really live when `.git` is a file
/// (a worktree or submodule): `.git/hooks` becomes `<common dir>/hooks` and
/// `<git dir>/hooks`. Paths not under `.git`, or a project whose `.git` is a directory,
/// give nothing.
pub fn git_equivalents(project_root: &Path, paths: &[PathBuf]) -> Vec<PathBuf> {
    let dotgit = project_root.join(".git");
    let dirs = git_dirs(project_root);
    if dirs.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for p in paths {
        if let Ok(rest) = p.strip_prefix(&dotgit) {
            for d in &dirs {
                let q = d.join(rest);
                if !out.contains(&q) {
                    out.push(q);
                }
            }
        }
    }
    out
}

/// The git directory of a worktree or submodule (`.git` is a file: `gitdir: PATH`), and the
/// common directory it shares with its main repository — only when they are what git made:
/// a `.git` file is project content a sandboxed command can write, and what it names becomes
/// writable for the next command (`gitdir: /` made the whole file system writable).
///
/// * A worktree's git directory names this `.git` file in its own `gitdir` file (git writes
///   that back-link when it adds the worktree); a submodule's lies in the `.git/modules` of a
///   directory above the project. A command can write neither outside the project.
/// * The common directory (`commondir`) must be the one that holds this git directory in its
///   `worktrees`: that file is writable too.
///
/// Anything else names nothing, and only the project stays writable.
fn git_dirs(project_root: &Path) -> Vec<PathBuf> {
    let dotgit = project_root.join(".git");
    let Ok(text) = std::fs::read_to_string(&dotgit) else { return Vec::new() };
    let Some(dir) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else { return Vec::new() };
    let (Ok(gitdir), Ok(dotgit), Ok(root)) =
        (std::fs::canonicalize(project_root.join(dir.trim())), std::fs::canonicalize(&dotgit), std::fs::canonicalize(project_root))
    else {
        return Vec::new();
    };
    if !gitdir.join("HEAD").is_file() {
        return Vec::new();
    }
    let back_link = std::fs::read_to_string(gitdir.join("gitdir"))
        .ok()
        .and_then(|t| std::fs::canonicalize(gitdir.join(t.trim())).ok());
    let worktree = back_link.as_deref() == Some(dotgit.as_path());
    let submodule = root.ancestors().skip(1).any(|a| gitdir.starts_with(a.join(".git").join("modules")));
    if !(worktree || submodule) {
        return Vec::new();
    }
    let mut out = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir"))
        && let Ok(common) = std::fs::canonicalize(gitdir.join(common.trim()))
        && gitdir.parent() == Some(common.join("worktrees").as_path())
    {
        out.push(common);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::io;

    use super::*;
    use crate::landlock_layer::{Enforcement, LandlockError};
    use crate::mounts::MountError;

    fn denied() -> io::Error {
        io::Error::from_raw_os_error(libc::EACCES)
    }

    /// Each failure names its step and path in the words the report pipe and the CLI have
    /// always shown, and keeps the system's error as its source.
    #[test]
    fn errors_name_the_step_and_keep_the_cause() {
        let e = MountError::BindWritable { path: "/w".into(), source: denied() };
        assert_eq!(e.to_string(), format!("bind writable root /w: {}", denied()));
        assert_eq!(e.source().map(ToString::to_string), Some(denied().to_string()));
        let e = MountError::Chdir { path: "/p/sub".into(), source: denied() };
        assert_eq!(e.to_string(), format!("chdir /p/sub: {}", denied()));
        let e = MountError::LinkDevice { name: "ptmx", source: denied() };
        assert_eq!(e.to_string(), format!("link /dev/ptmx: {}", denied()));
        let e = SandboxError::Setup { step: Step::LockPlaceholder("/p/.git".into()), source: denied() };
        assert_eq!(e.to_string(), format!("lock the placeholder /p/.git: {}", denied()));
        assert!(e.source().is_some() && e.hint().is_none());
        let e = LandlockError::NotFullyEnforced { status: Enforcement::Partially };
        assert_eq!(e.to_string(), "the kernel enforced the Landlock ruleset partially, not fully");
    }

    /// Making user namespaces fails the same way on either side of the sandbox, with the same
    /// hint, apart from the message.
    #[test]
    fn a_namespace_failure_carries_its_hint() {
        let here = SandboxError::Namespaces(io::Error::from_raw_os_error(libc::EPERM));
        let there = SandboxError::child(format!("create namespaces: {}", io::Error::from_raw_os_error(libc::EPERM)));
        assert_eq!(here.to_string(), there.to_string());
        assert!(here.to_string().starts_with("sandbox setup failed: create namespaces: "));
        assert_eq!(here.hint(), there.hint());
        assert!(here.hint().is_some_and(|h| h.contains("pinfold doctor")));
        assert_eq!(SandboxError::child("pivot_root: x".into()).hint(), None);
    }

    /// The report keeps the words it always had for Landlock's status.
    #[test]
    fn the_landlock_status_serialises_as_before() {
        for (s, word) in [(Enforcement::Fully, "fully"), (Enforcement::Partially, "partially"), (Enforcement::Not, "not")] {
            assert_eq!(serde_json::to_value(s).unwrap(), serde_json::json!(word));
            assert_eq!(serde_json::from_value::<Enforcement>(serde_json::json!(word)).unwrap(), s);
            assert_eq!(s.to_string(), word);
        }
        assert_eq!(Enforcement::from(landlock::RulesetStatus::FullyEnforced), Enforcement::Fully);
    }
}
