//! The one glob matcher of pinfold: rule patterns, path sets, deny paths in the sandbox,
//! secret-looking variable names and audit queries all match text with it.
//!
//! A glob is text in which `*` matches any run of characters (none included, `/` included),
//! and, as the [`Syntax`] says, `?` matches any one character and `[…]` one character of a
//! class. Everything else, and a `[` that does not open a class, matches itself. There are no
//! escapes: a caller that wants literal text compares it directly (a quoted pattern token does).
//!
//! The callers read classes in two ways, kept apart by [`Classes`]: rules and path sets the
//! way the shell does ([`Classes::Shell`]: `[!…]` and `[^…]` negate, a `]` first in the class
//! is a member); the sandbox's deny paths end a class at its first `]` and negate with `!` only
//! ([`Classes::FirstBracket`]). Nothing needs `*` to stop at `/`: the sandbox matches one path
//! component at a time, and everything else means the whole text.
//!
//! # Example
//!
//! ```
//! use pinfold_glob::{is_match, is_match_prefix, Syntax};
//!
//! assert!(is_match("*.env*", "prod.env.local", Syntax::SHELL));
//! assert!(is_match("f[0-9]?", "f7x", Syntax::SHELL));
//! assert!(!is_match("f[0-9]", "f[0-9]", Syntax::SHELL));
//! assert!(is_match("f[0-9]", "f[0-9]", Syntax::STAR_QUESTION));
//! // Whether some ancestor of a path is under `/h/*/.ssh`, in one pass over the text.
//! assert!(is_match_prefix("/h/*/.ssh", "/h/me/.ssh/id_rsa", &[0, 2, 5, 10, 17], Syntax::SHELL));
//! ```
//!
//! # Cost
//!
//! [`is_match`] never recurses and keeps no state but two positions: a `*` records where it
//! stands, and a mismatch after it resumes one character further on from the last `*` only
//! (a match found from a later `*` can always be kept, so earlier ones need no second try).
//! Each attempt after a `*` reads at most the run of pattern up to the next `*`, and the
//! attempts of each run cover disjoint stretches of the text, so the work is at most
//! `(|text| + 1) × (longest run without a star + 1) + |pattern|` steps: linear in the text for
//! any pattern, and linear in both for `*a*a*a…` (a recursive matcher is exponential there).
//! No allocation for ASCII text and pattern; otherwise both are decoded into characters once.
//!
//! [`is_match_prefix`] answers for many prefixes of one text at once: the pattern runs as a
//! set of positions in it (an NFA) over the text once, `|text| × |pattern|` steps at most.

/// How `[` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classes {
    /// `[` is itself.
    Off,
    /// As the shell reads them: `[abc]`, ranges `[a-z]`, negation `[!…]` or `[^…]`; a `]`
    /// right after the `[` (or the negation) is a member, so `[]x]` is `]` or `x`; a `-` first
    /// or last is itself. A `[` that never closes is itself.
    Shell,
    /// The class ends at the first `]`; `[!…]` negates (`^` is a member); ranges as above.
    /// `[]` is not a class (its `[` is itself), and `[!]` matches any one character.
    FirstBracket,
}

/// What is special in a pattern besides `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Syntax {
    /// `?` matches any one character (otherwise it is itself).
    pub any_char: bool,
    /// How `[` is read.
    pub classes: Classes,
}

impl Syntax {
    /// `*` only: `?` and `[` are themselves.
    pub const STAR: Syntax = Syntax { any_char: false, classes: Classes::Off };
    /// `*` and `?`; `[` is itself.
    pub const STAR_QUESTION: Syntax = Syntax { any_char: true, classes: Classes::Off };
    /// `*`, `?` and classes as the shell reads them ([`Classes::Shell`]).
    pub const SHELL: Syntax = Syntax { any_char: true, classes: Classes::Shell };
    /// `*`, `?` and classes that end at their first `]` ([`Classes::FirstBracket`]).
    pub const FIRST_BRACKET: Syntax = Syntax { any_char: true, classes: Classes::FirstBracket };

