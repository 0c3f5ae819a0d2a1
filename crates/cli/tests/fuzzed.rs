//! Inputs the fuzz targets (`fuzz/`, docs/design/threat-model.md "Fuzzing") found, kept as
//! regression tests of the command line and its hooks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::BIN;
use crate::support::hook::{output, temp_project};

/// A home, a state directory and a project (with `.git`) in a temporary directory.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    proj: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = temp_project();
        World { _dir: dir, proj: root.join("proj"), root }
    }

    /// `pinfold hook AGENT` with `payload` on stdin: exit status, stdout, stderr.
    fn hook(&self, agent: &str, payload: &Value) -> (i32, String, String) {
        let mut c = Command::new(BIN);
        c.args(["hook", agent])
            .current_dir(&self.proj)
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("home/.config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PINFOLD_HOOK_ORIGIN")
            .env_remove("PINFOLD_HOOK_TIMEOUT_MS");
        let o = output(c, payload.to_string().as_bytes());
        (o.code, o.stdout, o.stderr)
    }
}

/// A file tool's path of 200,000 components (a 400 KB payload): resolving it tried
/// `canonicalize` on every ancestor and joined the missing components one copy at a time, both
/// quadratic in the depth (the hook_claude_code target ran out of memory on a 96 KB path). The
/// guard then blocked at the deadline instead of the hook deciding. It must decide: deny, the
/// path is under `~/.ssh`.
#[test]
fn a_file_path_of_hundreds_of_thousands_of_components_is_decided_in_time() {
    let w = World::new();
    let deep = format!("{}/home/.ssh{}", w.root.display(), "/a".repeat(200_000));
    let payload = json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": deep}, "cwd": w.proj});
    let (code, stdout, stderr) = w.hook("claude-code", &payload);
    assert_eq!(code, 0, "decided, not blocked by the guard: {stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON answer");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{stdout}");
}

/// [`resolve`](pinfold_cli::hook::core::resolve) finds the deepest ancestor that resolves by
/// bisection and reads links only through paths the kernel accepts: the same answers as trying
/// every ancestor in turn, from the deepest up (the definition below), through symlinks, dangling
/// symlinks, `..` after a link, files with paths under them and paths that do not exist.
#[test]
fn resolve_answers_as_trying_every_ancestor_does() {
    use std::path::Component;
    use pinfold_policy::matcher::normalize;
    /// Every ancestor in turn: the first that resolves, or that is a dangling symlink (followed
    /// to where a write would create its target), with the rest appended.
    fn each_ancestor(raw: &Path, depth: usize) -> PathBuf {
        let mut existing = raw;
        let mut rest: Vec<Component<'_>> = Vec::new();
        loop {
            if let Ok(c) = fs::canonicalize(existing) {
                return normalize(&rest.iter().rev().fold(c, |acc, x| acc.join(x)));
            }
            if depth < 40
                && let Ok(target) = fs::read_link(existing)
            {
                let base = existing.parent().unwrap_or(Path::new("/"));
                let t = each_ancestor(&base.join(target), depth + 1);
                return normalize(&rest.iter().rev().fold(t, |acc, x| acc.join(x)));
            }
            match (existing.parent(), existing.components().next_back()) {
                (Some(parent), Some(last)) => {
                    rest.push(last);
                    existing = parent;
                }
                _ => return normalize(raw),
            }
        }
    }
    let w = World::new();
    let real = w.root.join("real");
    fs::create_dir_all(real.join("a/b")).unwrap();
    fs::write(real.join("a/file"), "x").unwrap();
    std::os::unix::fs::symlink(&real, w.proj.join("link")).unwrap();
    std::os::unix::fs::symlink(w.root.join("gone/deeper"), w.proj.join("dangling")).unwrap();
    std::os::unix::fs::symlink("dangling", w.proj.join("to-dangling")).unwrap();
    std::os::unix::fs::symlink("loop", w.proj.join("loop")).unwrap();
    let cases = [
        "link/a/b/new/x", "link/a/b", "link", "link/a/file", "link/a/file/under", "link/../x", "link/a/../b/c",
        "dangling", "dangling/x/y", "to-dangling/z", "loop/x", "missing/one/two", "missing/../link/a",
        "/", "/nonexistent/x", ".", "", "./link/./a//b/", "~/x/y",
    ];
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    for p in cases {
        let (_, physical) = pinfold_cli::hook::core::resolve(&w.proj, p, home.as_deref());
        let expanded = match (p.strip_prefix('~'), &home) {
            (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
            _ => PathBuf::from(p),
        };
        assert_eq!(physical, each_ancestor(&w.proj.join(expanded), 0), "{p}");
    }
    let (_, c) = pinfold_cli::hook::core::resolve(&w.proj, "link/a/b/new/x", None);
    assert_eq!(c, real.join("a/b/new/x"));
    let (_, c) = pinfold_cli::hook::core::resolve(&w.proj, "to-dangling/z", None);
    assert_eq!(c, w.root.join("gone/deeper/z"));
}
