//! Containers kept between runs, for `pinfold serve`'s long-lived sandboxes: one container per
//! sandbox, made by its first run and entered by the next ones with the engine's exec, until
//! the server removes it ([`remove_kept`]) when the sandbox is deleted or expires.
//!
//! What a kept container holds to:
//!
//! - **Made as a one-shot container is** ([`super::create_body`]: the same binds, staged
//!   sources, covers, read-only root, no capabilities, `no-new-privileges`, seccomp profile,
//!   no network, limits), but its PID 1 is a keeper: pinfold's own static binary, bound in
//!   read-only, which reaps orphans and nothing else, and makes itself undumpable so that no
//!   command (without capabilities) can trace it, write its memory or signal it to death.
//! - **Found by its ID only.** The run that makes it writes a record (`kept-NAME.json`, in
//!   pinfold's run directory) with the container's ID, the hash of everything that made it,
//!   and the keeper's host pid and start time. A later run enters only the container with
//!   that ID, whose keeper is that process, and only if the kernel still shows what the
//!   policy asks: the keeper has no capabilities, `no_new_privs` and a seccomp filter, and
//!   every bind and cover is still mounted where it should be, read-only where it should be
//!   (a placeholder removed on the host is unbound by the kernel, which this catches). Labels
//!   or names decide nothing. Anything else: the container is removed and made again.
//! - **Nothing outlives a run.** When the command's exec ends, every other process in the
//!   container is killed (the keeper's children, until there are none) before pinfold
//!   returns, so the checks after the run see the project as it stays. If that cannot be
//!   done, the container is removed. A run killed before it ends takes the container along
//!   (its reaper), so a command is never left running where nobody watches it.
//! - **Placeholders live as long as the container.** A holder process (`__sandbox-helper
//!   container-hold`) holds every placeholder the container's binds stand on, the way a run
//!   holds them, until the keeper is gone; then the last one out removes them.
//! - **One run at a time.** A run that finds the kept container busy runs in a one-shot
//!   container instead; so does a run through the egress proxy (its network namespace lives
//!   as long as that run) and one on runsc (its processes are in gVisor, out of the host's
//!   sight).

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, Mount, MountType};
use bollard::query_parameters::{CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::engine::{self, Engine, err};
use crate::{Hooks, SandboxError, sys};

/// The label naming a kept container's sandbox (for `podman ps`; it decides nothing).
pub(crate) const KEPT_LABEL: &str = "dev.pinfold.kept";
/// The pid of the process that keeps it (the server), and its pid namespace: a sweep removes
/// kept containers whose keeper of record is gone.
pub(crate) const OWNER_LABEL: &str = "dev.pinfold.owner";
/// Where the keeper (pinfold's binary) is bound in the container.
const KEEPER_PATH: &str = "/.pinfold-keeper";

/// A kept container's name: letters, digits, `_`, `.` and `-`, at most 64.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// What the run that made a kept container wrote down about it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Record {
    id: String,
    hash: String,
    image_id: String,
    keeper_pid: i32,
    keeper_start: u64,
}

fn record_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("kept-{name}.json"))
}

fn read_record(run_dir: &Path, name: &str) -> Option<Record> {
    let text = std::fs::read(record_path(run_dir, name)).ok()?;
    serde_json::from_slice(&text).ok()
}

