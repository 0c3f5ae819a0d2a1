//! Images from local sources (an OCI image layout, a rootfs tarball), verified, unpacked where
//! nothing can escape, and imported through the engine: `pinfold image import` ([`import`])
//! and `pinfold image build` ([`build`]).
//!
//! An import runs straight through:
//! 1. The name is checked and the engine asked whether it answers, before any unpacking.
//! 2. A private work directory is made (mode 0700, under `TMPDIR`); its `root/` is the
//!    staging directory, and it is removed when the import ends, however it ends.
//! 3. The source is read. An OCI layout: `index.json`, then the manifest (the one there is,
//!    the one `--platform` names, or the one for this machine's platform), its config and its
//!    layers. Every blob is checked against its descriptor, size and sha256, before it is
//!    used; a layer is copied into the work directory while it is hashed, so the bytes
//!    checked are the bytes unpacked. Each layer's uncompressed stream is hashed as it is
//!    unpacked and checked against the config's `rootfs.diff_ids`, in order. A tarball
//!    (plain or gzip, or `-` for standard input) is one layer with nothing to check it by.
//! 4. The layers are unpacked into the staging directory in order, OCI whiteouts applied
//!    (`.wh.NAME` removes NAME of the layers below, `.wh..wh..opq` empties its directory of
//!    them).
//! 5. The staging directory is written as one fresh tar, with the owners, modes and times the
//!    archive recorded (the staging files themselves are the importing user's, 0600/0700).
//! 6. That tar goes to the engine (`POST /images/create?fromSrc=-`, no name given), with the
//!    config's `Env`, `Cmd`, `Entrypoint`, `WorkingDir` and `User` as Dockerfile changes.
//!    The image is then tagged NAME:TAG, and the engine asked what NAME:TAG resolves to: it
//!    must be the imported ID.
//!
//! # What unpacking refuses, and what it changes
//! - An entry with an absolute path or a `..` component is refused.
//! - Nothing is written through a symbolic link: each path is walked one component at a time
//!   from a directory descriptor, opening each with `O_NOFOLLOW`, and new entries are created
//!   exclusively (`O_EXCL`) after what stood there is removed. An entry whose parent path is a
//!   symbolic link, made by the same layer or one below, is refused, not followed.
//! - A hard link must name, by a relative path without `..`, a regular file already unpacked;
//!   a link to a symbolic link, a directory or anything outside is refused.
//! - Symbolic links are kept as the archive has them: their targets are data, never followed
//!   while unpacking.
//! - Device nodes and FIFOs are skipped, and counted in the report.
//! - setuid and setgid bits are stripped, and counted. Extended attributes (file
//!   capabilities among them) are not carried.
//! - The unpacked size and the number of entries are limited ([`Limits`]); going over is an
//!   error.
//!
//! Any refusal ends the import with nothing given to the engine.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bollard::query_parameters::{CreateImageOptionsBuilder, RemoveImageOptions, TagImageOptions};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::engine::{self, Engine};
use crate::{SandboxError, sys};

/// The name `pinfold image build` gives its image when none is asked for.
pub const DEFAULT_BUILD_NAME: &str = "localhost/pinfold-busybox:1";

/// Where `pinfold image build` takes busybox from (Debian's `busybox-static`).
pub const BUSYBOX: &str = "/usr/bin/busybox";

/// The largest manifest, config or index read (bytes): they are JSON documents of a few KiB.
const MAX_DOCUMENT: u64 = 16 << 20;

/// How long the import request may take (seconds): the engine reads the whole tar first.
const IMPORT_TIMEOUT: u64 = 3600;

/// How much an import may unpack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of file content written into the staging directory, over all layers.
    pub max_bytes: u64,
    /// Archive entries read, over all layers.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_bytes: 8 << 30, max_entries: 1_000_000 }
    }
}

/// What to import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory with `oci-layout`, `index.json` and `blobs/`.
    OciLayout(PathBuf),
    /// A rootfs tarball, plain or gzip-compressed (found by its first bytes, not its name).
    Tarball(PathBuf),
    /// A rootfs tarball on standard input.
    Stdin,
}

impl Source {
    /// `-` is standard input, a directory an OCI layout, anything else a tarball.
    pub fn from_arg(arg: &Path) -> Source {
        if arg.as_os_str() == "-" {
            Source::Stdin
        } else if arg.is_dir() {
            Source::OciLayout(arg.to_path_buf())
        } else {
            Source::Tarball(arg.to_path_buf())
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::OciLayout(d) => format!("OCI layout {}", d.display()),
            Source::Tarball(f) => format!("tarball {}", f.display()),
            Source::Stdin => "tarball on standard input".to_string(),
        }
    }
}

/// `pinfold image import`.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub source: Source,
    /// NAME[:TAG]; the tag is `latest` when not given.
    pub name: String,
    /// For an OCI layout with several manifests: `os/arch[/variant]`.
    pub platform: Option<String>,
    pub limits: Limits,
}

/// `pinfold image build`.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// NAME[:TAG]; [`DEFAULT_BUILD_NAME`] is the CLI's default.
    pub name: String,
    /// Further statically linked host programs, copied into `/bin` under their own names.
    pub with: Vec<PathBuf>,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    /// NAME:TAG, as tagged and verified.
    pub name: String,
    /// The image ID (`sha256:…`) NAME:TAG resolves to.
    pub id: String,
    /// The engine, as it names itself.
    pub engine: String,
    /// What was imported (`OCI layout DIR`, `tarball FILE`, `/usr/bin/busybox and its applets`).
    pub source: String,
    /// The OCI layout's manifest digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// The OCI layout's layers, each checked against its digest, size and diff ID.
    pub layers: Vec<LayerReport>,
    /// Archive entries read, over all layers.
    pub entries: u64,
    /// Bytes of file content unpacked, over all layers.
    pub bytes: u64,
    /// Size of the flattened tar given to the engine.
    pub tar_bytes: u64,
    /// Device nodes in the archive, not created.
    pub skipped_devices: u64,
    /// FIFOs in the archive, not created.
    pub skipped_fifos: u64,
    /// Entries whose setuid or setgid bit was stripped.
    pub stripped_setuid: u64,
    /// The Dockerfile changes the image was imported with (`ENV K=V`, `CMD [...]`).
    pub changes: Vec<String>,
}

/// One verified layer of an OCI layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerReport {
    pub digest: String,
    pub media_type: String,
    pub size: u64,
    /// The sha256 of the uncompressed layer, as checked against `rootfs.diff_ids`.
    pub diff_id: String,
}

/// Why an import or a build failed. Nothing was given to the engine unless the variant says
/// so ([`ImageError::Engine`], [`ImageError::Verify`]).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The engine could not be reached, or refused the import or the tag.
    #[error(transparent)]
    Engine(#[from] SandboxError),
    #[error("`{name}` is not an image name pinfold takes: {why}")]
    Name { name: String, why: String },
    /// A file of the source or of the work directory could not be used.
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The OCI layout is not one pinfold can read (missing file, bad JSON, ambiguity).
    #[error("the OCI layout {}: {why}", dir.display())]
    Layout { dir: PathBuf, why: String, hint: Option<String> },
    #[error("blob {digest} does not match its digest: its content hashes to sha256:{actual}")]
    Digest { digest: String, actual: String },
    #[error("blob {digest} is {actual} bytes, its descriptor says {expected}")]
    Size { digest: String, expected: u64, actual: String },
    #[error("layer {index} ({digest}) uncompressed hashes to {actual}, but the config's rootfs.diff_ids[{index}] is {expected}")]
    DiffId { index: usize, digest: String, expected: String, actual: String },
    #[error("layer {digest} has media type {media_type}: {why}")]
    MediaType { digest: String, media_type: String, why: String },
    /// An archive entry pinfold will not unpack (a path out of the staging directory, a write
    /// through a link, an unknown entry type).
    #[error("{source_name}: refused entry `{entry}`: {why}")]
    Unsafe { source_name: String, entry: String, why: String },
    #[error("{source_name}: {why}")]
    Limit { source_name: String, why: String },
    /// Reading the archive, or writing an entry into the staging directory, failed.
    #[error("{source_name}: {what}: {source}")]
    Archive {
        source_name: String,
        what: String,
        #[source]
        source: io::Error,
    },
    /// The image config holds something the engine's Dockerfile changes cannot carry as is.
    #[error("the image config's {field} cannot be carried to the engine: {why}")]
    Config { field: String, why: String },
    /// A host program for `pinfold image build` is missing or not statically linked.
    #[error("{}: {why}", path.display())]
    Program { path: PathBuf, why: String, hint: String },
    /// The engine took the image but NAME:TAG does not resolve to it.
    #[error("the engine resolves {name} to {got}, not to the imported image {id}")]
    Verify { name: String, id: String, got: String },
}

