//! The journal and the restore, driven directly: each change is written down with
//! `Journal::before` and then made, as the sandbox does it for a command; undo, redo and undo
//! again must each leave the tree exactly as it was at that point.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pinfold_sandbox::Change;
use pinfold_undo::{Kind, Store};

/// Every path beneath `root` (but `.git`) with what it is: file bytes, link text, dir, mode.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if rel.starts_with(".git") {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let v = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {}", String::from_utf8_lossy(&std::fs::read(&p).unwrap()))
            };
            out.insert(rel, v);
        }
    }
    out
}

fn project() -> (tempfile::TempDir, Store) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap().join("proj");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/a.rs"), "fn a() {}").unwrap();
    std::fs::write(root.join("src/deep/b.rs"), "fn b() {}").unwrap();
    std::fs::write(root.join("notes.txt"), "keep me").unwrap();
    std::fs::write(root.join("run.sh"), "echo hi").unwrap();
    std::os::unix::fs::symlink("src/a.rs", root.join("link")).unwrap();
    let store = Store::locate(&root, Some(&t.path().join("state"))).unwrap();
    (t, store)
}

/// `rm -rf src` as a run makes it: each entry written down, then removed, deepest first.
fn remove_src(j: &mut pinfold_undo::Journal, root: &Path) {
    for f in ["src/deep/b.rs", "src/deep", "src/a.rs", "src"] {
        j.before(&Change::Remove { path: root.join(f) }).unwrap();
        let p = root.join(f);
        if p.is_dir() { std::fs::remove_dir(&p).unwrap() } else { std::fs::remove_file(&p).unwrap() }
    }
}

#[test]
fn undo_puts_back_every_kind_of_change_and_redo_takes_it_back() {
    let (_t, store) = project();
    let root = store.root.clone();
    let before = tree(&root);
    let mut j = store.begin("a command that does everything", &root).unwrap();
    let mut go = |c: Change| j.before(&c).unwrap();
    // rm -rf src
    go(Change::Remove { path: root.join("src/deep/b.rs") });
    std::fs::remove_file(root.join("src/deep/b.rs")).unwrap();
    go(Change::Remove { path: root.join("src/deep") });
    std::fs::remove_dir(root.join("src/deep")).unwrap();
    // echo > notes.txt, then again (only the first state is kept)
    go(Change::Write { path: root.join("notes.txt"), truncate: true });
    std::fs::write(root.join("notes.txt"), "overwritten").unwrap();
    go(Change::Write { path: root.join("notes.txt"), truncate: true });
    std::fs::write(root.join("notes.txt"), "overwritten twice").unwrap();
    // chmod +x run.sh
    go(Change::Mode { path: root.join("run.sh") });
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // mv src/a.rs src/c.rs, then the moved file written in place
    go(Change::Rename { from: root.join("src/a.rs"), to: root.join("src/c.rs"), exchange: false });
    std::fs::rename(root.join("src/a.rs"), root.join("src/c.rs")).unwrap();
    go(Change::Write { path: root.join("src/c.rs"), truncate: false });
    std::fs::write(root.join("src/c.rs"), "changed in place").unwrap();
    // mv src lib (a directory)
    go(Change::Rename { from: root.join("src"), to: root.join("lib"), exchange: false });
    std::fs::rename(root.join("src"), root.join("lib")).unwrap();
    // new files and a new directory; a link replaced
    go(Change::Make { path: root.join("new") });
    std::fs::create_dir(root.join("new")).unwrap();
    go(Change::Write { path: root.join("new/x"), truncate: true });
    std::fs::write(root.join("new/x"), "x").unwrap();
    go(Change::Remove { path: root.join("link") });
    std::fs::remove_file(root.join("link")).unwrap();
    // in an ignored directory: not kept, and not touched by the undo
    std::fs::create_dir(root.join("target")).unwrap();
    go(Change::Write { path: root.join("target/out"), truncate: true });
    std::fs::write(root.join("target/out"), "build").unwrap();
    assert_eq!(j.finish(Some(0)).unwrap(), 11);
    let after = tree(&root);
    assert_ne!(before, after);

    let undone = store.undo(1, &root).unwrap();
    let mut now = tree(&root);
    assert_eq!(now.remove(Path::new("target/out")).as_deref(), Some("file 644 build"));
    assert_eq!(now.remove(Path::new("target")).map(|s| s.starts_with("dir")), Some(true));
    assert_eq!(now, before, "the undo restored: {:?}", undone.restored);
    assert!(undone.left.is_empty(), "{:?}", undone.left);
    assert_eq!(undone.undone.len(), 1);

    // Nothing left to undo.
    assert_eq!(store.undo(1, &root).unwrap_err().kind, Kind::Nothing);
    // The undo is undone: the command's result is back.
    store.redo(&root).unwrap();
    assert_eq!(tree(&root), after);
    // And the command can be undone again.
    store.undo(1, &root).unwrap();
    let mut again = tree(&root);
    again.remove(Path::new("target/out"));
    again.remove(Path::new("target"));
    assert_eq!(again, before);
}

