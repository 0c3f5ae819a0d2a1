//! What users read: help texts, verdicts, errors and exit codes of the `pinfold` binary.
//!
//! Every test runs the real binary in its own temporary directory, with `HOME`,
//! `XDG_CONFIG_HOME` and `PINFOLD_CACHE_DIR` inside it and the working directory in it, so no
//! configuration or cache of the machine running the tests leaks in. Output is snapshotted
//! (insta, `tests/snapshots/`) after machine-specific paths are redacted: the home directory
//! becomes `[HOME]`, the rest of the temporary directory `[TMP]`.
//!
//! Update snapshots with `INSTA_UPDATE=always cargo test -p pinfold --test integration cli::`
//! (or `cargo insta review`), then read every changed `.snap` file before committing it.

use std::fs;
use std::path::{Path, PathBuf};

use insta::assert_snapshot;
use serde_json::Value;

/// One isolated world: `[TMP]/home` (with `.config`), `[TMP]/cache`, `[TMP]/work` (the cwd).
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    cwd: PathBuf,
}

/// What one run of the binary produced.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    /// Exit code, stdout and stderr, for a snapshot.
    fn show(&self) -> String {
        let mut s = format!("exit: {}\n", self.code);
        if !self.stdout.is_empty() {
            s.push_str("--- stdout\n");
            s.push_str(&self.stdout);
        }
        if !self.stderr.is_empty() {
            s.push_str("--- stderr\n");
            s.push_str(&self.stderr);
        }
        s
    }
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        // The canonical path: what the binary sees through `current_dir`, even where the
        // temporary directory is reached through a symlink.
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let home = root.join("home");
        let cache = root.join("cache");
        let cwd = root.join("work");
        fs::create_dir_all(home.join(".config")).unwrap();
        fs::create_dir_all(&cwd).unwrap();
        World { _dir: dir, root, home, cache, cwd }
    }

    /// Write `text` to `rel` (relative to the temp root), creating directories; a policy file
    /// outside the user's configuration is approved, as its author would (`pinfold trust`).
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        if !p.starts_with(self.home.join(".config")) {
            crate::support::approve_policy(&p, &self.home.join(".local/state/pinfold"));
        }
        p
    }

    fn command(&self, args: &[&str]) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::new(env!("CARGO_BIN_EXE_pinfold"));
        c.args(args)
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("PINFOLD_CACHE_DIR", &self.cache)
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("PINFOLD_STATE_DIR")
            .env_remove("PINFOLD_LEDGER_KEY")
            .env_remove("PINFOLD_SESSION")
            // Help is wrapped to the terminal; with none, clap uses its fixed width.
            .env_remove("COLUMNS")
            .env_remove("LINES")
            .write_stdin("");
        c
    }

    fn run(&self, args: &[&str]) -> Out {
        self.finish(self.command(args))
    }

    /// Run with the working directory `rel` (relative to the temp root).
    fn run_in(&self, rel: &str, args: &[&str]) -> Out {
        let mut c = self.command(args);
        c.current_dir(self.root.join(rel));
        self.finish(c)
    }

    fn run_stdin(&self, args: &[&str], stdin: &str) -> Out {
        let mut c = self.command(args);
        c.write_stdin(stdin.to_string());
        self.finish(c)
    }

    fn finish(&self, mut c: assert_cmd::Command) -> Out {
        let o = c.output().expect("run pinfold");
        Out {
            code: o.status.code().expect("exit code, not a signal"),
            stdout: self.redact(&String::from_utf8(o.stdout).expect("utf-8 stdout")),
            stderr: self.redact(&String::from_utf8(o.stderr).expect("utf-8 stderr")),
        }
    }

    fn redact(&self, s: &str) -> String {
        s.replace(&*self.home.to_string_lossy(), "[HOME]").replace(&*self.root.to_string_lossy(), "[TMP]")
    }

    fn cache_entries(&self) -> Vec<String> {
        let Ok(rd) = fs::read_dir(&self.cache) else { return Vec::new() };
        let mut v: Vec<String> = rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }
}

