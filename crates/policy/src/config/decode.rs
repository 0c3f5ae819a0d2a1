//! The schema check: a [`Node`] tree in, one file's [`Layer`] out.
//!
//! Written by hand rather than derived so that every error knows its position, its key path and
//! a hint; `schema.rs` describes the same shape for editors, and a test keeps the two in step.

use super::error::{ConfigError, Location, did_you_mean};
use super::node::{Entry, Node, Pos, Value};
use super::{Action, RuleSpec, TestCase};
use pinfold_egress::HostPattern;

pub(crate) const TOP_KEYS: &[&str] = &[
    "$schema", "extends", "defaults", "paths", "rules", "sandbox", "tests", "audit", "credentials", "control", "undo",
];
pub(crate) const AUDIT_KEYS: &[&str] = &["enabled", "redact_env"];
pub(crate) const CONTROL_KEYS: &[&str] = &["lift"];
pub(crate) const UNDO_KEYS: &[&str] = &["enabled"];
pub(crate) const DEFAULTS_KEYS: &[&str] = &["action", "sandbox", "on_parse_error"];
pub(crate) const RULE_KEYS: &[&str] = &[
    "allow", "ask", "deny", "message", "fix", "sandbox", "env", "tests", "when",
];
pub(crate) const RULE_TESTS_KEYS: &[&str] = &["allow", "ask", "deny"];
pub(crate) const PRESET_KEYS: &[&str] = &["backend", "fs", "network", "env", "image", "runtime", "cpus", "memory", "pids"];

/// The least memory a container may be given (the Docker Engine refuses less than 6 MiB).
const MIN_MEMORY: u64 = 6 << 20;
pub(crate) const FS_KEYS: &[&str] = &["write", "read"];
pub(crate) const FS_WRITE_KEYS: &[&str] = &["allow", "deny"];
pub(crate) const FS_READ_KEYS: &[&str] = &["deny"];
pub(crate) const NETWORK_KEYS: &[&str] = &["allow", "hosts", "upstream_ca", "endpoint"];
pub(crate) const ENDPOINT_KEYS: &[&str] = &["host", "credential", "header", "format"];
pub(crate) const CREDENTIAL_KEYS: &[&str] = &["env", "file", "command"];
/// Headers an endpoint may not inject: they frame or route the request, and a secret in them
/// would change where or how it goes rather than authenticate it.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
    "keep-alive", "proxy-connection", "expect",
];
pub(crate) const ENV_KEYS: &[&str] = &["keep"];
pub(crate) const TEST_KEYS: &[&str] = &["command", "expect", "cwd"];

/// One file's content, checked but not yet merged or resolved.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    pub extends: Vec<(String, Location)>,
    pub defaults: LayerDefaults,
    pub paths: Vec<PathSetDef>,
    pub rules: Vec<RuleSpec>,
    pub sandboxes: Vec<PresetDef>,
    pub tests: Vec<TestCase>,
    pub audit: LayerAudit,
    /// `control.lift`: control files commands may write, with where the list was written
    /// (only the user's own configuration may lift one).
    pub control_lift: Option<(Vec<String>, Location)>,
    /// `undo.enabled`.
    pub undo_enabled: Option<bool>,
    /// `[credentials.NAME]` tables, in file order.
    pub credentials: Vec<CredentialDef>,
    /// Names this file uses that must be defined somewhere in the merged configuration.
    pub refs: Vec<Reference>,
}

#[derive(Debug, Default)]
pub(crate) struct LayerDefaults {
    pub action: Option<Action>,
    pub sandbox: Option<String>,
    pub on_parse_error: Option<Action>,
}

#[derive(Debug, Default)]
pub(crate) struct LayerAudit {
    /// `audit.enabled`, with where it was written (a project file may not turn recording off).
    pub enabled: Option<(bool, Location)>,
    pub redact_env: Vec<String>,
}

/// A path or glob as written, or a `<path:NAME>` reference (sandbox lists only).
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub text: String,
    pub location: Location,
    pub key_path: String,
}

