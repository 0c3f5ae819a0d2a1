//! The JSON Schema of a policy file, for editors and `pinfold config schema`.
//!
//! These types exist only to describe the format; loading goes through `decode`. A test below
//! checks that both agree on the keys of every table.

use std::collections::BTreeMap;

use schemars::JsonSchema;

use super::Action;

/// A pinfold policy: rules that allow, ask about or deny shell commands, and the sandbox
/// presets allowed commands run in.
#[derive(JsonSchema)]
#[schemars(title = "pinfold policy", deny_unknown_fields)]
#[allow(dead_code)]
struct PolicyFile {
    /// URL or path of this schema, for editors; ignored by pinfold.
    #[serde(rename = "$schema", default)]
    schema: String,
    /// Policies loaded before this one: `pinfold:NAME` for an embedded preset, or a path
    /// relative to this file.
    #[serde(default)]
    extends: Vec<String>,
    #[serde(default)]
    defaults: DefaultsFile,
    /// Named lists of paths or globs, used as `<path:NAME>` in sandbox lists and patterns.
    #[serde(default)]
    paths: BTreeMap<String, Vec<String>>,
    /// Rules, in order.
    #[serde(default)]
    rules: Vec<RuleFile>,
    /// Named sandbox presets.
    #[serde(default)]
    sandbox: BTreeMap<String, SandboxFile>,
    /// Commands and the verdict the whole policy should give them.
    #[serde(default)]
    tests: Vec<TestFile>,
    #[serde(default)]
    audit: AuditFile,
    #[serde(default)]
    control: ControlFile,
    #[serde(default)]
    undo: UndoFile,
    /// Named secrets the egress proxy can inject for an endpoint. Only the user's own
    /// configuration or a `-c` file may define them, not a project file.
    #[serde(default)]
    credentials: BTreeMap<String, CredentialFile>,
}

/// Where a secret is read: exactly one of `env`, `file` or `command`.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, extend("oneOf" = [
    {"required": ["env"]}, {"required": ["file"]}, {"required": ["command"]}
]))]
#[allow(dead_code)]
struct CredentialFile {
    /// An environment variable of pinfold's own process.
    #[serde(default)]
    env: String,
    /// A file holding the secret; relative to the project root, `~/…` from home.
    #[serde(default)]
    file: String,
    /// A command run outside the sandbox; its standard output is the secret.
    #[serde(default)]
    command: String,
}

/// Control files: files programs outside the sandbox run or obey later (agent settings, git's
/// own files, editor tasks, commit hooks), read-only to sandboxed commands and refused to the
/// agent's file tools.
#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct ControlFile {
    /// Control files or directories commands and the agent's file tools may write after all:
    /// relative to the project root, or `~/…`. Only the user's configuration or a `-c` file may
    /// lift one, not a project file.
    #[serde(default)]
    lift: Vec<String>,
}

/// Undo: what sandboxed commands change in a git project is kept for `pinfold undo`.
#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct UndoFile {
    /// Keep what sandboxed commands change (default true). Off, commands that destroy broadly
    /// ask, as they do outside a git repository.
    #[serde(default)]
    enabled: Option<bool>,
}

/// The audit ledger: whether decisions are recorded, and which secrets to redact there.
#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct AuditFile {
    /// Record every check, hook decision and exec in the ledger (default true). Only the
    /// user's configuration or a `-c` file may turn it off, not a project file.
    #[serde(default)]
    enabled: Option<bool>,
    /// Environment variables whose values are secrets: redacted wherever they appear.
    #[serde(default)]
    redact_env: Vec<String>,
}

/// Settings for commands no rule decides.
#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct DefaultsFile {
    /// Verdict for commands no rule matches (default `ask`).
    #[serde(default)]
    action: Option<Action>,
    /// Sandbox preset for allowed commands whose rule names none (default `workspace` when
    /// that preset exists).
    #[serde(default)]
    sandbox: Option<String>,
    /// Verdict for commands that cannot be parsed: `ask` (default) or `deny`.
    #[serde(default)]
    on_parse_error: Option<OnParseError>,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum OnParseError {
    Ask,
    Deny,
}

