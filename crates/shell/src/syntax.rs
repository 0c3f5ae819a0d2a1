//! The syntax tree the walker reads: tree-sitter's tree, checked and copied into one array.
//!
//! Reading tree-sitter's tree goes through its C API one call at a time — a heap-allocated
//! cursor for every list of children, a call for every kind, field and byte offset — and
//! for a nine-word command that cost about as much as the whole walk. [`SyntaxTree::build`]
//! makes one pre-order pass with a single cursor, does the fail-closed checks on the way
//! (they need that pass anyway), and records every visible node: kind, field, named or not,
//! byte range, parent and next sibling. The walker then reads plain memory through [`Node`],
//! whose methods mirror the tree-sitter ones it replaces.
//!
//! Only visible nodes are recorded, as a tree-sitter cursor sees them; a field on a hidden
//! node is carried by the visible children under it, as the cursor reports it
//! (`tests::same_answers_as_tree_sitter` compares every query with tree-sitter's own).

use std::ops::Range;
use std::time::Instant;

use crate::{Limits, Unparseable};

/// No node (a missing parent, sibling or child).
const NONE: u32 = u32::MAX;

/// tree-sitter's kind id for ERROR nodes (`ts_builtin_sym_error`, what `is_error` compares).
const ERROR: u16 = u16::MAX;

/// Syntax tree levels allowed per shell construct: `"$(…)"` costs about four node levels
/// (string, substitution, command, argument), `a && b && …` one per operator. The node-level
/// bound is a safety net for the walker's recursion; constructs are counted exactly.
pub(crate) const NODES_PER_LEVEL: usize = 16;

/// One visible node (24 bytes).
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u32,
    end: u32,
    parent: u32,
    next_sibling: u32,
    kind: u16,
    /// tree-sitter's field id; 0 for none.
    field: u16,
    named: bool,
    /// Its first child, if any, is the next entry (pre-order).
    has_children: bool,
}

/// A parsed, checked syntax tree (see the module docs).
#[derive(Debug)]
pub(crate) struct SyntaxTree {
    nodes: Vec<Entry>,
}

/// A node of a [`SyntaxTree`]: a copyable handle, like `tree_sitter::Node`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'t> {
    tree: &'t SyntaxTree,
    id: u32,
}

/// Node kinds that open a nesting level, for [`Limits::max_depth`].
fn opens_level(kind: &str) -> bool {
    matches!(
        kind,
        "command_substitution"
            | "process_substitution"
            | "subshell"
            | "compound_statement"
            | "if_statement"
            | "while_statement"
            | "for_statement"
            | "c_style_for_statement"
            | "case_statement"
            | "arithmetic_expansion"
            | "expansion"
            | "parenthesized_expression"
            | "test_command"
            | "array"
    )
}

/// Field names by id (index 0 is no field).
fn field_names() -> &'static [&'static str] {
    static FIELDS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    FIELDS.get_or_init(|| {
        let lang = crate::language();
        (0..=lang.field_count() as u16).map(|id| lang.field_name_for_id(id).unwrap_or("")).collect()
    })
}

fn field_id(name: &str) -> u16 {
    // Field 0 is no field; an unknown name matches nothing.
    field_names().iter().skip(1).position(|f| *f == name).map_or(u16::MAX, |i| i as u16 + 1)
}

