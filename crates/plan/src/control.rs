//! Control files: files that configure pinfold or an agent, or that programs run or obey
//! later, *outside* any sandbox — git on the user's next `git status`, the agent at its next
//! start, direnv, an editor, a commit hook. A sandboxed command that writes one escapes later,
//! when that program reads it (docs/design/threat-model.md, "Writes that run later").
//!
//! [`Guard::before`] looks at the project (and the home directory when the project is the
//! home directory) before a run:
//!
//! * control files that exist are kept read-only in the sandbox ([`Guard::protect`], added to
//!   the write-deny list: the kernel enforces it);
//! * those that do not exist are watched: a placeholder (an empty file, as for policy files)
//!   would show in the command's `git status` and `git add -A` would commit it, and git
//!   itself stops working when `.git/commondir` is an empty file. [`Guard::after`] moves any
//!   of them the run created aside (`NAME.pinfold-planted`, nothing deleted), and the run
//!   does not report success;
//! * the git directory's layout is watched the same way: a new entry under `modules/` or
//!   `worktrees/` (a repository git would enter), a new `commondir`, a new `.git` whose
//!   configuration or hooks run code.
//!
//! The agent's file tools are refused the same files (`pinfold hook`, [`is_control`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What reads a family of control files, and so why a sandboxed command may not write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// git's own files: the next git command reads them outside the sandbox.
    Git,
    /// An agent's settings, hooks, MCP servers, sub-agents, commands and instructions.
    Agent,
    /// Files an editor, direnv, a version manager or a commit hook runs when a person acts.
    Person,
    /// Start-up and tool configuration in the home directory.
    Home,
}

impl Family {
    /// Why a file of this family is a control file.
    pub fn why(self) -> &'static str {
        match self {
            Family::Git => "git reads it on the next git command, outside the sandbox (hooks, fsmonitor, filters, other repositories)",
            Family::Agent => "an agent reads it at its next start (its settings, hooks, MCP servers and instructions)",
            Family::Person => "an editor, direnv, a version manager or a commit hook runs it when a person acts",
            Family::Home => "a shell, git or a toolchain reads it from the home directory, outside the sandbox",
        }
    }
}

/// A project's control files and directories, relative to its root. A directory stands for
/// everything in it.
pub const PROJECT: &[(&str, Family)] = &[
    // Claude Code: settings (permissions, hooks), sub-agents, commands, skills, MCP servers,
    // instructions.
    (".claude", Family::Agent),
    ("CLAUDE.md", Family::Agent),
    ("CLAUDE.local.md", Family::Agent),
    (".mcp.json", Family::Agent),
    // Codex, Gemini CLI, Cursor, Copilot CLI and others.
    (".codex", Family::Agent),
    ("AGENTS.md", Family::Agent),
    (".gemini", Family::Agent),
    ("GEMINI.md", Family::Agent),
    (".cursor", Family::Agent),
    (".cursorrules", Family::Agent),
    (".github/hooks", Family::Agent),
    (".github/copilot-instructions.md", Family::Agent),
    (".windsurf", Family::Agent),
    (".clinerules", Family::Agent),
    (".kiro", Family::Agent),
    (".opencode", Family::Agent),
    ("opencode.json", Family::Agent),
    ("opencode.jsonc", Family::Agent),
    (".aider.conf.yml", Family::Agent),
    (".github/instructions", Family::Agent),
    (".github/prompts", Family::Agent),
    (".github/agents", Family::Agent),
    (".github/chatmodes", Family::Agent),
    (".qwen", Family::Agent),
    ("QWEN.md", Family::Agent),
    (".continue", Family::Agent),
    (".crush.json", Family::Agent),
    ("crush.json", Family::Agent),
    ("CRUSH.md", Family::Agent),
    (".roo", Family::Agent),
    (".roomodes", Family::Agent),
    (".amazonq", Family::Agent),
    (".junie", Family::Agent),
    (".kilocode", Family::Agent),
    (".trae", Family::Agent),
    (".augment", Family::Agent),
    (".goosehints", Family::Agent),
    (".windsurfrules", Family::Agent),
    // Editors: tasks that run on opening a folder, settings that name programs.
    (".vscode", Family::Person),
    (".idea", Family::Person),
    (".run", Family::Person),
    (".zed", Family::Person),
    (".nvim.lua", Family::Person),
    (".nvimrc", Family::Person),
    (".exrc", Family::Person),
    (".dir-locals.el", Family::Person),
    // Shell environment managers: run on `cd`.
    (".envrc", Family::Person),
    (".mise.toml", Family::Person),
    ("mise.toml", Family::Person),
    (".mise", Family::Person),
    (".tool-versions", Family::Person),
    ("mise.local.toml", Family::Person),
    (".mise.local.toml", Family::Person),
    (".config/mise.toml", Family::Person),
    (".config/mise", Family::Person),
    // Commit hooks and their managers: run on the next `git commit`.
    (".husky", Family::Person),
    (".pre-commit-config.yaml", Family::Person),
    ("lefthook.yml", Family::Person),
    ("lefthook.yaml", Family::Person),
    (".lefthook.yml", Family::Person),
    (".lefthook.yaml", Family::Person),
    ("lefthook-local.yml", Family::Person),
    ("lefthook-local.yaml", Family::Person),
    (".lefthook-local.yml", Family::Person),
    (".lefthook-local.yaml", Family::Person),
    // Run on the host when a container is opened; programs a toolchain runs in their place.
    (".devcontainer", Family::Person),
    (".devcontainer.json", Family::Person),
    (".yarnrc.yml", Family::Person),
    (".yarnrc", Family::Person),
    (".npmrc", Family::Person),
    ("rust-toolchain.toml", Family::Person),
    ("rust-toolchain", Family::Person),
    // cargo runs `build.rustc`, its wrappers and runners from here, also for the `cargo
    // metadata` an editor runs on opening the folder.
    (".cargo/config.toml", Family::Person),
    (".cargo/config", Family::Person),
    // A directory git takes for a repository of its own when it finds `HEAD` (with `objects/`
    // and `refs/`) there: its `config` would then run.
    ("HEAD", Family::Git),
];

/// In the home directory, when it is the project (or inside one): what shells, git and
/// toolchains read at start-up. Every other dot entry there is protected too; these are
/// named for the file tools and the docs.
pub const HOME_NAMED: &[&str] = &[
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshenv", ".zprofile", ".zshrc",
    ".zlogin", ".zlogout", ".inputrc", ".gitconfig", ".config", ".local/bin", "bin", ".npmrc", ".cargo/config.toml",
    ".claude", ".claude.json", ".ssh", "go/bin", "node_modules",
];

/// The home directory's caches a sandboxed command may still write when the home directory is
/// the project: the named toolchain caches (the same list as the sandbox's default writable
/// caches), never the rest of `~/.cache`.
pub const HOME_CACHES: &[&str] = pinfold_sandbox::HOME_CACHES;

