//! Loading the policy a command is judged by: the layers found from its directory (or one
//! file), through the compiled cache, with project files a sandboxed command may have written
//! refused unless trusted (crate::trust). `pinfold exec`, the hooks and the server all load it
//! here.

use std::path::PathBuf;

use pinfold_policy::config::{self, LoadOptions};
use pinfold_policy::Policy;

use crate::{trust, Dirs, Error};

/// Load and compile the policy: `file` alone (as `-c` or `validate FILE`), or the layers
/// found from `cwd`; with `cached`, through the cache in `dirs.cache`.
pub fn policy(
    file: Option<&std::path::Path>,
    cwd: Option<&std::path::Path>,
    cached: bool,
    dirs: &Dirs,
) -> Result<Policy, Error> {
    // An absolute directory is taken as the caller named it, without links (each door names
    // it so: getcwd, or `absolute` once): looked up again through links here, a directory on
    // its way swapped for a link by a command beside this one would have the policy, and the
    // project root the sandbox makes writable, found elsewhere (the loader refuses a working
    // directory that leads elsewhere: `ConfigError::WorkingDirMoved`).
    let cwd = match cwd {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let opts = LoadOptions { explicit: file.map(PathBuf::from), cwd, home: dirs.home.clone(), xdg_config_home: dirs.xdg_config_home.clone() };
    let global_dir = dirs.config.as_ref();
    let explicit = opts.explicit.is_some();
    let policy = 'load: {
        if cached {
            if let Some(dir) = &dirs.cache {
                break 'load pinfold_policy::load_cached(&opts, dir).map_err(|e| match e {
                    pinfold_policy::LoadError::Config(c) => Error::config(c),
                    pinfold_policy::LoadError::Policy(p) => Error::policy(p),
                })?;
            }
        }
        let config = config::load(&opts).map_err(Error::config)?;
        Policy::new(config).map_err(Error::policy)?
    };
    // Project files a sandboxed command may have written are not read unless trusted
    // (trust.rs). The user's own files and a file given with -c are theirs.
    if !explicit {
        let project: Vec<PathBuf> = policy
            .config()
            .files
            .iter()
            .filter(|f| !global_dir.is_some_and(|g| f.starts_with(g)))
            .cloned()
            .collect();
        trust::check(&project, dirs)?;
    }
    Ok(policy)
}

pub fn absolute(d: &std::path::Path) -> Result<PathBuf, Error> {
    let p = std::path::absolute(d).map_err(|e| Error::new(format!("bad directory {}", d.display())).cause(e))?;
    if !p.is_dir() {
        return Err(Error::new(format!("{} is not a directory", p.display()))
            .hint("give --cwd an existing directory"));
    }
    // Without links: the sandbox takes the working directory as named, and refuses one that
    // is a link by then (a command beside it may swap a directory for one).
    std::fs::canonicalize(&p).map_err(|e| Error::new(format!("bad directory {}", d.display())).cause(e))
}
