//! A real container engine for the container backend's tests: Debian's Podman serving its
//! Docker-compatible API on a socket in a temporary directory, started once per test
//! process and stopped when the process ends; and the test image, built from the host's own
//! programs (`programs/toolbox_rootfs.sh`) and imported once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One Podman service: its socket and the directory that holds it.
#[derive(Debug)]
pub struct Engine {
    pub socket: PathBuf,
    /// `DOCKER_HOST` for pinfold.
    pub host: String,
    _dir: tempfile::TempDir,
}

/// Start `podman [FLAGS] system service` on a socket of its own; a watcher stops it when this
/// test process exits (the service would otherwise outlive the run).
fn start(flags: &[&str]) -> Engine {
    let podman = which("podman").unwrap_or_else(|| panic!("the container backend's tests need Podman: apt install podman (CI installs it)"));
    let dir = tempfile::Builder::new().prefix("pinfold-engine-").tempdir_in("/tmp").expect("temp dir");
    let socket = dir.path().join("podman.sock");
    let me = std::process::id();
    let service = format!(
        "{} {} system service --time=0 unix://{} & svc=$!; while kill -0 {me} 2>/dev/null && kill -0 $svc 2>/dev/null; do sleep 1; done; kill $svc 2>/dev/null; wait",
        podman.display(),
        flags.join(" "),
        socket.display()
    );
    let log = std::fs::File::create(dir.path().join("service.log")).expect("log");
    // In its own directory: conmon writes an `oom` file into its working directory when a
    // container's memory limit kills it.
    Command::new("setsid")
        .args(["bash", "-c", &service])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start podman system service");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "podman system service did not listen on {} within 60 s: {}",
            socket.display(),
            std::fs::read_to_string(dir.path().join("service.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let host = format!("unix://{}", socket.display());
    Engine { socket, host, _dir: dir }
}

/// The engine with its default runtime (runc).
pub fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| start(&[]))
}

/// A second engine whose containers run under runsc (gVisor): Podman takes no runtime per
/// container through its Docker-compatible API, so the service is started with it.
pub fn gvisor_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| start(&["--runtime", "runsc", "--runtime-flag", "network=none"]))
}

fn which(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.exists())
}

/// The test image (`localhost/pinfold-toolbox:<hash of its recipe>`), built and imported once
/// per test process unless the engine has it already.
pub fn toolbox_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        engine();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/toolbox_rootfs.sh");
        let recipe = std::fs::read(&script).expect("read toolbox_rootfs.sh");
        let tag = format!("{:016x}", fnv(&recipe));
        let name = format!("localhost/pinfold-toolbox:{tag}");
        let exists = Command::new("podman").args(["image", "exists", &name]).status().expect("podman image exists");
        if !exists.success() {
            let dir = tempfile::tempdir().expect("temp dir");
            let tar = dir.path().join("rootfs.tar");
            let out = Command::new("bash").arg(&script).arg(&tar).output().expect("run toolbox_rootfs.sh");
            assert!(out.status.success(), "toolbox_rootfs.sh failed: {}", String::from_utf8_lossy(&out.stderr));
            let out = Command::new("podman").args(["import", "-q"]).arg(&tar).arg(&name).output().expect("podman import");
            assert!(out.status.success(), "podman import failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        name
    })
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The containers the engine holds whose names start with `prefix` (all states).
pub fn containers(engine: &Engine, prefix: &str) -> Vec<String> {
    let out = Command::new("podman")
        .args(["--url", &engine.host, "ps", "-a", "--format", "{{.Names}}"])
        .output()
        .expect("podman ps");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect()
}
