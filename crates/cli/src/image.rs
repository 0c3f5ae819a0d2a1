//! `pinfold image import` and `pinfold image build`: images for the container backend, made
//! without a registry (pinfold-sandbox's `container::image` does the work; this prints it).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use pinfold_plan::{Error, Kind};
use pinfold_sandbox::container::image::{self, BuildOptions, ImageError, ImportOptions, ImportReport, Limits, Source};

use crate::exit;

#[derive(Debug, Args)]
pub(crate) struct ImageArgs {
    #[command(subcommand)]
    command: ImageCommand,
}

#[derive(Debug, Subcommand)]
enum ImageCommand {
    /// Import an OCI image layout directory or a rootfs tarball as image NAME[:TAG].
    ///
    /// Every blob of a layout is checked against its sha256 digest and size, and each
    /// uncompressed layer against the config's diff ID, before the image is made. The layers
    /// are unpacked into a private staging directory: entries with absolute paths or `..`,
    /// writes through symbolic links, and hard links out of the image are refused; device
    /// nodes and FIFOs are skipped; setuid and setgid bits are stripped. The result is
    /// imported through the engine (DOCKER_HOST, or Docker's or Podman's usual socket) as one
    /// flattened layer, tagged NAME[:TAG], and checked.
    #[command(after_help = "Exit status: 0 imported, 2 refused, or the engine could not be used (nothing imported).

Examples:
  skopeo copy docker://docker.io/library/alpine:3 oci:alpine-oci:3
  pinfold image import alpine-oci --name localhost/alpine:3
  pinfold image import rootfs.tar.gz --name localhost/tools:1
  tar -C rootfs -c . | pinfold image import - --name localhost/tools:1")]
    Import(ImportArgs),
    /// Make a small image of busybox from the host's busybox-static package, no registry.
    ///
    /// /bin/busybox (from /usr/bin/busybox, which must be statically linked) with a link in
    /// /bin for each applet, /etc/passwd and /etc/group with root and nobody (65534), and
    /// empty /tmp, /proc, /dev, /sys, /work and /root. Imported as `pinfold image import`
    /// imports a tarball.
    #[command(after_help = "Exit status: 0 built, 2 busybox or a --with program is missing or not static, or the engine could not be used.

Examples:
  pinfold image build
  pinfold image build --name localhost/busybox-jq:1 --with /usr/local/bin/jq-static")]
    Build(BuildArgs),
}

#[derive(Debug, Args)]
struct ImportArgs {
    /// An OCI image layout directory, a .tar or .tar.gz rootfs tarball, or `-` for a tarball
    /// on standard input.
    #[arg(value_name = "SOURCE")]
    source: PathBuf,
    /// The name to give the image: NAME[:TAG] (the tag is `latest` when not given).
    #[arg(long, value_name = "NAME[:TAG]")]
    name: String,
    /// For a layout with several manifests: the one for OS/ARCH[/VARIANT] (default: the one
    /// for this machine, if there is exactly one).
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// Refuse an image that unpacks to more than this many bytes (suffixes K, M, G, T: powers
    /// of 1024).
    #[arg(long, value_name = "BYTES", default_value = "8G", value_parser = parse_size)]
    max_bytes: u64,
    /// Refuse an image of more than this many archive entries, over all layers.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_entries)]
    max_entries: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// The name to give the image: NAME[:TAG].
    #[arg(long, value_name = "NAME[:TAG]", default_value = image::DEFAULT_BUILD_NAME)]
    name: String,
    /// Also copy this statically linked host program into /bin (repeatable; a name without a
    /// slash is looked up in PATH).
    #[arg(long = "with", value_name = "PROGRAM")]
    with: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `8G`, `512M`, `1024`: bytes, with binary suffixes.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 30),
        Some(b'T' | b't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a size (a number, with K, M, G or T)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too big"))
}

pub(crate) fn run(args: ImageArgs) -> Result<i32, Error> {
    let (report, json) = match args.command {
        ImageCommand::Import(a) => {
            let opts = ImportOptions {
                source: Source::from_arg(&a.source),
                name: a.name,
                platform: a.platform,
                limits: Limits { max_bytes: a.max_bytes, max_entries: a.max_entries },
            };
            (image::import(&opts).map_err(image_err)?, a.json)
        }
        ImageCommand::Build(a) => (image::build(&BuildOptions { name: a.name, with: a.with }).map_err(image_err)?, a.json),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("the report serialises"));
    } else {
        print_report(&report);
    }
    Ok(exit::OK)
}

fn image_err(e: ImageError) -> Error {
    let hint = e.hint();
    let kind = if matches!(e, ImageError::Name { .. }) { Kind::Input } else { Kind::Setup };
    let mut out = Error::new(format!("image: {e}")).kind(kind);
    if let Some(h) = hint {
        out = out.hint(h);
    }
    out
}

fn print_report(r: &ImportReport) {
    println!("{} {}", r.name, r.id);
    let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    println!("  source: {}; engine: {}", r.source, r.engine);
    if let Some(m) = &r.manifest {
        println!("  manifest {m}");
    }
    for l in &r.layers {
        println!("  layer {} verified ({} bytes, diff ID {})", l.digest, l.size, l.diff_id);
    }
    let mut notes = vec![count(r.entries, "entry", "entries"), format!("{} bytes unpacked", r.bytes)];
    if r.skipped_devices > 0 {
        notes.push(format!("{} skipped", count(r.skipped_devices, "device node", "device nodes")));
    }
    if r.skipped_fifos > 0 {
        notes.push(format!("{} skipped", count(r.skipped_fifos, "FIFO", "FIFOs")));
    }
    if r.stripped_setuid > 0 {
        notes.push(format!("setuid/setgid stripped from {}", count(r.stripped_setuid, "entry", "entries")));
    }
    println!("  {}", notes.join("; "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
