//! The container backend: the policy written as a container of the Docker Engine API (Docker,
//! or Podman's compatible service), run from an image the preset names.
//!
//! The image's root file system is mounted read-only, with a tmpfs on /tmp (and on the
//! private TMPDIR). The policy's writable roots are bound in writable at the paths they have
//! on the host, and the directory the command runs in read-only when no writable root holds
//! it. Protected paths are bound read-only over themselves, hidden paths covered by an empty
//! file or directory, placeholders stand in for deny paths that do not exist yet — the same
//! [`prepare`] the other backends use. No capabilities, `no-new-privileges`, no network.
//! `cpus`, `memory` and `pids` become the container's cgroup limits; `nofile` and `nproc`
//! rlimits are always given (Podman needs them).
//!
//! A run is one container: created, attached, started, waited for, removed. A reaper process
//! of its own (`pinfold __sandbox-helper container-reap`) removes it if pinfold dies first.

pub(crate) mod engine;
pub mod image;
pub mod kept;
pub(crate) mod profile;
mod stage;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountBindOptions, MountBindOptionsPropagationEnum, MountType, ResourcesUlimits};
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, InspectContainerOptions, KillContainerOptions, RemoveContainerOptions,
    WaitContainerOptions,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendKind, BackendStatus};
use crate::parent::{Prepared, prepare, setup_err};
use crate::{Hooks, LayerStatus, Network, Outcome, Policy, Prestart, SandboxError, Step, sys};
use engine::{Engine, err};

/// What a preset says of its containers (`image`, `runtime`, `cpus`, `memory`, `pids`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerSettings {
    /// The image the command runs in: a name the engine knows (`localhost/pinfold-busybox:1`)
    /// or an image ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The OCI runtime the engine runs it with (`runc` when not given; `runsc` for gVisor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// CPUs the container may use (`1.5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory limit in bytes; swap is not allowed on top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Most processes (and threads) the container may hold at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    /// Run in the container kept between runs under this name (`pinfold serve`'s sandboxes),
    /// made by the first; see [`kept`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<String>,
}

/// What a container run was, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerReport {
    /// The engine, as it names itself (`Podman Engine 4.3.1`).
    pub engine: String,
    pub image: String,
    /// The image's ID, as the engine resolved the name.
    pub image_id: String,
    pub runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    /// The command was killed for going over `memory`: `engine` when the engine said so,
    /// `likely` when it was killed by SIGKILL that pinfold did not send while a memory limit
    /// held and the engine did not say why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_killed: Option<String>,
    /// The kept container the command ran in (its name), and whether this run made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept_made: bool,
    /// Why the kept container on record was not entered but removed and made again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_replaced: Option<String>,
}

/// The default cap on `nproc` when no `pids` is given: Podman's runc refuses values above
/// what its own process may set (65,536 failed here, 32,768 worked).
const NPROC_CAP: u64 = 32_768;

/// The fewest `pids` a runsc container is given: gVisor's sandbox and gofer threads count
/// against the limit (32 failed to start here, 128 started).
const RUNSC_MIN_PIDS: u32 = 128;

/// The label every container pinfold makes carries: the pid of the pinfold that made it.
pub const LABEL: &str = "dev.pinfold.run";

/// And the pid namespace that pid is of (`pid:[INODE]`): a sweep removes only containers of
/// pinfolds it can tell are gone, in its own pid namespace.
const PIDNS_LABEL: &str = "dev.pinfold.pidns";

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid").map(|p| p.display().to_string()).unwrap_or_default()
}

#[derive(Debug)]
pub(crate) struct Container;

impl Backend for Container {
    fn kind(&self) -> BackendKind {
        BackendKind::Container
    }

    fn status(&self) -> BackendStatus {
        // On a thread of its own: the engine's client runs (and drops) a runtime of its own,
        // which tokio refuses inside another's (the server asks from one; found: a panic on
        // `POST /v1/sandboxes {"backend": "container"}`).
        std::thread::spawn(status_here).join().unwrap_or_else(|_| BackendStatus {
            name: "container",
            available: false,
            detail: "asking the engine failed".into(),
            fix: None,
            program: None,
        })
    }

