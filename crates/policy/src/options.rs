//! Built-in knowledge of which options take a value, for common tools.
//!
//! Patterns match parsed argv, and to know which arguments are positional pinfold must know
//! whether `-C` in `git -C /tmp push` swallows `/tmp`. For an option listed here the answer
//! is certain; for any other option the matcher considers both readings (see
//! [`crate::matcher`]). The data below is the knowledge; each entry says which options take a
//! separate value (`value`) and which never do (`flags`). A command's subcommand table
//! (`git push`) applies after the first positional argument names it.
//!
//! `style` says how single-dash words are read: `Gnu` splits `-rf` into `-r -f`; `Single`
//! (find, go, gcc…) reads `-name` as one option.
//!
//! A table's `io` ([`Io`]) says which arguments name a file the tool writes (`sort -o FILE`,
//! `uniq IN OUT`) or a program it runs (`go build -toolexec PROG`), for [`crate::writes`].

use std::collections::HashMap;
use std::sync::OnceLock;


/// How a tool reads single-dash words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `-abc` is `-a -b -c`, `-ofile` is `-o file` when `-o` takes a value.
    Gnu,
    /// `-name` is one option (find, go, java, terraform).
    Single,
}

/// What pinfold knows of one command or subcommand.
#[derive(Debug)]
pub struct Table {
    /// Command name (`git`) or `command subcommand` (`git push`).
    pub name: &'static str,
    pub style: Style,
    /// Options that take the next argument (or an attached value) as their value.
    pub value: &'static [&'static str],
    /// Options that never take a separate value (`--opt=v` is still read as a value).
    pub flags: &'static [&'static str],
    /// Whether the first positional names a subcommand with a table of its own.
    pub subcommands: bool,
    /// Options not listed are unknown (both readings) — unless this is set, when they are
    /// taken as flags. Only for tools whose unlisted options never take values.
    pub closed: bool,
    /// What the tool's arguments say it writes and runs ([`NO_IO`] for most tools).
    pub io: &'static Io,
}

/// What a tool's arguments say about the files it writes and the programs it runs, besides
/// its redirects. The judge holds every file named here to the test an output redirect
/// meets (the command's sandbox preset must be able to write it), and asks before a program
/// or script it cannot see runs (see [`crate::writes`]).
#[derive(Debug)]
pub struct Io {
    /// Options and what their value is. An entry `"-C linker="` applies when the value
    /// starts with `linker=`; what follows the prefix is the value described.
    pub options: &'static [(&'static str, Use)],
    /// Single-dash options above also take their value attached (`-ofile`, as gcc reads).
    pub attached: bool,
    /// An argument `@FILE` reads more arguments from FILE (gcc, rustc).
    pub response_files: bool,
    /// A cluster's options take their values from the arguments after it, in turn, never
    /// from the rest of the word (tree: `-Lo 2 FILE`).
    pub values_follow: bool,
    /// Positional arguments the tool writes.
    pub positional: Positional,
    /// The language of the tool's script (the first positional when no [`Use::Script`]
    /// option gives one), which pinfold reads for the files it writes and the commands it
    /// runs.
    pub script: Option<Script>,
}

/// What an option's value means to the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// A path the tool writes: a file, or a directory it writes into.
    Writes,
    /// Comma-separated `KIND[=PATH]` items, each PATH written (rustc's `--emit`).
    WritesEach,
    /// A program the tool runs, or code it loads.
    Runs,
    /// Arguments for the linker, read with the `ld` table (`-Wl,-o,FILE`, `-Xlinker -o`).
    Linker(Split),
    /// The directory the tool works in, before its subcommand (`git -C DIR`): relative paths
    /// it writes land there.
    Chdir,
    /// A piece of the tool's script ([`Io::script`]), as `sed -e` gives.
    Script,
    /// A file holding the tool's script (`sed -f`), which pinfold does not read.
    ScriptFile,
}

/// How a [`Use::Linker`] value holds the linker's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// One argument (`-Xlinker ARG`).
    One,
    /// Separated by commas (`-Wl,-o,FILE`).
    Commas,
    /// Separated by spaces (rustc's `-C link-args=`).
    Spaces,
}

/// Positional arguments a tool writes, counted from 0 after any script argument.
#[derive(Debug, Clone, Copy)]
pub struct Positional {
    /// These positions.
    pub at: &'static [usize],
    /// Every position from this one on.
    pub from: Option<usize>,
    /// Arguments `KEY=PATH` with one of these `KEY=` prefixes name PATH (`dd of=FILE`).
    pub keyed: &'static [&'static str],
    /// The above hold only when one of these flags is given (`sed -i`); empty: always.
    pub when: &'static [&'static str],
}

/// A script language pinfold reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// sed: `w FILE`, `W FILE` and `s///w FILE` write files; `e` and `s///e` run commands.
    Sed,
}

const NO_POSITIONAL: Positional = Positional { at: &[], from: None, keyed: &[], when: &[] };

const IO: Io = Io { options: &[], attached: false, response_files: false, values_follow: false, positional: NO_POSITIONAL, script: None };

/// The [`Io`] of a tool whose arguments name nothing it writes or runs.
pub static NO_IO: Io = IO;

// What tools write and run, from their manuals. Only what changes a verdict: files written
// outside the sandbox's roots, and programs or code the tool runs on the side.