fn write_record(run_dir: &Path, name: &str, r: &Record) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = run_dir.join(format!(".kept-{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(&serde_json::to_vec(r).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, record_path(run_dir, name))
}

/// The exclusive lock of a kept container's runs: `None` when another run holds it.
pub(crate) fn try_lock(run_dir: &Path, name: &str) -> Result<Option<std::fs::File>, SandboxError> {
    use std::os::unix::fs::OpenOptionsExt;
    let p = run_dir.join(format!("kept-{name}.lock"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)
        .map_err(crate::parent::setup_err(crate::Step::RunDir(p.clone())))?;
    Ok(sys::flock(&f, libc::LOCK_EX | libc::LOCK_NB).ok().map(|()| f))
}

/// What makes the container, hashed: the by-path request without the command, environment,
/// working directory, labels and the seccomp profile's file name, and the profile itself.
pub(crate) fn spec_hash(body: &ContainerCreateBody, profile: &serde_json::Value) -> String {
    let mut b = body.clone();
    b.cmd = None;
    b.env = None;
    b.working_dir = None;
    b.labels = None;
    if let Some(h) = b.host_config.as_mut() {
        h.security_opt = None;
        // In the order of their targets: a run lists a placeholder it made apart from one it
        // found.
        if let Some(m) = h.mounts.as_mut() {
            m.sort_by(|a, b| (&a.target, &a.source, a.read_only).cmp(&(&b.target, &b.source, b.read_only)));
        }
    }
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&sorted(serde_json::to_value(&b).unwrap_or_default())).unwrap_or_default());
    hasher.update(serde_json::to_vec(&sorted(profile.clone())).unwrap_or_default());
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// `v` with every object's keys in order (the request holds hash maps).
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.into_iter().map(sorted).collect()),
        v => v,
    }
}

/// The kept container a run enters.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) id: String,
    pub(crate) image_id: String,
    pub(crate) keeper_pid: i32,
    /// Made by this run.
    pub(crate) made: bool,
}

/// The kept container `name` as recorded, if it is still what `hash` and `mounts` ask;
/// otherwise it is removed, and the error says why (`None`: there was none on record).
pub(crate) fn find(engine: &Engine, run_dir: &Path, name: &str, hash: &str, mounts: &[Mount], tmpfs: &[String]) -> Result<Kept, Option<String>> {
    let rec = read_record(run_dir, name).ok_or(None)?;
    let fits = (|| -> Result<(), String> {
        if rec.hash != hash {
            return Err("made for another policy".into());
        }
        let c = engine.rt.block_on(engine.docker.inspect_container(&rec.id, None::<InspectContainerOptions>)).map_err(|e| format!("not there: {e}"))?;
        if c.id.as_deref() != Some(rec.id.as_str()) {
            return Err("another ID".into());
        }
        let state = c.state.unwrap_or_default();
        if state.running != Some(true) || state.pid.map(|p| p as i32) != Some(rec.keeper_pid) {
            return Err("its keeper is not the one recorded".into());
        }
        if start_time(rec.keeper_pid) != Some(rec.keeper_start) {
            return Err("its keeper's pid was reused".into());
        }
        verify(rec.keeper_pid, mounts, tmpfs)
    })();
    match fits {
        Ok(()) => Ok(Kept { id: rec.id, image_id: rec.image_id, keeper_pid: rec.keeper_pid, made: false }),
        Err(why) => {
            remove_by_id(engine, &rec.id);
            let _ = std::fs::remove_file(record_path(run_dir, name));
            Err(Some(why))
        }
    }
}

