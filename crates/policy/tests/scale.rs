//! Inputs far larger than a person writes: judging must neither recurse once per argument
//! (a command of tens of thousands of arguments overflowed the stack and killed the process,
//! which an agent's hook reads as "go ahead") nor weaken its answer.
//!
//! Each case is judged on a thread with a 256 KiB stack: recursion proportional to the
//! argument count overflows it (the test process then dies of SIGSEGV, a failure), while
//! judging that keeps its state on the heap needs only a few kilobytes of stack.

use std::path::{Path, PathBuf};

use pinfold_policy::Policy;
use pinfold_policy::config::{Action, Format, LoadOptions, load, load_str};

/// The embedded default policy, as `pinfold check` loads it with no policy file around.
fn default_policy(project: &Path) -> Policy {
    let opts = LoadOptions {
        explicit: None,
        cwd: project.to_path_buf(),
        home: Some(PathBuf::from("/home/agent")),
        xdg_config_home: Some(project.join("no-config")),
    };
    Policy::new(load(&opts).expect("the embedded policy loads"))
        .expect("the embedded policy compiles")
}

/// Judge each `(command, expected)` on a thread with a small stack.
fn judge_on_small_stack(cases: Vec<(String, Action)>) {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let project = tempfile::tempdir().expect("temporary project");
            let policy = default_policy(project.path());
            for (command, expected) in cases {
                let j = policy.judge(&command, project.path());
                let head: String = command.chars().take(40).collect();
                assert_eq!(
                    j.decision,
                    expected,
                    "`{head}…` ({} bytes): {}",
                    command.len(),
                    j.reason
                );
            }
        })
        .expect("spawn the judging thread")
        .join()
        .expect("judging panicked");
}

#[test]
fn a_command_of_tens_of_thousands_of_arguments_is_judged() {
    let n = 40_000;
    judge_on_small_stack(vec![
        // A deny rule with `*` still matches with the flags repeated thousands of times, without a crash.
        (format!("rm -rf ~ {}", "-f ".repeat(n)), Action::Deny),
        (format!("rm {} -rf /", "-f ".repeat(n)), Action::Deny),
        // Allowed plain arguments stay allowed.
        (format!("echo {}", "a ".repeat(n)), Action::Allow),
        // Dynamic arguments: every reading holds one; still judged, not crashed.
        (format!("echo {}", "\"$x\" ".repeat(n)), Action::Allow),
        // Options of a tool pinfold has no table for: each may or may not take a value.
        (format!("sometool {}", "-x v ".repeat(n)), Action::Ask),
        (
            format!("git {} push --force", "-c a=b ".repeat(n / 2)),
            Action::Ask,
        ),
        (format!("xargs {}rm -rf /", "-0 ".repeat(n)), Action::Deny),
    ]);
}

/// Functions that can call themselves, directly or through others, are found in linear time:
/// the call graph's cycles, not a search from every function (tens of thousands of functions
/// took tens of seconds), and without a stack frame per function.
#[test]
fn recursive_functions_are_found_among_tens_of_thousands() {
    let policy_text = "[defaults]\naction = \"allow\"\n";
    let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/me".into()), xdg_config_home: None };
    let p = Policy::new(pinfold_policy::config::load_str("pinfold.toml", policy_text, pinfold_policy::config::Format::Toml, &opts).unwrap()).unwrap();
    let judge = |c: &str| p.judge(c, "/p".as_ref());
    assert_eq!(judge("f(){ f; }; f").decision, Action::Ask, "a function that calls itself");
    let j = judge("a(){ :; }; b(){ a; }; a(){ b; }; a");
    assert_eq!(j.decision, Action::Ask, "a cycle through two functions: {}", j.reason);
    assert!(j.reason.contains("calls itself"), "{}", j.reason);
    assert_eq!(judge("a(){ :; }; b(){ a; }; c(){ b; }; c").decision, Action::Allow, "a chain is no cycle");
    let many = "f(){ f; }; ".repeat(20_000) + "f";
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/me".into()), xdg_config_home: None };
            let p = Policy::new(pinfold_policy::config::load_str("pinfold.toml", "[defaults]\naction = \"allow\"\n", pinfold_policy::config::Format::Toml, &opts).unwrap()).unwrap();
            let chain: String = (0..20_000).map(|i| format!("g{}(){{ g{}; }}; ", i + 1, i)).collect::<String>() + "g0(){ g20000; }; g1";
            assert_eq!(p.judge(&many, "/p".as_ref()).decision, Action::Ask);
            let j = p.judge(&chain, "/p".as_ref());
            assert_eq!(j.decision, Action::Ask, "{}", j.reason);
        })
        .unwrap()
        .join()
        .expect("judging panicked");
}

/// bash looks a function up when it is called: `a(){ b; }; b(){ a; }; a` recurses although
/// `b` was not yet defined when `a`'s body was written.
#[test]
fn a_cycle_through_a_function_defined_later_is_found() {
    let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/me".into()), xdg_config_home: None };
    let p = Policy::new(pinfold_policy::config::load_str("pinfold.toml", "[defaults]\naction = \"allow\"\n", pinfold_policy::config::Format::Toml, &opts).unwrap()).unwrap();
    let j = p.judge("a(){ b; }; b(){ a; }; a", "/p".as_ref());
    assert_eq!(j.decision, Action::Ask, "{}", j.reason);
    assert!(j.reason.contains("calls itself"), "{}", j.reason);
}

