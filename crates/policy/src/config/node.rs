//! A small, format-neutral document tree with positions.
//!
//! TOML, YAML and JSON are each turned into a [`Node`] tree in which every value and every
//! table key knows its line and column. The schema check in `decode` then walks one tree shape
//! for all three formats, so every error message is the same whatever the format.

use std::borrow::Cow;

/// 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub(crate) const START: Pos = Pos { line: 1, col: 1 };
}

#[derive(Debug)]
pub(crate) struct Node<'a> {
    pub pos: Pos,
    pub value: Value<'a>,
}

/// Dates are kept only as a kind: no key of the schema accepts them, so they only ever appear
/// in "expected a string, found a datetime". Numbers keep their value (`pids`, `cpus`); an
/// integer too large for an `i128` is `Int(None)`.
#[derive(Debug)]
pub(crate) enum Value<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Int(Option<i128>),
    Float(f64),
    Null,
    Datetime,
    Array(Vec<Node<'a>>),
    Table(Vec<Entry<'a>>),
}

impl Value<'_> {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Null => "null",
            Value::Datetime => "a date-time",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub key: Cow<'a, str>,
    pub key_pos: Pos,
    pub value: Node<'a>,
}

/// A syntax error: where and what.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// Deepest nesting accepted in any format; far beyond any sensible policy, far below a stack
/// overflow.
pub(crate) const MAX_DEPTH: usize = 64;

/// Byte offset to line/column.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0);
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, starts }
    }

    pub(crate) fn pos(&self, offset: usize) -> Pos {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let col = self.text[start..offset].chars().count() + 1;
        Pos {
            line: saturate(line),
            col: saturate(col),
        }
    }
}

pub(crate) fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

// ---------------------------------------------------------------------------------------------
// TOML: the toml crate's span-keeping document parser (it rejects duplicate keys itself).

pub(crate) fn parse_toml(text: &str) -> Result<Node<'_>, SyntaxError> {
    use toml::de::{DeTable, DeValue};
    let index = LineIndex::new(text);
    let doc = DeTable::parse(text).map_err(|e| {
        let span = e.span();
        let pos = span.as_ref().map_or(Pos::START, |s| index.pos(s.start));
        let mut message = e.message().trim_end().to_string();
        if message == "duplicate key"
            && let Some(key) = span.and_then(|s| text.get(s))
        {
            message = format!("duplicate key `{}`", key.trim_matches(['"', '\'']));
        }
        SyntaxError { pos, message }
    })?;

    fn table<'a>(
        t: DeTable<'a>,
        index: &LineIndex<'_>,
        depth: usize,
    ) -> Result<Vec<Entry<'a>>, SyntaxError> {
        let mut entries = Vec::with_capacity(t.len());
        for (k, v) in t {
            let key_pos = index.pos(k.span().start);
            let value = node(v, index, depth + 1)?;
            entries.push(Entry {
                key: k.into_inner(),
                key_pos,
                value,
            });
        }
        // The parser's map is ordered by key; report problems in file order instead.
        entries.sort_by_key(|e| (e.key_pos.line, e.key_pos.col));
        Ok(entries)
    }

    fn node<'a>(
        v: serde_spanned::Spanned<DeValue<'a>>,
        index: &LineIndex<'_>,
        depth: usize,
    ) -> Result<Node<'a>, SyntaxError> {
        let pos = index.pos(v.span().start);
        if depth > MAX_DEPTH {
            return Err(SyntaxError {
                pos,
                message: "nesting too deep".into(),
            });
        }
        let value = match v.into_inner() {
            DeValue::String(s) => Value::Str(s),
            DeValue::Integer(i) => Value::Int(i128::from_str_radix(i.as_str(), i.radix()).ok()),
            DeValue::Float(f) => Value::Float(f.as_str().replace('_', "").parse().unwrap_or(f64::NAN)),
            DeValue::Boolean(b) => Value::Bool(b),
            DeValue::Datetime(_) => Value::Datetime,
            DeValue::Array(a) => {
                let mut items = Vec::with_capacity(a.len());
                for item in a {
                    items.push(node(item, index, depth + 1)?);
                }
                Value::Array(items)
            }
            DeValue::Table(t) => Value::Table(table(t, index, depth)?),
        };
        Ok(Node { pos, value })
    }

    let entries = table(doc.into_inner(), &index, 0)?;
    Ok(Node {
        pos: Pos::START,
        value: Value::Table(entries),
    })
}

// ---------------------------------------------------------------------------------------------
// YAML: serde-saphyr with its `Spanned` wrapper on every value and key. It rejects duplicate
// keys and enforces its default resource budget (alias expansion, depth, size).

struct YamlNode(Value<'static>);

impl<'de> serde::Deserialize<'de> for YamlNode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(YamlVisitor).map(YamlNode)
    }
}

