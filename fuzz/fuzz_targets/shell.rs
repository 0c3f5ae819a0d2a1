//! Shell text: parse it, then judge it with the embedded default policy. Text the parser
//! refuses must never be allowed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = pinfold_shell::parse(text);
    let w = pinfold_fuzz::world();
    pinfold_fuzz::judge_checked(pinfold_fuzz::default_policy(), text, &w.proj);
});