/// The files of a git directory that name other paths or run code: protected in the repository's
/// own, each submodule's and each linked worktree's.
const GIT_OWN: [&str; 6] = ["config", "hooks", "info", "commondir", "config.worktree", "gitdir"];
/// What else of the common git directory is a control path: other object stores, legacy
/// remotes `git push` reads.
const GIT_COMMON: [&str; 3] = ["objects/info/alternates", "remotes", "branches"];
/// What of a git directory the agent's file tools are refused besides those: repositories git
/// enters and the state of a paused rebase, cherry-pick or revert.
const GIT_STATE: [&str; 5] = ["modules", "worktrees", "rebase-merge", "rebase-apply", "sequencer"];

/// The suffix a planted control file is renamed with.
pub const PLANTED_SUFFIX: &str = ".pinfold-planted";

/// A control file the run created, and where it was moved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Planted {
    pub path: PathBuf,
    /// Where it is now (`None` when it could not be moved: it is still at `path`).
    pub moved_to: Option<PathBuf>,
    pub family: Family,
}

/// Directory listings read once per pass: whether a control path exists is a lookup in its
/// parent's listing, not a system call of its own (most do not exist, and a project has about
/// fifty names to look for).
#[derive(Default)]
struct Dirents(std::collections::HashMap<PathBuf, Option<std::collections::HashMap<OsString, (bool, u64)>>>);

impl Dirents {
    /// Whether `p` exists, links followed (`Some(false)` for a dangling link); `None` when its
    /// parent is not a directory, so that nothing can be created there.
    fn exists(&mut self, p: &Path) -> Option<bool> {
        match self.state(p) {
            State::Resolves => Some(true),
            State::Absent | State::Dangling => Some(false),
            State::Uncreatable => None,
        }
    }

    fn state(&mut self, p: &Path) -> State {
        let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
            return if p.exists() { State::Resolves } else { State::Absent };
        };
        let listing = self.0.entry(dir.to_path_buf()).or_insert_with(|| match std::fs::read_dir(dir) {
            Ok(rd) => Some(
                rd.flatten()
                    .map(|e| (e.file_name(), (e.file_type().is_ok_and(|t| t.is_symlink()), std::os::unix::fs::DirEntryExt::ino(&e))))
                    .collect(),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Default::default()),
            Err(_) => None,
        });
        match listing.as_ref().map(|l| l.get(name)) {
            None => State::Uncreatable,
            Some(None) => State::Absent,
            Some(Some((false, _))) => State::Resolves,
            Some(Some((true, _))) if std::fs::metadata(p).is_ok() => State::Resolves,
            Some(Some((true, _))) => State::Dangling,
        }
    }

    /// What the listing says is at `p` itself: whether it is a link, and its inode.
    fn entry(&mut self, p: &Path) -> Option<(bool, u64)> {
        self.state(p);
        let (dir, name) = (p.parent()?, p.file_name()?);
        self.0.get(dir)?.as_ref()?.get(name).copied()
    }
}

/// What is at a control path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Absent,
    /// A link whose target does not exist.
    Dangling,
    /// Something, links followed.
    Resolves,
    /// Its parent is not a directory: nothing can be created there.
    Uncreatable,
}

/// A directory's entries before the run.
#[derive(Debug)]
struct Listing {
    dir: PathBuf,
    /// Sorted.
    names: Vec<OsString>,
    family: Family,
    /// Only names starting with `.` (and `bin`) count.
    dot_only: bool,
}

fn counts(name: &std::ffi::OsStr, dot_only: bool) -> bool {
    !dot_only || name.as_encoded_bytes().starts_with(b".") || name == "bin"
}

/// What a run must not change, looked at before it.
#[derive(Default)]
pub struct Guard {
    /// Control files that exist: read-only in the sandbox.
    pub protect: Vec<PathBuf>,
    /// Control files that exist, as they were: the inode of what is at the path itself, and
    /// the link's text when it is a link. The read-only mount holds the file a link points
    /// at, not the link, and another run ending may move aside a file this run protected:
    /// what is at the path after the run must be what was there before.
    present: Vec<(PathBuf, Family, u64, Option<PathBuf>)>,
    /// Control files that do not exist (or are dangling links: the link's identity, device
    /// and inode): moved aside if the run creates them, makes a link there or changes it.
    missing: Vec<(PathBuf, Family, Option<(u64, u64)>)>,
    /// Directories whose entries are fixed for the run: a new entry is moved aside (in the
    /// home directory, a new dot entry or `bin`).
    listings: Vec<Listing>,
    /// A git directory that did not exist: if the run makes one, its configuration and hooks
    /// are checked.
    new_repo: Option<PathBuf>,
    /// The listings `before` read.
    seen: Dirents,
    /// An interactive rebase's list of steps, and its content before the run: `exec` lines a
    /// command adds run on the user's `git rebase --continue`.
    todo: Option<(PathBuf, Option<Vec<u8>>)>,
    /// A paused rebase's or cherry-pick's merge strategy, and its content before the run: git
    /// runs `git-merge-STRATEGY`, a path in the project if the name has a slash.
    strategies: Vec<(PathBuf, Option<Vec<u8>>)>,
    /// Directories that stay writable but must stay the same directory (`.git/refs`): one
    /// replaced by a link or another directory would have git read refs from elsewhere.
    kept: Vec<(PathBuf, u64)>,
    /// The work tree and git directory, and when the run began: a repository the run made or
    /// changed inside the project and staged as a gitlink, which `git status` enters and whose
    /// configuration it obeys, is moved aside.
    nested: Option<(PathBuf, PathBuf, std::time::SystemTime)>,
    /// The directories looked in after the run, opened before it (see [`Anchors`]).
    anchors: Anchors,
    /// The git directory, and the links in it before the run (relative path, target): git
    /// makes none there, and one a command plants (`COMMIT_EDITMSG -> ~/.bashrc`, `logs ->
    /// ~`) has the user's own git write outside the project (found by an outside attack).
    git_links: Option<(PathBuf, Vec<(PathBuf, PathBuf)>)>,
    /// A directory beneath the project root that was not, when the run was set up, the
    /// directory its path names (a link on its way): the run must not start.
    pub swapped: Option<PathBuf>,
}

/// The directories the checks after a run look in, each opened (`O_PATH`) as the run is set
/// up, so that after it they are looked in, and renamed in, through those descriptors
/// (`/proc/self/fd/N/…`). A directory of the project swapped for a link to the home directory
/// meanwhile, by a command running beside this one, then changes nothing they see or move
/// (found by an outside attack: the user's `~/.claude` and `~/.envrc` moved aside after runs,
/// and a planted `.envrc` left in place, the checks having looked through the link).
#[derive(Default)]
struct Anchors(std::collections::HashMap<PathBuf, std::fs::File>);

