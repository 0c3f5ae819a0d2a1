//! Turning a word-like syntax node into the value(s) bash would pass as argv.
//!
//! Quotes and escapes are removed, known variables substituted, and anything that is only
//! known at run time marked dynamic. An unquoted expansion of a known value is split into
//! fields the way bash splits it with the default `IFS`.

use std::collections::HashMap;

use crate::syntax::Node;

use crate::Word;

/// What the walker knows about a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Var {
    /// Assigned a static value in the input, unconditionally as far as we can tell.
    Known(String),
    /// Assigned something we cannot know (dynamic value, conditional, loop, `read`…).
    Unknown,
}

/// Variable knowledge shared by the walker and the word builder.
#[derive(Debug, Default, Clone)]
pub(crate) struct Vars {
    pub map: HashMap<String, Var>,
    /// Set after `source`/`.`/`IFS=` and similar: nothing can be known any more.
    pub poisoned: bool,
    /// Arrays the input declared associative (`declare -A m`): their subscripts are strings,
    /// not arithmetic.
    pub assoc: Vec<String>,
}

impl Vars {
    pub fn get(&self, name: &str) -> Option<&str> {
        if self.poisoned {
            return None;
        }
        match self.map.get(name) {
            Some(Var::Known(v)) => Some(v),
            _ => None,
        }
    }

    /// Whether the input assigned the variable at all (so `$HOME` is not the real home).
    pub fn touched(&self, name: &str) -> bool {
        self.poisoned || self.map.contains_key(name)
    }
}

/// The fields of one word: almost always exactly one, so the first is kept inline and the
/// list is allocated only when a known value splits (a `Vec` per word showed in profiles).
#[derive(Debug, Default)]
struct Fields {
    first: Option<String>,
    more: Vec<String>,
}

impl Fields {
    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    fn push(&mut self, f: String) {
        if self.first.is_none() {
            self.first = Some(f);
        } else {
            self.more.push(f);
        }
    }

    fn first(&self) -> Option<&String> {
        self.first.as_ref()
    }

    fn last(&self) -> Option<&String> {
        self.more.last().or(self.first.as_ref())
    }

    fn last_mut(&mut self) -> Option<&mut String> {
        match self.more.last_mut() {
            Some(l) => Some(l),
            None => self.first.as_mut(),
        }
    }

    fn pop(&mut self) -> Option<String> {
        self.more.pop().or_else(|| self.first.take())
    }

    fn into_iter(self) -> impl Iterator<Item = String> {
        self.first.into_iter().chain(self.more)
    }
}

/// Accumulates fields while walking the parts of one word.
struct Acc<'a> {
    src: &'a str,
    vars: &'a Vars,
    fields: Fields,
    /// Whether the current (last) field has begun; an unquoted empty expansion alone
    /// produces no field at all.
    open: bool,
    dynamic: bool,
    splits: bool,
    glob: bool,
    tilde: bool,
    /// Byte index (in the first field) right after a leading `$HOME`, if the word starts so.
    home_end: Option<usize>,
    dynamic_parts: usize,
    /// Brace expansion detector: saw an unquoted `{`, then `,`/`..`, then `}`.
    brace: u8,
}

impl<'a> Acc<'a> {
    fn cur(&mut self) -> &mut String {
        if self.fields.is_empty() {
            self.fields.push(String::new());
        }
        self.open = true;
        self.fields.last_mut().expect("just ensured")
    }

    fn literal(&mut self, s: &str) {
        self.cur().push_str(s);
    }

    fn dynamic(&mut self, source: &str, quoted: bool) {
        self.dynamic = true;
        self.dynamic_parts += 1;
        if !quoted {
            self.splits = true;
        }
        self.cur().push_str(source);
    }

    /// An expansion whose value is known: quoted, it is literal; unquoted, bash splits it
    /// on blanks and expands globs in it.
    fn known(&mut self, value: &str, quoted: bool) {
        if quoted {
            self.literal(value);
            return;
        }
        if value.contains(['*', '?', '[']) {
            self.glob = true;
        }
        let mut first = true;
        let starts_blank = value.starts_with([' ', '\t', '\n']);
        for piece in value.split([' ', '\t', '\n']) {
            if !first || starts_blank {
                // A blank separates fields: close the current field if it has begun.
                if self.open {
                    self.fields.push(String::new());
                    self.open = false;
                }
            }
            if !piece.is_empty() {
                if self.fields.is_empty() {
                    self.fields.push(String::new());
                }
                self.open = true;
                self.fields.last_mut().expect("non-empty").push_str(piece);
            }
            first = false;
        }
        // A trailing blank also ends the field; drop an empty unopened tail.
        if value.ends_with([' ', '\t', '\n']) && self.open {
            self.fields.push(String::new());
            self.open = false;
        }
    }

