//! End-to-end tests of loading: validation messages, formats, layers, extends, paths.

use std::path::{Path, PathBuf};

use super::load::resolve_path;
use super::*;

fn opts(cwd: &Path) -> LoadOptions {
    LoadOptions {
        explicit: None,
        cwd: cwd.to_path_buf(),
        home: Some("/home/me".into()),
        xdg_config_home: None,
    }
}

fn toml(text: &str) -> Result<Config, ConfigError> {
    load_str(
        "pinfold.toml",
        text,
        Format::Toml,
        &opts(Path::new("/proj")),
    )
}

/// (line, col, message, hint) of an `Invalid` error.
fn invalid(r: Result<Config, ConfigError>) -> (u32, u32, String, Option<String>) {
    match r {
        Err(ConfigError::Invalid {
            location,
            message,
            hint,
            ..
        }) => (location.line, location.col, message, hint),
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn patterns(c: &Config) -> Vec<&str> {
    c.rules.iter().map(|r| r.pattern.as_str()).collect()
}

// --- validation -------------------------------------------------------------------------------

#[test]
fn unknown_key_in_rule_with_hint() {
    let (l, c, m, h) = invalid(toml("[[rules]]\nallow = 'ls'\n\n[[rules]]\n  alow = 'x'\n"));
    assert_eq!((l, c), (5, 3));
    assert_eq!(m, "unknown key `alow` in [[rules]]");
    assert_eq!(h.as_deref(), Some("did you mean `allow`?"));
}

#[test]
fn unknown_key_without_close_match_lists_the_keys() {
    let (l, c, m, h) = invalid(toml("[defaults]\nzzz = 1\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 1, "unknown key `zzz` in [defaults]")
    );
    assert_eq!(
        h.as_deref(),
        Some("expected one of `action`, `sandbox`, `on_parse_error`")
    );
}

#[test]
fn unknown_key_deep_in_a_sandbox() {
    let (l, c, m, h) = invalid(toml("[sandbox.w]\nfs.wrte.allow = ['.']\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 4, "unknown key `wrte` in [sandbox.w.fs]")
    );
    assert_eq!(h.as_deref(), Some("did you mean `write`?"));
    let err = toml("[sandbox.w]\nfs.wrte.allow = ['.']\n").unwrap_err();
    assert_eq!(err.key_path(), Some("sandbox.w.fs.wrte"));
}

#[test]
fn wrong_types() {
    let (l, c, m, _) = invalid(toml("[sandbox.w]\nnetwork.allow = 'yes'\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 17, "`sandbox.w.network.allow`: expected a boolean (true or false), found a string")
    );
    let (l, c, m, _) = invalid(toml("rules = 3\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (1, 9, "`rules`: expected an array, found an integer")
    );
    let (l, c, m, _) = invalid(toml("[[rules]]\nallow = ['ls']\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 9, "`rules[0].allow`: expected a string, found an array")
    );
}

/// A value of the wrong type is named by its key path, in every format, at its own position,
/// and the rendered error is `file:line:col: `key`: expected …, found …`.
#[test]
fn wrong_types_name_the_key_path_in_every_format() {
    let o = opts(Path::new("/proj"));
    // (file, format, text, line, col, message)
    let cases: &[(&str, Format, &str, u32, u32, &str)] = &[
        ("bad.toml", Format::Toml, "[defaults]\naction = 3\n", 2, 10, "`defaults.action`: expected a string, found an integer"),
        ("bad.yaml", Format::Yaml, "defaults:\n  action: 3\n", 2, 11, "`defaults.action`: expected a string, found an integer"),
        ("bad.json", Format::Json, "{\"defaults\": {\n  \"action\": 3}}\n", 2, 13, "`defaults.action`: expected a string, found an integer"),
        (
            "bad.toml",
            Format::Toml,
            "[[rules]]\nallow = 'ls'\n[[rules]]\ndeny = 'rm'\n[[rules]]\nask = 'git push'\nsandbox = false\n",
            7,
            11,
            "`rules[2].sandbox`: expected a string, found a boolean",
        ),
        (
            "bad.yaml",
            Format::Yaml,
            "rules:\n  - allow: ls\n  - deny: rm\n  - ask: git push\n    sandbox: false\n",
            5,
            14,
            "`rules[2].sandbox`: expected a string, found a boolean",
        ),
        (
            "bad.json",
            Format::Json,
            "{\"rules\": [{\"allow\": \"ls\"}, {\"deny\": \"rm\"},\n  {\"ask\": \"git push\", \"sandbox\": false}]}",
            2,
            34,
            "`rules[2].sandbox`: expected a string, found a boolean",
        ),
        ("bad.toml", Format::Toml, "[sandbox.workspace]\nfs.write.allow = '.'\n", 2, 18, "`sandbox.workspace.fs.write.allow`: expected an array, found a string"),
        (
            "bad.yaml",
            Format::Yaml,
            "sandbox:\n  workspace:\n    fs:\n      write:\n        allow: .\n",
            5,
            16,
            "`sandbox.workspace.fs.write.allow`: expected an array, found a string",
        ),
        (
            "bad.json",
            Format::Json,
            "{\"sandbox\": {\"workspace\": {\"fs\": {\"write\": {\"allow\": \".\"}}}}}",
            1,
            54,
            "`sandbox.workspace.fs.write.allow`: expected an array, found a string",
        ),
        ("bad.toml", Format::Toml, "audit = { enabled = 'yes' }\n", 1, 21, "`audit.enabled`: expected a boolean (true or false), found a string"),
    ];
    for (file, format, text, line, col, message) in cases {
        let err = load_str(file, text, *format, &o).unwrap_err();
        assert_eq!(err.to_string(), format!("{file}:{line}:{col}: {message}"), "{text}");
    }
}

#[test]
fn duplicate_keys_keep_the_parsers_location() {
    let (l, c, m, _) = invalid(toml("[defaults]\naction = 'ask'\naction = 'deny'\n"));
    assert_eq!((l, c, m.as_str()), (3, 1, "duplicate key `action`"));
    let yaml = load_str(
        "p.yaml",
        "defaults:\n  action: ask\n  action: deny\n",
        Format::Yaml,
        &opts(Path::new("/p")),
    );
    let (l, c, m, _) = invalid(yaml);
    assert_eq!((l, c), (3, 3));
    assert!(m.starts_with("duplicate mapping key: action"), "{m}");
    let json = load_str(
        "p.json",
        "{\"tests\": [],\n \"tests\": []}",
        Format::Json,
        &opts(Path::new("/p")),
    );
    assert_eq!(invalid(json), (2, 2, "duplicate key `tests`".into(), None));
}

#[test]
fn rule_with_two_actions_or_none() {
    let (l, c, m, h) = invalid(toml("[[rules]]\nallow = 'ls'\ndeny = 'ls -R'\n"));
    assert_eq!((l, c), (3, 1));
    assert_eq!(
        m,
        "a rule has exactly one action, but this one has both `allow` and `deny`"
    );
    assert_eq!(h.as_deref(), Some("split it into two rules"));
    let (l, c, m, _) = invalid(toml(
        "[[rules]]\nallow = 'ls'\n\n[[rules]]\nmessage = 'hi'\n",
    ));
    assert_eq!((l, c), (4, 1));
    assert!(m.starts_with("a rule needs an action"), "{m}");
}

#[test]
fn sandbox_on_deny_rule() {
    let (l, c, m, h) = invalid(toml("[[rules]]\ndeny = 'rm *'\nsandbox = 'workspace'\n"));
    assert_eq!((l, c), (3, 1));
    assert_eq!(m, "`sandbox` on a deny rule: denied commands never run");
    assert!(h.is_some());
}

#[test]
fn undefined_sandbox_presets() {
    let text = "[[rules]]\nallow = 'make'\nsandbox = 'workspce'\n\n[sandbox.workspace]\n";
    let (l, c, m, h) = invalid(toml(text));
    assert_eq!(
        (l, c, m.as_str()),
        (3, 11, "undefined sandbox preset `workspce`")
    );
    assert_eq!(h.as_deref(), Some("did you mean `workspace`?"));
    let (l, c, m, h) = invalid(toml("[defaults]\nsandbox = 'box'\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 11, "undefined sandbox preset `box`")
    );
    assert_eq!(h.as_deref(), Some("no sandbox presets are defined"));
}

#[test]
fn undefined_path_sets() {
    let text =
        "[paths]\nsecrets = ['~/.ssh']\n[sandbox.w]\nfs.read.deny = ['a', '<path:secret>']\n";
    let (l, c, m, h) = invalid(toml(text));
    assert_eq!((l, c, m.as_str()), (4, 22, "undefined path set `secret`"));
    assert_eq!(h.as_deref(), Some("did you mean `secrets`?"));
    let text = "[[rules]]\ndeny = 'cat <path:keys> *'\n";
    let (l, c, m, _) = invalid(toml(text));
    assert_eq!((l, c, m.as_str()), (2, 8, "undefined path set `keys`"));
    let (l, c, m, _) = invalid(toml("[[rules]]\ndeny = 'cat <path:keys *'\n"));
    assert_eq!((l, c), (2, 8));
    assert!(m.starts_with("unterminated `<path:`"), "{m}");
    let (_, _, m, _) = invalid(toml("[sandbox.w]\nfs.read.deny = ['<path:a>/x']\n"));
    assert_eq!(m, "`<path:NAME>` must be a whole entry, found `<path:a>/x`");
}

#[test]
fn on_parse_error_cannot_be_allow() {
    let (l, c, m, h) = invalid(toml("[defaults]\non_parse_error = \"allow\"\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (2, 18, "`on_parse_error` cannot be `allow`")
    );
    assert!(h.unwrap().contains("`ask` or `deny`"));
}

#[test]
fn invalid_action_value_with_hint() {
    let (l, c, m, h) = invalid(toml("[defaults]\naction = 'dney'\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (
            2,
            10,
            "invalid action `dney`: expected `allow`, `ask` or `deny`"
        )
    );
    assert_eq!(h.as_deref(), Some("did you mean `deny`?"));
}

#[test]
fn empty_pattern() {
    let (l, c, m, _) = invalid(toml("[[rules]]\nask = '  '\n"));
    assert_eq!((l, c, m.as_str()), (2, 7, "empty pattern"));
}

#[test]
fn bad_names() {
    let (_, _, m, _) = invalid(toml("[[rules]]\nallow = 'x'\nenv = ['GIT PAGER']\n"));
    assert_eq!(m, "`GIT PAGER` is not an environment variable name");
    let (_, _, m, _) = invalid(toml("[sandbox.'a b']\n"));
    assert_eq!(m, "invalid sandbox preset name `a b`");
    let (_, _, m, _) = invalid(toml("[[tests]]\ncommand = 'ls'\n"));
    assert_eq!(m, "test is missing `expect`");
}

#[test]
fn syntax_errors_have_positions() {
    let (l, c, m, _) = invalid(toml("[[rules]]\nallow = 'x\n"));
    assert_eq!((l, c), (2, 11), "{m}");
    let r = load_str(
        "p.yaml",
        "rules:\n  - allow: [x\n",
        Format::Yaml,
        &opts(Path::new("/p")),
    );
    let (l, _, m, _) = invalid(r);
    assert_eq!(l, 2, "{m}");
    assert!(!m.contains("at line"), "{m}");
    let r = load_str(
        "p.json",
        "{\"rules\": [}",
        Format::Json,
        &opts(Path::new("/p")),
    );
    assert_eq!(invalid(r).0, 1);
}

#[test]
fn display_of_errors() {
    let err = toml("[[rules]]\nalow = 'x'\n").unwrap_err();
    assert_eq!(err.to_string(), "pinfold.toml:2:1: unknown key `alow` in [[rules]]");
    assert_eq!(err.location().unwrap().to_string(), "pinfold.toml:2:1");
    assert_eq!(err.hint(), Some("did you mean `allow`?"));
}

// --- formats -----------------------------------------------------------------------------------

// address-literal: never connected (configuration parsed only)
const TOML_POLICY: &str = r#"
[defaults]
action = "deny"

[paths]
secrets = ["~/.ssh", ".env*"]

[[rules]]
allow = "git status *"
env = ["GIT_PAGER"]
tests = { allow = ["git status"] }

[[rules]]
ask = "git push *"
sandbox = "workspace"

[sandbox.workspace]
fs.write.allow = ["."]
fs.read.deny = ["<path:secrets>"]
network.hosts = ["crates.io"]
env.keep = ["CARGO_HOME"]

[[tests]]
command = "git status"
expect = "allow"
cwd = "sub"
"#;

// address-literal: never connected (configuration parsed only)
const YAML_POLICY: &str = r#"
defaults:
  action: deny
paths:
  secrets: ["~/.ssh", ".env*"]
rules:
  - allow: git status *
    env: [GIT_PAGER]
    tests: {allow: ["git status"]}
  - ask: git push *
    sandbox: workspace
sandbox:
  workspace:
    fs: {write: {allow: ['.']}, read: {deny: ["<path:secrets>"]}}
    network: {hosts: [crates.io]}
    env: {keep: [CARGO_HOME]}
tests:
  - command: git status
    expect: allow
    cwd: sub
"#;

// address-literal: never connected (configuration parsed only)
const JSON_POLICY: &str = r#"{
  "$schema": "https://example.invalid/pinfold.schema.json",
  "defaults": {"action": "deny"},
  "paths": {"secrets": ["~/.ssh", ".env*"]},
  "rules": [
    {"allow": "git status *", "env": ["GIT_PAGER"], "tests": {"allow": ["git status"]}},
    {"ask": "git push *", "sandbox": "workspace"}
  ],
  "sandbox": {"workspace": {
    "fs": {"write": {"allow": ["."]}, "read": {"deny": ["<path:secrets>"]}},
    "network": {"hosts": ["crates.io"]},
    "env": {"keep": ["CARGO_HOME"]}
  }},
  "tests": [{"command": "git status", "expect": "allow", "cwd": "sub"}]
}"#;

/// The configuration without locations, to compare formats.
fn shape(c: &Config) -> serde_json::Value {
    let mut v = serde_json::to_value(c).unwrap();
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("location");
                m.remove("sources");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => {
                // rule tests are (action, command, location) triples
                if a.len() == 3 && a[2].get("line").is_some() {
                    a.pop();
                }
                a.iter_mut().for_each(strip);
            }
            _ => {}
        }
    }
    strip(&mut v);
    v
}

// address-literal: never connected (configuration parsed only)
#[test]
fn toml_yaml_and_json_give_the_same_config() {
    let o = opts(Path::new("/proj"));
    let t = load_str("p.toml", TOML_POLICY, Format::Toml, &o).unwrap();
    let y = load_str("p.yaml", YAML_POLICY, Format::Yaml, &o).unwrap();
    let j = load_str("p.json", JSON_POLICY, Format::Json, &o).unwrap();
    assert_eq!(shape(&t), shape(&y));
    assert_eq!(shape(&t), shape(&j));

    assert_eq!(
        t.defaults,
        Defaults {
            action: Action::Deny,
            sandbox: Some("workspace".into()),
            on_parse_error: Action::Ask
        }
    );
    assert_eq!(t.paths["secrets"], ["/home/me/.ssh", "/proj/.env*"]);
    let w = &t.sandboxes["workspace"];
    assert_eq!(w.write_allow, ["/proj"]);
    assert_eq!(w.read_deny, ["/home/me/.ssh", "/proj/.env*"]);
    assert_eq!(
        (
            w.network_allow,
            w.network_hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>().as_slice(),
            w.env_keep.as_slice()
        ),
        (
            false,
            &["crates.io".to_string()][..],
            &["CARGO_HOME".to_string()][..]
        )
    );
    assert_eq!(t.rules[0].env, ["GIT_PAGER"]);
    assert_eq!(t.rules[0].tests[0].0, Action::Allow);
    assert_eq!(t.tests[0].cwd.as_deref(), Some("sub"));

    // Locations point at the pattern values in each format.
    assert_eq!(t.rules[1].location.to_string(), "p.toml:14:7");
    assert_eq!(y.rules[1].location.to_string(), "p.yaml:10:10");
    assert_eq!(j.rules[1].location.to_string(), "p.json:7:13");
    assert_eq!(j.rules[0].tests[0].2.to_string(), "p.json:6:73");
    assert_eq!(y.sandboxes["workspace"].location.to_string(), "p.yaml:13:3");
}

#[test]
fn json_semantic_errors_point_at_the_key() {
    let text = "{\n  \"rules\": [\n    {\"allow\": \"ls\", \"sandbx\": \"w\"}\n  ]\n}";
    let r = load_str("p.json", text, Format::Json, &opts(Path::new("/p")));
    let (l, c, m, h) = invalid(r);
    assert_eq!(
        (l, c, m.as_str()),
        (3, 21, "unknown key `sandbx` in [[rules]]")
    );
    assert_eq!(h.as_deref(), Some("did you mean `sandbox`?"));
}

#[test]
fn yaml_semantic_errors_point_at_the_key() {
    let r = load_str(
        "p.yml",
        "rules:\n  - deny: rm *\n    sandbox: w\n",
        Format::Yaml,
        &opts(Path::new("/p")),
    );
    let (l, c, m, _) = invalid(r);
    assert_eq!(
        (l, c, m.as_str()),
        (3, 5, "`sandbox` on a deny rule: denied commands never run")
    );
}

#[test]
fn empty_documents_are_empty_policies() {
    let o = opts(Path::new("/p"));
    assert!(
        load_str("p.toml", "", Format::Toml, &o)
            .unwrap()
            .rules
            .is_empty()
    );
    assert!(
        load_str("p.yaml", "# nothing\n", Format::Yaml, &o)
            .unwrap()
            .rules
            .is_empty()
    );
    assert!(
        load_str("p.json", "{}", Format::Json, &o)
            .unwrap()
            .rules
            .is_empty()
    );
    let (_, _, m, _) = invalid(load_str("p.json", "[]", Format::Json, &o));
    assert_eq!(m, "a policy must be a table, found an array");
}

// --- layers and discovery ---------------------------------------------------------------------

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("proj/sub/deeper")).unwrap();
        Env { _tmp: tmp, root }
    }

    fn opts(&self, cwd: &str) -> LoadOptions {
        LoadOptions {
            explicit: None,
            cwd: self.root.join(cwd),
            home: Some(self.root.join("home")),
            xdg_config_home: None,
        }
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

#[test]
fn no_file_means_pinfold_default() {
    let env = Env::new();
    let c = load(&env.opts("proj/sub")).unwrap();
    assert_eq!(c.sources, ["pinfold:recommended", "pinfold:default"]);
    assert_eq!(
        c.defaults,
        Defaults {
            action: Action::Ask,
            sandbox: Some("workspace".into()),
            on_parse_error: Action::Ask
        }
    );
    assert_eq!(
        c.sandboxes.keys().collect::<Vec<_>>(),
        ["networked", "readonly", "workspace"]
    );
    let w = &c.sandboxes["workspace"];
    // No project file, no git: the project root is the working directory.
    assert_eq!(c.project_root, env.root.join("proj/sub"));
    assert_eq!(w.write_allow, [env.path("proj/sub")]);
    assert!(w.write_deny.contains(&env.path("proj/sub/.git/hooks")));
    assert!(w.write_deny.contains(&env.path("home/.bashrc")));
    assert_eq!(
        w.read_deny,
        [
            env.path("home/.ssh"),
            env.path("home/.gnupg"),
            env.path("home/.aws")
        ]
    );
    assert!(!w.network_allow);
    assert!(c.sandboxes["networked"].network_allow);
    assert_eq!(c.sandboxes["networked"].write_deny, w.write_deny);
    assert!(c.sandboxes["readonly"].write_allow.is_empty());
    assert!(!c.rules.is_empty());
    assert_eq!(c.rules[0].location.file, "pinfold:recommended");
}

#[test]
fn embedded_presets_are_valid_alone() {
    for name in EMBEDDED_PRESETS {
        let text = format!("extends = [\"pinfold:{name}\"]\n");
        toml(&text).unwrap_or_else(|e| panic!("pinfold:{name}: {e}"));
    }
    assert!(embedded_preset("nope").is_none());
}

#[test]
fn layers_in_order_with_overrides() {
    let env = Env::new();
    write(
        &env.root,
        "home/.config/pinfold/config.toml",
        r#"
[defaults]
action = "deny"
on_parse_error = "deny"
[paths]
keys = ["~/.ssh"]
[[rules]]
allow = "global *"
[sandbox.workspace]
fs.write.allow = ["global"]
[sandbox.tools]
fs.write.allow = ["~/tools"]
"#,
    );
    write(
        &env.root,
        "proj/pinfold.yaml",
        "defaults:\n  action: ask\nrules:\n  - allow: project *\n",
    );
    write(
        &env.root,
        "proj/pinfold.local.json",
        r#"{"rules": [{"deny": "local *"}],
      "sandbox": {"workspace": {"fs": {"write": {"allow": ["."]}, "read": {"deny": ["<path:keys>"]}}}}}"#,
    );
    let c = load(&env.opts("proj/sub/deeper")).unwrap();
    assert_eq!(
        c.sources,
        [
            env.path("home/.config/pinfold/config.toml"),
            env.path("proj/pinfold.yaml"),
            env.path("proj/pinfold.local.json")
        ]
    );
    assert_eq!(patterns(&c), ["global *", "project *", "local *"]);
    // Field by field: action from the project, on_parse_error from the global file.
    assert_eq!(c.defaults.action, Action::Ask);
    assert_eq!(c.defaults.on_parse_error, Action::Deny);
    assert_eq!(c.defaults.sandbox.as_deref(), Some("workspace"));
    // The local file's `workspace` replaces the global one entirely; `tools` stays.
    assert_eq!(c.sandboxes["workspace"].write_allow, [env.path("proj")]);
    assert_eq!(c.sandboxes["workspace"].read_deny, [env.path("home/.ssh")]);
    assert_eq!(c.sandboxes["tools"].write_allow, [env.path("home/tools")]);
    assert_eq!(c.project_root, env.root.join("proj"));
}

#[test]
fn xdg_config_home_wins_over_home() {
    let env = Env::new();
    write(
        &env.root,
        "xdg/pinfold/config.yml",
        "rules:\n  - ask: xdg *\n",
    );
    write(
        &env.root,
        "home/.config/pinfold/config.toml",
        "[[rules]]\nask = 'home *'\n",
    );
    let mut o = env.opts("proj");
    o.xdg_config_home = Some(env.root.join("xdg"));
    assert_eq!(patterns(&load(&o).unwrap()), ["xdg *"]);
}

#[test]
fn explicit_file_only() {
    let env = Env::new();
    write(
        &env.root,
        "home/.config/pinfold/config.toml",
        "[[rules]]\nask = 'global *'\n",
    );
    write(
        &env.root,
        "proj/pinfold.toml",
        "[[rules]]\nask = 'project *'\n",
    );
    write(
        &env.root,
        "elsewhere/policy.toml",
        "[[rules]]\nask = 'explicit *'\n[sandbox.w]\nfs.write.allow = ['out']\n",
    );
    let mut o = env.opts("proj/sub");
    o.explicit = Some(env.root.join("elsewhere/policy.toml"));
    let c = load(&o).unwrap();
    assert_eq!(patterns(&c), ["explicit *"]);
    // Relative sandbox paths still resolve against the project root, not the file's directory.
    assert_eq!(c.sandboxes["w"].write_allow, [env.path("proj/out")]);
    // load_file with a path relative to cwd
    let c = load_file(Path::new("../pinfold.toml"), &env.opts("proj/sub")).unwrap();
    assert_eq!(patterns(&c), ["project *"]);
}

#[test]
fn ambiguous_files_are_an_error() {
    let env = Env::new();
    write(&env.root, "proj/pinfold.toml", "[defaults]\n");
    write(&env.root, "proj/pinfold.yml", "defaults: {}\n");
    let err = load(&env.opts("proj")).unwrap_err();
    assert!(matches!(err, ConfigError::Ambiguous { .. }), "{err:?}");
    assert!(err.to_string().contains("pinfold.toml and "), "{err}");
}

#[test]
fn empty_policy_files_count_as_absent() {
    // What `pinfold exec` leaves in place during a run: empty placeholders at every name.
    let env = Env::new();
    for name in ["pinfold.toml", "pinfold.yaml", "pinfold.yml", "pinfold.json", "pinfold.local.toml", "pinfold.local.json"] {
        write(&env.root, &format!("proj/{name}"), "");
    }
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.sources, ["pinfold:recommended", "pinfold:default"]);
    // Beside a real project file, empty local files are ignored too.
    write(&env.root, "proj/pinfold.yaml", "rules: [{deny: 'x *'}]\n");
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.sources, ["pinfold.yaml"]);
    assert_eq!(patterns(&c), ["x *"]);
}

/// Something at a policy file's name that is not a regular file, following symlinks, is an
/// error naming the path, never "absent": absent would load the embedded default instead of
/// the policy meant to be there. Nothing is opened: a FIFO does not block the load.
#[test]
fn a_policy_name_taken_by_something_else_is_an_error() {
    use std::os::unix::fs::symlink;
    let kinds: [(&str, &str); 7] = [
        ("directory", "is a directory, not a policy file"),
        ("fifo", "is a FIFO, not a policy file"),
        ("dangling", "is a symlink to `gone.toml`, which is missing, not a policy file"),
        ("loop", "which is unreachable ("),
        ("dev-null", "is a symlink to `/dev/null`, which is a character device, not a policy file"),
        ("dev-zero", "is a symlink to `/dev/zero`, which is a character device, not a policy file"),
        ("link-to-dir", "which is a directory, not a policy file"),
    ];
    let names = ["proj/pinfold.toml", "proj/pinfold.yml", "proj/pinfold.json", "proj/pinfold.local.yaml", "home/.config/pinfold/config.toml"];
    for name in names {
        for (kind, says) in kinds {
            let env = Env::new();
            if name.contains(".local.") {
                write(&env.root, "proj/pinfold.toml", "[[rules]]\nask = 'x *'\n");
            }
            let p = env.root.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            match kind {
                "directory" => std::fs::create_dir(&p).unwrap(),
                "fifo" => assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success()),
                "dangling" => symlink("gone.toml", &p).unwrap(),
                "loop" => symlink(p.file_name().unwrap(), &p).unwrap(),
                "dev-null" => symlink("/dev/null", &p).unwrap(),
                "dev-zero" => symlink("/dev/zero", &p).unwrap(),
                "link-to-dir" => symlink("/", &p).unwrap(),
                _ => unreachable!(),
            }
            // From the project and from below it; and what `pinfold trust` and the cache see.
            for cwd in ["proj", "proj/sub/deeper"] {
                let err = match load(&env.opts(cwd)) {
                    Err(e) => e,
                    Ok(c) => panic!("{name} as {kind} was taken for absent: loaded {:?}", c.sources),
                };
                let ConfigError::NotAFile { path, .. } = &err else { panic!("{name} as {kind}: {err:?}") };
                assert_eq!(path, &p, "{name} as {kind}");
                let text = err.to_string();
                assert!(text.starts_with(&format!("{} ", p.display())) && text.contains(says), "{name} as {kind}: {text}");
                assert!(!text.contains("\nhint:"), "{name} as {kind}: {text}");
                assert!(err.hint().is_some_and(|h| h.starts_with("policy is read only from a regular file")), "{name} as {kind}: {:?}", err.hint());
                assert!(matches!(layer_files(&env.opts(cwd)), Err(ConfigError::NotAFile { .. })), "{name} as {kind}");
            }
        }
    }
}

/// What stays absent: no name at all, an empty file (also through a symlink), a global config
/// directory that is a file (an exec placeholder). A symlink to a policy file is that file.
#[test]
fn a_symlink_to_a_policy_file_is_read_and_placeholders_stay_absent() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    write(&env.root, "home/.config/pinfold", "");
    write(&env.root, "empty.toml", "");
    symlink(env.root.join("empty.toml"), env.root.join("proj/pinfold.toml")).unwrap();
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.sources, ["pinfold:recommended", "pinfold:default"]);
    write(&env.root, "policies/team.toml", "[[rules]]\ndeny = 'x *'\n");
    std::fs::remove_file(env.root.join("proj/pinfold.toml")).unwrap();
    symlink("../policies/team.toml", env.root.join("proj/pinfold.toml")).unwrap();
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.sources, ["pinfold.toml"]);
    assert_eq!(patterns(&c), ["x *"]);
}