impl Anchors {
    /// Open `dir` (when it exists). Beneath `root`, which is named without links, it must be
    /// the directory its path names: `Err` with the path otherwise.
    fn add(&mut self, dir: &Path, root: &Path) -> Result<(), PathBuf> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        if self.0.contains_key(dir) {
            return Ok(());
        }
        let Ok(f) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC).open(dir) else { return Ok(()) };
        if dir.starts_with(root) && std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok().as_deref() != Some(dir) {
            return Err(dir.to_path_buf());
        }
        self.0.insert(dir.to_path_buf(), f);
        Ok(())
    }

    /// Where to look for `p` now: beneath the nearest directory above it that was opened,
    /// through that descriptor; `p` itself when none was.
    fn at(&self, p: &Path) -> PathBuf {
        use std::os::fd::AsRawFd;
        for a in p.ancestors().skip(1) {
            if let Some(f) = self.0.get(a) {
                let rest = p.strip_prefix(a).unwrap_or(p);
                return PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())).join(rest);
            }
        }
        p.to_path_buf()
    }

    /// Where to look in the directory `d` now.
    fn dir(&self, d: &Path) -> PathBuf {
        use std::os::fd::AsRawFd;
        match self.0.get(d) {
            Some(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            None => self.at(d),
        }
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("protect", &self.protect)
            .field("missing", &self.missing)
            .field("listings", &self.listings)
            .field("new_repo", &self.new_repo)
            .finish()
    }
}

impl Guard {
    /// Look at the project `root` (working directory `cwd`, home directory `home`, the user's
    /// `$XDG_CONFIG_HOME`, where git's own configuration may be) before a run whose writable
    /// roots are `writable`. Control paths outside every writable root need nothing: the sandbox
    /// cannot write them anyway. `lifted`: paths the user's own configuration lets commands
    /// write.
    pub fn before(root: &Path, cwd: &Path, home: Option<&Path>, xdg_config_home: Option<&Path>, writable: &[PathBuf], lifted: &[PathBuf]) -> Guard {
        let mut g = Guard::default();
        let open = |p: &Path| writable.iter().any(|w| p.starts_with(w)) && !lifted.iter().any(|l| p.starts_with(l));
        // In the project root and each directory from there down to the working directory,
        // as for policy files: agents and direnv read these from where they start too.
        for dir in crate::protect::policy_dirs(root, cwd) {
            for (rel, family) in PROJECT {
                g.add(dir.join(rel), *family, &open);
            }
        }
        g.git(root, home, xdg_config_home, &open);
        // The home directory as the project, however either is spelled: `$HOME` may be a
        // link (`/home -> var/home`) where the project's root is the real path.
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if let Some(h) = home.map(real) {
            let root = real(root);
            let writable: Vec<PathBuf> = writable.iter().map(|w| real(w)).collect();
            if h == root || h.starts_with(&root) || writable.iter().any(|w| h.starts_with(w)) {
                let open = |p: &Path| writable.iter().any(|w| p.starts_with(w)) && !lifted.iter().any(|l| p.starts_with(l) || real(l) == p);
                g.home(&h, &open);
            } else if in_home_dot_entry(&h, &root) {
                // A project inside a dot entry of the home directory (`~/.config/git`,
                // `~/.local/bin`): what is there is read by programs outside the sandbox as
                // the home directory's own (git's global config, the user's PATH); every
                // entry read-only and no new ones, as in the home directory itself.
                let open = |p: &Path| writable.iter().any(|w| p.starts_with(w)) && !lifted.iter().any(|l| p.starts_with(l) || real(l) == p);
                let caches: Vec<PathBuf> = HOME_CACHES.iter().map(|c| h.join(c)).collect();
                g.home_dir_around_caches(&root, &caches, &open);
            } else {
                // The home directory's files that are links into a writable root: what they
                // lead to is read-only, and watched where it does not exist yet.
                let open = |p: &Path| writable.iter().any(|w| p.starts_with(w)) && !lifted.iter().any(|l| p.starts_with(l) || real(l) == p);
                for t in home_links_into(&h, &writable) {
                    g.add(t, Family::Home, &open);
                }
            }
        }
        g.anchor(root);
        g
    }

    /// Open every directory [`Guard::after`] looks in (see [`Anchors`]).
    fn anchor(&mut self, root: &Path) {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let parent = |p: &Path| p.parent().map(Path::to_path_buf);
        dirs.extend(self.present.iter().filter_map(|(p, ..)| parent(p)));
        dirs.extend(self.missing.iter().filter_map(|(p, ..)| parent(p)));
        dirs.extend(self.listings.iter().map(|l| l.dir.clone()));
        dirs.extend(self.kept.iter().filter_map(|(p, _)| parent(p)));
        dirs.extend(self.strategies.iter().filter_map(|(p, _)| parent(p)));
        dirs.extend(self.todo.iter().filter_map(|(p, _)| parent(p)));
        dirs.extend(self.new_repo.iter().filter_map(|p| parent(p)));
        dirs.extend(self.git_links.iter().map(|(g, _)| g.clone()));
        // And the project root itself, which every path beneath it can be found from.
        dirs.push(root.to_path_buf());
        for d in dirs {
            if let Err(at) = self.anchors.add(&d, root) {
                self.swapped.get_or_insert(at);
            }
        }
    }

    fn add(&mut self, p: PathBuf, family: Family, open: &dyn Fn(&Path) -> bool) {
        if !open(&p) {
            return;
        }
        // Followed through links: a dangling link is watched like a missing file (a write
        // through it creates its target). Where the parent is a file nothing can be created.
        match self.seen.exists(&p) {
            Some(true) => {
                if !self.protect.contains(&p) {
                    if let Some((link, ino)) = self.seen.entry(&p) {
                        let text = if link { std::fs::read_link(&p).ok() } else { None };
                        self.present.push((p.clone(), family, ino, text));
                    }
                    self.protect.push(p);
                }
            }
            Some(false) => {
                if !self.missing.iter().any(|(m, _, _)| *m == p) {
                    let link = identity(&p);
                    self.missing.push((p, family, link));
                }
            }
            None => {}
        }
    }