impl ImageError {
    /// What to do about it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            ImageError::Engine(e) => e.hint().map(str::to_string),
            ImageError::Name { .. } => Some("name it as NAME[:TAG], say `localhost/my-image:1` (lower case; no digest)".into()),
            ImageError::Layout { hint, .. } => hint.clone(),
            ImageError::Digest { .. } | ImageError::Size { .. } | ImageError::DiffId { .. } => {
                Some("the layout was changed or damaged after it was written: export the image again".into())
            }
            ImageError::MediaType { .. } => Some("export the image with gzip or uncompressed layers (skopeo copy --dest-compress-format gzip)".into()),
            ImageError::Unsafe { .. } => Some("pinfold unpacks only archives whose every entry stays in the image; fix the archive that made this entry".into()),
            ImageError::Limit { .. } => Some("raise the limit (--max-bytes, --max-entries) if the image is really this big".into()),
            ImageError::Config { .. } => Some("set it again inside the image (a wrapper script), or in the preset's environment".into()),
            ImageError::Program { hint, .. } => Some(hint.clone()),
            ImageError::Verify { .. } => Some("another import or tag of the same name ran at the same time; run the import again".into()),
            ImageError::Io { .. } | ImageError::Archive { .. } => None,
        }
    }
}

fn io_err(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> ImageError {
    let path = path.into();
    move |source| ImageError::Io { what, path, source }
}

// ---------------------------------------------------------------------------------------------
// The two commands
// ---------------------------------------------------------------------------------------------

/// `pinfold image import`: see the module's documentation for the steps.
pub fn import(opts: &ImportOptions) -> Result<ImportReport, ImageError> {
    let name = ImageName::parse(&opts.name)?;
    let (engine, about) = connect()?;
    let work = WorkDir::new()?;
    let mut up = Unpacker::new(work.staging()?, opts.limits);
    let mut report = ImportReport { source: opts.source.describe(), engine: about.name, ..Default::default() };
    report.changes = match &opts.source {
        Source::OciLayout(dir) => unpack_oci(dir, opts.platform.as_deref(), &work, &mut up, &mut report)?,
        Source::Tarball(path) => {
            let f = File::open(path).map_err(io_err("cannot open the tarball", path))?;
            up.layer(tar_stream(f, &report.source)?, &report.source)?;
            Vec::new()
        }
        Source::Stdin => {
            up.layer(tar_stream(io::stdin().lock(), &report.source)?, &report.source)?;
            Vec::new()
        }
    };
    finish(&engine, &work, up, &name, report)
}

/// `pinfold image build`: a rootfs of busybox (statically linked, from the host's
/// `busybox-static`), a link in `/bin` for each of its applets, `/etc/passwd` and
/// `/etc/group` with root and nobody (65534), empty `/tmp`, `/proc`, `/dev`, `/sys`, `/work`
/// and `/root`; and the `--with` programs. Written as a tarball, then imported as one.
pub fn build(opts: &BuildOptions) -> Result<ImportReport, ImageError> {
    let name = ImageName::parse(&opts.name)?;
    let busybox = Path::new(BUSYBOX);
    static_program(busybox, "apt install busybox-static")?;
    let mut programs = Vec::new();
    for p in &opts.with {
        let path = if p.as_os_str().as_bytes().contains(&b'/') {
            p.clone()
        } else {
            sys::find_program(&p.to_string_lossy(), std::env::var_os("PATH").as_deref()).ok_or_else(|| ImageError::Program {
                path: p.clone(),
                why: "not found in PATH".into(),
                hint: "name the program by its path".into(),
            })?
        };
        static_program(&path, "give only statically linked programs: a dynamically linked one needs the host's libraries, which the image does not have")?;
        let Some(file_name) = path.file_name().map(OsStr::to_os_string) else {
            return Err(ImageError::Program { path, why: "has no file name".into(), hint: "name a file".into() });
        };
        programs.push((path, file_name));
    }
    let applets = busybox_applets(busybox)?;
    let (engine, about) = connect()?;
    let work = WorkDir::new()?;
    let tar_name = OsStr::new("build.tar");
    let mut tar = sys::openat(&work.dir, tar_name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600).map_err(io_err("cannot create", work.path.join(tar_name)))?;
    write_build_tar(&mut tar, busybox, &applets, &programs).map_err(io_err("cannot write", work.path.join(tar_name)))?;
    tar.rewind().map_err(io_err("cannot read", work.path.join(tar_name)))?;
    let source = format!("{BUSYBOX} and its applets (pinfold image build)");
    let mut up = Unpacker::new(work.staging()?, Limits::default());
    up.layer(BufReader::new(tar), &source)?;
    let _ = sys::unlinkat(&work.dir, tar_name, 0);
    let report = ImportReport {
        source,
        engine: about.name,
        changes: vec!["ENV PATH=/bin".to_string(), r#"CMD ["/bin/sh"]"#.to_string()],
        ..Default::default()
    };
    finish(&engine, &work, up, &name, report)
}

fn connect() -> Result<(Engine, engine::Ping), ImageError> {
    let engine = Engine::connect()?;
    let about = engine::ping(&engine.socket)?;
    Ok((engine, about))
}

/// Steps 5 and 6: flatten the staging directory, import it, tag it, check the tag.
fn finish(engine: &Engine, work: &WorkDir, up: Unpacker, name: &ImageName, mut report: ImportReport) -> Result<ImportReport, ImageError> {
    let flat_name = OsStr::new("flat.tar");
    let flat_path = work.path.join(flat_name);
    let mut flat = sys::openat(&work.dir, flat_name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600).map_err(io_err("cannot create", &flat_path))?;
    up.flatten(&mut io::BufWriter::new(&mut flat)).map_err(io_err("cannot write the flattened image", &flat_path))?;
    report.tar_bytes = flat.seek(io::SeekFrom::End(0)).map_err(io_err("cannot read", &flat_path))?;
    flat.rewind().map_err(io_err("cannot read", &flat_path))?;
    report.entries = up.entries;
    report.bytes = up.bytes;
    report.skipped_devices = up.skipped_devices;
    report.skipped_fifos = up.skipped_fifos;
    report.stripped_setuid = up.stripped_setuid;
    drop(up);
    let id = engine_import(engine, flat, &report.changes)?;
    if let Err(e) = tag_and_verify(engine, &id, name) {
        // Nothing half-done stays behind: the untagged image goes (if nothing else uses it).
        let hex = id.trim_start_matches("sha256:");
        let _ = engine.rt.block_on(engine.docker.remove_image(hex, None::<RemoveImageOptions>, None));
        return Err(e);
    }
    report.name = name.to_string();
    report.id = id;
    Ok(report)
}

/// `POST /images/create?fromSrc=-` with the tar as the body and no name: Podman 4.3 ignores
/// `tag` on import and names the image `repo:latest`, which would move a `latest` tag the
/// user did not ask to touch; the image is tagged afterwards instead ([`tag_and_verify`]).
///
/// bollard joins `changes` with newlines into one parameter, which Docker parses as a
/// Dockerfile but Podman takes as a single instruction; each change goes as a parameter of
/// its own instead (both engines take that), added by a request modifier.
fn engine_import(engine: &Engine, tar: File, changes: &[String]) -> Result<String, ImageError> {
    let query: String = changes.iter().map(|c| format!("&changes={}", percent_encode(c))).collect();
    let docker = engine.docker.clone().with_timeout(std::time::Duration::from_secs(IMPORT_TIMEOUT)).with_request_modifier(move |mut req| {
        if req.uri().path().ends_with("/images/create") {
            let uri = format!("{}{}", req.uri(), query);
            if let Ok(uri) = uri.parse() {
                *req.uri_mut() = uri;
            }
            if let Ok(v) = "application/x-tar".parse() {
                req.headers_mut().insert("content-type", v);
            }
        }
        req
    });
    let body = bollard::body_try_stream(futures_util::stream::unfold(Some(tar), |f| async move {
        let mut f = f?;
        let mut buf = vec![0u8; 1 << 20];
        match f.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf.into()), Some(f)))
            }
            Err(e) => Some((Err(e), None)),
        }
    }));
    let options = CreateImageOptionsBuilder::new().from_src("-").build();
    let refused = |e: &dyn std::fmt::Display| engine::err(format!("the engine refused the import: {e}"), "see the engine's log");
    let id = engine.rt.block_on(async {
        let mut stream = docker.create_image(Some(options), Some(body), None);
        let mut id = None;
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| refused(&e))?;
            for s in [info.id, info.status].into_iter().flatten() {
                if is_sha256_digest(&s) {
                    id = Some(s);
                }
            }
        }
        id.ok_or_else(|| refused(&"it answered without an image ID"))
    })?;
    Ok(id)
}

/// Give the image exactly NAME:TAG, then ask the engine what NAME:TAG is: it must be `id`.
fn tag_and_verify(engine: &Engine, id: &str, name: &ImageName) -> Result<(), ImageError> {
    let hex = id.trim_start_matches("sha256:");
    let options = TagImageOptions { repo: Some(name.repo.clone()), tag: Some(name.tag.clone()) };
    engine
        .rt
        .block_on(engine.docker.tag_image(hex, Some(options)))
        .map_err(|e| engine::err(format!("the engine refused to tag the imported image {id} as {name}: {e}"), "see the engine's log"))?;
    let got = engine
        .rt
        .block_on(engine.docker.inspect_image(&name.to_string()))
        .map_err(|e| engine::err(format!("the engine does not find {name} right after tagging it: {e}"), "see the engine's log"))?
        .id
        .unwrap_or_default();
    if got != id {
        return Err(ImageError::Verify { name: name.to_string(), id: id.to_string(), got });
    }
    Ok(())
}

