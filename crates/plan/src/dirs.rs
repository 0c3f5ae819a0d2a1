//! Where pinfold's own files are: worked out once from the environment, then passed to
//! whatever needs one of them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The home and XDG directories, and pinfold's own directories derived from them.
///
/// | field | from |
/// |---|---|
/// | `config` | `$XDG_CONFIG_HOME/pinfold`, else `~/.config/pinfold` |
/// | `cache` | `$PINFOLD_CACHE_DIR`, else `$XDG_CACHE_HOME/pinfold`, else `~/.cache/pinfold`; none with `PINFOLD_NO_CACHE=1` |
/// | `state` | `$PINFOLD_STATE_DIR`, else `$XDG_STATE_HOME/pinfold`, else `~/.local/state/pinfold` |
/// | `ledger_key` | `$PINFOLD_LEDGER_KEY`, else `state/ledger.key` |
/// | `hook_key` | `$XDG_STATE_HOME/pinfold/hook.key` (an absolute `XDG_STATE_HOME` only), else `~/.local/state/pinfold/hook.key` |
///
/// An empty variable counts as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirs {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` as set (the policy loader defaults it to `~/.config` itself).
    pub xdg_config_home: Option<PathBuf>,
    /// `$XDG_STATE_HOME` as set.
    pub xdg_state_home: Option<PathBuf>,
    /// `$XDG_CACHE_HOME` as set.
    pub xdg_cache_home: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`, where per-user container-engine sockets live.
    pub runtime: Option<PathBuf>,
    /// pinfold's configuration directory: the user's policy files.
    pub config: Option<PathBuf>,
    /// Where compiled policies are cached.
    pub cache: Option<PathBuf>,
    /// The audit ledger's directory, which also holds the record of sandboxed roots and the
    /// list of trusted policy files.
    pub state: Option<PathBuf>,
    /// The ledger's signing key.
    pub ledger_key: Option<PathBuf>,
    /// The key `pinfold hook` signs its tokens with.
    pub hook_key: Option<PathBuf>,
}

impl Dirs {
    /// Read from this process's environment.
    pub fn from_env() -> Dirs {
        Dirs::from_vars(|k| std::env::var_os(k))
    }

    /// Read through `var` (a variable's value, `None` when unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Dirs {
        let path = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = path("HOME");
        let xdg_config_home = path("XDG_CONFIG_HOME");
        let xdg_state_home = path("XDG_STATE_HOME");
        let xdg_cache_home = path("XDG_CACHE_HOME");
        let config = xdg_config_home.clone().or_else(|| home.as_ref().map(|h| h.join(".config"))).map(|d| d.join("pinfold"));
        let no_cache = var("PINFOLD_NO_CACHE").is_some_and(|v| v != "0" && !v.is_empty());
        let cache = if no_cache {
            None
        } else {
            path("PINFOLD_CACHE_DIR")
                .or_else(|| xdg_cache_home.as_ref().map(|d| d.join("pinfold")))
                .or_else(|| home.as_ref().map(|h| h.join(".cache").join("pinfold")))
        };
        let state = pinfold_ledger::state_dir(path("PINFOLD_STATE_DIR").as_deref(), xdg_state_home.as_deref(), home.as_deref()).ok();
        let ledger_key = state.as_ref().map(|d| path("PINFOLD_LEDGER_KEY").unwrap_or_else(|| d.join("ledger.key")));
        let hook_key = xdg_state_home
            .clone()
            .filter(|d| d.is_absolute())
            .or_else(|| home.as_ref().map(|h| h.join(".local").join("state")))
            .map(|d| d.join("pinfold").join("hook.key"));
        Dirs {
            home,
            xdg_config_home,
            xdg_state_home,
            xdg_cache_home,
            runtime: var("XDG_RUNTIME_DIR").map(PathBuf::from),
            config,
            cache,
            state,
            ledger_key,
            hook_key,
        }
    }

    /// The ledger's directory, or the ledger's error saying which variables would give one.
    pub fn ledger_dir(&self) -> Result<&Path, pinfold_ledger::Error> {
        self.state.as_deref().ok_or(pinfold_ledger::Error::NoStateDir)
    }

    /// The directory holding the hook's key.
    pub fn hook_key_dir(&self) -> Option<&Path> {
        self.hook_key.as_deref().and_then(Path::parent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(vars: &[(&str, &str)]) -> Dirs {
        let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        Dirs::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn home_alone_gives_every_directory_under_it() {
        let d = dirs(&[("HOME", "/h")]);
        assert_eq!(d.home.as_deref(), Some(Path::new("/h")));
        assert_eq!(d.config.as_deref(), Some(Path::new("/h/.config/pinfold")));
        assert_eq!(d.cache.as_deref(), Some(Path::new("/h/.cache/pinfold")));
        assert_eq!(d.state.as_deref(), Some(Path::new("/h/.local/state/pinfold")));
        assert_eq!(d.ledger_key.as_deref(), Some(Path::new("/h/.local/state/pinfold/ledger.key")));
        assert_eq!(d.hook_key.as_deref(), Some(Path::new("/h/.local/state/pinfold/hook.key")));
        assert_eq!(d.hook_key_dir(), Some(Path::new("/h/.local/state/pinfold")));
        assert_eq!(d.runtime, None);
    }

    #[test]
    fn pinfold_and_xdg_variables_come_first() {
        let d = dirs(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/xc"),
            ("XDG_CACHE_HOME", "/xk"),
            ("XDG_STATE_HOME", "/xs"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
        ]);
        assert_eq!(d.config.as_deref(), Some(Path::new("/xc/pinfold")));
        assert_eq!(d.cache.as_deref(), Some(Path::new("/xk/pinfold")));
        assert_eq!(d.state.as_deref(), Some(Path::new("/xs/pinfold")));
        assert_eq!(d.hook_key.as_deref(), Some(Path::new("/xs/pinfold/hook.key")));
        assert_eq!(d.runtime.as_deref(), Some(Path::new("/run/user/7")));
        let d = dirs(&[
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/xk"),
            ("XDG_STATE_HOME", "/xs"),
            ("PINFOLD_CACHE_DIR", "/pc"),
            ("PINFOLD_STATE_DIR", "/ps"),
            ("PINFOLD_LEDGER_KEY", "/keys/l.key"),
        ]);
        assert_eq!(d.cache.as_deref(), Some(Path::new("/pc")));
        assert_eq!(d.state.as_deref(), Some(Path::new("/ps")));
        assert_eq!(d.ledger_key.as_deref(), Some(Path::new("/keys/l.key")));
        // The hook key does not follow PINFOLD_STATE_DIR.
        assert_eq!(d.hook_key.as_deref(), Some(Path::new("/xs/pinfold/hook.key")));
    }

    #[test]
    fn empty_relative_and_off_values() {
        // Empty counts as unset; a relative XDG_STATE_HOME is not used for the hook key (the
        // ledger takes it as it is).
        let d = dirs(&[("HOME", "/h"), ("XDG_CONFIG_HOME", ""), ("PINFOLD_CACHE_DIR", ""), ("XDG_STATE_HOME", "rel")]);
        assert_eq!(d.config.as_deref(), Some(Path::new("/h/.config/pinfold")));
        assert_eq!(d.cache.as_deref(), Some(Path::new("/h/.cache/pinfold")));
        assert_eq!(d.hook_key.as_deref(), Some(Path::new("/h/.local/state/pinfold/hook.key")));
        assert_eq!(d.state.as_deref(), Some(Path::new("rel/pinfold")));
        for (v, on) in [("1", false), ("yes", false), ("0", true), ("", true)] {
            assert_eq!(dirs(&[("HOME", "/h"), ("PINFOLD_NO_CACHE", v)]).cache.is_some(), on, "PINFOLD_NO_CACHE={v:?}");
        }
        let none = dirs(&[]);
        assert!(matches!(none.ledger_dir(), Err(pinfold_ledger::Error::NoStateDir)));
        assert_eq!((none.config, none.cache, none.state, none.hook_key), (None, None, None, None));
    }
}
