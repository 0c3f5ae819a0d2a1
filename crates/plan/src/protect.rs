//! The paths that decide verdicts, and so must stay out of reach of what they judge: pinfold's
//! own files, and every place a policy file could be planted. [`crate::plan`] protects them
//! in the sandbox; `pinfold hook`'s checks of an agent's file tools use the same lists.

use std::path::{Path, PathBuf};

use pinfold_policy::config::SandboxPreset;

use crate::Dirs;

/// The stems of a project policy file's name: `pinfold.*`, and `pinfold.local.*` beside it.
pub const POLICY_STEMS: [&str; 2] = ["pinfold", "pinfold.local"];
/// The extensions a policy file may have.
pub const POLICY_EXTENSIONS: [&str; 4] = ["toml", "yaml", "yml", "json"];

/// `pinfold.{toml,yaml,yml,json}` or `pinfold.local.*`: names pinfold reads policy from.
pub fn is_policy_file_name(name: &str) -> bool {
    POLICY_EXTENSIONS
        .iter()
        .find_map(|ext| name.strip_suffix(ext).and_then(|s| s.strip_suffix('.')))
        .is_some_and(|stem| POLICY_STEMS.contains(&stem))
}

/// The directories where a project policy file would be found for a command run in `cwd`:
/// the project root and each directory below it down to `cwd` (just the root when `cwd` is
/// not inside it).
pub fn policy_dirs(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(rest) = cwd.strip_prefix(root) {
        let mut d = root.to_path_buf();
        for c in rest.components() {
            d.push(c);
            dirs.push(d.clone());
        }
    }
    dirs
}

/// Every name a project policy file may have, in each of [`policy_dirs`]: a policy file made
/// there from inside a sandbox would decide the verdicts of the commands that follow.
pub fn policy_file_paths(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in policy_dirs(root, cwd) {
        for stem in POLICY_STEMS {
            for ext in POLICY_EXTENSIONS {
                out.push(dir.join(format!("{stem}.{ext}")));
            }
        }
    }
    out
}

/// pinfold's own files, which whoever writes changes the verdicts: the policy files `loaded`,
/// the configuration directory, the policy cache, the hook key's directory, the ledger's key
/// and directory (those that are known).
pub fn own_unwritable(loaded: &[PathBuf], dirs: &Dirs) -> Vec<PathBuf> {
    let mut own: Vec<PathBuf> = loaded.to_vec();
    own.extend(dirs.config.iter().cloned());
    own.extend(dirs.cache.iter().cloned());
    own.extend(dirs.hook_key_dir().map(Path::to_path_buf));
    own.extend(dirs.ledger_key.iter().cloned());
    own.extend(dirs.state.iter().cloned());
    own
}

/// pinfold's own files nothing it confines may read: the hook key (whoever reads it approves
/// their own asks), the ledger's signing key (a forged history) and the ledger. The sandbox
/// hides the hook key's whole directory.
pub fn own_unreadable(dirs: &Dirs) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = dirs.hook_key.iter().cloned().collect();
    hidden.extend(dirs.ledger_key.iter().cloned());
    hidden.extend(dirs.state.iter().cloned());
    hidden
}

/// Container-engine sockets: hidden by default, since reaching one is root on the host.
pub fn engine_sockets(dirs: &Dirs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock", "/var/run/crio/crio.sock"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(rt) = &dirs.runtime {
        v.push(rt.join("docker.sock"));
        v.push(rt.join("podman/podman.sock"));
        v.push(rt.join("containerd/containerd.sock"));
    }
    // Whatever the caller's clients are pointed at (Docker's DOCKER_HOST, Podman's
    // CONTAINER_HOST), wherever it lies: the project included.
    for var in ["DOCKER_HOST", "CONTAINER_HOST"] {
        if let Some(path) = std::env::var(var).ok().as_deref().and_then(|h| h.strip_prefix("unix://")).filter(|p| p.starts_with('/')) {
            v.push(PathBuf::from(path));
        }
    }
    if let Some(h) = &dirs.home {
        // Docker Desktop, Colima, Rancher Desktop, OrbStack keep theirs in the home directory.
        for s in [".docker/run/docker.sock", ".docker/desktop/docker.sock", ".colima/*/docker.sock", ".rd/docker.sock", ".orbstack/run/docker.sock"] {
            v.push(h.join(s));
        }
    }
    v
}

/// Key agents' sockets and credential caches: hidden by default, since a command that reaches one signs with the
/// user's keys without reading them (found: `ssh-keygen -Y sign` through the agent in
/// `/tmp/ssh-*/agent.*`, with `~/.ssh` hidden and `SSH_AUTH_SOCK` removed). Where the
/// caller's `SSH_AUTH_SOCK` and `GPG_AGENT_INFO` point, OpenSSH's default place, and the
/// agents' places in the runtime directory.
pub fn agent_sockets(dirs: &Dirs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = vec![PathBuf::from("/tmp/ssh-*/agent.*")];
    for var in ["SSH_AUTH_SOCK", "GPG_AGENT_INFO"] {
        if let Some(path) = std::env::var(var).ok().and_then(|p| p.split(':').next().map(str::to_string)).filter(|p| p.starts_with('/')) {
            v.push(PathBuf::from(path));
        }
    }
    // Kerberos credential caches: the one KRB5CCNAME names (`FILE:/path` or a path) and
    // the default place.
    v.push(PathBuf::from("/tmp/krb5cc_*"));
    if let Some(path) = std::env::var("KRB5CCNAME").ok().map(|p| p.strip_prefix("FILE:").unwrap_or(&p).to_string()).filter(|p| p.starts_with('/')) {
        v.push(PathBuf::from(path));
    }
    if let Some(rt) = &dirs.runtime {
        for s in ["ssh-agent.socket", "openssh_agent", "keyring", "gcr", "gnupg"] {
            v.push(rt.join(s));
        }
    }
    v.extend(control_sockets(dirs));
    v
}

