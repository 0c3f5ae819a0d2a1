//! Parse shell command text the way bash would, into the simple commands it would run.
//!
//! pinfold never judges raw text. This crate turns a command line such as
//! `cd src && X=rm; timeout 5 $X -rf "$(cat list)" > out.txt` into a flat list of
//! [`SimpleCommand`]s — one for every program, builtin or assignment bash could execute —
//! each with:
//!
//! * its exact byte range in the input ([`SimpleCommand::span`]), including its own
//!   `KEY=VALUE` prefix and its own redirects;
//! * its argv as [`Word`]s, quotes removed where the value is static, with a flag for any
//!   part that is only known at run time;
//! * its env-prefix [`Assignment`]s and [`Redirect`]s;
//! * its [`Context`]: pipeline, list, subshell, group, loop, function body, `$(…)`,
//!   backticks, `<(…)`, `-c` string, wrapper… from the outside in.
//!
//! Commands hidden anywhere — in `$(…)`, backticks, `<(…)`/`>(…)`, `$((…))`, assignment
//! values, redirect targets, heredoc bodies, `bash -c`/`eval`/`watch` strings, `xargs`,
//! `find -exec`, `sudo` — are extracted as commands of their own. Transparent wrappers
//! (`timeout 60 cargo test`) are replaced by what they run; powerful wrappers (`sudo`,
//! `xargs`, `sh -c`, …) appear both as themselves and as what they run (see [`wrappers`]).
//!
//! # Failing closed
//!
//! [`parse`] returns [`Unparseable`] for any syntax error, any missing node, input text
//! the tree does not account for, input over [`Limits::max_bytes`], nesting deeper than
//! [`Limits::max_depth`], or a parse that runs out of time. There is no partial result: bash
//! executes the lines before a syntax error, so a prefix must never be judged on its own.
//!
//! A command whose name is not statically known (`$X` with `X` never assigned a static
//! value, `$(…)`, `"${cmd[@]}"`) is still returned, with [`SimpleCommand::unresolved`] set to
//! the reason; consumers must never allow such a command.
//!
//! # Example
//!
//! ```
//! let tree = pinfold_shell::parse("cat <(rm -rf ~) | timeout 5 wc -l").unwrap();
//! let argvs: Vec<Vec<String>> = tree.commands.iter().map(|c| c.argv()).collect();
//! assert_eq!(argvs, [vec!["cat", "<(rm -rf ~)"], vec!["rm", "-rf", "~"], vec!["wc", "-l"]]);
//! assert_eq!(&tree.source[tree.commands[1].span.clone()], "rm -rf ~");
//! ```
//!
//! # What this crate does not do
//!
//! It knows bash, not policy: it never decides whether a command is allowed. It does not
//! expand globs, tildes or the environment (it marks them), does not follow `source`d files,
//! and resolves variables only from static assignments in the same input.

mod divergence;
mod evaluated;
mod syntax;
mod walk;
mod word;
pub mod wrappers;

use std::ops::Range;
use std::time::Duration;

use serde::Serialize;

/// Bounds that keep parsing time and memory bounded on hostile input.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest input accepted, in bytes (default 1 MiB).
    pub max_bytes: usize,
    /// Deepest syntax nesting accepted, counted in shell constructs (default 200).
    pub max_depth: usize,
    /// How many `sh -c` / `eval` strings may nest in one another (default 8).
    pub max_string_depth: usize,
    /// Time budget for one parse, inner strings included (default 2 s).
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 1 << 20,
            max_depth: 200,
            max_string_depth: 8,
            timeout: Duration::from_secs(2),
        }
    }
}

/// The result of parsing one input: every simple command bash could run, in source order.
#[derive(Debug, Clone, Serialize)]
pub struct CommandTree {
    /// The input text; every span indexes into it.
    pub source: String,
    /// Simple commands in source order. Commands nested in another's words (`$(…)`) come
    /// right after it; the inner commands of wrappers right after the wrapper.
    pub commands: Vec<SimpleCommand>,
    /// Names of functions defined in the input, with the byte range of each definition.
    pub functions: Vec<(String, Range<usize>)>,
}