    fn run(&self, policy: &Policy, argv: &[String], pre: Option<Prestart>, hooks: Hooks<'_>) -> Result<Outcome, SandboxError> {
        drop(pre);
        if argv.is_empty() {
            return Err(SandboxError::NoCommand);
        }
        if !policy.watch.is_empty() && hooks.observer.is_some() {
            return Err(err(
                "it cannot record changes for undo: the command runs in a container, where pinfold cannot see a change before it happens",
                "run with the process backend, or turn undo off ([undo] enabled = false)",
            ));
        }
        match policy.network {
            Network::Off => {}
            Network::On => {
                return Err(err(
                    "a container runs with no network or through the egress proxy; `network = on` would give it the engine's network unfiltered",
                    "use network = \"off\", or the process backend for unfiltered network",
                ));
            }
            Network::Proxy => {}
        }
        let settings = &policy.container;
        let Some(image) = settings.image.clone() else {
            return Err(err("no image: the container backend runs the command in the image the preset names", "set `image` in the preset (see `pinfold image import` and `pinfold image build`)"));
        };
        let prepared = prepare(policy)?;
        let engine = Engine::connect()?;
        let about = engine::ping(&engine.socket)?;
        // A rootless engine on cgroup v1 has no cgroup of its own to limit: Podman takes the
        // limits and ignores them (it warns in its log only).
        let limited = settings.cpus.is_some() || settings.memory.is_some() || settings.pids.is_some();
        if limited && about.rootless && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            return Err(err(
                "a rootless engine cannot enforce `cpus`, `memory` or `pids` on this machine's cgroup v1, and would run the command without them",
                "drop the limits from the preset, use root's engine, or boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate the controllers to the user",
            ));
        }
        let runtime = settings.runtime.clone().unwrap_or_else(|| "runc".into());
        if runtime == "runsc" && settings.pids.is_some_and(|n| n < RUNSC_MIN_PIDS) {
            return Err(err(
                format!("pids = {} is too few for runsc: gVisor's own threads count against the limit, and it cannot start with fewer than about {RUNSC_MIN_PIDS}", settings.pids.unwrap_or(0)),
                format!("give pids = {RUNSC_MIN_PIDS} or more with runtime = \"runsc\""),
            ));
        }
        // With the egress proxy: a network namespace of pinfold's holding loopback and the
        // proxy's listener, nothing else, which the container joins.
        let netns = if policy.network == Network::Proxy {
            if !about.podman {
                return Err(err(
                    format!("the egress proxy is reached from a container through a network namespace pinfold makes, and {} cannot put a container in one", about.name),
                    "use Podman's service, or the process or gvisor backend for egress through the proxy",
                ));
            }
            if runtime == "runsc" {
                return Err(err(
                    "the egress proxy is not reachable from a container on runsc: gVisor's network stack is its own, not the namespace pinfold makes",
                    "use the gvisor backend (backend = \"gvisor\") for gVisor with egress through the proxy",
                ));
            }
            let mut hooks_listener = |l| (hooks.listener)(l);
            Some(NetNs::make(policy.proxy_port, about.rootless.then_some(engine.socket.as_path()), &mut hooks_listener)?)
        } else {
            None
        };
        let mut report = prepared.report.clone();
        // A kept container (see kept.rs): not through the proxy (its network namespace lives
        // as long as this run) nor on runsc (its processes are out of the host's sight), and
        // not while another run is in it (this one then runs in a one-shot container).
        if let Some(k) = settings.keep.as_deref().filter(|k| !kept::valid_name(k)) {
            return Err(err(format!("{k:?} is not a kept container's name"), "letters, digits, `_`, `.` and `-`, at most 64"));
        }
        let keep = match settings.keep.as_deref().filter(|_| netns.is_none() && runtime != "runsc") {
            Some(k) => kept::try_lock(&prepared.run_dir, k)?.map(|lock| (k.to_string(), lock)),
            None => None,
        };
        let exe = if keep.is_some() { Some(std::env::current_exe().map_err(setup_err(Step::FindExecutable))?) } else { None };
        let hash = match &keep {
            Some(_) => {
                let mut by_path = stage::Pins::by_path();
                let b = create_body(policy, &prepared, &about, &image, &runtime, argv, &mut by_path)?;
                Some(kept::spec_hash(&b, &profile::profile().0))
            }
            None => None,
        };
        // The bind sources, pinned where the engine resolves paths (see stage.rs).
        let mut pins = stage::Pins::staged(&prepared.run_dir)?;
        let mut body = create_body(policy, &prepared, &about, &image, &runtime, argv, &mut pins)?;
        let mut keeper_at = match &exe {
            Some(e) => Some(pins.pin(e)?),
            None => None,
        };
        let staged = match pins.bind(&engine.socket, about.pid) {
            Ok(s) => s,
            Err(stage::StageError::Privilege(why)) if policy.allow_degraded => {
                let mut by_path = stage::Pins::by_path();
                body = create_body(policy, &prepared, &about, &image, &runtime, argv, &mut by_path)?;
                keeper_at = exe.clone();
                report.degraded.push(format!(
                    "bind sources by path: {why}; the engine resolves each bind's source itself, and would follow a link a command beside this one swapped in"
                ));
                by_path.bind(&engine.socket, about.pid).map_err(|_| err("cannot hand the bind sources over", "see `pinfold doctor`"))?
            }
            Err(stage::StageError::Privilege(why)) => {
                return Err(err(
                    format!(
                        "cannot pin the bind sources where {} resolves paths ({why}); it would resolve the project's paths itself, following any link a command beside this one swapped in",
                        about.name
                    ),
                    "run pinfold as the user the engine runs as (root for root's engine, the user for a rootless one), or accept it with --allow-degraded",
                ));
            }
            Err(stage::StageError::Failed(e)) => return Err(e),
        };
        if let Some(ns) = &netns {
            let host = body.host_config.get_or_insert_with(Default::default);
            host.network_mode = Some(format!("ns:/proc/{}/ns/net", ns.pid));
            body.network_disabled = Some(false);
        }
        let tmpfs: Vec<String> = body.host_config.as_ref().and_then(|h| h.tmpfs.as_ref()).map(|t| t.keys().cloned().collect()).unwrap_or_default();
        let mut kept_replaced = None;
        let kept = match (&keep, &hash, &keeper_at) {
            (Some((name, _)), Some(hash), Some(keeper_at)) => {
                let mounts = body.host_config.as_ref().and_then(|h| h.mounts.clone()).unwrap_or_default();
                match kept::find(&engine, &prepared.run_dir, name, hash, &mounts, &tmpfs) {
                    Ok(k) => Some(k),
                    Err(why) => {
                        kept_replaced = why;
                        Some(kept::make(&engine, &about, &prepared.run_dir, name, hash, &body, keeper_at, &runtime, &prepared.held.paths(), &tmpfs)?)
                    }
                }
            }
            _ => None,
        };
        let result = match &kept {
            Some(k) => {
                let reaper = Reaper::spawn(&engine.socket, &k.id);
                let (user, env, cwd) = (body.user.clone(), body.env.clone().unwrap_or_default(), body.working_dir.clone().unwrap_or_default());
                let code = engine.rt.block_on(kept::exec(&engine, &k.id, user, env, cwd, argv, hooks, (&prepared.tripwire, k.keeper_pid)));
                // Nothing of the command outlives the run; if that cannot be made sure of (the
                // exec failed, and its process may run on outside the keeper's children), the
                // container goes.
                let emptied = match &code {
                    Ok(_) => kept::empty(k.keeper_pid),
                    Err(e) => Err(format!("the exec failed ({e})")),
                };
                if let Err(why) = &emptied {
                    kept::remove_by_id(&engine, &k.id);
                    if let Some((name, _)) = &keep {
                        let _ = std::fs::remove_file(prepared.run_dir.join(format!("kept-{name}.json")));
                    }
                    eprintln!("pinfold: the kept container was removed: {why}");
                }
                if let Some(r) = reaper {
                    r.done();
                }
                code.map(|c| (c, memory_verdict(&engine, &k.id, c, settings), k.image_id.clone()))
            }
            None => {
                let name = format!("pinfold-{}-{}", std::process::id(), unique());
                launch(&engine, &about, &name, body, &runtime, settings, hooks, &prepared.tripwire)
            }
        };
        drop(keep);
        drop(staged);
        drop(netns);
        let _ = std::fs::remove_file(prepared.run_dir.join(profile_file_name(std::process::id())));
        drop(prepared);
        let (code, memory_killed, image_id) = result?;
        report.backend = BackendKind::Container;
        report.namespaces = Some(LayerStatus::Enforced);
        report.hygiene = Some(LayerStatus::Enforced);
        report.seccomp = crate::seccomp::RULES.iter().filter(|r| !r.network_off_only).map(|r| r.name.to_string()).collect();
        if runtime == "runsc" {
            report.kernel = Some(format!("gVisor (runsc, through {})", about.name));
            // runsc does not apply the profile to the command (`unshare` and `io_uring_setup`
            // reach gVisor's kernel): claim none of it. The calls reach gVisor, not the host.
            report.seccomp.clear();
        }
        if let Some(how) = &memory_killed {
            let limit = settings.memory.map(human_bytes).unwrap_or_default();
            eprintln!(
                "pinfold: the command went over its memory limit ({limit}) and was killed{}",
                if how == "likely" { " (most likely: it died of SIGKILL that pinfold did not send; the engine did not say why)" } else { "" }
            );
        }
        report.container = Some(ContainerReport {
            engine: about.name,
            image,
            image_id,
            runtime,
            cpus: settings.cpus,
            memory: settings.memory,
            pids: settings.pids,
            memory_killed,
            kept_made: kept.as_ref().is_some_and(|k| k.made),
            kept_replaced,
            kept: kept.map(|_| settings.keep.clone().unwrap_or_default()),
        });
        Ok(Outcome { code, report, reaper: Default::default() })
    }
}