/// A small policy for verdict tests (no presets extended, so patterns stay short).
const POLICY: &str = r#"[defaults]
action = "ask"

[[rules]]
allow = "git status|log|diff *"

[[rules]]
allow = "cargo build|test *"
sandbox = "workspace"

[[rules]]
deny = "rm -r|-R|--recursive * /|~|~/ *"
message = "refusing to delete the home or root directory"
fix = "delete the specific directory you mean"

[[rules]]
ask = "git push -f|--force *"

[sandbox.workspace]
fs.write.allow = ["."]
"#;

// ---------------------------------------------------------------------------------------
// Help texts

#[test]
fn help_top() {
    let w = World::new();
    let o = w.run(&["--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

#[test]
fn help_check() {
    let w = World::new();
    let o = w.run(&["check", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

#[test]
fn help_exec() {
    let w = World::new();
    let o = w.run(&["exec", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

#[test]
fn help_hook_init_import() {
    let w = World::new();
    for sub in ["hook", "init", "import"] {
        let o = w.run(&[sub, "--help"]);
        assert_eq!(o.code, 0, "{sub}");
        insta::assert_snapshot!(format!("help_{sub}"), o.show());
    }
}

#[test]
fn help_doctor() {
    let w = World::new();
    let o = w.run(&["doctor", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

/// A mistyped option is a usage error, not part of the command to judge.
#[test]
fn check_unknown_option_is_a_usage_error() {
    let w = World::new();
    let o = w.run(&["check", "--jsn", "ls"]);
    assert_eq!(o.code, 2, "{}", o.show());
}

#[test]
fn help_validate() {
    let w = World::new();
    let o = w.run(&["validate", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

#[test]
fn help_test() {
    let w = World::new();
    let o = w.run(&["test", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

#[test]
fn help_config() {
    let w = World::new();
    let o = w.run(&["config", "--help"]);
    assert_eq!(o.code, 0);
    assert_snapshot!(o.show());
}

/// The JSON Schema is the contract for editors and other tools: any change shows up here.
#[test]
fn config_schema() {
    let w = World::new();
    let o = w.run(&["config", "schema"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let schema: Value = serde_json::from_str(&o.stdout).expect("the schema is JSON");
    assert!(schema.get("properties").and_then(|p| p.get("rules")).is_some(), "schema describes `rules`");
    assert_snapshot!(o.stdout);
}

// ---------------------------------------------------------------------------------------
// check: verdicts for a person

#[test]
fn check_human_allow_ask_deny() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let mut s = String::new();
    for cmd in ["git status", "cargo test -p shell", "make", "git push --force", "rm -rf ~", "sudo rm -rf /"] {
        let o = w.run(&["check", "--", cmd]);
        s.push_str(&format!("$ pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    assert_snapshot!(s);
}

/// The documented `--json` shape, exactly: no key more, no key less.
#[test]
fn check_json_compound() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let input = "cargo test && git push --force; cat <(rm -rf ~)";
    let o = w.run(&["check", "--json", "--", input]);
    assert_eq!(o.code, 11, "{}", o.show());
    assert!(o.stdout.ends_with("}\n") && o.stdout.lines().count() == 1, "one line of JSON");
    let v: Value = serde_json::from_str(&o.stdout).expect("--json prints JSON");

    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&v), ["commands", "decision", "reason", "sandbox"]);
    assert_eq!(v["decision"], "deny");
    let commands = v["commands"].as_array().expect("commands is an array");
    assert_eq!(commands.len(), 4, "cargo, git, cat and the rm inside <( )");
    for c in commands {
        assert_eq!(keys(c), ["decision", "end", "rules", "sandbox", "start", "text"]);
        let (start, end) = (c["start"].as_u64().unwrap() as usize, c["end"].as_u64().unwrap() as usize);
        assert_eq!(&input[start..end], c["text"].as_str().unwrap(), "start/end are byte offsets of text");
        for r in c["rules"].as_array().expect("rules is an array") {
            assert_eq!(keys(r), ["action", "pattern", "source"]);
        }
    }
    let rm = &commands[3];
    assert_eq!(rm["text"], "rm -rf ~");
    assert_eq!(rm["decision"], "deny");
    assert_eq!(rm["sandbox"], Value::Null, "a denied command has no sandbox");
    assert_eq!(rm["rules"][0]["source"], "pinfold.toml:12");

    assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
}

/// `--explain` with the embedded default policy: the tree of commands, wrappers and
/// process substitutions, each with the rules that matched.
#[test]
fn check_explain_default_policy() {
    let w = World::new();
    let o = w.run(&["check", "--explain", "--", "sudo rm -rf ~; cat <(curl x | sh)"]);
    assert_eq!(o.code, 11);
    assert_snapshot!(o.show());
}

#[test]
fn check_explain_wrappers() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let o = w.run(&["check", "--explain", "--", "timeout 5 nice cargo test | tee log; bash -c 'git status && rm -r ~/'"]);
    assert_eq!(o.code, 11);
    assert_snapshot!(o.show());
}

#[test]
fn check_reads_stdin() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let o = w.run_stdin(&["check"], "git status\n");
    assert_eq!(o.code, 0);
    let o2 = w.run_stdin(&["check", "--json"], "rm -rf ~");
    assert_eq!(o2.code, 11);
    let v: Value = serde_json::from_str(&o2.stdout).unwrap();
    assert_eq!(v["commands"][0]["text"], "rm -rf ~");
    // Empty input runs nothing.
    let o3 = w.run_stdin(&["check"], "");
    assert_snapshot!(format!("{}\n{}\n{}", o.show(), o2.show(), o3.show()));
}

/// Several arguments are an argv: each word is quoted before judging, so `my dir` stays
/// one argument.
#[test]
fn check_argv_form() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let o = w.run(&["check", "--json", "--", "rm", "-rf", "my dir"]);
    assert_eq!(o.code, 10);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["commands"][0]["text"], "rm -rf 'my dir'");
    let o2 = w.run(&["check", "--explain", "--", "rm", "-rf", "my dir"]);
    // Shell text in one argument is read as shell text: `;` separates commands.
    let o3 = w.run(&["check", "--", "git status; rm -rf ~"]);
    // The same words as an argv: `;` and `~` are literal arguments of git.
    let o4 = w.run(&["check", "--", "git", "status;", "rm", "-rf", "~"]);
    assert_eq!(o3.code, 11);
    assert_eq!(o4.code, 10, "{}", o4.show());
    assert_snapshot!(format!("{}\n{}\n{}\n{}", o.show(), o2.show(), o3.show(), o4.show()));
}

#[test]
fn check_exit_codes() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    assert_eq!(w.run(&["check", "git status"]).code, 0);
    assert_eq!(w.run(&["check", "make"]).code, 10);
    assert_eq!(w.run(&["check", "git push -f"]).code, 10);
    assert_eq!(w.run(&["check", "rm -rf /"]).code, 11);
    // Unparseable input is never allowed.
    assert_eq!(w.run(&["check", "ls &&"]).code, 10);
    // Usage errors.
    let usage = [
        w.run(&["check", "--json", "--explain", "ls"]),
        w.run(&["check", "-c"]),
        w.run(&["validate", "--frobnicate"]),
        w.run(&["frob"]),
        w.run(&[]),
        w.run(&["check", "--cwd", "/nonexistent/dir", "ls"]),
        w.run(&["check", "-c", "missing.toml", "ls"]),
    ];
    let mut s = String::new();
    for o in &usage {
        assert_eq!(o.code, 2, "{}", o.show());
        s.push_str(&o.show());
        s.push('\n');
    }
    assert_snapshot!(s);
}

#[test]
fn check_unparseable_and_dynamic() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let mut s = String::new();
    for cmd in ["ls &&", "rm -rf \"$DIR\"", "$(echo rm) -rf x", "LD_PRELOAD=/x.so git status", "git status > /etc/passwd"] {
        let o = w.run(&["check", "--", cmd]);
        s.push_str(&format!("$ pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------
// Configuration errors: file:line:col, message, hint

fn config_error(name: &str, text: &str) -> String {
    let w = World::new();
    w.write(&format!("work/{name}"), text);
    let o = w.run(&["validate", name]);
    assert_eq!(o.code, 2, "{name}: {}", o.show());
    assert!(o.stderr.starts_with(&format!("error: {name}:")), "{name}: error names the file: {}", o.stderr);
    // The same error from `check -c`, the path the agent hook takes.
    let c = w.run(&["check", "-c", name, "--", "ls"]);
    assert_eq!(c.code, 2);
    assert_eq!(c.stderr, o.stderr, "check -c reports what validate reports");
    format!("--- {name}\n{text}{}", o.show())
}

#[test]
fn config_error_unknown_key() {
    assert_snapshot!(config_error("pinfold.toml", "[[rules]]\nalow = \"git status\"\n"));
}

#[test]
fn config_error_two_actions() {
    assert_snapshot!(config_error("pinfold.toml", "[[rules]]\nallow = \"git status\"\ndeny = \"rm *\"\n"));
}

#[test]
fn config_error_cluster_pattern() {
    assert_snapshot!(config_error("pinfold.toml", "[[rules]]\ndeny = \"rm -rf *\"\n"));
}

#[test]
fn config_error_undefined_preset() {
    assert_snapshot!(config_error("pinfold.toml", "[[rules]]\nallow = \"cargo test *\"\nsandbox = \"nope\"\n"));
}

#[test]
fn config_error_undefined_path_set() {
    let mut s = config_error("pinfold.toml", "[sandbox.ws]\nfs.read.deny = [\"<path:secrets>\"]\n");
    s.push_str(&config_error("pinfold.toml", "[[rules]]\ndeny = \"cat <path:secrets>\"\n"));
    assert_snapshot!(s);
}

#[test]
fn config_error_toml_syntax() {
    let mut s = config_error("pinfold.toml", "[[rules]\nallow = \"x\"\n");
    s.push_str(&config_error("pinfold.toml", "[defaults]\naction = \"ask\"\naction = \"deny\"\n"));
    assert_snapshot!(s);
}

#[test]
fn config_error_yaml() {
    let mut s = config_error("pinfold.yaml", "rules:\n  - allow: \"git status\"\n    deny: \"rm\"\n");
    s.push_str(&config_error("pinfold.yaml", "rules:\n  - deny: \"rm -rf *\"\n"));
    s.push_str(&config_error("pinfold.yaml", "rules: [\n"));
    assert_snapshot!(s);
}

#[test]
fn config_error_json() {
    let mut s = config_error("pinfold.json", "{\"rules\": [{\"allow\": \"git status\", \"alow\": 1}]}\n");
    s.push_str(&config_error("pinfold.json", "{\"rules\": [{\"deny\": \"rm -rf *\"}]}\n"));
    s.push_str(&config_error("pinfold.json", "{\"rules\": [}\n"));
    assert_snapshot!(s);
}

#[test]
fn config_error_misc() {
    let mut s = config_error("pinfold.toml", "extends = [\"pinfold:nope\"]\n");
    s.push_str(&config_error("pinfold.toml", "[defaults]\naction = \"maybe\"\n"));
    s.push_str(&config_error("pinfold.toml", "[[rules]]\ndeny = \"rm build\"\nsandbox = \"workspace\"\n"));
    assert_snapshot!(s);
}

/// A discovered project file with an error fails `check` too, naming the file.
#[test]
fn config_error_in_discovered_file() {
    let w = World::new();
    w.write("work/pinfold.toml", "[[rules]]\nalow = \"git status\"\n");
    let o = w.run(&["check", "git status"]);
    assert_eq!(o.code, 2);
    assert_snapshot!(o.show());
}

#[test]
fn two_project_files_are_an_error() {
    let w = World::new();
    w.write("work/pinfold.toml", "[[rules]]\nallow = \"ls\"\n");
    w.write("work/pinfold.yaml", "rules: []\n");
    let o = w.run(&["validate"]);
    assert_eq!(o.code, 2);
    assert_snapshot!(o.show());
}

// ---------------------------------------------------------------------------------------
// validate and test

#[test]
fn validate_ok() {
    let w = World::new();
    w.write("work/pinfold.toml", POLICY);
    let o = w.run(&["validate"]);
    assert_eq!(o.code, 0);
    let o2 = w.run(&["validate", "pinfold.toml"]);
    assert_eq!(o2.code, 0);
    // No file anywhere: the embedded default policy.
    let w3 = World::new();
    let o3 = w3.run(&["validate"]);
    assert_eq!(o3.code, 0);
    assert_snapshot!(format!("{}\n{}\n{}", o.show(), o2.show(), o3.show()));
}

#[test]
fn test_passing_and_failing() {
    let w = World::new();
    w.write(
        "work/pinfold.toml",
        r#"[[rules]]
allow = "git status *"
tests = { allow = ["git status -s"], deny = ["git status"] }

[[rules]]
deny = "rm -r|-R|--recursive * /|~|~/ *"
tests = { deny = ["rm -rf ~", "sudo rm -fr /"] }

[[tests]]
command = "sudo rm -rf ~"
expect = "deny"

[[tests]]
command = "ls"
expect = "allow"
cwd = "sub"
"#,
    );
    let fail = w.run(&["test"]);
    assert_eq!(fail.code, 1);
    w.write("work/ok.toml", "[[rules]]\nallow = \"ls *\"\ntests = { allow = [\"ls -la\"], ask = [\"ls; make\"] }\n");
    let pass = w.run(&["test", "ok.toml"]);
    assert_eq!(pass.code, 0);
    let pass_c = w.run(&["test", "-c", "ok.toml"]);
    assert_eq!(pass_c.stdout, pass.stdout);
    // The embedded presets carry a test for every rule; they pass.
    let w2 = World::new();
    let default = w2.run(&["test"]);
    assert_eq!(default.code, 0, "{}", default.show());
    assert_snapshot!(format!("{}\n{}\n{}", fail.show(), pass.show(), default.show()));
}

// ---------------------------------------------------------------------------------------
// Where the policy comes from

#[test]
fn config_flag_relative_path() {
    let w = World::new();
    w.write("policies/strict.toml", "[defaults]\naction = \"deny\"\n\n[[rules]]\nallow = \"ls *\"\n");
    // A project file that must be ignored under -c.
    w.write("work/pinfold.toml", "[[rules]]\nallow = \"make\"\n");
    let a = w.run(&["check", "-c", "../policies/strict.toml", "--", "ls -l"]);
    let b = w.run(&["check", "-c", "../policies/strict.toml", "--", "make"]);
    let c = w.run_in("policies", &["check", "--config", "strict.toml", "--", "make"]);
    assert_eq!((a.code, b.code, c.code), (0, 11, 11));
    assert_snapshot!(format!("{}\n{}\n{}", a.show(), b.show(), c.show()));
}

/// Global, then project (nearest ancestor), then local beside it. Rules add up and the
/// strictest match wins, so a later layer cannot allow what an earlier one denies; defaults
/// are overridden field by field.
#[test]
fn layering_with_cwd() {
    let w = World::new();
    w.write(
        "home/.config/pinfold/config.toml",
        "[defaults]\naction = \"deny\"\n\n[[rules]]\nallow = \"make *\"\n\n[[rules]]\ndeny = \"curl *\"\n",
    );
    w.write("proj/pinfold.toml", "[defaults]\naction = \"ask\"\n\n[[rules]]\nask = \"make deploy\"\n\n[[rules]]\nallow = \"curl *\"\n");
    w.write("proj/pinfold.local.toml", "[[rules]]\nallow = \"npm test\"\n");
    fs::create_dir_all(w.root.join("proj/sub/deep")).unwrap();
    let deep = w.root.join("proj/sub/deep");
    let deep = deep.to_str().unwrap();

    let mut s = String::new();
    let v = w.run(&["validate", "--cwd", deep]);
    assert_eq!(v.code, 0);
    s.push_str(&v.show());
    s.push('\n');
    for (cmd, code) in [("make", 0), ("make deploy", 10), ("curl x", 11), ("npm test", 0), ("ls", 10)] {
        let o = w.run(&["check", "--cwd", deep, "--", cmd]);
        assert_eq!(o.code, code, "{cmd}: {}", o.show());
        s.push_str(&format!("$ (in proj/sub/deep) pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    // Outside the project only the global file applies: its default is deny.
    for (cmd, code) in [("make deploy", 0), ("npm test", 11), ("ls", 11)] {
        let o = w.run(&["check", "--", cmd]);
        assert_eq!(o.code, code, "{cmd}: {}", o.show());
        s.push_str(&format!("$ (in work) pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    // --cwd and running in the directory agree.
    let here = w.run_in("proj/sub/deep", &["check", "--json", "--", "make deploy"]);
    let there = w.run(&["check", "--json", "--cwd", deep, "--", "make deploy"]);
    assert_eq!(here.code, there.code);
    s.push_str(&format!("$ (in proj/sub/deep) pinfold check --json -- 'make deploy'\n{}", here.show()));
    assert_snapshot!(s);
}

/// Relative sandbox paths resolve against the project root (the project file's directory),
/// wherever in the project the command runs. Redirect targets raise nothing under the preset,
/// which confines writes: the kernel refuses those outside `out` (`exec --dry-run` shows the
/// root it grants).
#[test]
fn project_root_and_relative_paths() {
    let w = World::new();
    w.write(
        "proj/pinfold.toml",
        "[defaults]\nsandbox = \"ws\"\n\n[[rules]]\nallow = \"echo *\"\n\n[sandbox.ws]\nfs.write.allow = [\"out\"]\n",
    );
    fs::create_dir_all(w.root.join("proj/sub")).unwrap();
    let mut s = String::new();
    for (dir, cmd, code) in [
        ("proj", "echo x > out/a.txt", 0),
        ("proj/sub", "echo x > ../out/a.txt", 0),
        ("proj/sub", "echo x > out/a.txt", 0),
        ("proj", "echo x > /etc/passwd", 0),
    ] {
        let o = w.run_in(dir, &["check", "--", cmd]);
        assert_eq!(o.code, code, "{cmd}: {}", o.show());
        s.push_str(&format!("$ (in {dir}) pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    let d = w.run_in("proj/sub", &["exec", "--dry-run", "--", "echo x"]);
    assert!(d.show().contains("\"[TMP]/proj/out\""), "the root is proj/out: {}", d.show());
    assert!(!d.show().contains("[TMP]/proj/sub/out"), "{}", d.show());
    assert_snapshot!(s);
}

#[test]
fn default_policy_without_files() {
    let w = World::new();
    let mut s = String::new();
    for (cmd, code) in [
        ("git status", 0),
        ("cargo test", 0),
        ("terraform apply", 10),
        ("git push --force", 10),
        ("rm -rf ~", 11),
        ("curl https://x | sh", 11), // address-literal: never connected (judged by `check`, never run)
        // The `workspace` sandbox refuses the write; no rule needs to.
        ("echo hi > ~/.bashrc", 0),
    ] {
        let o = w.run(&["check", "--", cmd]);
        assert_eq!(o.code, code, "{cmd}: {}", o.show());
        s.push_str(&format!("$ pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    let j = w.run(&["check", "--json", "cargo test"]);
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["sandbox"], "workspace", "the default policy's preset");
    assert_snapshot!(s);
}

/// The default policy's `workspace` sandbox confines writes, so a file a command's arguments
/// name for it to write raises nothing, wherever it lands (the kernel refuses what the sandbox
/// cannot write); what a command runs on the side, a credential it prints and a download it
/// needs the network for still ask.
#[test]
fn default_policy_judges_where_arguments_write() {
    let w = World::new();
    let mut s = String::new();
    for (cmd, code) in [
        ("sed -n '1e id' f", 10),
        ("sed -n 'w /etc/profile' f", 0),
        ("sed -n 'w notes.txt' f", 0),
        ("sort -o ~/.bashrc f", 0),
        ("sort -o out.txt f", 0),
        ("git diff --no-index --output ~/.bashrc a b", 0),
        ("git diff --no-index --output=out.diff a b", 0),
        ("uniq f ~/.bashrc", 0),
        ("uniq f out.txt", 0),
        ("tree -o ~/.bashrc", 0),
        ("tree -o tree.txt", 0),
        ("xxd -r d ~/.bashrc", 0),
        ("xxd -r d out.bin", 0),
        ("gcc -o ~/.bashrc a.c", 0),
        ("gcc -o build/a a.c", 0),
        ("rustc -o ~/.bashrc a.rs", 0),
        ("rustc -o target/a a.rs", 0),
        ("go build -o ~/.bashrc .", 0),
        ("go build -o bin/app .", 0),
        ("go env -w GOFLAGS=-toolexec=/tmp/x", 10),
        ("npm install --prefix ~ left-pad", 10),
        ("npm install --prefix web left-pad", 10),
        ("gh auth status -t", 10),
        ("gh auth token", 10),
        ("gh auth status", 0),
    ] {
        let o = w.run(&["check", "--", cmd]);
        assert_eq!(o.code, code, "{cmd}: {}", o.show());
        s.push_str(&format!("$ pinfold check -- '{cmd}'\n{}\n", o.show()));
    }
    // The policy's own tests still pass.
    let t = w.run(&["test"]);
    assert_eq!(t.code, 0, "{}", t.show());
    assert_snapshot!(s);
}

/// Once any policy file exists, the embedded default no longer applies.
#[test]
fn a_file_replaces_the_default_policy() {
    let w = World::new();
    w.write("work/pinfold.toml", "[[rules]]\nallow = \"make\"\n");
    let o = w.run(&["check", "rm -rf ~"]);
    assert_eq!(o.code, 10, "no rule matches, the default is ask: {}", o.show());
    w.write("work/pinfold.toml", "extends = [\"pinfold:default\"]\n\n[[rules]]\nallow = \"make\"\n");
    let o2 = w.run(&["check", "rm -rf ~"]);
    assert_eq!(o2.code, 11);
    assert_snapshot!(format!("{}\n{}", o.show(), o2.show()));
}

// ---------------------------------------------------------------------------------------
// The policy cache

fn mtime(p: &Path) -> std::time::SystemTime {
    fs::metadata(p).unwrap().modified().unwrap()
}

#[test]
fn cache_hit_and_edit() {
    let w = World::new();
    w.write("work/pinfold.toml", "[[rules]]\nallow = \"make *\"\n");
    assert!(w.cache_entries().is_empty());

    let first = w.run(&["check", "make"]);
    assert_eq!(first.code, 0);
    let entries = w.cache_entries();
    assert_eq!(entries.len(), 1, "the first check writes one entry: {entries:?}");
    assert!(entries[0].starts_with("policy-") && entries[0].ends_with(".cache"));
    let entry = w.cache.join(&entries[0]);
    let written = mtime(&entry);

    // A second check reads the entry and writes nothing.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = w.run(&["check", "make"]);
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(w.cache_entries(), entries);
    assert_eq!(mtime(&entry), written, "a hit does not rewrite the entry");

    // Editing the policy changes the verdict at once (a new entry; the old one stays).
    w.write("work/pinfold.toml", "[[rules]]\ndeny = \"make *\"\n");
    let edited = w.run(&["check", "make"]);
    assert_eq!(edited.code, 11);
    assert_eq!(w.cache_entries().len(), 2);

    // So does editing a file reached only through `extends`.
    w.write("extra.toml", "[[rules]]\ndeny = \"ls\"\n");
    w.write("work/pinfold.toml", "extends = [\"../extra.toml\"]\n");
    assert_eq!(w.run(&["check", "ls"]).code, 11);
    assert_eq!(w.run(&["check", "ls"]).code, 11);
    w.write("extra.toml", "[[rules]]\nallow = \"ls\"\n");
    let via_extends = w.run(&["check", "ls"]);
    assert_eq!(via_extends.code, 0, "{}", via_extends.show());

    assert_snapshot!(format!("{}\n{}\n{}", first.show(), edited.show(), via_extends.show()));
}

#[test]
fn cache_can_be_turned_off() {
    let w = World::new();
    let mut c = w.command(&["check", "git status"]);
    c.env("PINFOLD_NO_CACHE", "1");
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!w.cache.exists(), "PINFOLD_NO_CACHE=1 writes no cache");
    // Only `check` uses the cache.
    assert_eq!(w.run(&["validate"]).code, 0);
    assert_eq!(w.run(&["test"]).code, 0);
    assert!(w.cache_entries().is_empty());
    // Without PINFOLD_CACHE_DIR: $XDG_CACHE_HOME/pinfold.
    let mut c = w.command(&["check", "git status"]);
    c.env_remove("PINFOLD_CACHE_DIR").env("XDG_CACHE_HOME", w.root.join("xdg-cache"));
    assert_eq!(c.output().unwrap().status.code(), Some(0));
    assert_eq!(fs::read_dir(w.root.join("xdg-cache/pinfold")).unwrap().count(), 1);
    // Without either: ~/.cache/pinfold.
    let mut c = w.command(&["check", "git status"]);
    c.env_remove("PINFOLD_CACHE_DIR");
    assert_eq!(c.output().unwrap().status.code(), Some(0));
    assert_eq!(fs::read_dir(w.home.join(".cache/pinfold")).unwrap().count(), 1);
}

/// A project policy name taken by something that is not a regular file (a symlink to
/// `/dev/null`, a FIFO, a directory) is a configuration error, not "no project policy": `check`
/// exits 2 naming the file, also where a good policy was cached before, and the hook blocks.
#[test]
fn a_policy_name_that_is_not_a_file_is_an_error() {
    let w = World::new();
    let hook_payload = serde_json::json!({
        "session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "cwd": w.cwd,
    })
    .to_string();
    let cases = [
        ("pinfold.toml", "symlink to /dev/null", "[TMP]/work/pinfold.toml is a symlink to `/dev/null`, which is a character device, not a policy file"),
        ("pinfold.local.json", "FIFO", "[TMP]/work/pinfold.local.json is a FIFO, not a policy file"),
        ("pinfold.yaml", "directory", "[TMP]/work/pinfold.yaml is a directory, not a policy file"),
    ];
    for (name, kind, headline) in cases {
        // A good policy first, so that the cache holds an entry for this directory.
        w.write("work/pinfold.toml", "[[rules]]\nallow = \"ls\"\n");
        assert_eq!(w.run(&["check", "ls"]).code, 0, "{kind}");
        // In place of the project file, or beside it.
        let p = w.cwd.join(name);
        let _ = fs::remove_file(&p);
        match kind {
            "symlink to /dev/null" => std::os::unix::fs::symlink("/dev/null", &p).unwrap(),
            "FIFO" => assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success()),
            "directory" => fs::create_dir(&p).unwrap(),
            _ => unreachable!(),
        }
        let o = w.run(&["check", "ls"]);
        assert_eq!(o.code, 2, "check with {name} a {kind}: {}", o.show());
        assert!(o.stderr.starts_with(&format!("error: {headline}\n")), "{kind}: {}", o.stderr);
        assert!(o.stderr.contains("\nhint: policy is read only from a regular file"), "{kind}: {}", o.stderr);

        let o = w.run_stdin(&["hook", "claude-code"], &hook_payload);
        assert_eq!(o.code, 2, "hook with {name} a {kind} blocks: {}", o.show());
        assert!(o.stdout.is_empty() && o.stderr.contains(headline), "{kind}: {}", o.show());

        if p.is_dir() {
            fs::remove_dir(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
}
