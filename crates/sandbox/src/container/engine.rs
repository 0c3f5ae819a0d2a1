//! The container engine: found as Docker's own clients find it, spoken to over its unix
//! socket with bollard, from a single-threaded tokio runtime this crate owns.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;

use crate::SandboxError;

/// How long one API call may take before the engine counts as hung (seconds).
const TIMEOUT: u64 = 120;

pub(crate) const ENGINE_HINT: &str = "start an engine (Podman: `podman system service --time=0 unix:///run/podman/podman.sock`; Docker: `systemctl start docker`) or point DOCKER_HOST at its socket (unix:///path)";

/// A connection to a Docker Engine API, and the runtime its futures run on.
pub(crate) struct Engine {
    pub(crate) docker: Docker,
    pub(crate) rt: tokio::runtime::Runtime,
    /// The socket, for messages and the reaper.
    pub(crate) socket: PathBuf,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("socket", &self.socket).finish()
    }
}

pub(crate) fn err(why: impl Into<String>, hint: impl Into<String>) -> SandboxError {
    SandboxError::Backend { backend: "container", why: why.into(), hint: hint.into() }
}

/// Where the engine listens: `DOCKER_HOST` (a `unix://` address) when set, else the first
/// of Docker's socket, the user's Podman socket and the system's Podman socket that exists.
pub(crate) fn socket() -> Result<PathBuf, SandboxError> {
    if let Some(host) = std::env::var_os("DOCKER_HOST").filter(|h| !h.is_empty()) {
        let host = host.to_string_lossy().into_owned();
        let Some(path) = host.strip_prefix("unix://") else {
            return Err(err(
                format!("DOCKER_HOST={host} is not a unix socket; pinfold speaks to the engine over a local unix socket only"),
                "set DOCKER_HOST=unix:///path/to/engine.sock",
            ));
        };
        return Ok(PathBuf::from(path));
    }
    let mut candidates = vec![PathBuf::from("/var/run/docker.sock")];
    let uid = crate::sys::ids().0;
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    candidates.push(runtime_dir.join("podman/podman.sock"));
    candidates.push(PathBuf::from("/run/podman/podman.sock"));
    candidates.iter().find(|p| is_socket(p)).cloned().ok_or_else(|| {
        err(
            format!("no container engine socket: DOCKER_HOST is unset and none of {} exists", candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")),
            ENGINE_HINT,
        )
    })
}

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// What the engine says of itself.
#[derive(Debug, Clone)]
pub(crate) struct About {
    /// "Podman Engine 4.3.1", "Docker Engine 27.0.1".
    pub(crate) name: String,
    /// Runtime name → path, as registered with the engine.
    pub(crate) runtimes: HashMap<String, Option<String>>,
    /// The engine runs without root (rootless Podman, rootless Docker).
    pub(crate) rootless: bool,
}

impl Engine {
    pub(crate) fn connect() -> Result<Engine, SandboxError> {
        Engine::connect_at(socket()?)
    }

    pub(crate) fn connect_at(socket: PathBuf) -> Result<Engine, SandboxError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| err(format!("cannot start an async runtime: {e}"), "this is a bug in pinfold"))?;
        let addr = format!("unix://{}", socket.display());
        let docker = rt
            .block_on(async { Docker::connect_with_unix(&addr, TIMEOUT, bollard::API_DEFAULT_VERSION) })
            .map_err(|e| err(format!("cannot connect to {addr}: {e}"), ENGINE_HINT))?;
        Ok(Engine { docker, rt, socket })
    }

    /// Ask the engine what it is; an engine that does not answer is an error.
    pub(crate) fn about(&self) -> Result<About, SandboxError> {
        let addr = self.socket.display();
        let (version, info) = self
            .rt
            .block_on(async { tokio::try_join!(self.docker.version(), self.docker.info()) })
            .map_err(|e| err(format!("the engine at unix://{addr} does not answer: {e}"), ENGINE_HINT))?;
        let components = version.components.unwrap_or_default();
        let engine = components.iter().find(|c| c.name.ends_with("Engine"));
        let name = match engine {
            Some(c) => format!("{} {}", c.name, c.version),
            None => format!("Docker Engine {}", version.version.unwrap_or_default()),
        };
        let runtimes = info
            .runtimes
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.path))
            .collect();
        let rootless = info.security_options.unwrap_or_default().iter().any(|o| o.contains("name=rootless"));
        Ok(About { name, runtimes, rootless })
    }
}