    fn listing(&mut self, dir: PathBuf, family: Family, open: &dyn Fn(&Path) -> bool) {
        if !open(&dir) {
            return;
        }
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                let mut names: Vec<OsString> = rd.flatten().map(|e| e.file_name()).collect();
                names.sort();
                self.listings.push(Listing { dir, names, family, dot_only: false });
            }
            Err(_) => self.add(dir, family, open),
        }
    }

    /// git: everything in the git directory that names other paths or runs code.
    fn git(&mut self, root: &Path, home: Option<&Path>, xdg_config_home: Option<&Path>, open: &dyn Fn(&Path) -> bool) {
        let dotgit = root.join(".git");
        let meta = std::fs::symlink_metadata(&dotgit);
        let (gitdir, common) = match &meta {
            Ok(m) if m.is_dir() => (dotgit.clone(), dotgit.clone()),
            Ok(_) => {
                // A worktree's or submodule's `.git` file: it names the git directory.
                self.add(dotgit.clone(), Family::Git, open);
                let mut found = pinfold_sandbox::git_equivalents(root, &[dotgit.clone()]);
                let Some(gitdir) = found.first().cloned() else { return };
                let common = found.pop().unwrap_or_else(|| gitdir.clone());
                (gitdir, common)
            }
            Err(_) => {
                // No repository: one the run makes is checked afterwards.
                if open(&dotgit) {
                    self.new_repo = Some(dotgit);
                }
                return;
            }
        };
        for name in GIT_OWN.iter().chain(&GIT_COMMON) {
            self.add(common.join(name), Family::Git, open);
            if gitdir != common {
                self.add(gitdir.join(name), Family::Git, open);
            }
        }
        if open(root) {
            // A second before now: file times are on the kernel's coarse clock.
            let start = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
            self.nested = Some((root.to_path_buf(), gitdir.clone(), start));
        }
        // Directories git writes into that must stay the directories they are: one replaced
        // by a link has git read and write refs and logs where the link leads (found:
        // `refs/heads -> ~`, and the user's next commit wrote `~/master`).
        for d in ["refs", "refs/heads", "refs/tags", "refs/remotes", "logs", "logs/refs", "logs/refs/heads"] {
            let d = common.join(d);
            if open(&d)
                && let Some((false, ino)) = self.seen.entry(&d)
            {
                self.kept.push((d, ino));
            }
        }
        if open(&common) {
            self.git_links = Some((common.clone(), links_in(&common)));
        }
        for f in ["rebase-merge/strategy", "sequencer/opts"] {
            let f = gitdir.join(f);
            if open(&f) {
                let before = read_bounded(&f, SMALL).ok().flatten();
                self.strategies.push((f, before));
            }
        }
        let todo = gitdir.join("rebase-merge/git-rebase-todo");
        if open(&todo) {
            let before = read_bounded(&todo, SMALL).ok().flatten();
            self.todo = Some((todo, before));
        }
        // Files the configuration names: a hooks directory and included files in the project,
        // from the repository's configuration and the user's and system's (a relative
        // `core.hooksPath` in `~/.gitconfig` names a directory in every repository).
        let mut files: Vec<PathBuf> = vec![common.join("config"), common.join("config.worktree")];
        if gitdir != common {
            files.push(gitdir.join("config.worktree"));
        }
        files.extend(xdg_config_home.map(Path::to_path_buf).or_else(|| home.map(|h| h.join(".config"))).map(|c| c.join("git/config")));
        files.extend(home.map(|h| h.join(".gitconfig")));
        files.push(PathBuf::from("/etc/gitconfig"));
        for p in config_paths(&files, root, home) {
            self.add(p, Family::Git, open);
        }
        // Repositories git enters: submodules' git directories and linked worktrees. Each
        // one's own control files are protected; a new one is moved aside.
        for sub in ["modules", "worktrees"] {
            let dir = common.join(sub);
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    for name in GIT_OWN {
                        self.add(e.path().join(name), Family::Git, open);
                    }
                }
            }
            self.listing(dir, Family::Git, open);
        }
    }

    /// The home directory as (or inside) a writable root: every dot entry read-only but the
    /// named caches, and no new ones.
    fn home(&mut self, home: &Path, open: &dyn Fn(&Path) -> bool) {
        let caches: Vec<PathBuf> = HOME_CACHES.iter().map(|c| home.join(c)).collect();
        let Ok(rd) = std::fs::read_dir(home) else { return };
        let mut names: Vec<OsString> = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name();
            let p = e.path();
            if name.as_encoded_bytes().starts_with(b".") || name == "bin" {
                if caches.iter().any(|c| c.starts_with(&p)) {
                    // A directory holding a cache (`.cache`, `.cargo`): its other entries are
                    // protected one by one.
                    self.home_dir_around_caches(&p, &caches, open);
                } else {
                    self.add(p, Family::Home, open);
                }
            }
            names.push(name);
        }
        names.sort();
        if open(home) {
            self.listings.push(Listing { dir: home.to_path_buf(), names, family: Family::Home, dot_only: true });
        }
        for n in HOME_NAMED {
            self.add(home.join(n), Family::Home, open);
        }
    }

    fn home_dir_around_caches(&mut self, dir: &Path, caches: &[PathBuf], open: &dyn Fn(&Path) -> bool) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if caches.contains(&p) {
                continue;
            }
            if caches.iter().any(|c| c.starts_with(&p)) {
                self.home_dir_around_caches(&p, caches, open);
            } else {
                self.add(p, Family::Home, open);
            }
        }
        self.listing(dir.to_path_buf(), Family::Home, open);
    }

    /// After the run: move aside every control file it created; what was moved. Each path is
    /// looked at, and moved, through the directories opened before the run ([`Anchors`]).
    pub fn after(&self) -> Vec<Planted> {
        let at = |p: &Path| self.anchors.at(p);
        let mut out = Vec::new();
        let mut now = Dirents::default();
        for (d, ino) in &self.kept {
            if now.entry(&at(d)).is_some_and(|(link, i)| link || i != *ino) {
                // Moved aside; the git guard then writes the refs back into a new one.
                out.push(move_aside(d, &at(d), Family::Git));
            }
        }
        for (p, family, ino, link) in &self.present {
            let here = at(p);
            // The same inode, and for a link the same text (a link removed and made again
            // may get the freed inode back).
            let same = |is_link: bool, i: u64| i == *ino && is_link == link.is_some() && (!is_link || std::fs::read_link(&here).ok() == *link);
            match now.entry(&here) {
                Some((is_link, i)) if same(is_link, i) => continue,
                // Replaced: what is there now is moved aside.
                Some(_) => out.push(move_aside(p, &here, *family)),
                None => {}
            }
            // A link the command removed or replaced is made again as it was.
            if let Some(text) = link
                && std::fs::symlink_metadata(&here).is_err()
            {
                let _ = std::os::unix::fs::symlink(text, &here);
            }
        }
        for (p, family, link) in &self.missing {
            let here = at(p);
            // Created, or a link made or replaced there: a dangling link becomes a control
            // file as soon as anyone, a file tool included, creates its target.
            let planted = match now.state(&here) {
                State::Resolves => true,
                State::Dangling => identity(&here) != *link,
                State::Absent | State::Uncreatable => false,
            };
            // A placeholder a sandbox running beside this one made, and holds, is not planted.
            if planted && !pinfold_sandbox::held_placeholder(p) {
                out.push(move_aside(p, &here, *family));
            }
        }
        for l in &self.listings {
            let dir = self.anchors.dir(&l.dir);
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            let mut new: Vec<OsString> = rd
                .flatten()
                .filter(|e| counts(&e.file_name(), l.dot_only) && l.names.binary_search(&e.file_name()).is_err())
                // What this pass itself moved aside is not new.
                .filter(|e| !out.iter().any(|o: &Planted| o.moved_to.as_deref() == Some(l.dir.join(e.file_name()).as_path())))
                .map(|e| e.file_name())
                .collect();
            new.sort();
            for name in new {
                let p = l.dir.join(&name);
                if !out.iter().any(|o: &Planted| o.path == p) {
                    out.push(move_aside(&p, &dir.join(&name), l.family));
                }
            }
        }
        for (f, before) in &self.strategies {
            let planted = match read_bounded(&at(f), SMALL) {
                Ok(Some(now)) => before.as_ref() != Some(&now) && !builtin_strategies(&now),
                Ok(None) => false,
                Err(()) => true,
            };
            if planted {
                out.push(move_aside(f, &at(f), Family::Git));
            }
        }
        if let Some((todo, before)) = &self.todo
            && let planted = match read_bounded(&at(todo), SMALL) {
                Ok(Some(now)) => before.as_ref() != Some(&now) && runs_commands(&now),
                Ok(None) => false,
                Err(()) => true,
            }
            && planted
        {
            out.push(move_aside(todo, &at(todo), Family::Git));
        }
        if let Some((root, gitdir, start)) = &self.nested {
            for p in nested_repos_staged(root, gitdir, *start) {
                if !out.iter().any(|o: &Planted| o.path == p) {
                    out.push(move_aside(&p, &at(&p), Family::Git));
                }
            }
        }
        if let Some((gitdir, before)) = &self.git_links {
            let here = self.anchors.dir(gitdir);
            for (rel, target) in links_in(&here) {
                let p = gitdir.join(&rel);
                // A FIFO anywhere in the git directory, however it came there, is moved aside:
                // git opens `HEAD`, `index` or a ref and waits forever (found by an outside
                // attack: `mkfifo .git/HEAD` hung every later git command on the host). The
                // git guard then writes the file it stood for back.
                let fifo = target.as_os_str() == FIFO;
                if (fifo || !before.iter().any(|(r, t)| *r == rel && *t == target)) && !out.iter().any(|o: &Planted| o.path == p) {
                    out.push(move_aside(&p, &here.join(&rel), Family::Git));
                }
            }
        }
        if let Some(dotgit) = &self.new_repo
            && std::fs::symlink_metadata(at(dotgit)).is_ok()
            && !harmless_new_repo(&at(dotgit))
        {
            out.push(move_aside(dotgit, &at(dotgit), Family::Git));
        }
        out
    }
}

