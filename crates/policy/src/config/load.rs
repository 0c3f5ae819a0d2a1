//! Finding the files, following `extends`, merging layers, resolving names and paths.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use super::decode::{CredentialDef, CredentialSourceDef, Item, Layer, PathSetDef, PresetDef, RefKind, decode};
use super::error::{ConfigError, Location, did_you_mean};
use super::node::SyntaxError;
use super::{
    Action, Audit, BACKENDS, Config, Credential, CredentialSource, Defaults, Endpoint, EMBEDDED_PRESETS, Format, LoadOptions, RuleSpec, SandboxPreset,
    TestCase, embedded_preset,
};

const EXTENSIONS: [&str; 4] = ["toml", "yaml", "yml", "json"];

/// Load the layered configuration: `-c FILE` alone if given, otherwise the global file, the
/// project file and the project's local file, or `pinfold:default` when none exists.
pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
    if let Some(explicit) = &opts.explicit {
        return load_file(explicit, opts);
    }
    let place = Place::open(&opts.cwd)?;
    let (project, root) = locate(&place)?;
    let mut loader = Loader::new(opts, root);
    for file in layers(opts, &place, project.as_ref())? {
        loader.from_project = project.as_ref().is_some_and(|(p, _)| file.parent() == p.parent());
        loader.load_path(&file, None)?;
    }
    loader.from_project = false;
    if loader.merged.sources.is_empty() {
        loader.load_embedded("default", None)?;
    }
    loader.finish()
}

/// Load one file and what it extends (for `-c FILE` and `pinfold validate FILE`). A relative
/// path is taken from `opts.cwd`. The project root is still found from `opts.cwd`.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Config, ConfigError> {
    let (_, root) = locate(&Place::open(&opts.cwd)?)?;
    let mut loader = Loader::new(opts, root);
    loader.load_path(&opts.cwd.join(path), None)?;
    loader.finish()
}

/// Load policy text that is not in a file (tests, stdin). `name` is used in locations;
/// relative `extends` resolve against `opts.cwd`.
pub fn load_str(
    name: &str,
    text: &str,
    format: Format,
    opts: &LoadOptions,
) -> Result<Config, ConfigError> {
    let (_, root) = locate(&Place::open(&opts.cwd)?)?;
    let mut loader = Loader::new(opts, root);
    loader.load_text(
        name.to_string(),
        name.to_string(),
        text,
        format,
        Some(&opts.cwd),
    )?;
    loader.finish()
}

/// What [`load`] would start from, without reading anything: the layer files in order
/// (the `-c` file alone, or global, project, local) and the project root. Files they
/// `extends` are not included. For cache keys.
pub fn layer_files(opts: &LoadOptions) -> Result<(Vec<PathBuf>, PathBuf), ConfigError> {
    let place = Place::open(&opts.cwd)?;
    let (project, root) = locate(&place)?;
    if let Some(explicit) = &opts.explicit {
        return Ok((vec![opts.cwd.join(explicit)], root));
    }
    let files = layers(opts, &place, project.as_ref())?;
    Ok((files, root))
}

/// The layer files in order: the global file, the project file, the local file beside it.
fn layers(opts: &LoadOptions, place: &Place, project: Option<&(PathBuf, usize)>) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files = Vec::new();
    let config_home = opts
        .xdg_config_home
        .clone()
        .or_else(|| opts.home.as_ref().map(|h| h.join(".config")));
    if let Some(dir) = config_home
        && let Some(global) = find_one(&dir.join("pinfold"), &dir.join("pinfold"), "config")?
    {
        files.push(global);
    }
    if let Some((project, up)) = project {
        files.push(project.to_path_buf());
        if let Some(local) = find_one(&place.look(*up), project.parent().unwrap_or(Path::new("/")), "pinfold.local")? {
            files.push(local);
        }
    }
    Ok(files)
}