fn unique() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{t:08x}")
}

pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

fn bind(target: &Path, source: &Path, read_only: bool) -> Mount {
    Mount {
        target: Some(target.display().to_string()),
        source: Some(source.display().to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        bind_options: Some(MountBindOptions { propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE), ..Default::default() }),
        ..Default::default()
    }
}

/// The container's configuration: image, command, environment, user, mounts, limits.
fn create_body(
    policy: &Policy,
    p: &Prepared,
    about: &engine::Ping,
    image: &str,
    runtime: &str,
    argv: &[String],
    pins: &mut stage::Pins,
) -> Result<ContainerCreateBody, SandboxError> {
    let r = &p.resolved;
    let mut mounts = Vec::new();
    let hidden = |d: &Path| r.read_deny.iter().any(|(h, _)| d.starts_with(h));
    // No writable bind at or beneath a write-deny path: the engine refuses two mounts of one
    // destination, and orders a parent's and a child's by depth, which would put a writable
    // child over its read-only parent. The deny path's read-only bind covers what is beneath.
    let denied = |d: &Path| r.write_deny.iter().any(|w| d.starts_with(w));
    for w in r.writable.iter().filter(|w| !denied(w)) {
        mounts.push(bind(w, &pins.pin(w)?, false));
    }
    for d in r.pins.iter().filter(|d| !hidden(d) && !denied(d)) {
        mounts.push(bind(d, &pins.pin(d)?, false));
    }
    for d in r.write_deny.iter().filter(|d| !hidden(d)) {
        mounts.push(bind(d, &pins.pin(d)?, true));
    }
    let empty_dir = p.run_dir.join("empty.d");
    if !empty_dir.is_dir() {
        std::fs::DirBuilder::new().mode(0o500).create(&empty_dir).or_else(|e| if e.kind() == std::io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) }).map_err(setup_err(Step::RunDir(empty_dir.clone())))?;
    }
    for (d, is_dir) in &r.read_deny {
        // Gone since it was resolved: nothing to hide. Behind a link now: a command beside
        // this one swapped a directory on its way, and the cover would be left out while the
        // path names the real file again a moment later.
        match sys::open_path_no_symlinks(d) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(err(
                    format!("the hidden path {} cannot be covered: {e} (did a command beside this one swap a directory on its way for a link?)", d.display()),
                    "run it again; nothing ran",
                ));
            }
        }
        // (A socket, FIFO or device beneath a bind, an engine's socket in the project say, is
        // covered like a file: an empty file bound over it.)
        if !r.writable.iter().chain(r.pins.iter()).chain(r.write_deny.iter()).any(|w| d.starts_with(w)) && !p.cwd.starts_with(d) && !d.starts_with(&p.cwd) {
            // Not beneath anything bound in: the image has no such host path to hide.
            continue;
        }
        let cover = if *is_dir { empty_dir.clone() } else { p.run_dir.join("empty") };
        mounts.push(bind(d, &cover, true));
    }
    // The egress proxy's CA bundle (credential endpoints), read-only where the variables that
    // name it say: it is written to the host's temp dir, which a container does not see.
    if policy.network == Network::Proxy
        && let Some((_, ca)) = p.env.iter().find(|(k, _)| k == "SSL_CERT_FILE")
    {
        let ca = Path::new(ca);
        if ca.is_absolute() && ca.is_file() && !r.writable.iter().any(|w| ca.starts_with(w)) {
            mounts.push(bind(ca, &pins.pin(ca)?, true));
        }
    }
    // The directory the command runs in, read-only, when no writable root holds it.
    if !r.writable.iter().any(|w| p.cwd.starts_with(w)) {
        mounts.push(bind(&p.cwd, &pins.pin(&p.cwd)?, true));
    }
    let mut tmpfs = HashMap::new();
    tmpfs.insert("/tmp".to_string(), "rw,nosuid,nodev,mode=1777".to_string());
    let user = if about.rootless { "0:0".to_string() } else { format!("{}:{}", p.uid, p.gid) };
    if policy.private_tmp {
        // Podman takes no `uid=` for a tmpfs: sticky and open to all, as /tmp; the container's
        // own, so nothing else shares it.
        tmpfs.insert(p.tmpdir.display().to_string(), "rw,nosuid,nodev,mode=1777".to_string());
    }
    let settings = &policy.container;
    let (nofile_soft, nofile_hard) = sys::getrlimit(libc::RLIMIT_NOFILE);
    let (_, nproc_hard) = sys::getrlimit(libc::RLIMIT_NPROC);
    let nproc = settings.pids.map_or(NPROC_CAP, u64::from).min(nproc_hard).min(NPROC_CAP);
    let ulimits = vec![
        ResourcesUlimits { name: Some("nofile".into()), soft: Some(nofile_soft.min(i64::MAX as u64) as i64), hard: Some(nofile_hard.min(i64::MAX as u64) as i64) },
        ResourcesUlimits { name: Some("nproc".into()), soft: Some(nproc as i64), hard: Some(nproc as i64) },
    ];
    // The process sandbox's seccomp rules over the engine's default profile: Podman reads a
    // path (the engine is local: its socket is), Docker takes the profile itself.
    let (seccomp, _) = profile::profile();
    let seccomp_opt = if about.podman {
        sweep_profiles(&p.run_dir);
        let path = p.run_dir.join(profile_file_name(std::process::id()));
        std::fs::write(&path, serde_json::to_vec(&seccomp).map_err(SandboxError::EncodeSpec)?).map_err(setup_err(Step::RunDir(path.clone())))?;
        format!("seccomp={}", path.display())
    } else {
        format!("seccomp={seccomp}")
    };
    let host = HostConfig {
        mounts: Some(mounts),
        tmpfs: Some(tmpfs),
        network_mode: Some("none".into()),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into(), seccomp_opt]),
        readonly_rootfs: Some(true),
        runtime: Some(runtime.to_string()),
        ulimits: Some(ulimits),
        pids_limit: settings.pids.map(i64::from),
        memory: settings.memory.map(|m| m as i64),
        memory_swap: settings.memory.map(|m| m as i64),
        nano_cpus: settings.cpus.map(|c| (c * 1e9) as i64),
        // The engine's init as PID 1 (catatonit, docker-init): the command is not PID 1, so
        // signals without a handler kill it as they would on the host, and zombies are reaped.
        init: Some(true),
        auto_remove: Some(false),
        ..Default::default()
    };
    // The scrubbed environment, but the image's PATH: the host's names host directories.
    let env: Vec<String> = p.env.iter().filter(|(k, _)| k != "PATH").map(|(k, v)| format!("{k}={v}")).collect();
    let mut labels = HashMap::new();
    labels.insert(LABEL.to_string(), std::process::id().to_string());
    labels.insert(PIDNS_LABEL.to_string(), pid_namespace());
    Ok(ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(argv.to_vec()),
        entrypoint: Some(Vec::new()),
        env: Some(env),
        working_dir: Some(p.cwd.display().to_string()),
        user: Some(user),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        open_stdin: Some(true),
        stdin_once: Some(true),
        tty: Some(false),
        network_disabled: Some(true),
        labels: Some(labels),
        host_config: Some(host),
        ..Default::default()
    })
}