/// The `.git` of each repository inside the work tree `root` that the index (changed since
/// `start`) stages as a gitlink, when that `.git`, its configuration or its hooks changed
/// since `start`: `git status` in `root` enters such a repository and obeys its configuration.
fn nested_repos_staged(root: &Path, gitdir: &Path, start: std::time::SystemTime) -> Vec<PathBuf> {
    let changed = |p: &Path| std::fs::symlink_metadata(p).and_then(|m| m.modified()).is_ok_and(|t| t >= start);
    let status_changed = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let since = start.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            m.ctime() >= since
        })
    };
    let index = gitdir.join("index");
    if !changed(&index) {
        return Vec::new();
    }
    let Ok(Some(bytes)) = read_bounded(&index, INDEX) else { return Vec::new() };
    let sha256 = read_bounded(&gitdir.join("config"), SMALL)
        .ok()
        .flatten()
        .is_some_and(|c| pinfold_undo::index::sha256_repo(&c));
    let mut out = Vec::new();
    // Gitlinks: mode 160000.
    let gitlinks = pinfold_undo::index::entries(&bytes, if sha256 { 32 } else { 20 }).into_iter().filter(|(mode, _)| *mode == 0o160000);
    for (_, rel) in gitlinks {
        let Ok(rel) = std::str::from_utf8(&rel) else { continue };
        let dotgit = root.join(rel).join(".git");
        if [dotgit.clone(), dotgit.join("config"), dotgit.join("hooks")].iter().any(|p| status_changed(p)) {
            out.push(dotgit);
        }
    }
    out
}

/// Whether the strategies a rebase's `strategy` file or a sequencer's `opts` name are all git's
/// own (any other is a program git runs).
fn builtin_strategies(text: &[u8]) -> bool {
    const BUILTIN: [&str; 6] = ["ort", "recursive", "resolve", "octopus", "ours", "subtree"];
    let text = String::from_utf8_lossy(text).to_ascii_lowercase();
    if !text.contains('=') {
        let name = text.trim();
        return name.is_empty() || BUILTIN.contains(&name);
    }
    // Every `strategy = VALUE` anywhere (git's config syntax allows the key after the
    // section header on one line, quotes, spaces); `strategy-option` is not a strategy.
    let mut rest = text.as_str();
    while let Some(at) = rest.find("strategy") {
        let after = &rest[at + "strategy".len()..];
        rest = after;
        let t = after.trim_start_matches([' ', '\t', '"']);
        let Some(v) = t.strip_prefix('=') else { continue };
        let value: String = v.trim_start_matches([' ', '\t', '"']).chars().take_while(|c| !matches!(c, '\n' | '"' | ';' | '#')).collect();
        let value = value.trim();
        if !value.is_empty() && !BUILTIN.contains(&value) {
            return false;
        }
    }
    true
}

/// What a file pinfold reads to judge a run holds: `Ok(None)` when nothing is there; `Err`
/// when what is there is not a regular file (links followed) of a sane size — a FIFO that
/// would block pinfold, `/dev/zero` that would never end. A command can put either at any
/// name it can write; such a thing is not read, and counts as planted where it matters.
pub(crate) fn read_bounded(p: &Path, limit: u64) -> Result<Option<Vec<u8>>, ()> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return if std::fs::symlink_metadata(p).is_ok() { Err(()) } else { Ok(None) },
        Err(_) => return Err(()),
        Ok(m) if !m.is_file() || m.len() > limit => return Err(()),
        Ok(_) => {}
    }
    // Non-blocking, in case it was swapped for a FIFO since the look above.
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(p).map_err(drop)?;
    if !f.metadata().map_err(drop)?.is_file() {
        return Err(());
    }
    let mut out = Vec::new();
    f.take(limit + 1).read_to_end(&mut out).map_err(drop)?;
    if out.len() as u64 > limit {
        return Err(());
    }
    Ok(Some(out))
}

/// The most pinfold reads of a small git state file (a step list, a strategy, a config).
const SMALL: u64 = 1 << 20;
/// The most pinfold reads of an index (a large repository's runs to tens of megabytes).
const INDEX: u64 = 1 << 30;

/// Whether a rebase's list of steps runs a command (`exec`/`x` lines).
fn runs_commands(todo: &[u8]) -> bool {
    String::from_utf8_lossy(todo).lines().any(|l| matches!(l.split_whitespace().next(), Some("x" | "exec")))
}

/// The device and inode of what is at `p` itself (a link, not its target); `None` when
/// nothing is.
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// What [`links_in`] gives as the target of a FIFO (no link's text holds a NUL).
const FIFO: &str = "\0fifo";

/// The symbolic links (and FIFOs) in a git directory (looked in at `look`), as paths relative
/// to it with their text: the top level and every directory below it but `objects/pack` and
/// the loose objects' files, at most 20000 entries (a link further down is not looked for).
fn links_in(look: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(rel) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(look.join(&rel)) else { continue };
        for e in rd.flatten() {
            seen += 1;
            if seen > 20_000 {
                return out;
            }
            let Ok(t) = e.file_type() else { continue };
            let r = rel.join(e.file_name());
            if t.is_symlink() {
                let text = std::fs::read_link(e.path()).unwrap_or_default();
                out.push((r, text));
            } else if std::os::unix::fs::FileTypeExt::is_fifo(&t) {
                out.push((r, PathBuf::from(FIFO)));
            } else if t.is_dir() && r != Path::new("objects/pack") && !(rel == Path::new("objects") && e.file_name().len() == 2) {
                todo.push(r);
            }
        }
    }
    out.sort();
    out
}

