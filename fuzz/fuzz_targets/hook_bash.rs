//! Shell text inside a well-formed Claude Code `Bash` payload, so that both the judge and the
//! rewrite see arbitrary commands. What must hold:
//!
//! * a Bash call always gets an answer (no answer would let the agent run it unjudged), and
//!   it is allow, ask or deny;
//! * text the parser refuses is never allowed to run as it is: an allow must run it inside
//!   `pinfold exec --sandbox`;
//! * a rewritten command of a parseable input still parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else { return };
    let w = pinfold_fuzz::world();
    let payload = json!({
        "session_id": "fuzz",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "fuzz"},
        "cwd": w.proj,
    });
    let answer = pinfold_cli::hook::answer_in_process("claude-code", payload.to_string().as_bytes()).expect("a known agent");
    let out = match answer {
        // The blocking answer: fine.
        Err(_) => return,
        Ok(None) => panic!("no answer for a Bash call"),
        Ok(Some(out)) => out,
    };
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("the answer is not JSON ({e}): {out}"));
    let o = &v["hookSpecificOutput"];
    let decision = o["permissionDecision"].as_str().unwrap_or_else(|| panic!("no permissionDecision: {out}"));
    assert!(matches!(decision, "allow" | "ask" | "deny"), "decision {decision:?}");
    let updated = o["updatedInput"]["command"].as_str();
    if decision == "deny" {
        assert!(updated.is_none(), "a deny carries no command to run: {out}");
        return;
    }
    if decision == "allow"
        && let Some(e) = pinfold_fuzz::unparseable(command)
    {
        let sandboxed = updated.is_some_and(|u| u != command && u.contains(" exec --sandbox "));
        assert!(sandboxed, "unparseable text ({e}) allowed outside the sandbox: {out}");
    }
    if let Some(rewritten) = updated
        && rewritten != command
        && pinfold_shell::parse(command).is_ok()
        && let Some(e) = pinfold_fuzz::unparseable(rewritten)
    {
        panic!("the rewrite of a parseable command does not parse ({e}): {rewritten:?}");
    }
});