    /// Whether `pattern` holds a character this syntax treats as special; without one, a
    /// pattern matches only itself.
    pub fn is_wild(self, pattern: &str) -> bool {
        pattern.bytes().any(|b| b == b'*' || (b == b'?' && self.any_char) || (b == b'[' && self.classes != Classes::Off))
    }
}

/// Whether `pattern` matches all of `text`.
#[inline]
pub fn is_match(pattern: &str, text: &str, syntax: Syntax) -> bool {
    if !syntax.is_wild(pattern) {
        return pattern == text;
    }
    // ASCII (nearly always) is matched byte by byte, without decoding into vectors.
    if pattern.is_ascii() && text.is_ascii() {
        return specialised(pattern.as_bytes(), text.as_bytes(), syntax);
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    specialised(&p, &t, syntax)
}

/// [`Classes`] as a constant parameter.
const OFF: u8 = 0;
const SHELL: u8 = 1;
const FIRST_BRACKET: u8 = 2;

/// [`match_at`] compiled for the syntax at hand, so that the loop tests no option at run time.
fn specialised<S: Sym>(p: &[S], t: &[S], syntax: Syntax) -> bool {
    match (syntax.any_char, syntax.classes) {
        (false, Classes::Off) => match_at::<S, false, OFF>(p, t),
        (true, Classes::Off) => match_at::<S, true, OFF>(p, t),
        (false, Classes::Shell) => match_at::<S, false, SHELL>(p, t),
        (true, Classes::Shell) => match_at::<S, true, SHELL>(p, t),
        (false, Classes::FirstBracket) => match_at::<S, false, FIRST_BRACKET>(p, t),
        (true, Classes::FirstBracket) => match_at::<S, true, FIRST_BRACKET>(p, t),
    }
}

/// Whether `pattern` matches `text[..n]`, as [`is_match`] would, for some `n` in `ends` (byte
/// offsets; those not on a character boundary are skipped). One pass over `text` for all of
/// them: matching each prefix on its own costs the sum of their lengths, quadratic for the
/// ancestors of a deep path.
pub fn is_match_prefix(pattern: &str, text: &str, ends: &[usize], syntax: Syntax) -> bool {
    match (syntax.any_char, syntax.classes) {
        (false, Classes::Off) => prefix_at::<false, OFF>(pattern, text, ends),
        (true, Classes::Off) => prefix_at::<true, OFF>(pattern, text, ends),
        (false, Classes::Shell) => prefix_at::<false, SHELL>(pattern, text, ends),
        (true, Classes::Shell) => prefix_at::<true, SHELL>(pattern, text, ends),
        (false, Classes::FirstBracket) => prefix_at::<false, FIRST_BRACKET>(pattern, text, ends),
        (true, Classes::FirstBracket) => prefix_at::<true, FIRST_BRACKET>(pattern, text, ends),
    }
}

/// [`is_match_prefix`] for one syntax: the pattern runs as a set of positions in it (an NFA),
/// which `*`, `?`, classes and single characters move the way [`match_at`] does.
fn prefix_at<const ANY_CHAR: bool, const CLASSES: u8>(pattern: &str, text: &str, ends: &[usize]) -> bool {
    enum El<'p> {
        Star,
        Any,
        Class(&'p [char]),
        Lit(char),
    }
    let p: Vec<char> = pattern.chars().collect();
    let mut els = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let el = match p[i] {
            '*' => El::Star,
            '?' if ANY_CHAR => El::Any,
            // Whether a class parses depends on the pattern only; one that does not is a `[`.
            '[' if CLASSES != OFF => match class::<char, CLASSES>(&p[i..], '[') {
                Some((_, len)) => El::Class(&p[i..i + len]),
                None => El::Lit('['),
            },
            c => El::Lit(c),
        };
        i += match el {
            El::Class(c) => c.len(),
            _ => 1,
        };
        els.push(el);
    }
    let n = els.len();
    // A star matches nothing too: the position after an active star is active.
    let close = |on: &mut [bool]| {
        for k in 0..n {
            if on[k] && matches!(els[k], El::Star) {
                on[k + 1] = true;
            }
        }
    };
    let mut ends = ends.to_vec();
    ends.sort_unstable();
    let mut ends = ends.into_iter().peekable();
    let mut on = vec![false; n + 1];
    let mut next = vec![false; n + 1];
    on[0] = true;
    close(&mut on);
    for (at, c) in text.char_indices() {
        while ends.next_if(|&e| e < at).is_some() {}
        if on[n] && ends.peek() == Some(&at) {
            return true;
        }
        if !on.contains(&true) {
            return false;
        }
        next.fill(false);
        for k in 0..n {
            if !on[k] {
                continue;
            }
            match els[k] {
                El::Star => next[k] = true,
                El::Any => next[k + 1] = true,
                El::Class(cl) => next[k + 1] |= class::<char, CLASSES>(cl, c).is_some_and(|(m, _)| m),
                El::Lit(l) => next[k + 1] |= l == c,
            }
        }
        close(&mut next);
        std::mem::swap(&mut on, &mut next);
    }
    on[n] && ends.any(|e| e == text.len())
}

