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
    /// Run as uid 65534 (Podman rootless), not root.
    pub rootless: bool,
    _dir: tempfile::TempDir,
}

/// Start `podman [FLAGS] system service` on a socket of its own; a watcher stops it when this
/// test process exits (the service would otherwise outlive the run). `rootless`: the service
/// runs as uid 65534, its storage and runtime files in the engine's directory.
fn start(flags: &[&str], rootless: bool) -> Engine {
    let podman = which("podman").unwrap_or_else(|| panic!("the container backend's tests need Podman: apt install podman (CI installs it)"));
    let dir = tempfile::Builder::new().prefix("pinfold-engine-").tempdir_in("/tmp").expect("temp dir");
    let socket = dir.path().join("podman.sock");
    let me = std::process::id();
    let d = dir.path().display();
    let as_user = if rootless {
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown the engine's directory");
        format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME={d} \
             XDG_RUNTIME_DIR={d}/run XDG_CONFIG_HOME={d}/config XDG_DATA_HOME={d}/data "
        )
    } else {
        String::new()
    };
    // (The watcher stays root's: it must see this process.)
    let service = format!(
        "{as_user}{} {} system service --time=0 unix://{} & svc=$!; while kill -0 {me} 2>/dev/null && kill -0 $svc 2>/dev/null; do sleep 1; done; kill $svc 2>/dev/null; wait",
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
    Engine { socket, host, rootless, _dir: dir }
}

/// Root's engine, running containers with runc (named: where Debian's crun is installed too,
/// Podman would pick it, and crun refuses this machine's hybrid cgroup layout).
pub fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| start(&["--runtime", "runc"], false))
}

/// A rootless Podman of uid 65534's (native overlay storage, runc), for the cases that run
/// as that user: whoever runs pinfold reaches an engine of its own.
pub fn rootless_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| start(&["--storage-driver", "overlay", "--runtime", "runc"], true))
}

/// The engine a case's user reaches: root's, or uid 65534's rootless one.
pub fn engine_for(user: super::User) -> &'static Engine {
    if user == super::User::Nobody { rootless_engine() } else { engine() }
}

/// A second engine whose containers run under runsc (gVisor): Podman takes no runtime per
/// container through its Docker-compatible API, so the service is started with it.
pub fn gvisor_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| start(&["--runtime", "runsc", "--runtime-flag", "network=none"], false))
}

fn which(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.exists())
}

/// The test image (`localhost/pinfold-toolbox:<hash of its recipe>`), built and imported once
/// per test process unless root's engine has it already; imported into the rootless engine
/// too when a case of uid 65534's runs.
pub fn toolbox_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        engine();
        let name = toolbox_name();
        let exists = Command::new("podman").args(["image", "exists", &name]).status().expect("podman image exists");
        if !exists.success() {
            import(None, toolbox_tar(), &name);
        }
        name
    })
}

/// [`toolbox_image`] in the engine of a case's user.
pub fn toolbox_image_for(user: super::User) -> &'static str {
    if user != super::User::Nobody {
        return toolbox_image();
    }
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let name = toolbox_name();
        import(Some(rootless_engine()), toolbox_tar(), &name);
        name
    })
}

fn toolbox_name() -> String {
    let recipe = std::fs::read(toolbox_script()).expect("read toolbox_rootfs.sh");
    format!("localhost/pinfold-toolbox:{:016x}", fnv(&recipe))
}

fn toolbox_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/toolbox_rootfs.sh")
}

/// The toolbox's root file system as a tarball, made once per test process.
fn toolbox_tar() -> &'static Path {
    static TAR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &TAR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let tar = dir.path().join("rootfs.tar");
        let out = Command::new("bash").arg(toolbox_script()).arg(&tar).output().expect("run toolbox_rootfs.sh");
        assert!(out.status.success(), "toolbox_rootfs.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        (dir, tar)
    })
    .1
}

/// `podman import` into root's local storage, or through `engine`'s socket.
fn import(engine: Option<&Engine>, tar: &Path, name: &str) {
    let mut c = Command::new("podman");
    if let Some(e) = engine {
        c.args(["--remote", "--url", &e.host]);
    }
    let out = c.args(["import", "-q"]).arg(tar).arg(name).output().expect("podman import");
    assert!(out.status.success(), "podman import failed: {}", String::from_utf8_lossy(&out.stderr));
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