/// Make and start the kept container `name` from `body` (a one-shot run's request) with the
/// keeper bound from `keeper_src`; hold its placeholders; write its record.
#[allow(clippy::too_many_arguments)]
pub(crate) fn make(
    engine: &Engine,
    about: &engine::Ping,
    run_dir: &Path,
    name: &str,
    hash: &str,
    body: &ContainerCreateBody,
    keeper_src: &Path,
    runtime: &str,
    placeholders: &[(PathBuf, bool)],
    tmpfs: &[String],
) -> Result<Kept, SandboxError> {
    let docker = &engine.docker;
    let mut b = body.clone();
    b.entrypoint = Some(vec![KEEPER_PATH.to_string()]);
    b.cmd = Some(vec![crate::HELPER_ARG.to_string(), "container-keep".to_string()]);
    // The image's environment for the keeper; each run's goes with its exec.
    b.env = Some(Vec::new());
    b.attach_stdin = Some(false);
    b.attach_stdout = Some(false);
    b.attach_stderr = Some(false);
    b.open_stdin = Some(false);
    b.stdin_once = Some(false);
    let owner = std::os::unix::process::parent_id();
    b.labels = Some(HashMap::from([
        (KEPT_LABEL.to_string(), name.to_string()),
        (OWNER_LABEL.to_string(), owner.to_string()),
        (super::PIDNS_LABEL.to_string(), super::pid_namespace()),
    ]));
    if let Some(h) = b.host_config.as_mut() {
        // The keeper is PID 1 (the engine's init would be a process a command could trace).
        h.init = Some(false);
        h.mounts.get_or_insert_with(Vec::new).push(super::bind(Path::new(KEEPER_PATH), keeper_src, true));
    }
    let cname = format!("pinfold-kept-{name}-{}", super::unique());
    let created = engine
        .rt
        .block_on(docker.create_container(Some(CreateContainerOptions { name: Some(cname), ..Default::default() }), b))
        .map_err(|e| match e {
            bollard::errors::Error::DockerResponseServerError { status_code: 404, message } => err(
                format!("the image `{}` is not in {}: {message}", body.image.clone().unwrap_or_default(), about.name),
                "import it first: `pinfold image import DIR-OR-TARBALL --name NAME`, or `pinfold image build`",
            ),
            e => err(format!("the engine would not create the kept container: {e}"), "see the engine's message"),
        })?;
    let id = created.id;
    let fail = |e: SandboxError| {
        remove_by_id(engine, &id);
        e
    };
    let made = engine::inspect_made(engine, about.podman, &id).map_err(fail)?;
    if made.runtime != runtime {
        return Err(fail(err(
            format!("{} would run the container with the runtime `{}`, not `{runtime}` as the preset asks", about.name, made.runtime),
            "see `pinfold doctor`",
        )));
    }
    engine.rt.block_on(docker.start_container(&id, None)).map_err(|e| fail(err(format!("the kept container would not start: {e}"), "see the engine's log")))?;
    let c = engine.rt.block_on(docker.inspect_container(&id, None::<InspectContainerOptions>)).map_err(|e| fail(err(format!("cannot inspect the kept container: {e}"), "see the engine's log")))?;
    let pid = c.state.and_then(|s| s.pid).unwrap_or(0) as i32;
    let start = (pid > 0).then(|| start_time(pid)).flatten().ok_or_else(|| fail(err("the kept container's keeper is not running", "see the engine's log")))?;
    // The keeper makes itself undumpable first thing: wait for it, then check what the
    // kernel shows.
    let mut checked = Err(String::new());
    for _ in 0..200 {
        checked = verify(pid, body.host_config.as_ref().and_then(|h| h.mounts.as_deref()).unwrap_or_default(), tmpfs);
        if checked.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    checked.map_err(|why| fail(err(format!("the kept container is not what pinfold asked for: {why}"), "see the engine's log")))?;
    hold(pid, placeholders).map_err(|why| fail(err(format!("cannot hold the kept container's placeholders: {why}"), "see `pinfold doctor`")))?;
    let rec = Record { id: id.clone(), hash: hash.to_string(), image_id: made.image_id.clone(), keeper_pid: pid, keeper_start: start };
    write_record(run_dir, name, &rec).map_err(|e| fail(err(format!("cannot write the kept container's record: {e}"), "see `pinfold doctor`")))?;
    Ok(Kept { id, image_id: made.image_id, keeper_pid: pid, made: true })
}

/// The start time of `pid` (clock ticks after boot, `/proc/PID/stat` field 22).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// What the kernel shows of the keeper `pid`: it is pinfold's keeper, without capabilities,
/// with `no_new_privs` and a seccomp filter, undumpable; the root read-only; each bind of
/// `mounts` and each tmpfs mounted where it should be, read-only where it should be.
fn verify(pid: i32, mounts: &[Mount], tmpfs: &[String]) -> Result<(), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| format!("read its keeper's status: {e}"))?;
    let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).map(str::trim).unwrap_or_default().to_string();
    for cap in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        if !field(cap).trim_start_matches('0').is_empty() {
            return Err(format!("its keeper has capabilities ({cap} {})", field(cap)));
        }
    }
    if field("NoNewPrivs:") != "1" || field("Seccomp:") != "2" {
        return Err("its keeper has no no_new_privs or no seccomp filter".into());
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !cmdline.starts_with(format!("{KEEPER_PATH}\0{}\0container-keep\0", crate::HELPER_ARG).as_bytes()) {
        return Err("its PID 1 is not pinfold's keeper".into());
    }
    verify_mounts(pid, mounts, tmpfs)
}

