//! A policy file in JSON: load it, compile it, run its tests and judge a few fixed commands.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pinfold_policy::config::Format;

fuzz_target!(|data: &[u8]| {
    pinfold_fuzz::policy_target(data, "pinfold.json", Format::Json);
});
