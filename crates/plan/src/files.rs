//! The paths an agent's own file tools (and the server's file calls) may write and read: the
//! same protected paths `pinfold exec` keeps read-only or hidden in its sandbox, checked
//! against where the kernel would take the path (symlinks followed, `..` applied after them).

use std::path::{Path, PathBuf};

use pinfold_policy::config::{Config, SandboxPreset};
use pinfold_policy::matcher::{in_or_under, normalize};

use crate::{control, protect, Dirs};

/// The default sandbox preset, if the policy has one.
pub fn default_preset(config: &Config) -> Option<&SandboxPreset> {
    config.defaults.sandbox.as_deref().and_then(|n| config.sandboxes.get(n))
}

/// `p` made absolute against `cwd` (with `~` expanded) and normalised, and the path the kernel
/// would reach: every existing part resolved through symlinks *before* a `..` after it is
/// applied (`link/../x` is the parent of the link's target, not `x` beside the link), and a
/// symlink whose target does not exist yet followed to where a write would create it.
pub fn resolve(cwd: &Path, p: &str, home: Option<&Path>) -> (PathBuf, PathBuf) {
    let expanded = match (p.strip_prefix('~'), home) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(p),
    };
    let raw = cwd.join(expanded);
    (normalize(&raw), physical(&raw, 0))
}

/// Where the kernel would take the absolute path `raw` (see [`resolve`]); symlinks are followed
/// at most 40 deep, as the kernel does.
fn physical(raw: &Path, depth: usize) -> PathBuf {
    // `raw` and its ancestors, deepest first. Each try below costs the path's length, and a
    // deep path has as many ancestors as components: trying each in turn was quadratic.
    let ancestors: Vec<&Path> = raw.ancestors().collect();
    // The deepest that resolves, by bisection: resolving a path resolves its parent first, so
    // the ancestors that resolve are all those from some depth up.
    let (mut lo, mut hi) = (0, ancestors.len());
    let mut resolved = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match std::fs::canonicalize(ancestors[mid]) {
            Ok(c) => {
                resolved = Some(c);
                hi = mid;
            }
            Err(_) => lo = mid + 1,
        }
    }
    // `to` with the components of `raw` below `ancestors[i]` appended (a push each, not a copy
    // of the whole path each).
    let below = |mut to: PathBuf, i: usize| {
        for c in raw.components().skip(ancestors[i].components().count()) {
            to.push(c);
        }
        normalize(&to)
    };
    // A deeper ancestor that is a dangling symlink: a write through it creates its target. The
    // kernel reads no link through a path of PATH_MAX bytes or more.
    if depth < 40 {
        for (i, a) in ancestors[..hi].iter().enumerate() {
            if a.as_os_str().len() >= libc::PATH_MAX as usize {
                continue;
            }
            if let Ok(target) = std::fs::read_link(a) {
                let base = a.parent().unwrap_or(Path::new("/"));
                return below(physical(&base.join(target), depth + 1), i);
            }
        }
    }
    match resolved {
        Some(c) => below(c, hi),
        None => normalize(raw),
    }
}

/// Why the default sandbox could not write `path`; `None` when it could.
pub fn write_check(config: &Config, cwd: &Path, path: &str, dirs: &Dirs) -> Option<String> {
    write_check_in(config, default_preset(config)?, cwd, path, dirs)
}