    fn unquoted_text(&mut self, raw: &str, at_start: bool) {
        // Most words hold nothing this loop looks for: no escape, glob, tilde or brace (and
        // `,` `.` `}` only matter after an unquoted `{`).
        if self.brace == 0 && !raw.bytes().any(|b| matches!(b, b'\\' | b'*' | b'?' | b'[' | b'~' | b'{')) {
            self.literal(raw);
            return;
        }
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars().peekable();
        let mut first = at_start;
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('\n') | None => {}
                    Some(n) => out.push(n),
                },
                '*' | '?' | '[' => {
                    self.glob = true;
                    out.push(c);
                }
                '~' if first => {
                    self.tilde = true;
                    out.push(c);
                }
                '{' => {
                    self.brace = self.brace.max(1);
                    out.push(c);
                }
                ',' if self.brace == 1 => {
                    self.brace = 2;
                    out.push(c);
                }
                '.' if self.brace == 1 && chars.peek() == Some(&'.') => {
                    self.brace = 2;
                    out.push(c);
                }
                '}' if self.brace == 2 => {
                    self.brace = 3;
                    out.push(c);
                }
                _ => out.push(c),
            }
            first = false;
        }
        self.literal(&out);
    }

    fn node(&mut self, node: Node<'_>, quoted: bool) {
        let text = &self.src[node.byte_range()];
        let at_start = self.fields.is_empty() || (self.fields.len() == 1 && self.fields.first().is_some_and(|f| f.is_empty()));
        match crate::kind(&node) {
            "word" | "number" if !quoted => self.unquoted_text(text, at_start),
            "word" | "number" | "string_content" | "heredoc_content" | "variable_name" => self.literal(text),
            "extglob_pattern" => {
                self.glob = true;
                self.literal(text);
            }
            "raw_string" => {
                let inner = text.get(1..text.len().saturating_sub(1)).unwrap_or("");
                self.literal(inner);
            }
            "ansi_c_string" => match ansi_c(text.get(2..text.len().saturating_sub(1)).unwrap_or("")) {
                Some(v) => self.literal(&v),
                None => self.dynamic(text, true),
            },
            "string" | "translated_string" => self.double_quoted(node),
            "simple_expansion" | "expansion" => self.expansion(node, text, quoted, at_start),
            "concatenation" => {
                for child in node.children() {
                    self.node(child, quoted);
                }
            }
            "$" => self.literal("$"),
            // Command substitution, arithmetic, process substitution, brace expressions and
            // anything unexpected: known only at run time.
            _ => self.dynamic(text, quoted),
        }
    }

    fn double_quoted(&mut self, node: Node<'_>) {
        let start = node.start_byte();
        let end = node.end_byte();
        let text = &self.src[start..end];
        // Content between the quotes (`$"…"` has one more leading byte).
        let open = if text.starts_with("$\"") { 2 } else { 1 };
        let content_start = start + open;
        let content_end = if text.len() > open && text.ends_with('"') { end - 1 } else { end };
        // Ensure the field exists even for `""` (an empty quoted word is still a word).
        self.cur();
        let mut pos = content_start;
        for child in node.named_children() {
            match crate::kind(&child) {
                "string_content" => continue,
                _ => {
                    if child.start_byte() > pos {
                        let lit = dquote_unescape(&self.src[pos..child.start_byte()]);
                        self.literal(&lit);
                    }
                    self.node(child, true);
                    pos = child.end_byte();
                }
            }
        }
        if content_end > pos {
            let lit = dquote_unescape(&self.src[pos..content_end]);
            self.literal(&lit);
        }
    }

    fn expansion(&mut self, node: Node<'_>, text: &str, quoted: bool, at_start: bool) {
        let Some(name) = plain_expansion_name(text) else {
            self.dynamic(text, quoted);
            return;
        };
        let _ = node;
        if let Some(v) = self.vars.get(name) {
            let v = v.to_string();
            self.known(&v, quoted);
        } else {
            self.dynamic(text, quoted);
            if name == "HOME" && at_start && !self.vars.touched("HOME") {
                self.home_end = Some(self.fields.last().map_or(0, |f| f.len()));
            }
        }
    }
}

