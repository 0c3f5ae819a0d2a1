//! `pinfold undo` after real sandboxed runs: what a command removed, rewrote, moved or made in
//! the project comes back as it was (and the undo can be taken back); a command killed
//! mid-way, commands running side by side, a full disk, a project that is not a git
//! repository and a command that changes nothing each end as docs/undo.md says; and the
//! records are out of the sandboxed command's reach. Each case as root and as uid 65534 unless
//! it says why not. Fixture: `support/sandbox.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::sandbox::*;
use crate::support::*;

both_users!(
    undo_puts_back_what_a_command_destroyed,
    a_command_that_changes_nothing_leaves_no_record,
    a_command_killed_midway_can_be_undone,
    commands_side_by_side_and_undo_while_one_runs,
    the_records_are_out_of_the_commands_reach,
    a_project_that_is_not_a_repository_has_no_undo,
    hook_rewritten_commands_are_undoable,
    undo_turned_off_keeps_nothing,
    a_refused_change_to_a_protected_path_is_never_recorded,
    an_undo_never_leaves_a_control_file_a_command_made,
    changes_through_proc_and_dev_fd_are_recorded,
    a_path_too_long_to_resolve_is_refused,
    a_run_in_a_nested_repository_holds_the_outer_undo,
    a_directory_ignored_by_an_earlier_run_is_still_kept,
    a_nested_repository_comes_back,
    a_directory_replaced_by_a_link_comes_back,
    a_write_through_a_name_in_an_ignored_directory_is_kept,
);
// Mounting a small file system to fill needs root; the outcome does not depend on the user.
only_user!(root: a_full_disk_fails_the_change_and_keeps_the_file);

/// Every path beneath `root` but `.git` and the attack scripts, with what it holds.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if rel.starts_with(".git") || rel.starts_with(".t") {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let v = if m.file_type().is_symlink() {
                format!("link {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {}", String::from_utf8_lossy(&fs::read(&p).unwrap()))
            };
            out.insert(rel, v);
        }
    }
    out
}

/// `pinfold ARGS…` as the case's user, outside any sandbox, in the working directory (an
/// `undo` with the case's policy file, as `exec` has it).
fn pinfold(fx: &Fx, args: &[&str]) -> Run {
    let mut argv = vec![pinfold_bin()];
    argv.extend(args.iter().map(|s| s.to_string()));
    if args.first() == Some(&"undo")
        && let Some(c) = &fx.config
    {
        argv.extend(["-c".to_string(), Fx::s(c)]);
    }
    run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT)
}

/// Where pinfold keeps the project's undo records: its one store in the state directory.
fn store(fx: &Fx) -> PathBuf {
    let base = fx.env.get("PINFOLD_STATE_DIR").map(PathBuf::from).unwrap_or_else(|| fx.home.join(".local/state/pinfold")).join("undo");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&base).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(dirs.len() <= 1, "{}: one store: {dirs:?}", fx.label());
    dirs.pop().unwrap_or_else(|| base.join("none"))
}

/// The project with sources, a script, and build output git ignores.
fn populate(fx: &Fx) {
    fx.put(&fx.proj.join("src/a.rs"), "fn a() {}\n");
    fx.put(&fx.proj.join("src/deep/b.rs"), "fn b() {}\n");
    fx.put(&fx.proj.join("notes.txt"), "my notes\n");
    fx.put(&fx.proj.join("run.sh"), "echo run\n");
    fx.put(&fx.proj.join(".gitignore"), "target/\n");
    fx.put(&fx.proj.join("target/debug/app"), "binary\n");
    fx.host_ok(&["git", "-C", &Fx::s(&fx.proj), "add", "src", "run.sh", ".gitignore"]);
    fx.host_ok(&["git", "-C", &Fx::s(&fx.proj), "commit", "-q", "-m", "sources"]);
    fx.own();
}