/// Create, attach, start and wait for the container, passing stdio and signals; remove it.
/// The command's exit code, and whether the memory limit killed it.
#[allow(clippy::too_many_arguments)]
fn launch(
    engine: &Engine,
    about: &engine::Ping,
    name: &str,
    body: ContainerCreateBody,
    runtime: &str,
    settings: &ContainerSettings,
    hooks: Hooks<'_>,
    wire: &crate::tripwire::Tripwire,
) -> Result<(i32, Option<String>, String), SandboxError> {
    let docker = &engine.docker;
    let image = body.image.clone().unwrap_or_default();
    let mounts = body.host_config.as_ref().and_then(|h| h.mounts.clone()).unwrap_or_default();
    let tmpfs: Vec<String> = body.host_config.as_ref().and_then(|h| h.tmpfs.as_ref()).map(|t| t.keys().cloned().collect()).unwrap_or_default();
    let created = engine
        .rt
        .block_on(docker.create_container(Some(CreateContainerOptions { name: Some(name.to_string()), ..Default::default() }), body))
        .map_err(|e| match e {
            // (Asked at create, not before: one round trip less for every run.)
            bollard::errors::Error::DockerResponseServerError { status_code: 404, message } => err(
                format!("the image `{image}` is not in {}: {message}", about.name),
                "import it first: `pinfold image import DIR-OR-TARBALL --name NAME`, or `pinfold image build`",
            ),
            e => err(format!("the engine would not create the container: {e}"), "see the engine's message; `pinfold doctor` shows the engine"),
        })?;
    let id = created.id;
    // From here on the container exists: whatever happens, it goes.
    let reaper = Reaper::spawn(&engine.socket, &id);
    // The runtime, as the engine will use it: an engine may take the field and ignore it
    // (Podman 4.3's Docker-compatible API does), and a container believed in gVisor but on
    // runc would be worse than none.
    let made = engine::inspect_made(engine, about.podman, &id);
    let image_id = made.as_ref().map(|m| m.image_id.clone()).unwrap_or_default();
    let result = match made.map(|m| m.runtime) {
        Ok(actual) if actual == runtime => engine.rt.block_on(run_attached(engine, about.podman, about.podman && runtime != "runsc", &id, &mounts, &tmpfs, hooks, wire)),
        Ok(actual) => Err(err(
            format!("{} would run the container with the runtime `{}`, not `{runtime}` as the preset asks", about.name, if actual.is_empty() { "?" } else { &actual }),
            if about.podman {
                format!("Podman takes no runtime per container through this API: serve one with it, `podman --runtime {runtime} system service --time=0 unix:///PATH` (for runsc add `--runtime-flag network=none`), and point DOCKER_HOST at that socket")
            } else {
                format!("register `{runtime}` with the engine (\"runtimes\" in daemon.json) or name a runtime it has")
            },
        )),
        Err(e) => Err(e),
    };
    let memory_killed = match &result {
        Ok(code) => memory_verdict(engine, &id, *code, settings),
        Err(_) => None,
    };
    let _ = engine.rt.block_on(docker.remove_container(&id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })));
    if let Some(r) = reaper {
        r.done();
    }
    Ok((result?, memory_killed, image_id))
}