/// One command bash would execute: a program, builtin, function call, bare assignment,
/// declaration or test.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimpleCommand {
    /// Byte range in [`CommandTree::source`]. For commands found inside a `-c`/`eval`
    /// string this is exact when the string is a single-quoted literal, else the range of the
    /// whole string argument.
    pub span: Range<usize>,
    /// argv, command name first. Empty for a bare assignment (`X=1`).
    pub words: Vec<Word>,
    /// `KEY=VALUE` prefixes (or the assignments of a bare assignment statement).
    pub assignments: Vec<Assignment>,
    /// Redirects of this command, including those of an enclosing `{ …; } > f` group
    /// (marked [`Redirect::inherited`]).
    pub redirects: Vec<Redirect>,
    /// Where this command sits, outermost first.
    pub context: Vec<Context>,
    /// What kind of command this is.
    pub kind: CommandKind,
    /// Set when the command name is not statically known; the reason, for a person.
    pub unresolved: Option<String>,
    /// Index (in [`CommandTree::commands`]) of the command whose text contains this one:
    /// the command whose argument holds the `$(…)`, or the wrapper that runs it.
    pub parent: Option<usize>,
    /// Wrappers removed to reach this command, outermost first (`["sudo", "timeout"]`).
    pub wrappers: Vec<String>,
}

/// Kind of a [`SimpleCommand`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CommandKind {
    /// A program, builtin or keyword-command like `time`.
    Simple,
    /// A bare assignment statement: `X=1`, `a=(1 2)`.
    Assignment,
    /// `export`, `declare`, `local`, `readonly`, `typeset`, `unset`.
    Declaration,
    /// `[ … ]` or `[[ … ]]` (words hold only the bracket).
    Test,
    /// `(( … ))` arithmetic command.
    Arithmetic,
    /// A call of a function defined earlier in the same input; its body's commands are
    /// listed separately (with [`Context::Function`]).
    FunctionCall,
    /// Code bash may run from inside a word, where no command is written: arithmetic on a
    /// variable (`$((x))` with `x='a[$(…)]'` runs the `$(…)`), indirection (`${!x}`), prompt
    /// expansion (`${x@P}`), a subscript in a variable name a builtin resolves (`test -v`,
    /// `read`, `unset`…). The span and the only word are the construct; [`unresolved`]
    /// says why it may run code. Listed only when pinfold cannot prove the construct inert.
    ///
    /// [`unresolved`]: SimpleCommand::unresolved
    Evaluated,
}

/// Where a [`SimpleCommand`] sits.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "type", content = "detail")]
pub enum Context {
    /// A member of `a | b`.
    Pipeline,
    /// A member of an `&&` / `||` list.
    AndOr,
    /// Run in the background with `&`.
    Background,
    /// `! cmd`.
    Negated,
    /// `( … )`.
    Subshell,
    /// `{ …; }`.
    Group,
    /// Condition or branch of `if`.
    If,
    /// Condition or body of `while`.
    While,
    /// Condition or body of `until`.
    Until,
    /// Body or word list of `for` / `select`.
    For,
    /// `case` subject or branch.
    Case,
    /// Body of the named function.
    Function(String),
    /// Inside `$( … )`.
    CommandSubstitution,
    /// Inside `` ` … ` ``.
    Backticks,
    /// Inside `<( … )`.
    ProcessSubstitutionIn,
    /// Inside `>( … )`.
    ProcessSubstitutionOut,
    /// Inside `$(( … ))` or `(( … ))`.
    Arithmetic,
    /// Inside a heredoc body.
    Heredoc,
    /// Parsed from the string of `sh -c`, `eval` or `watch`; names the wrapper.
    ShellString(String),
    /// Run by a wrapper (`sudo`, `xargs`, `find -exec`, `timeout`…); names it.
    Wrapper(String),
}