/// Why `preset`'s sandbox could not write `path`; `None` when it could.
pub fn write_check_in(config: &Config, preset: &SandboxPreset, cwd: &Path, path: &str, dirs: &Dirs) -> Option<String> {
    let (lex, canon) = resolve(cwd, path, dirs.home.as_deref());
    let both = [&lex, &canon];
    // pinfold's own files: its policy, configuration, cache, hook key and ledger (the same
    // list `pinfold exec` keeps read-only in its sandbox).
    let own = protect::own_unwritable(&config.files, dirs);
    if let Some(o) = own.iter().find(|o| both.iter().any(|p| p.starts_with(o))) {
        return Some(format!("`{}` is pinfold's own file ({}); agents may not change it", lex.display(), o.display()));
    }
    // A policy file anywhere, existing or not: one written in `sub/` would become the policy of
    // every later call made from there (docs/design/threat-model.md).
    if both.iter().any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(protect::is_policy_file_name)) {
        return Some(format!("`{}` would be a pinfold policy file; agents may not write one", lex.display()));
    }
    // Files programs outside the sandbox run or obey later: agent settings, git's own files,
    // editor tasks, commit hooks (the same list `pinfold exec` keeps read-only).
    let root = config.project_root.as_path();
    if let Some(f) = both.iter().find_map(|p| control::is_control(root, cwd, dirs.home.as_deref(), &config.control_lift, p)) {
        return Some(format!("`{}` is a control file: {}; agents may not change it, a person does", lex.display(), f.why()));
    }
    // What the home directory's files lead to in the project (a dotfiles repository).
    if !config.control_lift.iter().any(|l| both.iter().any(|p| p.starts_with(l)))
        && control::home_link_targets(root, dirs.home.as_deref()).iter().any(|t| both.iter().any(|p| p.starts_with(t)))
    {
        return Some(format!("`{}` is a control file: {}; agents may not change it, a person does", lex.display(), control::Family::Home.why()));
    }
    // Through a link at a control file's name, made earlier (`.claude -> notes`): where it
    // points is that control file, whether or not it exists yet.
    for link in control::links(root, cwd, &config.control_lift) {
        let (_, target) = resolve(cwd, &link.to_string_lossy(), None);
        if canon.starts_with(&target) {
            return Some(format!("`{}` is where the control file `{}` points; agents may not change it, a person does", lex.display(), link.display()));
        }
    }
    if let Some(d) = preset.write_deny.iter().find(|d| both.iter().any(|p| in_or_under(p, d))) {
        return Some(format!("`{}` is write-protected in the `{}` sandbox (`{d}`)", lex.display(), preset.name));
    }
    if !preset.write_allow.iter().any(|a| in_or_under(&canon, a)) {
        // `pinfold exec` also opens the toolchain caches that exist and a worktree's git
        // directory to a preset that writes the project, for builds and `git commit`. The
        // agent's file tools get only the preset's own roots: an edit in a shared cache reaches
        // every project built from it, outside this project's history (docs/hooks.md).
        let root = config.project_root.as_path();
        if preset.write_allow.iter().any(|w| Path::new(w) == root) {
            let for_commands = protect::preset_writable(preset, root, dirs);
            if let Some(w) = for_commands.iter().filter(|w| !w.starts_with(root)).find(|w| canon.starts_with(w)) {
                return Some(format!(
                    "`{}` is in `{}`, which the `{}` sandbox opens to commands (builds, git) but not to the agent's file tools; change the project instead",
                    canon.display(),
                    w.display(),
                    preset.name
                ));
            }
        }
        return Some(format!(
            "`{}` is outside what the `{}` sandbox may write ({})",
            canon.display(),
            preset.name,
            if preset.write_allow.is_empty() { "nothing".to_string() } else { preset.write_allow.join(", ") }
        ));
    }
    None
}

/// Why the default sandbox could not read `path`; `None` when it could. `contents_below`:
/// the tool reads everything below `path` (Grep), so a hidden path beneath it counts too.
pub fn read_check(config: &Config, cwd: &Path, path: &str, contents_below: bool, dirs: &Dirs) -> Option<String> {
    read_check_in(default_preset(config)?, cwd, path, contents_below, dirs)
}

