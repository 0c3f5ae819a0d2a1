//! pinfold's configuration: one schema, read from TOML, YAML or JSON, layered and validated.
//!
//! # How the pieces fit
//!
//! * A policy **file** is parsed into a format-neutral tree that remembers the line and column
//!   of every key and value (`node`, `json`), then checked against the schema (`decode`). Every
//!   mistake becomes a [`ConfigError`] pointing at `file:line:col`, often with a hint.
//! * Files are **layered** ([`load`]): the global file, the project file, the project's local
//!   file; or only the file given with `-c` ([`LoadOptions::explicit`]); or, when there is no
//!   file at all, the embedded `pinfold:default`. Each file may `extends` embedded presets
//!   ([`embedded_preset`]) or other files, which load before it.
//! * The merged result is **resolved** into a [`Config`]: references to sandbox presets and
//!   path sets are checked, paths are made absolute against the project root or the home
//!   directory, and `<path:NAME>` in sandbox lists is expanded.
//!
//! The rule patterns themselves are *not* interpreted here: [`RuleSpec::pattern`] is the text
//! the judge compiles (only its `<path:NAME>` references are checked).
//!
//! # Example
//!
//! ```
//! use pinfold_policy::config::{Action, Format, LoadOptions, load_str};
//!
//! let opts = LoadOptions {
//!     explicit: None,
//!     cwd: "/work/project".into(),
//!     home: Some("/home/me".into()),
//!     xdg_config_home: None,
//! };
//! let text = r#"
//! [[rules]]
//! allow = "git status *"
//!
//! [sandbox.workspace]
//! fs.write.allow = ["."]
//! fs.read.deny = ["~/.ssh"]
//! "#;
//! let config = load_str("pinfold.toml", text, Format::Toml, &opts).unwrap();
//! assert_eq!(config.rules[0].action, Action::Allow);
//! assert_eq!(config.rules[0].location.to_string(), "pinfold.toml:3:9");
//! assert_eq!(config.defaults.sandbox.as_deref(), Some("workspace"));
//! assert_eq!(config.sandboxes["workspace"].read_deny, ["/home/me/.ssh"]);
//!
//! let err = load_str("pinfold.toml", "[[rule]]\nallow = 'x'\n", Format::Toml, &opts).unwrap_err();
//! assert_eq!(err.to_string(), "pinfold.toml:1:3: unknown key `rule` at the top level");
//! assert_eq!(err.hint(), Some("did you mean `rules`?"));
//! ```
//!
//! # What this module does not do
//!
//! It never reads the process environment (the caller fills [`LoadOptions`]), never
//! canonicalizes or checks sandbox paths for existence (they may not exist yet, and may be
//! globs), and does not check that patterns are well-formed beyond being non-empty.

mod decode;
mod error;
mod json;
mod load;
mod node;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use error::{ConfigError, Location};
pub use load::{layer_files, load, load_file, load_str};
pub use schema::json_schema;
pub use pinfold_egress::{Host, HostPattern};

/// What happens to a command. Ordered by strictness: `Allow < Ask < Deny`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Action> {
        match s {
            "allow" => Some(Action::Allow),
            "ask" => Some(Action::Ask),
            "deny" => Some(Action::Deny),
            _ => None,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The file format, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Yaml,
    Json,
}

