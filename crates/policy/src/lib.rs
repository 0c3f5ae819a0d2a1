//! pinfold's policy: layered configuration, the pattern language, and verdicts.
//!
//! * [`config`] reads policy files (TOML, YAML, JSON), layers and validates them into a
//!   [`config::Config`].
//! * [`Policy::new`] compiles every rule's [`pattern`]; [`Policy::judge`] parses command text
//!   with [`pinfold_shell`], matches each simple command against the rules ([`matcher`]) and
//!   returns a [`Judgement`]: a verdict per command, the strictest overall, the rules that
//!   matched and the sandbox preset to run in.
//! * [`writes`] reads, with the tool knowledge in [`options`], the files a command's arguments
//!   name for it to write and the programs it runs on the side; the judge holds the files to
//!   the test an output redirect meets and asks before the programs run.
//!
//! # Example
//!
//! ```
//! use pinfold_policy::config::{load_str, Action, Format, LoadOptions};
//! use pinfold_policy::Policy;
//!
//! let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/me".into()), xdg_config_home: None };
//! let text = r#"
//! [[rules]]
//! allow = "git status|log|diff|show *"
//! [[rules]]
//! deny = "rm -r|-R|--recursive * /|~|~/ *"
//! "#;
//! let policy = Policy::new(load_str("pinfold.toml", text, Format::Toml, &opts).unwrap()).unwrap();
//! assert_eq!(policy.judge("git log --oneline", "/p".as_ref()).decision, Action::Allow);
//! assert_eq!(policy.judge("sudo rm -fr ~/", "/p".as_ref()).decision, Action::Deny);
//! assert_eq!(policy.judge("git status; make", "/p".as_ref()).decision, Action::Ask);
//! ```
//!
//! # What this crate does not guarantee
//!
//! Rules see argv, not the file system: `<path:…>` and path tokens are resolved lexically
//! (`~`, `$HOME`, cwd, `..`) without following symlinks. The kernel sandbox, not the policy,
//! is the boundary for what a command can touch.

pub mod cache;
pub mod config;
pub mod env;
pub mod judge;
pub mod matcher;
pub mod merge;
pub mod options;
pub mod pattern;
pub mod writes;

pub use cache::{load_cached, LoadError};
pub use merge::merge_presets;
pub use judge::{confines_writes, writable, CommandVerdict, Judgement, Policy, PolicyError, RuleMatch, TestFailure};