/// What the kernel shows of the mounts of `pid`, a container's process: the root read-only,
/// each bind of `mounts` and each tmpfs mounted where it should be, read-only where it should
/// be. (A directory of the project swapped for a link while the runtime mounted would have a
/// bind land elsewhere, and nothing at its place.)
pub(crate) fn verify_mounts(pid: i32, mounts: &[Mount], tmpfs: &[String]) -> Result<(), String> {
    let info = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).map_err(|e| format!("read its mounts: {e}"))?;
    let at = crate::mounts::table(&info);
    if at.get("/") != Some(&true) {
        return Err("its root is not read-only".into());
    }
    for m in mounts {
        let (Some(t), ro) = (m.target.as_deref(), m.read_only.unwrap_or(false)) else { continue };
        if m.typ != Some(MountType::BIND) {
            continue;
        }
        match at.get(t) {
            Some(r) if *r == ro => {}
            Some(_) => return Err(format!("{t} is not {}", if ro { "read-only" } else { "writable" })),
            None => return Err(format!("nothing is mounted at {t} (a placeholder removed on the host?)")),
        }
    }
    for t in tmpfs {
        if !at.contains_key(t.as_str()) {
            return Err(format!("no tmpfs at {t}"));
        }
    }
    Ok(())
}

/// Kill every process of the kept container but its keeper, until there is none: every
/// process of the host whose pid namespace is the keeper's. (Not only the keeper's children:
/// a command's process made with `clone(CLONE_PARENT)` is the child of the engine's monitor,
/// outside the container, and would outlive the run. New pid namespaces inside, which would
/// hide a process from this, are refused by the seccomp rules.)
pub(crate) fn empty(keeper: i32) -> Result<(), String> {
    let ns = std::fs::read_link(format!("/proc/{keeper}/ns/pid")).map_err(|e| format!("read its keeper's pid namespace: {e}"))?;
    for _ in 0..2000 {
        let members = members(keeper, &ns)?;
        if members.is_empty() {
            return Ok(());
        }
        for k in members {
            let _ = sys::kill(k, libc::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Err("its processes kept coming".into())
}

/// The processes of the pid namespace `ns` but `keeper` (zombies too: a process is gone once
/// its parent, the keeper or the engine's monitor, reaps it).
fn members(keeper: i32, ns: &Path) -> Result<Vec<i32>, String> {
    let dir = std::fs::read_dir("/proc").map_err(|e| format!("list /proc: {e}"))?;
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == keeper {
            continue;
        }
        // (A process of another user this one may not inspect is not in a container of its.)
        if std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|l| l == ns) {
            // A zombie cannot be killed; it is only waited for.
            if !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rfind(')').is_some_and(|i| s[i + 1..].trim_start().starts_with('Z'))) {
                out.push(pid);
            }
        }
    }
    Ok(out)
}

pub(crate) fn remove_by_id(engine: &Engine, id: &str) {
    let _ = engine.rt.block_on(engine.docker.remove_container(id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })));
}

