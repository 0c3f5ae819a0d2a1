//! `pinfold serve`: a governed server. REST, MCP and the dashboard are doors to one choke
//! point ([`govern::govern`]): canonicalise, judge with the policy, ask a person when the
//! verdict is *ask*, run in the sandbox, record before and after. State (tokens, sandboxes,
//! approvals) lives in SQLite under the state directory and survives restarts. See
//! docs/server.md.

pub mod api;
pub mod client;
mod dashboard;
pub mod db;
pub mod error;
pub mod govern;
mod guard;
pub mod mcp;
pub mod paths;
pub mod run;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pinfold_plan::Dirs;

/// How the server runs (`pinfold serve`'s options).
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// Directories a sandbox's named workspace may be in (at or beneath).
    pub workspace_roots: Vec<PathBuf>,
    /// Where fresh workspaces are made.
    pub workspaces: PathBuf,
    /// More Host names the server answers for (besides loopback names).
    pub allow_hosts: Vec<String>,
    pub default_timeout_s: u64,
    pub max_timeout_s: u64,
    /// Most bytes kept of each output stream.
    pub output_cap: usize,
    /// Largest JSON body.
    pub max_body: usize,
    /// Largest file read or written.
    pub max_file: usize,
    pub approval_ttl_s: u64,
    pub sandbox_ttl_s: u64,
    pub sandbox_idle_s: u64,
    /// Requests per second per token and per client address.
    pub rate: u32,
    /// How long a request's body may take to arrive.
    pub body_timeout_s: u64,
}

impl Options {
    pub fn new(listen: SocketAddr, workspaces: PathBuf) -> Options {
        Options {
            listen,
            workspace_roots: Vec::new(),
            workspaces,
            allow_hosts: Vec::new(),
            default_timeout_s: 60,
            max_timeout_s: 600,
            output_cap: 1 << 20,
            max_body: 1 << 20,
            max_file: 16 << 20,
            approval_ttl_s: 3600,
            sandbox_ttl_s: 24 * 3600,
            sandbox_idle_s: 3600,
            rate: 50,
            body_timeout_s: 30,
        }
    }
}

/// The server's shared state.
#[derive(Debug)]
pub struct Inner {
    db: Mutex<rusqlite::Connection>,
    pub dirs: Dirs,
    pub exe: PathBuf,
    pub opts: Options,
    /// The `pinfold exec` processes running in each sandbox.
    running: Mutex<HashMap<String, HashSet<u32>>>,
    /// Bumped whenever an approval changes: long polls wake on it.
    approvals: tokio::sync::watch::Sender<u64>,
    limiter: guard::Limiter,
    /// Host header values this server answers for.
    hosts: Mutex<Vec<String>>,
    /// Long polls in progress, per token.
    long_polls: Mutex<HashMap<String, usize>>,
}

#[derive(Clone, Debug)]
pub struct App(Arc<Inner>);

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl App {
    pub fn clone_handle(&self) -> App {
        self.clone()
    }

    pub fn db(&self) -> MutexGuard<'_, rusqlite::Connection> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn approvals_changed(&self) {
        self.approvals.send_modify(|n| *n += 1);
    }

    pub fn approvals_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.approvals.subscribe()
    }

    /// Note a run of `sandbox`. A sandbox deleted meanwhile (after the request found it) gets
    /// its run killed here: the delete removes the row before it looks for runs, and this looks
    /// for the row after adding the run, so one of the two sees the other.
    /// pinfold's directories as a call in `sandbox` uses them: the policy cache is the
    /// sandbox's own (`CACHE/serve/ID`), since a cache file names the workspace it was compiled
    /// for, and every sandbox can read the cache directory; `CACHE/serve` cannot be listed.
    pub fn dirs_for(&self, sandbox: &str) -> Dirs {
        let mut d = self.dirs.clone();
        d.cache = self.dirs.cache.as_ref().map(|c| c.join("serve").join(sandbox));
        d
    }

    fn running_add(&self, sandbox: &str, pid: u32) {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).entry(sandbox.to_string()).or_default().insert(pid);
        if !matches!(db::sandbox(&self.db(), sandbox), Ok(Some(_))) {
            run::kill_group(pid, libc::SIGKILL);
        }
    }

    fn running_remove(&self, sandbox: &str, pid: u32) {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = r.get_mut(sandbox) {
            s.remove(&pid);
            if s.is_empty() {
                r.remove(sandbox);
            }
        }
    }

    /// Stop what runs in `sandbox`: SIGTERM now (pinfold exec passes it on and records the
    /// end), SIGKILL to what is left two seconds later.
    pub fn kill_sandbox(&self, sandbox: &str) {
        let pids: Vec<u32> = self.running.lock().unwrap_or_else(|p| p.into_inner()).get(sandbox).map(|s| s.iter().copied().collect()).unwrap_or_default();
        for &p in &pids {
            run::kill_group(p, libc::SIGTERM);
        }
        if !pids.is_empty() {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                for p in pids {
                    run::kill_group(p, libc::SIGKILL);
                }
            });
        }
    }
}

/// A long poll in progress, counted per token and in all; released when dropped.
pub struct LongPoll {
    app: App,
    actor: String,
}

impl LongPoll {
    /// Most long polls one token holds at once.
    pub const PER_TOKEN: usize = 8;
    /// Most long polls in all (a quarter of the connections the server serves).
    pub const TOTAL: usize = guard::MAX_CONNECTIONS / 4;