impl Format {
    /// `toml`, `yaml`/`yml`, `json`; anything else is `None`.
    pub fn from_extension(ext: &str) -> Option<Format> {
        match ext {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Where to look for configuration. Filled by the CLI from its flags and environment; the
/// library never reads the environment itself.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `-c FILE`: load only this file (and what it extends).
    pub explicit: Option<PathBuf>,
    /// The directory the command runs in; the project is searched from here upwards.
    pub cwd: PathBuf,
    /// `$HOME`, for `~` in paths and the default `$XDG_CONFIG_HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`; defaults to `home/.config`.
    pub xdg_config_home: Option<PathBuf>,
}

/// Settings for commands no rule decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Defaults {
    /// Verdict for a command no rule matches.
    pub action: Action,
    /// Sandbox preset for allowed commands whose rule names none.
    pub sandbox: Option<String>,
    /// Verdict for a command that cannot be parsed: `Ask` or `Deny`, never `Allow`.
    pub on_parse_error: Action,
}

/// One rule as written: an action, a pattern and what goes with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleSpec {
    pub action: Action,
    /// The pattern text, uninterpreted (may contain `<path:NAME>`).
    pub pattern: String,
    /// Where the pattern value is.
    pub location: Location,
    pub message: Option<String>,
    pub fix: Option<String>,
    /// Sandbox preset for commands this rule allows (never set on a deny rule).
    pub sandbox: Option<String>,
    /// Environment variables the rule permits as `VAR=value` prefixes.
    pub env: Vec<String>,
    /// Example commands and the verdict this rule should give them.
    pub tests: Vec<(Action, String, Location)>,
    /// `when`: the rule applies only where undo is (or is not) available.
    #[serde(default)]
    pub when: Option<When>,
}

/// `when` of a rule: where it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum When {
    /// `when = "undo"`: where `pinfold undo` can take the command back — a git project with
    /// `[undo] enabled`, the command in a sandbox.
    Undo,
    /// `when = "no-undo"`: everywhere else.
    NoUndo,
    /// `when = "no-network"`: where the command's sandbox gives it no network (or there is no
    /// sandbox, and nothing holds it): a preset with the network on (or a host allowlist) was
    /// the person's choice to let its commands reach it.
    NoNetwork,
}

impl When {
    pub fn parse(s: &str) -> Option<When> {
        match s {
            "undo" => Some(When::Undo),
            "no-undo" => Some(When::NoUndo),
            "no-network" => Some(When::NoNetwork),
            _ => None,
        }
    }

    /// Whether a rule with this condition applies: `undo` tells whether undo is available,
    /// `network` whether the command's sandbox has the network.
    pub fn holds(self, undo: bool, network: bool) -> bool {
        match self {
            When::Undo => undo,
            When::NoUndo => !undo,
            When::NoNetwork => !network,
        }
    }
}

/// A named sandbox profile, with paths resolved and `<path:NAME>` expanded.
/// The backends a preset's `backend` may name, from the least isolated to the most: merging
/// presets that name different ones takes the later (strictest wins).
pub const BACKENDS: &[&str] = &["process", "gvisor", "container"];

/// A preset's container keys (`image`, `runtime`, `cpus`, `memory`, `pids`), which apply to
/// `backend = "container"` only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
}

impl ContainerKeys {
    pub fn is_empty(&self) -> bool {
        *self == ContainerKeys::default()
    }
}

/// The size a preset's `memory` gives, in bytes: an integer, or a number with a unit. `K`,
/// `M`, `G`, `T` and `KiB`…`TiB` are powers of 1024, `KB`…`TB` of 1000, `B` is bytes.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let scale: u64 = match unit {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "m" | "MiB" => 1 << 20,
        "G" | "g" | "GiB" => 1 << 30,
        "T" | "t" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(format!("unknown unit `{unit}`")),
    };
    let n: f64 = num.parse().map_err(|_| format!("`{t}` is not a size"))?;
    let bytes = n * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("`{t}` is out of range"));
    }
    Ok(bytes as u64)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxPreset {
    pub name: String,
    pub write_allow: Vec<String>,
    pub write_deny: Vec<String>,
    pub read_deny: Vec<String>,
    /// `network.allow`: false is no network at all.
    pub network_allow: bool,
    /// `network.hosts`: with `network_allow`, an empty list is the full network and a
    /// non-empty one the only hosts reachable (through the egress proxy).
    pub network_hosts: Vec<HostPattern>,
    /// `network.upstream_ca`: extra root certificates (PEM files, resolved paths) the proxy
    /// trusts when it verifies upstream servers.
    pub upstream_ca: Vec<String>,
    /// `[[network.endpoint]]`: hosts the proxy injects a credential for.
    pub endpoints: Vec<Endpoint>,
    pub env_keep: Vec<String>,
    /// `backend`: where the preset's commands run, by name (one of [`BACKENDS`]; the sandbox
    /// crate has the implementations).
    pub backend: String,
    /// With `backend = "container"`: the image, runtime and limits.
    #[serde(default, skip_serializing_if = "ContainerKeys::is_empty")]
    pub container: ContainerKeys,
    /// Where the preset is defined (its name).
    pub location: Location,
}