impl SyntaxTree {
    /// Check `tree` (parsed from `text`) and copy it. Fail closed: any ERROR or MISSING node,
    /// any nesting past the limit, or any input bytes the tree does not account for
    /// (tree-sitter can drop text after some heredocs) make the whole input unparseable.
    /// Heredoc bodies and comments count as single leaves for these checks (their insides
    /// are recorded, not checked), as they always have.
    pub(crate) fn build(
        tree: &tree_sitter::Tree,
        text: &str,
        limits: &Limits,
        deadline: Instant,
    ) -> Result<SyntaxTree, Unparseable> {
        if u32::try_from(text.len()).is_err() {
            return Err(Unparseable::TooLarge { len: text.len(), limit: u32::MAX as usize });
        }
        let max_nodes = limits.max_depth.saturating_mul(NODES_PER_LEVEL);
        let mut nodes: Vec<Entry> = Vec::with_capacity(text.len() / 3 + 8);
        let mut cursor = tree.root_node().walk();
        // For each node on the path from the root: its entry, its last child so far, and
        // whether it opens a nesting level.
        let mut path: Vec<(u32, u32, bool)> = Vec::with_capacity(32);
        // While inside a heredoc body or comment: the path length at which it began.
        let mut quiet_from: Option<usize> = None;
        let mut levels = 0usize;
        let mut covered_to = 0usize;
        let mut first_error: Option<(usize, String)> = None;
        let mut steps = 0usize;
        loop {
            steps += 1;
            if steps.is_multiple_of(4096) && Instant::now() > deadline {
                return Err(Unparseable::Timeout { millis: limits.timeout.as_millis() as u64 });
            }
            let node = cursor.node();
            let kind_id = node.kind_id();
            let kind = crate::kind_name(kind_id);
            let (start, end) = (node.start_byte(), node.end_byte());
            let id = nodes.len() as u32;
            let parent = match path.last_mut() {
                Some((p, last, _)) => {
                    if *last != NONE {
                        nodes[*last as usize].next_sibling = id;
                    }
                    *last = id;
                    *p
                }
                None => NONE,
            };
            let field = cursor.field_id().map_or(0, |f| f.get());
            // Moves the cursor to the first visible child, if there is one (exactly when
            // `child_count` is not 0); `node` stays valid for the checks below.
            let has_children = cursor.goto_first_child();
            nodes.push(Entry {
                start: start as u32,
                end: end as u32,
                parent,
                next_sibling: NONE,
                kind: kind_id,
                field,
                named: node.is_named(),
                has_children,
            });
            let opens = quiet_from.is_none() && opens_level(kind);
            path.push((id, NONE, opens));
            levels += usize::from(opens);
            let boundary = matches!(kind, "heredoc_body" | "comment");
            if quiet_from.is_none() {
                if path.len() > max_nodes || levels > limits.max_depth {
                    return Err(Unparseable::TooDeep { limit: limits.max_depth });
                }
                // `is_error` is the kind id of ERROR, without another call into the library.
                if first_error.is_none() && (kind_id == ERROR || node.is_missing()) {
                    let what = if node.is_missing() {
                        format!("missing `{kind}`")
                    } else {
                        let t = text.get(start..end).unwrap_or("");
                        let t: String = t.chars().take(30).collect();
                        format!("unexpected `{t}`")
                    };
                    first_error = Some((start, what));
                }
                if boundary || !has_children {
                    if start > covered_to {
                        gap_is_blank(text, covered_to, start)?;
                    }
                    covered_to = covered_to.max(end);
                }
                if boundary {
                    quiet_from = Some(path.len());
                }
            }
            if has_children {
                continue;
            }
            loop {
                if let Some((_, _, opens)) = path.pop() {
                    levels -= usize::from(opens);
                }
                if quiet_from.is_some_and(|q| path.len() < q) {
                    quiet_from = None;
                }
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
                    return Ok(SyntaxTree { nodes });
                }
            }
        }
    }

    pub(crate) fn root(&self) -> Node<'_> {
        Node { tree: self, id: 0 }
    }

    /// Every node, in pre-order.
    pub(crate) fn all(&self) -> impl Iterator<Item = Node<'_>> {
        (0..self.nodes.len() as u32).map(move |id| Node { tree: self, id })
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