/// Whether the memory limit killed the command: the engine's word when it gives it, else a
/// SIGKILL pinfold did not send while a memory limit held.
fn memory_verdict(engine: &Engine, id: &str, code: i32, settings: &ContainerSettings) -> Option<String> {
    settings.memory?;
    // (An engine busy cleaning the container up may not answer: then the exit code says.)
    let state = engine.rt.block_on(engine.docker.inspect_container(id, None::<InspectContainerOptions>)).ok().and_then(|c| c.state);
    if state.and_then(|s| s.oom_killed) == Some(true) {
        return Some("engine".into());
    }
    // pinfold passes on no SIGKILL (it cannot catch one).
    (code == 128 + libc::SIGKILL).then(|| "likely".into())
}

/// `check_mounts`: Podman with a runtime whose mounts the host's kernel holds (not runsc,
/// whose are gVisor's).
#[allow(clippy::too_many_arguments)]
async fn run_attached(
    engine: &Engine,
    podman: bool,
    check_mounts: bool,
    id: &str,
    mounts: &[Mount],
    tmpfs: &[String],
    hooks: Hooks<'_>,
    wire: &crate::tripwire::Tripwire,
) -> Result<i32, SandboxError> {
    let docker = &engine.docker;
    // Podman creates the container's process as it attaches: a command that is not there
    // fails here.
    let attached = match docker.attach_container(id, Some(AttachContainerOptions { stream: true, stdin: true, stdout: true, stderr: true, ..Default::default() })).await {
        Ok(a) => a,
        Err(e) => return start_failure(&e.to_string()),
    };
    let output = attached.output;
    let input = attached.input;
    // The container's process is made, its mounts in place, the command not yet run: the
    // kernel's view of them is checked (the runtime mounts at paths it resolves in the
    // project, which a command beside this one may have swapped for a link meanwhile). Podman
    // only: Docker makes the process as it starts the command.
    // The container's first process, where the engine says it before the start (Podman):
    // killed straight away when the tripwire trips (the engine's kill takes a round trip).
    let mut first_pid: libc::pid_t = 0;
    if check_mounts {
        let (socket, path) = (engine.socket.clone(), format!("/v4.0.0/libpod/containers/{id}/json"));
        let state = tokio::task::spawn_blocking(move || engine::raw_get(&socket, &path)).await;
        let pid = match state {
            Ok(Ok((_, body))) => serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v["State"]["Pid"].as_i64()).unwrap_or(0),
            _ => 0,
        };
        if pid <= 0 {
            return Err(err("cannot see the container's process before its command starts", "see the engine's log"));
        }
        first_pid = pid as libc::pid_t;
        if let Err(why) = kept::verify_mounts(pid as i32, mounts, tmpfs) {
            return Err(err(
                format!("the container's mounts are not what pinfold asked for: {why}; did a command beside this one swap a directory of the project for a link?"),
                "run it again; nothing ran",
            ));
        }
    }
    (hooks.release)().map_err(SandboxError::NotReleased)?;
    if let Err(e) = docker.start_container(id, None).await {
        return start_failure(&e.to_string());
    }
    let pump_in = pump_stdin(input);
    // The end of what the container wrote to stderr: the engine's init says there why the
    // command could not start.
    let tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    let pump_out = {
        let tail = tail.clone();
        async move {
            let _eof = eof_tx;
            pump_output(output, tail).await;
        }
    };
    let waiting = async {
        let mut waits = docker.wait_container(id, None::<WaitContainerOptions>);
        match waits.next().await {
            Some(Ok(w)) => Ok(w.status_code),
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(err(format!("lost the container while waiting for it: {e}"), "see the engine's log")),
            None => Err(err("the engine ended the wait without a status", "see the engine's log")),
        }
    };
    // Podman's waits poll (250 ms in 4.3, and then its clean-up): when the output ends, its
    // own inspect says sooner whether the command ended, and how.
    let stopped = async {
        let _ = eof_rx.await;
        if !podman {
            return std::future::pending().await;
        }
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            let (socket, path) = (engine.socket.clone(), format!("/v4.0.0/libpod/containers/{id}/json"));
            let state = tokio::task::spawn_blocking(move || engine::raw_get(&socket, &path)).await;
            if let Ok(Ok((_, body))) = state
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
                && matches!(v["State"]["Status"].as_str(), Some("stopped" | "exited"))
                && let Some(code) = v["State"]["ExitCode"].as_i64()
            {
                return code;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(200));
        }
    };
    // The signals the other backends pass on to the command, passed on to the container.
    let mut signals = forwarded_signals();
    let tripping = trip(wire);
    tokio::pin!(waiting);
    tokio::pin!(stopped);
    tokio::pin!(pump_out);
    tokio::pin!(tripping);
    let mut out_done = false;
    let mut tripped = None;
    let code = loop {
        tokio::select! {
            c = &mut waiting => break c?,
            c = &mut stopped => break c,
            () = &mut pump_out, if !out_done => out_done = true,
            n = next_signal(&mut signals) => {
                let _ = docker.kill_container(id, Some(KillContainerOptions { signal: n.to_string() })).await;
            }
            t = &mut tripping, if tripped.is_none() => {
                tripped = Some(t);
                if first_pid > 0 {
                    let _ = sys::kill(first_pid, libc::SIGKILL);
                }
                let _ = docker.kill_container(id, Some(KillContainerOptions { signal: "KILL".to_string() })).await;
            }
        }
    };
    if let Some(t) = tripped.or_else(|| wire.tripped_at_end()) {
        pump_in.abort();
        return Err(SandboxError::ProtectedChanged { path: t.path, created: t.created });
    }
    pump_in.abort();
    // Whatever the command wrote before it ended.
    if !out_done {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), pump_out).await;
    }
    let code = code.clamp(0, 255) as i32;
    let tail = tail.lock().map(|t| String::from_utf8_lossy(&t).into_owned()).unwrap_or_default();
    Ok(init_failure(code, &tail).unwrap_or(code))
}