#[test]
fn what_a_person_changed_since_is_kept_by_the_undo() {
    let (_t, store) = project();
    let root = store.root.clone();
    let mut j = store.begin("echo x > notes.txt", &root).unwrap();
    j.before(&Change::Write { path: root.join("notes.txt"), truncate: true }).unwrap();
    std::fs::write(root.join("notes.txt"), "by the command").unwrap();
    j.finish(Some(0)).unwrap();
    // A person edits the file afterwards, outside any sandbox.
    std::fs::write(root.join("notes.txt"), "by a person").unwrap();
    store.undo(1, &root).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("notes.txt")).unwrap(), "keep me");
    // The person's edit is not lost: the redo brings it back.
    store.redo(&root).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("notes.txt")).unwrap(), "by a person");
}

#[test]
fn a_run_that_changes_nothing_leaves_no_record() {
    let (_t, store) = project();
    let root = store.root.clone();
    let j = store.begin("ls", &root).unwrap();
    assert_eq!(j.finish(Some(0)).unwrap(), 0);
    assert!(store.list().unwrap().is_empty());
    assert_eq!(store.undo(1, &root).unwrap_err().kind, Kind::Nothing);
}

#[test]
fn undo_refuses_while_a_command_runs() {
    let (_t, store) = project();
    let root = store.root.clone();
    let mut j = store.begin("sleep", &root).unwrap();
    j.before(&Change::Make { path: root.join("made") }).unwrap();
    std::fs::write(root.join("made"), "").unwrap();
    let err = store.undo(1, &root).unwrap_err();
    assert_eq!(err.kind, Kind::Busy);
    j.finish(Some(0)).unwrap();
    store.undo(1, &root).unwrap();
    assert!(!root.join("made").exists());
}

#[test]
fn overlapping_runs_unwind_in_the_order_their_changes_happened() {
    let (_t, store) = project();
    let root = store.root.clone();
    let p = root.join("notes.txt");
    // Run A starts first, run B second; B writes the file first, then A.
    let mut a = store.begin("A", &root).unwrap();
    let mut b = store.begin("B", &root).unwrap();
    b.before(&Change::Write { path: p.clone(), truncate: true }).unwrap();
    std::fs::write(&p, "B").unwrap();
    a.before(&Change::Write { path: p.clone(), truncate: true }).unwrap();
    std::fs::write(&p, "A").unwrap();
    a.finish(Some(0)).unwrap();
    b.finish(Some(0)).unwrap();
    store.undo(2, &root).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "keep me");
}

#[test]
fn not_a_git_repository_has_no_undo() {
    let t = tempfile::tempdir().unwrap();
    let e = Store::locate(t.path(), Some(t.path())).unwrap_err();
    assert_eq!(e.kind, Kind::Unavailable);
    assert!(e.message.contains("not in a git repository"), "{}", e.message);
}

/// Between runs the project holds whatever a command left, links included: an undo must
/// not write through a link planted on the way to a path it puts back.
#[test]
fn undo_never_writes_through_a_link_planted_on_the_way() {
    let (t, store) = project();
    let root = store.root.clone();
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let mut j = store.begin("echo > src/a.rs", &root).unwrap();
    j.before(&Change::Write { path: root.join("src/a.rs"), truncate: true }).unwrap();
    std::fs::write(root.join("src/a.rs"), "changed").unwrap();
    j.finish(Some(0)).unwrap();
    // The next command (or anyone) swaps `src` for a link to a directory outside.
    std::fs::rename(root.join("src"), root.join("src.real")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("src")).unwrap();
    let out = store.undo(1, &root).unwrap();
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none(), "the undo wrote outside the project");
    assert!(out.left.iter().any(|(p, why)| p == Path::new("src/a.rs") && why.contains("symbolic link")), "{:?}", out.left);
}

