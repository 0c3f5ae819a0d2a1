//! Codex's hook payload as raw bytes: the answer is the blocking error or one JSON object.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pinfold_fuzz::hook_target("codex", data);
});