/// The first change that trips `wire` (never, when it watches nothing).
pub(crate) async fn trip(wire: &crate::tripwire::Tripwire) -> crate::tripwire::Trip {
    if wire.watching()
        && let Ok(fd) = sys::async_reader(wire.fd())
    {
        while let Ok(mut ready) = fd.readable().await {
            if let Some(t) = wire.tripped() {
                return t;
            }
            ready.clear_ready();
        }
    }
    std::future::pending().await
}

/// What the engine hands back for a container's or an exec's output and input.
type OutputStream = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bollard::container::LogOutput, bollard::errors::Error>> + Send>>;
type InputSink = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Our stdin, to the container's (from a thread: reading a terminal blocks), closed at its end.
fn pump_stdin(mut input: InputSink) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncWriteExt;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    tokio::spawn(async move {
        while let Some(chunk) = rx.recv().await {
            if input.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = input.shutdown().await;
    })
}

/// The container's stdout and stderr to ours until the stream ends; the last KiB of stderr
/// into `tail`.
async fn pump_output(mut output: OutputStream, tail: std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    while let Some(item) = output.next().await {
        let Ok(item) = item else { break };
        let (fd, bytes) = match item {
            bollard::container::LogOutput::StdErr { message } => (2, message),
            bollard::container::LogOutput::StdOut { message } | bollard::container::LogOutput::Console { message } => (1, message),
            bollard::container::LogOutput::StdIn { .. } => continue,
        };
        if fd == 2
            && let Ok(mut t) = tail.lock()
        {
            t.extend_from_slice(&bytes);
            let excess = t.len().saturating_sub(1024);
            t.drain(..excess);
        }
        let _ = write_fd(fd, &bytes);
    }
}

/// The signals pinfold passes on ([`crate::FORWARDED`]), each a stream of its own.
fn forwarded_signals() -> Vec<(libc::c_int, tokio::signal::unix::Signal)> {
    crate::FORWARDED.iter().filter_map(|s| Some((*s, tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(*s)).ok()?))).collect()
}

/// The next of `signals` to arrive.
async fn next_signal(signals: &mut [(libc::c_int, tokio::signal::unix::Signal)]) -> libc::c_int {
    if signals.is_empty() {
        return std::future::pending().await;
    }
    let (n, _, _) = futures_util::future::select_all(signals.iter_mut().map(|(n, s)| {
        let n = *n;
        Box::pin(async move {
            s.recv().await;
            n
        })
    }))
    .await;
    n
}

/// The exit code a shell would give when the engine's init could not start the command:
/// catatonit (Podman) exits 1 saying `failed to exec pid1: <why>`.
fn init_failure(code: i32, stderr_tail: &str) -> Option<i32> {
    let line = stderr_tail.lines().rev().find(|l| l.contains("failed to exec pid1"))?;
    (code == 1).then_some(if line.contains("No such file or directory") { 127 } else if line.contains("Permission denied") { 126 } else { return None })
}

/// An engine error from starting the container, as the exit code a shell gives: 127 for a
/// command that is not there, 126 for one that cannot be executed; anything else an error
/// (125). A runtime's words for a mount it could not make share the errno texts (`error
/// mounting "…" to rootfs at "…": … no such file or directory`, found reported as 127): a
/// failure while mounting is never the command's.
fn start_failure(message: &str) -> Result<i32, SandboxError> {
    let m = message.to_ascii_lowercase();
    let mounting = ["error mounting", "mount submount", "mounting submounts", "failed to mount", "creating mount point"].iter().any(|w| m.contains(w));
    if !mounting && (m.contains("executable file not found") || m.contains("no such file or directory")) {
        eprintln!("pinfold: command not found in the container: {message}");
        if message.contains("/bin/bash") {
            eprintln!("hint: the image has no /bin/bash, which runs shell text that is more than one plain command: pinfold judged the text as bash reads it and runs it with no other shell; use an image with bash, or give the command as separate arguments");
        }
        return Ok(127);
    }
    if !mounting && m.contains("permission denied") {
        eprintln!("pinfold: the command cannot be executed in the container: {message}");
        return Ok(126);
    }
    Err(err(format!("the engine could not start the container: {message}"), "see the engine's message"))
}

fn write_fd(fd: libc::c_int, bytes: &[u8]) -> std::io::Result<()> {
    if fd == 2 {
        let mut e = std::io::stderr().lock();
        e.write_all(bytes)
    } else {
        let mut o = std::io::stdout().lock();
        o.write_all(bytes)?;
        o.flush()
    }
}

/// Removes the container if pinfold dies before it does: a process of its own group, told
/// the container's ID, that removes it when its stdin closes without `done`.
struct Reaper {
    stdin: std::process::ChildStdin,
    _child: std::process::Child,
}

impl Reaper {
    fn spawn(socket: &Path, id: &str) -> Option<Reaper> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().ok()?;
        let mut child = std::process::Command::new(exe)
            .arg(crate::HELPER_ARG)
            .arg("container-reap")
            .arg(socket)
            .arg(id)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        Some(Reaper { stdin, _child: child })
    }

    fn done(mut self) {
        let _ = self.stdin.write_all(b"done\n");
    }
}