/// git(1): `--output=FILE` (diff options of `diff`, `log`, `show`, `stash show`…),
/// `format-patch --output-directory`; `-C DIR` before the subcommand moves the work.
static GIT_IO: Io = Io { options: &[("--output", Use::Writes), ("--output-directory", Use::Writes), ("-C", Use::Chdir)], ..IO };
/// npm(1): `--prefix DIR` (short `-C`) installs into DIR as if it were the project.
static NPM_IO: Io = Io { options: &[("--prefix", Use::Writes), ("-C", Use::Writes)], ..IO };
/// pnpm: `--dir DIR` (`-C`) runs as if started in DIR, and installs there.
static PNPM_IO: Io = Io { options: &[("--dir", Use::Writes), ("-C", Use::Writes)], ..IO };
/// yarn: `--cwd DIR` works in DIR; `--modules-folder DIR` puts node_modules there.
static YARN_IO: Io = Io { options: &[("--cwd", Use::Writes), ("--modules-folder", Use::Writes)], ..IO };
/// go(1) build and test flags: `-o` and the profile outputs write files; `-toolexec`,
/// `-exec` and `-vettool` name programs go runs; `-C DIR` (first) moves the work.
static GO_IO: Io = Io {
    options: &[
        ("-o", Use::Writes), ("-coverprofile", Use::Writes), ("-cpuprofile", Use::Writes), ("-memprofile", Use::Writes),
        ("-blockprofile", Use::Writes), ("-mutexprofile", Use::Writes), ("-trace", Use::Writes), ("-outputdir", Use::Writes),
        ("-toolexec", Use::Runs), ("-exec", Use::Runs), ("-vettool", Use::Runs), ("-C", Use::Chdir),
    ],
    ..IO
};
/// gcc(1), clang(1): `-o FILE` (`-oFILE`, `--output`), `-MF` (dependency file); `-Wl,…` and
/// `-Xlinker` pass arguments to the linker (which has its own `-o`); `-wrapper`, `-fplugin`,
/// `-fpass-plugin`, `-B` (where compiler programs come from) and `-specs` run other code;
/// `@FILE` reads more options.
static CC_IO: Io = Io {
    options: &[
        ("-o", Use::Writes), ("--output", Use::Writes), ("-MF", Use::Writes), ("-aux-info", Use::Writes),
        ("-Wl,", Use::Linker(Split::Commas)), ("-Xlinker", Use::Linker(Split::One)),
        ("-wrapper", Use::Runs), ("-fplugin", Use::Runs), ("-fpass-plugin", Use::Runs), ("-B", Use::Runs), ("-specs", Use::Runs), ("--specs", Use::Runs),
    ],
    attached: true,
    response_files: true,
    ..IO
};
/// ld(1): `-o FILE` (`-oFILE`), `--output=FILE`.
static LD_IO: Io = Io { options: &[("-o", Use::Writes), ("--output", Use::Writes)], ..IO };
/// rustc: `-o FILE`, `--out-dir DIR`, `--emit KIND=PATH,…`; `-C linker=PROG` runs PROG;
/// `-C link-arg(s)=` pass arguments to the linker; `@FILE` reads more options.
static RUSTC_IO: Io = Io {
    options: &[
        ("-o", Use::Writes), ("--out-dir", Use::Writes), ("--emit", Use::WritesEach),
        ("-C linker=", Use::Runs), ("--codegen linker=", Use::Runs),
        ("-C link-arg=", Use::Linker(Split::One)), ("--codegen link-arg=", Use::Linker(Split::One)),
        ("-C link-args=", Use::Linker(Split::Spaces)), ("--codegen link-args=", Use::Linker(Split::Spaces)),
    ],
    response_files: true,
    ..IO
};
/// sort(1): `-o FILE`, `--output=FILE`.
static SORT_IO: Io = Io { options: &[("-o", Use::Writes), ("--output", Use::Writes)], ..IO };
/// tree(1): `-o FILE` sends the listing to FILE.
static TREE_IO: Io = Io { options: &[("-o", Use::Writes)], values_follow: true, ..IO };
/// uniq(1): `uniq [INPUT [OUTPUT]]`.
static UNIQ_IO: Io = Io { positional: Positional { at: &[1], ..NO_POSITIONAL }, ..IO };
/// xxd(1): `xxd [options] [infile [outfile]]`, with or without `-r`.
static XXD_IO: Io = Io { positional: Positional { at: &[1], ..NO_POSITIONAL }, ..IO };
/// tee(1): every FILE.
static TEE_IO: Io = Io { positional: Positional { from: Some(0), ..NO_POSITIONAL }, ..IO };
/// dd(1): `of=FILE`.
static DD_IO: Io = Io { positional: Positional { keyed: &["of="], ..NO_POSITIONAL }, ..IO };
/// yq: `-i`/`--inplace` rewrites every file named.
static YQ_IO: Io = Io { positional: Positional { from: Some(0), when: &["-i", "--inplace"], ..NO_POSITIONAL }, ..IO };
/// sed(1): the script (`-e`, `--expression`, or the first positional) may write files and
/// run commands; `-f FILE` reads it from a file; `-i` rewrites every input file.
static SED_IO: Io = Io {
    options: &[("-e", Use::Script), ("--expression", Use::Script), ("-f", Use::ScriptFile), ("--file", Use::ScriptFile)],
    positional: Positional { from: Some(0), when: &["-i", "--in-place"], ..NO_POSITIONAL },
    script: Some(Script::Sed),
    ..IO
};

impl Io {
    /// Whether there is anything here to look for.
    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
            && !self.response_files
            && self.script.is_none()
            && self.positional.at.is_empty()
            && self.positional.from.is_none()
            && self.positional.keyed.is_empty()
    }
}

