//! Exit codes, in one place. Documented in the README and in `--help`.

/// `check`: allowed. Other commands: success.
pub const OK: i32 = 0;
/// `test`: a policy test failed.
pub const TEST_FAILED: i32 = 1;
/// Usage or configuration error.
pub const USAGE: i32 = 2;
/// `check`: the command needs a person's confirmation.
pub const ASK: i32 = 10;
/// `check`: the command is denied.
pub const DENY: i32 = 11;

pub const SUMMARY: &str = "\
Exit status: 0 success or allow, 1 a policy test failed, 2 usage or configuration error,
10 ask, 11 deny.

Configuration: -c FILE, or $XDG_CONFIG_HOME/pinfold/config.toml, then the nearest pinfold.toml
(or .yaml/.yml/.json) above the working directory, then pinfold.local.* beside it. With no file,
an embedded default policy applies.";

pub const CHECK: &str = "\
Exit status: 0 allow, 10 ask, 11 deny, 2 usage or configuration error.

Examples:
  pinfold check -- 'cargo test && git push --force'
  pinfold check --explain -- 'cat <(rm -rf ~)'
  echo 'git status' | pinfold check --json";