/// The single non-empty `STEM.{toml,yaml,yml,json}` in the directory `named` (looked in at
/// `look`, see [`Place`]), if any; two of them is an error, and so is a name taken by anything
/// but a regular file ([`policy_file`]).
fn find_one(look: &Path, named: &Path, stem: &str) -> Result<Option<PathBuf>, ConfigError> {
    let mut found: Option<PathBuf> = None;
    for ext in EXTENSIONS {
        let name = format!("{stem}.{ext}");
        let candidate = named.join(&name);
        if policy_file(&look.join(&name), &candidate)? {
            if let Some(first) = found {
                return Err(ConfigError::Ambiguous {
                    first,
                    second: candidate,
                });
            }
            found = Some(candidate);
        }
    }
    Ok(found)
}

/// Whether `path`, a name pinfold looks for policy at, holds a policy file: `false` when
/// nothing is there, an error when something is that cannot be one.
///
/// A name is absent only when nothing has it (or its directory is not a directory: the global
/// `~/.config/pinfold` may be a file). An empty regular file counts as absent too: `pinfold
/// exec` puts empty placeholders at the policy file names a project lacks (so a command
/// cannot create one) for the length of a run, and other pinfold processes must not take them
/// for policy meanwhile. Anything else at the name — a directory, a FIFO, a device such as
/// `/dev/null` behind a symlink, a dangling symlink, a symlink loop — is an error, never
/// "absent": someone put it where policy is read, and taking it for nothing would apply the
/// embedded default instead of the policy meant to be there. A symlink to a regular file is
/// that file.
fn policy_file(look: &Path, path: &Path) -> Result<bool, ConfigError> {
    use std::os::unix::fs::FileTypeExt;
    let io = |source| ConfigError::Io { path: path.to_path_buf(), location: None, source };
    let link = match std::fs::symlink_metadata(look) {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => return Ok(false),
        Err(e) => return Err(io(e)),
    };
    let via = if link.file_type().is_symlink() {
        let target = std::fs::read_link(look).map_err(io)?;
        format!("a symlink to `{}`, which is ", target.display())
    } else {
        String::new()
    };
    let meta = match std::fs::metadata(look) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::NotAFile { path: path.to_path_buf(), what: format!("{via}missing") });
        }
        // A loop (ELOOP), or a target pinfold may not look at.
        Err(e) if !via.is_empty() => {
            return Err(ConfigError::NotAFile { path: path.to_path_buf(), what: format!("{via}unreachable ({e})") });
        }
        Err(e) => return Err(io(e)),
    };
    let t = meta.file_type();
    if t.is_file() {
        return Ok(meta.len() > 0);
    }
    let kind = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(ConfigError::NotAFile { path: path.to_path_buf(), what: format!("{via}{kind}") })
}

/// The working directory and the directories above it, looked in through one descriptor of
/// the working directory opened first (`/proc/self/fd/N/../..`). The caller names the working
/// directory without links, as `getcwd` does; what is found is then found in the directories
/// that path named when the descriptor was opened, whatever is renamed later. Looked up by
/// name, a project swapped for a link to the home directory (by a command running beside
/// this one) while the policy loads would have its `.git` looked for in the home directory,
/// and the project root, which the sandbox makes writable, found above it.
struct Place {
    dir: Option<std::fs::File>,
    cwd: PathBuf,
}

impl Place {
    fn open(cwd: &Path) -> Result<Place, ConfigError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let unanchored = || Place { dir: None, cwd: cwd.to_path_buf() };
        if !cwd.is_absolute() {
            return Ok(unanchored());
        }
        let dir = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC).open(cwd) {
            Ok(d) => d,
            // Nothing there (a directory named only to judge a command in): looked up by name,
            // which finds nothing either.
            Err(_) => return Ok(unanchored()),
        };
        match std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())) {
            Ok(now) if now == normalize(cwd) => Ok(Place { dir: Some(dir), cwd: cwd.to_path_buf() }),
            Ok(now) => Err(ConfigError::WorkingDirMoved { cwd: cwd.to_path_buf(), now }),
            // No /proc: by name.
            Err(_) => Ok(unanchored()),
        }
    }

    /// Where to look for what is in the directory `up` levels above the working directory
    /// (0: the working directory itself).
    fn look(&self, up: usize) -> PathBuf {
        use std::os::fd::AsRawFd;
        match &self.dir {
            Some(d) => {
                let mut p = PathBuf::from(format!("/proc/self/fd/{}", d.as_raw_fd()));
                for _ in 0..up {
                    p.push("..");
                }
                p
            }
            None => self.cwd.ancestors().nth(up).unwrap_or(Path::new("/")).to_path_buf(),
        }
    }

    /// The directory `up` levels above the working directory, as named.
    fn named(&self, up: usize) -> &Path {
        self.cwd.ancestors().nth(up).unwrap_or(Path::new("/"))
    }

    fn levels(&self) -> usize {
        self.cwd.ancestors().count()
    }
}