fn undo_puts_back_what_a_command_destroyed(u: User) {
    let fx = Fx::new(u, "undo_puts_back");
    populate(&fx);
    let before = tree(&fx.proj);
    let cmd = "rm -rf src && echo changed > notes.txt && chmod +x run.sh && mv README README.md \
               && mkdir -p new/dir && echo x > new/dir/f && python3 -c \"open('notes.txt','a').write('more')\" \
               && ln -s README.md lnk && rm -rf target";
    let r = fx.exec(&[], &[cmd.to_string()]);
    assert_eq!(r.code, Some(0), "{}: the command ran\n{}", fx.label(), r.show());
    let after = tree(&fx.proj);
    assert!(!after.contains_key(Path::new("src/a.rs")) && after.contains_key(Path::new("lnk")), "{}: {after:?}", fx.label());

    let l = pinfold(&fx, &["undo", "--list"]);
    assert_eq!(l.code, Some(0), "{}", l.show());
    assert!(l.stdout.contains("rm -rf src") && l.stdout.contains("changed 1"), "{}: the list names the command\n{}", fx.label(), l.show());

    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}: undo\n{}", fx.label(), un.show());
    for said in ["restored     src/a.rs", "restored     notes.txt", "removed      lnk", "restored     README", "pinfold undo --redo"] {
        assert!(un.stdout.contains(said), "{}: undo says {said:?}\n{}", fx.label(), un.show());
    }
    // Everything but the build output git ignores is as it was; that is gone, as documented.
    let mut expected = before.clone();
    expected.retain(|p, _| !p.starts_with("target"));
    assert_eq!(tree(&fx.proj), expected, "{}: after undo\n{}", fx.label(), un.show());

    let re = pinfold(&fx, &["undo", "--redo"]);
    assert_eq!(re.code, Some(0), "{}", re.show());
    assert_eq!(tree(&fx.proj), after, "{}: the redo brings back the command's result", fx.label());
    let again = pinfold(&fx, &["undo"]);
    assert_eq!(again.code, Some(0), "{}", again.show());
    assert_eq!(tree(&fx.proj), expected, "{}: and it can be undone again", fx.label());
    // The ledger holds the run's record and each undo.
    let audit = pinfold(&fx, &["audit", "tail", "--json"]);
    let kinds: Vec<serde_json::Value> = audit.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let undos = kinds.iter().filter(|r| r["kind"] == "undo").count();
    assert_eq!(undos, 3, "{}: three undo records\n{}", fx.label(), audit.show());
    let ends: Vec<&serde_json::Value> = kinds.iter().filter(|r| r["kind"] == "exec_end").collect();
    assert!(ends.iter().any(|r| r["data"]["undo"]["changes"].as_u64().is_some_and(|n| n > 5)), "{}: exec_end names the record\n{}", fx.label(), audit.show());
}

/// Two allowed commands, each undoable: the first adds `src/` to `.gitignore`, the second
/// removes `src`. What lies in an ignored directory is not kept, and the second run saw `src/`
/// ignored, so the user's uncommitted work there was beyond undo (found by an outside
/// attack). An ignore file a run on record changed no longer decides what a later run keeps:
/// the two undos bring back every file; build output ignored from the start stays unkept (the
/// control).
fn a_directory_ignored_by_an_earlier_run_is_still_kept(u: User) {
    let fx = Fx::new(u, "a_directory_ignored_by_an_earlier_run_is_still_kept");
    populate(&fx);
    fx.put(&fx.proj.join("src/a.rs"), "fn a() { /* uncommitted */ }\n");
    fx.put(&fx.proj.join("src/new.rs"), "untracked work\n");
    fx.put(&fx.proj.join("src/deep/more.rs"), "more untracked work\n");
    let before = tree(&fx.proj);
    let r = fx.exec(&[], &["echo 'src/' >> .gitignore".to_string()]);
    assert_eq!(r.code, Some(0), "{}: the first command\n{}", fx.label(), r.show());
    let r = fx.exec(&[], &["rm -rf src target".to_string()]);
    assert_eq!(r.code, Some(0), "{}: the second command\n{}", fx.label(), r.show());
    assert!(!fx.proj.join("src").exists(), "{}", fx.label());
    let un = pinfold(&fx, &["undo", "2"]);
    assert_eq!(un.code, Some(0), "{}: undo\n{}", fx.label(), un.show());
    let mut expected = before.clone();
    expected.retain(|p, _| !p.starts_with("target"));
    assert_eq!(tree(&fx.proj), expected, "{}: after undo\n{}", fx.label(), un.show());
}

