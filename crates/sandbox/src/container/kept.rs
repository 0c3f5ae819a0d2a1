//! Containers kept between runs, for `pinfold serve`'s long-lived sandboxes: one container per
//! sandbox, made by the first run and entered by the next ones with the engine's exec, until
//! the server removes it ([`remove_kept`]) when the sandbox is deleted or expires.
//!
//! The container is made exactly as a one-shot run's is ([`super::create_body`]: binds,
//! masks, read-only root, no capabilities, `no-new-privileges`, the seccomp profile, no
//! network, the limits), but its command is a keeper (`sleep`) and its environment the
//! image's; each run's command, environment and working directory go with its exec. A
//! label holds the hash of everything else: a run whose policy would make a different
//! container (another writable root, another image or limit) does not enter it and runs in a
//! one-shot container instead; so does a run with the egress proxy, whose network namespace
//! lives only as long as that run.
//!
//! A run killed before it ends (pinfold killed, or its reaper told so) takes the kept
//! container with it: the command is not left running in a container nobody watches, and the
//! next run makes a fresh one.

use std::collections::HashMap;

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions};
use sha2::{Digest, Sha256};

use super::engine::{self, Engine, err};
use crate::{Hooks, SandboxError};

/// The label naming a kept container (its value: the container's name).
pub(crate) const KEPT_LABEL: &str = "dev.pinfold.kept";
/// The label holding the hash of what made it.
const SPEC_LABEL: &str = "dev.pinfold.spec";
/// The keeper: the container's main process, under the engine's init, while it is kept.
const KEEPER: [&str; 2] = ["sleep", "2147483647"];

/// A kept container's name: `pinfold-kept-` and letters, digits, `_`, `.` and `-`.
pub fn valid_name(name: &str) -> bool {
    name.strip_prefix("pinfold-kept-").is_some_and(|rest| {
        !rest.is_empty() && name.len() <= 128 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    })
}

/// What makes the container, hashed: the request without the command, environment, working
/// directory, labels and the path of the seccomp profile's file, and the profile itself.
fn spec_hash(body: &ContainerCreateBody, profile: &serde_json::Value) -> String {
    let mut b = body.clone();
    b.cmd = None;
    b.env = None;
    b.working_dir = None;
    b.labels = None;
    if let Some(h) = b.host_config.as_mut() {
        h.security_opt = None;
    }
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&sorted(serde_json::to_value(&b).unwrap_or_default())).unwrap_or_default());
    hasher.update(serde_json::to_vec(&sorted(profile.clone())).unwrap_or_default());
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// `v` with every object's keys in order: the request holds hash maps (tmpfs, labels), whose
/// order differs from one process to the next.
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

/// The kept container to run in, made or found; `None` when a container of that name runs
/// but was made for another policy (the run is then a one-shot).
pub(crate) struct Kept {
    pub(crate) id: String,
    pub(crate) image_id: String,
    /// Made by this run (not found running).
    pub(crate) made: bool,
}

/// Find the kept container `name` made from `body` (the one-shot request for this run), or
/// make and start it.
pub(crate) fn find_or_make(engine: &Engine, about: &engine::Ping, name: &str, body: &ContainerCreateBody, runtime: &str) -> Result<Option<Kept>, SandboxError> {
    let (profile, _) = super::profile::profile();
    let hash = spec_hash(body, &profile);
    let docker = &engine.docker;
    for _ in 0..3 {
        match engine.rt.block_on(docker.inspect_container(name, None::<InspectContainerOptions>)) {
            Ok(c) => {
                let labels = c.config.as_ref().and_then(|c| c.labels.clone()).unwrap_or_default();
                if labels.get(KEPT_LABEL).map(String::as_str) != Some(name) {
                    return Err(err(
                        format!("a container named {name} exists that pinfold did not keep"),
                        format!("remove it (`podman rm -f {name}`) or let the sandbox use another name"),
                    ));
                }
                let running = c.state.as_ref().and_then(|s| s.running) == Some(true);
                let id = c.id.clone().unwrap_or_default();
                if !running {
                    // Its keeper died (the engine restarted, a limit killed it): made again.
                    remove(engine, &id);
                    continue;
                }
                if labels.get(SPEC_LABEL) != Some(&hash) {
                    return Ok(None);
                }
                return Ok(Some(Kept { id, image_id: c.image.unwrap_or_default(), made: false }));
            }
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {}
            Err(e) => return Err(err(format!("the engine would not say whether {name} exists: {e}"), "see the engine's log")),
        }
        let mut b = body.clone();
        b.cmd = Some(KEEPER.iter().map(|s| s.to_string()).collect());
        // The image's environment; each run's goes with its exec.
        b.env = Some(Vec::new());
        b.attach_stdin = Some(false);
        b.attach_stdout = Some(false);
        b.attach_stderr = Some(false);
        b.open_stdin = Some(false);
        b.stdin_once = Some(false);
        b.labels = Some(HashMap::from([(KEPT_LABEL.to_string(), name.to_string()), (SPEC_LABEL.to_string(), hash.clone())]));
        let created = engine.rt.block_on(docker.create_container(Some(CreateContainerOptions { name: Some(name.to_string()), ..Default::default() }), b));
        let id = match created {
            Ok(c) => c.id,
            // Another run made it first: use that one.
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. }) => continue,
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, message }) => {
                return Err(err(
                    format!("the image `{}` is not in {}: {message}", body.image.clone().unwrap_or_default(), about.name),
                    "import it first: `pinfold image import DIR-OR-TARBALL --name NAME`, or `pinfold image build`",
                ));
            }
            Err(e) => return Err(err(format!("the engine would not create the kept container: {e}"), "see the engine's message")),
        };
        // The runtime as the engine will use it (see `launch`).
        let made = match engine::inspect_made(engine, about.podman, &id) {
            Ok(m) if m.runtime == runtime => m,
            Ok(m) => {
                remove(engine, &id);
                return Err(err(format!("{} would run the container with the runtime `{}`, not `{runtime}` as the preset asks", about.name, m.runtime), "see `pinfold doctor`"));
            }
            Err(e) => {
                remove(engine, &id);
                return Err(e);
            }
        };
        if let Err(e) = engine.rt.block_on(docker.start_container(&id, None)) {
            remove(engine, &id);
            return Err(err(
                format!("the kept container would not start: {e}"),
                format!("a kept container runs `{}` while it waits: the image must have `sleep`", KEEPER.join(" ")),
            ));
        }
        return Ok(Some(Kept { id, image_id: made.image_id, made: true }));
    }
    Err(err(format!("the kept container {name} kept changing while pinfold looked for it"), "try again"))
}