/// Move `p` aside to `p.pinfold-planted` (`…-2`, `…-3` when taken): kept, never deleted, and
/// under a name no program reads. `now` is where `p` is looked at (see [`Anchors`]).
fn move_aside(p: &Path, now: &Path, family: Family) -> Planted {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut moved_to = None;
    // A name too long to take the suffix (255 bytes at most) gets a short name of its own.
    let long = name.len() + PLANTED_SUFFIX.len() + 4 > 255;
    for i in 1..100 {
        let suffix = if i == 1 { PLANTED_SUFFIX.to_string() } else { format!("{PLANTED_SUFFIX}-{i}") };
        let new_name = if long { format!("{PLANTED_SUFFIX}-{i}") } else { format!("{name}{suffix}") };
        let to = now.with_file_name(&new_name);
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        // RENAME_NOREPLACE semantics by the check above; a race loses to the other file, which
        // stays where it is.
        if std::fs::rename(now, &to).is_ok() || rename_in_closed_dir(now, &to) {
            moved_to = Some(p.with_file_name(&new_name));
        }
        break;
    }
    Planted { path: p.to_path_buf(), moved_to, family }
}

/// A command may have closed the directory to writes (`chmod 555 .`) so that nothing can be
/// renamed in it: the user owns it, so open it for the rename and close it again.
fn rename_in_closed_dir(p: &Path, to: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = p.parent() else { return false };
    let Ok(meta) = std::fs::metadata(dir) else { return false };
    let mode = meta.permissions().mode();
    if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o300)).is_err() {
        return false;
    }
    let moved = std::fs::rename(p, to).is_ok();
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    moved
}

/// The paths a repository's configuration names that git runs or reads as configuration:
/// `core.hooksPath` (relative: against the work tree `root`, where hooks run) and
/// `include.path`/`includeIf.*.path` (relative: against the directory of the configuration
/// file that names them; included files are read in turn, as git reads them), as git reads
/// them, from each of `files` that exists; `~/` and `~user/` as git expands them (found: an
/// include in the project named `~/proj/inc.gitconfig` was not protected).
fn config_paths(files: &[PathBuf], root: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<(PathBuf, usize)> = files.iter().map(|f| (f.clone(), 0)).collect();
    let mut read: Vec<PathBuf> = Vec::new();
    while let Some((file, depth)) = todo.pop() {
        if read.contains(&file) {
            continue;
        }
        read.push(file.clone());
        let Ok(Some(text)) = read_bounded(&file, SMALL) else { continue };
        let text = String::from_utf8_lossy(&text);
        let gitdir = file.parent().unwrap_or(Path::new("/"));
        for (section, key, value) in git_config_entries(&text) {
            let (section, key, value) = (section.as_str(), key.as_str(), value.as_str());
            let include = (section == "include" || section == "includeif") && key == "path";
            if runs_program(section, key) {
                // A program git runs (a shell command line): each of its words that names a
                // path, taken from the top of the work tree as git runs it, or the home
                // directory (`~/`).
                for word in value.split_whitespace() {
                    let w = word.trim_matches(['"', '\'']).trim_start_matches('!');
                    if !w.contains('/') || w.starts_with('-') {
                        continue;
                    }
                    let p = match expand_tilde(w, home) {
                        Some(p) => p,
                        None if w.starts_with('~') => continue,
                        None if Path::new(w).is_absolute() => PathBuf::from(w),
                        None => root.join(w),
                    };
                    out.push(pinfold_policy::matcher::normalize(&p));
                }
                continue;
            }
            let base = if section == "core" && key == "hookspath" {
                root
            } else if include {
                gitdir
            } else {
                continue;
            };
            if value.is_empty() {
                continue;
            }
            let p = match expand_tilde(value, home) {
                Some(p) => p,
                None if value.starts_with('~') => continue,
                None => {
                    let p = Path::new(value);
                    if p.is_absolute() { p.to_path_buf() } else { base.join(p) }
                }
            };
            let p = pinfold_policy::matcher::normalize(&p);
            // (Git stops at ten levels of includes.)
            if include && depth < 10 {
                todo.push((p.clone(), depth + 1));
            }
            out.push(p);
        }
    }
    out
}

/// A git configuration file's entries as git reads them: (section without its subsection,
/// key, value), names lowercased. A UTF-8 byte-order mark is skipped; a key may follow its
/// section's header on the same line (`[core] fsmonitor = x`); a value's quotes are removed
/// and its backslash escapes read (`\\`, `\"`, `\n`, `\t`, `\b`); a backslash before a line
/// end continues the value on the next line; `#` and `;` outside quotes start a comment.
/// (Found by an outside attack: each of these spellings hid a `core.fsmonitor` in the project
/// from a line-by-line reading.)
fn git_config_entries(text: &str) -> Vec<(String, String, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut section = String::new();
    let mut i = 0;
    let n = chars.len();
    let skip_blank = |i: &mut usize| {
        while *i < n && (chars[*i] == ' ' || chars[*i] == '\t' || chars[*i] == '\r') {
            *i += 1;
        }
    };
    let skip_line = |i: &mut usize| {
        while *i < n && chars[*i] != '\n' {
            *i += 1;
        }
    };
    while i < n {
        skip_blank(&mut i);
        if i >= n {
            break;
        }
        match chars[i] {
            '\n' => i += 1,
            '#' | ';' => skip_line(&mut i),
            '[' => {
                // `[name "sub"]` or the old `[name.sub]`.
                i += 1;
                let mut name = String::new();
                let mut in_quotes = false;
                while i < n && chars[i] != '\n' && (in_quotes || chars[i] != ']') {
                    if chars[i] == '"' {
                        in_quotes = !in_quotes;
                    } else if chars[i] == '\\' && in_quotes {
                        i += 1;
                    }
                    name.push(chars.get(i).copied().unwrap_or(' '));
                    i += 1;
                }
                if i < n && chars[i] == ']' {
                    i += 1;
                }
                section = name.trim().split([' ', '\t', '"', '.']).next().unwrap_or("").to_ascii_lowercase();
            }
            _ => {
                let mut key = String::new();
                while i < n && (chars[i].is_alphanumeric() || chars[i] == '-' || chars[i] == '_' || chars[i] == '.') {
                    key.push(chars[i]);
                    i += 1;
                }
                skip_blank(&mut i);
                if key.is_empty() || i >= n || chars[i] != '=' {
                    // A key with no value (a boolean), or nothing git reads: the rest of the line.
                    if key.is_empty() {
                        skip_line(&mut i);
                    }
                    continue;
                }
                i += 1;
                skip_blank(&mut i);
                let mut value = String::new();
                let mut in_quotes = false;
                // Trailing blanks outside quotes are dropped; `keep` is the length to keep.
                let mut keep = 0;
                while i < n {
                    let c = chars[i];
                    match c {
                        '\n' => break,
                        '"' => in_quotes = !in_quotes,
                        '#' | ';' if !in_quotes => {
                            skip_line(&mut i);
                            break;
                        }
                        '\\' => {
                            i += 1;
                            match chars.get(i) {
                                Some('\n') => {}
                                Some('\r') if chars.get(i + 1) == Some(&'\n') => i += 1,
                                Some('n') => value.push('\n'),
                                Some('t') => value.push('\t'),
                                Some('b') => {
                                    value.pop();
                                }
                                Some(&other) => value.push(other),
                                None => {}
                            }
                            keep = value.chars().count();
                        }
                        c if c == ' ' || c == '\t' || c == '\r' => {
                            value.push(c);
                            if in_quotes {
                                keep = value.chars().count();
                            }
                        }
                        c => {
                            value.push(c);
                            keep = value.chars().count();
                        }
                    }
                    i += 1;
                }
                let value: String = value.chars().take(keep).collect();
                out.push((section.clone(), key.to_ascii_lowercase(), value));
            }
        }
    }
    out
}

