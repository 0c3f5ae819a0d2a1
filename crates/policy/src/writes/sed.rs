//! Reading a sed script for what it writes and runs, as GNU sed reads it.
//!
//! Commands are separated by newlines or `;` and may be grouped in `{ … }`; each may have
//! one or two addresses (`1`, `$`, `/re/`, `\%re%`, `first~step`, `addr,+N`) and `!`.
//! What matters here:
//!
//! * `w FILE`, `W FILE` and the `w FILE` flag of `s` write FILE (the rest of the line, taken
//!   as written: sed expands no `~`);
//! * `e [COMMAND]` and the `e` flag of `s` run a command;
//! * `r FILE` and `R FILE` read FILE (reported so the tests can hold this reader to GNU
//!   sed's `--sandbox`, which refuses exactly `e`, `r` and `w`).
//!
//! Everything else is skipped with the care it needs not to mistake text for commands:
//! regular expressions (with `[…]` classes, in which the delimiter is an ordinary
//! character), replacements, `y` strings, the text of `a`, `i` and `c`, labels. A script
//! this reader cannot follow is an error: the caller must then assume the worst.

/// What a sed script does besides editing its input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Files written by `w`, `W` and `s///w`, as written in the script.
    pub writes: Vec<String>,
    /// Commands run by `e` (the command, empty when `e` runs the pattern space) and
    /// `s///e` (the replacement, run as a command).
    pub runs: Vec<String>,
    /// Files read by `r` and `R`.
    pub reads: Vec<String>,
}

/// Where and why a script could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Character offset in the script.
    pub at: usize,
    pub what: Problem,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at character {}", self.what, self.at + 1)
    }
}

impl std::error::Error for Error {}

/// What is wrong with a script, one variant per thing GNU sed would reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// An address (or `!`) with no command after it.
    MissingCommand,
    /// An address before `}`.
    AddressOnClose,
    /// A `}` with no `{` open.
    UnexpectedClose,
    /// An address before a `:label`.
    AddressOnLabel,
    /// A `:` with no label.
    MissingLabel,
    /// A character that is no sed command.
    UnknownCommand,
    /// A `{` never closed.
    UnmatchedOpen,
    /// A `,` with no second address.
    UnexpectedComma,
    /// A newline (or the end) where a delimiter belongs.
    BadDelimiter,
    /// A regular expression, replacement or `y` list without its closing delimiter.
    UnterminatedExpression,
    /// A newline inside a regular expression.
    NewlineInRegex,
    /// A `[` bracket expression never closed.
    UnterminatedBracket,
    /// `r`, `R`, `w`, `W` or the `w` flag with no file name.
    MissingFileName,
    /// Text after a command that takes no more.
    ExtraCharacters,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Problem::MissingCommand => "missing command",
            Problem::AddressOnClose => "`}` does not take an address",
            Problem::UnexpectedClose => "unexpected `}`",
            Problem::AddressOnLabel => "`:` does not take an address",
            Problem::MissingLabel => "`:` lacks a label",
            Problem::UnknownCommand => "unknown command",
            Problem::UnmatchedOpen => "unmatched `{`",
            Problem::UnexpectedComma => "unexpected `,`",
            Problem::BadDelimiter => "bad delimiter",
            Problem::UnterminatedExpression => "unterminated expression",
            Problem::NewlineInRegex => "newline in a regular expression",
            Problem::UnterminatedBracket => "unterminated `[`",
            Problem::MissingFileName => "missing file name",
            Problem::ExtraCharacters => "extra characters after command",
        })
    }
}

/// Read `script` (several `-e` pieces joined by newlines, as sed joins them).
pub fn read(script: &str) -> Result<Effects, Error> {
    let mut r = Reader { s: script.chars().collect(), i: 0, out: Effects::default() };
    r.program()?;
    Ok(r.out)
}