/// Every byte but the unreserved ones as `%XX`, for a query parameter's value.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

/// NAME[:TAG], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ImageName {
    repo: String,
    tag: String,
}

impl std::fmt::Display for ImageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.repo, self.tag)
    }
}

impl ImageName {
    fn parse(s: &str) -> Result<ImageName, ImageError> {
        let bad = |why: &str| ImageError::Name { name: s.to_string(), why: why.to_string() };
        if s.contains('@') {
            return Err(bad("a digest names content, not a tag to give it"));
        }
        // The tag follows the last `:` after the last `/` (a `:` before it is a registry's port).
        let (repo, tag) = match s.rfind(':') {
            Some(i) if !s[i + 1..].contains('/') => (&s[..i], &s[i + 1..]),
            _ => (s, "latest"),
        };
        let tag_ok = !tag.is_empty()
            && tag.len() <= 128
            && !tag.starts_with(['.', '-'])
            && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !tag_ok {
            return Err(bad("the tag must be 1 to 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`"));
        }
        let mut parts = repo.split('/');
        let first = parts.next().unwrap_or_default();
        let first_ok = !first.is_empty() && first.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-:".contains(&b));
        let rest_ok = parts.all(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)) && !p.starts_with(['.', '_', '-'])
        });
        if !first_ok || !rest_ok || repo.len() > 255 {
            return Err(bad("each `/`-separated part must be lower-case letters, digits, `.`, `_` and `-`"));
        }
        Ok(ImageName { repo: repo.to_string(), tag: tag.to_string() })
    }
}

// ---------------------------------------------------------------------------------------------
// The work directory
// ---------------------------------------------------------------------------------------------

/// A fresh directory of this process's own (0700, under `TMPDIR`), removed on drop; everything
/// in it is reached through its descriptor.
struct WorkDir {
    path: PathBuf,
    dir: File,
}

impl std::fmt::Debug for WorkDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkDir").field("path", &self.path).finish()
    }
}

impl WorkDir {
    fn new() -> Result<WorkDir, ImageError> {
        let base = std::env::temp_dir();
        let parent = File::open(&base).map_err(io_err("cannot open the temporary directory", &base))?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let ns = pid_namespace();
        sweep_work_dirs(&parent, &ns);
        for n in 0..100u32 {
            let name = OsString::from(format!("pinfold-image-{ns}-{}-{:08x}", std::process::id(), nanos.wrapping_add(n)));
            let path = base.join(&name);
            // mkdir makes a new directory or fails: a name someone else made is never used.
            match sys::mkdirat(&parent, &name, 0o700) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("cannot create the work directory", path)(e)),
            }
            let dir = sys::openat(&parent, &name, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(io_err("cannot open the work directory", &path))?;
            return Ok(WorkDir { path, dir });
        }
        Err(ImageError::Io { what: "cannot create a work directory in", path: base, source: io::Error::from(io::ErrorKind::AlreadyExists) })
    }

    /// The staging directory, `root/`, made fresh.
    fn staging(&self) -> Result<File, ImageError> {
        let name = OsStr::new("root");
        sys::mkdirat(&self.dir, name, 0o700).map_err(io_err("cannot create the staging directory", self.path.join(name)))?;
        sys::openat(&self.dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(io_err("cannot open the staging directory", self.path.join(name)))
    }
}

/// This process's pid namespace, as its inode number (`0` where `/proc` cannot say).
fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid").map(|m| std::os::unix::fs::MetadataExt::ino(&m)).unwrap_or(0)
}

/// Remove the work directories of imports killed before they could (SIGKILL, or a signal
/// pinfold does not catch): named `pinfold-image-NS-PID-…` for this pid namespace `ns`,
/// directories of this user, whose pid no longer exists. A directory of a live import, of
/// another pid namespace or of another user is left alone.
fn sweep_work_dirs(parent: &File, ns: &u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(at(parent, OsStr::new("."))) else { return };
    let prefix = format!("pinfold-image-{ns}-");
    let uid = sys::ids().0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        // Exactly PID-XXXXXXXX, as `new` names them.
        let Some((pid, suffix)) = rest.split_once('-') else { continue };
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) || suffix.len() != 8 || !suffix.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Some(pid) = pid.parse::<libc::pid_t>().ok().filter(|p| *p > 0) else { continue };
        // lstat: a link of that name is no work directory.
        let Ok(meta) = std::fs::symlink_metadata(at(parent, &name)) else { continue };
        if !meta.is_dir() || meta.uid() != uid || ns == &0 {
            continue;
        }
        if sys::kill(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
            let _ = std::fs::remove_dir_all(at(parent, &name));
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        // std's remove_dir_all does not follow symbolic links inside the tree.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The path of `name` in the directory open as `dir`, through `/proc/self/fd`: the kernel
/// resolves the descriptor to that very directory (not a path that may have changed since),
/// and the last component is `name` itself, which the calls used with it do not follow
/// (symlink, link, readlink, read_dir, remove_dir_all).
fn at(dir: &File, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    if !name.is_empty() {
        p.push(name);
    }
    p
}

// ---------------------------------------------------------------------------------------------
// OCI image layouts
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Debug, Clone, Deserialize)]
struct Platform {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    variant: Option<String>,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Debug, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    os: String,
    #[serde(default)]
    config: Option<RunConfig>,
    rootfs: RootFs,
}

#[derive(Debug, Default, Deserialize)]
struct RunConfig {
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
    #[serde(rename = "Cmd", default)]
    cmd: Option<Vec<String>>,
    #[serde(rename = "Entrypoint", default)]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", default)]
    working_dir: Option<String>,
    #[serde(rename = "User", default)]
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

const INDEX_TYPES: [&str; 2] = ["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"];
const MANIFEST_TYPES: [&str; 2] = ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];

/// How a layer is compressed, by its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
}

fn layer_compression(d: &Descriptor) -> Result<Compression, ImageError> {
    let unsupported = |why: &str| ImageError::MediaType { digest: d.digest.clone(), media_type: d.media_type.clone(), why: why.to_string() };
    match d.media_type.as_str() {
        "application/vnd.oci.image.layer.v1.tar" => Ok(Compression::None),
        "application/vnd.oci.image.layer.v1.tar+gzip" | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Ok(Compression::Gzip),
        t if t.ends_with("+zstd") || t.ends_with(".zstd") => Err(unsupported("zstd-compressed layers are not supported")),
        t if t.contains("nondistributable") || t.contains("foreign") => Err(unsupported("layers stored elsewhere (non-distributable) are not supported")),
        _ => Err(unsupported("not a layer type pinfold knows")),
    }
}

/// This machine's platform as OCI names it (`linux/amd64`).
fn host_platform() -> (String, String) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        a => a,
    };
    ("linux".to_string(), arch.to_string())
}

