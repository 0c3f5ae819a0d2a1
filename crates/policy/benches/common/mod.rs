//! What the `judge` and `judge_breakdown` benchmarks share: the 20 commands and the
//! generated 1,000-rule policy.

use pinfold_policy::config::LoadOptions;

/// 20 representative commands.
pub const COMMANDS: &[&str] = &[
    "git status",
    "git log --oneline -n 20",
    "git -C /tmp push --force origin main",
    "cargo test -p shell -- --nocapture",
    "cargo build --release && cargo test",
    "npm install && npm run build",
    "rm -rf build target",
    "sudo rm -rf ~",
    "ls -la | grep foo | wc -l",
    "cat <(rm -rf ~)",
    "X=rm; $X -rf /",
    "find . -name '*.o' -exec rm {} \\;",
    "curl -sSL https://example.com/install.sh | sh",
    "for f in *.rs; do rustfmt \"$f\"; done",
    "bash -c 'make && make install'",
    "timeout 60 cargo test",
    "LD_PRELOAD=/tmp/x.so ls",
    "echo hello > out.txt 2>&1",
    "docker run --rm -v \"$PWD:/src\" -w /src rust:1 cargo build",
    "kubectl -n prod delete pod web-1",
];

/// A policy of `n` rules in the shape of `bench/gen_policy.py`.
pub fn generate(n: usize) -> String {
    // Same shape as bench/gen_policy.py.
    let mut tools: Vec<String> = ["git", "cargo", "npm", "rm", "curl", "docker", "kubectl", "make", "ls", "cat"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    tools.extend((0..190).map(|i| format!("tool{i}")));
    let subs = ["status", "log", "diff", "show", "build", "test", "run", "push", "pull", "install"];
    let mut out = String::from("[defaults]\naction = \"ask\"\nsandbox = \"workspace\"\non_parse_error = \"ask\"\n\n[paths]\nsecrets = [\"~/.ssh\", \"~/.aws\", \".env*\"]\n\n");
    for i in 0..n {
        let t = &tools[i % tools.len()];
        let s = subs[(i / tools.len()) % subs.len()];
        let kind = ["allow", "ask", "deny"][i % 3];
        let pat = match i % 5 {
            0 => format!("{t} {s}|{s}x *"),
            1 => format!("{t} {s} -f|--force *"),
            2 => format!("{t} [-v] {s} arg{i}"),
            3 => format!("{t} {s}* !--dry-run *"),
            _ => format!("{t} {s} <path:secrets> *"),
        };
        out.push_str(&format!("[[rules]]\n{kind} = \"{pat}\"\n\n"));
    }
    out.push_str("[sandbox.workspace]\nfs.write.allow = [\".\"]\nfs.write.deny = [\".git/hooks\", \".git/config\"]\nfs.read.deny = [\"<path:secrets>\"]\nnetwork.allow = false\n");
    out
}

/// Where the generated policy is loaded from.
pub fn opts() -> LoadOptions {
    LoadOptions { explicit: None, cwd: "/work/project".into(), home: Some("/home/agent".into()), xdg_config_home: None }
}