    /// A slot for `actor`, or `None` when it (or everyone) holds too many.
    pub fn take(app: &App, actor: &str) -> Option<LongPoll> {
        let mut m = app.long_polls.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = m.values().sum();
        let mine = m.get(actor).copied().unwrap_or(0);
        if mine >= Self::PER_TOKEN || total >= Self::TOTAL {
            return None;
        }
        m.insert(actor.to_string(), mine + 1);
        Some(LongPoll { app: app.clone(), actor: actor.to_string() })
    }
}

impl Drop for LongPoll {
    fn drop(&mut self) {
        let mut m = self.app.long_polls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.actor) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.actor);
            }
        }
    }
}

impl std::fmt::Debug for LongPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LongPoll").field("actor", &self.actor).finish()
    }
}

/// A line for the operator on standard error: no tokens, no request bodies.
pub fn log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "pinfold serve: {line}");
}

/// `n` random bytes from the kernel, as hex.
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom(&mut b);
    govern::hex(&b)
}

#[allow(unsafe_code)]
fn getrandom(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the kernel writes at most `len - filled` bytes into the slice's tail.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // No randomness means no tokens and no ids: nothing safe to go on with.
            panic!("getrandom failed: {e}");
        }
        filled += n as usize;
    }
}

/// The token's stored form: SHA-256, hex. Tokens are 256 random bits, so a fast hash is enough.
pub fn token_hash(token: &str) -> String {
    use sha2::{Digest, Sha256};
    govern::hex(&Sha256::digest(token.as_bytes()))
}

/// The server's directory in the state directory, made private.
pub fn state_dir(dirs: &Dirs) -> Result<PathBuf, String> {
    let state = dirs.state.clone().ok_or("no state directory: set PINFOLD_STATE_DIR (or XDG_STATE_HOME, or HOME)")?;
    let dir = state.join("serve");
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

pub fn open_db(dirs: &Dirs) -> Result<rusqlite::Connection, String> {
    db::open(&state_dir(dirs)?.join("server.db"))
}

/// `pinfold serve token add`: a new token for `name`, printed once, stored hashed.
pub fn add_token(dirs: &Dirs, name: &str, role: &str) -> Result<String, String> {
    let role = db::Role::parse(role).ok_or_else(|| format!("unknown role `{role}`; use agent or operator"))?;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b)) {
        return Err(format!("bad token name `{name}`: use 1-64 letters, digits and . _ - @"));
    }
    let c = open_db(dirs)?;
    let token = format!("pft_{}", random_hex(32));
    db::add_token(&c, name, &role, &token_hash(&token))?;
    Ok(token)
}

pub fn remove_token(dirs: &Dirs, name: &str) -> Result<bool, String> {
    let c = open_db(dirs)?;
    db::remove_token(&c, name).map_err(|e| e.to_string())
}

pub fn list_tokens(dirs: &Dirs) -> Result<Vec<(String, String, i64)>, String> {
    let c = open_db(dirs)?;
    db::list_tokens(&c).map_err(|e| e.to_string())
}

/// Run the server until SIGINT or SIGTERM. Prints `listening on http://HOST:PORT` first.
pub fn serve(opts: Options, dirs: Dirs) -> Result<(), String> {
    if !opts.listen.ip().is_loopback() {
        return Err(format!(
            "refusing to listen on {}: it is not a loopback address, and this server has no TLS configured; listen on 127.0.0.1 and put a TLS proxy in front",
            opts.listen
        ));
    }
    let conn = open_db(&dirs)?;
    if let Some(c) = &dirs.cache {
        let serve = c.join("serve");
        std::fs::create_dir_all(&serve).map_err(|e| format!("cannot create {}: {e}", serve.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o311)).map_err(|e| format!("cannot make {} unlistable: {e}", serve.display()))?;
    }
    let _ = api::BODY_TIMEOUT.set(Duration::from_secs(opts.body_timeout_s.max(1)));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the pinfold binary: {e}"))?;
    std::fs::create_dir_all(&opts.workspaces).map_err(|e| format!("cannot create {}: {e}", opts.workspaces.display()))?;
    // Fresh workspaces are found by name only: the directory holding them cannot be listed
    // (mode 0311), so a command in one sandbox cannot find another's workspace, and each is
    // 0700.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&opts.workspaces, std::fs::Permissions::from_mode(0o311)).map_err(|e| format!("cannot make {} unlistable: {e}", opts.workspaces.display()))?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.listen).await.map_err(|e| format!("cannot listen on {}: {e}", opts.listen))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        let (tx, _) = tokio::sync::watch::channel(0);
        let app = App(Arc::new(Inner {
            db: Mutex::new(conn),
            dirs,
            exe,
            limiter: guard::Limiter::new(opts.rate),
            hosts: Mutex::new(guard::hosts_for(local, &opts.allow_hosts)),
            opts,
            running: Mutex::new(HashMap::new()),
            long_polls: Mutex::new(HashMap::new()),
            approvals: tx,
        }));
        api::reconcile(&app);
        tokio::spawn(api::reaper(app.clone()));
        {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "listening on http://{local}");
            let _ = out.flush();
        }
        guard::accept_loop(listener, app).await
    })
}

/// Canonical form of a directory given for a sandbox's workspace.
pub fn canonical_dir(p: &Path) -> Result<PathBuf, std::io::Error> {
    let c = std::fs::canonicalize(p)?;
    if !c.is_dir() {
        return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(c)
}