#[test]
fn io_errors_name_the_path() {
    let env = Env::new();
    write(
        &env.root,
        "proj/pinfold.toml",
        "extends = ['missing.toml']\n",
    );
    let err = load(&env.opts("proj")).unwrap_err();
    let ConfigError::Io { path, location, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &env.root.join("proj/missing.toml"));
    assert_eq!(location.as_ref().unwrap().to_string(), "pinfold.toml:1:12");
    assert!(err.to_string().contains("missing.toml"));
    let mut o = env.opts("proj");
    o.explicit = Some("nope.toml".into());
    assert!(
        load(&o)
            .unwrap_err()
            .to_string()
            .contains(&env.path("proj/nope.toml"))
    );
}

#[test]
fn project_root_resolution() {
    let env = Env::new();
    // git root when there is no project file (a `.git` file counts, as in worktrees)
    write(&env.root, "proj/.git", "gitdir: elsewhere\n");
    let c = load(&env.opts("proj/sub/deeper")).unwrap();
    assert_eq!(c.project_root, env.root.join("proj"));
    // a project file below the git root wins
    write(&env.root, "proj/sub/pinfold.toml", "# sub's policy\n");
    let c = load(&env.opts("proj/sub/deeper")).unwrap();
    assert_eq!(c.project_root, env.root.join("proj/sub"));
    // and is the root with -c too
    let mut o = env.opts("proj/sub/deeper");
    o.explicit = Some(env.root.join("proj/sub/pinfold.toml"));
    assert_eq!(load(&o).unwrap().project_root, env.root.join("proj/sub"));
}

