//! `pinfold`: the command line. Thin glue: parse flags, load configuration, call the crates,
//! map outcomes to exit codes and output. Exit codes are documented in [`exit`]. The binary
//! (`main.rs`) is the process's start-up around [`run_main`]; [`hook::answer_in_process`] is
//! here for the fuzz targets (`fuzz/`).

/// `eprintln!` that cannot panic: a line for a person on standard error. A closed or full
/// stderr loses the line, never the answer (`eprintln!` panics when the write fails, and a
/// panic would turn a refusal or an agent's blocking answer into a crash).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod audit;
mod check;
mod errors;
mod exec;
mod exit;
pub mod hook;
mod image;
#[cfg(feature = "server")]
mod mcp;
#[cfg(feature = "server")]
mod serve;
mod undo;

/// Text for a terminal: control characters (escape sequences, carriage returns, newlines a
/// name or a command may hold) shown as `\u{..}`, so nothing printed can rewrite the screen
/// or fake a line (found by an outside attack: a refused `rm -rf ~` shown by `pinfold audit
/// tail` as an allowed `git status`).
pub(crate) fn shown(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { format!("\\u{{{:x}}}", c as u32) } else { c.to_string() }).collect()
}

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use clap::{Args, Parser, Subcommand};
use pinfold_plan::{trust, Dirs, Error};
use pinfold_policy::config::{self, LoadOptions};
use pinfold_policy::Policy;