/// Whether git runs the value of `section.key` (subsection left out) as a program or a shell
/// command: a pager, an editor, an ssh, a credential helper, a signing program, a filter, a
/// diff or merge driver, an alias starting with `!`, a file-system monitor, a remote's
/// upload or receive pack, a trailer's command, a man viewer, a template directory (whose
/// hooks every new clone copies).
fn runs_program(section: &str, key: &str) -> bool {
    matches!(
        (section, key),
        ("core", "pager" | "editor" | "sshcommand" | "askpass" | "fsmonitor" | "gitproxy" | "alternaterefscommand")
            | ("remote", "uploadpack" | "receivepack")
            | ("init", "templatedir")
            | ("trailer", "command" | "cmd")
            | ("man", "cmd" | "path")
            | ("submodule", "update")
            | ("interactive", "difffilter")
            | ("sendemail", "sendmailcmd" | "smtpserver")
            | ("sequence", "editor")
            | ("credential", "helper")
            | ("gpg", "program" | "defaultkeycommand")
            | ("diff", "external" | "command" | "textconv")
            | ("merge", "driver")
            | ("filter", "clean" | "smudge" | "process")
            | ("alias" | "pager", _)
            | ("web", "browser")
            | ("browser" | "difftool" | "mergetool", "cmd" | "path")
            | ("uploadpack", "packobjectshook")
    )
}

/// `~/rest` and `~user/rest` as git expands them (`None`: no tilde, or a user with no home).
fn expand_tilde(value: &str, home: Option<&Path>) -> Option<PathBuf> {
    let rest = value.strip_prefix('~')?;
    let (user, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let dir = if user.is_empty() {
        home?.to_path_buf()
    } else {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        PathBuf::from(passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 6 && f[0] == user).then(|| f[5].to_string())
        })?)
    };
    Some(if tail.is_empty() { dir } else { dir.join(tail) })
}

/// Whether a git directory the run created is one git would only read (what `git init` or
/// `git clone` makes): no configuration key that runs a program or names another file, no
/// hook but git's samples, no `commondir`.
fn harmless_new_repo(dotgit: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dotgit) else { return true };
    if !meta.is_dir() {
        // A `.git` file points git elsewhere.
        return false;
    }
    if ["commondir", "gitdir", "config.worktree"].iter().any(|n| std::fs::symlink_metadata(dotgit.join(n)).is_ok()) {
        return false;
    }
    if let Ok(rd) = std::fs::read_dir(dotgit.join("hooks")) {
        if rd.flatten().any(|e| !e.file_name().to_string_lossy().ends_with(".sample")) {
            return false;
        }
    }
    let text = match read_bounded(&dotgit.join("config"), SMALL) {
        Ok(Some(t)) => String::from_utf8_lossy(&t).into_owned(),
        Ok(None) => return true,
        Err(()) => return false,
    };
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            section = rest.split([']', ' ', '"', '.']).next().unwrap_or("").to_ascii_lowercase();
            continue;
        }
        let key = line.split('=').next().unwrap_or("").trim().to_ascii_lowercase();
        let ok = match section.as_str() {
            "core" => matches!(key.as_str(), "repositoryformatversion" | "filemode" | "bare" | "logallrefupdates" | "ignorecase" | "precomposeunicode" | "symlinks"),
            "remote" => matches!(key.as_str(), "url" | "fetch" | "pushurl"),
            "branch" => matches!(key.as_str(), "remote" | "merge" | "rebase"),
            "init" => key == "defaultbranch",
            "user" => matches!(key.as_str(), "name" | "email"),
            "extensions" => key == "objectformat",
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The home directory's directories whose entries programs outside the sandbox read or run
/// (beside the home directory's own dot entries and `bin`), looked in for links.
const HOME_LINK_DIRS: &[&str] = &[
    ".config", ".local/bin", "bin", ".cargo", ".cargo/bin", "go/bin", ".claude", ".gemini", ".codex", ".cursor", ".ssh", ".gnupg",
    // What shells, editors and Python run from further down (found by a second outside
    // attack: `~/.bashrc.d/*.sh` linked into the project stayed writable).
    ".bashrc.d", ".zshrc.d", ".config/fish/conf.d", ".config/fish/functions", ".config/nvim/plugin", ".vim/plugin", ".vim/autoload",
    ".ipython/profile_default/startup",
];

/// How many entries [`home_links_into`] reads at most.
const HOME_LINK_ENTRIES: usize = 2000;

/// What the home directory's control files lead to inside a writable root: where
/// `~/.gitconfig`, `~/.npmrc`, `~/.config/git/config`, `~/.local/bin/tool` or `~/.config`
/// itself is a symbolic link into one (a dotfiles repository as the project), the real path it
/// leads to, existing or not. A command writing there rewrites the file git, a shell or a
/// toolchain reads outside the sandbox (found by an outside attack: `~/.gitconfig` linked into
/// the project, a planted `core.fsmonitor` ran on the user's next `git status`). Looked for:
/// the home directory's dot entries and `bin`, the entries of [`HOME_LINK_DIRS`] and, in
/// `~/.config`, one level further. Empty when the home directory itself lies in a writable
/// root (then every dot entry is protected where it is). `home` and `writable` are real
/// paths.
pub fn home_links_into(home: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let inside = |p: &Path| writable.iter().any(|w| p.starts_with(w));
    let home_real = home.to_path_buf();
    if inside(&home_real) {
        return Vec::new();
    }
    let mut out: Vec<PathBuf> = Vec::new();
    let mut budget = HOME_LINK_ENTRIES;
    let mut look = |dir: &Path, pick: &dyn Fn(&std::ffi::OsStr) -> bool, deeper: bool, out: &mut Vec<PathBuf>| {
        let mut subdirs = Vec::new();
        let mut dir_real: Option<PathBuf> = None;
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let name = e.file_name();
            if !pick(&name) {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() && deeper {
                subdirs.push(e.path());
            }
            if !kind.is_symlink() {
                continue;
            }
            let link = e.path();
            // A link to a sibling (`~/.cargo/bin/cargo -> rustup`): in this same directory,
            // which lies in no writable root when its real path does not (the sibling, if a
            // link, is looked at in its own right). Saves resolving each of rustup's proxies.
            if let Ok(text) = std::fs::read_link(&link)
                && !text.as_os_str().as_encoded_bytes().contains(&b'/')
                && text != Path::new("..")
            {
                let dir_real = dir_real.get_or_insert_with(|| real(dir));
                if !inside(&dir_real.join(&text)) {
                    continue;
                }
            }
            let target = match std::fs::canonicalize(&link) {
                Ok(t) => t,
                // A link to nothing yet: where it would create its file.
                Err(_) => match std::fs::read_link(&link) {
                    Ok(text) => {
                        let t = real(dir).join(text);
                        match (t.parent().and_then(|p| std::fs::canonicalize(p).ok()), t.file_name()) {
                            (Some(p), Some(n)) if n != ".." && n != "." => p.join(n),
                            _ => continue,
                        }
                    }
                    Err(_) => continue,
                },
            };
            if inside(&target) && !out.contains(&target) {
                out.push(target);
            }
        }
        subdirs
    };
    let dot_or_bin = |n: &std::ffi::OsStr| n.as_encoded_bytes().starts_with(b".") || n == "bin";
    look(home, &dot_or_bin, false, &mut out);
    for d in HOME_LINK_DIRS {
        let dir = home.join(d);
        // A directory that is itself a link (`~/.local/bin -> ../dotfiles/bin`: found by an
        // outside attack, a new `git` could be put first on the user's PATH): where it leads
        // is protected whole when it lies in a writable root.
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            if let Ok(t) = std::fs::canonicalize(&dir)
                && inside(&t)
                && !out.contains(&t)
            {
                out.push(t);
            }
            continue;
        }
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            let deeper = *d == ".config";
            for sub in look(&dir, &|_| true, deeper, &mut out) {
                look(&sub, &|_| true, false, &mut out);
            }
        }
    }
    out
}