/// `$NAME` or `${NAME}` (no operators, no special parameters) → `NAME`.
fn plain_expansion_name(text: &str) -> Option<&str> {
    let name = if let Some(rest) = text.strip_prefix("${") {
        rest.strip_suffix('}')?
    } else {
        text.strip_prefix('$')?
    };
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Some(name)
    } else {
        None
    }
}

/// Remove the escapes bash honours inside double quotes.
fn dquote_unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().expect("peeked")),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Decode the body of `$'…'`. `None` for escapes we do not decode (the word is then
/// treated as dynamic, which is the stricter reading).
fn ansi_c(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let simple = match e {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            '?' => Some('?'),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 3),
            _ => return None,
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => digits.push(chars.next().expect("peeked")),
                _ => break,
            }
        }
        let n = u32::from_str_radix(&digits, radix).ok()?;
        if n == 0 {
            // bash truncates the string at a NUL; we do not model that.
            return None;
        }
        out.push(char::from_u32(n)?);
    }
    Some(out)
}

/// The fields bash would produce from one word node. Usually one; an unquoted expansion of
/// a known value with blanks splits into several, an unquoted empty one into none.
pub(crate) fn fields(node: Node<'_>, src: &str, vars: &Vars, span: std::ops::Range<usize>, out: &mut Vec<Word>) {
    let mut acc = Acc {
        src,
        vars,
        fields: Fields::default(),
        open: false,
        dynamic: false,
        splits: false,
        glob: false,
        tilde: false,
        home_end: None,
        dynamic_parts: 0,
        brace: 0,
    };
    acc.node(node, false);
    if acc.brace == 3 {
        // Brace expansion (`{a,b}`, `{1..3}`) yields several words we do not enumerate.
        acc.dynamic = true;
        acc.splits = true;
    }
    let mut fields = acc.fields;
    if fields.last().is_some_and(|f| f.is_empty()) && fields.len() > 1 {
        fields.pop();
    }
    let home_suffix = match acc.home_end {
        Some(end) if acc.dynamic_parts == 1 && fields.len() == 1 => {
            let rest = fields.first().map_or("", |f| &f[end..]);
            (rest.is_empty() || rest.starts_with('/')).then(|| rest.to_string())
        }
        _ => None,
    };
    let n = fields.len();
    out.extend(fields.into_iter().map(|text| Word {
        span: span.clone(),
        text,
        dynamic: acc.dynamic,
        splits: acc.splits,
        glob: acc.glob,
        tilde: acc.tilde,
        home_suffix: if n == 1 { home_suffix.clone() } else { None },
    }));
}

/// One word, never split: for assignment values and redirect targets, where bash does not
/// split.
pub(crate) fn single(node: Node<'_>, src: &str, vars: &Vars, span: std::ops::Range<usize>) -> Word {
    let mut acc = Acc {
        src,
        vars,
        fields: Fields::default(),
        open: false,
        dynamic: false,
        splits: false,
        glob: false,
        tilde: false,
        home_end: None,
        dynamic_parts: 0,
        brace: 0,
    };
    // Assignment values are not split: treat the whole node as quoted for expansions, but
    // keep unquoted escape handling for literal words.
    acc.node_unsplit(node);
    let text = acc.fields.into_iter().collect::<String>();
    Word {
        span,
        text,
        dynamic: acc.dynamic,
        splits: false,
        glob: false,
        tilde: acc.tilde,
        home_suffix: None,
    }
}

impl Acc<'_> {
    fn node_unsplit(&mut self, node: Node<'_>) {
        match crate::kind(&node) {
            "concatenation" => {
                for child in node.children() {
                    self.node_unsplit(child);
                }
            }
            "simple_expansion" | "expansion" => {
                let text = &self.src[node.byte_range()];
                self.expansion(node, text, true, false);
            }
            _ => self.node(node, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_decodes_common_escapes() {
        assert_eq!(ansi_c(r"a\nb\x41\u00e9\101\'").as_deref(), Some("a\nbAéA'"));
        assert_eq!(ansi_c(r"\x00"), None);
        assert_eq!(ansi_c(r"\q"), None);
    }

    #[test]
    fn plain_names() {
        assert_eq!(plain_expansion_name("$X"), Some("X"));
        assert_eq!(plain_expansion_name("${X_1}"), Some("X_1"));
        assert_eq!(plain_expansion_name("${X:-a}"), None);
        assert_eq!(plain_expansion_name("$1"), None);
        assert_eq!(plain_expansion_name("$@"), None);
    }

    #[test]
    fn dquote_escapes() {
        assert_eq!(dquote_unescape(r#"a\"b\$c\d\\"#), r#"a"b$c\d\"#);
    }
}