/// Step 3 and 4 for an OCI layout: pick the manifest, verify every blob, unpack the layers
/// in order, each checked against its diff ID. Returns the config as Dockerfile changes.
fn unpack_oci(dir: &Path, platform: Option<&str>, work: &WorkDir, up: &mut Unpacker, report: &mut ImportReport) -> Result<Vec<String>, ImageError> {
    let layout_err = |why: String, hint: Option<&str>| ImageError::Layout { dir: dir.to_path_buf(), why, hint: hint.map(str::to_string) };
    let layout_file = dir.join("oci-layout");
    let text = read_limited(&layout_file, MAX_DOCUMENT).map_err(|e| layout_err(format!("cannot read oci-layout: {e}"), Some("a directory to import must be an OCI image layout (skopeo copy ... oci:DIR)")))?;
    let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| layout_err(format!("oci-layout is not JSON: {e}"), None))?;
    if v["imageLayoutVersion"].as_str().is_none() {
        return Err(layout_err("oci-layout has no imageLayoutVersion".into(), None));
    }
    let index_bytes = read_limited(&dir.join("index.json"), MAX_DOCUMENT).map_err(|e| layout_err(format!("cannot read index.json: {e}"), None))?;
    let index: Index = serde_json::from_slice(&index_bytes).map_err(|e| layout_err(format!("index.json: {e}"), None))?;

    // Every manifest the index names, nested indexes followed (each verified as a blob).
    let mut manifests = Vec::new();
    let mut pending: Vec<(Descriptor, usize)> = index.manifests.into_iter().map(|d| (d, 0)).collect();
    while let Some((d, depth)) = pending.pop() {
        if INDEX_TYPES.contains(&d.media_type.as_str()) {
            if depth >= 4 {
                return Err(layout_err("indexes nested more than 4 deep".into(), None));
            }
            let nested: Index = serde_json::from_slice(&read_blob(dir, &d)?).map_err(|e| layout_err(format!("index {}: {e}", d.digest), None))?;
            pending.extend(nested.manifests.into_iter().map(|n| (n, depth + 1)));
        } else if MANIFEST_TYPES.contains(&d.media_type.as_str()) {
            // Attestations and signatures ride along as manifests of platform unknown/unknown.
            if d.platform.as_ref().is_none_or(|p| p.os != "unknown") {
                manifests.push(d);
            }
        }
    }
    let describe = |m: &[Descriptor]| m.iter().map(|d| format!("{} ({})", d.digest, d.platform.as_ref().map_or("no platform".to_string(), ToString::to_string))).collect::<Vec<_>>().join(", ");
    let chosen = if let Some(want) = platform {
        let mut parts = want.split('/');
        let (os, arch, variant) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next());
        let fits: Vec<&Descriptor> = manifests
            .iter()
            .filter(|d| d.platform.as_ref().is_some_and(|p| p.os == os && p.architecture == arch && variant.is_none_or(|v| p.variant.as_deref() == Some(v))))
            .collect();
        match fits.as_slice() {
            [one] => (*one).clone(),
            [] => return Err(layout_err(format!("no manifest for {want}; it has {}", describe(&manifests)), None)),
            _ => return Err(layout_err(format!("several manifests for {want}: {}", describe(&manifests)), Some("name the variant too (--platform linux/arm64/v8)"))),
        }
    } else if manifests.len() == 1 {
        manifests.remove(0)
    } else if manifests.is_empty() {
        return Err(layout_err("index.json names no image manifest".into(), None));
    } else {
        let (os, arch) = host_platform();
        let fits: Vec<&Descriptor> = manifests.iter().filter(|d| d.platform.as_ref().is_some_and(|p| p.os == os && p.architecture == arch)).collect();
        match fits.as_slice() {
            [one] => (*one).clone(),
            _ => {
                return Err(layout_err(
                    format!("it holds several manifests and not exactly one for this machine ({os}/{arch}): {}", describe(&manifests)),
                    Some("choose one with --platform OS/ARCH"),
                ));
            }
        }
    };
    report.manifest = Some(chosen.digest.clone());
    let manifest: Manifest = serde_json::from_slice(&read_blob(dir, &chosen)?).map_err(|e| layout_err(format!("manifest {}: {e}", chosen.digest), None))?;
    let config: ConfigFile = serde_json::from_slice(&read_blob(dir, &manifest.config)?).map_err(|e| layout_err(format!("config {}: {e}", manifest.config.digest), None))?;
    if !config.os.is_empty() && config.os != "linux" {
        return Err(layout_err(format!("the image is for {}, not linux", config.os), None));
    }
    if config.rootfs.diff_ids.len() != manifest.layers.len() {
        return Err(layout_err(
            format!("the manifest lists {} layers but the config's rootfs.diff_ids {}", manifest.layers.len(), config.rootfs.diff_ids.len()),
            None,
        ));
    }
    // The config's changes are worked out first: an image pinfold cannot carry is refused
    // before anything is unpacked.
    let changes = config_changes(config.config.as_ref().unwrap_or(&RunConfig::default()))?;
    for (index, (layer, diff_id)) in manifest.layers.iter().zip(&config.rootfs.diff_ids).enumerate() {
        let compression = layer_compression(layer)?;
        let what = format!("layer {index} ({})", layer.digest);
        // A private copy, hashed while it is made: the bytes checked are the bytes unpacked.
        let copy_name = OsStr::new("layer");
        let copy_path = work.path.join(copy_name);
        let mut copy = sys::openat(&work.dir, copy_name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600).map_err(io_err("cannot create", &copy_path))?;
        let blob = blob_path(dir, &layer.digest)?;
        let src = open_blob(&blob, layer).map_err(io_err("cannot open the layer blob", &blob))?;
        if layer.size > up.limits.max_bytes {
            return Err(ImageError::Layout { dir: dir.to_path_buf(), why: format!("{} claims {} bytes, over --max-bytes", layer.digest, layer.size), hint: Some("raise --max-bytes if the image is meant to be that large".into()) });
        }
        let (n, hash) = copy_hashed(src.take(layer.size.saturating_add(1)), &mut copy).map_err(io_err("cannot copy the layer blob", &blob))?;
        check_blob(layer, n, &hash)?;
        copy.rewind().map_err(io_err("cannot read", &copy_path))?;
        let mut hashed = HashingReader { inner: decompress(BufReader::new(copy), compression), hasher: Sha256::new() };
        up.layer(&mut hashed, &what)?;
        // What the tar reader left after the end of the archive counts too.
        io::copy(&mut (&mut hashed).take(up.limits.max_bytes), &mut io::sink()).map_err(|e| ImageError::Archive { source_name: what.clone(), what: "reading past the archive's end".into(), source: e })?;
        let actual = format!("sha256:{}", hex(&hashed.hasher.finalize()));
        if actual != *diff_id {
            return Err(ImageError::DiffId { index, digest: layer.digest.clone(), expected: diff_id.clone(), actual });
        }
        let _ = sys::unlinkat(&work.dir, copy_name, 0);
        report.layers.push(LayerReport { digest: layer.digest.clone(), media_type: layer.media_type.clone(), size: layer.size, diff_id: actual });
    }
    Ok(changes)
}

/// `blobs/sha256/HEX` for a digest, which must be `sha256:` and 64 lower-case hex digits
/// (so it cannot name any other path).
fn blob_path(dir: &Path, digest: &str) -> Result<PathBuf, ImageError> {
    if !is_sha256_digest(digest) {
        return Err(ImageError::Layout {
            dir: dir.to_path_buf(),
            why: format!("`{digest}` is not a sha256 digest (sha256: and 64 lower-case hex digits)"),
            hint: Some("pinfold verifies sha256 digests only".into()),
        });
    }
    Ok(dir.join("blobs/sha256").join(&digest["sha256:".len()..]))
}

/// A small blob (index, manifest, config), read whole and checked.
fn read_blob(dir: &Path, d: &Descriptor) -> Result<Vec<u8>, ImageError> {
    let path = blob_path(dir, &d.digest)?;
    if d.size > MAX_DOCUMENT {
        return Err(ImageError::Layout { dir: dir.to_path_buf(), why: format!("{} claims {} bytes; a manifest or config is at most {MAX_DOCUMENT}", d.digest, d.size), hint: None });
    }
    let mut bytes = Vec::new();
    open_blob(&path, d).and_then(|f| f.take(d.size.saturating_add(1)).read_to_end(&mut bytes)).map_err(io_err("cannot read the blob", &path))?;
    check_blob(d, bytes.len() as u64, &hex(&Sha256::digest(&bytes)))?;
    Ok(bytes)
}

fn check_blob(d: &Descriptor, n: u64, hash: &str) -> Result<(), ImageError> {
    if n != d.size {
        let actual = if n > d.size { format!("more than {}", d.size) } else { n.to_string() };
        return Err(ImageError::Size { digest: d.digest.clone(), expected: d.size, actual });
    }
    if d.digest["sha256:".len()..] != *hash {
        return Err(ImageError::Digest { digest: d.digest.clone(), actual: hash.to_string() });
    }
    Ok(())
}

/// A blob, opened only if it is a regular file (not a link to `/dev/zero`, not a FIFO that
/// would never end): copied, it could fill the disk or hang before its digest is checked. (Its
/// size is checked as it is copied, at most one byte past what `d` says.)
fn open_blob(path: &Path, d: &Descriptor) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a regular file"));
    }
    let _ = d;
    Ok(f)
}

fn read_limited(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a regular file"));
    }
    let mut out = Vec::new();
    f.take(limit).read_to_end(&mut out)?;
    Ok(out)
}

fn copy_hashed(mut r: impl Read, w: &mut impl Write) -> io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..k]);
        w.write_all(&buf[..k])?;
        n += k as u64;
    }
    Ok((n, hex(&hasher.finalize())))
}

struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

fn decompress<'a, R: BufRead + 'a>(r: R, c: Compression) -> Box<dyn Read + 'a> {
    match c {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
    }
}

/// A tarball as a tar stream: gzip when it starts as gzip does; zstd refused.
fn tar_stream<'a, R: Read + 'a>(r: R, what: &str) -> Result<Box<dyn Read + 'a>, ImageError> {
    let mut r = BufReader::new(r);
    let head = r.fill_buf().map_err(|e| ImageError::Archive { source_name: what.to_string(), what: "reading".into(), source: e })?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(decompress(r, Compression::Gzip))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Err(ImageError::Archive {
            source_name: what.to_string(),
            what: "zstd-compressed tarballs are not supported".into(),
            source: io::Error::from(io::ErrorKind::Unsupported),
        })
    } else {
        Ok(decompress(r, Compression::None))
    }
}