const fn t(name: &'static str, value: &'static [&'static str], flags: &'static [&'static str]) -> Table {
    Table { name, style: Style::Gnu, value, flags, subcommands: false, closed: false, io: &NO_IO }
}

const fn sub(name: &'static str, value: &'static [&'static str], flags: &'static [&'static str]) -> Table {
    Table { name, style: Style::Gnu, value, flags, subcommands: true, closed: false, io: &NO_IO }
}

const fn closed(name: &'static str, value: &'static [&'static str], flags: &'static [&'static str]) -> Table {
    Table { name, style: Style::Gnu, value, flags, subcommands: false, closed: true, io: &NO_IO }
}

const fn single(name: &'static str, value: &'static [&'static str], flags: &'static [&'static str]) -> Table {
    Table { name, style: Style::Single, value, flags, subcommands: false, closed: false, io: &NO_IO }
}

impl Table {
    /// This table with what its tool writes and runs.
    const fn io(self, io: &'static Io) -> Table {
        Table { io, ..self }
    }

    /// This table, closed (see [`Table::closed`]).
    const fn closed(self) -> Table {
        Table { closed: true, ..self }
    }

    /// This table, reading single-dash words whole ([`Style::Single`]).
    const fn single_dash(self) -> Table {
        Table { style: Style::Single, ..self }
    }
}

/// gcc(1) and clang(1) options whose value is the next argument.
const CC_VALUES: &[&str] = &["-o", "-x", "-MF", "-MT", "-MQ", "-Xlinker", "-Xassembler", "-Xpreprocessor", "-Xclang", "-include", "-imacros", "-idirafter", "-iprefix", "-iwithprefix", "-isystem", "-isysroot", "-iquote", "-aux-info", "-wrapper", "-I", "-L", "-D", "-U", "-B", "-T", "-u", "-z", "-e", "--output", "-target", "-arch"];

/// The knowledge base. Keep entries sorted by tool; cite the manual's option list.
pub static TABLES: &[Table] = &[
    // git(1): global options, then the subcommands agents use most.
    sub("git", &["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--exec-path"],
        &["-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--version", "-v", "--help", "-h", "--no-lazy-fetch"]).io(&GIT_IO),
    t("git push", &["--repo", "--receive-pack", "--exec", "-o", "--push-option"],
        &["-f", "--force", "--force-with-lease", "--no-force-with-lease", "--force-if-includes", "-u", "--set-upstream", "-n", "--dry-run", "-v", "--verbose", "-q", "--quiet", "--all", "--branches", "--tags", "--delete", "-d", "--mirror", "--porcelain", "--no-verify", "--verify", "--follow-tags", "--atomic", "--prune", "--thin", "--no-thin", "--progress", "--signed", "--no-signed", "-4", "-6", "--ipv4", "--ipv6"]),
    t("git commit", &["-m", "--message", "-F", "--file", "-C", "--reuse-message", "-c", "--reedit-message", "--author", "--date", "--fixup", "--squash", "-t", "--template", "--cleanup", "--trailer", "--pathspec-from-file"],
        &["-a", "--all", "-v", "--verbose", "-q", "--quiet", "--amend", "-n", "--no-verify", "--verify", "-s", "--signoff", "--no-edit", "--edit", "-e", "-p", "--patch", "--allow-empty", "--allow-empty-message", "--dry-run", "--short", "--porcelain", "-o", "--only", "-i", "--include", "-S", "--gpg-sign", "--no-gpg-sign", "-z", "--null", "--no-status", "--status", "-u", "--untracked-files", "--reset-author"]),
    t("git log", &["-n", "--max-count", "--output", "--author", "--committer", "--since", "--after", "--until", "--before", "--grep", "--skip", "-L", "--min-parents", "--max-parents"],
        &["--oneline", "--graph", "--all", "--stat", "--shortstat", "--numstat", "-p", "--patch", "-u", "--decorate", "--no-decorate", "--reverse", "--follow", "--first-parent", "--merges", "--no-merges", "--name-only", "--name-status", "--abbrev-commit", "--no-color", "--color", "-q", "--quiet", "--source", "--walk-reflogs", "-g", "--date-order", "--topo-order", "--cherry", "--left-right", "-i", "--regexp-ignore-case", "-E", "-F", "-S", "-G", "-m", "--full-diff", "--raw", "--summary", "-z"]),
    t("git reset", &["--pathspec-from-file"], &["--hard", "--soft", "--mixed", "--keep", "--merge", "-q", "--quiet", "-p", "--patch", "-N", "--intent-to-add", "--recurse-submodules", "--no-recurse-submodules"]),
    t("git clean", &["-e", "--exclude"], &["-f", "--force", "-d", "-x", "-X", "-n", "--dry-run", "-q", "--quiet", "-i", "--interactive"]),
    t("git checkout", &["-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"], &["-f", "--force", "-q", "--quiet", "-p", "--patch", "--detach", "-t", "--track", "--no-track", "-m", "--merge", "--ours", "--theirs", "--progress", "--no-progress", "--overlay", "--no-overlay", "-l"]),
    t("git switch", &["-c", "--create", "-C", "--force-create", "--orphan", "--conflict"], &["-d", "--detach", "-f", "--force", "--discard-changes", "-q", "--quiet", "-m", "--merge", "-t", "--track", "--no-track", "--guess", "--no-guess", "--progress", "--no-progress"]),
    t("git branch", &["-m", "-M", "-c", "-C", "--set-upstream-to", "-u", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"], &["-d", "-D", "--delete", "-f", "--force", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "-q", "--quiet", "-l", "--list", "--show-current", "--unset-upstream", "--edit-description", "--no-color", "--color", "-t", "--track", "--no-track", "-i", "--ignore-case"]),
    t("git rebase", &["--onto", "-x", "--exec", "-s", "--strategy", "-X", "--strategy-option", "-C", "--whitespace"], &["-i", "--interactive", "--continue", "--abort", "--skip", "--quit", "--edit-todo", "--show-current-patch", "--root", "--autosquash", "--no-autosquash", "--autostash", "--no-autostash", "-f", "--force-rebase", "--no-ff", "-q", "--quiet", "-v", "--verbose", "-r", "--rebase-merges", "--keep-empty", "--update-refs", "-n", "--no-stat", "--no-verify", "--signoff", "-k", "--keep-base", "-m", "--merge"]),
    t("git diff", &["-U", "--unified", "--diff-filter", "-M", "--find-renames", "--relative", "--stat", "--output", "--src-prefix", "--dst-prefix"], &["--cached", "--staged", "--name-only", "--name-status", "--numstat", "--shortstat", "-p", "--patch", "--no-patch", "-s", "--no-color", "--color", "--word-diff", "-w", "--ignore-all-space", "-b", "-R", "--exit-code", "--quiet", "--check", "--raw", "--summary", "-z", "--no-index", "--minimal", "--patience", "--histogram", "--no-renames", "--text", "-a"]),
    t("git status", &["--ignored", "--column"], &["-s", "--short", "-b", "--branch", "--porcelain", "--long", "-v", "--verbose", "-u", "--untracked-files", "-z", "--show-stash", "--ahead-behind", "--no-ahead-behind", "--renames", "--no-renames"]),
    t("git fetch", &["--depth", "--deepen", "--shallow-since", "--shallow-exclude", "-j", "--jobs", "--refmap", "-o", "--server-option", "--upload-pack"], &["--all", "-p", "--prune", "-P", "--prune-tags", "-f", "--force", "-t", "--tags", "-n", "--no-tags", "-q", "--quiet", "-v", "--verbose", "--dry-run", "--unshallow", "--multiple", "--append", "-a", "--atomic", "--progress", "-4", "-6", "--recurse-submodules", "--no-recurse-submodules"]),
    t("git pull", &["--depth", "-s", "--strategy", "-X", "--strategy-option", "-j", "--jobs"], &["--rebase", "-r", "--no-rebase", "--ff", "--no-ff", "--ff-only", "-q", "--quiet", "-v", "--verbose", "--all", "-p", "--prune", "-f", "--force", "-t", "--tags", "--autostash", "--no-autostash", "--squash", "--no-squash", "--commit", "--no-commit", "--edit", "--no-edit", "--stat", "--no-stat", "--unshallow"]),
    t("git add", &["--chmod", "--pathspec-from-file"], &["-A", "--all", "-u", "--update", "-p", "--patch", "-i", "--interactive", "-f", "--force", "-n", "--dry-run", "-v", "--verbose", "-N", "--intent-to-add", "--no-all", "--ignore-removal", "--refresh", "--ignore-errors", "--renormalize", "-e", "--edit", "--sparse"]),
    t("git stash", &["-m", "--message", "--pathspec-from-file", "--output"], &["-u", "--include-untracked", "-a", "--all", "-k", "--keep-index", "--no-keep-index", "-p", "--patch", "-q", "--quiet", "--index", "-S", "--staged"]),
    t("git tag", &["-m", "--message", "-F", "--file", "-u", "--local-user", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format", "-n", "--cleanup"], &["-a", "--annotate", "-s", "--sign", "-d", "--delete", "-f", "--force", "-l", "--list", "-v", "--verify", "-e", "--edit", "-i", "--ignore-case"]),
    t("git show", &["--format", "--pretty", "-U", "--unified", "--output"], &["--stat", "--name-only", "--name-status", "--oneline", "-s", "--no-patch", "-p", "--patch", "--no-color", "--color", "-q", "--quiet", "--abbrev-commit", "--raw", "-w", "-m", "--first-parent"]),
    t("git remote", &["-t", "-m"], &["-v", "--verbose", "-f", "--tags", "--no-tags", "--mirror", "--push", "--add", "--delete", "--all", "-n", "--dry-run"]),
    t("git config", &["--file", "-f", "--blob", "--type", "--default", "--comment"], &["--global", "--system", "--local", "--worktree", "-l", "--list", "--get", "--get-all", "--get-regexp", "--unset", "--unset-all", "--add", "--replace-all", "--show-origin", "--show-scope", "--name-only", "-z", "--null", "--bool", "--int", "--path", "-e", "--edit", "--includes", "--no-includes"]),
    t("git worktree", &["-b", "-B", "--reason", "--expire"], &["-f", "--force", "--detach", "--checkout", "--no-checkout", "--lock", "-q", "--quiet", "--porcelain", "-v", "--verbose", "--track", "--no-track", "--guess-remote", "--orphan", "-n", "--dry-run"]),
    t("git merge", &["-m", "-F", "--file", "-s", "--strategy", "-X", "--strategy-option", "--into-name"], &["--commit", "--no-commit", "--edit", "-e", "--no-edit", "--ff", "--no-ff", "--ff-only", "--squash", "--no-squash", "--abort", "--continue", "--quit", "-q", "--quiet", "-v", "--verbose", "--stat", "-n", "--no-stat", "--autostash", "--no-autostash", "--allow-unrelated-histories", "--no-verify", "--signoff"]),
    t("git restore", &["-s", "--source", "--pathspec-from-file", "--conflict"], &["-p", "--patch", "-W", "--worktree", "-S", "--staged", "-q", "--quiet", "--progress", "--no-progress", "--ours", "--theirs", "-m", "--merge", "--ignore-unmerged", "--overlay", "--no-overlay", "--recurse-submodules"]),
    t("git rm", &["--pathspec-from-file"], &["-f", "--force", "-n", "--dry-run", "-r", "--cached", "--ignore-unmatch", "-q", "--quiet", "--sparse"]),
    t("git clone", &["-o", "--origin", "-b", "--branch", "-u", "--upload-pack", "--reference", "--depth", "--shallow-since", "--shallow-exclude", "-c", "--config", "--separate-git-dir", "-j", "--jobs", "--filter", "--template"], &["-l", "--local", "--no-hardlinks", "-s", "--shared", "-q", "--quiet", "-v", "--verbose", "--progress", "-n", "--no-checkout", "--bare", "--mirror", "--single-branch", "--no-single-branch", "--no-tags", "--recurse-submodules", "--recursive", "--sparse"]),
    // cargo(1) and its common subcommands share one option vocabulary.
    sub("cargo", &["--manifest-path", "-p", "--package", "--target", "--target-dir", "--features", "-F", "-j", "--jobs", "--bin", "--example", "--test", "--bench", "--profile", "--color", "--config", "-Z", "--message-format", "--exclude", "--lockfile-path", "--timings", "--index", "--registry", "--vers", "--version", "--git", "--branch", "--tag", "--rev", "--path", "--root", "--edition", "--name", "--vcs", "--rename", "--precise", "--format", "-e", "--invert", "--depth", "--prefix", "--token", "-C"],
        &["--release", "-r", "--all-features", "--no-default-features", "--workspace", "--all", "-q", "--quiet", "-v", "-vv", "--verbose", "--offline", "--locked", "--frozen", "--lib", "--bins", "--tests", "--benches", "--examples", "--all-targets", "--no-run", "--doc", "--no-fail-fast", "--keep-going", "--future-incompat-report", "--ignore-rust-version", "--unit-graph", "--build-plan", "-h", "--help", "--list", "--force", "-f", "--dry-run", "-n", "--no-deps", "--open", "--document-private-items", "--fix", "--allow-dirty", "--allow-staged", "--allow-no-vcs", "--tests", "--no-verify", "--check", "--locked", "--dev", "--build", "--optional", "--no-optional", "--duplicates", "-d", "--no-dedupe", "--all-targets", "--no-track"]),
    // npm(1): global config options that take values, and common boolean switches.
    sub("npm", &["--registry", "--prefix", "--location", "-w", "--workspace", "--tag", "--access", "--cache", "--otp", "--userconfig", "--globalconfig", "--loglevel", "--omit", "--include", "--install-strategy", "--script-shell", "-C"],
        &["-g", "--global", "--save-dev", "-D", "--save", "-S", "--save-optional", "-O", "--save-exact", "-E", "--save-peer", "--no-save", "--force", "-f", "--dry-run", "--production", "--ignore-scripts", "-y", "--yes", "--silent", "-s", "-q", "--quiet", "-d", "--verbose", "--json", "--parseable", "-p", "--long", "-l", "--all", "-a", "--workspaces", "--ws", "--if-present", "--no-audit", "--no-fund", "--legacy-peer-deps", "--prefer-offline", "--offline", "--ci", "--no-package-lock", "--package-lock-only", "--include-workspace-root", "-h", "--help", "-v", "--version"]).io(&NPM_IO),
    sub("pnpm", &["--filter", "-F", "--dir", "-C", "--registry", "--store-dir", "--reporter", "--workspace-root"], &["-r", "--recursive", "-w", "-g", "--global", "-D", "--save-dev", "-P", "--save-prod", "-O", "--frozen-lockfile", "--prod", "--dev", "--offline", "--prefer-offline", "--silent", "-s", "--if-present", "--ignore-scripts"]).io(&PNPM_IO),
    sub("yarn", &["--cwd", "--registry", "--cache-folder", "--modules-folder"], &["-D", "--dev", "-P", "--peer", "-O", "--optional", "-E", "--exact", "--frozen-lockfile", "--immutable", "--production", "--offline", "--prefer-offline", "--silent", "-s", "--ignore-scripts", "-W", "--ignore-workspace-root-check"]).io(&YARN_IO),
    // docker(1) / podman(1): global options and `run`/`exec`.
    sub("docker", &["-H", "--host", "--context", "-c", "--config", "-l", "--log-level", "--tlscacert", "--tlscert", "--tlskey"], &["-D", "--debug", "--tls", "--tlsverify", "-v", "--version"]),
    t("docker run", &["-v", "--volume", "-e", "--env", "-p", "--publish", "--name", "-w", "--workdir", "-u", "--user", "--network", "--net", "--entrypoint", "--mount", "--env-file", "-m", "--memory", "--cpus", "--platform", "-h", "--hostname", "--add-host", "--cap-add", "--cap-drop", "--security-opt", "--device", "-l", "--label", "--restart", "--pid", "--ipc", "--userns", "--ulimit", "--tmpfs", "--shm-size", "--log-driver", "--log-opt", "--gpus", "--pull", "--stop-signal", "--stop-timeout", "--health-cmd", "--dns", "--cidfile", "-a", "--attach", "--volumes-from", "--link", "--expose"],
        &["-d", "--detach", "--rm", "-i", "--interactive", "-t", "--tty", "--privileged", "-P", "--publish-all", "--read-only", "--init", "-q", "--quiet", "--no-healthcheck", "--sig-proxy", "--oom-kill-disable"]),
    t("docker exec", &["-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys"], &["-d", "--detach", "-i", "--interactive", "-t", "--tty", "--privileged"]),
    sub("podman", &["--url", "-c", "--connection", "--root", "--runroot", "--log-level"], &["--remote", "-r", "-v", "--version"]),
    // kubectl(1): global flags are accepted anywhere.
    sub("kubectl", &["-n", "--namespace", "--context", "-f", "--filename", "-l", "--selector", "-o", "--output", "--kubeconfig", "-c", "--container", "--cluster", "--user", "-s", "--server", "--token", "--field-selector", "--sort-by", "--timeout", "--grace-period", "--replicas", "--image", "--type", "--port", "--from-literal", "--from-file", "--as", "--as-group", "--cache-dir", "--request-timeout", "-k", "--kustomize", "--dry-run", "--template", "--since", "--tail"],
        &["-A", "--all-namespaces", "-w", "--watch", "--force", "--all", "-R", "--recursive", "-i", "--stdin", "-t", "--tty", "--show-labels", "--wide", "-p", "--previous", "--now", "--insecure-skip-tls-verify", "--overwrite", "--record"]),
    // curl(1): the options agents use; most curl options take a value.
    t("curl", &["-X", "--request", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "--data-ascii", "--json", "-o", "--output", "-u", "--user", "-A", "--user-agent", "-e", "--referer", "-b", "--cookie", "-c", "--cookie-jar", "-F", "--form", "--form-string", "-T", "--upload-file", "-x", "--proxy", "--connect-timeout", "-m", "--max-time", "-w", "--write-out", "-K", "--config", "--url", "--resolve", "--connect-to", "--cacert", "--capath", "--cert", "-E", "--key", "-r", "--range", "-U", "--proxy-user", "--retry", "--retry-delay", "--retry-max-time", "-Y", "--speed-limit", "-y", "--speed-time", "-z", "--time-cond", "--limit-rate", "--max-filesize", "--max-redirs", "--interface", "--dns-servers", "--doh-url", "-D", "--dump-header", "--trace", "--trace-ascii", "--stderr", "--output-dir", "-Q", "--quote", "--noproxy", "--oauth2-bearer", "--unix-socket", "--abstract-unix-socket", "--variable", "--expand-url", "-P", "--ftp-port", "--ciphers", "--tls-max", "--pinnedpubkey", "--aws-sigv4", "--proto", "--proto-redir", "--url-query", "--etag-save", "--etag-compare", "--hsts", "--alt-svc", "--netrc-file"],
        &["-s", "--silent", "-S", "--show-error", "-L", "--location", "-k", "--insecure", "-f", "--fail", "--fail-with-body", "-v", "--verbose", "-i", "--include", "-I", "--head", "-O", "--remote-name", "-J", "--remote-header-name", "-N", "--no-buffer", "-#", "--progress-bar", "--compressed", "-G", "--get", "-g", "--globoff", "-4", "--ipv4", "-6", "--ipv6", "-n", "--netrc", "--netrc-optional", "-l", "--list-only", "-a", "--append", "-R", "--remote-time", "-Z", "--parallel", "--http1.1", "--http2", "--http3", "--create-dirs", "--location-trusted", "--no-keepalive", "--tcp-nodelay", "-q", "--disable", "-h", "--help", "-V", "--version", "-j", "--junk-session-cookies", "-p", "--proxytunnel", "--ssl-reqd", "--tlsv1.2", "--tlsv1.3", "--raw", "--path-as-is", "--remote-name-all", "--xattr"]),
    t("wget", &["-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P", "--directory-prefix", "--header", "-U", "--user-agent", "-t", "--tries", "-T", "--timeout", "-i", "--input-file", "-e", "--execute", "--user", "--password", "-l", "--level", "-A", "--accept", "-R", "--reject", "-D", "--domains", "--post-data", "--post-file", "--method", "--body-data", "--limit-rate", "-w", "--wait", "-Q", "--quota", "--load-cookies", "--save-cookies", "--ca-certificate", "--certificate", "--private-key"],
        &["-q", "--quiet", "-c", "--continue", "-r", "--recursive", "-N", "--timestamping", "-nv", "--no-verbose", "-np", "--no-parent", "-k", "--convert-links", "-m", "--mirror", "-p", "--page-requisites", "-b", "--background", "-v", "--verbose", "-S", "--server-response", "--spider", "-x", "--force-directories", "-nd", "--no-directories", "-nc", "--no-clobber", "--no-check-certificate", "-4", "-6", "-h", "--help", "-V", "--version"]),
    // coreutils and friends whose options never take a separate value unless listed.
    closed("rm", &[], &["-r", "-R", "--recursive", "-f", "--force", "-i", "-I", "--interactive", "-v", "--verbose", "-d", "--dir", "--one-file-system", "--no-preserve-root", "--preserve-root", "--help", "--version"]),
    closed("rmdir", &[], &["-p", "--parents", "-v", "--verbose", "--ignore-fail-on-non-empty"]),
    closed("chmod", &["--reference"], &["-R", "--recursive", "-v", "--verbose", "-c", "--changes", "-f", "--silent", "--quiet", "--preserve-root", "--no-preserve-root", "-h", "--no-dereference", "-H", "-L", "-P"]),
    closed("chown", &["--from", "--reference"], &["-R", "--recursive", "-h", "--no-dereference", "--dereference", "-v", "--verbose", "-c", "--changes", "-f", "--silent", "--quiet", "--preserve-root", "--no-preserve-root", "-H", "-L", "-P"]),
    closed("chgrp", &["--reference"], &["-R", "--recursive", "-h", "--no-dereference", "--dereference", "-v", "--verbose", "-c", "--changes", "-f", "--silent", "--quiet", "--preserve-root", "--no-preserve-root", "-H", "-L", "-P"]),
    closed("cp", &["-t", "--target-directory", "-S", "--suffix", "--backup", "--preserve", "--no-preserve", "--sparse", "--reflink"], &["-r", "-R", "--recursive", "-a", "--archive", "-f", "--force", "-i", "--interactive", "-n", "--no-clobber", "-v", "--verbose", "-p", "-u", "--update", "-l", "--link", "-s", "--symbolic-link", "-L", "--dereference", "-P", "--no-dereference", "-d", "-H", "-T", "--no-target-directory", "-x", "--one-file-system", "--parents", "--remove-destination", "--strip-trailing-slashes", "-b", "--attributes-only", "--debug", "-Z"]),
    closed("mv", &["-t", "--target-directory", "-S", "--suffix", "--backup"], &["-f", "--force", "-i", "--interactive", "-n", "--no-clobber", "-v", "--verbose", "-u", "--update", "-T", "--no-target-directory", "-b", "--strip-trailing-slashes", "--exchange", "--no-copy", "--debug", "-Z"]),
    closed("ln", &["-t", "--target-directory", "-S", "--suffix", "--backup"], &["-s", "--symbolic", "-f", "--force", "-n", "--no-dereference", "-v", "--verbose", "-i", "--interactive", "-r", "--relative", "-L", "--logical", "-P", "--physical", "-T", "--no-target-directory", "-b", "-d", "-F", "--directory"]),
    closed("mkdir", &["-m", "--mode", "--context"], &["-p", "--parents", "-v", "--verbose", "-Z"]),
    closed("touch", &["-d", "--date", "-r", "--reference", "-t", "--time"], &["-a", "-c", "--no-create", "-f", "-h", "--no-dereference", "-m"]),
    closed("ls", &["-I", "--ignore", "-w", "--width", "-T", "--tabsize", "--color", "--format", "--sort", "--time", "--time-style", "--block-size", "--hide", "--indicator-style", "--quoting-style"],
        &["-a", "--all", "-A", "--almost-all", "-l", "-h", "--human-readable", "-t", "-r", "--reverse", "-R", "--recursive", "-S", "-1", "-d", "--directory", "-F", "--classify", "-i", "--inode", "-s", "--size", "-G", "--no-group", "-n", "--numeric-uid-gid", "-o", "-g", "-p", "-Q", "--quote-name", "-c", "-u", "-U", "-v", "-X", "-x", "-C", "-m", "-k", "-L", "--dereference", "-H", "-N", "--literal", "-q", "-b", "--escape", "--group-directories-first", "--full-time", "--si", "-Z", "--context", "--author"]),
    closed("cat", &[], &["-A", "--show-all", "-b", "--number-nonblank", "-e", "-E", "--show-ends", "-n", "--number", "-s", "--squeeze-blank", "-t", "-T", "--show-tabs", "-u", "-v", "--show-nonprinting"]),
    closed("head", &["-n", "--lines", "-c", "--bytes"], &["-q", "--quiet", "--silent", "-v", "--verbose", "-z", "--zero-terminated"]),
    closed("tail", &["-n", "--lines", "-c", "--bytes", "-s", "--sleep-interval", "--pid", "--max-unchanged-stats"], &["-f", "--follow", "-F", "-q", "--quiet", "--silent", "-v", "--verbose", "-z", "--zero-terminated", "--retry"]),
    closed("grep", &["-e", "--regexp", "-f", "--file", "-m", "--max-count", "-A", "--after-context", "-B", "--before-context", "-C", "--context", "--include", "--exclude", "--exclude-dir", "--exclude-from", "--label", "--color", "--colour", "-d", "--directories", "-D", "--devices", "--binary-files", "--group-separator"],
        &["-i", "--ignore-case", "-v", "--invert-match", "-r", "--recursive", "-R", "--dereference-recursive", "-n", "--line-number", "-l", "--files-with-matches", "-L", "--files-without-match", "-c", "--count", "-o", "--only-matching", "-q", "--quiet", "--silent", "-s", "--no-messages", "-E", "--extended-regexp", "-F", "--fixed-strings", "-G", "--basic-regexp", "-P", "--perl-regexp", "-w", "--word-regexp", "-x", "--line-regexp", "-h", "--no-filename", "-H", "--with-filename", "-a", "--text", "-I", "-z", "--null-data", "-Z", "--null", "-b", "--byte-offset", "-T", "--initial-tab", "-U", "--binary", "--line-buffered", "--no-ignore-case", "-y"]),
    closed("wc", &["--files0-from"], &["-c", "--bytes", "-m", "--chars", "-l", "--lines", "-L", "--max-line-length", "-w", "--words", "--total"]),
    closed("echo", &[], &["-n", "-e", "-E"]),
    // sed(1): `-i[SUFFIX]` and `--in-place[=SUFFIX]` take their suffix attached only; `-s` is
    // `--separate`, a flag.
    closed("sed", &["-e", "--expression", "-f", "--file", "-l", "--line-length"], &["-n", "--quiet", "--silent", "-i", "--in-place", "-s", "--separate", "-E", "-r", "--regexp-extended", "-z", "--null-data", "--zero-terminated", "-u", "--unbuffered", "-b", "--binary", "--posix", "--debug", "--sandbox", "--follow-symlinks", "--help", "--version"]).io(&SED_IO),
    t("tar", &["-f", "--file", "-C", "--directory", "-T", "--files-from", "-X", "--exclude-from", "--exclude", "-I", "--use-compress-program", "--transform", "--owner", "--group", "--mode", "--strip-components", "-b", "--blocking-factor", "-N", "--newer", "--format", "-H", "-K", "--starting-file", "-V", "--label"],
        &["-c", "--create", "-x", "--extract", "--get", "-t", "--list", "-r", "--append", "-u", "--update", "-d", "--diff", "--delete", "-v", "--verbose", "-z", "--gzip", "-j", "--bzip2", "-J", "--xz", "--zstd", "-a", "--auto-compress", "-p", "--preserve-permissions", "-P", "--absolute-names", "-k", "--keep-old-files", "--overwrite", "-O", "--to-stdout", "-h", "--dereference", "-m", "--touch", "-S", "--sparse", "-W", "--verify", "--numeric-owner", "--no-same-owner", "--same-owner", "-o", "--remove-files", "--recursive", "--no-recursion", "-w", "--interactive"]),
    t("ssh", &["-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R", "-S", "-W", "-w", "-B"], &["-4", "-6", "-A", "-a", "-C", "-f", "-G", "-g", "-K", "-k", "-M", "-N", "-n", "-q", "-s", "-T", "-t", "-V", "-v", "-X", "-x", "-Y", "-y"]),
    t("scp", &["-c", "-D", "-F", "-i", "-J", "-l", "-o", "-P", "-S", "-X"], &["-3", "-4", "-6", "-A", "-B", "-C", "-O", "-p", "-q", "-R", "-r", "-s", "-T", "-v"]),
    t("rsync", &["-e", "--rsh", "--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--filter", "-f", "--chmod", "--chown", "--timeout", "--bwlimit", "--log-file", "--rsync-path", "--backup-dir", "--suffix", "-T", "--temp-dir", "--compare-dest", "--copy-dest", "--link-dest", "-B", "--block-size", "--max-size", "--min-size", "--port", "--password-file"],
        &["-a", "--archive", "-v", "--verbose", "-z", "--compress", "-r", "--recursive", "-n", "--dry-run", "--delete", "--delete-before", "--delete-during", "--delete-after", "--delete-excluded", "-P", "--progress", "--partial", "-h", "--human-readable", "-u", "--update", "-c", "--checksum", "-l", "--links", "-L", "--copy-links", "-p", "--perms", "-t", "--times", "-g", "--group", "-o", "--owner", "-D", "-H", "--hard-links", "-A", "--acls", "-X", "--xattrs", "-x", "--one-file-system", "-q", "--quiet", "--stats", "-i", "--itemize-changes", "--remove-source-files", "-R", "--relative", "-b", "--backup", "-W", "--whole-file", "--inplace", "--append", "-S", "--sparse", "--no-perms", "--no-owner", "--no-group", "--ignore-existing", "--existing", "--mkpath"]),
    t("pip", &["-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t", "--target", "--prefix", "--root", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--python", "--cache-dir", "--log", "--proxy", "--timeout", "--retries", "--trusted-host", "--platform", "--python-version", "--implementation", "--abi", "--only-binary", "--no-binary", "--progress-bar", "--report", "--config-settings", "-C", "--src", "--upgrade-strategy", "--format"],
        &["-U", "--upgrade", "--user", "--force-reinstall", "-I", "--ignore-installed", "--no-deps", "--pre", "-q", "--quiet", "-v", "--verbose", "--no-cache-dir", "--dry-run", "-y", "--yes", "--break-system-packages", "--no-index", "--isolated", "--require-hashes", "--no-build-isolation", "--no-warn-script-location", "--disable-pip-version-check", "-l", "--local", "-o", "--outdated", "-u", "--uptodate", "--not-required", "--json"]),
    t("python", &["-c", "-m", "-W", "-X", "--check-hash-based-pycs"], &["-b", "-B", "-d", "-E", "-h", "-i", "-I", "-O", "-OO", "-P", "-q", "-s", "-S", "-u", "-v", "-V", "-x", "--version", "--help"]),
    t("python3", &["-c", "-m", "-W", "-X", "--check-hash-based-pycs"], &["-b", "-B", "-d", "-E", "-h", "-i", "-I", "-O", "-OO", "-P", "-q", "-s", "-S", "-u", "-v", "-V", "-x", "--version", "--help"]),
    t("node", &["-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader", "--experimental-loader", "--input-type", "--env-file", "--conditions", "-C", "--inspect-port", "--max-old-space-size", "--stack-size", "--title"], &["-i", "--interactive", "-c", "--check", "-v", "--version", "-h", "--help", "--inspect", "--inspect-brk", "--test", "--watch", "--no-warnings", "--trace-warnings", "--enable-source-maps", "--experimental-vm-modules", "--preserve-symlinks"]),
    sub("gh", &["-R", "--repo", "--hostname", "-t", "--title", "-b", "--body", "-F", "--body-file", "-B", "--base", "-H", "--head", "-l", "--label", "-a", "--assignee", "-r", "--reviewer", "-m", "--milestone", "-p", "--project", "-L", "--limit", "-s", "--state", "--json", "-q", "--jq", "--template", "-X", "--method", "-f", "--raw-field", "--field", "--input", "--cache", "-A", "--author", "-S", "--search", "--workflow", "-e", "--env", "-o", "--org", "--branch", "-c", "--commit", "--ref"],
        &["--web", "-d", "--draft", "--fill", "--fill-first", "--fill-verbose", "--paginate", "--slurp", "-i", "--include", "--silent", "--verbose", "--merge", "--squash", "--rebase", "--auto", "--admin", "--delete-branch", "--yes", "-y", "--force", "--dry-run", "--no-maintainer-edit", "--approve", "--comment", "--request-changes"]),
    // gh auth: `status -t` is `--show-token`, not gh's `--title`.
    t("gh auth", &["-h", "--hostname", "-p", "--git-protocol", "-s", "--scopes", "-r", "--remove-scopes", "-u", "--user", "--json", "-q", "--jq", "--template"],
        &["-t", "--show-token", "-a", "--active", "-w", "--web", "--with-token", "--insecure-storage", "--skip-ssh-key", "-c", "--clipboard", "--reset-scopes", "-f", "--force"]),
    // go(1) reads single-dash words whole (`-toolexec`, `-o=FILE`), like the flag package.
    sub("go", &["-C", "-o", "-p", "-run", "-bench", "-count", "-timeout", "-tags", "-ldflags", "-gcflags", "-asmflags", "-mod", "-modfile", "-pkgdir", "-coverprofile", "-coverpkg", "-covermode", "-cpu", "-parallel", "-benchtime", "-memprofile", "-cpuprofile", "-exec", "-toolexec", "-vettool", "-blockprofile", "-mutexprofile", "-trace", "-outputdir", "-overlay", "-buildmode", "-compiler", "-installsuffix", "-skip", "-shuffle", "-fuzz", "-fuzztime", "-f"],
        &["-v", "-x", "-n", "-a", "-race", "-msan", "-asan", "-cover", "-short", "-failfast", "-json", "-u", "-d", "-t", "-i", "-benchmem", "-trimpath", "-work", "-modcacherw", "-buildvcs", "-linkshared", "-insecure", "-fix", "-m", "-l", "-w", "-e", "-s"]).single_dash().io(&GO_IO),
    single("find", &["-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type", "-xtype", "-size", "-perm", "-user", "-group", "-uid", "-gid", "-newer", "-anewer", "-cnewer", "-mtime", "-atime", "-ctime", "-mmin", "-amin", "-cmin", "-maxdepth", "-mindepth", "-links", "-inum", "-samefile", "-lname", "-ilname", "-fstype", "-used", "-printf", "-fprintf", "-fprint", "-fprint0", "-fls", "-regextype", "-context", "-files0-from", "-D", "-O"],
        &["-delete", "-print", "-print0", "-ls", "-prune", "-quit", "-empty", "-executable", "-readable", "-writable", "-true", "-false", "-depth", "-mount", "-xdev", "-noleaf", "-follow", "-nouser", "-nogroup", "-not", "-and", "-or", "-a", "-o", "-P", "-L", "-H", "-daystart", "-ignore_readdir_race", "-noignore_readdir_race", "-warn", "-nowarn", "-help", "-version"]),
    t("make", &["-C", "--directory", "-f", "--file", "--makefile", "-I", "--include-dir", "-j", "--jobs", "-l", "--load-average", "-o", "--old-file", "--assume-old", "-W", "--what-if", "--new-file", "--assume-new", "-O", "--output-sync", "--eval", "--debug"], &["-B", "--always-make", "-d", "-e", "--environment-overrides", "-i", "--ignore-errors", "-k", "--keep-going", "-n", "--just-print", "--dry-run", "--recon", "-p", "--print-data-base", "-q", "--question", "-r", "--no-builtin-rules", "-R", "--no-builtin-variables", "-s", "--silent", "--quiet", "-S", "--no-keep-going", "--stop", "-t", "--touch", "-v", "--version", "-w", "--print-directory", "--no-print-directory", "--trace"]),
    // Text tools that write a file named in their arguments (see the `Io` statics above).
    closed("sort", &["-k", "--key", "-t", "--field-separator", "-o", "--output", "-S", "--buffer-size", "-T", "--temporary-directory", "--batch-size", "--parallel", "--files0-from", "--random-source", "--compress-program", "--sort"],
        &["-b", "--ignore-leading-blanks", "-d", "--dictionary-order", "-f", "--ignore-case", "-g", "--general-numeric-sort", "-i", "--ignore-nonprinting", "-M", "--month-sort", "-h", "--human-numeric-sort", "-n", "--numeric-sort", "-R", "--random-sort", "-r", "--reverse", "-V", "--version-sort", "-c", "--check", "-C", "-m", "--merge", "-s", "--stable", "-u", "--unique", "-z", "--zero-terminated", "--debug", "--help", "--version"]).io(&SORT_IO),
    closed("uniq", &["-f", "--skip-fields", "-s", "--skip-chars", "-w", "--check-chars"], &["-c", "--count", "-d", "--repeated", "-D", "--all-repeated", "--group", "-i", "--ignore-case", "-u", "--unique", "-z", "--zero-terminated", "--help", "--version"]).io(&UNIQ_IO),
    closed("tee", &[], &["-a", "--append", "-i", "--ignore-interrupts", "-p", "--output-error", "--help", "--version"]).io(&TEE_IO),
    // tree(1) takes the values of a cluster's options from the following arguments in turn.
    t("tree", &["-L", "-P", "-I", "-o", "-H", "-T", "--charset", "--filelimit", "--timefmt", "--sort", "--gitfile", "--infofile", "--hintro", "--houtro"],
        &["-a", "-d", "-l", "-f", "-x", "-q", "-N", "-Q", "-p", "-u", "-g", "-s", "-h", "-D", "-F", "-v", "-t", "-c", "-U", "-r", "-C", "-n", "-i", "-A", "-S", "-X", "-J", "-R", "--inodes", "--device", "--noreport", "--nolinks", "--dirsfirst", "--filesfirst", "--si", "--du", "--prune", "--ignore-case", "--matchdirs", "--fromfile", "--gitignore", "--info", "--metafirst", "--help", "--version"]).io(&TREE_IO),
    // xxd(1) reads single-dash words whole; its `-o` is an offset.
    single("xxd", &["-c", "-cols", "-g", "-groupsize", "-l", "-len", "-n", "-name", "-o", "-offset", "-s", "-seek", "-R"],
        &["-a", "-autoskip", "-b", "-bits", "-C", "-capitalize", "-d", "-E", "-EBCDIC", "-e", "-h", "-help", "-i", "-include", "-p", "-ps", "-postscript", "-plain", "-r", "-revert", "-u", "-uppercase", "-v", "-version"]).closed().io(&XXD_IO),
    t("yq", &["-o", "--output-format", "-p", "--input-format", "-I", "--indent", "--expression", "--from-file", "--front-matter", "--arg", "--argjson"], &["-i", "--inplace", "-n", "--null-input", "-e", "--exit-status", "-r", "--unwrapScalar", "-M", "--no-colors", "-C", "--colors", "-P", "--prettyPrint", "-j", "--tojson", "-s", "--slurp"]).io(&YQ_IO),
    // Compilers and the linker (single-dash words whole: `-Wall`, `-O2`).
    single("gcc", CC_VALUES, &[]).io(&CC_IO),
    single("g++", CC_VALUES, &[]).io(&CC_IO),
    single("cc", CC_VALUES, &[]).io(&CC_IO),
    single("c++", CC_VALUES, &[]).io(&CC_IO),
    single("clang", CC_VALUES, &[]).io(&CC_IO),
    single("clang++", CC_VALUES, &[]).io(&CC_IO),
    t("ld", &["-o", "--output", "-L", "--library-path", "-l", "--library", "-T", "--script", "-e", "--entry", "-m", "-z", "-soname", "-rpath", "-Map", "--dynamic-linker", "-plugin"], &[]).io(&LD_IO),
    t("rustc", &["-o", "--out-dir", "--emit", "-C", "--codegen", "-L", "-l", "--crate-type", "--crate-name", "--edition", "--target", "-W", "--warn", "-A", "--allow", "-D", "--deny", "-F", "--forbid", "--cap-lints", "--cfg", "--check-cfg", "--print", "--explain", "--extern", "--sysroot", "--error-format", "--json", "--color", "--remap-path-prefix", "-Z"],
        &["-g", "-O", "--test", "-v", "--verbose", "-V", "--version", "-h", "--help"]).io(&RUSTC_IO),
    t("dd", &[], &[]).io(&DD_IO),
    t("sudo", &["-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user", "-R", "--chroot"], &["-A", "--askpass", "-b", "--background", "-E", "--preserve-env", "-H", "--set-home", "-i", "--login", "-K", "--remove-timestamp", "-k", "--reset-timestamp", "-l", "--list", "-n", "--non-interactive", "-P", "--preserve-groups", "-S", "--stdin", "-s", "--shell", "-V", "--version", "-v", "--validate", "-e", "--edit", "-B", "--bell", "-N", "--no-update"]),
    t("systemctl", &["-t", "--type", "--state", "-p", "--property", "-H", "--host", "-M", "--machine", "-n", "--lines", "-o", "--output", "--signal", "-s", "--kill-whom", "--root", "--job-mode"], &["-a", "--all", "-r", "--recursive", "--user", "--system", "--global", "--now", "--force", "-f", "-q", "--quiet", "--no-block", "--no-pager", "--no-legend", "--runtime", "-l", "--full", "--failed", "-i", "--ignore-inhibitors", "--dry-run", "--no-reload", "--no-ask-password", "--show-types"]),
];

/// Each table's listed options, by name (values win over flags, as in [`arity`]); a
/// table's map is built when the table is first used. The matcher asks for every option of
/// every reading, and scanning the lists (a hundred options for `docker run`) showed in
/// profiles; building every map at once (2,500 options) cost 0.13 ms of process start.
fn option_maps() -> &'static [OnceLock<HashMap<&'static str, Arity>>] {
    static MAPS: OnceLock<Vec<OnceLock<HashMap<&'static str, Arity>>>> = OnceLock::new();
    MAPS.get_or_init(|| TABLES.iter().map(|_| OnceLock::new()).collect())
}

/// The listed options of `t`: from its map when `t` is one of [`TABLES`].
fn listed_arity(t: &'static Table, opt: &str) -> Option<Arity> {
    let size = std::mem::size_of::<Table>();
    let i = (t as *const Table as usize).wrapping_sub(TABLES.as_ptr() as usize) / size;
    if TABLES.get(i).is_some_and(|x| std::ptr::eq(x, t)) {
        let opts = option_maps()[i].get_or_init(|| {
            let mut m = HashMap::with_capacity(t.value.len() + t.flags.len());
            for f in t.flags {
                m.insert(*f, Arity::Flag);
            }
            for v in t.value {
                m.insert(*v, Arity::Value);
            }
            m
        });
        return opts.get(opt).copied();
    }
    // A table built elsewhere: search its lists.
    if t.value.contains(&opt) {
        Some(Arity::Value)
    } else if t.flags.contains(&opt) {
        Some(Arity::Flag)
    } else {
        None
    }
}

/// Find the table for `name` (a basename), or for `name sub`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// The subcommand table for `cmd sub`, if any.
pub fn sub_table(cmd: &str, sub: &str) -> Option<&'static Table> {
    // Compared in place, no string built (this runs once per reading).
    let n = cmd.len();
    TABLES.iter().find(|t| {
        t.name.len() == n + 1 + sub.len()
            && t.name.as_bytes()[n] == b' '
            && t.name.starts_with(cmd)
            && t.name.ends_with(sub)
    })
}

/// What is known of one option in a command's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Takes a value (the rest of a short cluster, `=v`, or the next argument).
    Value,
    /// Never takes a separate value.
    Flag,
    /// Not known: both readings are possible.
    Unknown,
}

/// How the tables in force list `opt`, innermost first; `None` when none lists it (it may
/// still be a flag by a closed table, see [`arity`]).
pub fn listing(tables: &[&'static Table], opt: &str) -> Option<Arity> {
    tables.iter().rev().find_map(|t| listed_arity(t, opt))
}

/// What an option no table in force lists is: a flag under a closed table, else unknown.
pub fn unlisted(tables: &[&'static Table]) -> Arity {
    if tables.last().is_some_and(|t| t.closed) { Arity::Flag } else { Arity::Unknown }
}

/// Whether `opt` is listed (not merely implied by a closed table) in the tables in force.
pub fn listed(tables: &[&'static Table], opt: &str) -> bool {
    listing(tables, opt).is_some()
}

/// Look `opt` (`-C`, `--force`) up in the tables in force, innermost first.
pub fn arity(tables: &[&'static Table], opt: &str) -> Arity {
    listing(tables, opt).unwrap_or_else(|| unlisted(tables))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option maps answer as a search of the lists would.
    #[test]
    fn option_maps_agree_with_a_search() {
        for t in TABLES {
            for o in t.value.iter().chain(t.flags).chain(["--not-an-option", "-Z9"].iter()) {
                let searched = if t.value.contains(o) {
                    Some(Arity::Value)
                } else if t.flags.contains(o) {
                    Some(Arity::Flag)
                } else {
                    None
                };
                assert_eq!(listing(&[t], o), searched, "{} {o}", t.name);
            }
        }
    }

    #[test]
    fn no_option_is_both_value_and_flag_in_one_table() {
        for t in TABLES {
            for v in t.value {
                assert!(!t.flags.contains(v), "{} lists {v} as both value and flag", t.name);
            }
            for o in t.value.iter().chain(t.flags) {
                assert!(o.starts_with('-'), "{}: `{o}` is not an option", t.name);
            }
        }
    }

    #[test]
    fn table_names_are_unique() {
        let mut names: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn lookups() {
        let git = table("git").unwrap();
        let push = sub_table("git", "push").unwrap();
        assert_eq!(arity(&[git], "-C"), Arity::Value);
        assert_eq!(arity(&[git, push], "-f"), Arity::Flag);
        assert_eq!(arity(&[git, push], "--frobnicate"), Arity::Unknown);
        assert_eq!(arity(&[table("rm").unwrap()], "--whatever"), Arity::Flag);
    }
}