impl SandboxPreset {
    /// Whether the network is restricted to an allowlist (`network.allow` with hosts).
    pub fn has_allowlist(&self) -> bool {
        self.network_allow && !self.network_hosts.is_empty()
    }
}

/// `[[sandbox.X.network.endpoint]]`: requests to `host` get the header `header` with the
/// value `format` where `{}` is replaced by the secret of `credential`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// One exact host (never `*.x`), with an optional port.
    pub host: HostPattern,
    /// The name of a `[credentials.NAME]` table (checked to exist).
    pub credential: String,
    /// The header to set, replacing any value the client sent (default `Authorization`).
    pub header: String,
    /// The header value, with `{}` exactly once (default `Bearer {}`).
    pub format: String,
    pub location: Location,
}

/// `[credentials.NAME]`: where pinfold reads a secret. Reading it is left to the caller; the
/// configuration holds only the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub name: String,
    pub source: CredentialSource,
    pub location: Location,
}

/// Exactly one of `env`, `file` or `command`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CredentialSource {
    /// An environment variable of pinfold's own process.
    Env(String),
    /// A file, its path resolved like sandbox paths.
    File(String),
    /// A command run by `sh -c` outside the sandbox; its standard output is the secret.
    Command(String),
}

/// A whole-policy test: this command should get this verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestCase {
    pub command: String,
    pub expect: Action,
    pub cwd: Option<String>,
    pub location: Location,
}

/// The merged, validated configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    pub defaults: Defaults,
    /// Named path sets, resolved to absolute paths (globs kept).
    pub paths: BTreeMap<String, Vec<String>>,
    /// Rules in load order: extended files first, then the file itself; layers in order.
    pub rules: Vec<RuleSpec>,
    pub sandboxes: BTreeMap<String, SandboxPreset>,
    pub tests: Vec<TestCase>,
    /// Display names of the files loaded, in order (`pinfold:NAME` for embedded presets).
    pub sources: Vec<String>,
    /// Every file read, in order (not embedded presets). For cache invalidation.
    pub files: Vec<PathBuf>,
    /// Relative paths in every layer resolve against this directory.
    pub project_root: PathBuf,
    pub home: Option<PathBuf>,
    pub audit: Audit,
    /// `[credentials.NAME]`, by name. Only the user's own files may define them.
    pub credentials: BTreeMap<String, Credential>,
    /// `control.lift`: control files (and directories) commands and the agent's file tools
    /// may write after all, absolute. Only the user's own files may lift one.
    #[serde(default)]
    pub control_lift: Vec<PathBuf>,
    /// `undo.enabled` (default true): sandboxed runs in a git project keep what they change
    /// for `pinfold undo`. Any layer may set it; the last one wins.
    #[serde(default = "yes")]
    pub undo_enabled: bool,
}

fn yes() -> bool {
    true
}

/// `[audit]`: whether decisions are recorded in the ledger, and what to redact there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audit {
    /// Record to the ledger (default true). Only the user's own configuration or a `-c` file
    /// may set false: a project file that tries is an error.
    pub enabled: bool,
    /// Environment variables whose values are secrets: any occurrence is redacted.
    pub redact_env: Vec<String>,
}

/// Names of the embedded presets, usable as `extends = ["pinfold:NAME"]`.
pub const EMBEDDED_PRESETS: &[&str] = &["default", "recommended"];

/// The text of an embedded preset (`recommended` for `pinfold:recommended`).
pub fn embedded_preset(name: &str) -> Option<&'static str> {
    match name {
        "default" => Some(include_str!("../../presets/default.toml")),
        "recommended" => Some(include_str!("../../presets/recommended.toml")),
        _ => None,
    }
}