/// One word of argv, or the value of an assignment, or a redirect target.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Word {
    /// Byte range of the word in the input (for words synthesised by wrappers, the range of
    /// the word they came from).
    pub span: Range<usize>,
    /// Value with quotes and escapes removed. Dynamic parts appear as their source text
    /// (`$DIR`, `$(pwd)`), so a value is only trustworthy when `dynamic` is false.
    pub text: String,
    /// Some part is known only at run time (an expansion not resolved statically, a
    /// command substitution, arithmetic, brace expansion).
    pub dynamic: bool,
    /// A dynamic part is unquoted, so bash may split it into several words or none.
    pub splits: bool,
    /// An unquoted glob character (`*`, `?`, `[`) is present: bash expands it to file names.
    pub glob: bool,
    /// Starts with an unquoted `~` that bash expands to a home directory.
    pub tilde: bool,
    /// The word is exactly `$HOME`/`${HOME}` followed by an optional static `/…` suffix;
    /// holds that suffix. Lets policy resolve `$HOME/x` like `~/x`.
    pub home_suffix: Option<String>,
}

/// An env-prefix or bare assignment: `NAME=value`, `NAME+=value`, `NAME=(…)`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Assignment {
    /// Byte range of the whole assignment.
    pub span: Range<usize>,
    /// Variable name (for `a[1]=x`, `a`).
    pub name: String,
    /// The value (an array's elements joined with spaces).
    pub value: Word,
    /// `+=` rather than `=`.
    pub append: bool,
}

/// A redirect: `> out`, `2>&1`, `< in`, `<<EOF`, `<<< str`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Redirect {
    /// Byte range of the redirect.
    pub span: Range<usize>,
    /// The operator: `>`, `>>`, `<`, `>&`, `&>`, `&>>`, `<&`, `>|`, `<>`, `<<`, `<<-`, `<<<`,
    /// `<&-`, `>&-`.
    pub op: String,
    /// The explicit file descriptor (`2>`), if any.
    pub fd: Option<u32>,
    /// The target word (file, fd number, heredoc delimiter or here-string).
    pub target: Option<Word>,
    /// The redirect belongs to an enclosing compound command, not to this command itself.
    pub inherited: bool,
}

impl Redirect {
    /// Whether this redirect opens a file for writing (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`,
    /// or `>&` with a non-numeric target, which bash treats as `&>`).
    pub fn writes_file(&self) -> bool {
        match self.op.as_str() {
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => true,
            ">&" => self
                .target
                .as_ref()
                .is_some_and(|t| t.dynamic || (t.text != "-" && t.text.parse::<u32>().is_err())),
            _ => false,
        }
    }
}

impl SimpleCommand {
    /// argv as plain strings (dynamic parts shown as their source text).
    pub fn argv(&self) -> Vec<String> {
        self.words.iter().map(|w| w.text.clone()).collect()
    }

    /// The command name, if there is one.
    pub fn name(&self) -> Option<&Word> {
        self.words.first()
    }
}

/// Why an input could not be judged. Every variant means: treat the whole input as
/// unparseable, never allow it.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Unparseable {
    /// bash would reject the syntax (or tree-sitter cannot follow it).
    #[error("syntax error near byte {offset}: {detail}")]
    Syntax {
        /// Byte offset of the first error.
        offset: usize,
        /// What was found there.
        detail: String,
    },
    /// Input longer than the limit.
    #[error("input is {len} bytes, over the limit of {limit}")]
    TooLarge {
        /// Input length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Nesting deeper than the limit.
    #[error("nesting deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The result would be too large: every command copies its context and inherited
    /// redirects, so deep nesting around very many commands is refused.
    #[error("the parsed result would hold more than {limit} entries")]
    TooComplex {
        /// The budget, in contexts, redirects, words and assignments over all commands.
        limit: usize,
    },
    /// Parsing took longer than the time budget.
    #[error("parsing took longer than {millis} ms")]
    Timeout {
        /// The budget.
        millis: u64,
    },
    /// The input contains a NUL byte, which bash cannot receive in a command string.
    #[error("input contains a NUL byte at {offset}")]
    Nul {
        /// Offset of the NUL.
        offset: usize,
    },
}