/// The image config as the Dockerfile changes the engine's import takes. Values are written
/// so that Docker and Podman read them alike; what they would read differently (quotes,
/// backslashes, `$`, which Docker expands, line breaks) is refused rather than changed.
fn config_changes(c: &RunConfig) -> Result<Vec<String>, ImageError> {
    let bad = |field: &str, why: &str| ImageError::Config { field: field.to_string(), why: why.to_string() };
    let plain = |v: &str| !v.contains(['"', '\\', '$', '\n', '\r', '\'']);
    let mut out = Vec::new();
    for kv in c.env.iter().flatten() {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let key_ok = k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !key_ok {
            return Err(bad(&format!("Env {k}"), "not a variable name of letters, digits and `_`"));
        }
        if !plain(v) {
            return Err(bad(&format!("Env {k}"), "its value holds a quote, backslash, `$` or line break"));
        }
        if v.is_empty() || v.contains([' ', '\t']) {
            out.push(format!("ENV {k}=\"{v}\""));
        } else {
            out.push(format!("ENV {k}={v}"));
        }
    }
    for (field, word, argv) in [("Entrypoint", "ENTRYPOINT", &c.entrypoint), ("Cmd", "CMD", &c.cmd)] {
        if let Some(argv) = argv.as_ref().filter(|a| !a.is_empty()) {
            if argv.iter().any(|a| a.contains(['\n', '\r'])) {
                return Err(bad(field, "an argument holds a line break"));
            }
            out.push(format!("{word} {}", serde_json::to_string(argv).expect("strings serialise")));
        }
    }
    if let Some(w) = c.working_dir.as_deref().filter(|w| !w.is_empty()) {
        if !plain(w) {
            return Err(bad("WorkingDir", "it holds a quote, backslash, `$` or line break"));
        }
        out.push(format!("WORKDIR {w}"));
    }
    if let Some(u) = c.user.as_deref().filter(|u| !u.is_empty()) {
        if !plain(u) || u.contains([' ', '\t']) {
            return Err(bad("User", "it holds a space, quote, backslash, `$` or line break"));
        }
        out.push(format!("USER {u}"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Unpacking
// ---------------------------------------------------------------------------------------------

/// Owner, mode (setuid and setgid already stripped) and time of one path, as the archive gave
/// them: applied in the flattened tar, not on the staging files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
}

/// A parent directory the archive did not list.
const IMPLIED_DIR: Meta = Meta { mode: 0o755, uid: 0, gid: 0, mtime: 0 };

/// Layers applied one after another to a staging directory, reached only through its
/// descriptor.
struct Unpacker {
    root: File,
    limits: Limits,
    meta: BTreeMap<PathBuf, Meta>,
    /// Paths the current layer made (and their parents): its whiteouts leave them alone.
    this_layer: HashSet<PathBuf>,
    entries: u64,
    bytes: u64,
    skipped_devices: u64,
    skipped_fifos: u64,
    stripped_setuid: u64,
}

impl std::fmt::Debug for Unpacker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unpacker").field("entries", &self.entries).field("bytes", &self.bytes).finish()
    }
}

/// What opening an entry's parent directory found.
enum Parent {
    Dir(File),
    /// A component does not exist (and was not to be made).
    Missing,
}

/// The components of an entry's path: `.` and empty ones dropped; absolute paths and `..`
/// refused.
fn clean_path(raw: &[u8]) -> Result<Vec<OsString>, &'static str> {
    if raw.starts_with(b"/") {
        return Err("an absolute path");
    }
    let mut out = Vec::new();
    for part in raw.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err("a `..` component"),
            p => out.push(OsStr::from_bytes(p).to_os_string()),
        }
    }
    Ok(out)
}

impl Unpacker {
    fn new(root: File, limits: Limits) -> Unpacker {
        Unpacker {
            root,
            limits,
            meta: BTreeMap::new(),
            this_layer: HashSet::new(),
            entries: 0,
            bytes: 0,
            skipped_devices: 0,
            skipped_fifos: 0,
            stripped_setuid: 0,
        }
    }

