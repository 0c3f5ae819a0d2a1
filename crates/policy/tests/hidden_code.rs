//! Code bash runs from inside a word (`$((x))` with `x='a[$(…)]'`, `${!x}`, `${x@P}`, a
//! subscript in a name `test -v` or `unset` resolves): pinfold cannot see it, so it is allowed
//! only where a sandbox holds it, asked without one, and denied when the default is deny.
//! What pinfold can prove inert — arithmetic on literals and on variables the input set to a
//! number, indirection to a plain name — adds nothing.

use pinfold_policy::config::{load_str, Action, Format, LoadOptions};
use pinfold_policy::Policy;

fn policy(text: &str) -> Policy {
    let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: Some("/home/me".into()), xdg_config_home: None };
    Policy::new(load_str("pinfold.toml", text, Format::Toml, &opts).expect("loads")).expect("compiles")
}

/// Every command is allowed by the default, and no sandbox exists: only hidden code asks.
const NO_SANDBOX: &str = "[defaults]\naction = \"allow\"\n";

#[test]
fn hidden_code_is_asked_without_a_sandbox() {
    let p = policy(NO_SANDBOX);
    let hidden = [
        "case ${x:='a[$(touch /tmp/m)]'}$((x)) in *) ;; esac",
        "for f in 'a[$(id)]'; do case $((f)) in *) ;; esac; done",
        "case ${x:='$(id)'}${x@P} in *) ;; esac",
        "case ${x:='a[$(id)]'}${!x} in *) ;; esac",
        "echo $((x))",
        "echo $[x+1]",
        "(( n + 1 ))",
        "for ((i=x; i<3; i++)); do :; done",
        "echo ${a[i]}",
        "a[i]=1",
        "echo ${s:i:2}",
        "let y=x",
        "test -v 'a[$(id)]'",
        "[ -v \"$v\" ]",
        "[[ a -eq 1 ]]",
        "[[ -v a[x] ]]",
        "unset 'a[$(id)]'",
        "unset \"$v\"",
        "read \"$v\"",
        "printf -v 'a[$(id)]' x",
        "declare -n r='a[$(id)]'",
        "for i in 1 2; do echo $((i)); done",
        "echo $(( $(cat n) ))",
        "echo $(($1))",
    ];
    for c in hidden {
        let j = p.judge(c, "/p".as_ref());
        assert_eq!(j.decision, Action::Ask, "`{c}`: {}", j.reason);
        assert!(j.reason.contains("pinfold cannot see that code"), "`{c}`: {}", j.reason);
    }
}

#[test]
fn what_is_provably_inert_adds_nothing() {
    let p = policy(NO_SANDBOX);
    let inert = [
        "echo $((1+2))",
        "x=3; echo $((x*2))",
        "x=0x10; echo $((x))",
        "echo $(( $# + $? ))",
        "echo $((RANDOM % 6))",
        "x=PATH; echo ${!x}",
        "echo ${!prefix*} ${!arr[@]}",
        "p='hi'; echo ${p@P}",
        "echo ${a[1]} ${a[@]}",
        "declare -A m; m[key]=1; echo ${m[key]}",
        "echo ${s:-default} ${s:=x}",
        "n=2; echo ${s:n:1}",
        "test -v name",
        "read line",
        "unset x",
        "case $x in *) ;; esac",
        "for f in *.txt; do echo \"$f\"; done",
    ];
    for c in inert {
        let j = p.judge(c, "/p".as_ref());
        assert_eq!(j.decision, Action::Allow, "`{c}`: {}", j.reason);
    }
}

#[test]
fn hidden_code_runs_in_the_default_sandbox_or_is_denied_by_a_deny_default() {
    let sandboxed = policy("extends = [\"pinfold:default\"]\n");
    let j = sandboxed.judge("case ${x:='a[$(id)]'}$((x)) in *) ;; esac", "/p".as_ref());
    assert_eq!(j.decision, Action::Allow, "{}", j.reason);
    assert_eq!(j.commands.len(), 1);
    assert_eq!(j.commands[0].sandbox.as_deref(), Some("workspace"));
    assert!(j.reason.contains("runs only inside the `workspace` sandbox"), "{}", j.reason);

    let deny = policy("[defaults]\naction = \"deny\"\n");
    let j = deny.judge("echo $((x))", "/p".as_ref());
    assert_eq!(j.decision, Action::Deny, "{}", j.reason);
}
