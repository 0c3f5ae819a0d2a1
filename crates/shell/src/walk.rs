//! From tree-sitter's syntax tree to [`SimpleCommand`]s.
//!
//! One recursive walk in source order. It keeps a context stack (pipeline, subshell, `$(…)`…),
//! what it knows of variables (see [`crate::word::Vars`]), and the functions defined so far.
//! Every simple command is then passed through [`crate::wrappers`], which may replace it by
//! what it runs or add the commands it runs; strings given to `sh -c`, `eval` and `watch` are
//! parsed again with the same walker, a level deeper.

use std::cell::RefCell;
use std::ops::Range;
use std::time::{Duration, Instant};

use tree_sitter::{Node, Parser};

use crate::word::{self, Var, Vars};
use crate::wrappers::{self, Inner, Unwrapped};
use crate::{
    Assignment, CommandKind, CommandTree, Context, Redirect, SimpleCommand, Unparseable, Word,
};

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

/// Syntax tree levels per shell construct: `$( … )` costs about four node levels
/// (substitution, command, argument, …); the walker's limit is in node levels.
const NODES_PER_LEVEL: usize = 6;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

pub(crate) fn parse(source: &str, limits: &Limits) -> Result<CommandTree, Unparseable> {
    if source.len() > limits.max_bytes {
        return Err(Unparseable::TooLarge { len: source.len(), limit: limits.max_bytes });
    }
    let deadline = Instant::now() + limits.timeout;
    let mut w = Walker {
        top: source,
        src: source,
        map: SpanMap::Offset(0),
        out: Vec::new(),
        functions: Vec::new(),
        vars: Vars::default(),
        ctx: Vec::new(),
        depth: 0,
        max_nodes: limits.max_depth.saturating_mul(NODES_PER_LEVEL),
        limits,
        deadline,
        string_depth: 0,
        inherited: Vec::new(),
        parent: None,
        wrappers: Vec::new(),
        error: None,
    };
    w.parse_text(source)?;
    if let Some(e) = w.error {
        return Err(e);
    }
    Ok(CommandTree { source: source.to_string(), commands: w.out, functions: w.functions })
}

/// Parse text with tree-sitter, check it is complete, and return the tree.
fn syntax_tree(text: &str, deadline: Instant, limits: &Limits) -> Result<tree_sitter::Tree, Unparseable> {
    if let Some(offset) = text.find('\0') {
        return Err(Unparseable::Nul { offset });
    }
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = slot.get_or_insert_with(|| {
            let mut p = Parser::new();
            p.set_language(&tree_sitter_bash::LANGUAGE.into())
                .expect("tree-sitter-bash matches the tree-sitter ABI it was built with");
            p
        });
        let mut timed_out = false;
        let mut progress = |_: &tree_sitter::ParseState| {
            if Instant::now() > deadline {
                timed_out = true;
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        };
        let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
        let tree = parser.parse_with_options(
            &mut |i, _| if i < text.len() { &text.as_bytes()[i..] } else { &[] },
            None,
            Some(options),
        );
        if timed_out {
            parser.reset();
            return Err(Unparseable::Timeout { millis: limits.timeout.as_millis() as u64 });
        }
        let tree = tree.ok_or(Unparseable::Timeout { millis: limits.timeout.as_millis() as u64 })?;
        check_complete(&tree, text, limits)?;
        Ok(tree)
    })
}