/// Let AI agents run shell commands without wrecking the machine.
///
/// pinfold parses a command the way bash would, splits it into the simple commands it
/// would run, and judges each against allow / ask / deny rules. What it cannot parse or
/// resolve is never allowed.
#[derive(Debug, Parser)]
#[command(name = "pinfold", version, max_term_width = 100, after_help = exit::SUMMARY)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge a command against the policy: allow, ask or deny, and why.
    ///
    /// Give the command as one argument, read as shell text (`pinfold check -- 'git status &&
    /// make'`); as several arguments, an argv that pinfold quotes word by word (so
    /// `pinfold check -- rm -rf 'my dir'` names one directory); or on standard input.
    ///
    /// Options go before the command: every argument from the command's first word on is part
    /// of the command, so `pinfold check ls --json` judges `ls --json`.
    #[command(after_help = exit::CHECK)]
    Check(CheckArgs),
    /// Check policy files for mistakes without judging anything.
    ///
    /// With FILE, checks that file (and what it extends); otherwise the files pinfold would
    /// load in the working directory. Prints what was loaded.
    #[command(after_help = "Exit status: 0 the policy is valid, 2 usage or configuration error.")]
    Validate(FileArgs),
    /// Run the policy's own tests: each rule's `tests` and every `[[tests]]` case.
    ///
    /// Failures name the rule's location, the command, and the verdict it got instead.
    #[command(after_help = "Exit status: 0 every test passed, 1 a test failed, 2 usage or configuration error.")]
    Test(FileArgs),
    /// Judge a command, then run it in a sandbox the kernel enforces.
    ///
    /// The command runs only if the policy allows it, inside the sandbox preset the policy
    /// names: writes only under the preset's writable roots, denied paths read-only or hidden,
    /// network off unless the preset allows it, secrets removed from the environment. If the
    /// kernel cannot enforce that, nothing runs.
    #[command(after_help = exit::EXEC)]
    Exec(exec::ExecArgs),
    /// Report what this machine's kernel can enforce, and which agents' hooks guard them
    /// (installed, runnable, failing closed), and what to change where not.
    #[command(after_help = "Exit status: 0 every layer is available and every agent in use is guarded, 1 a layer is missing or an agent is not guarded (see `agent hooks`).")]
    Doctor(exec::DoctorArgs),
    /// Make images for the container backend without a registry: import an OCI layout or a
    /// rootfs tarball (verified, unpacked safely), or build a small busybox image.
    Image(image::ImageArgs),
    /// Inspect the configuration format.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Answer an agent's pre-tool hook: allow, ask or deny, sandboxing what needs it.
    ///
    /// Shell commands come back rewritten so that each part that needs a sandbox runs in
    /// `pinfold exec` (see docs/hooks.md).
    #[command(after_help = "Exit status: 0 decided (the answer is on stdout), 2 the input or the policy could not be read: the agent blocks the call.")]
    Hook(hook::HookArgs),
    /// Install `pinfold hook <agent>` into an agent's settings file.
    ///
    /// Keeps everything else in the file; running it twice changes nothing; a file that is not
    /// valid JSON is refused, not overwritten. Without --agent, installs for every agent whose
    /// settings directory exists in the scope.
    #[command(after_help = "Exit status: 0 installed (or already installed), 2 usage error or a settings file that cannot be read or written.")]
    Init(hook::init::InitArgs),
    /// Turn another tool's permission rules into pinfold rules (printed as TOML).
    #[command(after_help = "Exit status: 0 printed, 2 usage error or a settings file that cannot be read.")]
    Import(hook::import::ImportArgs),
    /// Read and verify the audit ledger: every decision pinfold recorded, hash-chained and
    /// signed (docs/ledger.md).
    Audit(audit::AuditArgs),
    /// Approve project policy files that a sandboxed command could have written.
    ///
    /// pinfold does not read a project policy file created or changed while `pinfold exec`
    /// let a sandboxed command write its directory: it may be the agent's, not yours. Read
    /// the file, then run this outside any sandbox to approve its present content (a later
    /// change needs approving again). With no FILE, the project policy files pinfold would
    /// load in the working directory.
    #[command(after_help = "Exit status: 0 approved, 2 usage error or a file that cannot be read.")]
    Trust(TrustArgs),
    /// Put back what the most recent sandboxed command changed in the project.
    ///
    /// Before each change a sandboxed command makes in a git project, pinfold keeps what the
    /// path held (files git ignores inside ignored directories, such as `target/`, are left
    /// out). `pinfold undo` puts the paths the last command changed back as they were and
    /// says what it did; `pinfold undo N` goes back N commands; `--list` shows them. What an
    /// undo replaces is kept too: `--redo` takes the undo back. See docs/undo.md.
    #[command(after_help = "Exit status: 0 done (or listed), 1 nothing to undo, 2 no undo here (not a git repository), a command still running, or the store or ledger could not be used.")]
    Undo(undo::UndoArgs),
    /// Run the governed server: REST (and MCP) for agents that are not local CLIs, with
    /// approvals a person answers. See docs/server.md.
    ///
    /// Prints `listening on http://HOST:PORT` first. State (tokens, sandboxes, approvals)
    /// lives in the state directory and survives restarts. `pinfold serve token add NAME
    /// --role agent|operator` makes a token.
    #[command(after_help = "Exit status: 0 stopped by SIGINT or SIGTERM (or the token command succeeded), 2 the server could not start.")]
    #[cfg(feature = "server")]
    Serve(serve::ServeArgs),
    /// List and decide the approvals of a running server (PINFOLD_SERVER, PINFOLD_TOKEN).
    #[command(after_help = "Exit status: 0 done, 2 the server refused or could not be reached.")]
    #[cfg(feature = "server")]
    Approvals(serve::ApprovalsArgs),
    /// MCP over stdio for an MCP client (an `mcpServers` entry): a thin client of a running
    /// `pinfold serve` (PINFOLD_SERVER, PINFOLD_TOKEN). See docs/server.md, "MCP".
    ///
    /// Reads JSON-RPC messages from standard input, one per line, sends each to the server's
    /// /mcp with the token, and writes the answers to standard output, one per line. The
    /// server judges, runs and records every call.
    #[command(after_help = "Exit status: 0 standard input ended, 2 PINFOLD_TOKEN is not set or PINFOLD_SERVER is not http://HOST:PORT.")]
    #[cfg(feature = "server")]
    Mcp(mcp::McpArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the JSON Schema of policy files (TOML, YAML and JSON share it).
    Schema,
}