/// An undefined preset name gets a "did you mean" hint by edit distance to the defined names.
/// Measured in full, two names of 100,000 characters cost their product, 10^10 steps: minutes
/// before `pinfold check` or a hook could refuse the file (found by fuzzing the policy loader).
/// The file must be refused, with the error, as quickly as it is read.
#[test]
fn an_undefined_name_as_long_as_a_defined_one_is_refused_quickly() {
    let n = 100_000;
    let text = format!(
        "[defaults]\nsandbox = \"{}\"\n\n[sandbox.{}]\nfs.write.allow = []\n",
        "b".repeat(n),
        "a".repeat(n)
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let project = tempfile::tempdir().expect("temporary project");
        let opts = LoadOptions {
            explicit: None,
            cwd: project.path().to_path_buf(),
            home: Some(PathBuf::from("/home/agent")),
            xdg_config_home: Some(project.path().join("no-config")),
        };
        let _ = tx.send(load_str("pinfold.toml", &text, Format::Toml, &opts).map(|_| ()).map_err(|e| e.to_string()));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("refused within 10 s");
    let err = got.expect_err("an undefined preset is an error");
    assert!(err.contains("undefined sandbox preset"), "{}", &err[..err.len().min(200)]);
}

/// Whether a path is in or under a sandbox list's entry was asked of the path and of each of
/// its ancestors, each rendered as a string anew: the sum of their lengths, quadratic in the
/// depth. A redirect to a path of 50,000 components (a 100 KB command) took 40 s to judge with
/// the default policy, over 200 s with glob entries (found running deep paths through the fuzz
/// targets; a file tool's path in a hook payload did the same). Both kinds of entry: plain (`/dev/null`, the
/// preset's writable roots) and globs.
#[test]
fn a_path_of_tens_of_thousands_of_components_is_judged_quickly() {
    let deep = "/a".repeat(50_000);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let project = tempfile::tempdir().expect("temporary project");
        let opts = LoadOptions {
            explicit: None,
            cwd: project.path().to_path_buf(),
            home: Some(PathBuf::from("/home/agent")),
            xdg_config_home: Some(project.path().join("no-config")),
        };
        // Without a sandbox the judge holds the redirect to the project and temp directories.
        let bare = Policy::new(load_str("pinfold.toml", "[defaults]\naction = \"allow\"\n", Format::Toml, &opts).expect("loads")).expect("compiles");
        let plain = bare.judge(&format!("echo x > {deep}"), project.path()).decision;
        // A preset's write globs, as the hooks' file-write check uses them.
        let text = "[defaults]\naction = \"allow\"\nsandbox = \"w\"\n[sandbox.w]\nfs.write.allow = [\"/a/*/b\", \"/a/a/a/a*\"]\nfs.write.deny = [\"/a/**/c\"]\n";
        let globs = Policy::new(load_str("pinfold.toml", text, Format::Toml, &opts).expect("the policy loads")).expect("compiles");
        let w = &globs.config().sandboxes["w"];
        let under = pinfold_policy::writable(std::path::Path::new(&deep), w);
        let not_under = pinfold_policy::writable(std::path::Path::new(&format!("{deep}/b/x")), w);
        let _ = tx.send((plain, under, not_under));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("judged within 10 s");
    // Outside the project and the temp directories: asked without a sandbox. Under
    // `/a/a/a/a*`: writable. `…/b/x` is under `/a/*/b` too (`*` crosses `/`).
    assert_eq!(got, (Action::Ask, true, true));
}

/// Commands inside a wrapper (`find -exec`, `xargs`) or inside a `bash -c` string that is not
/// a single-quoted literal have the span of what holds them, and each verdict held a copy of
/// its span's text: quadratic in memory. `bash -c "ls;ls;…"` with 16,000 commands (48 KB)
/// peaked at 0.8 GB; `find . -exec ls {} \;` 16,000 times (250 KB) at 3.8 GB; a 1 MiB input
/// would exhaust any machine (found running repeated constructs through the fuzz targets).
/// Judged here with the verdicts' text counted: it must grow with the input and the number of
/// commands (a few hundred bytes each), not with their product.
#[test]
fn commands_sharing_a_span_do_not_each_copy_it() {
    let n = 16_000;
    let cases = [
        format!("bash -c \"{}\"", "ls;".repeat(n)),
        format!("find . {}", "-exec ls {} \\; ".repeat(n)),
        format!("watch {}", "'ls; ls' ".repeat(n)),
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let project = tempfile::tempdir().expect("temporary project");
        let policy = default_policy(project.path());
        for command in &cases {
            let j = policy.judge(command, project.path());
            let text: usize = j.commands.iter().map(|c| c.text.len()).sum();
            let _ = tx.send((j.decision, j.commands.len(), text, command.len(), command[..12].to_string()));
        }
    });
    for want in [Action::Allow, Action::Allow, Action::Ask] {
        let (decision, commands, text, len, head) = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("judged within 30 s");
        assert!(commands > n, "`{head}…`: {commands} commands");
        assert_eq!(decision, want, "`{head}…`");
        assert!(text <= len + 300 * commands, "`{head}…`: {commands} commands hold {text} bytes of text for an input of {len}");
    }
}