// --- extends -----------------------------------------------------------------------------------

#[test]
fn extends_embedded_and_relative_in_order() {
    let env = Env::new();
    write(
        &env.root,
        "proj/policies/base.yaml",
        "extends: ['pinfold:recommended', '../more/extra.json']\nrules:\n  - ask: base *\n",
    );
    write(
        &env.root,
        "proj/more/extra.json",
        "{\"rules\": [{\"ask\": \"extra *\"}]}",
    );
    write(
        &env.root,
        "proj/pinfold.toml",
        "extends = ['policies/base.yaml']\n[[rules]]\nask = 'own *'\n",
    );
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(
        c.sources,
        [
            "pinfold:recommended",
            "more/extra.json",
            "policies/base.yaml",
            "pinfold.toml"
        ]
    );
    let p = patterns(&c);
    let n = p.len();
    assert_eq!(&p[n - 3..], ["extra *", "base *", "own *"]);
    assert_eq!(c.rules[0].location.file, "pinfold:recommended");
}

#[test]
fn extends_cycle_names_the_chain() {
    let env = Env::new();
    write(&env.root, "proj/pinfold.toml", "extends = ['a.toml']\n");
    write(&env.root, "proj/a.toml", "extends = ['b.yaml']\n");
    write(&env.root, "proj/b.yaml", "extends: [a.toml]\n");
    let err = load(&env.opts("proj")).unwrap_err();
    let ConfigError::ExtendsCycle { location, chain } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(chain, &["a.toml", "b.yaml", "a.toml"]);
    assert_eq!(location.to_string(), "b.yaml:1:11");
    assert_eq!(
        err.to_string(),
        "b.yaml:1:11: `extends` cycle: a.toml -> b.yaml -> a.toml"
    );
    // extending itself
    write(
        &env.root,
        "proj/pinfold.toml",
        "extends = ['./pinfold.toml']\n",
    );
    assert!(matches!(
        load(&env.opts("proj")),
        Err(ConfigError::ExtendsCycle { .. })
    ));
}