/// tree-sitter-bash, loaded once.
pub(crate) fn language() -> &'static tree_sitter::Language {
    static LANG: std::sync::OnceLock<tree_sitter::Language> = std::sync::OnceLock::new();
    LANG.get_or_init(|| tree_sitter_bash::LANGUAGE.into())
}

/// Kind ids below this have a slot in [`kind_name`]'s table (tree-sitter-bash has 280).
const KIND_SLOTS: usize = 512;

/// A kind id's name by table lookup: `Node::kind` measures and UTF-8-checks the C string
/// on every call, which showed up at ~5 % of parsing time. Each slot is filled the first
/// time its kind is seen: filling all 280 at once cost ~6 µs of every `pinfold check`.
pub(crate) fn kind_name(id: u16) -> &'static str {
    static KINDS: [std::sync::OnceLock<&'static str>; KIND_SLOTS] =
        [const { std::sync::OnceLock::new() }; KIND_SLOTS];
    // Ids past the grammar's kinds (ERROR is u16::MAX) have the empty name, which matches no
    // kind we handle.
    match KINDS.get(usize::from(id)) {
        Some(slot) => slot.get_or_init(|| {
            let lang = language();
            if usize::from(id) < lang.node_kind_count() { lang.node_kind_for_id(id).unwrap_or("") } else { "" }
        }),
        None => "",
    }
}

/// A node's kind name.
pub(crate) fn kind(n: &syntax::Node<'_>) -> &'static str {
    n.kind()
}

/// Parse `source` with the default [`Limits`].
pub fn parse(source: &str) -> Result<CommandTree, Unparseable> {
    parse_with(source, &Limits::default())
}

/// Parse `source` with explicit limits.
pub fn parse_with(source: &str, limits: &Limits) -> Result<CommandTree, Unparseable> {
    match walk::parse(source, limits) {
        Err(Unparseable::Syntax { offset, detail }) if lone_dash_before_fd_redirect(source, offset) => {
            dash_reparsed(source, offset, limits).ok_or(Unparseable::Syntax { offset, detail })
        }
        r => r,
    }
}

/// tree-sitter-bash drops an argument that is a lone `-` when a redirect with a descriptor
/// number follows it (`cat - 2>&1`: no node holds the `-`), and pinfold then refuses the text
/// as unparseable. Whether the byte at `offset` is such a `-`: a word of its own, followed by
/// blanks and a digit.
fn lone_dash_before_fd_redirect(source: &str, offset: usize) -> bool {
    let b = source.as_bytes();
    b.get(offset) == Some(&b'-')
        && offset.checked_sub(1).and_then(|i| b.get(i)).is_some_and(|c| *c == b' ' || *c == b'\t')
        && {
            let rest = &b[offset + 1..];
            let blanks = rest.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
            blanks > 0 && rest.get(blanks).is_some_and(u8::is_ascii_digit)
        }
}

/// Parse with the `-` at `offset` read as another one-byte word (which tree-sitter keeps), then
/// give that word back its text: the argv is the one bash builds. `None` if that does not
/// parse either, or the word is not found.
fn dash_reparsed(source: &str, offset: usize, limits: &Limits) -> Option<CommandTree> {
    let mut stand_in = source.as_bytes().to_vec();
    stand_in[offset] = b'x';
    let text = String::from_utf8(stand_in).ok()?;
    let mut tree = parse_with(&text, limits).ok()?;
    let mut found = false;
    for c in &mut tree.commands {
        for w in c.words.iter_mut().filter(|w| w.span == (offset..offset + 1) && w.text == "x") {
            w.text = "-".to_string();
            found = true;
        }
    }
    tree.source = source.to_string();
    found.then_some(tree)
}

/// Quote `s` for a POSIX shell so that it is read back as exactly one word.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%^".contains(&b))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Join an argv into shell text that bash reads back as the same argv.
pub fn join(argv: &[impl AsRef<str>]) -> String {
    argv.iter()
        .map(|a| quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}
