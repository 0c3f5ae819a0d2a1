//! `pinfold image build` and `pinfold image import` against a real engine: Podman's
//! Docker-compatible service on a socket of the test process's own (`support::container`,
//! `DOCKER_HOST` for pinfold). Each test checks what it imported by running it with `podman
//! run`, and removes its images at the end. As root the service uses root's image store, so
//! every test image has a name of its own (`localhost/pinfold-test-…:1`).
//!
//! The refusals (tampered blobs, tar slips) are checked three ways: pinfold fails with an
//! error that names the cause, no image of the name exists afterwards, and the host is as it
//! was (the canary paths an escape would write are absent, pinfold's work directory is gone).
//!
//! Podman must be installed: without it these tests fail (CI installs it), they never skip.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::support::{container, run_cmd, unique, Run, BIN};

/// A podman run, an import: slower than the sandbox tests' commands, and the tests run side by
/// side on one service.
const SLOW: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------------
// The engine and each test's world
// ---------------------------------------------------------------------------------------------

/// One test's world: the shared Podman service (`support::container`, started once per test
/// process, stopped when it ends), a temp dir whose `tmp/` is pinfold's TMPDIR (so its work
/// directory, and any escape from it, land where the test looks), and the images the test
/// named, removed at the end.
struct World {
    engine: &'static container::Engine,
    dir: tempfile::TempDir,
    images: Vec<String>,
}