#[test]
fn diamond_extends_loads_once() {
    let env = Env::new();
    write(
        &env.root,
        "proj/pinfold.toml",
        "extends = ['a.toml', 'b.toml']\n",
    );
    write(&env.root, "proj/a.toml", "extends = ['common.toml']\n");
    write(&env.root, "proj/b.toml", "extends = ['common.toml']\n");
    write(
        &env.root,
        "proj/common.toml",
        "[[rules]]\nask = 'common *'\n",
    );
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(patterns(&c), ["common *"]);
    assert_eq!(
        c.sources,
        ["common.toml", "a.toml", "b.toml", "pinfold.toml"]
    );
}

#[test]
fn unknown_embedded_preset() {
    let (l, c, m, h) = invalid(toml("extends = ['pinfold:recomended']\n"));
    assert_eq!(
        (l, c, m.as_str()),
        (1, 12, "unknown embedded preset `pinfold:recomended`")
    );
    assert_eq!(h.as_deref(), Some("did you mean `recommended`?"));
}

#[test]
fn later_layer_overrides_extended_defaults() {
    let c = toml("extends = ['pinfold:default']\n[defaults]\naction = 'deny'\n").unwrap();
    assert_eq!(c.defaults.action, Action::Deny);
    assert_eq!(c.defaults.sandbox.as_deref(), Some("workspace"));
}