fn remove(engine: &Engine, id: &str) {
    let _ = engine.rt.block_on(engine.docker.remove_container(id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })));
}

/// Run `argv` in the kept container with the engine's exec, passing stdio and signals; the
/// command's exit code.
pub(crate) async fn exec(engine: &Engine, id: &str, user: Option<String>, env: Vec<String>, cwd: String, argv: &[String], hooks: Hooks<'_>) -> Result<i32, SandboxError> {
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
    tokio::pin!(ended);
    tokio::pin!(pump_out);
    let mut out_done = false;
    let code: i64 = loop {
        tokio::select! {
            // (Asked only once the output has ended: until then the command runs.)
            c = &mut ended, if out_done => break c?,
            () = &mut pump_out, if !out_done => out_done = true,
            n = super::next_signal(&mut signals) => {
                // The engine has no kill for an exec: its process, by the pid the engine gives.
                if let Ok(i) = docker.inspect_exec(&made.id).await
                    && let Some(pid) = i.pid.filter(|p| *p > 0)
                    && i.running == Some(true)
                {
                    let _ = crate::sys::kill(pid as libc::pid_t, n);
                }
            }
        }
    };
    pump_in.abort();
    Ok(code.clamp(0, 255) as i32)
}

/// Remove the kept container `name`, when there is one pinfold kept: for `pinfold serve` when
/// a sandbox is deleted or expires. `Ok(false)`: there was none.
pub fn remove_kept(name: &str) -> Result<bool, SandboxError> {
    if !valid_name(name) {
        return Err(err(format!("{name:?} is not a kept container's name"), "a kept container is named pinfold-kept-…"));
    }
    // No engine, no kept container.
    let Ok(socket) = engine::socket() else { return Ok(false) };
    if !socket.exists() {
        return Ok(false);
    }
    let engine = Engine::connect_at(socket)?;
    match engine.rt.block_on(engine.docker.inspect_container(name, None::<InspectContainerOptions>)) {
        Ok(c) => {
            let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
            if labels.get(KEPT_LABEL).map(String::as_str) != Some(name) {
                return Ok(false);
            }
            let id = c.id.unwrap_or_default();
            engine
                .rt
                .block_on(engine.docker.remove_container(&id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() })))
                .map_err(|e| err(format!("the engine would not remove {name}: {e}"), "see the engine's log"))?;
            Ok(true)
        }
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
        Err(e) => Err(err(format!("the engine would not say whether {name} exists: {e}"), "see the engine's log")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("pinfold-kept-sb_0123abc"));
        for bad in ["pinfold-kept-", "kept-x", "pinfold-kept-a/b", "pinfold-kept-a b", "pinfold-kept-ä"] {
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
        // Map order is not what was asked.
        let tmpfs = |pairs: &[(&str, &str)]| {
            let mut h = bollard::models::HostConfig::default();
            h.tmpfs = Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            ContainerCreateBody { host_config: Some(h), ..body.clone() }
        };
        let (a, b) = (tmpfs(&[("/tmp", "rw"), ("/t2", "rw"), ("/t3", "ro")]), tmpfs(&[("/t3", "ro"), ("/t2", "rw"), ("/tmp", "rw")]));
        assert_eq!(spec_hash(&a, &p), spec_hash(&b, &p));
    }
}
