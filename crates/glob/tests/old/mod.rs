//! The glob matchers pinfold had before `pinfold-glob`, verbatim: the differential test's
//! oracles and the benchmark's baseline. Not used by any crate.
#![allow(dead_code)]

/// The rule matcher's (policy): `*`, `?`, shell classes; ASCII as bytes.
pub mod policy {
    pub fn glob_match(pat: &str, text: &str) -> bool {
        if !pat.contains(['*', '?', '[']) {
            return pat == text;
        }
        if pat.is_ascii() && text.is_ascii() {
            return glob_at(pat.as_bytes(), text.as_bytes());
        }
        let p: Vec<char> = pat.chars().collect();
        let t: Vec<char> = text.chars().collect();
        glob_at(&p, &t)
    }

    pub fn glob_match_prefix(pat: &str, text: &str, ends: &[usize]) -> bool {
        enum El<'p> {
            Star,
            Any,
            Class(&'p [char]),
            Lit(char),
        }
        let p: Vec<char> = pat.chars().collect();
        let mut els = Vec::with_capacity(p.len());
        let mut i = 0;
        while i < p.len() {
            let el = match p[i] {
                '*' => El::Star,
                '?' => El::Any,
                '[' => match class(&p[i..], '[') {
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
                    El::Class(cl) => next[k + 1] |= class(cl, c).is_some_and(|(m, _)| m),
                    El::Lit(l) => next[k + 1] |= l == c,
                }
            }
            close(&mut next);
            std::mem::swap(&mut on, &mut next);
        }
        on[n] && ends.any(|e| e == text.len())
    }

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

    fn glob_at<S: Sym>(p: &[S], t: &[S]) -> bool {
        let (mut pi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            if pi < p.len() {
                let c = p[pi];
                if c.is('*') {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                } else if c.is('?') {
                    pi += 1;
                    ti += 1;
                    continue;
                } else if c.is('[') {
                    if let Some((matched, len)) = class(&p[pi..], t[ti]) {
                        if matched {
                            pi += len;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti].is('[') {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                } else if c == t[ti] {
                    pi += 1;
                    ti += 1;
                    continue;
                }
            }
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

    fn class<S: Sym>(p: &[S], c: S) -> Option<(bool, usize)> {
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
}

/// The sandbox's deny-path component matcher (recursive, exponential on `*a*a…`).
pub fn sandbox_paths(p: &str, t: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some('['), Some(c)) => match p.iter().position(|x| *x == ']') {
                Some(end) if end > 1 => {
                    let class = &p[1..end];
                    let (neg, class) = if class.first() == Some(&'!') { (true, &class[1..]) } else { (false, class) };
                    let mut hit = false;
                    let mut i = 0;
                    while i < class.len() {
                        if i + 2 < class.len() && class[i + 1] == '-' {
                            hit |= class[i] <= *c && *c <= class[i + 2];
                            i += 3;
                        } else {
                            hit |= class[i] == *c;
                            i += 1;
                        }
                    }
                    (hit != neg) && go(&p[end + 1..], &t[1..])
                }
                _ => *c == '[' && go(&p[1..], &t[1..]),
            },
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = p.chars().collect();
    let t: Vec<char> = t.chars().collect();
    go(&p, &t)
}

/// The sandbox's secret-name matcher: `*` only, bytes, with its shortcut.
pub mod sandbox_env {
    pub fn glob(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => glob(&p[1..], t) || (!t.is_empty() && glob(p, &t[1..])),
            (Some(a), Some(b)) if a == b => glob(&p[1..], &t[1..]),
            _ => false,
        }
    }

    pub fn matches(p: &str, t: &str) -> bool {
        let (lead, rest) = match p.strip_prefix('*') {
            Some(r) => (true, r),
            None => (false, p),
        };
        let (trail, mid) = match rest.strip_suffix('*') {
            Some(m) => (true, m),
            None => (false, rest),
        };
        if mid.contains('*') {
            return glob(p.as_bytes(), t.as_bytes());
        }
        match (lead, trail) {
            (false, false) => t == mid,
            (true, false) => t.ends_with(mid),
            (false, true) => t.starts_with(mid),
            (true, true) => t.contains(mid),
        }
    }
}

/// The audit query matcher: `*` and `?`, two pointers.
pub fn audit(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