// --- paths -------------------------------------------------------------------------------------

#[test]
fn path_resolution() {
    let root = Path::new("/proj");
    let home = Some(Path::new("/home/me"));
    let r = |t: &str| resolve_path(t, root, home).unwrap();
    assert_eq!(r("."), "/proj");
    assert_eq!(r("./src/"), "/proj/src");
    assert_eq!(r(".git/hooks"), "/proj/.git/hooks");
    assert_eq!(r("**/*.pem"), "/proj/**/*.pem");
    assert_eq!(r("../sibling"), "/proj/../sibling");
    assert_eq!(r("~"), "/home/me");
    assert_eq!(r("~/.ssh"), "/home/me/.ssh");
    assert_eq!(r("/etc//passwd"), "/etc/passwd");
    assert_eq!(r("/"), "/");
    assert_eq!(resolve_path("x", Path::new("/"), home).unwrap(), "/x");
    assert!(resolve_path("~bob/x", root, home).is_err());
    assert!(resolve_path("~/.ssh", root, None).is_err());
}

#[test]
fn tilde_without_home_is_an_error_at_the_entry() {
    let o = LoadOptions {
        home: None,
        ..opts(Path::new("/p"))
    };
    let r = load_str(
        "p.toml",
        "[paths]\nk = ['/a', '~/.ssh']\n",
        Format::Toml,
        &o,
    );
    let (l, c, m, _) = invalid(r);
    assert_eq!(
        (l, c, m.as_str()),
        (2, 12, "`~/.ssh` needs a home directory, but none is known")
    );
}

#[test]
fn path_sets_expand_in_every_list() {
    let c = toml("[paths]\na = ['x', '~/y']\nb = ['/z']\n[sandbox.s]\nfs.write.allow = ['<path:a>', 'w']\nfs.write.deny = ['<path:b>']\nfs.read.deny = ['<path:a>', '<path:b>']\n[[rules]]\ndeny = 'cat <path:a>'\n").unwrap();
    let s = &c.sandboxes["s"];
    assert_eq!(s.write_allow, ["/proj/x", "/home/me/y", "/proj/w"]);
    assert_eq!(s.write_deny, ["/z"]);
    assert_eq!(s.read_deny, ["/proj/x", "/home/me/y", "/z"]);
    // the pattern keeps its reference; the judge expands it from `paths`
    assert_eq!(c.rules[0].pattern, "cat <path:a>");
    assert_eq!(c.paths["a"], ["/proj/x", "/home/me/y"]);
    let (_, _, m, _) = invalid(toml("[paths]\na = ['<path:b>']\nb = ['x']\n"));
    assert_eq!(m, "a path set cannot refer to another path set");
}

#[test]
fn json_schema_describes_the_format() {
    let s = json_schema();
    assert_eq!(s["title"], "pinfold policy");
    assert!(s["$defs"]["RuleFile"]["properties"]["allow"].is_object());
}

#[test]
fn action_order() {
    assert!(Action::Allow < Action::Ask && Action::Ask < Action::Deny);
    assert_eq!(serde_json::to_string(&Action::Ask).unwrap(), "\"ask\"");
}

// --- robustness and speed ------------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    fn all_formats(text: &str) {
        let o = opts(Path::new("/p"));
        for format in [Format::Toml, Format::Yaml, Format::Json] {
            let _ = load_str("p", text, format, &o);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn loaders_never_panic_on_arbitrary_text(text in ".{0,200}") {
            all_formats(&text);
        }

        #[test]
        fn loaders_never_panic_on_config_like_text(
            text in r#"([\[\]{}"',:=\n #\-\\]|rules|allow|deny|sandbox|paths|<path:|~/|fs|write|[a-z]{1,4}|[0-9]){0,60}"#
        ) {
            all_formats(&text);
        }
    }
}

fn generated_policy(n: usize) -> String {
    let mut text =
        String::from("[defaults]\naction = \"ask\"\n\n[paths]\nsecrets = [\"~/.ssh\"]\n\n");
    for i in 0..n {
        let action = ["allow", "ask", "deny"][i % 3];
        text.push_str(&format!(
            "[[rules]]\n{action} = \"tool{i} sub{i}|other{i} --flag *\"\n"
        ));
        if i % 10 == 0 {
            text.push_str(&format!("message = \"rule {i}\"\n"));
        }
        if action != "deny" && i % 7 == 0 {
            text.push_str("sandbox = \"workspace\"\n");
        }
        text.push('\n');
    }
    text.push_str(
        "[sandbox.workspace]\nfs.write.allow = [\".\"]\nfs.read.deny = [\"<path:secrets>\"]\n",
    );
    text
}