fn yaml_pos(l: &serde_saphyr::Location) -> Pos {
    let sat = |n: u64| u32::try_from(n).unwrap_or(u32::MAX).max(1);
    Pos {
        line: sat(l.line()),
        col: sat(l.column()),
    }
}

fn from_spanned(s: serde_saphyr::Spanned<YamlNode>) -> Node<'static> {
    Node {
        pos: yaml_pos(&s.referenced),
        value: s.value.0,
    }
}

struct YamlVisitor;

impl<'de> serde::de::Visitor<'de> for YamlVisitor {
    type Value = Value<'static>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Value::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Value::Str(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Value::Int(Some(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Value::Int(Some(v.into())))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Self::Value, E> {
        Ok(Value::Int(Some(v)))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Self::Value, E> {
        Ok(Value::Int(i128::try_from(v).ok()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(YamlVisitor)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_saphyr::Spanned<YamlNode>>()? {
            items.push(from_spanned(item));
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) =
            map.next_entry::<serde_saphyr::Spanned<String>, serde_saphyr::Spanned<YamlNode>>()?
        {
            entries.push(Entry {
                key: Cow::Owned(k.value),
                key_pos: yaml_pos(&k.referenced),
                value: from_spanned(v),
            });
        }
        Ok(Value::Table(entries))
    }
}

pub(crate) fn parse_yaml(text: &str) -> Result<Node<'static>, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node {
            pos: Pos::START,
            value: Value::Table(Vec::new()),
        });
    }
    match serde_saphyr::from_str::<serde_saphyr::Spanned<YamlNode>>(text) {
        Ok(doc) => {
            let node = from_spanned(doc);
            // A document holding only comments or `~` is an empty policy.
            if matches!(node.value, Value::Null) {
                return Ok(Node {
                    pos: Pos::START,
                    value: Value::Table(Vec::new()),
                });
            }
            check_depth(&node, 0)?;
            Ok(node)
        }
        Err(e) => {
            let pos = e.location().map_or(Pos::START, |l| yaml_pos(&l));
            let mut message = e.without_snippet().to_string();
            // serde-saphyr appends " at line L, column C"; we print the position in front.
            if let Some(i) = message.rfind(" at line ") {
                message.truncate(i);
            }
            Err(SyntaxError {
                pos,
                message: message.trim().to_string(),
            })
        }
    }
}

fn check_depth(node: &Node<'_>, depth: usize) -> Result<(), SyntaxError> {
    if depth > MAX_DEPTH {
        return Err(SyntaxError {
            pos: node.pos,
            message: "nesting too deep".into(),
        });
    }
    match &node.value {
        Value::Array(items) => items.iter().try_for_each(|n| check_depth(n, depth + 1)),
        Value::Table(entries) => entries
            .iter()
            .try_for_each(|e| check_depth(&e.value, depth + 1)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index() {
        let idx = LineIndex::new("ab\ncdé\n\nx");
        assert_eq!(idx.pos(0), Pos { line: 1, col: 1 });
        assert_eq!(idx.pos(3), Pos { line: 2, col: 1 });
        assert_eq!(idx.pos(7), Pos { line: 2, col: 4 }); // after the 2-byte é
        assert_eq!(idx.pos(6), Pos { line: 2, col: 3 }); // inside é: clamps to its start
        assert_eq!(idx.pos(9), Pos { line: 4, col: 1 });
        assert_eq!(idx.pos(999), Pos { line: 4, col: 2 });
    }

    #[test]
    fn toml_positions() {
        let n = parse_toml("a = 1\n[t]\n  b = 'x'\n").unwrap();
        let Value::Table(e) = n.value else { panic!() };
        assert_eq!(e[0].key, "a");
        assert_eq!(e[1].key_pos, Pos { line: 2, col: 2 });
        let Value::Table(inner) = &e[1].value.value else {
            panic!()
        };
        assert_eq!(inner[0].key_pos, Pos { line: 3, col: 3 });
        assert_eq!(inner[0].value.pos, Pos { line: 3, col: 7 });
    }

    #[test]
    fn yaml_positions() {
        let n = parse_yaml("a: 1\nt:\n  b: x\n").unwrap();
        let Value::Table(e) = n.value else { panic!() };
        let Value::Table(inner) = &e[1].value.value else {
            panic!()
        };
        assert_eq!(inner[0].key_pos, Pos { line: 3, col: 3 });
        assert_eq!(inner[0].value.pos, Pos { line: 3, col: 6 });
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("a = {}", "[".repeat(100_000));
        assert!(parse_toml(&deep).is_err());
        let deep = format!("a = {}1{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_toml(&deep).is_err());
        let deep = format!("a: {}", "[".repeat(100_000));
        assert!(parse_yaml(&deep).is_err());
    }
}