/// Why `preset`'s sandbox could not read `path` (everything below it when `contents_below`);
/// `None` when it could.
pub fn read_check_in(preset: &SandboxPreset, cwd: &Path, path: &str, contents_below: bool, dirs: &Dirs) -> Option<String> {
    let (lex, canon) = resolve(cwd, path, dirs.home.as_deref());
    let both = [&lex, &canon];
    let mut hidden: Vec<String> = preset.read_deny.clone();
    hidden.extend(protect::own_unreadable(dirs).iter().map(|p| p.display().to_string()));
    if let Some(d) = hidden.iter().find(|d| both.iter().any(|p| in_or_under(p, d))) {
        return Some(format!("`{}` is unreadable in the `{}` sandbox (`{d}`)", lex.display(), preset.name));
    }
    // Another name of a hidden file (`ln .env notes`, made before the file held the secret):
    // `pinfold exec` refuses every run while one exists; the tools refuse to read it. And
    // what a link in a hidden directory leads to, which `pinfold exec` hides with it. (pinfold's
    // own hidden files are left out: no command or tool reaches them to link them.)
    {
        use std::os::unix::fs::MetadataExt;
        let looked = look_through_hidden(&preset.read_deny, cwd, dirs);
        // Where a link in a hidden directory leads (`~/.ssh/id_ed25519 -> ~/dotfiles/ssh/id`):
        // `pinfold exec` hides it with the directory.
        for (link, t) in &looked.links_out {
            if canon.starts_with(t) || (contents_below && t.starts_with(&canon)) {
                return Some(format!(
                    "`{}` is where `{}` leads, which the `{}` sandbox hides (with what it leads to)",
                    if canon.starts_with(t) { lex.display() } else { t.display() },
                    link.display(),
                    preset.name
                ));
            }
        }
        match std::fs::metadata(&canon) {
            Ok(m) if m.is_file() && m.nlink() > 1 => {
                if let Some(d) = looked.second_names.iter().find(|s| s.dev == m.dev() && s.ino == m.ino()) {
                    return Some(format!("`{}` is another name (a hard link) of `{}`, which the `{}` sandbox hides", lex.display(), d.path.display(), preset.name));
                }
            }
            Ok(m) if m.is_dir() && contents_below => {
                if let Some(d) = looked.second_names.first() {
                    return Some(format!(
                        "`{}` has another name (a hard link) somewhere, which a search could read; remove it (`find / -xdev -samefile {}`) before searching",
                        d.path.display(),
                        d.path.display()
                    ));
                }
            }
            _ => {}
        }
    }
    if contents_below {
        let inside = hidden
            .iter()
            .filter(|d| !d.contains(['*', '?', '[']))
            .find(|d| both.iter().any(|p| Path::new(d.as_str()).starts_with(p)));
        if let Some(d) = inside {
            return Some(format!("searching `{}` would read `{d}`, which the `{}` sandbox hides; search a narrower path", lex.display(), preset.name));
        }
    }
    None
}

/// One look through the hidden paths (the `hidden` entries, globs matched): their files with
/// more than one name, and the links in hidden directories that lead out of them — the same
/// look `pinfold exec` takes ([`pinfold_sandbox::look_through`]).
fn look_through_hidden(hidden: &[String], cwd: &Path, dirs: &Dirs) -> pinfold_sandbox::Looked {
    let mut found = pinfold_sandbox::Looked::default();
    let look = |p: &Path, found: &mut pinfold_sandbox::Looked| {
        // A hidden path that is itself a link (`~/.ssh -> dotfiles/ssh`): hidden at both.
        let Ok(real) = std::fs::canonicalize(p) else { return };
        if real != p {
            found.links_out.push((p.to_path_buf(), real.clone()));
        }
        let l = pinfold_sandbox::look_through(&real, true);
        found.second_names.extend(l.second_names);
        found.links_out.extend(l.links_out);
        found.short |= l.short;
    };
    for d in hidden {
        let (entry, _) = resolve(cwd, d, dirs.home.as_deref());
        let name = entry.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(parent) = entry.parent() else { continue };
        if parent.to_string_lossy().contains(['*', '?', '[']) {
            continue;
        }
        if name.contains(['*', '?', '[']) {
            for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
                if pinfold_glob::is_match(&name, &e.file_name().to_string_lossy(), pinfold_glob::Syntax::SHELL) {
                    look(&e.path(), &mut found);
                }
            }
        } else {
            look(&entry, &mut found);
        }
    }
    found
}