struct Reader {
    s: Vec<char>,
    i: usize,
    out: Effects,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        if c.is_some() {
            self.i += 1;
        }
        c
    }

    fn err<T>(&self, what: Problem) -> Result<T, Error> {
        Err(Error { at: self.i, what })
    }

    /// Spaces and tabs (not newlines: they end commands).
    fn blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
    }

    fn digits(&mut self) -> bool {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i > start
    }

    /// The rest of the line (the newline consumed, not returned).
    fn rest_of_line(&mut self) -> String {
        let mut t = String::new();
        while let Some(c) = self.next() {
            if c == '\n' {
                break;
            }
            t.push(c);
        }
        t
    }

    fn program(&mut self) -> Result<(), Error> {
        let mut depth = 0usize;
        loop {
            // Separators between commands.
            while matches!(self.peek(), Some(' ' | '\t' | '\n' | ';')) {
                self.i += 1;
            }
            let Some(c) = self.peek() else { break };
            if c == '#' {
                self.rest_of_line();
                continue;
            }
            let addressed = self.addresses()?;
            let Some(cmd) = self.next() else { return self.err(Problem::MissingCommand) };
            match cmd {
                '{' => depth += 1,
                '}' => {
                    if addressed {
                        return self.err(Problem::AddressOnClose);
                    }
                    depth = match depth.checked_sub(1) {
                        Some(d) => d,
                        None => return self.err(Problem::UnexpectedClose),
                    };
                    self.end_of_command()?;
                }
                ':' => {
                    if addressed {
                        return self.err(Problem::AddressOnLabel);
                    }
                    if self.label().is_empty() {
                        return self.err(Problem::MissingLabel);
                    }
                }
                '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {
                    self.end_of_command()?;
                }
                'l' | 'L' | 'q' | 'Q' => {
                    self.blanks();
                    self.digits();
                    self.end_of_command()?;
                }
                'b' | 't' | 'T' => {
                    self.label();
                }
                'v' => {
                    self.label();
                }
                '#' => {
                    self.rest_of_line();
                }
                'a' | 'i' | 'c' => self.text()?,
                'r' | 'R' | 'w' | 'W' => {
                    let file = self.file_name()?;
                    if matches!(cmd, 'w' | 'W') {
                        self.out.writes.push(file);
                    } else {
                        self.out.reads.push(file);
                    }
                }
                'e' => {
                    self.blanks();
                    let command = self.rest_of_line();
                    self.out.runs.push(command);
                }
                's' => self.substitute()?,
                'y' => {
                    let d = self.delimiter()?;
                    self.delimited(d, false)?;
                    self.delimited(d, false)?;
                    self.end_of_command()?;
                }
                _ => {
                    self.i -= 1;
                    return self.err(Problem::UnknownCommand);
                }
            }
        }
        if depth > 0 {
            return self.err(Problem::UnmatchedOpen);
        }
        Ok(())
    }

    /// Zero, one or two addresses and any `!`; whether there was an address.
    fn addresses(&mut self) -> Result<bool, Error> {
        let first = self.address()?;
        if first {
            self.blanks();
            if self.peek() == Some(',') {
                self.i += 1;
                self.blanks();
                if !self.address()? {
                    return self.err(Problem::UnexpectedComma);
                }
            }
        }
        self.blanks();
        while self.peek() == Some('!') {
            self.i += 1;
            self.blanks();
        }
        Ok(first)
    }

    fn address(&mut self) -> Result<bool, Error> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.digits();
                if self.peek() == Some('~') {
                    self.i += 1;
                    self.blanks();
                    self.digits();
                }
            }
            Some('$') => self.i += 1,
            // `addr,+N`, `addr,~N` (GNU also reads them, and a bare `~`, first).
            Some('+' | '~') => {
                self.i += 1;
                self.blanks();
                self.digits();
            }
            Some('/') => {
                self.i += 1;
                self.delimited('/', true)?;
                self.regex_flags();
            }
            Some('\\') => {
                self.i += 1;
                let d = self.delimiter()?;
                self.delimited(d, true)?;
                self.regex_flags();
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn regex_flags(&mut self) {
        while matches!(self.peek(), Some('I' | 'M')) {
            self.i += 1;
        }
    }

    fn delimiter(&mut self) -> Result<char, Error> {
        match self.next() {
            Some('\n') | None => self.err(Problem::BadDelimiter),
            Some(d) => Ok(d),
        }
    }

    /// Up to the unescaped delimiter `d`. In a regular expression a `[…]` class is skipped
    /// whole: a delimiter inside it is an ordinary character (`s/[/]/x/`).
    fn delimited(&mut self, d: char, regex: bool) -> Result<(), Error> {
        loop {
            let Some(c) = self.next() else { return self.err(Problem::UnterminatedExpression) };
            if c == d {
                return Ok(());
            } else if c == '\\' {
                if self.next().is_none() {
                    return self.err(Problem::UnterminatedExpression);
                }
            } else if c == '\n' && regex {
                return self.err(Problem::NewlineInRegex);
            } else if c == '[' && regex {
                self.bracket()?;
            }
        }
    }

    /// The rest of a `[…]` class after its `[`.
    fn bracket(&mut self) -> Result<(), Error> {
        if self.peek() == Some('^') {
            self.i += 1;
        }
        if self.peek() == Some(']') {
            self.i += 1;
        }
        loop {
            let Some(c) = self.next() else { return self.err(Problem::UnterminatedBracket) };
            match c {
                ']' => return Ok(()),
                '[' if matches!(self.peek(), Some(':' | '.' | '=')) => {
                    // `[:alpha:]`, `[.x.]`, `[=x=]`: up to the matching `:]`, `.]`, `=]`.
                    let kind = self.next().unwrap_or(':');
                    loop {
                        let Some(c) = self.next() else { return self.err(Problem::UnterminatedBracket) };
                        if c == kind && self.peek() == Some(']') {
                            self.i += 1;
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn substitute(&mut self) -> Result<(), Error> {
        let d = self.delimiter()?;
        self.delimited(d, true)?;
        let replacement_at = self.i;
        self.delimited(d, false)?;
        let replacement: String = self.s[replacement_at..self.i - 1].iter().collect();
        loop {
            match self.peek() {
                // (GNU sed allows blanks between the flags.)
                Some('g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' | '\t') => self.i += 1,
                Some(c) if c.is_ascii_digit() => self.i += 1,
                Some('e') => {
                    self.i += 1;
                    self.out.runs.push(replacement.clone());
                }
                Some('w') => {
                    self.i += 1;
                    let file = self.file_name()?;
                    self.out.writes.push(file);
                    return Ok(());
                }
                _ => break,
            }
        }
        self.end_of_command()
    }

    /// The file name of `r`, `R`, `w`, `W` or `s///w`: the rest of the line.
    fn file_name(&mut self) -> Result<String, Error> {
        self.blanks();
        let name = self.rest_of_line();
        if name.is_empty() {
            return self.err(Problem::MissingFileName);
        }
        Ok(name)
    }

    /// A label (of `:`, `b`, `t`, `T`) or `v`'s version: up to a blank, the end of the line,
    /// a `;` or a `}`. What follows is the next command (`b end w f` is `b end` and `w f`).
    fn label(&mut self) -> String {
        self.blanks();
        let mut t = String::new();
        while let Some(c) = self.peek() {
            if matches!(c, ' ' | '\t' | '\n' | ';' | '}' | '#') {
                break;
            }
            t.push(c);
            self.i += 1;
        }
        t
    }

    /// The text of `a`, `i`, `c`: `a\` and a newline, or (GNU) `a TEXT`; a line ending in a
    /// backslash continues the text.
    fn text(&mut self) -> Result<(), Error> {
        self.blanks();
        if self.peek() == Some('\\') {
            self.i += 1;
            if self.peek() == Some('\n') {
                self.i += 1;
            }
        }
        while let Some(c) = self.next() {
            match c {
                '\\' => {
                    self.next();
                }
                '\n' => break,
                _ => {}
            }
        }
        Ok(())
    }

    /// After a command: blanks, then the end of the line, a `;`, a `}` or a comment.
    fn end_of_command(&mut self) -> Result<(), Error> {
        self.blanks();
        match self.peek() {
            None | Some('}' | '#') => Ok(()),
            Some('\n' | ';') => {
                self.i += 1;
                Ok(())
            }
            Some(_) => self.err(Problem::ExtraCharacters),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn effects(script: &str) -> Effects {
        read(script).unwrap_or_else(|e| panic!("`{script}`: {e}"))
    }

    fn w(files: &[&str]) -> Effects {
        Effects { writes: files.iter().map(|f| f.to_string()).collect(), ..Effects::default() }
    }

    fn e(commands: &[&str]) -> Effects {
        Effects { runs: commands.iter().map(|c| c.to_string()).collect(), ..Effects::default() }
    }

    #[test]
    fn errors_name_the_problem_and_where() {
        for (script, what, at) in [
            ("1", Problem::MissingCommand, 1),
            ("}", Problem::UnexpectedClose, 1),
            ("1}", Problem::AddressOnClose, 2),
            ("{p", Problem::UnmatchedOpen, 2),
            ("k", Problem::UnknownCommand, 0),
            ("s/a", Problem::UnterminatedExpression, 3),
            ("w", Problem::MissingFileName, 1),
        ] {
            let e = read(script).unwrap_err();
            assert_eq!((e.what, e.at), (what, at), "`{script}`: {e}");
        }
        let e = read("k").unwrap_err();
        assert_eq!(e.to_string(), "unknown command at character 1");
    }

    #[test]
    fn what_scripts_write_and_run() {
        for (script, want) in [
            ("1e id", e(&["id"])),
            ("e", e(&[""])),
            ("/x/e echo hi; rm -rf ~", e(&["echo hi; rm -rf ~"])),
            ("s/.*/date/e", e(&["date"])),
            ("s/a/b/gpe", e(&["b"])),
            ("s/a/b/g e", e(&["b"])),
            ("w ~/.bashrc", w(&["~/.bashrc"])),
            ("w/etc/x", w(&["/etc/x"])),
            ("W out", w(&["out"])),
            ("s/a/b/w /etc/x", w(&["/etc/x"])),
            ("s/a/b/2w out", w(&["out"])),
            ("$!{h;d};x;w out", w(&["out"])),
            ("/start/,/end/{/end/!{w f\n}}", w(&["f"])),
            ("1~2w odd\n0~2w even", w(&["odd", "even"])),
            ("1,+3w f", w(&["f"])),
            ("\\%/tmp%w f", w(&["f"])),
            // The file name runs to the end of the line, `;` and all.
            ("w x;e id", w(&["x;e id"])),
            ("r /etc/passwd", Effects { reads: vec!["/etc/passwd".into()], ..Effects::default() }),
            // Text that only looks like commands.
            ("s/we/are/", Effects::default()),
            ("s/[/]/e/", Effects::default()),
            ("s|/e|w x|g", Effects::default()),
            ("/e/d", Effects::default()),
            ("y/ew/we/", Effects::default()),
            ("1a w x", Effects::default()),
            ("1i\\\ne id", Effects::default()),
            ("a\\\nline one\\\ne id", Effects::default()),
            ("# e id\np", Effects::default()),
            (":a;N;$!ba;s/\\n/ /g", Effects::default()),
            ("s/[[:space:]/]*$//", Effects::default()),
            ("s/a\\/e/b/", Effects::default()),
            ("l 5;q3", Effects::default()),
            ("1a text\ne id", e(&["id"])),
        ] {
            assert_eq!(effects(script), want, "`{script}`");
        }
    }

    #[test]
    fn scripts_it_cannot_follow_are_errors() {
        for script in ["s/a/b", "w", "1,w x", "{p", "p}", "k", "s/[a/b/", "y/a/", "px"] {
            assert!(read(script).is_err(), "`{script}` should not be read");
        }
    }

    /// What GNU sed makes of a script: with `--sandbox` it refuses exactly the scripts that
    /// have `e`, `r` or `w` (before opening or running anything).
    #[derive(Debug, PartialEq)]
    enum Gnu {
        Clean,
        Refused,
        Invalid,
    }

    fn gnu(script: &str) -> Gnu {
        let out = std::process::Command::new("sed")
            .args(["--sandbox", "-n", "-e", script, "/dev/null"])
            .env("LC_ALL", "C")
            .output()
            .expect("GNU sed (`sed --sandbox`) must be installed to test the sed reader");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            Gnu::Clean
        } else if stderr.contains("e/r/w commands disabled in sandbox mode") {
            Gnu::Refused
        } else {
            assert!(stderr.starts_with("sed: "), "not GNU sed? `{script}`: {stderr}");
            Gnu::Invalid
        }
    }

    /// The reader agrees with GNU sed: every script sed would refuse in sandbox mode has an
    /// effect here (or is an error, which the judge treats as the worst), and every script it
    /// accepts has none and reads without error.
    fn agrees(script: &str) -> Result<(), String> {
        let g = gnu(script);
        let r = read(script);
        let effects = r.as_ref().is_ok_and(|x| !(x.writes.is_empty() && x.runs.is_empty() && x.reads.is_empty()));
        match g {
            Gnu::Refused if r.is_ok() && !effects => Err(format!("`{script:?}`: sed sees e/r/w, the reader none: {r:?}")),
            Gnu::Clean if r.is_err() || effects => Err(format!("`{script:?}`: sed sees a clean script, the reader {r:?}")),
            _ => Ok(()),
        }
    }

    #[test]
    fn agrees_with_gnu_sed_on_chosen_scripts() {
        // The sandbox mode this test relies on must exist.
        assert_eq!(gnu("w x"), Gnu::Refused);
        assert_eq!(gnu("p"), Gnu::Clean);
        let scripts = [
            "1e id", "s/a/b/e", "s/a/b/w x", "w x", "W x", "r x", "R x", "e", "s/[/]/e/", "s/[/]/x/w f",
            "s/[]/]/x/", "s/[^]/]/x/w f", "s/[[:alpha:]/]/x/", "s/[\\]/x/w f", "s/a\\/b/c/e", "y/a\\/b/cde/",
            "/x/I,/y/Mw f", "\\,x,w f", "1~3{p;w f\n}", "$!N;P;D", ":a;N;$!ba;s/\\n/ /g", "b end;w f", ": x;w f",
            "t;w f", "1a w x", "1a\\\nw x", "1a\\\nfoo\\\nw x\nw y", "a\\", "i\\  e x", "c text;w f",
            "#n\nw f", "# w f\np", "s/a/b/;#c\np", "{p};w f", "{;p;}", "1!{p}", "1 ! p", "1,3 p", "0,/x/w f",
            "1,+2w f", "1,~4w f", "l;w f", "l 10;e", "q;w f", "q5", "Q 2", "v;w f", "v 4.2", "F;z;=",
            "s/x/\\n/2gw f", "s/x/y/ w f", "s/x/y/ ;w f", "s x y e", "s\\x\\y\\", "sxaxbxw f", "y/abc/xyz/;e",
            "}", "{", "s/a/b/q", "1,p", "/[/w f", "/a/,", "p ; p", "p # c", "p}", "s/a/[/w f",
        ];
        let failures: Vec<String> = scripts.iter().filter_map(|s| agrees(s).err()).collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// Pieces of sed syntax, including the ones that end, nest or hide commands.
    const PIECES: &[&str] = &[
        "s", "y", "w", "W", "e", "r", "a", "i", "c", "b", "t", ":", "{", "}", ";", "\n", " ", "#", "!", "1", "$",
        ",", "+2", "~", "/", "|", "\\", "[", "]", "^", "[:alpha:]", "I", "M", "g", "p", "d", "q", "l", "v", "=",
        "x", "f", "/a/", "s/a/b/", "w f", "e id", "\\n", "\\/", "0", "\\\n", "[^", "\\]", "\\[", "[.", ".]", "\t",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_gnu_sed_on_generated_scripts(pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..14)) {
            let script: String = pieces.concat();
            if let Err(e) = agrees(&script) {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}