#[derive(Debug, Args, PartialEq)]
struct CheckArgs {
    /// Use only this policy file (plus what it extends), not the global and project files.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Judge as if run in DIR: where the project policy is found and relative paths point.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Print the verdict as JSON.
    #[arg(long, conflicts_with = "explain")]
    json: bool,
    /// Print every simple command found, its verdict and the rules that matched.
    #[arg(long)]
    explain: bool,
    /// The command: one argument is shell text, several are an argv. Omit to read stdin.
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct TrustArgs {
    /// Policy files to approve; default: the project's, found from the working directory.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct FileArgs {
    /// The policy file; default: the files pinfold would load here.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// The same as FILE, spelled as for `check`.
    #[arg(short = 'c', long = "config", value_name = "FILE", conflicts_with = "file")]
    config: Option<PathBuf>,
    /// Look for policy files as if run in DIR.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
}

/// Everything `pinfold` does after the process's start-up (`main.rs`): route the sandbox
/// helper, read the arguments, run the command, exit with its status.
pub fn run_main() -> std::convert::Infallible {
    // The sandbox re-executes pinfold as its helper: route that before any flag parsing.
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some(pinfold_sandbox::HELPER_ARG) {
        pinfold_sandbox::helper_main(&raw[2..]);
    }
    // `check`, `exec` and `hook` run for every command an agent runs: their arguments are
    // read by clap from the one definition, but without building the whole command tree
    // (see `one_subcommand`). Anything else, help and every error included, is the whole
    // tree's to parse and to word.
    let args = raw.get(1..).unwrap_or_default();
    let command = one_subcommand(args).unwrap_or_else(|| Cli::parse().command);
    let door = if matches!(command, Command::Exec(_)) { errors::Door::Exec } else { errors::Door::Other };
    let code = match run(command, dirs()) {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            errors::exit_code(door, &e)
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// pinfold's own directories (and the home and XDG directories they come from): read from
/// the environment once, on first use, then passed to whatever needs one.
pub(crate) fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(Dirs::from_env)
}

/// Print an error for a person: headline, causes, hint.
pub(crate) fn report(e: &Error) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {}", e.headline);
    for c in &e.causes {
        let _ = writeln!(err, "  caused by: {c}");
    }
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "hint: {h}");
    }
}

/// The command, read by clap from the definitions above (`CheckArgs`, `ExecArgs`,
/// `HookArgs`) but with only the named subcommand built: clap's whole command tree, every
/// subcommand with its help, costs about a third of a `check`, one subcommand's a quarter of
/// that (docs/performance.md). `None` for another subcommand, for help and for any error: the
/// whole tree parses those, and words the error for a person (the `tests` module checks that
/// both readings agree).
fn one_subcommand(args: &[String]) -> Option<Command> {
    fn read<T: clap::Args + clap::FromArgMatches>(name: &'static str, rest: &[String]) -> Option<T> {
        let command = T::augment_args(clap::Command::new(name).no_binary_name(true));
        T::from_arg_matches(&command.try_get_matches_from(rest).ok()?).ok()
    }
    let (first, rest) = args.split_first()?;
    match first.as_str() {
        "check" => read("check", rest).map(Command::Check),
        "exec" => read("exec", rest).map(Command::Exec),
        "hook" => read("hook", rest).map(Command::Hook),
        _ => None,
    }
}

fn run(command: Command, dirs: &Dirs) -> Result<i32, Error> {
    match command {
        Command::Check(args) => check::run(args, dirs),
        Command::Exec(args) => exec::run(args, dirs),
        Command::Doctor(args) => exec::doctor(args, dirs),
        Command::Image(args) => image::run(args),
        Command::Hook(args) => hook::run(args, dirs),
        Command::Init(args) => hook::init::run(args, dirs),
        Command::Import(args) => hook::import::run(args),
        Command::Audit(args) => audit::run(args, dirs),
        Command::Undo(args) => undo::run(args, dirs),
        #[cfg(feature = "server")]
        Command::Serve(args) => serve::run(args, dirs),
        #[cfg(feature = "server")]
        Command::Approvals(args) => serve::approvals(args),
        #[cfg(feature = "server")]
        Command::Mcp(args) => mcp::run(args),
        Command::Trust(args) => {
            let files = if args.files.is_empty() {
                let cwd = std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?;
                let opts = LoadOptions { explicit: None, cwd, home: dirs.home.clone(), xdg_config_home: dirs.xdg_config_home.clone() };
                let (layers, _) = config::layer_files(&opts).map_err(Error::config)?;
                let project: Vec<PathBuf> = layers.into_iter().filter(|f| !dirs.config.as_ref().is_some_and(|g| f.starts_with(g))).collect();
                if project.is_empty() {
                    return Err(Error::new("no project policy file here").hint("name the files to approve"));
                }
                project
            } else {
                args.files
            };
            for (path, hash) in trust::trust(&files, dirs)? {
                println!("trusted {} (sha256 {})", path.display(), &hash[..16]);
            }
            Ok(exit::OK)
        }
        Command::Validate(args) => {
            let file = args.file.or(args.config);
            let cwd = args.cwd.as_deref().map(absolute).transpose()?;
            let policy = load_policy(file.as_deref(), cwd.as_deref(), false, dirs)?;
            let c = policy.config();
            let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
            println!(
                "ok: {}, {}, {}, from {}",
                n(policy.rule_count(), "rule"),
                n(c.sandboxes.len(), "sandbox preset"),
                n(policy.test_count(), "test"),
                c.sources.join(", ")
            );
            Ok(exit::OK)
        }
        Command::Test(args) => {
            let file = args.file.or(args.config);
            let cwd = args.cwd.as_deref().map(absolute).transpose()?;
            let policy = load_policy(file.as_deref(), cwd.as_deref(), false, dirs)?;
            let failures = policy.run_tests();
            let total = policy.test_count();
            for f in &failures {
                let what = match &f.rule {
                    Some(p) => format!("rule `{p}`"),
                    None => "test".to_string(),
                };
                println!(
                    "FAIL {}: {what}: `{}` expected {}, got {}: {}",
                    f.location, f.command, f.expected, f.got, f.reason
                );
            }
            println!("{} passed, {} failed", total - failures.len(), failures.len());
            Ok(if failures.is_empty() { exit::OK } else { exit::TEST_FAILED })
        }
        Command::Config(ConfigCommand::Schema) => {
            let schema = config::json_schema();
            println!("{}", serde_json::to_string_pretty(&schema).expect("a JSON value serialises"));
            Ok(exit::OK)
        }
    }
}

