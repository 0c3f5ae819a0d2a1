//! The plan of a run: one pure function, [`plan`], turns a command, the context it runs in
//! (working directory, command-line overrides, a hook's approval, pinfold's [`Dirs`]) and the
//! loaded policy into a [`Plan`] — the verdict, the preset merged strictest-wins, the complete
//! sandbox policy with every protected, hidden and writable path, the network and whether the
//! egress proxy starts, the argv, and what goes into the ledger — and [`run`] carries a plan
//! out without deciding anything more. `pinfold exec` calls both; `pinfold hook`'s checks of
//! an agent's file tools use the same protected paths ([`protect`]). See docs/design/plan.md.

/// `eprintln!` that cannot panic: a line for a person on standard error. A closed or full
/// stderr loses the line, never the answer.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod dirs;
mod egress;
pub mod control;
mod error;
pub mod files;
pub mod git_guard;
pub mod load;
mod plan;
pub mod protect;
pub mod record;
mod run;
pub mod token;
pub mod trust;

pub use dirs::Dirs;
pub use error::{Error, Kind};
pub use plan::{command_argv, home_reached_by_a_detour, judge, link_out_of_a_project, links_on_the_way, plain_argv, plan, preset, Context, Judged, Net, Plan, PlanError, Run, Sandbox, Step};
pub use run::{run, Finished};

/// The exit status of a run whose sandbox could not be set up: nothing ran.
pub const EXEC_SETUP: i32 = 125;