/// Sockets whose server runs what a client asks, outside any sandbox, as the user: terminal
/// multiplexers (`tmux run-shell`, `screen -X exec`), the session bus (`systemd-run --user`),
/// editors' servers (`nvim --remote-send`, `emacsclient --eval`, VS Code's CLI hook), terminals'
/// remote control (found: a command an allowed `python3 build.py` ran reached the user's tmux
/// server through `/tmp/tmux-UID/default` and ran a command outside the sandbox). Where the
/// caller's variables point, and the programs' default places.
fn control_sockets(dirs: &Dirs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["/tmp/tmux-*/*", "/run/screen/S-*/*", "/var/run/screen/S-*/*", "/tmp/screens/S-*/*", "/tmp/zellij-*", "/tmp/emacs*/server", "/tmp/nvim*/*"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    // `TMUX=/tmp/tmux-0/default,PID,N`; `DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus`;
    // `KITTY_LISTEN_ON=unix:/tmp/kitty`; the others are paths.
    let mut named: Vec<String> = Vec::new();
    named.extend(var("TMUX").and_then(|t| t.split(',').next().map(str::to_string)));
    named.extend(var("TMUX_TMPDIR").map(|d| format!("{d}/tmux-*/*")));
    named.extend(var("SCREENDIR").map(|d| format!("{d}/*")));
    if let Some(a) = var("DBUS_SESSION_BUS_ADDRESS") {
        named.extend(a.split(';').flat_map(|part| part.split(',')).filter_map(|kv| kv.strip_prefix("unix:path=").or_else(|| kv.strip_prefix("path="))).map(str::to_string));
    }
    named.extend(var("KITTY_LISTEN_ON").and_then(|a| a.strip_prefix("unix:").map(str::to_string)));
    for k in ["NVIM", "NVIM_LISTEN_ADDRESS", "WEZTERM_UNIX_SOCKET", "VSCODE_IPC_HOOK_CLI", "VSCODE_IPC_HOOK", "ZELLIJ_SOCKET_DIR", "EMACS_SOCKET_NAME"] {
        named.extend(var(k));
    }
    v.extend(named.into_iter().filter(|p| p.starts_with('/')).map(PathBuf::from));
    if let Some(rt) = &dirs.runtime {
        for s in ["bus", "systemd", "tmux-*", "zellij", "emacs", "nvim.*", "vscode-*.sock", "kitty-*", "wezterm"] {
            v.push(rt.join(s));
        }
    }
    v
}

/// The roots a command under `preset` may write in the project `root`: the preset's own; for
/// a preset that may write the project, also its git directory (worktrees) and the toolchain
/// caches that exist ([`pinfold_sandbox::default_writable`]).
pub fn preset_writable(preset: &SandboxPreset, root: &Path, dirs: &Dirs) -> Vec<PathBuf> {
    let own: Vec<PathBuf> = preset.write_allow.iter().map(PathBuf::from).collect();
    if preset.write_allow.iter().any(|w| Path::new(w) == root) {
        pinfold_sandbox::default_writable(root, None, dirs.home.as_deref(), &own)
    } else {
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_file_names() {
        for n in ["pinfold.toml", "pinfold.yaml", "pinfold.yml", "pinfold.json", "pinfold.local.toml", "pinfold.local.json"] {
            assert!(is_policy_file_name(n), "{n}");
        }
        for n in ["pinfold", "pinfold.txt", "pinfold.toml.bak", "xpinfold.toml", "pinfold.locall.toml", "pinfold..toml", ".toml", "pinfold.local"] { // address-literal: never connected (file names)
            assert!(!is_policy_file_name(n), "{n}");
        }
    }

    #[test]
    fn policy_dirs_run_from_the_root_down_to_cwd() {
        let d = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(policy_dirs(Path::new("/p"), Path::new("/p/a/b")), d(&["/p", "/p/a", "/p/a/b"]));
        assert_eq!(policy_dirs(Path::new("/p"), Path::new("/p")), d(&["/p"]));
        assert_eq!(policy_dirs(Path::new("/p"), Path::new("/elsewhere")), d(&["/p"]));
        let files = policy_file_paths(Path::new("/p"), Path::new("/p/a"));
        assert_eq!(files.len(), 2 * POLICY_STEMS.len() * POLICY_EXTENSIONS.len());
        assert!(files.contains(&PathBuf::from("/p/a/pinfold.local.yml")) && files.contains(&PathBuf::from("/p/pinfold.json")));
        assert!(files.iter().all(|f| is_policy_file_name(f.file_name().unwrap().to_str().unwrap())));
    }
}
