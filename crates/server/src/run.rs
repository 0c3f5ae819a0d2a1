//! One governed run: `pinfold exec` as a child process, its output read into capped buffers (or
//! streamed), a deadline, and a kill that reaches the sandbox.
//!
//! The run is a child process because the sandbox's supervisor owns its process: it blocks
//! signals to forward them, and re-executes pinfold as a single-threaded helper. In a child it
//! is exactly the `pinfold exec` a person runs, with the same plan, sandbox, undo and ledger
//! records; the server adds its own records around it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    pub exe: PathBuf,
    pub workspace: PathBuf,
    pub preset: Option<String>,
    /// `pinfold exec --backend`, when the sandbox names one.
    pub backend: Option<String>,
    /// `pinfold exec --keep-container`: the sandbox's container, kept between its runs when
    /// they are on the container backend (ignored on the others).
    pub keep: Option<String>,
    pub text: String,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Most bytes kept of each of stdout and stderr.
    pub cap: usize,
    /// A hook token for exactly this text, preset and workspace: a person approved the ask.
    pub approved: Option<String>,
    /// The ledger session of the run's own records.
    pub session: String,
    /// The policy cache `pinfold exec` uses (the sandbox's own).
    pub cache: Option<PathBuf>,
}

/// A piece of output as it comes, for streaming.
#[derive(Debug)]
pub enum Chunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Output {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    pub duration_ms: u64,
    pub timed_out: bool,
    /// The cap on each stream, in bytes.
    pub output_limit: usize,
}

/// Start `spec`; its pid (a process-group leader) goes to `started` so that a delete can kill
/// it; `chunks` gets output as it comes.
pub async fn run(spec: Spec, started: impl FnOnce(u32), chunks: Option<mpsc::Sender<Chunk>>) -> std::io::Result<Output> {
    let mut cmd = tokio::process::Command::new(&spec.exe);
    cmd.arg("exec").arg("--cwd").arg(&spec.workspace);
    if let Some(p) = &spec.preset {
        cmd.arg("--sandbox").arg(p);
    }
    if let Some(b) = &spec.backend {
        cmd.arg("--backend").arg(b);
    }
    if let Some(k) = &spec.keep {
        cmd.arg("--keep-container").arg(k);
    }
    cmd.arg("--").arg(&spec.text);
    cmd.env_remove(pinfold_plan::token::ENV).env_remove("PINFOLD_TOKEN").env(pinfold_plan::record::SESSION_ENV, &spec.session);
    if let Some(c) = &spec.cache {
        cmd.env("PINFOLD_CACHE_DIR", c);
    }
    if let Some(t) = &spec.approved {
        cmd.env(pinfold_plan::token::ENV, t);
    }
    cmd.stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    die_with_server(&mut cmd);
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0);
    started(pid);
    if let (Some(bytes), Some(mut w)) = (spec.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = w.write_all(&bytes).await;
        });
    }
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let cap = spec.cap;
    let c1 = chunks.clone();
    let read_out = tokio::spawn(read_capped(out, cap, move |b| c1.as_ref().map(|c| c.try_send(Chunk::Stdout(b.to_vec())).is_ok())));
    let c2 = chunks;
    let read_err = tokio::spawn(read_capped(err, cap, move |b| c2.as_ref().map(|c| c.try_send(Chunk::Stderr(b.to_vec())).is_ok())));
    let (status, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(s) => (s?, false),
        Err(_) => {
            // The deadline: SIGTERM to `pinfold exec`, which passes it to the command and
            // records the end; SIGKILL to the group if it is still there after a grace period
            // (the sandbox dies with its supervisor).
            kill_group(pid, libc::SIGTERM);
            let s = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(s) => s?,
                Err(_) => {
                    kill_group(pid, libc::SIGKILL);
                    child.wait().await?
                }
            };
            (s, true)
        }
    };
    let (stdout, t1) = read_out.await.unwrap_or_default();
    let (stderr, t2) = read_err.await.unwrap_or_default();
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok(Output {
        exit_code,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        truncated: t1 || t2,
        duration_ms: t0.elapsed().as_millis() as u64,
        timed_out,
        output_limit: cap,
    })
}

/// A run does not outlive the server: `pinfold exec` gets SIGKILL when the server dies (its
/// sandbox dies with it, by the sandbox's own parent-death signal), so no command goes on past
/// its deadline unwatched. The signal follows the thread that spawned the child; runs are
/// spawned from the runtime's worker threads, which live as long as the server.
#[allow(unsafe_code)]
fn die_with_server(cmd: &mut tokio::process::Command) {
    // SAFETY: between fork and exec only prctl(2), which is async-signal-safe, runs.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Read `r` to its end, keeping the first `cap` bytes; whether any were dropped. `each` sees
/// every piece read.
async fn read_capped(mut r: impl tokio::io::AsyncRead + Unpin, cap: usize, each: impl Fn(&[u8]) -> Option<bool>) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                let keep = n.min(room);
                kept.extend_from_slice(&buf[..keep]);
                if keep > 0 {
                    each(&buf[..keep]);
                }
            }
        }
    }
    (kept, truncated)
}

/// Signal the process group `pid` leads.
#[allow(unsafe_code)]
pub fn kill_group(pid: u32, sig: i32) {
    if pid > 1 {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
        unsafe {
            libc::kill(-(pid as i32), sig);
        }
    }
}