/// The journal reads what it keeps beneath the root, through no link: a directory swapped for
/// a link to a file the sandbox hides cannot get that file kept (and later put back).
#[test]
fn the_journal_never_reads_through_a_link_planted_on_the_way() {
    let (t, store) = project();
    let root = store.root.clone();
    let secret_dir = t.path().join("secret");
    std::fs::create_dir(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key"), "SECRET").unwrap();
    std::os::unix::fs::symlink(&secret_dir, root.join("d")).unwrap();
    let mut j = store.begin("rm d/key", &root).unwrap();
    assert_eq!(j.before(&Change::Remove { path: root.join("d/key") }), Err(libc::ELOOP));
    assert_eq!(j.before(&Change::Write { path: root.join("d/key"), truncate: true }), Err(libc::ELOOP));
    j.finish(Some(0)).unwrap();
    for r in store.list().unwrap() {
        for k in std::fs::read_dir(r.dir.join("kept")).into_iter().flatten().flatten() {
            assert_ne!(std::fs::read(k.path()).unwrap(), b"SECRET");
        }
    }
}

/// The records keep the newest 100 runs, and fewer when together they keep more than 4 GiB:
/// the oldest go first, the newest always stays.
#[test]
fn the_oldest_records_go_first() {
    let (_t, store) = project();
    let root = store.root.clone();
    for i in 0..(pinfold_undo::KEEP_RUNS + 3) {
        let mut j = store.begin(&format!("run {i}"), &root).unwrap();
        let p = root.join(format!("f{i}"));
        j.before(&Change::Make { path: p.clone() }).unwrap();
        std::fs::write(&p, "x").unwrap();
        j.finish(Some(0)).unwrap();
    }
    assert_eq!(store.prune().unwrap(), 3);
    let list = store.list().unwrap();
    assert_eq!(list.len(), pinfold_undo::KEEP_RUNS);
    assert_eq!(list[0].meta.command, "run 3");
    // Sizes: pretend the three newest kept 2 GiB each.
    for r in &list[list.len() - 3..] {
        let end = r.dir.join("end.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&end).unwrap()).unwrap();
        v["kept_bytes"] = (2u64 << 30).into();
        std::fs::write(&end, v.to_string()).unwrap();
    }
    store.prune().unwrap();
    let left: Vec<String> = store.list().unwrap().into_iter().map(|r| r.meta.command).collect();
    assert_eq!(left, vec![format!("run {}", pinfold_undo::KEEP_RUNS + 1), format!("run {}", pinfold_undo::KEEP_RUNS + 2)]);
}

/// The records belong to the working tree, not to the git directory its `.git` names: a
/// directory whose `.git` file names another repository's git directory (a command can make
/// one) gets records of its own, which an undo in that other repository never sees.
#[test]
fn records_follow_the_working_tree_not_the_git_directory() {
    let (t, store) = project();
    let nested = store.root.join("sub2");
    std::fs::create_dir(&nested).unwrap();
    std::fs::write(nested.join(".git"), format!("gitdir: {}\n", store.git_dir.display())).unwrap();
    let other = Store::locate(&nested, Some(&t.path().join("state"))).unwrap();
    assert_eq!(other.root, nested);
    assert_eq!(other.git_dir, store.git_dir);
    assert_ne!(other.dir, store.dir, "one store per working tree");
    assert!(!store.dir.starts_with(&store.root) && !store.dir.starts_with(&store.git_dir), "the records are in the state directory");
}

/// A directory moved where nothing is kept (into a directory git ignores) and then removed
/// there: everything it held is kept as removed, and comes back.
#[test]
fn a_directory_moved_where_nothing_is_kept_comes_back() {
    let (_t, store) = project();
    let root = store.root.clone();
    std::fs::write(root.join(".gitignore"), "target/\nnode_modules/\n").unwrap();
    std::fs::create_dir(root.join("node_modules")).unwrap();
    let before = tree(&root);
    let mut j = store.begin("mv src node_modules/ && rm -rf node_modules", &root).unwrap();
    j.before(&Change::Rename { from: root.join("src"), to: root.join("node_modules/src"), exchange: false }).unwrap();
    std::fs::rename(root.join("src"), root.join("node_modules/src")).unwrap();
    std::fs::remove_dir_all(root.join("node_modules")).unwrap();
    j.finish(Some(0)).unwrap();
    let out = store.undo(1, &root).unwrap();
    let mut now = tree(&root);
    let mut want = before;
    for t in [&mut now, &mut want] {
        t.retain(|p, _| !p.starts_with("node_modules"));
    }
    assert_eq!(now, want, "{:?} {:?}", out.restored, out.left);
}

/// An entry that cannot be put back (what it swapped with is gone) is left and said; the
/// rest of the undo still happens.
#[test]
fn one_entry_that_cannot_be_put_back_does_not_stop_the_rest() {
    let (_t, store) = project();
    let root = store.root.clone();
    let mut j = store.begin("rm notes.txt; swap a b", &root).unwrap();
    j.before(&Change::Remove { path: root.join("notes.txt") }).unwrap();
    std::fs::remove_file(root.join("notes.txt")).unwrap();
    std::fs::write(root.join("a"), "a").unwrap();
    std::fs::write(root.join("b"), "b").unwrap();
    j.before(&Change::Rename { from: root.join("a"), to: root.join("b"), exchange: true }).unwrap();
    j.finish(Some(0)).unwrap();
    // Someone removes `a` before the undo: the swap cannot be reversed.
    std::fs::remove_file(root.join("a")).unwrap();
    let out = store.undo(1, &root).unwrap();
    assert!(out.left.iter().any(|(p, _)| p == Path::new("a")), "{:?}", out.left);
    assert_eq!(std::fs::read_to_string(root.join("notes.txt")).unwrap(), "keep me");
}

/// Undo does not trust a record blindly: kept bytes that are a link or a FIFO are not read
/// (no file read through a link, no hang), a path into `.git` or out of the project is not
/// touched, and a set-user bit is not put back.
#[test]
fn a_planted_record_is_not_trusted() {
    let (t, store) = project();
    let root = store.root.clone();
    let secret = t.path().join("secret");
    std::fs::write(&secret, "SECRET").unwrap();
    let run = store.dir.join("runs").join("00000000000000000001-1-0");
    std::fs::create_dir_all(run.join("kept")).unwrap();
    std::fs::write(run.join("meta.json"), r#"{"id":"00000000000000000001-1-0","kind":"exec","command":"x","cwd":"/","started_ns":"1","pid":1}"#).unwrap();
    std::fs::write(run.join("end.json"), r#"{"exit":0,"changes":5}"#).unwrap();
    std::os::unix::fs::symlink(&secret, run.join("kept/0")).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(run.join("kept/1")).status().unwrap().success());
    std::fs::write(run.join("kept/2"), "[core]\n\tfsmonitor = evil\n").unwrap();
    std::fs::write(run.join("kept/3"), "#!/bin/sh\n").unwrap();
    std::fs::write(run.join("kept/4"), "x").unwrap();
    std::fs::write(
        run.join("journal"),
        [
            r#"{"n":0,"t":5,"path":"leak.txt","was":"file","mode":420}"#,
            r#"{"n":1,"t":4,"path":"hang.txt","was":"file","mode":420}"#,
            r#"{"n":2,"t":3,"path":".git/config","was":"file","mode":420}"#,
            r#"{"n":3,"t":2,"path":"suid","was":"file","mode":3583}"#,
            r#"{"n":4,"t":1,"path":"../outside","was":"file","mode":420}"#,
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let out = store.undo(1, &root).unwrap();
    assert!(!root.join("leak.txt").exists(), "read through a link");
    assert!(!root.join("hang.txt").exists());
    assert!(!std::fs::read_to_string(store.git_dir.join("config")).unwrap_or_default().contains("evil"));
    assert!(!t.path().join("outside").exists());
    let mode = std::fs::metadata(root.join("suid")).unwrap().permissions().mode();
    assert!(mode & 0o7777 != 0);
    assert_eq!(mode & 0o6000, 0, "set-user/group bits dropped: {mode:o}");
    assert!(out.left.len() >= 4, "{:?}", out.left);
}

/// A sparse file written in place is kept sparse: the records hold what it holds, not its
/// length (a 256 MiB file with one byte of data must not cost 256 MiB), and it comes back
/// exact, and sparse.
#[test]
fn a_sparse_file_is_kept_sparse() {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let (_t, store) = project();
    let root = store.root.clone();
    let p = root.join("big.img");
    let mut f = std::fs::File::create(&p).unwrap();
    f.set_len(256 << 20).unwrap();
    f.seek(SeekFrom::Start(123_456_789)).unwrap();
    f.write_all(b"Z").unwrap();
    drop(f);
    let mut j = store.begin("echo >> big.img", &root).unwrap();
    j.before(&Change::Write { path: p.clone(), truncate: false }).unwrap();
    std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"tail").unwrap();
    j.finish(Some(0)).unwrap();
    let rec = store.list().unwrap().pop().unwrap();
    let kept = std::fs::metadata(rec.dir.join("kept/0")).unwrap();
    assert_eq!(kept.len(), 256 << 20);
    assert!(kept.blocks() * 512 < 1 << 20, "the copy allocates {} bytes", kept.blocks() * 512);
    store.undo(1, &root).unwrap();
    assert!(std::fs::metadata(&p).unwrap().blocks() * 512 < 1 << 20, "restored sparse");
    let back = std::fs::read(&p).unwrap();
    assert_eq!(back.len(), 256 << 20);
    assert_eq!(back[123_456_789], b'Z');
    assert_eq!(back.iter().filter(|b| **b != 0).count(), 1);
}

/// Found by an outside review: a mode changed first (`chmod -R u+w work && rm -rf work`)
/// still leaves the content written down at the path's next change.
#[test]
fn a_mode_change_first_does_not_hide_a_later_removal() {
    let (_t, store) = project();
    let root = store.root.clone();
    let before = tree(&root);
    let mut j = store.begin("chmod 600 notes.txt && rm notes.txt && chmod 700 src && rm -rf src", &root).unwrap();
    let mut go = |c: Change| j.before(&c).unwrap();
    go(Change::Mode { path: root.join("notes.txt") });
    std::fs::set_permissions(root.join("notes.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    go(Change::Remove { path: root.join("notes.txt") });
    std::fs::remove_file(root.join("notes.txt")).unwrap();
    go(Change::Mode { path: root.join("src") });
    std::fs::set_permissions(root.join("src"), std::fs::Permissions::from_mode(0o700)).unwrap();
    drop(go);
    remove_src(&mut j, &root);
    j.finish(Some(0)).unwrap();
    store.undo(1, &root).unwrap();
    assert_eq!(tree(&root), before);
}

/// Found by an outside review: a run that adds a directory to `.gitignore` and then removes it
/// does not get to un-keep it: ignore rules are read as they were before the run changed them.
#[test]
fn ignoring_a_directory_in_the_run_does_not_unkeep_it() {
    let (_t, store) = project();
    let root = store.root.clone();
    let before = tree(&root);
    let mut j = store.begin("echo src/ >> .gitignore && rm -rf src", &root).unwrap();
    j.before(&Change::Write { path: root.join(".gitignore"), truncate: false }).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\nsrc/\n").unwrap();
    remove_src(&mut j, &root);
    j.finish(Some(0)).unwrap();
    store.undo(1, &root).unwrap();
    assert_eq!(tree(&root), before);
}

/// Found by an outside review: kept bytes never share an inode with a live file, so a later
/// write through another name (a hard link, a rename target, in a later run) cannot change
/// what an undo puts back; and a write through a new name of a file puts back every name.
#[test]
fn kept_bytes_share_no_inode_with_live_files() {
    let (_t, store) = project();
    let root = store.root.clone();
    let (hf, hg) = (root.join("hf"), root.join("hg"));
    std::fs::write(&hf, "ORIGINAL").unwrap();
    // Run 1: ln hf hg. Run 2: rm hf. Run 3: write through hg.
    let mut j = store.begin("ln hf hg", &root).unwrap();
    j.before(&Change::Make { path: hg.clone() }).unwrap();
    std::fs::hard_link(&hf, &hg).unwrap();
    j.finish(Some(0)).unwrap();
    let mut j = store.begin("rm hf", &root).unwrap();
    j.before(&Change::Remove { path: hf.clone() }).unwrap();
    std::fs::remove_file(&hf).unwrap();
    j.finish(Some(0)).unwrap();
    let mut j = store.begin("echo TAMPERED > hg", &root).unwrap();
    j.before(&Change::Write { path: hg.clone(), truncate: true }).unwrap();
    std::fs::write(&hg, "TAMPERED").unwrap();
    j.finish(Some(0)).unwrap();
    store.undo(3, &root).unwrap();
    assert_eq!(std::fs::read_to_string(&hf).unwrap(), "ORIGINAL");
    assert!(!hg.exists());
    // ln n2 h2 && echo junk > h2, in one run: n2 gets its bytes back.
    let (n2, h2) = (root.join("n2"), root.join("h2"));
    std::fs::write(&n2, "orig").unwrap();
    let mut j = store.begin("ln n2 h2 && echo junk > h2", &root).unwrap();
    j.before(&Change::Make { path: h2.clone() }).unwrap();
    std::fs::hard_link(&n2, &h2).unwrap();
    j.before(&Change::Write { path: h2.clone(), truncate: true }).unwrap();
    std::fs::write(&h2, "junk").unwrap();
    j.finish(Some(0)).unwrap();
    store.undo(1, &root).unwrap();
    assert_eq!(std::fs::read_to_string(&n2).unwrap(), "orig");
    assert!(!h2.exists());
}