/// A repository nested in the project (`lib/`, its own `.git`, a commit pushed nowhere):
/// `rm -rf lib/.git` and `rm -rf lib` are undone, history and all (found by an outside
/// attack: undo kept nothing of a nested `.git`, and its commits were gone).
fn a_nested_repository_comes_back(u: User) {
    let fx = Fx::new(u, "a_nested_repository_comes_back");
    populate(&fx);
    let lib = fx.proj.join("lib");
    fx.put(&lib.join("a.txt"), "lib work\n");
    let l = Fx::s(&lib);
    fx.host_ok(&["git", "-C", &l, "init", "-q"]);
    fx.host_ok(&["git", "-C", &l, "add", "a.txt"]);
    fx.host_ok(&["git", "-C", &l, "commit", "-q", "-m", "unpushed work"]);
    fx.own();
    let before = tree(&fx.proj);
    assert!(before.keys().any(|p| p.starts_with("lib/.git/objects")), "{}: the nested repository has no objects: the case proves nothing", fx.label());
    let log = || {
        let argv: Vec<String> = ["git", "-c", "safe.directory=*", "-C", &l, "log", "--format=%s"].iter().map(|s| s.to_string()).collect();
        fx.control(&argv).stdout
    };
    for cmd in ["rm -rf lib/.git", "rm -rf lib"] {
        let r = fx.exec(&[], &[cmd.to_string()]);
        assert_eq!(r.code, Some(0), "{}: {cmd}\n{}", fx.label(), r.show());
        assert!(!lib.join(".git").exists(), "{}: {cmd} removed nothing", fx.label());
        let un = pinfold(&fx, &["undo"]);
        assert_eq!(un.code, Some(0), "{}: undo of {cmd}\n{}", fx.label(), un.show());
        assert_eq!(tree(&fx.proj), before, "{}: after the undo of {cmd}\n{}", fx.label(), un.show());
        assert_eq!(log().trim(), "unpushed work", "{}: the nested repository's history after the undo of {cmd}", fx.label());
    }
}

/// A command that removes a directory and puts a link (or a file) in its place (`rm -rf src
/// && ln -s /tmp src`): the undo removes the link and makes the directory again with what it
/// held, and a redo puts the link back (found by an outside attack: the undo left `src` a
/// link and said every path was as it was).
fn a_directory_replaced_by_a_link_comes_back(u: User) {
    let fx = Fx::new(u, "a_directory_replaced_by_a_link_comes_back");
    populate(&fx);
    let before = tree(&fx.proj);
    let r = fx.exec(&[], &["rm -rf src notes.txt && ln -s /tmp src && mkdir notes.txt".to_string()]);
    assert_eq!(r.code, Some(0), "{}\n{}", fx.label(), r.show());
    let after = tree(&fx.proj);
    assert_eq!(after.get(Path::new("src")).map(String::as_str), Some("link /tmp"), "{}", fx.label());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}: undo\n{}", fx.label(), un.show());
    assert_eq!(tree(&fx.proj), before, "{}: after the undo\n{}", fx.label(), un.show());
    assert!(!un.stdout.contains("left as they are"), "{}: the undo left something\n{}", fx.label(), un.show());
    let redo = pinfold(&fx, &["undo", "--redo"]);
    assert_eq!(redo.code, Some(0), "{}: redo\n{}", fx.label(), redo.show());
    assert_eq!(tree(&fx.proj), after, "{}: after the redo\n{}", fx.label(), redo.show());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}: the second undo\n{}", fx.label(), un.show());
    assert_eq!(tree(&fx.proj), before, "{}: after the second undo\n{}", fx.label(), un.show());
}

/// A second name of a project file made in a directory git ignores, then written through
/// (`ln notes.txt target/x && echo overwritten > target/x`): the write changes `notes.txt`,
/// and the undo puts its bytes back (found by an outside attack: undo said "nothing to undo").
fn a_write_through_a_name_in_an_ignored_directory_is_kept(u: User) {
    let fx = Fx::new(u, "a_write_through_a_name_in_an_ignored_directory_is_kept");
    populate(&fx);
    let r = fx.exec(&[], &["ln notes.txt target/notes.o && echo overwritten > target/notes.o".to_string()]);
    assert_eq!(r.code, Some(0), "{}\n{}", fx.label(), r.show());
    assert_eq!(fs::read_to_string(fx.proj.join("notes.txt")).unwrap(), "overwritten\n", "{}: the write did not reach notes.txt: the case proves nothing", fx.label());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}: undo\n{}", fx.label(), un.show());
    assert_eq!(fs::read_to_string(fx.proj.join("notes.txt")).unwrap(), "my notes\n", "{}: notes.txt after the undo\n{}", fx.label(), un.show());
}