/// Fail closed: any ERROR or MISSING node, any nesting past the limit, or any input bytes the
/// tree does not account for (tree-sitter can drop text after some heredocs) make the whole
/// input unparseable.
fn check_complete(tree: &tree_sitter::Tree, text: &str, limits: &Limits) -> Result<(), Unparseable> {
    let root = tree.root_node();
    let max_nodes = limits.max_depth.saturating_mul(NODES_PER_LEVEL);
    // Iterative pre-order walk: depth check, error search and coverage of leaf bytes.
    let mut cursor = root.walk();
    let mut depth = 0usize;
    let mut covered_to = 0usize;
    let mut first_error: Option<(usize, String)> = None;
    loop {
        let node = cursor.node();
        if depth > max_nodes {
            return Err(Unparseable::TooDeep { limit: limits.max_depth });
        }
        if first_error.is_none() && (node.is_error() || node.is_missing()) {
            let what = if node.is_missing() {
                format!("missing `{}`", node.kind())
            } else {
                let t = &text[node.byte_range()];
                let t: String = t.chars().take(30).collect();
                format!("unexpected `{t}`")
            };
            first_error = Some((node.start_byte(), what));
        }
        let leaf = node.child_count() == 0;
        if leaf || matches!(node.kind(), "heredoc_body" | "comment") {
            if node.start_byte() > covered_to {
                gap_is_blank(text, covered_to, node.start_byte())?;
            }
            covered_to = covered_to.max(node.end_byte());
        }
        if !matches!(node.kind(), "heredoc_body" | "comment") && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                if let Some((offset, detail)) = first_error {
                    return Err(Unparseable::Syntax { offset, detail });
                }
                if text.len() > covered_to {
                    gap_is_blank(text, covered_to, text.len())?;
                }
                return Ok(());
            }
            depth -= 1;
        }
    }
}

/// Text between syntax leaves may only be blanks, newlines, line continuations and `;`/`&`
/// separators the grammar folded away; anything else was silently dropped by the parser.
fn gap_is_blank(text: &str, from: usize, to: usize) -> Result<(), Unparseable> {
    let gap = &text.as_bytes()[from..to];
    let mut i = 0;
    while i < gap.len() {
        match gap[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'\\' if gap.get(i + 1) == Some(&b'\n') => i += 2,
            _ => {
                return Err(Unparseable::Syntax {
                    offset: from + i,
                    detail: "text the parser did not account for".into(),
                });
            }
        }
    }
    Ok(())
}

/// How spans in the text being walked map to the original input.
#[derive(Debug, Clone)]
enum SpanMap {
    /// Inner text starts at this offset of the input (top level, or a `'…'` string).
    Offset(usize),
    /// Inner text came from a processed string: every span is this whole range.
    Fixed(Range<usize>),
}

struct Walker<'a> {
    /// The original input.
    top: &'a str,
    /// The text currently being walked (the input, or a `-c` string).
    src: &'a str,
    map: SpanMap,
    out: Vec<SimpleCommand>,
    functions: Vec<(String, Range<usize>)>,
    vars: Vars,
    ctx: Vec<Context>,
    depth: usize,
    max_nodes: usize,
    limits: &'a Limits,
    deadline: Instant,
    string_depth: usize,
    /// Redirects of enclosing compound commands.
    inherited: Vec<Redirect>,
    /// The command whose words we are inside (for `parent`).
    parent: Option<usize>,
    /// Wrappers enclosing the current string (for commands parsed from `sh -c`).
    wrappers: Vec<String>,
    error: Option<Unparseable>,
}

impl<'a> Walker<'a> {
    fn span(&self, r: Range<usize>) -> Range<usize> {
        match &self.map {
            SpanMap::Offset(base) => base + r.start..base + r.end,
            SpanMap::Fixed(f) => f.clone(),
        }
    }