impl<'t> Node<'t> {
    fn entry(&self) -> &'t Entry {
        &self.tree.nodes[self.id as usize]
    }

    fn at(&self, id: u32) -> Option<Node<'t>> {
        (id != NONE).then_some(Node { tree: self.tree, id })
    }

    /// The grammar's name for this node's kind.
    pub(crate) fn kind(&self) -> &'static str {
        crate::kind_name(self.entry().kind)
    }

    pub(crate) fn is_named(&self) -> bool {
        self.entry().named
    }

    pub(crate) fn start_byte(&self) -> usize {
        self.entry().start as usize
    }

    pub(crate) fn end_byte(&self) -> usize {
        self.entry().end as usize
    }

    pub(crate) fn byte_range(&self) -> Range<usize> {
        self.start_byte()..self.end_byte()
    }

    pub(crate) fn parent(&self) -> Option<Node<'t>> {
        self.at(self.entry().parent)
    }

    /// The next visible sibling, named or not.
    pub(crate) fn next_sibling(&self) -> Option<Node<'t>> {
        self.at(self.entry().next_sibling)
    }

    /// The field this node fills in its parent, if any.
    pub(crate) fn field_name(&self) -> Option<&'static str> {
        match self.entry().field {
            0 => None,
            f => field_names().get(usize::from(f)).copied(),
        }
    }

    /// The visible children, named and anonymous, in order.
    pub(crate) fn children(&self) -> Children<'t> {
        let first = if self.entry().has_children { self.id + 1 } else { NONE };
        Children { tree: self.tree, next: first }
    }

    pub(crate) fn named_children(&self) -> impl Iterator<Item = Node<'t>> + 't {
        self.children().filter(|k| k.is_named())
    }

    pub(crate) fn named_child(&self, i: usize) -> Option<Node<'t>> {
        self.named_children().nth(i)
    }

    #[cfg(test)]
    pub(crate) fn child_count(&self) -> usize {
        self.children().count()
    }

    pub(crate) fn child_by_field_name(&self, name: &str) -> Option<Node<'t>> {
        self.children_by_field_name(name).next()
    }

    pub(crate) fn children_by_field_name(&self, name: &str) -> impl Iterator<Item = Node<'t>> + 't {
        let f = field_id(name);
        self.children().filter(move |k| k.entry().field == f)
    }
}

/// The children of a [`Node`].
#[derive(Debug, Clone)]
pub(crate) struct Children<'t> {
    tree: &'t SyntaxTree,
    next: u32,
}

impl<'t> Iterator for Children<'t> {
    type Item = Node<'t>;

    fn next(&mut self) -> Option<Node<'t>> {
        if self.next == NONE {
            return None;
        }
        let n = Node { tree: self.tree, id: self.next };
        self.next = n.entry().next_sibling;
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts_parse(text: &str) -> tree_sitter::Tree {
        let mut p = tree_sitter::Parser::new();
        p.set_language(crate::language()).unwrap();
        p.parse(text, None).unwrap()
    }

    /// Every query the walker makes gives what tree-sitter's own API gives, node for node.
    fn compare(ts: tree_sitter::Node<'_>, ours: Node<'_>, fields: &[&str]) {
        assert_eq!(ts.kind(), ours.kind(), "kind at {:?}", ts.byte_range());
        assert_eq!(ts.byte_range(), ours.byte_range());
        assert_eq!(ts.is_named(), ours.is_named());
        assert_eq!(ts.child_count() as usize, ours.child_count(), "{} at {:?}", ts.kind(), ts.byte_range());
        let mut c = ts.walk();
        let ts_named: Vec<_> = ts.named_children(&mut c).map(|k| k.byte_range()).collect();
        let our_named: Vec<_> = ours.named_children().map(|k| k.byte_range()).collect();
        assert_eq!(ts_named, our_named);
        if let Some(k) = ts.named_child(0) {
            assert_eq!(Some(k.byte_range()), ours.named_child(0).map(|n| n.byte_range()));
        }
        for f in fields {
            let a = ts.child_by_field_name(f).map(|k| (k.kind(), k.byte_range()));
            let b = ours.child_by_field_name(f).map(|k| (k.kind(), k.byte_range()));
            assert_eq!(a, b, "field {f} of {} at {:?}", ts.kind(), ts.byte_range());
            let mut c = ts.walk();
            let a: Vec<_> = ts.children_by_field_name(f, &mut c).map(|k| k.byte_range()).collect();
            let b: Vec<_> = ours.children_by_field_name(f).map(|k| k.byte_range()).collect();
            assert_eq!(a, b, "fields {f} of {} at {:?}", ts.kind(), ts.byte_range());
        }
        let mut c = ts.walk();
        if c.goto_first_child() {
            let mut mine = ours.children();
            loop {
                let k = mine.next().expect("as many children");
                assert_eq!(c.field_name(), k.field_name(), "field of {} at {:?}", c.node().kind(), c.node().byte_range());
                assert_eq!(k.parent().map(|p| p.byte_range()), Some(ours.byte_range()));
                assert_eq!(k.next_sibling().map(|s| s.byte_range()), c.node().next_sibling().map(|s| s.byte_range()));
                compare(c.node(), k, fields);
                if !c.goto_next_sibling() {
                    break;
                }
            }
            assert!(mine.next().is_none());
        }
    }

