//! Exit codes, in one place. Documented in the README and in `--help`.

/// `check`: allowed. Other commands: success.
pub const OK: i32 = 0;
/// `test`: a policy test failed.
pub const TEST_FAILED: i32 = 1;
/// Usage or configuration error.
pub const USAGE: i32 = 2;
/// `exec`: the policy denied the command (or it needs confirmation, which exec cannot ask).
pub const EXEC_DENIED: i32 = 126;
/// `exec`: the sandbox could not be set up; nothing ran.
pub const EXEC_SETUP: i32 = pinfold_plan::EXEC_SETUP;
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

pub const EXEC: &str = "\
Exit status: the command's own status (128+N when killed by signal N); 126 denied by the policy
(or needs confirmation); 125 the sandbox could not be set up, nothing ran, or the command created a
control file (moved aside, listed); 127 command not found;
2 usage or configuration error.

Examples:
  pinfold exec -- 'cargo build && cargo test'
  pinfold exec --net on -- npm install
  pinfold exec --dry-run -- make
  pinfold exec --report run.json --deny-read secrets/ -- ./build.sh";