/// A rule: exactly one of `allow`, `ask`, `deny`, whose value is the pattern.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, extend("oneOf" = [
    {"required": ["allow"]}, {"required": ["ask"]}, {"required": ["deny"]}
]))]
#[allow(dead_code)]
struct RuleFile {
    /// Pattern of commands to allow.
    #[serde(default)]
    #[schemars(length(min = 1))]
    allow: String,
    /// Pattern of commands to ask about.
    #[serde(default)]
    #[schemars(length(min = 1))]
    ask: String,
    /// Pattern of commands to deny.
    #[serde(default)]
    #[schemars(length(min = 1))]
    deny: String,
    /// Shown when the rule applies.
    #[serde(default)]
    message: String,
    /// Suggested alternative, shown with a denial.
    #[serde(default)]
    fix: String,
    /// Sandbox preset for commands this rule allows (not on deny rules).
    #[serde(default)]
    sandbox: String,
    /// Environment variables this rule permits as `VAR=value` prefixes.
    #[serde(default)]
    env: Vec<String>,
    /// Example commands and the verdict this rule should give.
    #[serde(default)]
    tests: RuleTestsFile,
    /// Where the rule applies: `undo` only where `pinfold undo` can take the command back (a
    /// git project with undo on, the command in a sandbox), `no-undo` only where it cannot,
    /// `no-network` only where the command's sandbox has no network.
    #[serde(default)]
    #[schemars(regex(pattern = "^(undo|no-undo|no-network)$"))]
    when: String,
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct RuleTestsFile {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// A sandbox preset. Paths: relative to the project root, `~/…` from home, globs allowed,
/// `<path:NAME>` for a path set.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct SandboxFile {
    /// Where the preset's commands run: `process` (namespaces, Landlock, seccomp on the host
    /// kernel; the default), `gvisor` (gVisor's runsc) or `container` (Docker or Podman).
    /// See docs/backends.md.
    #[serde(default)]
    backend: BackendName,
    /// With `backend = "container"`: the image the commands run in (a name or ID the engine
    /// knows).
    image: Option<String>,
    /// With `backend = "container"`: the OCI runtime (`runc` by default, `runsc` for gVisor);
    /// it must be registered with the engine.
    runtime: Option<String>,
    /// With `backend = "container"`: CPUs the container may use (`1.5`).
    cpus: Option<f64>,
    /// With `backend = "container"`: the memory limit, bytes or a string such as `"512MiB"`.
    memory: Option<MemorySize>,
    /// With `backend = "container"`: most processes and threads at once.
    #[schemars(range(min = 1))]
    pids: Option<u32>,
    #[serde(default)]
    fs: FsFile,
    #[serde(default)]
    network: NetworkFile,
    #[serde(default)]
    env: EnvFile,
}

/// The name of a backend: `process`, `gvisor` or `container` (docs/backends.md).
#[derive(JsonSchema, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum BackendName {
    #[default]
    Process,
    Gvisor,
    Container,
}

/// A memory size: bytes, or a number with a unit (`"512MiB"`, `"2GiB"`, `"512M"`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum MemorySize {
    Bytes(u64),
    Text(String),
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct FsFile {
    #[serde(default)]
    write: FsWriteFile,
    #[serde(default)]
    read: FsReadFile,
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct FsWriteFile {
    /// Writable paths.
    #[serde(default)]
    allow: Vec<String>,
    /// Paths kept read-only even inside writable ones.
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct FsReadFile {
    /// Paths that cannot be read.
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct NetworkFile {
    /// Whether the sandboxed command may use the network (default false).
    #[serde(default)]
    allow: bool,
    /// With `allow`, the only hosts reachable (through the egress proxy): `example.com`,
    /// `*.example.com` (subdomains, not the apex), `example.com:8443`, `127.0.0.1:8443`,
    /// `[::1]:443`. Without a port: 80 and 443. Empty: the full network.
    #[serde(default)]
    hosts: Vec<String>,
    /// Extra root certificates (PEM files) the proxy trusts for upstream servers.
    #[serde(default)]
    upstream_ca: Vec<String>,
    /// Hosts the proxy injects a credential for.
    #[serde(default)]
    endpoint: Vec<EndpointFile>,
}

/// A host and the credential the proxy adds to requests for it.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct EndpointFile {
    /// One exact host, optionally with a port; it must also be reachable (`hosts`).
    host: String,
    /// The name of a `[credentials.NAME]` table.
    credential: String,
    /// The header to set, replacing any value sent (default `Authorization`).
    #[serde(default)]
    header: Option<String>,
    /// The header value; `{}` (exactly once) is the secret (default `Bearer {}`).
    #[serde(default)]
    format: Option<String>,
}

#[derive(JsonSchema, Default)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct EnvFile {
    /// Environment variables passed into the sandbox.
    #[serde(default)]
    keep: Vec<String>,
}

/// A command and the verdict the policy should give it.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
struct TestFile {
    command: String,
    expect: Action,
    /// Working directory to judge the command in.
    #[serde(default)]
    cwd: Option<String>,
}

/// The JSON Schema (draft 2020-12) of a policy file.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(PolicyFile).to_value()
}

#[cfg(test)]
mod tests {
    use super::super::decode::*;
    use super::*;

    fn keys(schema: &serde_json::Value) -> Vec<String> {
        let mut k: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    }

    fn sorted(k: &[&str]) -> Vec<String> {
        let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn schema_and_decoder_agree_on_keys() {
        let s = json_schema();
        let def = |name: &str| s["$defs"][name].clone();
        assert_eq!(keys(&s), sorted(TOP_KEYS));
        for (name, known) in [
            ("DefaultsFile", DEFAULTS_KEYS),
            ("RuleFile", RULE_KEYS),
            ("RuleTestsFile", RULE_TESTS_KEYS),
            ("SandboxFile", PRESET_KEYS),
            ("FsFile", FS_KEYS),
            ("FsWriteFile", FS_WRITE_KEYS),
            ("FsReadFile", FS_READ_KEYS),
            ("NetworkFile", NETWORK_KEYS),
            ("EnvFile", ENV_KEYS),
            ("TestFile", TEST_KEYS),
            ("AuditFile", AUDIT_KEYS),
            ("ControlFile", CONTROL_KEYS),
            ("EndpointFile", ENDPOINT_KEYS),
            ("CredentialFile", CREDENTIAL_KEYS),
        ] {
            assert_eq!(keys(&def(name)), sorted(known), "{name}");
            assert_eq!(def(name)["additionalProperties"], false, "{name}");
        }
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(def("RuleFile")["oneOf"].as_array().unwrap().len(), 3);
        assert_eq!(def("CredentialFile")["oneOf"].as_array().unwrap().len(), 3);
    }
}