#[test]
fn a_thousand_rules_load() {
    let c = toml(&generated_policy(1000)).unwrap();
    assert_eq!(c.rules.len(), 1000);
}

/// `cargo test -p pinfold-policy --release -- --ignored --nocapture load_speed`
///
/// Prints the fastest of many runs (the machine is shared; the minimum is the stable number).
#[test]
#[ignore = "timing, run by hand"]
fn load_speed() {
    fn fastest<T>(mut f: impl FnMut() -> T) -> std::time::Duration {
        (0..300)
            .map(|_| {
                let t = std::time::Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    }
    let env = Env::new();
    let text = generated_policy(1000);
    write(&env.root, "proj/pinfold.toml", &text);
    let o = env.opts("proj");
    println!(
        "1000-rule pinfold.toml ({} bytes), fastest of 300:",
        text.len()
    );
    println!(
        "  load():                                   {:?}",
        fastest(|| load(&o).unwrap())
    );
    println!(
        "  toml::de::DeTable::parse alone:           {:?}",
        fastest(|| toml::de::DeTable::parse(&text).unwrap())
    );
    println!(
        "  parse_toml (+ tree with positions):       {:?}",
        fastest(|| super::node::parse_toml(&text).unwrap())
    );
    let node = super::node::parse_toml(&text).unwrap();
    println!(
        "  decode (schema check of the tree):        {:?}",
        fastest(|| super::decode::decode("pinfold.toml", &node).unwrap())
    );
    println!(
        "  toml::from_str::<toml::Table> (compare):  {:?}",
        fastest(|| toml::from_str::<toml::Table>(&text).unwrap())
    );
}

#[test]
fn audit_is_on_unless_the_user_turns_it_off() {
    let env = Env::new();
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.audit, Audit { enabled: true, redact_env: vec![] });

    write(&env.root, "home/.config/pinfold/config.toml", "[audit]\nenabled = false\nredact_env = ['GITHUB_TOKEN']\n");
    write(&env.root, "proj/pinfold.toml", "[audit]\nredact_env = ['NPM_TOKEN', 'GITHUB_TOKEN']\n");
    let c = load(&env.opts("proj")).unwrap();
    assert_eq!(c.audit, Audit { enabled: false, redact_env: vec!["GITHUB_TOKEN".into(), "NPM_TOKEN".into()] });

    // The project may turn it back on, not off.
    write(&env.root, "proj/pinfold.toml", "[audit]\nenabled = true\n");
    assert!(load(&env.opts("proj")).unwrap().audit.enabled);
}

#[test]
fn a_project_file_cannot_turn_the_audit_off() {
    let env = Env::new();
    for (file, text) in [
        ("proj/pinfold.toml", "[audit]\nenabled = false\n"),
        ("proj/pinfold.local.toml", "[audit]\nenabled = false\n"),
    ] {
        write(&env.root, "proj/pinfold.toml", "# the project's policy\n");
        write(&env.root, file, text);
        let err = load(&env.opts("proj/sub")).unwrap_err();
        let ConfigError::Invalid { location, key_path, message, hint } = &err else { panic!("{err:?}") };
        assert_eq!((location.line, location.col), (2, 11), "{file}");
        assert_eq!(key_path, "audit.enabled");
        assert!(message.contains("cannot turn the audit ledger off"), "{message}");
        assert!(hint.as_deref().unwrap().contains("config.toml"));
        let _ = std::fs::remove_file(env.root.join("proj/pinfold.local.toml"));
    }
    // Nor through a file it extends.
    write(&env.root, "proj/off.toml", "[audit]\nenabled = false\n");
    write(&env.root, "proj/pinfold.toml", "extends = ['off.toml']\n");
    assert!(load(&env.opts("proj")).is_err());
    // A `-c` file is the user's choice.
    let mut o = env.opts("proj");
    o.explicit = Some(env.root.join("proj/off.toml"));
    assert!(!load(&o).unwrap().audit.enabled);
}

#[test]
fn audit_keys_are_checked() {
    let (line, col, msg, hint) = invalid(toml("[audit]\nenable = false\n"));
    assert_eq!((line, col), (2, 1));
    assert!(msg.contains("unknown key `enable`"), "{msg}");
    assert_eq!(hint.as_deref(), Some("did you mean `enabled`?"));
    let (_, _, msg, _) = invalid(toml("[audit]\nenabled = 'no'\n"));
    assert!(msg.contains("a boolean"), "{msg}");
    let (_, _, msg, _) = invalid(toml("[audit]\nredact_env = ['NOT A NAME']\n"));
    assert!(msg.contains("not an environment variable name"), "{msg}");
}

#[test]
fn undo_is_on_unless_a_layer_turns_it_off() {
    let env = Env::new();
    assert!(load(&env.opts("proj")).unwrap().undo_enabled);
    write(&env.root, "home/.config/pinfold/config.toml", "[undo]\nenabled = false\n");
    assert!(!load(&env.opts("proj")).unwrap().undo_enabled);
    // The last layer that says wins, a project file too.
    write(&env.root, "proj/pinfold.toml", "[undo]\nenabled = true\n");
    assert!(load(&env.opts("proj")).unwrap().undo_enabled);
    let (line, col, msg, hint) = invalid(toml("[undo]\nenable = false\n"));
    assert_eq!((line, col), (2, 1));
    assert!(msg.contains("unknown key `enable`"), "{msg}");
    assert_eq!(hint.as_deref(), Some("did you mean `enabled`?"));
    let (line, col, msg, _) = invalid(toml("[undo]\nenabled = 'no'\n"));
    assert_eq!((line, col), (2, 11));
    assert!(msg.contains("a boolean"), "{msg}");
}

// --- network: hosts, upstream roots, endpoints, credentials -----------------------------------

// address-literal: never connected (configuration parsed only)
const NETWORK_POLICY: &str = r#"
[sandbox.build]
network.allow = true
network.hosts = ["crates.io", "Static.Crates.io:443", "*.githubusercontent.com", "127.0.0.1:8443", "[::1]:443", "api.github.com"]
network.upstream_ca = ["certs/corp-root.pem", "~/ca.pem"]

[[sandbox.build.network.endpoint]]
host = "api.github.com"
credential = "github"
header = "Authorization"
format = "Bearer {}"

[credentials.github]
env = "GITHUB_TOKEN"

[credentials.npm]
file = "~/.secrets/npm"

[credentials.vault]
command = "vault read -field=token secret/x"
"#;

// address-literal: never connected (configuration parsed only)
#[test]
fn network_hosts_endpoints_and_credentials_resolve() {
    let c = toml(NETWORK_POLICY).unwrap();
    let b = &c.sandboxes["build"];
    let hosts: Vec<String> = b.network_hosts.iter().map(|h| h.to_string()).collect();
    assert_eq!(
        hosts,
        ["crates.io", "static.crates.io:443", "*.githubusercontent.com", "127.0.0.1:8443", "[::1]:443", "api.github.com"]
    );
    assert!(b.has_allowlist());
    assert!(b.network_hosts[2].matches("raw.githubusercontent.com", 443));
    assert!(!b.network_hosts[2].matches("githubusercontent.com", 443));
    assert_eq!(b.upstream_ca, ["/proj/certs/corp-root.pem", "/home/me/ca.pem"]);
    assert_eq!(b.endpoints.len(), 1);
    let ep = &b.endpoints[0];
    assert_eq!((ep.host.to_string(), ep.credential.as_str(), ep.header.as_str(), ep.format.as_str()),
        ("api.github.com".to_string(), "github", "Authorization", "Bearer {}"));
    assert_eq!((ep.location.line, ep.location.col), (7, 1));
    assert_eq!(c.credentials["github"].source, CredentialSource::Env("GITHUB_TOKEN".into()));
    assert_eq!(c.credentials["npm"].source, CredentialSource::File("/home/me/.secrets/npm".into()));
    assert_eq!(
        c.credentials["vault"].source,
        CredentialSource::Command("vault read -field=token secret/x".into())
    );
}

// address-literal: never connected (configuration parsed only)
#[test]
fn network_settings_in_yaml_and_json_match_toml() {
    let yaml = r#"
sandbox:
  build:
    network:
      allow: true
      hosts: ["api.github.com", "*.example.com:8443"]
      endpoint:
        - {host: api.github.com, credential: github}
credentials:
  github: {env: GITHUB_TOKEN}
"#;
    let o = opts(Path::new("/proj"));
    let y = load_str("p.yaml", yaml, Format::Yaml, &o).unwrap();
    let json = r#"{"sandbox": {"build": {"network": {"allow": true,
        "hosts": ["api.github.com", "*.example.com:8443"],
        "endpoint": [{"host": "api.github.com", "credential": "github"}]}}},
        "credentials": {"github": {"env": "GITHUB_TOKEN"}}}"#;
    let j = load_str("p.json", json, Format::Json, &o).unwrap();
    assert_eq!(shape(&y), shape(&j));
    let ep = &y.sandboxes["build"].endpoints[0];
    // Defaults for the header and its format.
    assert_eq!((ep.header.as_str(), ep.format.as_str()), ("Authorization", "Bearer {}"));
}

