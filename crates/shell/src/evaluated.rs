//! Code that bash runs from inside a word, where no command is written.
//!
//! Bash evaluates some values as code: an arithmetic context (`$((x))`, `((x))`, `let x`, an
//! indexed array's subscript `a[x]`, a substring offset `${s:x}`, `[[ x -eq y ]]`) evaluates
//! a variable's value as an arithmetic expression, and an expression may hold an array
//! subscript with a command substitution: with `x='a[$(rm -rf ~)]'`, `echo $((x))` runs
//! `rm -rf ~`. So does indirection (`${!x}` with `x='a[$(…)]'`), prompt expansion
//! (`${x@P}`), and every builtin that takes a variable name which may carry a subscript
//! (`test -v`, `read`, `printf -v`, `declare`, `unset`…). None of that code is visible in
//! the text, so the parser cannot list it as a command.
//!
//! Each function here says why a construct may run such code, or `None` when it provably
//! cannot: every value it evaluates is a literal, or a variable the walker knows holds an
//! integer (or a plain name, for indirection). The walker turns each `Some` into a command of
//! kind [`crate::CommandKind::Evaluated`].

use crate::word::Vars;

/// Bash's own integer variables: evaluating them runs nothing, unless the input assigns them.
const INTEGER_VARIABLES: &[&str] =
    &["RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS"];

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `s` is a variable name.
pub(crate) fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && is_name_start(b[0]) && b.iter().all(|&c| is_name_byte(c))
}

/// A value arithmetic evaluation reads as a plain number: empty, decimal, `0x…` or `BASE#…`.
fn is_integer(v: &str) -> bool {
    let v = v.trim();
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.is_empty() || (v.as_bytes()[0].is_ascii_digit() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'#' || b == b'_' || b == b'@'))
}

/// Evaluating the variable `name` as arithmetic runs nothing.
fn inert_in_arithmetic(name: &str, vars: &Vars) -> bool {
    match vars.get(name) {
        Some(v) => is_integer(v),
        None => INTEGER_VARIABLES.contains(&name) && !vars.touched(name),
    }
}

/// Why evaluating the arithmetic expression `expr` (its text, delimiters removed) may run
/// code; `None` when everything it evaluates is a literal or a variable known to hold a number.
pub(crate) fn arithmetic(expr: &str, vars: &Vars) -> Option<String> {
    let b = expr.as_bytes();
    let mut i = 0;
    // Names assigned with `=` earlier in this expression: an assignment stores a number.
    let mut assigned: Vec<&str> = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() {
            // A number, in any base (`0x1f`, `16#ff`, `64#_@`).
            while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'#' | b'_' | b'@')) {
                i += 1;
            }
            continue;
        }
        if is_name_start(c) {
            let start = i;
            while i < b.len() && is_name_byte(b[i]) {
                i += 1;
            }
            let name = &expr[start..i];
            if is_assigned(b, i) {
                // `x = …`, `a[i] = …`: the target is written, not read (its subscript is
                // read, and scanned next).
                assigned.push(name);
                continue;
            }
            if !assigned.contains(&name) && !inert_in_arithmetic(name, vars) {
                return Some(format!("evaluates the value of `{name}` as arithmetic, which can run code"));
            }
            continue;
        }
        match c {
            b'`' => return Some("evaluates a command's output as arithmetic, which can run code".into()),
            b'\\' => i += 2,
            b'$' => {
                let next = b.get(i + 1).copied().unwrap_or(b' ');
                match next {
                    b'(' | b'[' => return Some("evaluates a command's output or an expansion as arithmetic, which can run code".into()),
                    b'#' | b'?' | b'$' | b'!' => i += 2,
                    b'{' => {
                        let Some(close) = expr[i..].find('}') else {
                            return Some("evaluates an expansion as arithmetic, which can run code".into());
                        };
                        let inner = &expr[i + 2..i + close];
                        if !(is_name(inner) && inert_in_arithmetic(inner, vars)) {
                            return Some(format!("evaluates `${{{inner}}}` as arithmetic, which can run code"));
                        }
                        i += close + 1;
                    }
                    n if is_name_start(n) => {
                        let start = i + 1;
                        i = start;
                        while i < b.len() && is_name_byte(b[i]) {
                            i += 1;
                        }
                        let name = &expr[start..i];
                        if !inert_in_arithmetic(name, vars) {
                            return Some(format!("evaluates the value of `${name}` as arithmetic, which can run code"));
                        }
                    }
                    b'0'..=b'9' | b'@' | b'*' | b'-' => {
                        return Some("evaluates a positional parameter as arithmetic, which can run code".into());
                    }
                    _ => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether the name ending at `b[end]` is the target of a plain `=` (not `==`), possibly
/// through a subscript: `x = 1`, `a[i+1]=2`.
fn is_assigned(b: &[u8], end: usize) -> bool {
    let skip = |mut k: usize| {
        while k < b.len() && b[k].is_ascii_whitespace() {
            k += 1;
        }
        k
    };
    let mut k = skip(end);
    if b.get(k) == Some(&b'[') {
        let mut depth = 0usize;
        while k < b.len() {
            match b[k] {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        k = skip(k + 1);
    }
    b.get(k) == Some(&b'=') && b.get(k + 1) != Some(&b'=')
}

/// The subscript of `name[sub]…` (up to the bracket that closes the first one), if any.
fn subscript(text: &str) -> Option<&str> {
    let open = text.find('[')?;
    let mut depth = 0usize;
    for (k, ch) in text[open..].char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[open + 1..open + k]);
                }
            }
            _ => {}
        }
    }
    Some(&text[open + 1..])
}