    /// Apply one layer (a tar stream) on top of what is there.
    fn layer(&mut self, reader: impl Read, what: &str) -> Result<(), ImageError> {
        self.this_layer.clear();
        let mut archive = tar::Archive::new(reader);
        let read_err = |e: io::Error| ImageError::Archive { source_name: what.to_string(), what: "reading the archive".into(), source: e };
        for entry in archive.entries().map_err(read_err)? {
            let mut entry = entry.map_err(read_err)?;
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Err(ImageError::Limit { source_name: what.to_string(), why: format!("more than {} entries", self.limits.max_entries) });
            }
            let raw = entry.path_bytes().into_owned();
            let shown = String::from_utf8_lossy(&raw).into_owned();
            self.entry(&mut entry, &raw).map_err(|e| match e {
                EntryError::Refused(why) => ImageError::Unsafe { source_name: what.to_string(), entry: shown.clone(), why },
                EntryError::Limit(why) => ImageError::Limit { source_name: what.to_string(), why },
                EntryError::Io(doing, source) => ImageError::Archive { source_name: what.to_string(), what: format!("{doing} `{shown}`"), source },
            })?;
        }
        Ok(())
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>, raw: &[u8]) -> Result<(), EntryError> {
        use tar::EntryType as T;
        let kind = entry.header().entry_type();
        if matches!(kind, T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink) {
            return Ok(());
        }
        let comps = clean_path(raw).map_err(|why| EntryError::Refused(format!("{why} leads out of the image")))?;
        let Some((name, parents)) = comps.split_last() else {
            // The root itself (`./`): nothing to make.
            return if kind == T::Directory { Ok(()) } else { Err(EntryError::Refused("it names the image's root as a file".into())) };
        };
        let rel: PathBuf = comps.iter().collect();
        let name_bytes = name.as_bytes();

        // Whiteouts: they remove what the layers below made, and are not made themselves.
        if let Some(target) = name_bytes.strip_prefix(b".wh.") {
            let Parent::Dir(dir) = self.open_parent(parents, false)? else { return Ok(()) };
            let parent_rel: PathBuf = parents.iter().collect();
            if target == b".wh..opq" {
                let children = std::fs::read_dir(at(&dir, OsStr::new(""))).map_err(|e| EntryError::Io("listing the directory of", e))?;
                for child in children {
                    let child = child.map_err(|e| EntryError::Io("listing the directory of", e))?.file_name();
                    if !self.this_layer.contains(&parent_rel.join(&child)) {
                        self.remove(&dir, &child, &parent_rel.join(&child))?;
                    }
                }
            } else if target.starts_with(b".wh.") {
                // Other AUFS metadata (`.wh..wh.plnk`): nothing of the image.
            } else {
                let target = OsStr::from_bytes(target);
                if target.is_empty() || target == "." || target == ".." {
                    return Err(EntryError::Refused("a whiteout of no name".into()));
                }
                let target_rel = parent_rel.join(target);
                if !self.this_layer.contains(&target_rel) {
                    self.remove(&dir, target, &target_rel)?;
                }
            }
            return Ok(());
        }

        let header = entry.header();
        let mut mode = header.mode().map_err(|e| EntryError::Io("reading the mode of", e))? & 0o7777;
        if mode & 0o6000 != 0 && matches!(kind, T::Regular | T::Continuous | T::GNUSparse | T::Directory) {
            self.stripped_setuid += 1;
            mode &= !0o6000;
        }
        let meta = Meta {
            mode,
            uid: header.uid().unwrap_or(0),
            gid: header.gid().unwrap_or(0),
            mtime: header.mtime().unwrap_or(0),
        };
        match kind {
            T::Char | T::Block => {
                self.skipped_devices += 1;
                return Ok(());
            }
            T::Fifo => {
                self.skipped_fifos += 1;
                return Ok(());
            }
            T::Directory | T::Regular | T::Continuous | T::GNUSparse | T::Symlink | T::Link => {}
            other => return Err(EntryError::Refused(format!("an entry of type {other:?}, which pinfold does not unpack"))),
        }
        let Parent::Dir(dir) = self.open_parent(parents, true)? else {
            return Err(EntryError::Refused("its parent directory could not be made".into()));
        };
        self.mark_this_layer(&rel);
        match kind {
            T::Directory => {
                match sys::statat(&dir, name) {
                    Ok((_, _, m, _)) if m & libc::S_IFMT == libc::S_IFDIR => {}
                    Ok(_) => {
                        self.remove(&dir, name, &rel)?;
                        sys::mkdirat(&dir, name, 0o700).map_err(|e| EntryError::Io("creating", e))?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => sys::mkdirat(&dir, name, 0o700).map_err(|e| EntryError::Io("creating", e))?,
                    Err(e) => return Err(EntryError::Io("looking at", e)),
                }
                self.meta.insert(rel, meta);
            }
            T::Symlink => {
                let target = entry.link_name_bytes().ok_or_else(|| EntryError::Refused("a symbolic link with no target".into()))?.into_owned();
                if target.is_empty() {
                    return Err(EntryError::Refused("a symbolic link with an empty target".into()));
                }
                self.remove(&dir, name, &rel)?;
                // symlink(2) makes the link itself and follows nothing; its target is data.
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), at(&dir, name)).map_err(|e| EntryError::Io("creating", e))?;
                self.meta.insert(rel, Meta { mode: 0o777, ..meta });
            }
            T::Link => {
                let target = entry.link_name_bytes().ok_or_else(|| EntryError::Refused("a hard link with no target".into()))?.into_owned();
                let tcomps = clean_path(&target).map_err(|why| EntryError::Refused(format!("a hard link to {why} (`{}`), out of the image", String::from_utf8_lossy(&target))))?;
                let Some((tname, tparents)) = tcomps.split_last() else {
                    return Err(EntryError::Refused("a hard link to the image's root".into()));
                };
                let trel: PathBuf = tcomps.iter().collect();
                if trel == rel {
                    return Ok(());
                }
                let Parent::Dir(tdir) = self.open_parent(tparents, false)? else {
                    return Err(EntryError::Refused(format!("a hard link to `{}`, which is not in the image", trel.display())));
                };
                match sys::statat(&tdir, tname) {
                    Ok((_, _, m, _)) if m & libc::S_IFMT == libc::S_IFREG => {}
                    Ok((_, _, m, _)) if m & libc::S_IFMT == libc::S_IFLNK => {
                        return Err(EntryError::Refused(format!("a hard link to `{}`, a symbolic link", trel.display())));
                    }
                    Ok(_) => return Err(EntryError::Refused(format!("a hard link to `{}`, which is not a regular file", trel.display()))),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(EntryError::Refused(format!("a hard link to `{}`, which is not in the image", trel.display())));
                    }
                    Err(e) => return Err(EntryError::Io("looking at the link target of", e)),
                }
                self.remove(&dir, name, &rel)?;
                // linkat(2) without AT_SYMLINK_FOLLOW, from a checked regular file of the
                // staging directory to a new name in it.
                std::fs::hard_link(at(&tdir, tname), at(&dir, name)).map_err(|e| EntryError::Io("linking", e))?;
                let shared = self.meta.get(&trel).copied().unwrap_or(meta);
                self.meta.insert(rel, shared);
            }
            _ => {
                // A regular file: made new (O_EXCL, O_NOFOLLOW) after whatever stood there goes.
                self.remove(&dir, name, &rel)?;
                let mut f = sys::openat(&dir, name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600).map_err(|e| EntryError::Io("creating", e))?;
                let room = self.limits.max_bytes.saturating_sub(self.bytes);
                let n = io::copy(&mut entry.take(room.saturating_add(1)), &mut f).map_err(|e| EntryError::Io("writing", e))?;
                if n > room {
                    return Err(EntryError::Limit(format!("more than {} bytes unpacked", self.limits.max_bytes)));
                }
                self.bytes += n;
                self.meta.insert(rel, meta);
            }
        }
        Ok(())
    }

    fn mark_this_layer(&mut self, rel: &Path) {
        for a in rel.ancestors().filter(|a| !a.as_os_str().is_empty()) {
            if !self.this_layer.insert(a.to_path_buf()) {
                break;
            }
        }
    }

    /// Open the directory `parents` names, one component at a time from the root, never
    /// following a link; missing directories are made when `create`.
    fn open_parent(&mut self, parents: &[OsString], create: bool) -> Result<Parent, EntryError> {
        let mut dir = self.root.try_clone().map_err(|e| EntryError::Io("opening the staging directory for", e))?;
        let mut rel = PathBuf::new();
        for c in parents {
            rel.push(c);
            match sys::openat(&dir, c, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
                Ok(d) => dir = d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !create {
                        return Ok(Parent::Missing);
                    }
                    sys::mkdirat(&dir, c, 0o700).map_err(|e| EntryError::Io("creating a parent directory of", e))?;
                    self.meta.entry(rel.clone()).or_insert(IMPLIED_DIR);
                    dir = sys::openat(&dir, c, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(|e| EntryError::Io("opening a parent directory of", e))?;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    let is_link = sys::statat(&dir, c).is_ok_and(|(_, _, m, _)| m & libc::S_IFMT == libc::S_IFLNK);
                    return Err(EntryError::Refused(if is_link {
                        format!("its parent `{}` is a symbolic link, which pinfold does not write through", rel.display())
                    } else {
                        format!("its parent `{}` is not a directory", rel.display())
                    }));
                }
                Err(e) => return Err(EntryError::Io("opening a parent directory of", e)),
            }
        }
        Ok(Parent::Dir(dir))
    }

    /// Remove `name` from `dir` (a directory with all it holds), and what is recorded of it.
    fn remove(&mut self, dir: &File, name: &OsStr, rel: &Path) -> Result<(), EntryError> {
        match sys::statat(dir, name) {
            Ok((_, _, m, _)) if m & libc::S_IFMT == libc::S_IFDIR => {
                std::fs::remove_dir_all(at(dir, name)).map_err(|e| EntryError::Io("removing what stood at", e))?;
            }
            Ok(_) => sys::unlinkat(dir, name, 0).map_err(|e| EntryError::Io("removing what stood at", e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(EntryError::Io("looking at", e)),
        }
        let below: Vec<PathBuf> = self.meta.range(rel.to_path_buf()..).map(|(k, _)| k).take_while(|k| k.starts_with(rel)).cloned().collect();
        for k in below {
            self.meta.remove(&k);
        }
        Ok(())
    }

    /// Step 5: the staging directory as one tar, sorted, with the recorded owners and modes;
    /// files sharing an inode as hard links to the first.
    fn flatten(&self, out: &mut impl Write) -> io::Result<()> {
        let mut b = tar::Builder::new(out);
        let mut seen = HashMap::new();
        let root = self.root.try_clone()?;
        self.flatten_dir(&mut b, &root, Path::new(""), &mut seen)?;
        b.into_inner()?.flush()
    }

    fn flatten_dir<W: Write>(&self, b: &mut tar::Builder<W>, dir: &File, rel: &Path, seen: &mut HashMap<(u64, u64), PathBuf>) -> io::Result<()> {
        let mut names: Vec<OsString> = std::fs::read_dir(at(dir, OsStr::new("")))?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let path = rel.join(&name);
            let (dev, ino, mode, size) = sys::statat(dir, &name)?;
            let kind = mode & libc::S_IFMT;
            let m = self.meta.get(&path).copied().unwrap_or(Meta { mode: if kind == libc::S_IFDIR { 0o755 } else { 0o644 }, ..IMPLIED_DIR });
            let mut h = tar::Header::new_gnu();
            h.set_mode(m.mode);
            h.set_uid(m.uid);
            h.set_gid(m.gid);
            h.set_mtime(m.mtime);
            h.set_size(0);
            match kind {
                libc::S_IFDIR => {
                    h.set_entry_type(tar::EntryType::Directory);
                    b.append_data(&mut h, &path, io::empty())?;
                    let sub = sys::openat(dir, &name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                    self.flatten_dir(b, &sub, &path, seen)?;
                }
                libc::S_IFREG => {
                    if let Some(first) = seen.get(&(dev, ino)) {
                        h.set_entry_type(tar::EntryType::Link);
                        b.append_link(&mut h, &path, first)?;
                    } else {
                        seen.insert((dev, ino), path.clone());
                        let f = sys::openat(dir, &name, libc::O_RDONLY, 0)?;
                        h.set_entry_type(tar::EntryType::Regular);
                        h.set_size(size);
                        b.append_data(&mut h, &path, f.take(size))?;
                    }
                }
                libc::S_IFLNK => {
                    let target = std::fs::read_link(at(dir, &name))?;
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    b.append_link(&mut h, &path, target)?;
                }
                // Nothing else is ever made in the staging directory.
                _ => {}
            }
        }
        Ok(())
    }
}

/// Why one entry failed, before it is given the archive's name.
#[derive(Debug)]
enum EntryError {
    Refused(String),
    Limit(String),
    Io(&'static str, io::Error),
}

// ---------------------------------------------------------------------------------------------
// `pinfold image build`
// ---------------------------------------------------------------------------------------------

/// Whether the ELF file `path` asks for a program interpreter (`PT_INTERP`): a dynamically
/// linked program does, a statically linked one (static-pie included) does not.
fn elf_has_interpreter(path: &Path) -> Result<bool, String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let mut h = [0u8; 64];
    f.read_exact(&mut h).map_err(|_| "too short to be an ELF program".to_string())?;
    if &h[..4] != b"\x7fELF" {
        return Err("not an ELF program".into());
    }
    let le = match h[5] {
        1 => true,
        2 => false,
        _ => return Err("an ELF file of unknown byte order".into()),
    };
    let u16_at = |o: usize| if le { u16::from_le_bytes([h[o], h[o + 1]]) } else { u16::from_be_bytes([h[o], h[o + 1]]) };
    let (phoff, phentsize, phnum) = match h[4] {
        1 => {
            let b = [h[0x1c], h[0x1d], h[0x1e], h[0x1f]];
            (u64::from(if le { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }), u16_at(0x2a), u16_at(0x2c))
        }
        2 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[0x20..0x28]);
            (if le { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) }, u16_at(0x36), u16_at(0x38))
        }
        _ => return Err("an ELF file of unknown class".into()),
    };
    if phentsize < 4 {
        return Err("an ELF file with broken program headers".into());
    }
    let mut ph = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    f.seek(io::SeekFrom::Start(phoff)).map_err(|e| e.to_string())?;
    f.read_exact(&mut ph).map_err(|_| "an ELF file with truncated program headers".to_string())?;
    Ok(ph.chunks(usize::from(phentsize)).any(|p| {
        let t = [p[0], p[1], p[2], p[3]];
        (if le { u32::from_le_bytes(t) } else { u32::from_be_bytes(t) }) == 3 // PT_INTERP
    }))
}

/// `path` must be a statically linked ELF program.
fn static_program(path: &Path, hint: &str) -> Result<(), ImageError> {
    let program = |why: String| ImageError::Program { path: path.to_path_buf(), why, hint: hint.to_string() };
    let meta = std::fs::metadata(path).map_err(|e| program(format!("cannot be used: {e}")))?;
    if !meta.is_file() {
        return Err(program("is not a regular file".into()));
    }
    match elf_has_interpreter(path) {
        Ok(false) => Ok(()),
        Ok(true) => Err(program("is dynamically linked (it names a program interpreter): it would not run in an image without the host's libraries".into())),
        Err(why) => Err(program(why)),
    }
}