    fn text(&self, n: Node<'_>) -> &'a str {
        &self.src[n.byte_range()]
    }

    fn parse_text(&mut self, text: &'a str) -> Result<(), Unparseable> {
        let tree = syntax_tree(text, self.deadline, self.limits)?;
        self.visit(tree.root_node());
        Ok(())
    }

    fn with_ctx(&mut self, c: Context, f: impl FnOnce(&mut Self)) {
        self.ctx.push(c);
        f(self);
        self.ctx.pop();
    }

    fn children(&mut self, n: Node<'_>) {
        let mut c = n.walk();
        let kids: Vec<Node<'_>> = n.named_children(&mut c).collect();
        for k in kids {
            self.visit(k);
        }
    }

    /// Whether an assignment here happens unconditionally at the top level of the input.
    fn unconditional(&self) -> bool {
        // `eval` at the top level runs in the current shell, unconditionally.
        self.ctx.iter().all(|c| matches!(c, Context::ShellString(w) if w == "eval"))
    }

    fn assign(&mut self, name: &str, value: Option<String>) {
        let unconditional = self.unconditional();
        let new = match value {
            Some(v) if unconditional => Var::Known(v),
            Some(v) => match self.vars.map.get(name) {
                Some(Var::Known(old)) if *old == v => Var::Known(v),
                _ => Var::Unknown,
            },
            None => Var::Unknown,
        };
        if name == "IFS" {
            // Field splitting changes: nothing unquoted can be trusted any more.
            self.vars.poisoned = true;
        }
        self.vars.map.insert(name.to_string(), new);
    }

    fn visit(&mut self, n: Node<'_>) {
        if self.error.is_some() {
            return;
        }
        self.depth += 1;
        if self.depth > self.max_nodes {
            self.error = Some(Unparseable::TooDeep { limit: self.limits.max_depth });
            self.depth -= 1;
            return;
        }
        match n.kind() {
            "program" | "do_group" => self.statements(n),
            "list" => self.with_ctx(Context::AndOr, |w| w.children(n)),
            "pipeline" => self.with_ctx(Context::Pipeline, |w| w.children(n)),
            "subshell" => self.with_ctx(Context::Subshell, |w| w.statements(n)),
            "compound_statement" => {
                if self.text(n).starts_with("((") {
                    self.arithmetic_command(n);
                } else {
                    self.with_ctx(Context::Group, |w| w.statements(n));
                }
            }
            "negated_command" => self.with_ctx(Context::Negated, |w| w.children(n)),
            "if_statement" | "elif_clause" | "else_clause" => {
                self.with_ctx(Context::If, |w| w.statements(n))
            }
            "while_statement" => {
                let until = self.text(n).starts_with("until");
                self.forget_assigned_in(n);
                let c = if until { Context::Until } else { Context::While };
                self.with_ctx(c, |w| w.statements(n));
            }
            "for_statement" | "c_style_for_statement" => {
                self.forget_assigned_in(n);
                self.with_ctx(Context::For, |w| w.statements(n));
            }
            "case_statement" | "case_item" => self.with_ctx(Context::Case, |w| w.statements(n)),
            "function_definition" => self.function(n),
            "redirected_statement" => self.redirected(n),
            "command" => {
                let span = n.byte_range();
                self.command(n, Vec::new(), span);
            }
            "variable_assignment" | "variable_assignments" => self.bare_assignment(n),
            "declaration_command" | "unset_command" => self.declaration(n),
            "test_command" => self.test_command(n),
            "command_substitution" => {
                let c = if self.text(n).starts_with('`') {
                    Context::Backticks
                } else {
                    Context::CommandSubstitution
                };
                self.with_ctx(c, |w| w.statements(n));
            }
            "process_substitution" => {
                let c = if self.text(n).starts_with('>') {
                    Context::ProcessSubstitutionOut
                } else {
                    Context::ProcessSubstitutionIn
                };
                self.with_ctx(c, |w| w.statements(n));
            }
            "arithmetic_expansion" => self.with_ctx(Context::Arithmetic, |w| w.children(n)),
            "heredoc_body" => self.with_ctx(Context::Heredoc, |w| w.children(n)),
            "comment" => {}
            // Words and expressions: look inside for substitutions.
            _ => self.children(n),
        }
        self.depth -= 1;
    }

    /// A sequence of statements; one followed by `&` runs in the background.
    fn statements(&mut self, n: Node<'_>) {
        let mut c = n.walk();
        let kids: Vec<Node<'_>> = n.children(&mut c).collect();
        for (i, k) in kids.iter().enumerate() {
            if !k.is_named() {
                continue;
            }
            let bg = kids.get(i + 1).is_some_and(|s| s.kind() == "&");
            if bg {
                self.with_ctx(Context::Background, |w| w.visit(*k));
            } else {
                self.visit(*k);
            }
        }
    }

    /// Variables assigned anywhere in a loop may hold any of their values on a later
    /// iteration: forget them before walking the loop.
    fn forget_assigned_in(&mut self, n: Node<'_>) {
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            match x.kind() {
                "variable_assignment" => {
                    if let Some(name) = x.child_by_field_name("name") {
                        let name = assigned_name(self.text(name));
                        self.vars.map.insert(name.to_string(), Var::Unknown);
                    }
                }
                "for_statement" => {
                    if let Some(v) = x.child_by_field_name("variable") {
                        self.vars.map.insert(self.text(v).to_string(), Var::Unknown);
                    }
                }
                "command" => {
                    // `read X` and friends assign too.
                    let mut c = x.walk();
                    for a in x.children_by_field_name("argument", &mut c) {
                        let t = self.text(a);
                        if is_name(t) {
                            self.vars.map.insert(t.to_string(), Var::Unknown);
                        }
                    }
                }
                _ => {}
            }
            let mut c = x.walk();
            stack.extend(x.named_children(&mut c));
        }
    }