/// The nearest `pinfold.*` at or above the working directory (and how many levels above it
/// is), and the project root: the project file's directory, else the nearest directory with
/// `.git`, else the working directory.
fn locate(place: &Place) -> Result<(Option<(PathBuf, usize)>, PathBuf), ConfigError> {
    for up in 0..place.levels() {
        if let Some(file) = find_one(&place.look(up), place.named(up), "pinfold")? {
            let root = place.named(up).to_path_buf();
            return Ok((Some((file, up)), root));
        }
    }
    let root = (0..place.levels()).find(|up| place.look(*up).join(".git").exists()).map_or(place.named(0), |up| place.named(up));
    Ok((None, root.to_path_buf()))
}

/// Everything loaded so far, later layers already applied over earlier ones.
#[derive(Default)]
struct Merged {
    action: Option<Action>,
    sandbox: Option<String>,
    on_parse_error: Option<Action>,
    paths: BTreeMap<String, PathSetDef>,
    rules: Vec<RuleSpec>,
    sandboxes: BTreeMap<String, PresetDef>,
    tests: Vec<TestCase>,
    refs: Vec<super::decode::Reference>,
    sources: Vec<String>,
    files: Vec<PathBuf>,
    audit_enabled: Option<bool>,
    redact_env: Vec<String>,
    credentials: BTreeMap<String, CredentialDef>,
    control_lift: Vec<String>,
    undo_enabled: Option<bool>,
}

struct Loader<'o> {
    opts: &'o LoadOptions,
    root: PathBuf,
    merged: Merged,
    /// Files being loaded (identity, display name), outermost first, for cycle detection.
    stack: Vec<(String, String)>,
    /// Files already merged: extended twice (a diamond) means loaded once.
    seen: HashSet<String>,
    /// Whether the layer being loaded comes from the project (its `pinfold.*` or
    /// `pinfold.local.*`, and what they extend): files an agent working there may have written.
    from_project: bool,
}

impl<'o> Loader<'o> {
    fn new(opts: &'o LoadOptions, root: PathBuf) -> Self {
        Loader {
            opts,
            root,
            merged: Merged::default(),
            stack: Vec::new(),
            seen: HashSet::new(),
            from_project: false,
        }
    }

    fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.opts.cwd) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    fn enter(
        &self,
        identity: &str,
        display: &str,
        from: Option<&Location>,
    ) -> Result<bool, ConfigError> {
        if let Some(i) = self.stack.iter().position(|(id, _)| id == identity) {
            let mut chain: Vec<String> = self.stack[i..]
                .iter()
                .map(|(_, name)| name.clone())
                .collect();
            chain.push(display.to_string());
            let location = from.cloned().unwrap_or(Location {
                file: display.to_string(),
                line: 1,
                col: 1,
            });
            return Err(ConfigError::ExtendsCycle { location, chain });
        }
        Ok(!self.seen.contains(identity))
    }

    fn load_path(&mut self, path: &Path, from: Option<&Location>) -> Result<(), ConfigError> {
        let display = self.display(path);
        let identity = std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string();
        if !self.enter(&identity, &display, from)? {
            return Ok(());
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let Some(format) = Format::from_extension(ext) else {
            let message = format!("cannot tell the format of `{display}` from its extension");
            let hint = Some("name policy files `.toml`, `.yaml`, `.yml` or `.json`".to_string());
            let location = from.cloned().unwrap_or(Location {
                file: display,
                line: 1,
                col: 1,
            });
            return Err(ConfigError::Invalid {
                location,
                key_path: String::new(),
                message,
                hint,
            });
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            location: from.cloned(),
            source,
        })?;
        self.merged.files.push(path.to_path_buf());
        self.load_text(identity, display, &text, format, path.parent())
    }

    fn load_embedded(&mut self, name: &str, from: Option<&Location>) -> Result<(), ConfigError> {
        let display = format!("pinfold:{name}");
        if !self.enter(&display, &display, from)? {
            return Ok(());
        }
        let Some(text) = embedded_preset(name) else {
            let hint = did_you_mean(name, EMBEDDED_PRESETS.iter().copied()).or_else(|| {
                let names: Vec<String> = EMBEDDED_PRESETS
                    .iter()
                    .map(|n| format!("`pinfold:{n}`"))
                    .collect();
                Some(format!("embedded presets: {}", names.join(", ")))
            });
            let location = from.cloned().unwrap_or(Location {
                file: display.clone(),
                line: 1,
                col: 1,
            });
            return Err(ConfigError::Invalid {
                location,
                key_path: "extends".into(),
                message: format!("unknown embedded preset `{display}`"),
                hint,
            });
        };
        self.load_text(display.clone(), display, text, Format::Toml, None)
    }

    /// Parse, check, load what it extends, then merge. `base` is the directory relative
    /// `extends` resolve against; `None` for embedded presets, which may extend only presets.
    fn load_text(
        &mut self,
        identity: String,
        display: String,
        text: &str,
        format: Format,
        base: Option<&Path>,
    ) -> Result<(), ConfigError> {
        let syntax = |e: SyntaxError| ConfigError::Invalid {
            location: Location {
                file: display.clone(),
                line: e.pos.line,
                col: e.pos.col,
            },
            key_path: String::new(),
            message: e.message,
            hint: None,
        };
        let layer = match format {
            Format::Toml => decode(&display, &super::node::parse_toml(text).map_err(syntax)?)?,
            Format::Yaml => decode(&display, &super::node::parse_yaml(text).map_err(syntax)?)?,
            Format::Json => decode(&display, &super::json::parse_json(text).map_err(syntax)?)?,
        };

        self.stack.push((identity.clone(), display.clone()));
        for (target, location) in &layer.extends {
            if let Some(name) = target.strip_prefix("pinfold:") {
                self.load_embedded(name, Some(location))?;
                continue;
            }
            let Some(base) = base else {
                return Err(ConfigError::Invalid {
                    location: location.clone(),
                    key_path: "extends".into(),
                    message: "an embedded preset can only extend other embedded presets".into(),
                    hint: None,
                });
            };
            let path = match (target.strip_prefix("~/"), &self.opts.home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => normalize(&base.join(target)),
            };
            self.load_path(&path, Some(location))?;
        }
        self.stack.pop();
        self.seen.insert(identity);
        if let Some((false, location)) = &layer.audit.enabled
            && self.from_project
        {
            return Err(ConfigError::Invalid {
                location: location.clone(),
                key_path: "audit.enabled".into(),
                message: "a project policy cannot turn the audit ledger off".into(),
                hint: Some(
                    "files in the project can be written by the agent whose actions are recorded; \
                     set `[audit] enabled = false` in $XDG_CONFIG_HOME/pinfold/config.toml or a `-c` file"
                        .into(),
                ),
            });
        }
        if self.from_project {
            project_may_not_hold_secrets(&layer)?;
            if let Some((_, location)) = &layer.control_lift {
                return Err(ConfigError::Invalid {
                    location: location.clone(),
                    key_path: "control.lift".into(),
                    message: "a project policy cannot lift control files".into(),
                    hint: Some(
                        "control files run or configure programs outside the sandbox, and files in the project can be \
                         written by the agent; lift them in $XDG_CONFIG_HOME/pinfold/config.toml or a `-c` file"
                            .into(),
                    ),
                });
            }
        }
        self.merged.sources.push(display);
        self.merge(layer);
        Ok(())
    }

    /// Later layers: rules and tests are appended; each default set replaces the earlier one;
    /// a path set or sandbox preset defined again replaces the earlier definition entirely.
    fn merge(&mut self, layer: Layer) {
        let m = &mut self.merged;
        m.action = layer.defaults.action.or(m.action);
        m.sandbox = layer.defaults.sandbox.or(m.sandbox.take());
        m.on_parse_error = layer.defaults.on_parse_error.or(m.on_parse_error);
        for set in layer.paths {
            m.paths.insert(set.name.clone(), set);
        }
        for preset in layer.sandboxes {
            m.sandboxes.insert(preset.name.clone(), preset);
        }
        if m.rules.is_empty() {
            m.rules = layer.rules;
        } else {
            m.rules.extend(layer.rules);
        }
        m.tests.extend(layer.tests);
        m.refs.extend(layer.refs);
        if let Some((enabled, _)) = layer.audit.enabled {
            m.audit_enabled = Some(enabled);
        }
        for c in layer.credentials {
            m.credentials.insert(c.name.clone(), c);
        }
        for name in layer.audit.redact_env {
            if !m.redact_env.contains(&name) {
                m.redact_env.push(name);
            }
        }
        if layer.undo_enabled.is_some() {
            m.undo_enabled = layer.undo_enabled;
        }
        if let Some((lifted, _)) = layer.control_lift {
            for p in lifted {
                if !m.control_lift.contains(&p) {
                    m.control_lift.push(p);
                }
            }
        }
    }

    /// Check references, resolve paths, apply built-in defaults.
    fn finish(self) -> Result<Config, ConfigError> {
        let home = self.opts.home.as_deref();
        let root = self.root;
        let m = self.merged;

        for r in &m.refs {
            let (defined, what): (Vec<&str>, &str) = match r.kind {
                RefKind::Sandbox => (
                    m.sandboxes.keys().map(String::as_str).collect(),
                    "sandbox preset",
                ),
                RefKind::PathSet => (m.paths.keys().map(String::as_str).collect(), "path set"),
                RefKind::Credential => (
                    m.credentials.keys().map(String::as_str).collect(),
                    "credential",
                ),
            };
            if !defined.contains(&r.name.as_str()) {
                return Err(undefined(what, &r.name, &defined, &r.location, &r.key_path));
            }
        }

        let mut paths = BTreeMap::new();
        for (name, set) in &m.paths {
            let mut resolved = Vec::with_capacity(set.entries.len());
            for item in &set.entries {
                resolved.push(resolve_item(item, &root, home)?);
            }
            paths.insert(name.clone(), resolved);
        }

        let expand = |items: &[Item]| -> Result<Vec<String>, ConfigError> {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item.path_ref() {
                    Some(name) => match paths.get(name) {
                        Some(set) => out.extend(set.iter().cloned()),
                        None => {
                            let defined: Vec<&str> = paths.keys().map(String::as_str).collect();
                            return Err(undefined(
                                "path set",
                                name,
                                &defined,
                                &item.location,
                                &item.key_path,
                            ));
                        }
                    },
                    None => out.push(resolve_item(item, &root, home)?),
                }
            }
            Ok(out)
        };
        let mut sandboxes = BTreeMap::new();
        for (name, def) in &m.sandboxes {
            let preset = SandboxPreset {
                name: name.clone(),
                write_allow: expand(&def.write_allow)?,
                write_deny: expand(&def.write_deny)?,
                read_deny: expand(&def.read_deny)?,
                network_allow: def.network_allow,
                network_hosts: def.network_hosts.clone(),
                upstream_ca: def
                    .upstream_ca
                    .iter()
                    .map(|item| resolve_item(item, &root, home))
                    .collect::<Result<_, _>>()?,
                endpoints: def
                    .endpoints
                    .iter()
                    .map(|e| Endpoint {
                        host: e.host.clone(),
                        credential: e.credential.clone(),
                        header: e.header.clone(),
                        format: e.format.clone(),
                        location: e.location.clone(),
                    })
                    .collect(),
                env_keep: def.env_keep.clone(),
                backend: def.backend.clone().unwrap_or_else(|| BACKENDS[0].to_string()),
                container: def.container.clone(),
                location: def.location.clone(),
            };
            sandboxes.insert(name.clone(), preset);
        }
        let mut credentials = BTreeMap::new();
        for (name, def) in &m.credentials {
            let source = match &def.source {
                CredentialSourceDef::Env(v) => CredentialSource::Env(v.clone()),
                CredentialSourceDef::File(item) => CredentialSource::File(resolve_item(item, &root, home)?),
                CredentialSourceDef::Command(c) => CredentialSource::Command(c.clone()),
            };
            credentials.insert(
                name.clone(),
                Credential {
                    name: name.clone(),
                    source,
                    location: def.location.clone(),
                },
            );
        }

        let sandbox = m.sandbox.or_else(|| {
            sandboxes
                .contains_key("workspace")
                .then(|| "workspace".to_string())
        });
        let control_lift: Vec<PathBuf> = m
            .control_lift
            .iter()
            .map(|p| match (p.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => normalize(&root.join(p)),
            })
            .collect();
        Ok(Config {
            defaults: Defaults {
                action: m.action.unwrap_or(Action::Ask),
                sandbox,
                on_parse_error: m.on_parse_error.unwrap_or(Action::Ask),
            },
            paths,
            rules: m.rules,
            sandboxes,
            tests: m.tests,
            sources: m.sources,
            files: m.files,
            project_root: root,
            home: self.opts.home.clone(),
            audit: Audit {
                enabled: m.audit_enabled.unwrap_or(true),
                redact_env: m.redact_env,
            },
            credentials,
            control_lift,
            undo_enabled: m.undo_enabled.unwrap_or(true),
        })
    }
}