fn a_command_that_changes_nothing_leaves_no_record(u: User) {
    let fx = Fx::new(u, "changes_nothing");
    populate(&fx);
    let r = fx.exec(&[], &["cat README src/a.rs > /dev/null; ls -R . > /dev/null; git status --short > /dev/null".to_string()]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let runs = store(&fx).join("runs");
    let n = fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(n, 0, "{}: no record for a run that changed nothing", fx.label());
    let l = pinfold(&fx, &["undo"]);
    assert_eq!(l.code, Some(1), "{}: nothing to undo\n{}", fx.label(), l.show());
    assert!(l.stderr.contains("nothing to undo"), "{}", l.show());
}

fn a_command_killed_midway_can_be_undone(u: User) {
    let fx = Fx::new(u, "killed_midway");
    populate(&fx);
    let before = tree(&fx.proj);
    let argv = fx.exec_argv(&[], &["rm -rf src; echo started; exec sleep 60".to_string()]);
    let mut child = fx.cmd(&argv).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn pinfold exec");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started", "{}", fx.label());
    // pinfold itself is killed: nothing of it runs after (the sandbox dies with it).
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!fx.proj.join("src").exists());
    // The lock of the killed run is gone with its process: undo works at once.
    let l = pinfold(&fx, &["undo", "--list"]);
    assert!(l.stdout.contains("(did not finish)"), "{}: the run is marked unfinished\n{}", fx.label(), l.show());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    // The killed run's placeholders (empty files marked as such) are still there; the next
    // run removes them.
    assert!(fx.proj.join("denied-dir").exists(), "{}", fx.label());
    let next = fx.exec(&[], &["true".to_string()]);
    assert_eq!(next.code, Some(0), "{}", next.show());
    assert_eq!(tree(&fx.proj), before, "{}: what the killed run removed is back", fx.label());
}

fn commands_side_by_side_and_undo_while_one_runs(u: User) {
    let fx = Fx::new(u, "side_by_side");
    populate(&fx);
    let before = tree(&fx.proj);
    let a = fx.exec_argv(&[], &["rm src/a.rs && echo a > made-by-a && sleep 2".to_string()]);
    let b = fx.exec_argv(&[], &["rm src/deep/b.rs && echo b > made-by-b && echo b >> notes.txt && sleep 2".to_string()]);
    let mut ca = fx.cmd(&a).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut cb = fx.cmd(&b).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // While they run, an undo refuses (and changes nothing).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(fx.proj.join("made-by-a").exists() && fx.proj.join("made-by-b").exists()) {
        assert!(Instant::now() < deadline, "{}: the runs did not start", fx.label());
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = pinfold(&fx, &["undo"]);
    assert_eq!(busy.code, Some(2), "{}: undo refuses while a command runs\n{}", fx.label(), busy.show());
    assert!(busy.stderr.contains("running"), "{}", busy.show());
    assert!(ca.wait().unwrap().success() && cb.wait().unwrap().success(), "{}", fx.label());
    let un = pinfold(&fx, &["undo", "2"]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    let mut expected = before;
    expected.retain(|p, _| !p.starts_with("target") || tree(&fx.proj).contains_key(p));
    assert_eq!(tree(&fx.proj), expected, "{}: both runs undone", fx.label());
}

fn the_records_are_out_of_the_commands_reach(u: User) {
    let fx = Fx::new(u, "records_out_of_reach");
    populate(&fx);
    let r = fx.exec(&[], &["echo changed > notes.txt".to_string()]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let store = store(&fx);
    let snapshot = |p: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut v = Vec::new();
        let mut stack = vec![p.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    v.push((p.clone(), fs::read(&p).unwrap_or_default()));
                }
            }
        }
        v.sort();
        v
    };
    let kept = snapshot(&store);
    assert!(kept.iter().any(|(_, b)| b == b"my notes\n"), "{}: the old notes are kept", fx.label());
    let s = Fx::s(&store);
    let attack = format!(
        "t 'list the records' 'ls -A {s} | grep -q runs'\n\
         t 'read a kept file' 'cat {s}/runs/*/kept/0 | grep -q notes'\n\
         t 'remove the records' 'rm -r {s}/runs'\n\
         t 'rename the store away' 'mv {s} {s}.gone'\n\
         t 'plant a record' 'mkdir -p {s}/runs/9 && echo {{}} > {s}/runs/9/meta.json'\n"
    );
    let script = fx.sh_script("records", &attack);
    // The control: the same script outside any sandbox reaches the records.
    let c = fx.control(&script);
    assert!(c.escaped().len() >= 3, "{}: the control reaches the records\n{}", fx.label(), c.show());
    // Put the store back as it was for the attack run.
    let _ = fs::remove_dir_all(&store);
    let _ = fs::rename(format!("{s}.gone"), &store);
    for (p, b) in &kept {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, b).unwrap();
    }
    let _ = fs::remove_dir_all(store.join("runs/9"));
    fx.own();
    let kept = snapshot(&store);
    let a = fx.exec(&[], &script);
    assert!(a.started(), "{}\n{}", fx.label(), a.show());
    assert!(a.escaped().is_empty(), "{}: the sandboxed command reached the records: {:?}\n{}", fx.label(), a.escaped(), a.show());
    let after = snapshot(&store);
    let before_paths: Vec<_> = kept.iter().collect();
    // The attack run may add its own record (it changed nothing of the project's but its
    // scripts' directory, which git does not ignore here); the old records are untouched.
    for k in before_paths {
        assert!(after.contains(k), "{}: {} changed or gone", fx.label(), k.0.display());
    }
    let un = pinfold(&fx, &["undo", "--list"]);
    assert!(un.stdout.contains("echo changed > notes.txt"), "{}: the record is still listed\n{}", fx.label(), un.show());
}