    fn build(text: &str) -> Result<SyntaxTree, Unparseable> {
        let limits = Limits::default();
        SyntaxTree::build(&ts_parse(text), text, &limits, Instant::now() + limits.timeout)
    }

    /// The checks made on the way: ERROR (by kind id) and MISSING nodes, nesting, and text
    /// no leaf covers.
    #[test]
    fn fails_closed_on_the_way() {
        let e = build("a && && b\n").unwrap_err();
        assert!(matches!(&e, Unparseable::Syntax { detail, .. } if detail.starts_with("unexpected")), "{e}");
        let e = build("if true; then rm x\n").unwrap_err();
        assert!(matches!(&e, Unparseable::Syntax { detail, .. } if detail.starts_with("missing")), "{e}");
        let deep = format!("{}x{}\n", "$(".repeat(201), ")".repeat(201));
        assert_eq!(build(&deep).unwrap_err(), Unparseable::TooDeep { limit: 200 });
        assert!(build("cat <<'EOF'; echo done\nhi\nEOF\n").is_err());
        assert!(build("echo ok # fine\n").is_ok());
    }

    #[test]
    fn every_kind_has_a_slot() {
        assert!(crate::language().node_kind_count() <= crate::KIND_SLOTS);
        assert_eq!(crate::kind_name(0), crate::language().node_kind_for_id(0).unwrap());
        assert_eq!(crate::kind_name(ERROR), "");
    }

    #[test]
    fn same_answers_as_tree_sitter() {
        let fields = ["name", "value", "body", "redirect", "argument", "variable", "descriptor", "operator", "condition"];
        let inputs = [
            "git status\n",
            "docker run --rm -v \"$PWD:/src\" -w /src rust:1 cargo build\n",
            "X=1 Y=$(pwd) env -i a=b cmd arg >out 2>&1 <in\n",
            "a | b |& c && d || e; f & g\n",
            "for f in *.rs; do rustfmt \"$f\"; done\n",
            "while read -r l; do echo \"$l\"; done < <(ls)\n",
            "if [ -f x ]; then a; elif [[ $y == z ]]; then b; else c; fi\n",
            "case $x in a|b) one;; *) two;; esac\n",
            "f() { local v=1; echo ${v:-x} $((v + 1)); } > log\n",
            "cat <<EOF | sh\nrm -rf $HOME `id`\nEOF\n",
            "cat <<'EOF' >out && rm x\n$(not run)\nEOF\n",
            "export A=1 B; declare -a arr=(1 2 3); unset A\n",
            "(( i++ )); x=$(( 2 * 3 )); echo ${#arr[@]} ${arr[1]}\n",
            "bash -c 'make && make install' # comment\n",
            "echo $'a\\nb' $\"t\" 'q' \"a${b}c\" \\; ~/x {a,b}\n",
            "coproc { sleep 1; }; time -p ls; ! true\n",
            "a=(x y); a+=(z); [[ -n ${a[0]} ]] && echo ok\n",
            "find . -name '*.o' -exec rm {} \\;\n",
            "a=(1 # one\n 2) # two\nif x # c\nthen y; fi\n",
            "cmd \\\n  --flag=v \"$(inner ${x:-d} 'q')\" <<<\"s\" 3>&- # c\n",
            "select x in a b; do break; done; until false; do :; done\n",
            "for ((i = 0; i < 3; i++)); do echo $i; done; [ a = b ] || exit 1\n",
        ];
        let limits = Limits::default();
        for text in inputs {
            let tree = ts_parse(text);
            let ours = SyntaxTree::build(&tree, text, &limits, Instant::now() + limits.timeout)
                .unwrap_or_else(|e| panic!("{text:?}: {e}"));
            compare(tree.root_node(), ours.root(), &fields);
        }
    }
}