/// Whether `root` lies inside a dot entry (or `bin`) of the home directory `home`, and not in
/// one of its caches (`~/.cache/…` builds stay ordinary projects) nor in pinfold's own data
/// directory (`pinfold serve`'s fresh workspaces, `~/.local/share/pinfold/workspaces/ID`: found
/// by an outside attack, every file a command made there was moved aside).
fn in_home_dot_entry(home: &Path, root: &Path) -> bool {
    let Ok(rest) = root.strip_prefix(home) else { return false };
    let Some(first) = rest.components().next() else { return false };
    let first = first.as_os_str();
    (first.as_encoded_bytes().starts_with(b".") || first == "bin")
        && !HOME_CACHES.iter().any(|c| root.starts_with(home.join(c)))
        && !rest.starts_with(".local/share/pinfold")
}

/// What the home directory's files lead to inside the project `root` (see
/// [`home_links_into`]), for the agent's file tools: each is a control file. Looked at once
/// per tool call, for the path as written and as resolved alike.
pub fn home_link_targets(root: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    match home {
        Some(h) if !in_home_dot_entry(h, root) => home_links_into(&real(h), &[real(root)]),
        _ => Vec::new(),
    }
}

/// Whether `path` (absolute) is a control file of the project `root` for a command in `cwd`,
/// or of the home directory when it is the project, and not `lifted` by the user: its family,
/// for the agent's file tools.
pub fn is_control(root: &Path, cwd: &Path, home: Option<&Path>, lifted: &[PathBuf], path: &Path) -> Option<Family> {
    if lifted.iter().any(|l| path.starts_with(l)) {
        return None;
    }
    for dir in crate::protect::policy_dirs(root, cwd) {
        for (rel, family) in PROJECT {
            if path.starts_with(dir.join(rel)) {
                return Some(*family);
            }
        }
    }
    let git = || GIT_OWN.iter().chain(&GIT_COMMON).chain(&GIT_STATE);
    if path.starts_with(root.join(".git/objects/info/alternates")) {
        return Some(Family::Git);
    }
    if path == root.join(".git") && path.is_file() {
        return Some(Family::Git);
    }
    if let Ok(rest) = path.strip_prefix(root.join(".git"))
        && let Some(first) = rest.components().next()
        && git().any(|g| first.as_os_str() == *g)
    {
        return Some(Family::Git);
    }
    if let Some(h) = home
        && in_home_dot_entry(h, root)
        && path.starts_with(root)
    {
        let cache = HOME_CACHES.iter().any(|c| path.starts_with(h.join(c)));
        if !cache {
            return Some(Family::Home);
        }
    }
    if let Some(h) = home
        && h.starts_with(root)
        && let Ok(rest) = path.strip_prefix(h)
        && let Some(first) = rest.components().next()
    {
        let first = first.as_os_str();
        let cache = HOME_CACHES.iter().any(|c| rest.starts_with(c));
        if !cache && (first.as_encoded_bytes().starts_with(b".") || first == "bin") {
            return Some(Family::Home);
        }
    }
    None
}

/// The control paths of the project `root` (for a command in `cwd`) that are symbolic links:
/// what they point at is a control file too, existing or not, since writing there writes
/// through them (for the agent's file tools, which resolve each one).
pub fn links(root: &Path, cwd: &Path, lifted: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = Dirents::default();
    let mut out = Vec::new();
    for dir in crate::protect::policy_dirs(root, cwd) {
        for (rel, _) in PROJECT {
            let p = dir.join(rel);
            if !lifted.iter().any(|l| p.starts_with(l)) && seen.entry(&p).is_some_and(|(link, _)| link) {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::git_config_entries;

    fn value(text: &str, section: &str, key: &str) -> Option<String> {
        git_config_entries(text).into_iter().find(|(s, k, _)| s == section && k == key).map(|(_, _, v)| v)
    }

    /// Each spelling an outside attack used to hide `core.fsmonitor` from a line-by-line
    /// reading, read as git reads it.
    #[test]
    fn entries_are_read_as_git_reads_them() {
        let cases = [
            ("[core]\n\tfsmonitor = /p/tools/fsm\n", "/p/tools/fsm"),
            ("[core] fsmonitor = /p/tools/fsm\n", "/p/tools/fsm"),
            ("[core]\n\tfsmonitor = \"/p/\"tools/fsm\n", "/p/tools/fsm"),
            ("[core]\n\tfsmonitor = /p/tools/\\\nfsm\n", "/p/tools/fsm"),
            ("[core]\n\tfsmonitor = /p/tools/fsm#comment\n", "/p/tools/fsm"),
            ("\u{feff}[core]\n\tfsmonitor = /p/tools/fsm\n", "/p/tools/fsm"),
            ("[CORE]\n\tFsMonitor=/p/tools/fsm ; note\n", "/p/tools/fsm"),
            ("[core \"x\"]\r\n\tfsmonitor = \"/p/tools/fsm # not a comment\"\r\n", "/p/tools/fsm # not a comment"),
            ("[core.x]\n\tfsmonitor = /p/a\\tb\n", "/p/a\tb"),
        ];
        for (text, want) in cases {
            assert_eq!(value(text, "core", "fsmonitor").as_deref(), Some(want), "{text:?}");
        }
        // A boolean key (no `=`) and a comment line are no entries; the next key still is.
        assert_eq!(value("[core]\n\tbare\n# x = y\n\tpager = less\n", "core", "pager").as_deref(), Some("less"));
        assert_eq!(value("[core]\n# fsmonitor = /p/x\n", "core", "fsmonitor"), None);
    }
}