    fn function(&mut self, n: Node<'_>) {
        let name = n
            .child_by_field_name("name")
            .map(|x| self.text(x).to_string())
            .unwrap_or_default();
        let span = self.span(n.byte_range());
        self.functions.push((name.clone(), span));
        // The body runs when called, with whatever variables hold then: walk it knowing
        // nothing, then forget everything it may assign.
        let saved = std::mem::take(&mut self.vars);
        self.vars.poisoned = true;
        self.with_ctx(Context::Function(name), |w| {
            if let Some(body) = n.child_by_field_name("body") {
                w.visit(body);
            }
        });
        let assigned_in_body: Vec<String> = self.vars.map.keys().cloned().collect();
        self.vars = saved;
        for k in assigned_in_body {
            self.vars.map.insert(k, Var::Unknown);
        }
        // `f() { …; } > log` and the like.
        let mut c = n.walk();
        let redirects: Vec<Node<'_>> = n.children_by_field_name("redirect", &mut c).collect();
        for r in redirects {
            self.visit(r);
        }
    }

    fn redirected(&mut self, n: Node<'_>) {
        let mut c = n.walk();
        let redirect_nodes: Vec<Node<'_>> = n.children_by_field_name("redirect", &mut c).collect();
        let body = n.child_by_field_name("body");
        match body {
            Some(b) if b.kind() == "command" => self.command(b, redirect_nodes, n.byte_range()),
            Some(b) => {
                let rs: Vec<Redirect> = redirect_nodes
                    .iter()
                    .filter_map(|r| self.redirect(*r, true))
                    .collect();
                let before = self.inherited.len();
                self.inherited.extend(rs);
                self.visit(b);
                self.inherited.truncate(before);
                for r in redirect_nodes {
                    self.redirect_inner(r);
                }
            }
            None => {
                // `> file` alone: truncates or creates the file.
                let redirects: Vec<Redirect> =
                    redirect_nodes.iter().filter_map(|r| self.redirect(*r, false)).collect();
                let idx = self.push(SimpleCommand {
                    span: self.span(n.byte_range()),
                    words: Vec::new(),
                    assignments: Vec::new(),
                    redirects: self.with_inherited(redirects),
                    context: self.ctx.clone(),
                    kind: CommandKind::Assignment,
                    unresolved: None,
                    parent: self.parent,
                    wrappers: self.wrappers.clone(),
                });
                let saved = self.parent.replace(idx);
                for r in redirect_nodes {
                    self.redirect_inner(r);
                }
                self.parent = saved;
            }
        }
    }

    fn with_inherited(&self, mut own: Vec<Redirect>) -> Vec<Redirect> {
        own.extend(self.inherited.iter().cloned());
        own
    }

    fn push(&mut self, c: SimpleCommand) -> usize {
        self.out.push(c);
        self.out.len() - 1
    }

    /// Walk what may run inside a redirect: substitutions in its target, and the statements
    /// that tree-sitter attaches to a heredoc (`cat <<EOF | grep x`).
    fn redirect_inner(&mut self, r: Node<'_>) {
        let mut c = r.walk();
        let kids: Vec<Node<'_>> = r.named_children(&mut c).collect();
        for k in kids {
            match k.kind() {
                "heredoc_start" | "heredoc_end" | "file_descriptor" => {}
                "pipeline" => {
                    // Grammar folds `| cmd` after a heredoc into the redirect.
                    self.with_ctx(Context::Pipeline, |w| w.children(k));
                }
                _ => self.visit(k),
            }
        }
    }