fn a_project_that_is_not_a_repository_has_no_undo(u: User) {
    let mut fx = Fx::new(u, "not_a_repository");
    let plain = fx.base.join("plain");
    fx.put(&plain.join("pinfold.toml"), TEST_POLICY);
    fx.put(&plain.join("f.txt"), "x\n");
    fx.own();
    fx.cwd = plain.clone();
    fx.config = Some(plain.join("pinfold.toml"));
    let r = fx.exec(&[], &["rm f.txt".to_string()]);
    assert_eq!(r.code, Some(0), "{}: the command runs, without undo\n{}", fx.label(), r.show());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(2), "{}\n{}", fx.label(), un.show());
    assert!(un.stderr.contains("not in a git repository") && un.stderr.contains("git init"), "{}: says why and what to do\n{}", fx.label(), un.show());
}

fn hook_rewritten_commands_are_undoable(u: User) {
    let fx = Fx::new(u, "hook_rewritten");
    populate(&fx);
    fx.approve(&fx.proj.join("pinfold.toml"));
    let input = serde_json::json!({
        "session_id": "s", "transcript_path": "/dev/null", "cwd": Fx::s(&fx.proj),
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "rm -rf src && echo rewritten > notes.txt"}
    });
    let argv = vec![pinfold_bin(), "hook".into(), "claude-code".into()];
    let h = run_cmd(fx.cmd(&argv), argv.join(" "), Some(input.to_string().into_bytes()), TIMEOUT);
    assert_eq!(h.code, Some(0), "{}", h.show());
    let out: serde_json::Value = serde_json::from_str(&h.stdout).unwrap_or_else(|e| panic!("{}: {e}\n{}", fx.label(), h.show()));
    let rewritten = out["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap_or_else(|| panic!("{}: not rewritten\n{}", fx.label(), h.show())).to_string();
    assert!(rewritten.contains("exec"), "{}: {rewritten}", fx.label());
    // The agent runs what the hook gave back.
    let run = run_cmd(fx.cmd(&["bash".into(), "-c".into(), rewritten.clone()]), rewritten, None, TIMEOUT);
    assert_eq!(run.code, Some(0), "{}\n{}", fx.label(), run.show());
    assert!(!fx.proj.join("src").exists());
    let un = pinfold(&fx, &["undo", "2"]);
    assert_eq!(un.code, Some(0), "{}: each sub-command is a run of its own\n{}", fx.label(), un.show());
    assert_eq!(fs::read_to_string(fx.proj.join("src/a.rs")).unwrap(), "fn a() {}\n");
    assert_eq!(fs::read_to_string(fx.proj.join("notes.txt")).unwrap(), "my notes\n");
}