// address-literal: never connected (configuration parsed only)
#[test]
fn malformed_hosts_point_at_the_entry() {
    for (entry, needle) in [
        ("https://crates.io", "is a URL"),
        ("crates.io:0", "out of range"),
        ("crates.io:99999", "out of range"),
        ("crates.io:x", "invalid port"),
        ("a.*.com", "whole first label"),
        ("*.com", "every name under"),
        ("[::1", "unclosed"),
        ("::1:443:x", "not a host"),
        ("exa mple.com", "white space"),
        ("-bad.com", "not a valid host name"),
    ] {
        let text = format!("[sandbox.b]\nnetwork.allow = true\nnetwork.hosts = [\"ok.com\", \"{entry}\"]\n");
        let (l, c, m, h) = invalid(toml(&text));
        assert_eq!((l, c), (3, 28), "{entry}");
        assert!(m.starts_with("invalid host: ") && m.contains(needle), "{entry}: {m}");
        assert!(h.is_some() || needle == "white space", "{entry}: no hint");
    }
    let (l, c, m, _) = invalid(toml("[sandbox.b]\nnetwork.hosts = ['a.com', 'A.com']\n"));
    assert_eq!((l, c, m.as_str()), (2, 27, "`A.com` is listed twice"));
    let err = toml("[sandbox.b]\nnetwork.hosts = ['a.com:70000']\n").unwrap_err();
    assert!(err.to_string().starts_with("pinfold.toml:2:18: invalid host"), "{err}");
}

#[test]
fn upstream_ca_lists_files() {
    let (l, c, m, h) = invalid(toml(
        "[paths]\ncas = ['a.pem']\n[sandbox.b]\nnetwork.upstream_ca = ['x.pem', '<path:cas>']\n",
    ));
    assert_eq!((l, c), (4, 33));
    assert!(m.contains("certificate files, not path sets"), "{m}");
    assert!(h.is_some());
    let (_, _, m, _) = invalid(toml("[sandbox.b]\nnetwork.upstream_ca = ['']\n"));
    assert_eq!(m, "empty path");
    let (_, _, m, _) = invalid(toml("[sandbox.b]\nnetwork.upstream_ca = 'x.pem'\n"));
    assert!(m.contains("expected an array"), "{m}");
}

// address-literal: never connected (configuration parsed only)
#[test]
fn endpoint_errors() {
    let base = "[credentials.gh]\nenv = 'GH_TOKEN'\n[sandbox.b]\nnetwork.allow = true\n";
    let ep = |body: &str| toml(&format!("{base}[[sandbox.b.network.endpoint]]\n{body}"));
    // An unknown credential points at the name, with the defined ones as a hint.
    let (l, c, m, h) = invalid(ep("host = 'api.x.com'\ncredential = 'gihub'\n"));
    assert_eq!((l, c, m.as_str()), (7, 14, "undefined credential `gihub`"));
    assert_eq!(h.as_deref(), Some("defined credentials: `gh`"));
    let (_, _, m, _) = invalid(ep("host = '*.x.com'\ncredential = 'gh'\n"));
    assert!(m.contains("names one host"), "{m}");
    let (l, c, m, _) = invalid(ep("host = 'api.x.com'\ncredential = 'gh'\nformat = 'Bearer'\n"));
    assert_eq!((l, c), (8, 10));
    assert!(m.contains("exactly once, found 0"), "{m}");
    let (_, _, m, _) = invalid(ep("host = 'api.x.com'\ncredential = 'gh'\nformat = '{} {}'\n"));
    assert!(m.contains("found 2"), "{m}");
    let (_, _, m, _) = invalid(ep("host = 'api.x.com'\ncredential = 'gh'\nheader = 'Host'\n"));
    assert!(m.contains("frames or routes"), "{m}");
    let (_, _, m, _) = invalid(ep("host = 'api.x.com'\ncredential = 'gh'\nheader = 'Bad Header'\n"));
    assert!(m.contains("not an HTTP header name"), "{m}");
    let (_, _, m, _) = invalid(ep("credential = 'gh'\n"));
    assert_eq!(m, "endpoint is missing `host`");
    let (_, _, m, _) = invalid(ep("host = 'api.x.com'\ncredential = 'gh'\nhedaer = 'X'\n"));
    assert!(m.contains("unknown key `hedaer`"), "{m}");
    // The endpoint's host must be reachable: in `hosts`, or the full network.
    let text = format!("{base}network.hosts = ['crates.io']\n[[sandbox.b.network.endpoint]]\nhost = 'api.x.com'\ncredential = 'gh'\n");
    let (l, _, m, h) = invalid(toml(&text));
    assert_eq!(l, 6);
    assert!(m.contains("not reachable"), "{m}");
    assert_eq!(h.as_deref(), Some("add \"api.x.com\" to `network.hosts`"));
    let text = "[credentials.gh]\nenv = 'GH'\n[[sandbox.b.network.endpoint]]\nhost = 'api.x.com'\ncredential = 'gh'\n";
    let (_, _, _, h) = invalid(toml(text));
    assert!(h.unwrap().contains("network.allow = true"));
}

#[test]
fn credential_errors() {
    let (l, c, m, h) = invalid(toml("[credentials.gh]\nenv = 'A'\nfile = 'b'\n"));
    assert_eq!((l, c), (3, 1));
    assert!(m.contains("both `env` and `file`"), "{m}");
    assert!(h.is_some());
    let (l, c, m, _) = invalid(toml("[credentials.gh]\n"));
    assert_eq!((l, c), (1, 14));
    assert_eq!(m, "credential `gh` has no source");
    let (_, _, m, _) = invalid(toml("[credentials.gh]\nenv = '1X'\n"));
    assert!(m.contains("not an environment variable name"), "{m}");
    let (_, _, m, h) = invalid(toml("[credentials.gh]\ncmd = 'x'\n"));
    assert!(m.contains("unknown key `cmd`"), "{m}");
    assert!(h.is_some());
    let (_, _, m, _) = invalid(toml("[credentials.'a b']\nenv = 'X'\n"));
    assert!(m.contains("invalid credential name"), "{m}");
}