/// Run `argv` in the kept container with the engine's exec, passing stdio and signals; the
/// command's exit code.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exec(
    engine: &Engine,
    id: &str,
    user: Option<String>,
    env: Vec<String>,
    cwd: String,
    argv: &[String],
    hooks: Hooks<'_>,
    (wire, keeper): (&crate::tripwire::Tripwire, i32),
) -> Result<i32, SandboxError> {
    let docker = &engine.docker;
    let config = CreateExecOptions::<String> {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(env),
        cmd: Some(argv.to_vec()),
        privileged: Some(false),
        user,
        working_dir: Some(cwd),
        ..Default::default()
    };
    let made = docker.create_exec(id, config).await.map_err(|e| err(format!("the engine would not make the exec: {e}"), "see the engine's message"))?;
    (hooks.release)().map_err(SandboxError::NotReleased)?;
    let started = docker.start_exec(&made.id, Some(StartExecOptions { detach: false, tty: false, output_capacity: None })).await;
    let (output, input) = match started {
        Ok(StartExecResults::Attached { output, input }) => (output, input),
        Ok(StartExecResults::Detached) => return Err(err("the engine started the exec detached", "see the engine's log")),
        Err(e) => return super::start_failure(&e.to_string()),
    };
    let pump_in = super::pump_stdin(input);
    let tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let pump_out = super::pump_output(output, tail);
    let ended = async {
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            match docker.inspect_exec(&made.id).await {
                Ok(i) if i.running == Some(false) => return Ok(i.exit_code.unwrap_or(0)),
                Ok(_) => {}
                Err(e) => return Err(err(format!("lost the exec while waiting for it: {e}"), "see the engine's log")),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(100));
        }
    };
    let mut signals = super::forwarded_signals();
    let tripping = super::trip(wire);
    tokio::pin!(ended);
    tokio::pin!(pump_out);
    tokio::pin!(tripping);
    let mut out_done = false;
    let code: i64 = loop {
        tokio::select! {
            // The container's covers no longer hold: it goes, with the command (the caller
            // removes it, as for any failed exec).
            t = &mut tripping => {
                // The keeper is the container's first process: all of it dies with it.
                if keeper > 0 {
                    let _ = sys::kill(keeper, libc::SIGKILL);
                }
                let _ = docker.kill_container(id, Some(bollard::query_parameters::KillContainerOptions { signal: "KILL".to_string() })).await;
                pump_in.abort();
                return Err(SandboxError::ProtectedChanged { path: t.path, created: t.created });
            }
            // (Asked only once the output has ended: until then the command runs.)
            c = &mut ended, if out_done => break c?,
            () = &mut pump_out, if !out_done => out_done = true,
            n = super::next_signal(&mut signals) => {
                // The engine has no kill for an exec: its process, by the pid the engine gives.
                if let Ok(i) = docker.inspect_exec(&made.id).await
                    && let Some(pid) = i.pid.filter(|p| *p > 0)
                    && i.running == Some(true)
                {
                    let _ = sys::kill(pid as libc::pid_t, n);
                }
            }
        }
    };
    pump_in.abort();
    if let Some(t) = wire.tripped_at_end() {
        return Err(SandboxError::ProtectedChanged { path: t.path, created: t.created });
    }
    Ok(code.clamp(0, 255) as i32)
}

/// Remove the kept container `name` (for `pinfold serve` when a sandbox is deleted or
/// expires): the one its record names. `Ok(false)`: there was none.
pub fn remove_kept(name: &str) -> Result<bool, SandboxError> {
    if !valid_name(name) {
        return Err(err(format!("{name:?} is not a kept container's name"), "letters, digits, `_`, `.` and `-`"));
    }
    let (uid, _) = sys::ids();
    let Ok(run_dir) = crate::parent::run_base(uid) else { return Ok(false) };
    let Some(rec) = read_record(&run_dir, name) else { return Ok(false) };
    let engine = Engine::connect()?;
    engine
        .rt
        .block_on(engine.docker.remove_container(&rec.id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })))
        .or_else(|e| match e {
            bollard::errors::Error::DockerResponseServerError { status_code: 404, .. } => Ok(()),
            e => Err(err(format!("the engine would not remove the kept container {name}: {e}"), "see the engine's log")),
        })?;
    let _ = std::fs::remove_file(record_path(&run_dir, name));
    Ok(true)
}