/// Why the array reference `text` (`a[sub]`, possibly followed by more) may run code when bash
/// evaluates its subscript: an indexed array's subscript is arithmetic. `assoc` names the
/// associative arrays the input declared, whose keys are plain strings.
pub(crate) fn subscripted(text: &str, vars: &Vars, assoc: &[String]) -> Option<String> {
    let name = &text[..text.find('[').unwrap_or(text.len())];
    let sub = subscript(text)?;
    if sub == "@" || sub == "*" || assoc.iter().any(|a| a == name) {
        return None;
    }
    arithmetic(sub, vars).map(|why| format!("the subscript of `{name}[…]` {why}"))
}

/// Why the parameter expansion `text` (`${…}`, braces included) may run code: indirection to a
/// name that may carry a subscript, prompt expansion, or a substring offset.
pub(crate) fn expansion(text: &str, vars: &Vars) -> Option<String> {
    let inner = text.strip_prefix("${")?.strip_suffix('}')?;
    if let Some(rest) = inner.strip_prefix('!') {
        // `${!prefix*}`, `${!prefix@}` list names; `${!a[@]}` lists keys: nothing evaluated.
        let name_len = rest.bytes().take_while(|&b| is_name_byte(b)).count();
        let after = &rest[name_len..];
        if name_len == 0 || after.starts_with('*') || after.starts_with('@') || after.starts_with("[@]") || after.starts_with("[*]") {
            return None;
        }
        let name = &rest[..name_len];
        return match vars.get(name) {
            Some(v) if is_name(v) => None,
            _ => Some(format!("`${{!{name}}}` expands the variable named by the value of `{name}`, which can run code")),
        };
    }
    let name_len = match inner.as_bytes().first() {
        Some(&b) if is_name_start(b) => inner.bytes().take_while(|&b| is_name_byte(b)).count(),
        Some(b'0'..=b'9' | b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-') => 1,
        _ => return None,
    };
    let name = &inner[..name_len];
    let mut rest = &inner[name_len..];
    if rest.starts_with('[') {
        // Subscripts are walked as their own nodes; skip to what follows.
        match subscript(rest) {
            Some(sub) => rest = &rest[(sub.len() + 2).min(rest.len())..],
            None => return None,
        }
    }
    if rest == "@P" {
        return match vars.get(name) {
            Some(v) if !v.contains(['$', '`', '\\']) => None,
            _ => Some(format!("`${{{name}@P}}` expands the value of `{name}` as a prompt, which can run code")),
        };
    }
    if let Some(offsets) = rest.strip_prefix(':')
        && !offsets.starts_with(['-', '=', '?', '+'])
    {
        // `${s:offset}`, `${s:offset:length}`: both arithmetic.
        for part in offsets.splitn(2, ':') {
            if let Some(why) = arithmetic(part, vars) {
                return Some(format!("the offset in `${{{name}:…}}` {why}"));
            }
        }
    }
    None
}

/// Builtins whose operands (past their options) are variable names that bash resolves,
/// subscripts included.
pub(crate) fn takes_names(builtin: &str) -> bool {
    matches!(
        builtin,
        "read" | "declare" | "typeset" | "local" | "export" | "readonly" | "unset" | "mapfile" | "readarray" | "getopts"
    )
}

/// Why the variable-name operand `text` of a builtin may run code: a name known only at run
/// time may carry any subscript, and a written subscript is evaluated.
pub(crate) fn name_operand(builtin: &str, text: &str, dynamic: bool, vars: &Vars, assoc: &[String]) -> Option<String> {
    if dynamic {
        return Some(format!("`{builtin}` resolves a variable name known only at run time (`{text}`), whose subscript can run code"));
    }
    let name_part = text.split('=').next().unwrap_or(text);
    if name_part.contains('[') {
        return subscripted(name_part, vars, assoc).map(|why| format!("`{builtin} {name_part}`: {why}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::word::Var;

    fn vars(known: &[(&str, &str)]) -> Vars {
        let mut v = Vars::default();
        for (k, val) in known {
            v.map.insert(k.to_string(), Var::Known(val.to_string()));
        }
        v.map.insert("u".into(), Var::Unknown);
        v
    }

    #[test]
    fn arithmetic_on_literals_and_known_numbers_is_inert() {
        let v = vars(&[("n", "3"), ("h", "0x1f"), ("e", "")]);
        for e in ["1+2", "n*2", "$n+1", "${n}", "h", "16#ff + 2#101", "e", "$# + $? + $$", "RANDOM % 6", "n++ , n=4", " ( n ) ", "i=0; i<3; i++", "y = 1 + 2", "a[1]=2"] {
            assert_eq!(arithmetic(e, &v), None, "{e}");
        }
    }

    #[test]
    fn arithmetic_on_unknown_or_non_numeric_values_may_run_code() {
        let v = vars(&[("x", "a[$(id)]"), ("w", "abc")]);
        for e in ["x", "$x", "${x}", "u+1", "w", "$1", "$@", "$(cat f)", "`cat f`", "${x:-1}", "a[$(id)]", "HOME", "i=u", "u += 1", "u == 1", "a[u]=1", "i=0; i<u"] {
            assert!(arithmetic(e, &v).is_some(), "{e}");
        }
        let mut assigned = vars(&[]);
        assigned.map.insert("RANDOM".into(), Var::Unknown);
        assert!(arithmetic("RANDOM", &assigned).is_some(), "a builtin integer the input assigned");
    }

    #[test]
    fn expansions() {
        let v = vars(&[("p", "PATH"), ("q", "a[$(id)]"), ("plain", "hello"), ("n", "2")]);
        assert_eq!(expansion("${!p}", &v), None);
        assert!(expansion("${!q}", &v).is_some());
        assert!(expansion("${!u}", &v).is_some());
        assert_eq!(expansion("${!pre*}", &v), None);
        assert_eq!(expansion("${!arr[@]}", &v), None);
        assert_eq!(expansion("${plain@P}", &v), None);
        assert!(expansion("${q@P}", &v).is_some());
        assert!(expansion("${u@P}", &v).is_some());
        assert_eq!(expansion("${s:n:2}", &v), None);
        assert!(expansion("${s:u}", &v).is_some());
        assert!(expansion("${s: -u}", &v).is_some());
        assert_eq!(expansion("${s:-u}", &v), None, "a default value, not an offset");
        assert_eq!(expansion("${x:=a[$(id)]}", &v), None, "assigns; evaluates nothing");
        assert_eq!(expansion("${a[u]}", &v), None, "subscripts are walked as their own nodes");
    }

    #[test]
    fn subscripts_and_names() {
        let v = vars(&[("n", "1")]);
        assert_eq!(subscripted("a[n]", &v, &[]), None);
        assert_eq!(subscripted("a[@]", &v, &[]), None);
        assert!(subscripted("a[u]", &v, &[]).is_some());
        assert!(subscripted("a[$(id)]", &v, &[]).is_some());
        assert_eq!(subscripted("m[key]", &v, &["m".to_string()]), None, "associative keys are strings");
        assert!(name_operand("read", "x", true, &v, &[]).is_some());
        assert!(name_operand("unset", "a[$(id)]", false, &v, &[]).is_some());
        assert_eq!(name_operand("declare", "x=a[1]", false, &v, &[]), None, "the value is not a name");
        assert_eq!(name_operand("read", "line", false, &v, &[]), None);
    }
}