/// The policy for commands run in `cwd` (pinfold's own when `None`): [`pinfold_plan::load::policy`].
pub(crate) fn load_policy(
    file: Option<&std::path::Path>,
    cwd: Option<&std::path::Path>,
    cached: bool,
    dirs: &Dirs,
) -> Result<Policy, Error> {
    pinfold_plan::load::policy(file, cwd, cached, dirs)
}

pub(crate) fn absolute(d: &std::path::Path) -> Result<PathBuf, Error> {
    pinfold_plan::load::absolute(d)
}

/// The working directory as the caller named it, when that differs from `cwd` (its real
/// path): `--cwd` as given (made absolute), else the shell's `$PWD`. For
/// [`pinfold_plan::Context::named_cwd`].
pub(crate) fn named_cwd(given: Option<&std::path::Path>, cwd: &std::path::Path) -> Option<PathBuf> {
    let named = match given {
        Some(d) => std::path::absolute(d).ok()?,
        None => PathBuf::from(std::env::var_os("PWD")?),
    };
    (named.is_absolute() && named != cwd).then_some(named)
}

/// The CLI's error: headline, causes, hint (the plan's, which the CLI shares).

#[cfg(test)]
mod tests {
    use super::*;

    /// What the whole command tree makes of `pinfold ARGS`, as text (`Command` has no
    /// `PartialEq`); `None` for help and errors.
    fn by_clap(args: &[&str]) -> Option<String> {
        Cli::try_parse_from(std::iter::once("pinfold").chain(args.iter().copied())).ok().map(|c| format!("{:?}", c.command))
    }

    /// What [`one_subcommand`] makes of it, as text.
    fn by_one(args: &[&str]) -> Option<String> {
        one_subcommand(&args.iter().map(|s| s.to_string()).collect::<Vec<String>>()).map(|c| format!("{c:?}"))
    }

    /// Wherever the one-subcommand reading answers, the whole tree answers the same; where it
    /// declines, the whole tree is the one to parse (and word any error).
    fn agrees_with_clap(cases: &[&[&str]], usual: &[&[&str]]) {
        for args in cases {
            if let Some(one) = by_one(args) {
                assert_eq!(Some(one), by_clap(args), "{args:?}");
            }
        }
        for args in usual {
            assert!(by_one(args).is_some(), "{args:?}");
        }
    }

