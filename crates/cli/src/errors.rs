//! Every failure's exit status, and the sandbox's errors as a person reads them: in one
//! place. The libraries return typed errors with their hints as fields
//! ([`pinfold_plan::Error`] with its [`Kind`], [`SandboxError`] with `hint()`); the commands
//! pass them up with `?`; [`exit_code`] picks the status.

use pinfold_plan::{Error, Kind};
use pinfold_sandbox::SandboxError;

use crate::exit;

/// Which command failed: `exec` has a status of its own for "nothing ran".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Exec,
    /// Every other command.
    Other,
}

/// The exit status for a failure of `door`.
pub fn exit_code(door: Door, e: &Error) -> i32 {
    match (door, e.kind) {
        (_, Kind::Input) => exit::USAGE,
        // `exec`'s callers (agents, hooks, scripts) must tell "the command failed" from
        // "nothing ran": 125, as env(1) and container runtimes do.
        (Door::Exec, Kind::Setup | Kind::Unrecorded | Kind::Planted) => exit::EXEC_SETUP,
        (Door::Other, Kind::Setup | Kind::Unrecorded | Kind::Planted) => exit::USAGE,
    }
}

/// A sandbox that could not be planned or started, for a person: nothing ran.
pub fn sandbox(e: SandboxError) -> Error {
    if let SandboxError::NotReleased(refusal) = &e {
        // The caller's own error came back through the sandbox: keep its kind and hint.
        if let Some(own) = refusal.downcast_ref::<Error>() {
            return own.clone();
        }
    }
    let hint = e.hint().map(str::to_string);
    let err = Error::new(format!("sandbox: {e}")).kind(Kind::Setup);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exec_has_a_status_for_nothing_ran() {
        let unrecorded = Error::new("x").kind(Kind::Unrecorded);
        let setup = Error::new("x").kind(Kind::Setup);
        let input = Error::new("x");
        assert_eq!(exit_code(Door::Exec, &unrecorded), 125);
        assert_eq!(exit_code(Door::Exec, &setup), 125);
        assert_eq!(exit_code(Door::Exec, &input), 2);
        assert_eq!(exit_code(Door::Other, &unrecorded), 2);
        assert_eq!(exit_code(Door::Other, &setup), 2);
    }

    #[test]
    fn a_refusal_keeps_the_callers_error() {
        let own = Error::new("cannot record").kind(Kind::Unrecorded).hint("fix the state directory");
        let e = sandbox(SandboxError::NotReleased(Box::new(own)));
        assert_eq!(e.kind, Kind::Unrecorded);
        assert_eq!(e.headline, "cannot record");
        assert_eq!(e.hint.as_deref(), Some("fix the state directory"));
        let e = sandbox(SandboxError::HelperEnded);
        assert_eq!(e.kind, Kind::Setup);
        assert!(e.headline.starts_with("sandbox: "), "{}", e.headline);
    }
}