/// A project file (and what it extends) may be written by the agent whose traffic the proxy
/// controls: if it could define a credential or an endpoint it could have the user's secret
/// sent to a host of its choosing, or run a command outside the sandbox to read one.
fn project_may_not_hold_secrets(layer: &Layer) -> Result<(), ConfigError> {
    let hint = "files in the project can be written by the sandboxed agent; define credentials and \
                endpoints in $XDG_CONFIG_HOME/pinfold/config.toml or a `-c` file";
    if let Some(c) = layer.credentials.first() {
        return Err(ConfigError::Invalid {
            location: c.location.clone(),
            key_path: format!("credentials.{}", c.name),
            message: "a project policy cannot define credentials".into(),
            hint: Some(hint.into()),
        });
    }
    for preset in &layer.sandboxes {
        if let Some(e) = preset.endpoints.first() {
            return Err(ConfigError::Invalid {
                location: e.location.clone(),
                key_path: format!("sandbox.{}.network.endpoint", preset.name),
                message: "a project policy cannot define credential endpoints".into(),
                hint: Some(hint.into()),
            });
        }
    }
    Ok(())
}

/// `a/./b/../c` to `a/c`, lexically (for naming files to read, not for sandbox paths).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn undefined(
    what: &str,
    name: &str,
    defined: &[&str],
    location: &Location,
    key_path: &str,
) -> ConfigError {
    let hint = did_you_mean(name, defined.iter().copied()).or_else(|| {
        Some(if defined.is_empty() {
            format!("no {what}s are defined")
        } else {
            let names: Vec<String> = defined.iter().map(|n| format!("`{n}`")).collect();
            format!("defined {what}s: {}", names.join(", "))
        })
    });
    ConfigError::Invalid {
        location: location.clone(),
        key_path: key_path.to_string(),
        message: format!("undefined {what} `{name}`"),
        hint,
    }
}