    #[test]
    fn check_args_agree_with_clap() {
        let cases: &[&[&str]] = &[
            &["check"],
            &["check", "git status"],
            &["check", "--", "git status"],
            &["check", "-c", "p.toml", "--", "git status"],
            &["check", "--config", "p.toml", "git", "status"],
            &["check", "--cwd", "/tmp", "--json", "--", "ls"],
            &["check", "--explain", "-c", "p.toml", "ls", "-la"],
            &["check", "ls", "--json"],
            &["check", "--json", "git", "--", "status"],
            &["check", "--", "--", "x"],
            &["check", "--", "--json"],
            &["check", "--"],
            &["check", ""],
            &["check", "--", ""],
            &["check", "rm", "-rf", "my dir"],
            &["check", "-c", "a.toml", "--cwd", "d", "--json", "x"],
            // Errors, help, unusual spellings: the whole tree's to word, or read alike.
            &["check", "--json", "--explain", "ls"],
            &["check", "--json", "--json", "ls"],
            &["check", "-c", "a", "-c", "b", "ls"],
            &["check", "-c"],
            &["check", "-c", "--json", "ls"],
            &["check", "-c", "", "ls"],
            &["check", "--config=p.toml", "ls"],
            &["check", "-cp.toml", "ls"],
            &["check", "--cwd=/tmp", "ls"],
            &["check", "--jsn", "ls"],
            &["check", "-h"],
            &["check", "--help"],
            &["check", "-", "ls"],
            &["check", "-1"],
            &["--help"],
            &["--version"],
            &["exec", "--", "ls"],
            &["validate"],
            &[],
        ];
        // The usual forms are read with one subcommand built, not the whole tree.
        let usual: &[&[&str]] = &[&["check", "-c", "p.toml", "--", "git status"], &["check", "--json", "ls"], &["check"]];
        agrees_with_clap(cases, usual);
    }

    /// The same for `exec`.
    #[test]
    fn exec_args_agree_with_clap() {
        let cases: &[&[&str]] = &[
            &["exec", "--", "true"],
            &["exec", "true"],
            &["exec", "ls", "-la"],
            &["exec", "--sandbox", "workspace", "--", "cargo test"],
            &["exec", "-c", "p.toml", "--cwd", "/tmp", "--", "make", "-j2"],
            &["exec", "--config", "p.toml", "--net", "off", "git", "status"],
            &["exec", "--net", "on", "--report", "r.json", "--dry-run", "--", "ls"],
            &["exec", "--allow-degraded", "ls", "--dry-run"],
            &["exec", "--", "--", "x"],
            &["exec", "--", "--net"],
            &["exec", "--", ""],
            &["exec", "rm", "-rf", "my dir"],
            // Errors, help, repeatable options, odd spellings: the whole tree's, or read alike.
            &["exec"],
            &["exec", "--"],
            &["exec", "--dry-run"],
            &["exec", "--net", "maybe", "ls"],
            &["exec", "--net", "--", "ls"],
            &["exec", "--sandbox", "a", "--sandbox", "b", "ls"],
            &["exec", "--dry-run", "--dry-run", "ls"],
            &["exec", "-c", "", "ls"],
            &["exec", "-c"],
            &["exec", "--write", "out", "ls"],
            &["exec", "--keep-env", "TOKEN", "ls"],
            &["exec", "--deny-read", "x", "--deny-write", "y", "ls"],
            &["exec", "--config=p.toml", "ls"],
            &["exec", "--sandbox=workspace", "ls"],
            &["exec", "-h"],
            &["exec", "--help"],
            &["exec", "-", "ls"],
            &["check", "ls"],
            &[],
        ];
        // What the agent hooks write, and the README's forms, are read the same way.
        let usual: &[&[&str]] = &[&["exec", "--sandbox", "workspace", "--", "cargo test"], &["exec", "--", "true"], &["exec", "-c", "p.toml", "ls"]];
        agrees_with_clap(cases, usual);
    }

    /// The same for `hook`: each agent's name, and what is not one.
    #[test]
    fn hook_args_agree_with_clap() {
        let cases: &[&[&str]] = &[
            &["hook", "claude-code"],
            &["hook", "codex"],
            &["hook", "gemini"],
            &["hook", "cursor"],
            &["hook", "copilot"],
            &["hook"],
            &["hook", "claude"],
            &["hook", "claude-code", "extra"],
            &["hook", "--help"],
            &["hook", "codex", "-h"],
        ];
        let usual: &[&[&str]] = &[&["hook", "claude-code"], &["hook", "codex"], &["hook", "gemini"], &["hook", "cursor"], &["hook", "copilot"]];
        agrees_with_clap(cases, usual);
    }
}
