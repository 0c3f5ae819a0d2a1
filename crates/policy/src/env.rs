//! Environment variables that change what a command runs.
//!
//! `LD_PRELOAD=/tmp/x.so ls` runs code that is not `ls`; `GIT_PAGER='sh -c id' git log`
//! runs `sh`. A rule that allows `ls` or `git log` did not mean to allow these, so such a
//! prefix raises an allow to ask unless the allowing rule names the variable in its `env`.
//! The table says why each entry is here.

/// Exact names, with the reason shown to the user.
const EXACT: &[(&str, &str)] = &[
    ("PATH", "decides which program each command name runs"),
    ("BASH_ENV", "names a script bash runs before any non-interactive command"),
    ("ENV", "names a script sh runs at start-up"),
    ("PROMPT_COMMAND", "runs a command before each prompt"),
    ("PS4", "is expanded, command substitutions included, for each traced command"),
    ("SHELLOPTS", "turns on shell options such as xtrace in child shells"),
    ("BASHOPTS", "turns on shell options in child shells"),
    ("IFS", "changes how the shell splits words"),
    ("CDPATH", "changes where `cd` goes"),
    ("PAGER", "names a program many tools run"),
    ("MANPAGER", "names a program man runs"),
    ("EDITOR", "names a program many tools run"),
    ("VISUAL", "names a program many tools run"),
    ("BROWSER", "names a program tools run"),
    ("LESSOPEN", "names a program less runs on every file"),
    ("LESSCLOSE", "names a program less runs"),
    ("PYTHONSTARTUP", "names a script Python runs"),
    ("PYTHONPATH", "changes which modules Python imports"),
    ("PYTHONHOME", "changes which Python library is used"),
    ("PYTHONINSPECT", "changes how Python runs"),
    ("NODE_OPTIONS", "passes options such as --require to every node process"),
    ("NODE_PATH", "changes which modules node loads"),
    ("PERL5OPT", "passes options such as -M to every perl process"),
    ("PERL5LIB", "changes which modules perl loads"),
    ("PERLLIB", "changes which modules perl loads"),
    ("RUBYOPT", "passes options to every ruby process"),
    ("RUBYLIB", "changes which libraries ruby loads"),
    ("JAVA_TOOL_OPTIONS", "passes options such as -javaagent to every JVM"),
    ("_JAVA_OPTIONS", "passes options to every JVM"),
    ("JDK_JAVA_OPTIONS", "passes options to every JVM"),
    ("RUSTC_WRAPPER", "names a program cargo runs instead of rustc"),
    ("RUSTC", "names the compiler cargo runs"),
    ("RUSTDOC", "names the program cargo runs for docs"),
    ("CARGO_BUILD_RUSTC_WRAPPER", "names a program cargo runs instead of rustc"),
    ("CARGO_TARGET_DIR", "moves where cargo writes"),
    ("SSH_ASKPASS", "names a program ssh runs"),
    ("SUDO_ASKPASS", "names a program sudo runs"),
    ("NPM_CONFIG_SCRIPT_SHELL", "names the shell npm runs scripts with"),
    ("GOFLAGS", "passes flags such as -toolexec (a program to run) to every go command"),
    ("HOME", "moves the home directory, and every dotfile with it"),
    ("XDG_CONFIG_HOME", "moves where tools (and pinfold) read configuration"),
    ("TMPDIR", "moves where tools write temporary files"),
];

/// Prefixes: every variable starting so.
const PREFIXES: &[(&str, &str)] = &[
    ("LD_", "changes how the dynamic linker loads programs"),
    ("DYLD_", "changes how the dynamic linker loads programs"),
    ("GIT_", "can name programs git runs (GIT_SSH_COMMAND, GIT_PAGER, GIT_EXTERNAL_DIFF…) or move the repository"),
    ("BASH_FUNC_", "defines a shell function in child shells"),
];

/// Harmless `GIT_*` variables that only set metadata.
const GIT_SAFE: &[&str] = &[
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_TRACE",
    "GIT_MERGE_AUTOEDIT", "GIT_FLUSH", "GIT_PROGRESS_DELAY", "GIT_OPTIONAL_LOCKS",
];

/// Why setting `name` is dangerous, or `None` if it is not.
pub fn dangerous_env(name: &str) -> Option<&'static str> {
    if let Some((_, why)) = EXACT.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    if GIT_SAFE.contains(&name) {
        return None;
    }
    PREFIXES.iter().find(|(p, _)| name.starts_with(p)).map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::dangerous_env;

    #[test]
    fn table() {
        assert!(dangerous_env("LD_PRELOAD").is_some());
        assert!(dangerous_env("GIT_PAGER").is_some());
        assert!(dangerous_env("GIT_SSH_COMMAND").is_some());
        assert!(dangerous_env("GIT_AUTHOR_NAME").is_none());
        assert!(dangerous_env("RUST_LOG").is_none());
        assert!(dangerous_env("NODE_OPTIONS").is_some());
    }
}