    fn redirect(&self, r: Node<'_>, inherited: bool) -> Option<Redirect> {
        let mut op = String::new();
        let mut fd = None;
        let mut target = None;
        let mut c = r.walk();
        for k in r.children(&mut c) {
            match k.kind() {
                "file_descriptor" => fd = self.text(k).parse().ok(),
                "heredoc_start" => {
                    target = Some(word::single(k, self.src, &self.vars, self.span(k.byte_range())))
                }
                "heredoc_body" | "heredoc_end" | "pipeline" => {}
                _ if !k.is_named() => {
                    if op.is_empty()
                        && matches!(
                            k.kind(),
                            "<" | ">" | ">>" | "&>" | "&>>" | "<&" | ">&" | ">|" | "<<" | "<<-"
                                | "<<<" | "<&-" | ">&-" | "<>"
                        )
                    {
                        op = k.kind().to_string();
                    }
                }
                _ => {
                    if target.is_none() && r.kind() != "heredoc_redirect" {
                        target =
                            Some(word::single(k, self.src, &self.vars, self.span(k.byte_range())));
                    }
                }
            }
        }
        if op.is_empty() {
            return None;
        }
        Some(Redirect { span: self.span(r.byte_range()), op, fd, target, inherited })
    }

    fn command(&mut self, n: Node<'_>, extra_redirects: Vec<Node<'_>>, span: Range<usize>) {
        let mut assignments = Vec::new();
        let mut redirect_nodes = Vec::new();
        let mut words: Vec<Word> = Vec::new();
        let mut word_nodes = Vec::new();
        let mut c = n.walk();
        let kids: Vec<(Option<&str>, Node<'_>)> = n
            .children(&mut c)
            .enumerate()
            .map(|(i, k)| (n.field_name_for_child(i as u32), k))
            .collect();
        for (field, k) in &kids {
            match (*field, k.kind()) {
                (_, "variable_assignment") => {
                    if let Some(a) = self.assignment(*k) {
                        assignments.push(a);
                    }
                }
                (Some("redirect"), _) => redirect_nodes.push(*k),
                (Some("name"), _) | (Some("argument"), _) => {
                    let target = if k.kind() == "command_name" {
                        k.named_child(0).unwrap_or(*k)
                    } else {
                        *k
                    };
                    words.extend(word::fields(target, self.src, &self.vars, self.span(k.byte_range())));
                    word_nodes.push(*k);
                }
                (_, "subshell") => word_nodes.push(*k),
                _ => {}
            }
        }
        let redirects: Vec<Redirect> = redirect_nodes
            .iter()
            .chain(extra_redirects.iter())
            .filter_map(|r| self.redirect(*r, false))
            .collect();

        let kind = if words.is_empty() {
            CommandKind::Assignment
        } else if self.is_function(&words[0]) {
            CommandKind::FunctionCall
        } else {
            CommandKind::Simple
        };
        let unresolved = words
            .first()
            .filter(|w| w.dynamic)
            .map(|w| format!("the command name `{}` is only known at run time", w.text));
        let cmd = SimpleCommand {
            span: self.span(span),
            words,
            assignments,
            redirects: self.with_inherited(redirects),
            context: self.ctx.clone(),
            kind,
            unresolved,
            parent: self.parent,
            wrappers: self.wrappers.clone(),
        };
        if cmd.words.is_empty() {
            // `X=1` parsed as a command with no name (rare; tree-sitter usually gives
            // variable_assignment): the assignment happens in the shell.
            let sets: Vec<(String, Option<String>)> = cmd
                .assignments
                .iter()
                .map(|a| (a.name.clone(), (!a.value.dynamic && !a.append).then(|| a.value.text.clone())))
                .collect();
            for (name, v) in sets {
                self.assign(&name, v);
            }
        } else {
            self.track_builtin_effects(&cmd);
        }
        let idx = self.emit(cmd);
        // Substitutions inside this command's words, assignments and redirects.
        let saved = self.parent.replace(idx);
        for (field, k) in kids {
            match (field, k.kind()) {
                (_, "variable_assignment") => self.visit(k),
                (Some("redirect"), _) => self.redirect_inner(k),
                (Some("name"), _) | (Some("argument"), _) => self.visit(k),
                (_, "subshell") => self.visit(k),
                _ => {}
            }
        }
        for r in extra_redirects {
            self.redirect_inner(r);
        }
        self.parent = saved;
    }

    fn is_function(&self, w: &Word) -> bool {
        !w.dynamic && self.functions.iter().any(|(f, _)| *f == w.text)
    }

    /// Builtins that change what we know of variables.
    fn track_builtin_effects(&mut self, cmd: &SimpleCommand) {
        let Some(name) = cmd.words.first() else { return };
        match name.text.as_str() {
            "source" | "." => self.vars.poisoned = true,
            "read" | "mapfile" | "readarray" | "getopts" | "printf" | "let" | "declare"
            | "typeset" | "local" | "export" | "readonly" => {
                for w in &cmd.words[1..] {
                    let t = w.text.split(['=', '[']).next().unwrap_or("");
                    if is_name(t) {
                        self.vars.map.insert(t.to_string(), Var::Unknown);
                    }
                }
            }
            _ => {}
        }
    }

    /// Push a command, unwrapping wrappers; returns the index of the command as written.
    fn emit(&mut self, cmd: SimpleCommand) -> usize {
        self.emit_depth(cmd, 0)
    }

    fn emit_depth(&mut self, mut cmd: SimpleCommand, depth: usize) -> usize {
        if depth > 16 {
            cmd.unresolved = Some("wrappers nest too deeply".into());
            return self.push(cmd);
        }
        match wrappers::unwrap(&cmd, self.top) {
            Unwrapped::None => self.push(cmd),
            Unwrapped::Transparent { wrapper, inner } => {
                // Judged only by what it runs: the wrapper itself disappears.
                let inner_cmd = self.inner_command(&cmd, &wrapper, inner, false);
                self.emit_depth(inner_cmd, depth + 1)
            }
            Unwrapped::Powerful { wrapper, inner } => {
                let idx = self.push(cmd.clone());
                for i in inner {
                    match i {
                        Inner::ShellString { text, exact_base, span } => {
                            self.shell_string(idx, &cmd, &wrapper, &text, exact_base, span);
                        }
                        other => {
                            let mut c = self.inner_command(&cmd, &wrapper, other, true);
                            c.parent = Some(idx);
                            self.emit_depth(c, depth + 1);
                        }
                    }
                }
                idx
            }
        }
    }

    /// Build the command a wrapper runs (never called with a shell string).
    fn inner_command(&self, outer: &SimpleCommand, wrapper: &str, inner: Inner, powerful: bool) -> SimpleCommand {
        let mut context = outer.context.clone();
        if powerful {
            context.push(Context::Wrapper(wrapper.to_string()));
        }
        let mut wrappers = outer.wrappers.clone();
        wrappers.push(wrapper.to_string());
        let (words, assignments, unresolved) = match inner {
            Inner::Argv { words, assignments } => {
                let unresolved = words
                    .first()
                    .filter(|w| w.dynamic)
                    .map(|w| format!("`{wrapper}` runs `{}`, which is only known at run time", w.text));
                (words, assignments, unresolved)
            }
            Inner::Unresolved { reason, words } => (words, Vec::new(), Some(reason)),
            Inner::ShellString { .. } => (
                Vec::new(),
                Vec::new(),
                Some(format!("`{wrapper}` runs a string that was not parsed")),
            ),
        };
        let mut all_assignments = outer.assignments.clone();
        all_assignments.extend(assignments);
        let kind = match words.first() {
            Some(w) if self.is_function(w) => CommandKind::FunctionCall,
            _ => CommandKind::Simple,
        };
        SimpleCommand {
            span: outer.span.clone(),
            words,
            assignments: all_assignments,
            redirects: outer.redirects.clone(),
            context,
            kind,
            unresolved,
            parent: outer.parent,
            wrappers,
        }
    }

    /// Parse the string given to `sh -c`, `eval` or `watch` as shell text, one level deeper.
    fn shell_string(
        &mut self,
        idx: usize,
        outer: &SimpleCommand,
        wrapper: &str,
        text: &str,
        exact_base: Option<usize>,
        span: Range<usize>,
    ) {
        if self.string_depth >= self.limits.max_string_depth {
            let reason =
                format!("`{wrapper}` strings nest deeper than {} levels", self.limits.max_string_depth);
            let mut c = self.inner_command(outer, wrapper, Inner::Unresolved { reason, words: Vec::new() }, true);
            c.parent = Some(idx);
            self.push(c);
            return;
        }
        // The inner text must outlive this call only while we walk it.
        let owned: String = text.to_string();
        let tree = match syntax_tree(&owned, self.deadline, self.limits) {
            Ok(t) => t,
            Err(e) => {
                // An unparseable inner string makes the whole input unparseable: bash would
                // run the part before the error.
                self.error = Some(match e {
                    Unparseable::Syntax { detail, .. } => Unparseable::Syntax {
                        offset: span.start,
                        detail: format!("in the string run by `{wrapper}`: {detail}"),
                    },
                    other => other,
                });
                return;
            }
        };
        let map = match exact_base {
            Some(b) => SpanMap::Offset(b),
            None => SpanMap::Fixed(span),
        };
        // A sub-walker borrows the inner text; state moves in and back out.
        let mut sub = Walker {
            top: self.top,
            src: &owned,
            map,
            out: std::mem::take(&mut self.out),
            functions: std::mem::take(&mut self.functions),
            vars: std::mem::take(&mut self.vars),
            ctx: {
                let mut c = outer.context.clone();
                c.push(Context::ShellString(wrapper.to_string()));
                c
            },
            depth: self.depth,
            max_nodes: self.max_nodes,
            limits: self.limits,
            deadline: self.deadline,
            string_depth: self.string_depth + 1,
            inherited: Vec::new(),
            parent: Some(idx),
            wrappers: {
                let mut w = outer.wrappers.clone();
                w.push(wrapper.to_string());
                w
            },
            error: None,
        };
        if wrapper != "eval" {
            // A new shell process: it inherits only exported variables, which we do not
            // track; nothing assigned here comes back either.
            let saved = sub.vars.clone();
            sub.vars.poisoned = true;
            sub.visit(tree.root_node());
            sub.vars = saved;
        } else {
            sub.visit(tree.root_node());
        }
        self.out = sub.out;
        self.functions = sub.functions;
        self.vars = sub.vars;
        if sub.error.is_some() {
            self.error = sub.error;
        }
    }

    fn assignment(&self, n: Node<'_>) -> Option<Assignment> {
        let name_node = n.child_by_field_name("name")?;
        let name = assigned_name(self.text(name_node)).to_string();
        let append = {
            let mut c = n.walk();
            n.children(&mut c).any(|k| k.kind() == "+=")
        };
        let value = match n.child_by_field_name("value") {
            Some(v) if v.kind() == "array" => {
                let mut parts = Vec::new();
                let mut dynamic = false;
                let mut c = v.walk();
                for e in v.named_children(&mut c) {
                    let w = word::single(e, self.src, &self.vars, self.span(e.byte_range()));
                    dynamic |= w.dynamic;
                    parts.push(w.text);
                }
                Word {
                    span: self.span(v.byte_range()),
                    text: parts.join(" "),
                    dynamic,
                    splits: false,
                    glob: false,
                    tilde: false,
                    home_suffix: None,
                }
            }
            Some(v) => word::single(v, self.src, &self.vars, self.span(v.byte_range())),
            None => Word {
                span: self.span(n.end_byte()..n.end_byte()),
                text: String::new(),
                dynamic: false,
                splits: false,
                glob: false,
                tilde: false,
                home_suffix: None,
            },
        };
        Some(Assignment { span: self.span(n.byte_range()), name, value, append })
    }

    fn bare_assignment(&mut self, n: Node<'_>) {
        let nodes: Vec<Node<'_>> = if n.kind() == "variable_assignments" {
            let mut c = n.walk();
            n.named_children(&mut c).collect()
        } else {
            vec![n]
        };
        let assignments: Vec<Assignment> = nodes.iter().filter_map(|a| self.assignment(*a)).collect();
        let idx = self.push(SimpleCommand {
            span: self.span(n.byte_range()),
            words: Vec::new(),
            assignments: assignments.clone(),
            redirects: self.inherited.clone(),
            context: self.ctx.clone(),
            kind: CommandKind::Assignment,
            unresolved: None,
            parent: self.parent,
            wrappers: self.wrappers.clone(),
        });
        // Walk values for substitutions first (they run before the assignment happens).
        let saved = self.parent.replace(idx);
        for a in &nodes {
            if let Some(v) = a.child_by_field_name("value") {
                self.visit(v);
            }
            if let Some(name) = a.child_by_field_name("name") {
                self.visit(name);
            }
        }
        self.parent = saved;
        for a in assignments {
            let v = (!a.value.dynamic && !a.append && !a.name.contains('[')).then_some(a.value.text);
            self.assign(&a.name, v);
        }
    }