/// A unit of matching: a byte of ASCII text, or a char.
trait Sym: Copy + Ord {
    fn is(self, c: char) -> bool;
}

impl Sym for u8 {
    fn is(self, c: char) -> bool {
        char::from(self) == c
    }
}

impl Sym for char {
    fn is(self, c: char) -> bool {
        self == c
    }
}

#[cfg(test)]
thread_local! {
    /// Steps taken by [`match_at`] on this thread: the unit tests bound them.
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn match_at<S: Sym, const ANY_CHAR: bool, const CLASSES: u8>(p: &[S], t: &[S]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen, and where in the text its match ends for now.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        #[cfg(test)]
        STEPS.with(|s| s.set(s.get() + 1));
        if pi < p.len() {
            let c = p[pi];
            if c.is('*') {
                star = Some((pi, ti));
                pi += 1;
                continue;
            } else if ANY_CHAR && c.is('?') {
                pi += 1;
                ti += 1;
                continue;
            } else if CLASSES != OFF && c.is('[') {
                match class::<S, CLASSES>(&p[pi..], t[ti]) {
                    Some((true, len)) => {
                        pi += len;
                        ti += 1;
                        continue;
                    }
                    Some((false, _)) => {}
                    None if t[ti].is('[') => {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                    None => {}
                }
            } else if c == t[ti] {
                pi += 1;
                ti += 1;
                continue;
            }
        }
        // A mismatch: the last star takes one more character, and the rest starts again there.
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi].is('*') {
        pi += 1;
    }
    pi == p.len()
}

/// A `[…]` class at the start of `p`: whether `c` is in it, and the class's length in `p`;
/// `None` when `p` does not start a class (its `[` is then itself).
fn class<S: Sym, const CLASSES: u8>(p: &[S], c: S) -> Option<(bool, usize)> {
    match CLASSES {
        SHELL => {
            let mut i = 1;
            let negate = p.get(1).is_some_and(|x| x.is('!') || x.is('^'));
            if negate {
                i += 1;
            }
            let start = i;
            let mut matched = false;
            while i < p.len() {
                if p[i].is(']') && i > start {
                    return Some((matched != negate, i + 1));
                }
                if i + 2 < p.len() && p[i + 1].is('-') && !p[i + 2].is(']') {
                    if p[i] <= c && c <= p[i + 2] {
                        matched = true;
                    }
                    i += 3;
                } else {
                    if p[i] == c {
                        matched = true;
                    }
                    i += 1;
                }
            }
            None
        }
        FIRST_BRACKET => {
            let end = p.iter().position(|x| x.is(']')).filter(|&e| e > 1)?;
            let mut body = &p[1..end];
            let negate = body[0].is('!');
            if negate {
                body = &body[1..];
            }
            let mut matched = false;
            let mut i = 0;
            while i < body.len() {
                if i + 2 < body.len() && body[i + 1].is('-') {
                    matched |= body[i] <= c && c <= body[i + 2];
                    i += 3;
                } else {
                    matched |= body[i] == c;
                    i += 1;
                }
            }
            Some((matched != negate, end + 1))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Syntax; 4] = [Syntax::STAR, Syntax::STAR_QUESTION, Syntax::SHELL, Syntax::FIRST_BRACKET];

    #[test]
    fn globs() {
        assert!(is_match("a*b", "axxb", Syntax::SHELL));
        assert!(is_match("*", "", Syntax::SHELL));
        assert!(is_match("x?z", "xyz", Syntax::SHELL));
        assert!(!is_match("x?z", "xz", Syntax::SHELL));
        assert!(is_match("f[0-9]", "f7", Syntax::SHELL));
        assert!(!is_match("f[!0-9]", "f7", Syntax::SHELL));
        assert!(is_match("*/.env*", "/p/.env", Syntax::SHELL));
        assert!(!is_match("abc", "abcd", Syntax::SHELL));
        assert!(is_match("a*b*c", "aXbYbZc", Syntax::SHELL));
        assert!(is_match("é*ü", "é/x/ü", Syntax::SHELL), "`*` crosses `/`, and characters are not bytes");
        assert!(is_match("?", "é", Syntax::SHELL));
    }

    #[test]
    fn the_syntaxes_differ_where_documented() {
        // `?` and `[` are themselves where the syntax says so.
        assert!(is_match("a?", "a?", Syntax::STAR));
        assert!(!is_match("a?", "ab", Syntax::STAR));
        assert!(is_match("a?", "ab", Syntax::STAR_QUESTION));
        assert!(is_match("[ab]", "[ab]", Syntax::STAR_QUESTION));
        assert!(!is_match("[ab]", "a", Syntax::STAR_QUESTION));
        // `^` negates in the shell's classes only.
        assert!(is_match("[^a]", "b", Syntax::SHELL));
        assert!(!is_match("[^a]", "b", Syntax::FIRST_BRACKET));
        assert!(is_match("[^a]", "^", Syntax::FIRST_BRACKET));
        // A leading `]` is a member in the shell's classes; the other reading ends the class
        // there, or (right after `[`) has no class at all.
        assert!(is_match("[]x]", "]", Syntax::SHELL));
        assert!(is_match("[]x]", "[]x]", Syntax::FIRST_BRACKET));
        assert!(is_match("[!]", "q", Syntax::FIRST_BRACKET));
        assert!(is_match("[!]", "[!]", Syntax::SHELL));
        // An unclosed `[` is itself in both.
        assert!(is_match("a[b", "a[b", Syntax::SHELL));
        assert!(is_match("a[b", "a[b", Syntax::FIRST_BRACKET));
    }

    /// The steps [`match_at`] takes for one match, and its answer.
    fn steps(p: &str, t: &str, syntax: Syntax) -> (bool, u64) {
        STEPS.with(|s| s.set(0));
        let hit = is_match(p, t, syntax);
        (hit, STEPS.with(|s| s.get()))
    }

    /// `*a*a*a…*a` against `aa…ab` costs a recursive matcher time exponential in the number
    /// of stars; here it is a walk over the text, for n = 1,000 and 10,000 alike.
    #[test]
    fn many_stars_cost_steps_linear_in_the_text() {
        for n in [1_000, 10_000] {
            let p = "*a".repeat(n);
            let t = format!("{}b", "a".repeat(n));
            for syntax in ALL {
                let (hit, s) = steps(&p, &t, syntax);
                assert!(!hit);
                assert!(s <= 3 * (t.len() as u64 + 1), "{n} stars: {s} steps");
                let (hit, s) = steps(&p, &"a".repeat(n), syntax);
                assert!(hit);
                assert!(s <= 3 * (n as u64 + 1), "{n} stars, matching: {s} steps");
            }
        }
    }

    /// The bound in the crate's documentation, for a run without stars as long as the text:
    /// `(|text| + 1) × (longest run + 1) + |pattern|` steps, linear in the text.
    #[test]
    fn steps_stay_within_the_documented_bound() {
        let cases = [("*aaab", "a".repeat(10_000)), ("*a?b*[ab]c*", "ab".repeat(5_000)), ("x*y*z", "xy".repeat(5_000))];
        for (p, t) in &cases {
            let longest = p.split('*').map(str::len).max().unwrap_or(0) as u64;
            for syntax in ALL {
                let (_, s) = steps(p, t, syntax);
                let bound = (t.len() as u64 + 1) * (longest + 1) + p.len() as u64;
                assert!(s <= bound, "{p:?}: {s} steps, bound {bound}");
            }
        }
    }

    /// The same family end to end, under a wall-clock bound a backtracking matcher blows by
    /// orders of magnitude: it runs on a thread so that a slow matcher fails instead of hanging.
    #[test]
    fn ten_thousand_stars_finish_in_time() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let n = 10_000;
            let hit = is_match(&"*a".repeat(n), &format!("{}b", "a".repeat(n)), Syntax::FIRST_BRACKET);
            let _ = tx.send(hit);
        });
        let hit = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("10,000 stars within 10 s");
        assert!(!hit);
    }

    #[test]
    fn bytes_and_chars_match_alike() {
        let pats = ["a*b", "*", "x?z", "f[0-9]", "f[!0-9]", "[]", "[", "a[", "*[a-c]*", "[!]x]", "[]x]", ".env*", "*/.env*", "a*b*c", "[^a]?*", "[a-]", "[!]"];
        let texts = ["", "ab", "axxb", "xyz", "f7", "fa", "[", "a[", "]", "x", "-", "b", ".env.local", "/p/.env", "aXbYbZc", "--", "^"];
        for syntax in ALL {
            for p in pats {
                for t in texts {
                    let (pc, tc): (Vec<char>, Vec<char>) = (p.chars().collect(), t.chars().collect());
                    assert_eq!(specialised(p.as_bytes(), t.as_bytes(), syntax), specialised(&pc, &tc, syntax), "{p} {t} {syntax:?}");
                }
            }
        }
    }

    #[test]
    fn prefix_matching_agrees_with_matching_each_prefix() {
        let pats = ["a*b", "*", "", "x?z", "f[0-9]", "f[!0-9]", "[]", "[", "a[", "*[a-c]*", "[!]x]", "[]x]", ".env*", "*/.env*", "a*b*c", "[^a]?*", "[a-]", "**", "/p/*/c", "?é*", "[é-ü]x", "*b", "[!]"];
        let texts = ["", "ab", "axxb", "xyz", "f7", "fa", "[", "a[", "]", "x", "-", "b", ".env.local", "/p/.env", "aXbYbZc", "--", "/p/x/c/d/c", "éa/b", "üx", "a/b/ab/b", "a?", "[!]"];
        for syntax in ALL {
            for p in pats {
                for t in texts {
                    let cuts: Vec<usize> = (0..=t.len()).collect();
                    for &n in &cuts {
                        let want = t.is_char_boundary(n) && is_match(p, &t[..n], syntax);
                        assert_eq!(is_match_prefix(p, t, &[n], syntax), want, "{p:?} {t:?}[..{n}] {syntax:?}");
                    }
                    let any = cuts.iter().any(|&n| t.is_char_boundary(n) && is_match(p, &t[..n], syntax));
                    assert_eq!(is_match_prefix(p, t, &cuts, syntax), any, "{p:?} {t:?} any prefix {syntax:?}");
                    assert!(!is_match_prefix(p, t, &[], syntax), "{p:?} {t:?} no prefix");
                }
            }
        }
    }
}