fn resolve_item(item: &Item, root: &Path, home: Option<&Path>) -> Result<String, ConfigError> {
    resolve_path(&item.text, root, home).map_err(|(message, hint)| ConfigError::Invalid {
        location: item.location.clone(),
        key_path: item.key_path.clone(),
        message,
        hint,
    })
}

/// `~` and `~/x` against home, relative paths against the project root, absolute paths as
/// they are. Purely lexical: `.` segments and repeated or trailing `/` are dropped, `..` and
/// glob characters are kept, nothing is canonicalized.
pub(crate) fn resolve_path(
    text: &str,
    root: &Path,
    home: Option<&Path>,
) -> Result<String, (String, Option<String>)> {
    let (base, rest): (Option<&Path>, &str) = if text == "~" || text.starts_with("~/") {
        let Some(home) = home else {
            return Err((
                format!("`{text}` needs a home directory, but none is known"),
                Some("set HOME, or use an absolute path".into()),
            ));
        };
        (Some(home), text.get(1..).unwrap_or(""))
    } else if text.starts_with('~') {
        return Err((
            format!("`{text}`: only `~` and `~/…` are supported, not `~user`"),
            Some("write the absolute path".into()),
        ));
    } else if text.starts_with('/') {
        (None, text)
    } else {
        (Some(root), text)
    };
    let base_text = base.map(|b| b.to_string_lossy());
    let mut out = String::with_capacity(base_text.as_ref().map_or(0, |b| b.len()) + rest.len() + 1);
    let absolute = base_text.as_deref().is_none_or(|b| b.starts_with('/'));
    let segments = base_text
        .as_deref()
        .unwrap_or("")
        .split('/')
        .chain(rest.split('/'));
    for seg in segments {
        if seg.is_empty() || seg == "." {
            continue;
        }
        if absolute || !out.is_empty() {
            out.push('/');
        }
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push(if absolute { '/' } else { '.' });
    }
    Ok(out)
}