    fn declaration(&mut self, n: Node<'_>) {
        let mut words = Vec::new();
        let mut sets = Vec::new();
        let mut c = n.walk();
        let kids: Vec<Node<'_>> = n.children(&mut c).collect();
        for k in &kids {
            match k.kind() {
                "variable_assignment" => {
                    if let Some(a) = self.assignment(*k) {
                        let mut w = a.value.clone();
                        w.text = format!("{}{}{}", a.name, if a.append { "+=" } else { "=" }, a.value.text);
                        w.span = a.span.clone();
                        let v = (!a.value.dynamic && !a.append).then(|| a.value.text.clone());
                        sets.push((a.name.clone(), v));
                        words.push(w);
                    }
                }
                "variable_name" => {
                    let t = self.text(*k);
                    sets.push((t.to_string(), None));
                    words.extend(word::fields(*k, self.src, &self.vars, self.span(k.byte_range())));
                }
                _ if !k.is_named() => {
                    if words.is_empty() {
                        words.push(plain_word(self.text(*k), self.span(k.byte_range())));
                    }
                }
                "comment" => {}
                _ => words.extend(word::fields(*k, self.src, &self.vars, self.span(k.byte_range()))),
            }
        }
        let keyword = words.first().map(|w| w.text.clone()).unwrap_or_default();
        // `local`/`declare` in a function, `unset`: we cannot follow scoping; `export X=v`
        // at top level behaves like an assignment.
        let simple_export = matches!(keyword.as_str(), "export" | "readonly")
            && !words.iter().skip(1).any(|w| w.text.starts_with('-'));
        for (name, v) in sets {
            let v = if simple_export || keyword == "local" || keyword == "declare" && !words.iter().skip(1).any(|w| w.text.starts_with('-')) {
                v
            } else {
                None
            };
            self.assign(&name, v);
        }
        let idx = self.push(SimpleCommand {
            span: self.span(n.byte_range()),
            words,
            assignments: Vec::new(),
            redirects: self.inherited.clone(),
            context: self.ctx.clone(),
            kind: CommandKind::Declaration,
            unresolved: None,
            parent: self.parent,
            wrappers: self.wrappers.clone(),
        });
        let saved = self.parent.replace(idx);
        for k in kids {
            if k.is_named() {
                self.visit(k);
            }
        }
        self.parent = saved;
    }