impl Item {
    /// `Some(NAME)` when the entry is exactly `<path:NAME>`.
    pub(crate) fn path_ref(&self) -> Option<&str> {
        self.text.strip_prefix("<path:")?.strip_suffix('>')
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PathSetDef {
    pub name: String,
    pub entries: Vec<Item>,
}

#[derive(Debug, Clone)]
pub(crate) struct PresetDef {
    pub name: String,
    pub write_allow: Vec<Item>,
    pub write_deny: Vec<Item>,
    pub read_deny: Vec<Item>,
    pub network_allow: bool,
    pub network_hosts: Vec<HostPattern>,
    pub upstream_ca: Vec<Item>,
    pub endpoints: Vec<EndpointDef>,
    pub env_keep: Vec<String>,
    /// `backend`: one of [`crate::config::BACKENDS`].
    pub backend: Option<String>,
    /// `image`, `runtime`, `cpus`, `memory`, `pids`, and where the first of them is written.
    pub container: crate::config::ContainerKeys,
    pub container_at: Option<(Location, String)>,
    pub location: Location,
}

/// `[[sandbox.X.network.endpoint]]`, checked; the credential name is a [`Reference`].
#[derive(Debug, Clone)]
pub(crate) struct EndpointDef {
    pub host: HostPattern,
    pub credential: String,
    pub header: String,
    pub format: String,
    pub location: Location,
}

/// `[credentials.NAME]`: where the secret comes from. A file path is resolved later.
#[derive(Debug, Clone)]
pub(crate) struct CredentialDef {
    pub name: String,
    pub source: CredentialSourceDef,
    pub location: Location,
}

#[derive(Debug, Clone)]
pub(crate) enum CredentialSourceDef {
    Env(String),
    File(Item),
    Command(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefKind {
    Sandbox,
    PathSet,
    Credential,
}

#[derive(Debug, Clone)]
pub(crate) struct Reference {
    pub kind: RefKind,
    pub name: String,
    pub location: Location,
    pub key_path: String,
}

// --- key paths, rendered only when an error needs them --------------------------------------

#[derive(Clone, Copy)]
enum Seg<'p> {
    Root,
    Key(&'p str),
    Index(usize),
}

#[derive(Clone, Copy)]
struct KeyPath<'p> {
    parent: Option<&'p KeyPath<'p>>,
    seg: Seg<'p>,
}

const ROOT: KeyPath<'static> = KeyPath {
    parent: None,
    seg: Seg::Root,
};

impl<'p> KeyPath<'p> {
    fn key(&'p self, k: &'p str) -> KeyPath<'p> {
        KeyPath {
            parent: Some(self),
            seg: Seg::Key(k),
        }
    }

    fn index(&'p self, i: usize) -> KeyPath<'p> {
        KeyPath {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    fn segs(&self) -> Vec<Seg<'p>> {
        let mut segs = vec![self.seg];
        let mut cur = self.parent;
        while let Some(p) = cur {
            segs.push(p.seg);
            cur = p.parent;
        }
        segs.reverse();
        segs
    }

    /// `rules[3].tests.allow[0]`
    fn render(&self) -> String {
        let mut out = String::new();
        for seg in self.segs() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    if is_name(k) {
                        out.push_str(k);
                    } else {
                        out.push_str(&format!("{k:?}"));
                    }
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// `at the top level`, `in [defaults]`, `in [[rules]]`, `in [sandbox.workspace.fs]`
    fn table_name(&self) -> String {
        let keys: Vec<String> = self
            .segs()
            .iter()
            .filter_map(|s| match s {
                Seg::Key(k) if is_name(k) => Some((*k).to_string()),
                Seg::Key(k) => Some(format!("{k:?}")),
                _ => None,
            })
            .collect();
        if keys.is_empty() {
            "at the top level".to_string()
        } else if matches!(self.seg, Seg::Index(_)) {
            format!("in [[{}]]", keys.join("."))
        } else {
            format!("in [{}]", keys.join("."))
        }
    }
}

/// Names of sandbox presets and path sets: ASCII letters, digits, `-`, `_`.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The names of all `<path:NAME>` references inside a pattern.
pub(crate) fn pattern_path_refs(pattern: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = pattern;
    while let Some(i) = rest.find("<path:") {
        rest = &rest[i + "<path:".len()..];
        let Some(end) = rest.find('>') else {
            return Err("unterminated `<path:` reference (expected `<path:NAME>`)".into());
        };
        let name = &rest[..end];
        if !is_name(name) {
            return Err(format!("invalid path set name `{name}` in `<path:…>`"));
        }
        names.push(name);
        rest = &rest[end + 1..];
    }
    Ok(names)
}

// --- the decoder -------------------------------------------------------------------------------

pub(crate) fn decode(file: &str, doc: &Node<'_>) -> Result<Layer, ConfigError> {
    let d = Decoder { file };
    let mut layer = Layer::default();
    let Value::Table(entries) = &doc.value else {
        return Err(d.invalid(
            doc.pos,
            &ROOT,
            format!("a policy must be a table, found {}", doc.value.kind()),
            None,
        ));
    };
    for e in entries {
        let path = ROOT.key(&e.key);
        match &*e.key {
            "$schema" => {
                d.string(&e.value, &path)?;
            }
            "extends" => {
                for (i, item) in d.array(&e.value, &path)?.iter().enumerate() {
                    let p = path.index(i);
                    let s = d.string(item, &p)?;
                    if s.trim().is_empty() {
                        return Err(d.invalid(item.pos, &p, "empty `extends` entry".into(), None));
                    }
                    layer.extends.push((s.to_string(), d.loc(item.pos)));
                }
            }
            "defaults" => d.defaults(&e.value, &path, &mut layer)?,
            "audit" => d.audit(&e.value, &path, &mut layer)?,
            "control" => d.control(&e.value, &path, &mut layer)?,
            "undo" => d.undo(&e.value, &path, &mut layer)?,
            "paths" => {
                for set in d.table(&e.value, &path)? {
                    let p = path.key(&set.key);
                    d.check_name(set, &p, "path set")?;
                    let entries = d.items(&set.value, &p, false)?;
                    layer.paths.push(PathSetDef {
                        name: set.key.to_string(),
                        entries,
                    });
                }
            }
            "rules" => {
                let rules = d.array(&e.value, &path)?;
                layer.rules.reserve(rules.len());
                for (i, rule) in rules.iter().enumerate() {
                    d.rule(rule, &path.index(i), &mut layer)?;
                }
            }
            "sandbox" => {
                for preset in d.table(&e.value, &path)? {
                    let p = path.key(&preset.key);
                    d.check_name(preset, &p, "sandbox preset")?;
                    let def = d.preset(preset, &p, &mut layer)?;
                    layer.sandboxes.push(def);
                }
            }
            "tests" => {
                for (i, t) in d.array(&e.value, &path)?.iter().enumerate() {
                    let test = d.test(t, &path.index(i))?;
                    layer.tests.push(test);
                }
            }
            "credentials" => {
                for c in d.table(&e.value, &path)? {
                    let p = path.key(&c.key);
                    d.check_name(c, &p, "credential")?;
                    layer.credentials.push(d.credential(c, &p)?);
                }
            }
            _ => return Err(d.unknown(e, &ROOT, TOP_KEYS)),
        }
    }
    Ok(layer)
}

struct Decoder<'f> {
    file: &'f str,
}

impl Decoder<'_> {
    fn loc(&self, pos: Pos) -> Location {
        Location {
            file: self.file.to_string(),
            line: pos.line,
            col: pos.col,
        }
    }

    fn invalid(
        &self,
        pos: Pos,
        path: &KeyPath<'_>,
        message: String,
        hint: Option<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            location: self.loc(pos),
            key_path: path.render(),
            message,
            hint,
        }
    }

    fn unknown(&self, e: &Entry<'_>, table: &KeyPath<'_>, known: &[&str]) -> ConfigError {
        let mut hint = did_you_mean(&e.key, known.iter().copied());
        if hint.is_none() && known.len() <= 8 {
            let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            hint = Some(format!("expected one of {}", list.join(", ")));
        }
        self.invalid(
            e.key_pos,
            &table.key(&e.key),
            format!("unknown key `{}` {}", e.key, table.table_name()),
            hint,
        )
    }

    /// A value of the wrong type, named by its key path: `` `defaults.action`: expected a
    /// string, found an integer `` (the position alone does not say which key, e.g. on a line
    /// of dotted keys or inside an inline table).
    fn mismatch(&self, node: &Node<'_>, path: &KeyPath<'_>, expected: &str) -> ConfigError {
        let key = path.render();
        let what = if key.is_empty() { "the document".to_string() } else { format!("`{key}`") };
        self.invalid(
            node.pos,
            path,
            format!("{what}: expected {expected}, found {}", node.value.kind()),
            None,
        )
    }

    fn table<'n>(
        &self,
        node: &'n Node<'_>,
        path: &KeyPath<'_>,
    ) -> Result<&'n [Entry<'n>], ConfigError> {
        match &node.value {
            Value::Table(e) => Ok(e),
            _ => Err(self.mismatch(node, path, "a table")),
        }
    }

    fn array<'n>(
        &self,
        node: &'n Node<'_>,
        path: &KeyPath<'_>,
    ) -> Result<&'n [Node<'n>], ConfigError> {
        match &node.value {
            Value::Array(a) => Ok(a),
            _ => Err(self.mismatch(node, path, "an array")),
        }
    }

    fn string<'n>(&self, node: &'n Node<'_>, path: &KeyPath<'_>) -> Result<&'n str, ConfigError> {
        match &node.value {
            Value::Str(s) => Ok(s),
            _ => Err(self.mismatch(node, path, "a string")),
        }
    }

    fn bool(&self, node: &Node<'_>, path: &KeyPath<'_>) -> Result<bool, ConfigError> {
        match node.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.mismatch(node, path, "a boolean (true or false)")),
        }
    }

    fn env_names(&self, node: &Node<'_>, path: &KeyPath<'_>) -> Result<Vec<String>, ConfigError> {
        let items = self.array(node, path)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = path.index(i);
            let s = self.string(item, &p)?;
            if !is_env_name(s) {
                return Err(self.invalid(
                    item.pos,
                    &p,
                    format!("`{s}` is not an environment variable name"),
                    Some("use letters, digits and `_`, not starting with a digit".into()),
                ));
            }
            out.push(s.to_string());
        }
        Ok(out)
    }

    /// A list of paths; in sandbox lists (`refs_allowed`) an entry may be `<path:NAME>`.
    fn items(
        &self,
        node: &Node<'_>,
        path: &KeyPath<'_>,
        refs_allowed: bool,
    ) -> Result<Vec<Item>, ConfigError> {
        let nodes = self.array(node, path)?;
        let mut out = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let p = path.index(i);
            let text = self.string(n, &p)?;
            if text.is_empty() {
                return Err(self.invalid(n.pos, &p, "empty path".into(), None));
            }
            let item = Item {
                text: text.to_string(),
                location: self.loc(n.pos),
                key_path: p.render(),
            };
            if text.contains("<path:") {
                match item.path_ref() {
                    Some(name) if refs_allowed && is_name(name) => {}
                    Some(_) if refs_allowed => {
                        return Err(self.invalid(
                            n.pos,
                            &p,
                            format!("invalid path set reference `{text}`"),
                            None,
                        ));
                    }
                    _ if refs_allowed => {
                        return Err(self.invalid(
                            n.pos,
                            &p,
                            format!("`<path:NAME>` must be a whole entry, found `{text}`"),
                            Some("list the path set on its own, e.g. \"<path:secrets>\"".into()),
                        ));
                    }
                    _ => {
                        return Err(self.invalid(
                            n.pos,
                            &p,
                            "a path set cannot refer to another path set".into(),
                            Some("list the paths here directly".into()),
                        ));
                    }
                }
            }
            out.push(item);
        }
        Ok(out)
    }

    fn check_name(&self, e: &Entry<'_>, path: &KeyPath<'_>, what: &str) -> Result<(), ConfigError> {
        if is_name(&e.key) {
            Ok(())
        } else {
            Err(self.invalid(
                e.key_pos,
                path,
                format!("invalid {what} name `{}`", e.key),
                Some("use ASCII letters, digits, `-` and `_`".into()),
            ))
        }
    }

    fn action(&self, node: &Node<'_>, path: &KeyPath<'_>) -> Result<Action, ConfigError> {
        let s = self.string(node, path)?;
        Action::parse(s).ok_or_else(|| {
            self.invalid(
                node.pos,
                path,
                format!("invalid action `{s}`: expected `allow`, `ask` or `deny`"),
                did_you_mean(s, ["allow", "ask", "deny"]),
            )
        })
    }

    fn defaults(
        &self,
        node: &Node<'_>,
        path: &KeyPath<'_>,
        layer: &mut Layer,
    ) -> Result<(), ConfigError> {
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "action" => layer.defaults.action = Some(self.action(&e.value, &p)?),
                "sandbox" => {
                    let name = self.string(&e.value, &p)?;
                    layer.refs.push(Reference {
                        kind: RefKind::Sandbox,
                        name: name.to_string(),
                        location: self.loc(e.value.pos),
                        key_path: p.render(),
                    });
                    layer.defaults.sandbox = Some(name.to_string());
                }
                "on_parse_error" => {
                    let action = self.action(&e.value, &p)?;
                    if action == Action::Allow {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            "`on_parse_error` cannot be `allow`".into(),
                            Some("a command pinfold cannot parse cannot be judged; use `ask` or `deny`".into()),
                        ));
                    }
                    layer.defaults.on_parse_error = Some(action);
                }
                _ => return Err(self.unknown(e, path, DEFAULTS_KEYS)),
            }
        }
        Ok(())
    }

    fn audit(&self, node: &Node<'_>, path: &KeyPath<'_>, layer: &mut Layer) -> Result<(), ConfigError> {
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "enabled" => layer.audit.enabled = Some((self.bool(&e.value, &p)?, self.loc(e.value.pos))),
                "redact_env" => layer.audit.redact_env = self.env_names(&e.value, &p)?,
                _ => return Err(self.unknown(e, path, AUDIT_KEYS)),
            }
        }
        Ok(())
    }

    fn undo(&self, node: &Node<'_>, path: &KeyPath<'_>, layer: &mut Layer) -> Result<(), ConfigError> {
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "enabled" => layer.undo_enabled = Some(self.bool(&e.value, &p)?),
                _ => return Err(self.unknown(e, path, UNDO_KEYS)),
            }
        }
        Ok(())
    }

    fn control(&self, node: &Node<'_>, path: &KeyPath<'_>, layer: &mut Layer) -> Result<(), ConfigError> {
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "lift" => {
                    let items = self.array(&e.value, &p)?;
                    let mut lifted = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        let ip = p.index(i);
                        let text = self.string(item, &ip)?;
                        if text.is_empty() || text.contains(['*', '?', '[']) {
                            return Err(self.invalid(
                                item.pos,
                                &ip,
                                format!("`{text}` is not a path"),
                                Some("name one control file or directory, relative to the project root or `~/…`".into()),
                            ));
                        }
                        lifted.push(text.to_string());
                    }
                    layer.control_lift = Some((lifted, self.loc(e.value.pos)));
                }
                _ => return Err(self.unknown(e, path, CONTROL_KEYS)),
            }
        }
        Ok(())
    }

    fn rule(
        &self,
        node: &Node<'_>,
        path: &KeyPath<'_>,
        layer: &mut Layer,
    ) -> Result<(), ConfigError> {
        let entries = self.table(node, path)?;
        let mut action: Option<(Action, &Entry<'_>)> = None;
        let mut pattern = "";
        let mut message = None;
        let mut when = None;
        let mut fix = None;
        let mut sandbox: Option<&Entry<'_>> = None;
        let mut env = Vec::new();
        let mut tests = Vec::new();
        for e in entries {
            let p = path.key(&e.key);
            match &*e.key {
                "allow" | "ask" | "deny" => {
                    let this = Action::parse(&e.key).unwrap_or(Action::Deny);
                    if let Some((_, first)) = action {
                        return Err(self.invalid(
                            e.key_pos,
                            &p,
                            format!("a rule has exactly one action, but this one has both `{}` and `{}`", first.key, e.key),
                            Some("split it into two rules".into()),
                        ));
                    }
                    pattern = self.string(&e.value, &p)?;
                    if pattern.trim().is_empty() {
                        return Err(self.invalid(e.value.pos, &p, "empty pattern".into(), None));
                    }
                    if let Err(msg) = pattern_path_refs(pattern).map(|names| {
                        for name in names {
                            layer.refs.push(Reference {
                                kind: RefKind::PathSet,
                                name: name.to_string(),
                                location: self.loc(e.value.pos),
                                key_path: p.render(),
                            });
                        }
                    }) {
                        return Err(self.invalid(e.value.pos, &p, msg, None));
                    }
                    action = Some((this, e));
                }
                "message" => message = Some(self.string(&e.value, &p)?.to_string()),
                "fix" => fix = Some(self.string(&e.value, &p)?.to_string()),
                "when" => {
                    let text = self.string(&e.value, &p)?;
                    match super::When::parse(text) {
                        Some(w) => when = Some(w),
                        None => {
                            return Err(self.invalid(
                                e.value.pos,
                                &p,
                                format!("`{text}` is not a condition"),
                                Some("use `undo` (only where pinfold undo can take the command back), `no-undo` (only where it cannot) or `no-network` (only where the command's sandbox has no network)".into()),
                            ))
                        }
                    }
                }
                "sandbox" => {
                    self.string(&e.value, &p)?;
                    sandbox = Some(e);
                }
                "env" => env = self.env_names(&e.value, &p)?,
                "tests" => {
                    for t in self.table(&e.value, &p)? {
                        let tp = p.key(&t.key);
                        let Some(expect) = Action::parse(&t.key) else {
                            return Err(self.unknown(t, &p, RULE_TESTS_KEYS));
                        };
                        for (i, cmd) in self.array(&t.value, &tp)?.iter().enumerate() {
                            let command = self.string(cmd, &tp.index(i))?;
                            tests.push((expect, command.to_string(), self.loc(cmd.pos)));
                        }
                    }
                }
                _ => return Err(self.unknown(e, path, RULE_KEYS)),
            }
        }
        let Some((action, action_entry)) = action else {
            return Err(self.invalid(
                node.pos,
                path,
                "a rule needs an action: one of `allow`, `ask` or `deny` with a pattern".into(),
                Some("e.g. allow = \"git status *\"".into()),
            ));
        };
        let sandbox = match sandbox {
            Some(e) if action == Action::Deny => {
                return Err(self.invalid(
                    e.key_pos,
                    &path.key("sandbox"),
                    "`sandbox` on a deny rule: denied commands never run".into(),
                    Some("remove `sandbox`, or make the rule `allow` or `ask`".into()),
                ));
            }
            Some(e) => {
                let name = self.string(&e.value, &path.key("sandbox"))?;
                layer.refs.push(Reference {
                    kind: RefKind::Sandbox,
                    name: name.to_string(),
                    location: self.loc(e.value.pos),
                    key_path: path.key("sandbox").render(),
                });
                Some(name.to_string())
            }
            None => None,
        };
        layer.rules.push(RuleSpec {
            action,
            pattern: pattern.to_string(),
            location: self.loc(action_entry.value.pos),
            message,
            fix,
            sandbox,
            env,
            tests,
            when,
        });
        Ok(())
    }

    fn preset(
        &self,
        preset: &Entry<'_>,
        path: &KeyPath<'_>,
        layer: &mut Layer,
    ) -> Result<PresetDef, ConfigError> {
        let mut def = PresetDef {
            name: preset.key.to_string(),
            write_allow: Vec::new(),
            write_deny: Vec::new(),
            read_deny: Vec::new(),
            network_allow: false,
            network_hosts: Vec::new(),
            upstream_ca: Vec::new(),
            endpoints: Vec::new(),
            env_keep: Vec::new(),
            backend: None,
            container: Default::default(),
            container_at: None,
            location: self.loc(preset.key_pos),
        };
        for e in self.table(&preset.value, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "fs" => {
                    for f in self.table(&e.value, &p)? {
                        let fp = p.key(&f.key);
                        match &*f.key {
                            "write" => {
                                for w in self.table(&f.value, &fp)? {
                                    let wp = fp.key(&w.key);
                                    match &*w.key {
                                        "allow" => {
                                            def.write_allow = self.items(&w.value, &wp, true)?
                                        }
                                        "deny" => {
                                            def.write_deny = self.items(&w.value, &wp, true)?
                                        }
                                        _ => return Err(self.unknown(w, &fp, FS_WRITE_KEYS)),
                                    }
                                }
                            }
                            "read" => {
                                for r in self.table(&f.value, &fp)? {
                                    let rp = fp.key(&r.key);
                                    match &*r.key {
                                        "deny" => {
                                            def.read_deny = self.items(&r.value, &rp, true)?
                                        }
                                        _ => return Err(self.unknown(r, &fp, FS_READ_KEYS)),
                                    }
                                }
                            }
                            _ => return Err(self.unknown(f, &p, FS_KEYS)),
                        }
                    }
                }
                "network" => {
                    for n in self.table(&e.value, &p)? {
                        let np = p.key(&n.key);
                        match &*n.key {
                            "allow" => def.network_allow = self.bool(&n.value, &np)?,
                            "hosts" => def.network_hosts = self.hosts(&n.value, &np)?,
                            "upstream_ca" => {
                                // Path set references pass `items` so the check below can say why they are wrong here.
                                def.upstream_ca = self.items(&n.value, &np, true)?;
                                if let Some(item) = def.upstream_ca.iter().find(|i| i.text.contains("<path:")) {
                                    return Err(ConfigError::Invalid {
                                        location: item.location.clone(),
                                        key_path: item.key_path.clone(),
                                        message: "`upstream_ca` lists certificate files, not path sets".into(),
                                        hint: Some("write the path of a PEM file".into()),
                                    });
                                }
                            }
                            "endpoint" => {
                                for (i, ep) in self.array(&n.value, &np)?.iter().enumerate() {
                                    let ep = self.endpoint(ep, &np.index(i), layer)?;
                                    def.endpoints.push(ep);
                                }
                            }
                            _ => return Err(self.unknown(n, &p, NETWORK_KEYS)),
                        }
                    }
                }
                "backend" => {
                    let name = self.string(&e.value, &p)?;
                    if !crate::config::BACKENDS.contains(&name) {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("unknown backend `{name}`"),
                            Some(format!("use one of: {}", crate::config::BACKENDS.join(", "))),
                        ));
                    }
                    def.backend = Some(name.to_string());
                }
                "image" | "runtime" | "cpus" | "memory" | "pids" => {
                    self.container_key(e, &p, &mut def)?;
                    if def.container_at.is_none() {
                        def.container_at = Some((self.loc(e.key_pos), p.render()));
                    }
                }
                "env" => {
                    for n in self.table(&e.value, &p)? {
                        let np = p.key(&n.key);
                        match &*n.key {
                            "keep" => def.env_keep = self.env_names(&n.value, &np)?,
                            _ => return Err(self.unknown(n, &p, ENV_KEYS)),
                        }
                    }
                }
                _ => return Err(self.unknown(e, path, PRESET_KEYS)),
            }
        }
        // The container keys limit a container; on another backend they would be ignored.
        if let Some((location, key_path)) = &def.container_at
            && def.backend.as_deref() != Some("container")
        {
            return Err(ConfigError::Invalid {
                location: location.clone(),
                key_path: key_path.clone(),
                message: format!(
                    "`{}` applies to backend = \"container\" only; this preset runs on `{}`",
                    key_path.rsplit('.').next().unwrap_or(key_path),
                    def.backend.as_deref().unwrap_or("process")
                ),
                hint: Some("add backend = \"container\" to the preset, or remove the key".into()),
            });
        }
        // An endpoint never widens the network: its host must already be reachable.
        for ep in &def.endpoints {
            let reachable = def.network_allow
                && (def.network_hosts.is_empty() || def.network_hosts.iter().any(|h| h.covers(&ep.host)));
            if !reachable {
                let hint = if def.network_allow {
                    format!("add \"{}\" to `network.hosts`", ep.host)
                } else {
                    "set `network.allow = true` and list the host in `network.hosts`".to_string()
                };
                return Err(ConfigError::Invalid {
                    location: ep.location.clone(),
                    key_path: path.key("network").key("endpoint").render(),
                    message: format!("endpoint host `{}` is not reachable from this preset", ep.host),
                    hint: Some(hint),
                });
            }
        }
        Ok(def)
    }

    /// One of a preset's container keys, checked.
    fn container_key(&self, e: &Entry<'_>, p: &KeyPath<'_>, def: &mut PresetDef) -> Result<(), ConfigError> {
        let c = &mut def.container;
        match &*e.key {
            "image" => {
                let s = self.string(&e.value, p)?;
                if s.is_empty() || s.contains(char::is_whitespace) {
                    return Err(self.invalid(e.value.pos, p, format!("`{s}` is not an image name"), Some("write a name the engine knows, e.g. \"localhost/pinfold-busybox:1\", or an image ID".into())));
                }
                c.image = Some(s.to_string());
            }
            "runtime" => {
                let s = self.string(&e.value, p)?;
                if s.is_empty() || !s.chars().all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.')) {
                    return Err(self.invalid(e.value.pos, p, format!("`{s}` is not a runtime name"), Some("write the name the engine registered, e.g. \"runc\" or \"runsc\"".into())));
                }
                c.runtime = Some(s.to_string());
            }
            "cpus" => {
                let v = match e.value.value {
                    Value::Int(Some(i)) => i as f64,
                    Value::Float(f) => f,
                    _ => return Err(self.mismatch(&e.value, p, "a number of CPUs")),
                };
                if !(v > 0.0 && v <= 4096.0) {
                    return Err(self.invalid(e.value.pos, p, format!("{v} CPUs is out of range"), Some("give a number above 0, such as 0.5 or 2".into())));
                }
                c.cpus = Some(v);
            }
            "memory" => {
                let bytes = match &e.value.value {
                    Value::Int(Some(i)) => u64::try_from(*i).map_err(|_| self.invalid(e.value.pos, p, format!("{i} bytes is out of range"), None))?,
                    Value::Str(s) => crate::config::parse_memory(s).map_err(|why| {
                        self.invalid(e.value.pos, p, format!("invalid memory size: {why}"), Some("write bytes or a number with a unit: \"512MiB\", \"2GiB\"".into()))
                    })?,
                    _ => return Err(self.mismatch(&e.value, p, "a size (\"512MiB\") or a number of bytes")),
                };
                if bytes < MIN_MEMORY {
                    return Err(self.invalid(e.value.pos, p, format!("{bytes} bytes is below the least a container may have (6 MiB)"), Some("give at least \"6MiB\"".into())));
                }
                c.memory = Some(bytes);
            }
            "pids" => {
                let n = match e.value.value {
                    // The engine's init (catatonit, docker-init) is one of them: with 1 it
                    // cannot start the command at all.
                    Value::Int(Some(i)) => u32::try_from(i).ok().filter(|n| *n >= 2),
                    Value::Int(None) => None,
                    _ => return Err(self.mismatch(&e.value, p, "a number of processes")),
                };
                let Some(n) = n else {
                    return Err(self.invalid(e.value.pos, p, "`pids` is out of range".into(), Some("give a whole number from 2 (the engine's init is one of them) to 4294967295".into())));
                };
                c.pids = Some(n);
            }
            _ => unreachable!("container_key is called for the container keys only"),
        }
        Ok(())
    }

    /// `network.hosts`: each entry a [`HostPattern`], no duplicates.
    fn hosts(&self, node: &Node<'_>, path: &KeyPath<'_>) -> Result<Vec<HostPattern>, ConfigError> {
        let items = self.array(node, path)?;
        let mut out: Vec<HostPattern> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = path.index(i);
            let text = self.string(item, &p)?;
            let pattern = HostPattern::parse(text)
                .map_err(|e| self.invalid(item.pos, &p, format!("invalid host: {e}"), e.hint().map(str::to_string)))?;
            if out.contains(&pattern) {
                return Err(self.invalid(item.pos, &p, format!("`{text}` is listed twice"), None));
            }
            out.push(pattern);
        }
        Ok(out)
    }

    fn endpoint(
        &self,
        node: &Node<'_>,
        path: &KeyPath<'_>,
        layer: &mut Layer,
    ) -> Result<EndpointDef, ConfigError> {
        let mut host = None;
        let mut credential = None;
        let mut header = None;
        let mut format = None;
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "host" => {
                    let text = self.string(&e.value, &p)?;
                    let pattern = HostPattern::parse(text).map_err(|err| {
                        self.invalid(e.value.pos, &p, format!("invalid host: {err}"), err.hint().map(str::to_string))
                    })?;
                    if !pattern.is_exact() {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("an endpoint names one host, not `{text}`"),
                            Some("a credential is sent only to the exact host it is for; list each host as its own endpoint".into()),
                        ));
                    }
                    host = Some(pattern);
                }
                "credential" => {
                    let name = self.string(&e.value, &p)?;
                    layer.refs.push(Reference {
                        kind: RefKind::Credential,
                        name: name.to_string(),
                        location: self.loc(e.value.pos),
                        key_path: p.render(),
                    });
                    credential = Some(name.to_string());
                }
                "header" => {
                    let name = self.string(&e.value, &p)?;
                    let token = !name.is_empty()
                        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                    if !token {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("`{name}` is not an HTTP header name"),
                            Some("e.g. \"Authorization\" or \"X-Api-Key\"".into()),
                        ));
                    }
                    if FORBIDDEN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("`{name}` cannot carry a credential: it frames or routes the request"),
                            Some("use the header the API reads the secret from, e.g. \"Authorization\"".into()),
                        ));
                    }
                    header = Some(name.to_string());
                }
                "format" => {
                    let f = self.string(&e.value, &p)?;
                    if f.matches("{}").count() != 1 {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("`format` must contain `{{}}` exactly once, found {} in `{f}`", f.matches("{}").count()),
                            Some("`{}` is where the secret goes, e.g. \"Bearer {}\"".into()),
                        ));
                    }
                    if f.bytes().any(|b| b.is_ascii_control()) {
                        return Err(self.invalid(e.value.pos, &p, "`format` contains a control character".into(), None));
                    }
                    format = Some(f.to_string());
                }
                _ => return Err(self.unknown(e, path, ENDPOINT_KEYS)),
            }
        }
        let missing = |key: &str| {
            self.invalid(node.pos, path, format!("endpoint is missing `{key}`"), None)
        };
        Ok(EndpointDef {
            host: host.ok_or_else(|| missing("host"))?,
            credential: credential.ok_or_else(|| missing("credential"))?,
            header: header.unwrap_or_else(|| "Authorization".into()),
            format: format.unwrap_or_else(|| "Bearer {}".into()),
            location: self.loc(node.pos),
        })
    }

    fn credential(&self, entry: &Entry<'_>, path: &KeyPath<'_>) -> Result<CredentialDef, ConfigError> {
        let mut source: Option<(CredentialSourceDef, &Entry<'_>)> = None;
        for e in self.table(&entry.value, path)? {
            let p = path.key(&e.key);
            let this = match &*e.key {
                "env" => {
                    let name = self.string(&e.value, &p)?;
                    if !is_env_name(name) {
                        return Err(self.invalid(
                            e.value.pos,
                            &p,
                            format!("`{name}` is not an environment variable name"),
                            Some("use letters, digits and `_`, not starting with a digit".into()),
                        ));
                    }
                    CredentialSourceDef::Env(name.to_string())
                }
                "file" => {
                    let text = self.string(&e.value, &p)?;
                    if text.is_empty() || text.contains("<path:") {
                        return Err(self.invalid(e.value.pos, &p, "`file` must be a path".into(), None));
                    }
                    CredentialSourceDef::File(Item {
                        text: text.to_string(),
                        location: self.loc(e.value.pos),
                        key_path: p.render(),
                    })
                }
                "command" => {
                    let cmd = self.string(&e.value, &p)?;
                    if cmd.trim().is_empty() {
                        return Err(self.invalid(e.value.pos, &p, "empty `command`".into(), None));
                    }
                    CredentialSourceDef::Command(cmd.to_string())
                }
                _ => return Err(self.unknown(e, path, CREDENTIAL_KEYS)),
            };
            if let Some((_, first)) = &source {
                return Err(self.invalid(
                    e.key_pos,
                    &p,
                    format!("a credential has exactly one source, but this one has both `{}` and `{}`", first.key, e.key),
                    Some("keep one of `env`, `file` or `command`".into()),
                ));
            }
            source = Some((this, e));
        }
        let Some((source, _)) = source else {
            return Err(self.invalid(
                entry.key_pos,
                path,
                format!("credential `{}` has no source", entry.key),
                Some("add one of `env = \"VAR\"`, `file = \"path\"` or `command = \"…\"`".into()),
            ));
        };
        Ok(CredentialDef {
            name: entry.key.to_string(),
            source,
            location: self.loc(entry.key_pos),
        })
    }

    fn test(&self, node: &Node<'_>, path: &KeyPath<'_>) -> Result<TestCase, ConfigError> {
        let mut command = None;
        let mut expect = None;
        let mut cwd = None;
        for e in self.table(node, path)? {
            let p = path.key(&e.key);
            match &*e.key {
                "command" => command = Some(self.string(&e.value, &p)?.to_string()),
                "expect" => expect = Some(self.action(&e.value, &p)?),
                "cwd" => cwd = Some(self.string(&e.value, &p)?.to_string()),
                _ => return Err(self.unknown(e, path, TEST_KEYS)),
            }
        }
        let missing =
            |key: &str| self.invalid(node.pos, path, format!("test is missing `{key}`"), None);
        Ok(TestCase {
            command: command.ok_or_else(|| missing("command"))?,
            expect: expect.ok_or_else(|| missing("expect"))?,
            cwd,
            location: self.loc(node.pos),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_refs() {
        assert_eq!(
            pattern_path_refs("cat <path:secrets> *").unwrap(),
            ["secrets"]
        );
        assert_eq!(
            pattern_path_refs("cp <path:a> <path:b-2>").unwrap(),
            ["a", "b-2"]
        );
        assert!(pattern_path_refs("cat <path:oops").is_err());
        assert!(pattern_path_refs("cat <path:a b>").is_err());
        assert!(pattern_path_refs("git status").unwrap().is_empty());
    }

    #[test]
    fn key_path_rendering() {
        let r = ROOT.key("rules");
        let i = r.index(3);
        let t = i.key("tests");
        assert_eq!(t.render(), "rules[3].tests");
        assert_eq!(i.table_name(), "in [[rules]]");
        assert_eq!(t.table_name(), "in [rules.tests]");
        assert_eq!(ROOT.table_name(), "at the top level");
        let s = ROOT.key("sandbox");
        let w = s.key("my box");
        assert_eq!(w.render(), "sandbox.\"my box\"");
    }
}