/// Start the holder of `placeholders` for the life of the keeper `pid`, and wait until it
/// holds them.
fn hold(pid: i32, placeholders: &[(PathBuf, bool)]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = sys::socketpair().map_err(|e| format!("socketpair: {e}"))?;
    sys::clear_cloexec(theirs.as_raw_fd()).map_err(|e| format!("pass the socket: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("find pinfold: {e}"))?;
    let list = serde_json::to_string(placeholders).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .arg(crate::HELPER_ARG)
        .arg("container-hold")
        .arg(theirs.as_raw_fd().to_string())
        .arg(pid.to_string())
        .arg(list)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("start the holder: {e}"))?;
    drop(theirs);
    let mut buf = [0u8; 512];
    let n = sys::recv_with_fds(&ours, &mut buf).map(|(n, _)| n).unwrap_or(0);
    match buf.first().copied().filter(|_| n > 0) {
        Some(b'R') => {
            // It runs on alone: reaped by init when it ends.
            std::mem::forget(child);
            Ok(())
        }
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            Err(String::from_utf8_lossy(buf.get(1..n).unwrap_or_default()).into_owned())
        }
    }
}

/// `pinfold __sandbox-helper container-hold SOCK KEEPER-PID PLACEHOLDERS`: hold each
/// placeholder (as a run does), say `R`, then wait for the keeper to end and let them go
/// (the last one out removes each).
pub(crate) fn hold_helper(args: &[String]) -> i32 {
    let [_, sock, pid, list] = args else { return 2 };
    let Some(sock) = sys::inherited_socket(sock) else { return 2 };
    sys::ignore_terminal_signals();
    let _ = sys::setsid();
    let made = (|| -> Result<(crate::parent::Placeholders, std::os::fd::OwnedFd), String> {
        let pid: i32 = pid.parse().map_err(|_| "bad pid")?;
        let list: Vec<(PathBuf, bool)> = serde_json::from_str(list).map_err(|e| format!("bad list: {e}"))?;
        let pidfd = sys::pidfd_open(pid).map_err(|e| format!("watch the keeper: {e}"))?;
        let held = crate::parent::Placeholders::hold_all(&list).map_err(|e| e.to_string())?;
        Ok((held, pidfd))
    })();
    match made {
        Ok((held, pidfd)) => {
            let _ = sys::send_nosignal(&sock, b"R");
            drop(sock);
            loop {
                match sys::poll_read(&[pidfd.as_raw_fd()], -1) {
                    Ok(r) if r.first() == Some(&true) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            drop(held);
            0
        }
        Err(why) => {
            let _ = sys::send_nosignal(&sock, format!("E{why}").as_bytes());
            1
        }
    }
}

/// `pinfold __sandbox-helper container-keep`, as PID 1 of a kept container: undumpable, reap
/// every orphan, nothing else.
pub(crate) fn keep_helper() -> i32 {
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0, 0);
    loop {
        match sys::waitpid(-1, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("sb_0123abc"));
        for bad in ["", "a/b", "a b", "ä", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_hash_ignores_what_each_run_gives() {
        let body = ContainerCreateBody { image: Some("i".into()), cmd: Some(vec!["a".into()]), env: Some(vec!["X=1".into()]), ..Default::default() };
        let other_run = ContainerCreateBody { cmd: Some(vec!["b".into()]), env: Some(vec!["Y=2".into()]), working_dir: Some("/w".into()), ..body.clone() };
        let other_image = ContainerCreateBody { image: Some("j".into()), ..body.clone() };
        let p = serde_json::json!({});
        assert_eq!(spec_hash(&body, &p), spec_hash(&other_run, &p));
        assert_ne!(spec_hash(&body, &p), spec_hash(&other_image, &p));
        assert_ne!(spec_hash(&body, &p), spec_hash(&body, &serde_json::json!({"x": 1})));
        let tmpfs = |pairs: &[(&str, &str)]| {
            let h = bollard::models::HostConfig { tmpfs: Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()), ..Default::default() };
            ContainerCreateBody { host_config: Some(h), ..body.clone() }
        };
        let (a, b) = (tmpfs(&[("/tmp", "rw"), ("/t2", "rw"), ("/t3", "ro")]), tmpfs(&[("/t3", "ro"), ("/t2", "rw"), ("/tmp", "rw")]));
        assert_eq!(spec_hash(&a, &p), spec_hash(&b, &p));
    }
}