fn a_full_disk_fails_the_change_and_keeps_the_file(u: User) {
    let mut fx = Fx::new(u, "full_disk");
    let small = fx.base.join("small");
    fs::create_dir_all(&small).unwrap();
    fx.host_ok(&["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", &Fx::s(&small)]);
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _u = Unmount(small.clone());
    fx.host_ok(&["git", "init", "-q", &Fx::s(&small)]);
    let _ = fs::remove_dir_all(small.join(".git/hooks"));
    fx.put(&small.join("pinfold.toml"), TEST_POLICY);
    // More than half of what is left: it cannot be copied before a change in place.
    let free = {
        let out = fx.host_ok(&["df", "--output=avail", "-B1", &Fx::s(&small)]);
        out.lines().nth(1).unwrap().trim().parse::<u64>().unwrap()
    };
    let big = vec![b'b'; (free * 6 / 10) as usize];
    fs::write(small.join("big.bin"), &big).unwrap();
    // The records on the full file system too (the state directory), so that the copy the
    // change needs cannot be made anywhere.
    fx.env.insert("PINFOLD_STATE_DIR".into(), Fx::s(&small.join(".state")));
    fx.own();
    fx.cwd = small.clone();
    fx.config = Some(small.join("pinfold.toml"));
    let r = fx.exec(&[], &["echo appended >> big.bin; echo status=$?; echo new > small.txt; echo status=$?".to_string()]);
    assert_eq!(fs::read(small.join("big.bin")).unwrap(), big, "{}: the file that could not be kept is unchanged\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("No space left on device"), "{}: the command is told why\n{}", fx.label(), r.show());
    assert!(r.stdout.contains("status=1\nstatus=0"), "{}: the append failed, the small new file did not\n{}", fx.label(), r.show());
    assert_eq!(fs::read_to_string(small.join("small.txt")).unwrap(), "new\n");
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    assert!(!small.join("small.txt").exists(), "{}: the new file is undone", fx.label());
}

fn undo_turned_off_keeps_nothing(u: User) {
    let fx = Fx::new(u, "undo_off");
    populate(&fx);
    fx.put(&fx.proj.join("pinfold.toml"), &format!("{TEST_POLICY}\n[undo]\nenabled = false\n"));
    fx.own();
    let r = fx.exec(&[], &["rm src/a.rs".to_string()]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(!store(&fx).join("runs").exists(), "{}: nothing kept", fx.label());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(1), "{}\n{}", fx.label(), un.show());
}

/// A change the sandbox refuses (a swap with a hidden file, with a placeholder, with a control
/// file) must not enter the records: an undo runs outside the sandbox and would carry it out,
/// putting the hidden bytes where the next command reads them, or the command's file in the
/// control file's place. The swap works outside any sandbox (the control).
fn a_refused_change_to_a_protected_path_is_never_recorded(u: User) {
    let fx = Fx::new(u, "refused_swap");
    populate(&fx);
    fx.put(&fx.proj.join("CLAUDE.md"), "the person's instructions\n");
    fx.own();
    let body = r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def swap(a, b):
    r = libc.renameat2(-100, a.encode(), -100, b.encode(), 2)
    print('swap', a, b, 'ok' if r == 0 else 'refused ' + os.strerror(ctypes.get_errno()))
open('evil.md', 'w').write('planted')
open('grab', 'w').write('bait')
swap('grab', 'secret.txt')
swap('evil.md', 'CLAUDE.md')
swap('grab', '.env')
"#;
    let script = fx.py_script("swaps", body);
    let c = fx.control(&script);
    assert!(c.stdout.contains("swap grab secret.txt ok"), "{}: the control swaps\n{}", fx.label(), c.show());
    // Back to the start for the attack run.
    fs::write(fx.proj.join("secret.txt"), format!("{}\n", fx.token)).unwrap();
    fs::write(fx.proj.join("CLAUDE.md"), "the person's instructions\n").unwrap();
    for f in ["grab", "evil.md", ".env"] {
        let _ = fs::remove_file(fx.proj.join(f));
    }
    fx.own();
    let r = fx.exec(&[], &script);
    assert!(r.stdout.contains("swap grab secret.txt refused"), "{}\n{}", fx.label(), r.show());
    assert!(r.stdout.contains("swap evil.md CLAUDE.md refused"), "{}\n{}", fx.label(), r.show());
    let journals: String = fs::read_dir(store(&fx).join("runs")).unwrap().flatten().map(|e| fs::read_to_string(e.path().join("journal")).unwrap_or_default()).collect();
    assert!(!journals.contains("swapped") && !journals.contains("secret.txt") && !journals.contains("CLAUDE.md") && !journals.contains(".env"), "{}: refused changes recorded:\n{journals}", fx.label());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    assert_eq!(fs::read_to_string(fx.proj.join("secret.txt")).unwrap(), format!("{}\n", fx.token));
    assert_eq!(fs::read_to_string(fx.proj.join("CLAUDE.md")).unwrap(), "the person's instructions\n");
    assert!(!fx.proj.join("grab").exists() && !fx.proj.join("evil.md").exists(), "{}: the undo removed what the run made\n{}", fx.label(), un.show());
    assert!(!fx.proj.join(".env").exists(), "{}: no empty placeholder made by the undo", fx.label());
}

/// The records are a command's doing: an undo that would create a control file (here a
/// directory the command moved away from `.claude` within the run, which the undo moves back)
/// moves it aside afterwards, as a run's end does. Without that, the agent's settings would
/// hold the command's hook.
fn an_undo_never_leaves_a_control_file_a_command_made(u: User) {
    let fx = Fx::new(u, "undo_control_file");
    populate(&fx);
    fx.put(&fx.proj.join(".gitignore"), "target/\nnode_modules/\n");
    fx.own();
    let cmd = r#"mkdir x && echo '{"hooks":{}}' > x/settings.json && mv x .claude && mv .claude y && mkdir -p x/node_modules && touch x/node_modules/k"#;
    let r = fx.exec(&[], &[cmd.to_string()]);
    assert_eq!(r.code, Some(0), "{}: nothing is left at a control file's path after the run\n{}", fx.label(), r.show());
    let un = pinfold(&fx, &["undo"]);
    assert!(!fx.proj.join(".claude/settings.json").exists(), "{}: the undo left the command's agent settings\n{}", fx.label(), un.show());
    assert!(un.stderr.contains("would have created the control file"), "{}: says so\n{}", fx.label(), un.show());
}

/// A path through `/proc/self`, `/proc/thread-self`, `/dev/fd/N` or `/dev/stdin` names the
/// caller's own files: resolved by pinfold's process it would name pinfold's, and the change
/// would go unrecorded. Each is recorded and undone.
fn changes_through_proc_and_dev_fd_are_recorded(u: User) {
    let fx = Fx::new(u, "proc_paths");
    populate(&fx);
    fx.put(&fx.proj.join("precious.txt"), "precious\n");
    fx.put(&fx.proj.join("other.txt"), "other\n");
    fx.own();
    let before = tree(&fx.proj);
    let cmd = "truncate -s 0 /dev/stdin < precious.txt && rm -rf /proc/self/cwd/src && echo x > /proc/thread-self/cwd/notes.txt \
               && exec 3<. && rm /dev/fd/3/other.txt";
    let r = fx.exec(&[], &[cmd.to_string()]);
    assert_eq!(r.code, Some(0), "{}\n{}", fx.label(), r.show());
    assert_eq!(fs::read_to_string(fx.proj.join("precious.txt")).unwrap(), "", "{}: the command ran", fx.label());
    assert!(!fx.proj.join("src").exists() && !fx.proj.join("other.txt").exists(), "{}", fx.label());
    let un = pinfold(&fx, &["undo"]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    let mut now = tree(&fx.proj);
    let mut want = before;
    for t in [&mut now, &mut want] {
        t.retain(|p, _| !p.starts_with("target"));
    }
    assert_eq!(now, want, "{}: everything is back\n{}", fx.label(), un.show());
}

/// A path pinfold cannot resolve as the kernel will (longer than PATH_MAX through a deep
/// directory descriptor) is refused, never let through unrecorded.
fn a_path_too_long_to_resolve_is_refused(u: User) {
    let fx = Fx::new(u, "long_paths");
    populate(&fx);
    let body = r#"import os
try:
    d = os.open('.', os.O_RDONLY)
    for i in range(25):
        name = 'd' * 200
        os.mkdir(name, dir_fd=d)
        d2 = os.open(name, os.O_RDONLY, dir_fd=d)
        os.close(d)
        d = d2
    os.rename('src', 'src', src_dir_fd=os.open('.', os.O_RDONLY), dst_dir_fd=d)
    print('moved deep')
except OSError as e:
    print('refused', e.strerror)
"#;
    let script = fx.py_script("deep", body);
    let r = fx.exec(&[], &script);
    assert!(r.stdout.contains("refused File name too long"), "{}: a change beyond PATH_MAX is refused\n{}", fx.label(), r.show());
    assert!(fx.proj.join("src/a.rs").exists(), "{}", fx.label());
}

/// A run in a repository nested in the project (`git init sub`, which a command may do) holds
/// the project's undo store busy too: an undo or redo of the project, whose tree holds `sub`,
/// refuses while it runs (found by an outside attack: a redo raced the run and reported
/// success while paths it should have put back were moved away), and works once it ends.
fn a_run_in_a_nested_repository_holds_the_outer_undo(u: User) {
    let mut fx = Fx::new(u, "nested_repository_holds_the_outer_undo");
    populate(&fx);
    // The policy from outside the project, so that the nested repository is the nested run's
    // project (and has an undo store of its own).
    let outside = fx.base.join("outside.toml");
    let inside = fx.config.clone().expect("a policy");
    std::fs::copy(&inside, &outside).unwrap();
    if inside.starts_with(&fx.proj) {
        std::fs::remove_file(&inside).unwrap();
    }
    fx.config = Some(outside);
    fx.own();
    let r = fx.exec(&[], &["rm src/deep/b.rs".to_string()]);
    assert_eq!(r.code, Some(0), "{}: the recorded run\n{}", fx.label(), r.show());
    let r = fx.exec(&[], &["git init -q src".to_string()]);
    assert_eq!(r.code, Some(0), "{}: git init src\n{}", fx.label(), r.show());
    // Once the run has ended, the outer undo works: of the last two records, `git init` (a
    // nested repository's `.git` is kept like any directory) and the `rm`.
    let (src, removed) = (fx.proj.join("src"), fx.proj.join("src/deep/b.rs"));
    undo_refused_while_a_run_goes_on(&mut fx, &src, &removed, "nested run", "2");
}

/// While `pinfold exec` runs in `dir` (started, then three seconds, then it writes
/// `later.txt`), an undo in the project refuses and changes nothing (`removed` stays gone);
/// once the run has ended, the same undo (`pinfold undo BACK`) puts `removed` back (the
/// control). `what` names the run in messages.
fn undo_refused_while_a_run_goes_on(fx: &mut Fx, dir: &Path, removed: &Path, what: &str, back: &str) {
    let outer = fx.cwd.clone();
    fx.cwd = dir.to_path_buf();
    let argv = fx.exec_argv(&[], &["echo started; sleep 3; echo later > later.txt".to_string()]);
    let mut child = fx.cmd(&argv).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn pinfold exec");
    fx.cwd = outer;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started", "{}: the {what} did not start", fx.label());
    let busy = pinfold(fx, &["undo", back]);
    assert_eq!(busy.code, Some(2), "{}: undo refuses while the {what} goes on\n{}", fx.label(), busy.show());
    assert!(busy.stderr.contains("running"), "{}", busy.show());
    assert!(!removed.exists(), "{}: the refused undo changed the project", fx.label());
    assert!(child.wait().unwrap().success(), "{}: the {what} failed", fx.label());
    assert!(dir.join("later.txt").exists(), "{}: the {what} did not write", fx.label());
    let un = pinfold(fx, &["undo", back]);
    assert_eq!(un.code, Some(0), "{}", un.show());
    assert!(removed.exists(), "{}: the undo did not put {} back\n{}", fx.label(), removed.display(), un.show());
}

/// A run on a backend that keeps no record of changes (gVisor, a container) holds the
/// project's undo store busy all the same: an undo of an earlier run refuses while it runs,
/// rather than putting files back under a command writing them, and works once it ends.
fn an_undo_waits_out_a_run_on_another_backend(u: User) {
    let mut fx = Fx::new(u, "undo_waits_out_another_backend");
    populate(&fx);
    // The recorded run, on the process backend.
    let backend = fx.backend.take().expect("on a backend");
    let r = fx.exec(&[], &["rm src/a.rs".to_string()]);
    assert_eq!(r.code, Some(0), "{}: the recorded run\n{}", fx.label(), r.show());
    fx.backend = Some(backend);
    let (proj, removed) = (fx.proj.clone(), fx.proj.join("src/a.rs"));
    undo_refused_while_a_run_goes_on(&mut fx, &proj, &removed, &format!("{backend} run"), "1");
}

mod an_undo_waits_out_a_run_on_another_backend {
    use super::*;
    #[test]
    fn gvisor_root() { on_backend("gvisor", || super::an_undo_waits_out_a_run_on_another_backend(User::Root)) }
    #[test]
    fn gvisor_nobody() { on_backend("gvisor", || super::an_undo_waits_out_a_run_on_another_backend(User::Nobody)) }
    #[test]
    fn container_root() { on_backend("container", || super::an_undo_waits_out_a_run_on_another_backend(User::Root)) }
    #[test]
    fn container_nobody() { on_backend("container", || super::an_undo_waits_out_a_run_on_another_backend(User::Nobody)) }
}