/// `pinfold __sandbox-helper container-reap SOCKET ID`: wait for stdin to close; unless it
/// said `done`, remove the container.
pub(crate) fn reap_helper(args: &[String]) -> i32 {
    let (Some(socket), Some(id)) = (args.get(1), args.get(2)) else { return 2 };
    // Not the terminal's signals: this process outlives the pinfold they stop.
    sys::ignore_terminal_signals();
    let engine = Engine::connect_at(PathBuf::from(socket)).ok();
    // Containers of runs whose pinfold died before a reaper could remove them (killed with
    // its reaper, or before it started one): removed now, beside this run.
    if let Some(e) = &engine {
        sweep_dead(e);
    }
    let mut said = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut said);
    if said.starts_with(b"done") {
        return 0;
    }
    let Some(engine) = engine else { return 1 };
    let removed = engine.rt.block_on(engine.docker.remove_container(id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })));
    i32::from(removed.is_err())
}

/// The network namespace a container with the egress proxy joins: made by a helper process
/// (`pinfold __sandbox-helper container-netns`) in a user namespace mapping the caller alone,
/// holding loopback and the proxy's listener, kept while the helper lives. The helper ends
/// when this is dropped (its socket closes) or when pinfold dies.
struct NetNs {
    pid: u32,
    child: std::process::Child,
    _sock: std::os::fd::OwnedFd,
}

impl NetNs {
    /// `rootless_engine`: the socket of a rootless engine, whose user namespace the network
    /// namespace is made in (a process of another user namespace than the engine's could not
    /// be joined by it: the kernel lets only a process with CAP_SYS_PTRACE over a process's
    /// user namespace open its namespaces).
    fn make(port: u16, rootless_engine: Option<&Path>, listener: &mut dyn FnMut(std::net::TcpListener)) -> Result<NetNs, SandboxError> {
        use std::os::fd::AsRawFd;
        let userns = match rootless_engine {
            Some(socket) => {
                let s = std::os::unix::net::UnixStream::connect(socket).map_err(|e| err(format!("cannot reach the engine at {}: {e}", socket.display()), "see `pinfold doctor`"))?;
                let pid = sys::peer_pid(&s).map_err(|e| err(format!("cannot tell which process serves {}: {e}", socket.display()), "see `pinfold doctor`"))?;
                format!("/proc/{pid}/ns/user")
            }
            None => "-".to_string(),
        };
        let (ours, theirs) = sys::socketpair().map_err(setup_err(Step::ReportChannel))?;
        sys::clear_cloexec(theirs.as_raw_fd()).map_err(setup_err(Step::PassReportPipe))?;
        let (uid, gid) = sys::ids();
        let exe = std::env::current_exe().map_err(setup_err(Step::FindExecutable))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg(crate::HELPER_ARG)
            .arg("container-netns")
            .arg(theirs.as_raw_fd().to_string())
            .arg(std::process::id().to_string())
            .arg(format!("{uid}:{gid}"))
            .arg(port.to_string())
            .arg(userns)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let child = cmd.spawn().map_err(setup_err(Step::StartHelper))?;
        drop(theirs);
        let mut ns = NetNs { pid: child.id(), child, _sock: ours };
        let mut buf = [0u8; 512];
        match sys::recv_with_fds(&ns._sock, &mut buf) {
            Ok((n, fds)) if n > 0 && buf[0] == b'L' => match fds.into_iter().next() {
                Some(fd) => listener(std::net::TcpListener::from(fd)),
                None => return Err(err("the network namespace's helper sent no listener", "see `pinfold doctor`")),
            },
            Ok((n, _)) if n > 0 && buf[0] == b'E' => {
                return Err(err(
                    format!("cannot make the network namespace for the egress proxy: {}", String::from_utf8_lossy(&buf[1..n]).trim()),
                    "it needs user namespaces (`pinfold doctor` checks them)",
                ));
            }
            _ => {
                let _ = ns.child.kill();
                return Err(err("the network namespace's helper ended before it made the listener", "see `pinfold doctor`"));
            }
        }
        Ok(ns)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `pinfold __sandbox-helper container-netns SOCK PARENT UID:GID PORT`: make a user and a
/// network namespace, bring loopback up, make the proxy's listener at 127.0.0.1:PORT and
/// send it on SOCK, then hold the namespace until SOCK closes.
pub(crate) fn netns_helper(args: &[String]) -> i32 {
    let [_, sock, parent, ids, port, userns] = args else { return 2 };
    let Some(sock) = sys::inherited_socket(sock) else { return 2 };
    sys::ignore_terminal_signals();
    let made = (|| -> Result<std::net::TcpListener, String> {
        sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0).map_err(|e| format!("set the death signal: {e}"))?;
        if parent.parse::<u32>().ok() != Some(std::os::unix::process::parent_id()) {
            return Err("pinfold ended first".into());
        }
        let (uid, gid) = ids.split_once(':').ok_or("bad ids")?;
        let port: u16 = port.parse().map_err(|_| "bad port")?;
        if userns == "-" {
            sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET).map_err(|e| format!("create namespaces: {e}"))?;
            std::fs::write("/proc/self/setgroups", "deny").map_err(|e| format!("write setgroups: {e}"))?;
            std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).map_err(|e| format!("write uid_map: {e}"))?;
            std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).map_err(|e| format!("write gid_map: {e}"))?;
        } else {
            // The rootless engine's user namespace (its owner, this user, may enter it),
            // then a network namespace of its.
            let ns = std::fs::File::open(userns).map_err(|e| format!("open the engine's user namespace {userns}: {e}"))?;
            sys::setns_user_fd(&ns).map_err(|e| format!("enter the engine's user namespace: {e}"))?;
            sys::unshare(libc::CLONE_NEWNET).map_err(|e| format!("create the network namespace: {e}"))?;
        }
        sys::loopback_up().map_err(|e| format!("bring loopback up: {e}"))?;
        // Gaining the new namespace's capabilities made this process undumpable, and a
        // rootless engine (a user namespace of its own, the same user) could then not open
        // /proc/PID/ns/net to join it. It holds nothing but the namespace.
        sys::prctl(libc::PR_SET_DUMPABLE, 1, 0).map_err(|e| format!("make the namespace joinable: {e}"))?;
        std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("make the proxy listener at 127.0.0.1:{port}: {e}"))
    })();
    match made {
        Ok(l) => {
            if sys::send_with_fd(&sock, b"L", &l).is_err() {
                return 1;
            }
        }
        Err(why) => {
            let _ = sys::send_nosignal(&sock, format!("E{why}").as_bytes());
            return 1;
        }
    }
    // Until pinfold closes its end (or dies: the death signal).
    let mut sock = std::os::unix::net::UnixStream::from(sock);
    let mut b = [0u8; 64];
    loop {
        match sock.read(&mut b) {
            Ok(0) => return 0,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return 0,
        }
    }
}