/// One GET to the engine, outside bollard (which speaks Docker's API only): the response's
/// headers (names lower-cased) and body. For `/_ping`'s headers and Podman's own inspect.
pub(crate) fn raw_get(socket: &Path, path: &str) -> std::io::Result<(Vec<(String, String)>, Vec<u8>)> {
    raw_get_from(socket, path).map(|(h, b, _)| (h, b))
}

type Headers = Vec<(String, String)>;

/// [`raw_get`], and the pid and uid of the process serving the socket.
fn raw_get_from(socket: &Path, path: &str) -> std::io::Result<(Headers, Vec<u8>, (libc::pid_t, libc::uid_t))> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    let peer = crate::sys::peer_cred(&s)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(TIMEOUT)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: engine\r\nConnection: close\r\n\r\n")?;
    let mut all = Vec::new();
    s.take(16 << 20).read_to_end(&mut all)?;
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("the engine's answer to GET {path}: {why}"));
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&all[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if !status.split(' ').nth(1).is_some_and(|c| c.starts_with('2')) {
        return Err(bad(status));
    }
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    let mut body = all[end + 4..].to_vec();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body).ok_or_else(|| bad("a broken chunked body"))?;
    }
    Ok((headers, body, peer))
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).ok()?.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// Which engine answers on `socket`, from the headers of its `/_ping` (cheap, unlike
/// `/info`).
#[derive(Debug, Clone)]
pub(crate) struct Ping {
    /// "Podman Engine 4.3.1", or the `Server` header Docker sends.
    pub(crate) name: String,
    pub(crate) podman: bool,
    /// The process serving the socket is not root: a rootless engine, whose uid 0 is the
    /// user who runs it.
    pub(crate) rootless: bool,
    /// That process (0 when it is not in this pid namespace).
    pub(crate) pid: libc::pid_t,
}

pub(crate) fn ping(socket: &Path) -> Result<Ping, SandboxError> {
    let (headers, _, (pid, uid)) = raw_get_from(socket, "/_ping").map_err(|e| err(format!("the engine at unix://{} does not answer: {e}", socket.display()), ENGINE_HINT))?;
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let podman = header("libpod-api-version");
    let name = match &podman {
        Some(v) => format!("Podman Engine {v}"),
        None => header("server").map_or_else(|| "Docker Engine".to_string(), |s| s.replace('/', " ")),
    };
    Ok(Ping { name, podman: podman.is_some(), rootless: uid != 0, pid })
}

/// The OCI runtime the engine will run container `id` with, as the engine itself says:
/// Podman's own inspect (its Docker-compatible one says `oci` whatever it uses), Docker's
/// `HostConfig.Runtime`.
/// What the engine made of a created container: the runtime it will run it with and the ID of
/// the image it resolved the name to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Made {
    pub runtime: String,
    pub image_id: String,
}

pub(crate) fn inspect_made(engine: &Engine, podman: bool, id: &str) -> Result<Made, SandboxError> {
    let asked = |e: &dyn std::fmt::Display| err(format!("cannot ask the engine which runtime the container has: {e}"), "see the engine's log");
    if podman {
        let (_, body) = raw_get(&engine.socket, &format!("/v4.0.0/libpod/containers/{id}/json")).map_err(|e| asked(&e))?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| asked(&e))?;
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        return Ok(Made { runtime: field("OCIRuntime"), image_id: field("Image") });
    }
    let c = engine.rt.block_on(engine.docker.inspect_container(id, None::<bollard::query_parameters::InspectContainerOptions>)).map_err(|e| asked(&e))?;
    Ok(Made { runtime: c.host_config.and_then(|h| h.runtime).unwrap_or_default(), image_id: c.image.unwrap_or_default() })
}