#[test]
fn a_project_file_cannot_define_credentials_or_endpoints() {
    let env = Env::new();
    let cred = "[credentials.gh]\nenv = 'GITHUB_TOKEN'\n";
    let endpoint = "[sandbox.b]\nnetwork.allow = true\n[[sandbox.b.network.endpoint]]\nhost = 'evil.example'\ncredential = 'gh'\n";
    // The user's global file defines the credential.
    write(&env.root, "home/.config/pinfold/config.toml", cred);
    write(&env.root, "proj/pinfold.toml", "# project\n");
    assert!(load(&env.opts("proj")).unwrap().credentials.contains_key("gh"));
    for (file, text, key) in [
        ("proj/pinfold.toml", cred, "credentials.gh"),
        ("proj/pinfold.local.toml", cred, "credentials.gh"),
        ("proj/pinfold.toml", endpoint, "sandbox.b.network.endpoint"),
    ] {
        write(&env.root, file, text);
        let err = load(&env.opts("proj")).unwrap_err();
        let ConfigError::Invalid { key_path, message, hint, .. } = &err else { panic!("{err:?}") };
        assert_eq!(key_path, key, "{file}");
        assert!(message.contains("a project policy cannot define"), "{message}");
        assert!(hint.as_deref().unwrap().contains("config.toml"));
        write(&env.root, file, "# reset\n");
        let _ = std::fs::remove_file(env.root.join("proj/pinfold.local.toml"));
    }
    // The same endpoint in a `-c` file is the user's choice.
    write(&env.root, "mine.toml", &format!("{cred}{endpoint}"));
    let mut o = env.opts("proj");
    o.explicit = Some(env.root.join("mine.toml"));
    assert_eq!(load(&o).unwrap().sandboxes["b"].endpoints.len(), 1);
}

#[test]
fn only_the_users_own_files_lift_control_files() {
    let env = Env::new();
    write(&env.root, "home/.config/pinfold/config.toml", "[control]\nlift = ['CLAUDE.md', '~/.gitconfig']\n");
    write(&env.root, "proj/pinfold.toml", "# the project's policy\n");
    let c = load(&env.opts("proj")).unwrap();
    let root = c.project_root.clone();
    assert_eq!(c.control_lift, vec![root.join("CLAUDE.md"), env.root.join("home/.gitconfig")]);
    // A project file (or one it extends) may not.
    for (file, text) in [("proj/pinfold.toml", "[control]\nlift = ['.vscode']\n"), ("proj/pinfold.local.toml", "\n[control]\nlift = ['.envrc']\n")] {
        write(&env.root, file, text);
        let err = load(&env.opts("proj")).unwrap_err();
        let ConfigError::Invalid { location, key_path, message, hint } = &err else { panic!("{err:?}") };
        assert_eq!(key_path, "control.lift", "{file}");
        assert_eq!(location.col, 8, "{file}");
        assert!(message.contains("cannot lift control files"), "{message}");
        assert!(hint.as_deref().unwrap().contains("config.toml"));
        let _ = std::fs::remove_file(env.root.join("proj/pinfold.local.toml"));
        write(&env.root, "proj/pinfold.toml", "# the project's policy\n");
    }
    // Globs and unknown keys are errors with their place.
    let (line, col, msg, _) = invalid(toml("[control]\nlift = ['.claude/*']\n"));
    assert_eq!((line, col, msg.contains("is not a path")), (2, 9, true), "{msg}");
    let (line, _, msg, _) = invalid(toml("[control]\nlifts = []\n"));
    assert_eq!((line, msg.contains("unknown key `lifts`")), (2, true), "{msg}");
}

#[test]
fn a_preset_names_its_backend() {
    let c = toml("[sandbox.a]\nbackend = \"gvisor\"\n[sandbox.b]\nfs.write.allow = [\".\"]\n").unwrap();
    assert_eq!(c.sandboxes["a"].backend, "gvisor");
    assert_eq!(c.sandboxes["b"].backend, "process");
    let (line, col, message, hint) = invalid(toml("[sandbox.a]\nbackend = \"kvm\"\n"));
    assert_eq!((line, col, message.as_str()), (2, 11, "unknown backend `kvm`"));
    assert_eq!(hint.as_deref(), Some("use one of: process, gvisor, container"));
    assert!(toml("[sandbox.a]\nbackend = 3\n").is_err());
}

#[test]
fn a_container_preset_names_its_image_runtime_and_limits() {
    let c = toml("[sandbox.c]\nbackend = \"container\"\nimage = \"localhost/x:1\"\nruntime = \"runsc\"\ncpus = 1.5\nmemory = \"512MiB\"\npids = 256\n").unwrap();
    let k = &c.sandboxes["c"].container;
    assert_eq!(k.image.as_deref(), Some("localhost/x:1"));
    assert_eq!(k.runtime.as_deref(), Some("runsc"));
    assert_eq!(k.cpus, Some(1.5));
    assert_eq!(k.memory, Some(512 << 20));
    assert_eq!(k.pids, Some(256));
    // Whole numbers of CPUs and bytes are numbers too.
    let c = toml("[sandbox.c]\nbackend = \"container\"\ncpus = 2\nmemory = 67108864\n").unwrap();
    assert_eq!((c.sandboxes["c"].container.cpus, c.sandboxes["c"].container.memory), (Some(2.0), Some(64 << 20)));
    // Each bad value is an error at its place, with what to write instead.
    for (text, col, want) in [
        ("memory = \"lots\"", 10, "invalid memory size"),
        ("memory = \"512QB\"", 10, "unknown unit `QB`"),
        ("memory = \"1MiB\"", 10, "below the least a container may have"),
        ("memory = true", 10, "expected a size"),
        ("cpus = 0", 8, "out of range"),
        ("cpus = -1.0", 8, "out of range"),
        ("cpus = \"2\"", 8, "expected a number of CPUs"),
        ("pids = 0", 8, "out of range"),
        ("pids = 1", 8, "out of range"),
        ("pids = 99999999999", 8, "out of range"),
        ("pids = 1.5", 8, "expected a number of processes"),
        ("runtime = \"run c\"", 11, "not a runtime name"),
        ("image = \"\"", 9, "not an image name"),
    ] {
        let (line, c, message, hint) = invalid(toml(&format!("[sandbox.c]\nbackend = \"container\"\n{text}\n")));
        assert_eq!((line, c), (3, col), "{text}: {message}");
        assert!(message.contains(want), "{text}: {message}");
        assert!(hint.is_some() || message.contains("expected"), "{text}: no hint");
    }
    // On another backend the keys would limit nothing: an error, not a silent no-op.
    let (line, col, message, hint) = invalid(toml("[sandbox.p]\nmemory = \"512MiB\"\n"));
    assert_eq!((line, col), (2, 1));
    assert!(message.contains("applies to backend = \"container\" only; this preset runs on `process`"), "{message}");
    assert!(hint.unwrap().contains("backend = \"container\""));
    let (_, _, message, _) = invalid(toml("[sandbox.g]\nbackend = \"gvisor\"\nimage = \"x\"\n"));
    assert!(message.contains("runs on `gvisor`"), "{message}");
}

#[test]
fn memory_sizes() {
    use crate::config::parse_memory;
    assert_eq!(parse_memory("512MiB"), Ok(512 << 20));
    assert_eq!(parse_memory("512M"), Ok(512 << 20));
    assert_eq!(parse_memory("2GiB"), Ok(2 << 30));
    assert_eq!(parse_memory("1.5GiB"), Ok(3 << 29));
    assert_eq!(parse_memory("100MB"), Ok(100_000_000));
    assert_eq!(parse_memory("4096"), Ok(4096));
    assert!(parse_memory("").is_err());
    assert!(parse_memory("MiB").is_err());
    assert!(parse_memory("1e999GiB").is_err());
    assert!(parse_memory("99999999999TiB").is_err());
}