#[cfg(test)]
mod place_tests {
    use super::*;

    /// The project (with its `.git`) swapped for a link to a directory without one, above
    /// which a `.git` is (a home directory kept in git, say), after the working directory was
    /// opened: the root is still the project, not the directory above.
    #[test]
    fn the_root_is_found_where_the_working_directory_was_when_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().canonicalize().unwrap();
        for d in [".git", "proj/.git", "proj/sub", "other/sub"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        let cwd = top.join("proj/sub");
        let place = Place::open(&cwd).unwrap();
        std::fs::rename(top.join("proj"), top.join("proj-real")).unwrap();
        std::os::unix::fs::symlink(top.join("other"), top.join("proj")).unwrap();
        let (project, root) = locate(&place).unwrap();
        assert_eq!(project, None);
        assert_eq!(root, top.join("proj"));
        // Looked up by name now, the root would be the directory above.
        let (_, by_name) = locate(&Place { dir: None, cwd: cwd.clone() }).unwrap();
        assert_eq!(by_name, top, "the control: by name, the swap is seen");
        // Opened now, the working directory leads elsewhere, and is refused.
        let err = Place::open(&cwd).err().expect("a working directory through a link is refused");
        assert!(matches!(err, ConfigError::WorkingDirMoved { ref now, .. } if *now == top.join("other/sub")), "{err:?}");
    }

    /// A policy file is looked for where the working directory was too, and named as the
    /// caller named it.
    #[test]
    fn the_project_file_is_found_where_the_working_directory_was() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("proj/sub")).unwrap();
        std::fs::create_dir_all(top.join("other/sub")).unwrap();
        std::fs::write(top.join("proj/pinfold.toml"), "[defaults]\n").unwrap();
        std::fs::write(top.join("pinfold.toml"), "[defaults]\n").unwrap();
        let place = Place::open(&top.join("proj/sub")).unwrap();
        std::fs::rename(top.join("proj"), top.join("proj-real")).unwrap();
        std::os::unix::fs::symlink(top.join("other"), top.join("proj")).unwrap();
        let (project, root) = locate(&place).unwrap();
        assert_eq!(project, Some((top.join("proj/pinfold.toml"), 1)));
        assert_eq!(root, top.join("proj"));
    }
}