/// The seccomp profile a run hands Podman: `seccomp-PIDNS-PID.json` in the run directory.
fn profile_file_name(pid: u32) -> String {
    let ns = pid_namespace();
    let ns: String = ns.chars().filter(char::is_ascii_digit).collect();
    format!("seccomp-{ns}-{pid}.json")
}

/// Remove the profiles of runs of this pid namespace whose pinfold is gone (killed before it
/// could remove its own).
fn sweep_profiles(run_dir: &Path) {
    let Some(prefix) = profile_file_name(0).strip_suffix("0.json").map(str::to_string) else { return };
    let Ok(entries) = std::fs::read_dir(run_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(&prefix)).and_then(|n| n.strip_suffix(".json")) else { continue };
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(pid) = pid.parse::<libc::pid_t>() else { continue };
        if pid > 0 && sys::kill(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Remove the containers labelled [`LABEL`] whose pinfold is gone from this machine, and the
/// kept containers whose keeper of record ([`kept::OWNER_LABEL`], the server) is gone.
fn sweep_dead(engine: &Engine) {
    for label in [LABEL, kept::OWNER_LABEL] {
        let filters = HashMap::from([("label".to_string(), vec![label.to_string()])]);
        let options = bollard::query_parameters::ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
        let Ok(list) = engine.rt.block_on(engine.docker.list_containers(Some(options))) else { continue };
        for c in list {
            let Some(labels) = c.labels.as_ref() else { continue };
            if labels.get(PIDNS_LABEL).is_none_or(|ns| ns.is_empty() || *ns != pid_namespace()) {
                continue;
            }
            // Digits only: a label pinfold did not write (`+12`) is not a pid.
            let Some(pid) = labels.get(label).filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())).and_then(|p| p.parse::<libc::pid_t>().ok()) else { continue };
            let gone = pid > 0 && sys::kill(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH));
            if let (true, Some(id)) = (gone, c.id) {
                let _ = engine.rt.block_on(engine.docker.remove_container(&id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })));
            }
        }
    }
}

/// `pinfold __sandbox-helper container-stage …` (see stage.rs).
pub(crate) fn stage_helper(args: &[String]) -> i32 {
    stage::helper(args)
}

/// What [`Container::status`] says, asked on the calling thread.
fn status_here() -> BackendStatus {
    let socket = match engine::socket() {
        Ok(s) => s,
        Err(e) => return BackendStatus { name: "container", available: false, detail: e.to_string(), fix: e.hint().map(str::to_string), program: None },
    };
    let about = Engine::connect().and_then(|e| e.about());
    match about {
        Ok(a) => {
            let mut runtimes: Vec<String> = a
                .runtimes
                .iter()
                .filter(|(_, p)| p.as_deref().is_none_or(|p| !p.starts_with('/') || Path::new(p).exists()))
                .map(|(k, _)| k.clone())
                .collect();
            runtimes.sort();
            BackendStatus {
                name: "container",
                available: true,
                detail: format!(
                    "{} at unix://{}{}; runtimes installed: {}",
                    a.name,
                    socket.display(),
                    if a.rootless { " (rootless)" } else { "" },
                    runtimes.join(", ")
                ),
                fix: None,
                program: Some(socket),
            }
        }
        Err(e) => BackendStatus { name: "container", available: false, detail: e.to_string(), fix: e.hint().map(str::to_string), program: Some(socket) },
    }
}

#[cfg(test)]
mod tests {
    use super::start_failure;

    /// The engine's words, as Podman 4.3 with runc 1.1 and runsc 20221219 put them: the
    /// command's failures are the shell's codes, a mount's failure is pinfold's 125.
    #[test]
    fn start_failures_are_the_commands_only_when_the_command_failed() {
        let command = [
            (r#"runc: runc create failed: unable to start container process: exec: "nosuchcmd": executable file not found in $PATH: OCI runtime attempted to invoke a command that was not found"#, 127),
            (r#"runc: runc create failed: unable to start container process: exec: "/nope": stat /nope: no such file or directory: OCI runtime attempted to invoke a command that was not found"#, 127),
            (r#"starting container: starting root container: starting sandbox: error finding executable "nosuchcmd" in PATH [/usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin]: no such file or directory"#, 127),
            ("starting container: starting root container: starting sandbox: creating process: failed to load /nope: no such file or directory", 127),
            (r#"runc: runc create failed: unable to start container process: exec: "/etc/hostname": permission denied: OCI permission denied"#, 126),
        ];
        for (message, code) in command {
            assert_eq!(start_failure(message).ok(), Some(code), "{message}");
        }
        let mounts = [
            r#"runc: runc create failed: unable to start container process: error during container init: error mounting "/tmp/p/a" to rootfs at "/tmp/p/a": mount /tmp/p/a:/tmp/p/a (via /proc/self/fd/6), flags: 0x5001: no such file or directory"#,
            r#"runc: runc create failed: unable to start container process: error during container init: error mounting "/etc/hostname" to rootfs at "/bin": mount /etc/hostname:/bin (via /proc/self/fd/6), flags: 0x5001: not a directory"#,
            r#"running container: starting container: starting root container: starting sandbox: failed to setupFS: mounting submounts: mount submount "/tmp/p/.git": failed to mount "/tmp/p/.git" (type: bind): no such file or directory"#,
            r#"runc: runc create failed: unable to start container process: error during container init: error mounting "/tmp/s" to rootfs at "/tmp/p/x": permission denied"#,
        ];
        for message in mounts {
            assert!(start_failure(message).is_err(), "{message}");
        }
    }
}