    fn test_command(&mut self, n: Node<'_>) {
        let t = self.text(n);
        let bracket = if t.starts_with("[[") { "[[" } else { "[" };
        let idx = self.push(SimpleCommand {
            span: self.span(n.byte_range()),
            words: vec![plain_word(bracket, self.span(n.start_byte()..n.start_byte() + bracket.len()))],
            assignments: Vec::new(),
            redirects: self.inherited.clone(),
            context: self.ctx.clone(),
            kind: CommandKind::Test,
            unresolved: None,
            parent: self.parent,
            wrappers: self.wrappers.clone(),
        });
        let saved = self.parent.replace(idx);
        self.children(n);
        self.parent = saved;
    }

    fn arithmetic_command(&mut self, n: Node<'_>) {
        let idx = self.push(SimpleCommand {
            span: self.span(n.byte_range()),
            words: vec![plain_word("((", self.span(n.start_byte()..n.start_byte() + 2))],
            assignments: Vec::new(),
            redirects: self.inherited.clone(),
            context: self.ctx.clone(),
            kind: CommandKind::Arithmetic,
            unresolved: None,
            parent: self.parent,
            wrappers: self.wrappers.clone(),
        });
        // `((x = 1))` assigns.
        self.forget_assigned_in(n);
        let saved = self.parent.replace(idx);
        self.with_ctx(Context::Arithmetic, |w| w.children(n));
        self.parent = saved;
    }
}

fn plain_word(text: &str, span: Range<usize>) -> Word {
    Word {
        span,
        text: text.to_string(),
        dynamic: false,
        splits: false,
        glob: false,
        tilde: false,
        home_suffix: None,
    }
}

/// `a[1]` → `a`.
fn assigned_name(s: &str) -> &str {
    s.split('[').next().unwrap_or(s)
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}