impl World {
    fn new() -> World {
        let engine = container::engine();
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("tmp")).expect("mkdir tmp");
        World { engine, dir, images: Vec::new() }
    }

    /// pinfold's TMPDIR.
    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// A name no other test uses, removed when the test ends.
    fn name(&mut self) -> String {
        let n = format!("localhost/pinfold-test-{}:1", unique(""));
        self.images.push(n.clone());
        n
    }

    fn pinfold(&self, args: &[&str], stdin: Option<Vec<u8>>) -> Run {
        let mut c = Command::new(BIN);
        c.args(args).env("DOCKER_HOST", &self.engine.host).env("TMPDIR", self.tmp());
        run_cmd(c, format!("pinfold {}", args.join(" ")), stdin, SLOW)
    }

    fn podman(&self, args: &[&str]) -> Run {
        let mut c = Command::new("podman");
        c.args(args);
        run_cmd(c, format!("podman {}", args.join(" ")), None, SLOW)
    }

    /// `sh -c SCRIPT` in `image`: runc, no network, the ulimits this machine's Podman needs.
    fn run_in(&self, image: &str, script: &str) -> Run {
        self.podman(&[
            "run", "--rm", "--runtime", "runc", "--network", "none",
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
            image, "/bin/sh", "-c", script,
        ])
    }

    fn exists(&self, image: &str) -> bool {
        self.podman(&["image", "exists", image]).code == Some(0)
    }

    /// pinfold left nothing in its TMPDIR but `names`: the work directory went, and nothing
    /// escaped into the directories above the staging directory.
    fn tmp_holds_only(&self, names: &[&str]) {
        let list = |d: &Path| {
            let mut got: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            got.sort();
            got
        };
        assert_eq!(list(&self.tmp()), names, "pinfold's TMPDIR ({}) holds something it should not", self.tmp().display());
        assert_eq!(list(self.dir.path()), ["tmp"], "something escaped into {}", self.dir.path().display());
    }

    /// An import that must be refused: exit 2, the error names `needle`, no image of `name`.
    fn refused(&self, r: &Run, name: &str, needle: &str) {
        assert_eq!(r.code, Some(2), "the import must fail:\n{}", r.show());
        assert!(r.stderr.contains(needle), "the error must name {needle:?}:\n{}", r.show());
        assert!(!self.exists(name), "{name} exists after a refused import:\n{}", r.show());
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for name in &self.images {
            let _ = Command::new("podman").args(["rmi", "--force", name]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
    }
}

/// A directory under /tmp that an escape would write into, removed at the end; the test checks
/// it stays empty.
struct Canary(PathBuf);

impl Canary {
    fn new() -> Canary {
        let p = PathBuf::from(format!("/tmp/pinfold-canary-{}", unique("")));
        std::fs::create_dir(&p).expect("make the canary directory");
        Canary(p)
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
    fn untouched(&self) {
        let names: Vec<_> = std::fs::read_dir(&self.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(names.is_empty(), "something was written into the canary {}: {names:?}", self.0.display());
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// Archives and layouts, written by hand (the `tar` crate refuses the hostile names)
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Tar(Vec<u8>);

impl Tar {
    fn entry(mut self, name: &str, kind: u8, mode: u32, link: &str, data: &[u8]) -> Tar {
        assert!(name.len() < 100 && link.len() < 100, "ustar names here are short");
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
            h[at..at + len].copy_from_slice(format!("{v:0w$o}\0", w = len - 1).as_bytes());
        };
        octal(&mut h, 100, 8, u64::from(mode));
        octal(&mut h, 108, 8, 0);
        octal(&mut h, 116, 8, 0);
        octal(&mut h, 124, 12, data.len() as u64);
        octal(&mut h, 136, 12, 1_700_000_000);
        h[156] = kind;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        if kind == b'3' || kind == b'4' {
            octal(&mut h, 329, 8, 1);
            octal(&mut h, 337, 8, 3);
        }
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        self.0.extend_from_slice(&h);
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len().div_ceil(512) * 512, 0);
        self
    }
    fn dir(self, name: &str, mode: u32) -> Tar {
        self.entry(name, b'5', mode, "", b"")
    }
    fn file(self, name: &str, data: &str) -> Tar {
        self.entry(name, b'0', 0o644, "", data.as_bytes())
    }
    fn symlink(self, name: &str, target: &str) -> Tar {
        self.entry(name, b'2', 0o777, target, b"")
    }
    fn hardlink(self, name: &str, target: &str) -> Tar {
        self.entry(name, b'1', 0o644, target, b"")
    }
    /// /bin/busybox (the host's static one) and /bin/sh: enough to run checks in the image.
    fn busybox(self) -> Tar {
        let bb = std::fs::read("/usr/bin/busybox").expect("/usr/bin/busybox (busybox-static) is needed to build test images");
        self.dir("bin/", 0o755).entry("bin/busybox", b'0', 0o755, "", &bb).symlink("bin/sh", "busybox").dir("tmp/", 0o1777)
    }
    fn done(mut self) -> Vec<u8> {
        self.0.extend_from_slice(&[0u8; 1024]);
        self.0
    }
}

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), data).unwrap();
    let out = Command::new("gzip").args(["-n", "-c"]).arg(input.path()).output().expect("run gzip");
    assert!(out.status.success(), "gzip: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// What to break in a layout, after writing it right.
#[derive(Clone, Copy, PartialEq)]
enum Tamper {
    None,
    /// Flip one byte in the middle of layer N's blob.
    FlipByte(usize),
    /// Layer N's descriptor says one byte more than the blob has.
    Size(usize),
    /// The config's diff_ids[N] is the hash of something else.
    DiffId(usize),
}

/// An OCI image layout in `dir`: `layers` (tar, gzip?) in order, `config` as the image
/// config's `config`. Returns the layer blobs' digests.
fn oci_layout(dir: &Path, layers: &[(Vec<u8>, bool)], config: serde_json::Value, tamper: Tamper) -> Vec<String> {
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    let put = |bytes: &[u8]| {
        let h = sha256(bytes);
        std::fs::write(dir.join("blobs/sha256").join(&h), bytes).unwrap();
        (format!("sha256:{h}"), bytes.len() as u64)
    };
    let mut descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    let mut digests = Vec::new();
    for (i, (tar, gz)) in layers.iter().enumerate() {
        let blob = if *gz { gzip(tar) } else { tar.clone() };
        let (digest, size) = put(&blob);
        let media_type = if *gz { "application/vnd.oci.image.layer.v1.tar+gzip" } else { "application/vnd.oci.image.layer.v1.tar" };
        let size = if tamper == Tamper::Size(i) { size + 1 } else { size };
        descriptors.push(serde_json::json!({"mediaType": media_type, "digest": digest, "size": size}));
        diff_ids.push(format!("sha256:{}", if tamper == Tamper::DiffId(i) { sha256(b"something else") } else { sha256(tar) }));
        if tamper == Tamper::FlipByte(i) {
            let path = dir.join("blobs/sha256").join(&digest["sha256:".len()..]);
            let mut bytes = std::fs::read(&path).unwrap();
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x01;
            std::fs::write(&path, bytes).unwrap();
        }
        digests.push(digest);
    }
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let (config_digest, config_size) = put(serde_json::to_string(&config).unwrap().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": descriptors,
    });
    let (manifest_digest, manifest_size) = put(serde_json::to_string(&manifest).unwrap().as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest, "size": manifest_size,
                       "platform": {"architecture": "amd64", "os": "linux"}}],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_string(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    digests
}

/// Import `bytes` as a rootfs tarball file (outside pinfold's TMPDIR), with `extra` flags.
fn import_file(e: &World, bytes: &[u8], name: &str, extra: &[&str]) -> Run {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    let path = file.path().display().to_string();
    let mut args = vec!["image", "import", path.as_str(), "--name", name];
    args.extend_from_slice(extra);
    e.pinfold(&args, None)
}

fn import_tarball(e: &World, tar: &[u8], name: &str) -> Run {
    import_file(e, tar, name, &[])
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn build_runs_busybox_with_nobody() {
    let mut e = World::new();
    let name = e.name();
    let r = e.pinfold(&["image", "build", "--name", &name], None);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(r.stdout.starts_with(&format!("{name} sha256:")), "prints the name and the ID:\n{}", r.show());
    let id = r.stdout.split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(e.podman(&["image", "inspect", "--format", "{{.Id}}", &name]).stdout.trim(), id.trim_start_matches("sha256:"));
    let run = e.run_in(&name, "echo ok; id -u nobody; stat -c '%a %U' /tmp /root /etc/passwd; ls -d /work /proc /sys /dev");
    assert_eq!(run.code, Some(0), "{}", run.show());
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[..5], ["ok", "65534", "1777 root", "700 root", "644 root"], "{}", run.show());
    // Only the name asked for: Podman's import would have added `:latest`.
    let tags = e.podman(&["image", "inspect", "--format", "{{.RepoTags}}", &name]);
    assert_eq!(tags.stdout.trim(), format!("[{name}]"), "{}", tags.show());
    e.tmp_holds_only(&[]);
}

#[test]
fn build_refuses_a_dynamically_linked_program() {
    let mut e = World::new();
    let name = e.name();
    let r = e.pinfold(&["image", "build", "--name", &name, "--with", "/bin/ls"], None);
    e.refused(&r, &name, "dynamically linked");
    // A static one is taken: pinfold itself is built static.
    let r = e.pinfold(&["image", "build", "--name", &name, "--with", BIN], None);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let run = e.run_in(&name, "/bin/pinfold --version");
    assert!(run.code == Some(0) && run.stdout.starts_with("pinfold "), "{}", run.show());
}

#[test]
fn import_rootfs_tarball_gzip_and_stdin() {
    let mut e = World::new();
    let tar = Tar::default().busybox().dir("etc/", 0o755).file("etc/greeting", "hello\n").done();
    let name = e.name();
    let r = import_file(&e, &gzip(&tar), &name, &["--json"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|err| panic!("{err}:\n{}", r.show()));
    assert_eq!(report["name"], name.as_str());
    assert_eq!(report["entries"], 6);
    assert!(report["id"].as_str().unwrap().starts_with("sha256:"));
    let run = e.run_in(&name, "cat /etc/greeting");
    assert_eq!(run.stdout, "hello\n", "{}", run.show());

    let name2 = e.name();
    let r = e.pinfold(&["image", "import", "-", "--name", &name2], Some(tar));
    assert_eq!(r.code, Some(0), "{}", r.show());
    let run = e.run_in(&name2, "cat /etc/greeting");
    assert_eq!(run.stdout, "hello\n", "{}", run.show());
    e.tmp_holds_only(&[]);
}

#[test]
fn import_oci_layout_two_layers_with_whiteout_and_config() {
    let mut e = World::new();
    let layout = tempfile::tempdir().unwrap();
    let layer1 = Tar::default().busybox().dir("etc/", 0o755).file("etc/doomed", "1").file("etc/kept", "1").dir("work/", 0o755).done();
    let layer2 = Tar::default().entry("etc/.wh.doomed", b'0', 0o644, "", b"").file("etc/added", "2").done();
    let config = serde_json::json!({
        "Env": ["PATH=/bin", "GREETING=hello world"],
        "Cmd": ["/bin/sh", "-c", "echo \"$GREETING from $(pwd) as $(id -u)\"; ls /etc | grep -E '^(added|doomed|kept)$'"],
        "WorkingDir": "/work",
        "User": "65534",
    });
    let digests = oci_layout(layout.path(), &[(layer1, false), (layer2, true)], config, Tamper::None);
    let name = e.name();
    let r = e.pinfold(&["image", "import", &layout.path().display().to_string(), "--name", &name, "--json"], None);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let verified: Vec<&str> = report["layers"].as_array().unwrap().iter().map(|l| l["digest"].as_str().unwrap()).collect();
    assert_eq!(verified, digests.iter().map(String::as_str).collect::<Vec<_>>());
    // The image's own command, with its environment, directory and user.
    let run = e.podman(&["run", "--rm", "--runtime", "runc", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", &name]);
    assert_eq!(run.code, Some(0), "{}", run.show());
    assert_eq!(run.stdout, "hello world from /work as 65534\nadded\nkept\n", "the whiteout removed etc/doomed:\n{}", run.show());
    e.tmp_holds_only(&[]);
}

fn tampered(tamper: Tamper, needle: impl Fn(&[String]) -> String) {
    let mut e = World::new();
    let layout = tempfile::tempdir().unwrap();
    let layer1 = Tar::default().busybox().done();
    let layer2 = Tar::default().file("etc/x", "2").done();
    let digests = oci_layout(layout.path(), &[(layer1, false), (layer2, true)], serde_json::json!({}), tamper);
    let name = e.name();
    let r = e.pinfold(&["image", "import", &layout.path().display().to_string(), "--name", &name], None);
    e.refused(&r, &name, &needle(&digests));
    e.tmp_holds_only(&[]);
}

/// A layer blob that is a link to /dev/zero, claiming a terabyte, or a FIFO: refused at once,
/// not copied until the disk is full, not waited on forever. (Found: 22 GB copied in 60 s
/// before the digest was checked, even with --max-bytes 100M; a FIFO hung the import.)
#[test]
fn a_blob_that_is_no_regular_file_is_refused() {
    for kind in ["devzero", "fifo"] {
        let mut e = World::new();
        let layout = tempfile::tempdir().unwrap();
        let layer = Tar::default().busybox().done();
        let digests = oci_layout(layout.path(), &[(layer, false)], serde_json::json!({}), Tamper::None);
        let blob = layout.path().join("blobs/sha256").join(&digests[0]["sha256:".len()..]);
        std::fs::remove_file(&blob).unwrap();
        if kind == "devzero" {
            std::os::unix::fs::symlink("/dev/zero", &blob).unwrap();
        } else {
            let st = std::process::Command::new("mkfifo").arg(&blob).status().unwrap();
            assert!(st.success());
        }
        let name = e.name();
        let t0 = std::time::Instant::now();
        let r = e.pinfold(&["image", "import", &layout.path().display().to_string(), "--name", &name], None);
        assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{kind}: the import took {:?}", t0.elapsed());
        assert_eq!(r.code, Some(2), "{kind}: {}", r.show());
        assert!(r.stderr.contains("not a regular file") || r.stderr.contains("symbolic link") || r.stderr.contains("many levels"), "{kind}: {}", r.show());
        assert!(!e.exists(&name), "{kind}: an image was made");
        e.tmp_holds_only(&[]);
    }
}

#[test]
fn tampered_layer_byte_is_refused() {
    tampered(Tamper::FlipByte(1), |d| format!("blob {} does not match its digest", d[1]));
}

#[test]
fn tampered_layer_size_is_refused() {
    tampered(Tamper::Size(0), |d| format!("blob {} is", d[0]));
}

#[test]
fn tampered_diff_id_is_refused() {
    tampered(Tamper::DiffId(1), |d| format!("layer 1 ({}) uncompressed hashes to", d[1]));
}

#[test]
fn slip_parent_dir_components() {
    let mut e = World::new();
    for bad in ["../escape", "../../escape", "../../../escape", "bin/../../../escape"] {
        let name = e.name();
        let r = import_tarball(&e, &Tar::default().busybox().file(bad, "pwned").done(), &name);
        e.refused(&r, &name, "a `..` component");
        e.tmp_holds_only(&[]);
    }
}

#[test]
fn slip_absolute_path() {
    let mut e = World::new();
    let canary = Canary::new();
    let name = e.name();
    let r = import_tarball(&e, &Tar::default().busybox().file(&format!("{}/escape", canary.path()), "pwned").done(), &name);
    e.refused(&r, &name, "an absolute path");
    canary.untouched();
    e.tmp_holds_only(&[]);
}

#[test]
fn slip_through_symlink_parent() {
    let mut e = World::new();
    let canary = Canary::new();
    let name = e.name();
    let r = import_tarball(&e, &Tar::default().busybox().symlink("link", &canary.path()).file("link/pwned", "pwned").done(), &name);
    e.refused(&r, &name, "its parent `link` is a symbolic link");
    canary.untouched();
    e.tmp_holds_only(&[]);
}

#[test]
fn slip_through_dotdot_symlink_chain() {
    let mut e = World::new();
    let canary = Canary::new();
    let name = e.name();
    let inside = format!("up/{}/pwned", canary.path().trim_start_matches('/'));
    let tar = Tar::default().busybox().symlink("up", "../../../../../../../..").symlink("up2", "up/..").file(&inside, "pwned").done();
    let r = import_tarball(&e, &tar, &name);
    e.refused(&r, &name, "its parent `up` is a symbolic link");
    let r = import_tarball(&e, &Tar::default().busybox().symlink("up", "..").dir("up/escaped/", 0o755).done(), &name);
    e.refused(&r, &name, "its parent `up` is a symbolic link");
    canary.untouched();
    e.tmp_holds_only(&[]);
}

#[test]
fn slip_hardlink_to_absolute_path() {
    let mut e = World::new();
    let before = std::fs::metadata("/etc/passwd").unwrap();
    let content = std::fs::read("/etc/passwd").unwrap();
    let name = e.name();
    let r = import_tarball(&e, &Tar::default().busybox().hardlink("h", "/etc/passwd").file("h", "root::0:0::/:/bin/sh\n").done(), &name);
    e.refused(&r, &name, "a hard link to an absolute path");
    let after = std::fs::metadata("/etc/passwd").unwrap();
    assert_eq!((after.ino(), after.nlink()), (before.ino(), before.nlink()));
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), content);
    e.tmp_holds_only(&[]);
}

#[test]
fn slip_hardlink_out_by_dotdot() {
    let mut e = World::new();
    // The staging directory is TMPDIR/pinfold-image-…/root: `../../x` is TMPDIR/x.
    let x = e.tmp().join("x");
    std::fs::write(&x, "host file").unwrap();
    let name = e.name();
    let r = import_tarball(&e, &Tar::default().busybox().hardlink("h", "../../x").file("h", "overwritten").done(), &name);
    e.refused(&r, &name, "a hard link to a `..` component");
    assert_eq!(std::fs::read_to_string(&x).unwrap(), "host file");
    assert_eq!(std::fs::metadata(&x).unwrap().nlink(), 1);
    e.tmp_holds_only(&["x"]);
}

#[test]
fn slip_across_layers() {
    let mut e = World::new();
    let canary = Canary::new();
    let layout = tempfile::tempdir().unwrap();
    let layer1 = Tar::default().busybox().symlink("d", &canary.path()).done();
    let layer2 = Tar::default().file("d/file", "pwned").done();
    let digests = oci_layout(layout.path(), &[(layer1, true), (layer2, false)], serde_json::json!({}), Tamper::None);
    let name = e.name();
    let r = e.pinfold(&["image", "import", &layout.path().display().to_string(), "--name", &name], None);
    e.refused(&r, &name, &format!("layer 1 ({}): refused entry `d/file`: its parent `d` is a symbolic link", digests[1]));
    canary.untouched();
    e.tmp_holds_only(&[]);
}

#[test]
fn device_nodes_skipped_and_setuid_stripped() {
    let mut e = World::new();
    let tar = Tar::default()
        .busybox()
        .dir("work/", 0o755)
        .entry("work/nulldev", b'3', 0o666, "", b"")
        .entry("work/disk", b'4', 0o660, "", b"")
        .entry("work/suid", b'0', 0o4755, "", b"#!/bin/sh\n")
        .entry("work/sgid", b'0', 0o2711, "", b"#!/bin/sh\n")
        .done();
    let name = e.name();
    let r = import_file(&e, &tar, &name, &["--json"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((report["skipped_devices"].as_u64(), report["stripped_setuid"].as_u64()), (Some(2), Some(2)), "{}", r.show());
    let run = e.run_in(&name, "ls /work; stat -c '%n %a' /work/suid /work/sgid");
    assert_eq!(run.stdout, "sgid\nsuid\n/work/suid 755\n/work/sgid 711\n", "{}", run.show());
    e.tmp_holds_only(&[]);
}

#[test]
fn zstd_layer_is_refused_clearly() {
    let mut e = World::new();
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[(Tar::default().busybox().done(), false)], serde_json::json!({}), Tamper::None);
    // Rewrite the one layer's media type as zstd, keeping every digest right.
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.path().join("index.json")).unwrap()).unwrap();
    let mdigest = index["manifests"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    let text = std::fs::read_to_string(layout.path().join("blobs/sha256").join(&mdigest)).unwrap();
    let text = text.replace("application/vnd.oci.image.layer.v1.tar\"", "application/vnd.oci.image.layer.v1.tar+zstd\"");
    let h = sha256(text.as_bytes());
    std::fs::write(layout.path().join("blobs/sha256").join(&h), &text).unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{h}"), "size": text.len()}]});
    std::fs::write(layout.path().join("index.json"), index.to_string()).unwrap();
    let name = e.name();
    let r = e.pinfold(&["image", "import", &layout.path().display().to_string(), "--name", &name], None);
    e.refused(&r, &name, "zstd-compressed layers are not supported");
}

/// An import killed part-way (SIGKILL: no destructor runs) leaves its work directory; the
/// next import removes it, and leaves alone a work directory of a live pinfold and one of
/// another pid namespace. (Found: staging directories piled up in TMPDIR.)
#[test]
fn a_killed_imports_work_directory_is_removed_by_the_next() {
    let mut e = World::new();
    let mut c = Command::new(BIN);
    c.args(["image", "import", "-", "--name", &e.name()]).env("DOCKER_HOST", &e.engine.host).env("TMPDIR", e.tmp());
    c.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn pinfold");
    // A tar whose one file is longer than what is sent: pinfold waits for the rest.
    let mut head = Tar::default().file("big", &"x".repeat(1 << 20)).done();
    head.truncate(4096);
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), &head).expect("write");
    let tmp = e.tmp();
    let listing = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&tmp).unwrap().map(|d| d.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while listing().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no work directory appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let dead = child.id();
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let left = listing();
    assert_eq!(left.len(), 1, "the control: a killed import leaves its work directory: {left:?}");
    assert!(left[0].starts_with("pinfold-image-"), "{left:?}");
    // A live pinfold's (this test's pid) and another namespace's (the killed pid, namespace 1).
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let live = format!("pinfold-image-{ns}-{}-00000000", std::process::id());
    let other = format!("pinfold-image-1-{dead}-00000000");
    for d in [&live, &other] {
        std::fs::create_dir(e.tmp().join(d)).unwrap();
        std::fs::write(e.tmp().join(d).join("keep"), "").unwrap();
    }
    let name = e.name();
    let r = import_tarball(&e, &Tar::default().busybox().done(), &name);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let mut want = vec![live.clone(), other.clone()];
    want.sort();
    assert_eq!(listing(), want, "the dead import's directory must go, the others stay");
    assert!(e.tmp().join(&live).join("keep").exists() && e.tmp().join(&other).join("keep").exists());
}