/// The applets `busybox --list` names.
fn busybox_applets(busybox: &Path) -> Result<Vec<String>, ImageError> {
    let out = std::process::Command::new(busybox).arg("--list").stdin(std::process::Stdio::null()).output().map_err(|e| ImageError::Program {
        path: busybox.to_path_buf(),
        why: format!("cannot run `busybox --list`: {e}"),
        hint: "apt install busybox-static".into(),
    })?;
    if !out.status.success() {
        return Err(ImageError::Program { path: busybox.to_path_buf(), why: format!("`busybox --list` failed ({})", out.status), hint: "apt install busybox-static".into() });
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "." && *a != ".." && *a != "busybox" && !a.contains('/'))
        .map(str::to_string)
        .collect())
}

/// The rootfs of `pinfold image build` as a tar.
fn write_build_tar(out: &mut File, busybox: &Path, applets: &[String], programs: &[(PathBuf, OsString)]) -> io::Result<()> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut b = tar::Builder::new(io::BufWriter::new(out));
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(now);
        h.set_size(size);
        h
    };
    for (dir, mode) in [("bin", 0o755), ("etc", 0o755), ("tmp", 0o1777), ("proc", 0o555), ("dev", 0o755), ("sys", 0o555), ("work", 0o755), ("root", 0o700)] {
        b.append_data(&mut header(tar::EntryType::Directory, mode, 0), dir, io::empty())?;
    }
    let file = |b: &mut tar::Builder<_>, src: &Path, dst: &Path| -> io::Result<()> {
        let f = File::open(src)?;
        let size = f.metadata()?.len();
        b.append_data(&mut header(tar::EntryType::Regular, 0o755, size), dst, f.take(size))
    };
    file(&mut b, busybox, Path::new("bin/busybox"))?;
    for a in applets {
        b.append_link(&mut header(tar::EntryType::Symlink, 0o777, 0), Path::new("bin").join(a), "busybox")?;
    }
    // After the applets: a program of the same name as an applet replaces its link.
    for (src, name) in programs {
        file(&mut b, src, &Path::new("bin").join(name))?;
    }
    let passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
    let group = "root:x:0:\nnobody:x:65534:\n";
    for (path, text) in [("etc/passwd", passwd), ("etc/group", group)] {
        b.append_data(&mut header(tar::EntryType::Regular, 0o644, text.len() as u64), path, text.as_bytes())?;
    }
    b.into_inner()?.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A tar built entry by entry with raw names: the `tar` crate's builder refuses `..` and
    /// absolute paths, which these tests need.
    #[derive(Default)]
    struct Tar(Vec<u8>);

    impl Tar {
        fn entry(mut self, name: &str, kind: u8, mode: u32, link: &str, data: &[u8]) -> Tar {
            let mut h = [0u8; 512];
            h[..name.len()].copy_from_slice(name.as_bytes());
            let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
                let s = format!("{v:0w$o}\0", w = len - 1);
                h[at..at + len].copy_from_slice(s.as_bytes());
            };
            octal(&mut h, 100, 8, u64::from(mode));
            octal(&mut h, 108, 8, 0);
            octal(&mut h, 116, 8, 0);
            octal(&mut h, 124, 12, data.len() as u64);
            octal(&mut h, 136, 12, 0);
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
            let s = format!("{sum:06o}\0 ");
            h[148..156].copy_from_slice(s.as_bytes());
            self.0.extend_from_slice(&h);
            self.0.extend_from_slice(data);
            self.0.resize(self.0.len().div_ceil(512) * 512, 0);
            self
        }
        fn file(self, name: &str, data: &str) -> Tar {
            self.entry(name, b'0', 0o644, "", data.as_bytes())
        }
        fn dir(self, name: &str) -> Tar {
            self.entry(name, b'5', 0o755, "", b"")
        }
        fn symlink(self, name: &str, target: &str) -> Tar {
            self.entry(name, b'2', 0o777, target, b"")
        }
        fn hardlink(self, name: &str, target: &str) -> Tar {
            self.entry(name, b'1', 0o644, target, b"")
        }
        fn done(mut self) -> Vec<u8> {
            self.0.extend_from_slice(&[0u8; 1024]);
            self.0
        }
    }

    /// A staging directory inside a temp dir (so `../` of it is still the test's), and a
    /// canary directory beside it that nothing may touch.
    struct World {
        tmp: tempfile::TempDir,
        up: Unpacker,
    }

    impl World {
        fn new() -> World {
            World::with_limits(Limits::default())
        }
        fn with_limits(limits: Limits) -> World {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(tmp.path().join("a/b/stage")).unwrap();
            std::fs::create_dir(tmp.path().join("canary")).unwrap();
            std::fs::write(tmp.path().join("canary/x"), "host").unwrap();
            let root = File::open(tmp.path().join("a/b/stage")).unwrap();
            World { tmp, up: Unpacker::new(root, limits) }
        }
        fn stage(&self) -> PathBuf {
            self.tmp.path().join("a/b/stage")
        }
        fn canary(&self) -> PathBuf {
            self.tmp.path().join("canary")
        }
        fn apply(&mut self, tar: Vec<u8>) -> Result<(), ImageError> {
            self.up.layer(&tar[..], "test layer")
        }
        /// Nothing outside the staging directory changed: the canary directory holds only `x`,
        /// still `host`, with one link; nothing new beside `stage` or above it.
        fn host_untouched(&self) {
            let names: Vec<_> = std::fs::read_dir(self.canary()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, vec![OsString::from("x")], "the canary directory changed");
            assert_eq!(std::fs::read_to_string(self.canary().join("x")).unwrap(), "host");
            assert_eq!(std::fs::metadata(self.canary().join("x")).unwrap().nlink(), 1);
            for (dir, want) in [(self.tmp.path().to_path_buf(), vec!["a", "canary"]), (self.tmp.path().join("a"), vec!["b"]), (self.tmp.path().join("a/b"), vec!["stage"])] {
                let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
                names.sort();
                assert_eq!(names, want, "something appeared in {}", dir.display());
            }
        }
    }

    fn refused(r: Result<(), ImageError>, needle: &str) {
        match r {
            Err(e @ ImageError::Unsafe { .. }) => assert!(e.to_string().contains(needle), "{e}"),
            other => panic!("expected a refusal mentioning {needle:?}, got {other:?}"),
        }
    }

    #[test]
    fn unpacks_files_dirs_links_and_flattens_with_recorded_modes() {
        let mut w = World::new();
        let tar = Tar::default()
            .dir("etc/")
            .file("etc/hosts", "127.0.0.1 localhost\n")
            .entry("bin/su", b'0', 0o4755, "", b"ELF")
            .symlink("bin/sh", "busybox")
            .symlink("etc/abs", "/etc/hosts")
            .hardlink("etc/hosts2", "etc/hosts")
            .entry("dev/null", b'3', 0o666, "", b"")
            .entry("dev/sda", b'4', 0o660, "", b"")
            .entry("fifo", b'6', 0o644, "", b"")
            .entry("tmp/", b'5', 0o1777, "", b"")
            .done();
        w.apply(tar).unwrap();
        let s = w.stage();
        assert_eq!(std::fs::read_to_string(s.join("etc/hosts")).unwrap(), "127.0.0.1 localhost\n");
        assert_eq!(std::fs::read_link(s.join("bin/sh")).unwrap(), Path::new("busybox"));
        assert_eq!(std::fs::read_link(s.join("etc/abs")).unwrap(), Path::new("/etc/hosts"));
        assert_eq!(std::fs::metadata(s.join("etc/hosts2")).unwrap().ino(), std::fs::metadata(s.join("etc/hosts")).unwrap().ino());
        assert!(!s.join("dev/null").exists() && !s.join("dev/sda").exists() && !s.join("fifo").exists());
        assert_eq!((w.up.skipped_devices, w.up.skipped_fifos, w.up.stripped_setuid), (2, 1, 1));
        // On disk the staging files are private; the archive's modes live in the record.
        assert_eq!(std::fs::metadata(s.join("bin/su")).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(w.up.meta[Path::new("bin/su")].mode, 0o755, "setuid stripped");
        let mut flat = Vec::new();
        w.up.flatten(&mut flat).unwrap();
        let mut seen = BTreeMap::new();
        for e in tar::Archive::new(&flat[..]).entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            seen.insert(e.path().unwrap().display().to_string(), (h.entry_type(), h.mode().unwrap(), e.link_name().unwrap().map(|l| l.display().to_string())));
        }
        assert_eq!(seen["bin/su"], (tar::EntryType::Regular, 0o755, None));
        assert_eq!(seen["tmp"], (tar::EntryType::Directory, 0o1777, None));
        assert_eq!(seen["bin/sh"].2.as_deref(), Some("busybox"));
        assert_eq!(seen["etc/hosts2"], (tar::EntryType::Link, 0o644, Some("etc/hosts".into())));
        assert!(!seen.contains_key("dev/null"));
        w.host_untouched();
    }

    #[test]
    fn refuses_parent_dir_components() {
        for name in ["../escape", "../../../canary/pwned", "ok/../../escape", "a/./../../x"] {
            let mut w = World::new();
            refused(w.apply(Tar::default().file(name, "pwned").done()), "`..`");
            w.host_untouched();
        }
    }

    #[test]
    fn refuses_absolute_paths() {
        let mut w = World::new();
        let abs = format!("{}/pwned", w.canary().display());
        refused(w.apply(Tar::default().file(&abs, "pwned").done()), "absolute");
        refused(w.apply(Tar::default().dir("/").done()), "absolute");
        w.host_untouched();
    }

    #[test]
    fn never_writes_through_a_symlink_parent() {
        let mut w = World::new();
        let canary = w.canary().display().to_string();
        refused(w.apply(Tar::default().symlink("link", &canary).file("link/pwned", "pwned").done()), "symbolic link");
        w.host_untouched();
        // A directory entry through it, and a deeper one.
        let mut w = World::new();
        refused(w.apply(Tar::default().symlink("link", &canary).dir("link/sub/").done()), "symbolic link");
        refused(w.apply(Tar::default().symlink("l2", &canary).file("l2/sub/deep", "pwned").done()), "symbolic link");
        w.host_untouched();
    }

    #[test]
    fn never_follows_a_dotdot_symlink_chain() {
        let mut w = World::new();
        let tar = Tar::default().symlink("up", "../../..").symlink("up2", "up/..").file("up/canary/pwned", "x").done();
        refused(w.apply(tar), "symbolic link");
        refused(w.apply(Tar::default().file("up2/pwned", "x").done()), "symbolic link");
        w.host_untouched();
    }

    #[test]
    fn a_symlink_is_replaced_never_written_through() {
        // A file entry at the name of a link replaces the link; the target is untouched.
        let mut w = World::new();
        let target = w.canary().join("x").display().to_string();
        w.apply(Tar::default().symlink("f", &target).file("f", "mine").done()).unwrap();
        assert_eq!(std::fs::read_to_string(w.stage().join("f")).unwrap(), "mine");
        assert!(!std::fs::symlink_metadata(w.stage().join("f")).unwrap().file_type().is_symlink());
        // And across layers, a directory over a link.
        w.apply(Tar::default().symlink("d", &w.canary().display().to_string()).done()).unwrap();
        w.apply(Tar::default().dir("d/").file("d/x", "mine").done()).unwrap();
        assert!(std::fs::symlink_metadata(w.stage().join("d")).unwrap().is_dir());
        w.host_untouched();
    }

    #[test]
    fn refuses_hardlinks_out_of_the_image() {
        for target in ["/etc/passwd", "../../canary/x", "../x", "missing", "sub/../../../canary/x"] {
            let mut w = World::new();
            refused(w.apply(Tar::default().hardlink("h", target).file("h", "overwrite").done()), "hard link");
            w.host_untouched();
            assert!(!w.stage().join("h").exists());
        }
        assert_eq!(std::fs::metadata("/etc/passwd").unwrap().nlink(), 1);
    }

    #[test]
    fn refuses_hardlinks_to_symlinks_and_through_them() {
        let mut w = World::new();
        let canary = w.canary().display().to_string();
        refused(w.apply(Tar::default().symlink("s", &format!("{canary}/x")).hardlink("h", "s").done()), "a symbolic link");
        let mut w = World::new();
        refused(w.apply(Tar::default().symlink("d", &canary).hardlink("h", "d/x").done()), "symbolic link");
        w.host_untouched();
    }

    #[test]
    fn cross_layer_symlink_slip_is_refused() {
        let mut w = World::new();
        w.apply(Tar::default().symlink("d", &w.canary().display().to_string()).done()).unwrap();
        refused(w.apply(Tar::default().file("d/file", "pwned").done()), "symbolic link");
        refused(w.apply(Tar::default().file("d/x", "pwned").done()), "symbolic link");
        w.host_untouched();
    }

    #[test]
    fn whiteouts_remove_lower_layers_only() {
        let mut w = World::new();
        w.apply(Tar::default().file("a/gone", "1").file("a/kept", "1").file("o/old", "1").dir("o/sub/").file("o/sub/deep", "1").done()).unwrap();
        w.apply(Tar::default().file("a/.wh.gone", "").file("o/new", "2").file("o/.wh..wh..opq", "").file("b/x", "2").file("b/.wh.x", "").done()).unwrap();
        let s = w.stage();
        assert!(!s.join("a/gone").exists());
        assert!(s.join("a/kept").exists());
        assert!(!s.join("o/old").exists() && !s.join("o/sub").exists(), "opaque whiteout empties the lower layers' entries");
        assert!(s.join("o/new").exists(), "entries of the same layer stay");
        assert!(s.join("b/x").exists(), "a whiteout does not remove its own layer's entry");
        assert!(!s.join("a/.wh.gone").exists() && !s.join("o/.wh..wh..opq").exists());
        assert!(!w.up.meta.contains_key(Path::new("o/sub/deep")));
        // A whiteout through a link is refused like any other entry.
        w.apply(Tar::default().symlink("l", &w.canary().display().to_string()).done()).unwrap();
        refused(w.apply(Tar::default().file("l/.wh.x", "").done()), "symbolic link");
        w.host_untouched();
    }

    #[test]
    fn limits_bytes_and_entries() {
        let mut w = World::with_limits(Limits { max_bytes: 10, max_entries: 100 });
        let e = w.apply(Tar::default().file("a", "12345").file("b", "123456").done()).unwrap_err();
        assert!(matches!(e, ImageError::Limit { .. }) && e.to_string().contains("10 bytes"), "{e}");
        let mut w = World::with_limits(Limits { max_bytes: 1 << 20, max_entries: 3 });
        let e = w.apply(Tar::default().dir("a/").dir("b/").dir("c/").dir("d/").done()).unwrap_err();
        assert!(e.to_string().contains("more than 3 entries"), "{e}");
    }

    #[test]
    fn parses_names() {
        let n = ImageName::parse("localhost/pinfold-busybox:1").unwrap();
        assert_eq!((n.repo.as_str(), n.tag.as_str()), ("localhost/pinfold-busybox", "1"));
        let n = ImageName::parse("localhost:5000/x/y").unwrap();
        assert_eq!((n.repo.as_str(), n.tag.as_str()), ("localhost:5000/x/y", "latest"));
        for bad in ["", "Upper/x", "x:", "x@sha256:00", "x:-t", "a//b", "x:a b"] {
            assert!(ImageName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_changes_are_carried_or_refused() {
        let c = RunConfig {
            env: Some(vec!["PATH=/bin:/usr/bin".into(), "A=two words".into(), "E=".into()]),
            cmd: Some(vec!["sh".into(), "-c".into(), "echo \"hi\"".into()]),
            entrypoint: None,
            working_dir: Some("/work".into()),
            user: Some("65534:65534".into()),
        };
        assert_eq!(
            config_changes(&c).unwrap(),
            ["ENV PATH=/bin:/usr/bin", "ENV A=\"two words\"", "ENV E=\"\"", r#"CMD ["sh","-c","echo \"hi\""]"#, "WORKDIR /work", "USER 65534:65534"]
        );
        for env in ["X=$HOME", "X=a\"b", "X=a\\b", "1X=a", "X=a\nb"] {
            let c = RunConfig { env: Some(vec![env.into()]), ..Default::default() };
            assert!(config_changes(&c).is_err(), "{env}");
        }
        assert_eq!(percent_encode("ENV A=\"b c\""), "ENV%20A%3D%22b%20c%22");
    }

    #[test]
    fn elf_interpreter_check() {
        // Debian's own programs are dynamically linked; pinfold (and so this test binary) is
        // built with crt-static, and busybox-static is static too.
        let dynamic = Path::new("/bin/ls");
        assert_eq!(elf_has_interpreter(dynamic), Ok(true));
        let e = static_program(dynamic, "h").unwrap_err();
        assert!(e.to_string().contains("dynamically linked"), "{e}");
        assert_eq!(elf_has_interpreter(&std::env::current_exe().unwrap()), Ok(false));
        if Path::new(BUSYBOX).exists() {
            assert_eq!(elf_has_interpreter(Path::new(BUSYBOX)), Ok(false));
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("script"), "#!/bin/sh\n").unwrap();
        assert!(elf_has_interpreter(&tmp.path().join("script")).is_err());
    }

    #[test]
    fn oci_blob_checks_name_the_digest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("blobs/sha256")).unwrap();
        let data = b"{}";
        let h = hex(&Sha256::digest(data));
        std::fs::write(tmp.path().join("blobs/sha256").join(&h), data).unwrap();
        let d = |digest: String, size| Descriptor { media_type: String::new(), digest, size, platform: None };
        assert_eq!(read_blob(tmp.path(), &d(format!("sha256:{h}"), 2)).unwrap(), data);
        let e = read_blob(tmp.path(), &d(format!("sha256:{h}"), 3)).unwrap_err();
        assert!(matches!(e, ImageError::Size { .. }) && e.to_string().contains(&h), "{e}");
        std::fs::write(tmp.path().join("blobs/sha256").join(&h), b"{ ").unwrap();
        let e = read_blob(tmp.path(), &d(format!("sha256:{h}"), 2)).unwrap_err();
        assert!(matches!(e, ImageError::Digest { .. }) && e.to_string().contains(&h), "{e}");
        let e = read_blob(tmp.path(), &d("sha256:../../etc/passwd".into(), 2)).unwrap_err();
        assert!(matches!(e, ImageError::Layout { .. }), "{e}");
    }
}
