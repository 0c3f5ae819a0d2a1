//! Where bash reads text differently from tree-sitter-bash, the input is unparseable.
//!
//! pinfold judges the commands its parser finds; bash runs the commands *it* finds. Where
//! the two disagree, a command can run that was never judged — and, through a hook's
//! rewrite, run in the agent's own shell, outside any sandbox. Each check here names one
//! place where tree-sitter-bash is known to read bash differently, and fails closed there:
//!
//! * a carriage return: bash reads it as part of a word (`a\r# ; cmd` runs `cmd`), the
//!   parser as a line end;
//! * a `#` that bash reads inside a word (after `]`, `}`, or a line continuation), which the
//!   parser takes for a comment hiding the rest of the line;
//! * a line continuation (`\` at a line's end) that joins the word before it to the next
//!   line (`x=\`, a line of `\` alone): bash removes it before reading words, the parser
//!   does not always; one after a blank or an operator (`cmd \`, `a &&\`) reads alike;
//! * a `$` at a line's end: a literal `$` for bash, the start of an expansion that swallows
//!   the newline for the parser (`cat <$⏎rm -rf x` hides `rm`);
//! * a line of an unquoted heredoc's body that a continuation joins into its delimiter
//!   (`EO\⏎F`): bash ends the heredoc there, the parser reads on.
//!
//! Text inside quotes, comments and quoted heredocs is left alone: none of this applies there.

use std::ops::Range;

use crate::syntax::{Node, SyntaxTree};
use crate::Unparseable;

fn err(offset: usize, detail: &str) -> Unparseable {
    Unparseable::Syntax { offset, detail: detail.to_string() }
}

/// Whether the byte at `i` is a `\` that escapes what follows (an odd run of backslashes
/// ends there).
fn escaping(b: &[u8], i: usize) -> bool {
    let run = b[..=i].iter().rev().take_while(|&&c| c == b'\\').count();
    run % 2 == 1
}

/// The byte bash sees before position `at`, skipping line continuations; `None` at the start.
fn previous(b: &[u8], at: usize) -> Option<(usize, u8)> {
    let mut k = at;
    while k > 0 {
        k -= 1;
        if b[k] == b'\n' && k > 0 && b[k - 1] == b'\\' && escaping(b, k - 1) {
            k -= 1;
            continue;
        }
        return Some((k, b[k]));
    }
    None
}

/// Check `text` (parsed as `tree`) for the places listed in the module docs.
pub(crate) fn check(text: &str, tree: &SyntaxTree) -> Result<(), Unparseable> {
    let b = text.as_bytes();
    if let Some(at) = memchr::memchr(b'\r', b) {
        return Err(err(at, "a carriage return, which bash reads as part of a word, not as a line end"));
    }
    // Ranges where none of this applies, and the unquoted heredoc bodies.
    let mut quiet: Vec<Range<usize>> = Vec::new();
    let mut heredocs: Vec<Node<'_>> = Vec::new();
    let mut comments: Vec<usize> = Vec::new();
    for n in tree.all() {
        match crate::kind(&n) {
            "comment" => {
                comments.push(n.start_byte());
                quiet.push(n.byte_range());
            }
            "raw_string" | "ansi_c_string" | "string" | "translated_string" => quiet.push(n.byte_range()),
            "heredoc_body" => {
                if unquoted_heredoc(&n, text).is_some() {
                    heredocs.push(n);
                }
                quiet.push(n.byte_range());
            }
            _ => {}
        }
    }
    // Their union, as disjoint sorted ranges, to look up in logarithmic time.
    quiet.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(quiet.len());
    for r in quiet {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let in_quiet = |at: usize| {
        let k = merged.partition_point(|r| r.start <= at);
        k > 0 && merged[k - 1].contains(&at)
    };
    for at in comments {
        if let Some((_, c)) = previous(b, at)
            && !matches!(c, b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>')
        {
            return Err(err(at, "a `#` that bash reads as part of a word, not as the start of a comment"));
        }
    }
    for nl in memchr::memchr_iter(b'\n', b) {
        if nl == 0 || in_quiet(nl) {
            continue;
        }
        let before = b[nl - 1];
        if before == b'\\' && escaping(b, nl - 1) {
            let joined_to = if nl >= 2 { Some(b[nl - 2]) } else { None };
            if !matches!(joined_to, Some(b' ' | b'\t' | b'&' | b'|' | b';' | b'(')) {
                return Err(err(
                    nl - 1,
                    "a line continuation that joins the word before it to the next line, which bash and the parser read differently; put a blank before the `\\`",
                ));
            }
        } else if before == b'$' && b[..nl].iter().rev().take_while(|&&c| c == b'$').count() % 2 == 1 && !(nl >= 2 && escaping(b, nl - 2)) {
            // An odd run: the last `$` stands alone (`$$`, the shell's pid, ends in `$` too).
            return Err(err(nl - 1, "a `$` at the end of a line, which bash reads as a literal `$`; quote it"));
        }
    }
    for body in heredocs {
        heredoc_delimiter_by_continuation(&body, text)?;
    }
    Ok(())
}

/// The delimiter of the heredoc whose body is `body`, and whether it is `<<-`, when its
/// delimiter is unquoted (its body is then expanded, and line continuations are removed).
fn unquoted_heredoc(body: &Node<'_>, text: &str) -> Option<(String, bool)> {
    let redirect = body.parent()?;
    let start = redirect.children().find(|k| crate::kind(k) == "heredoc_start")?;
    let delim = &text[start.byte_range()];
    if delim.contains(['\'', '"', '\\']) {
        return None;
    }
    let strip_tabs = text[redirect.byte_range()].starts_with("<<-");
    Some((delim.to_string(), strip_tabs))
}

/// Bash removes line continuations in an unquoted heredoc's body before it compares a line
/// with the delimiter: a line it joins into the delimiter ends the heredoc for bash only.
fn heredoc_delimiter_by_continuation(body: &Node<'_>, text: &str) -> Result<(), Unparseable> {
    let Some((delim, strip_tabs)) = unquoted_heredoc(body, text) else { return Ok(()) };
    let range = body.byte_range();
    let bytes = text.as_bytes();
    let mut logical = String::new();
    let mut line_start = range.start;
    let mut joined = false;
    let mut first = range.start;
    for line in text[range.clone()].split_inclusive('\n') {
        let end = line_start + line.len();
        let content = line.strip_suffix('\n').unwrap_or(line);
        let mut piece = content;
        if strip_tabs {
            piece = piece.trim_start_matches('\t');
        }
        let continues = line.ends_with('\n') && content.ends_with('\\') && escaping(bytes, line_start + content.len() - 1);
        if !joined {
            first = line_start;
        }
        if continues {
            logical.push_str(&piece[..piece.len() - 1]);
            joined = true;
        } else {
            logical.push_str(piece);
            if joined && logical == delim {
                return Err(err(first, "a heredoc line that a line continuation joins into its delimiter: bash ends the heredoc there, the parser does not"));
            }
            logical.clear();
            joined = false;
        }
        line_start = end;
    }
    Ok(())
}
