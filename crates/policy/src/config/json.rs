//! JSON with positions.
//!
//! `serde_json` reports line:col for syntax errors but keeps no positions for values, so a
//! later "unknown key" or "undefined sandbox preset" could not point anywhere useful. Instead of
//! searching the text for the offending key afterwards (ambiguous when a key repeats), this is a
//! small strict JSON (RFC 8259) reader that records the position of every key and value while
//! building the same [`Node`] tree the TOML and YAML readers build. String escapes are decoded
//! by `serde_json` itself, so string semantics are exactly serde_json's. Duplicate keys are
//! rejected, as TOML and YAML do.
//!
//! Why not a span-keeping crate: jsonc-parser (0.34.0) keeps ranges, but even in its strictest
//! setting accepts raw control characters inside strings and keeps duplicate keys, and decodes
//! strings its own way; json-spanned-value (0.2.2) is strict, but its files date from 2020 and
//! it finds spans through a side channel in `io::Read`. See `docs/design/own-code.md`.

use std::borrow::Cow;

use super::node::{Entry, LineIndex, MAX_DEPTH, Node, SyntaxError, Value};

pub(crate) fn parse_json(text: &str) -> Result<Node<'_>, SyntaxError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        at: 0,
        index: LineIndex::new(text),
    };
    p.skip_ws();
    if p.at == p.bytes.len() {
        return Err(p.error("empty document: expected a JSON object"));
    }
    let node = p.value(0)?;
    p.skip_ws();
    if p.at != p.bytes.len() {
        return Err(p.error("trailing characters after the JSON value"));
    }
    Ok(node)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    index: LineIndex<'a>,
}

impl<'a> Parser<'a> {
    fn error(&self, message: &str) -> SyntaxError {
        SyntaxError {
            pos: self.index.pos(self.at),
            message: message.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn expect(&mut self, b: u8, what: &str) -> Result<(), SyntaxError> {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {what}")))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node<'a>, SyntaxError> {
        self.skip_ws();
        let pos = self.index.pos(self.at);
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        let value = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Value::Str(self.string()?),
            Some(b't') => self.literal("true", Value::Bool(true))?,
            Some(b'f') => self.literal("false", Value::Bool(false))?,
            Some(b'n') => self.literal("null", Value::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.error("expected a JSON value")),
            None => return Err(self.error("unexpected end of input: expected a JSON value")),
        };
        Ok(Node { pos, value })
    }

    fn literal(&mut self, word: &str, value: Value<'a>) -> Result<Value<'a>, SyntaxError> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<Value<'a>, SyntaxError> {
        let start = self.at;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let token = &self.text[start..self.at];
        if serde_json::from_str::<serde_json::Number>(token).is_err() {
            self.at = start;
            return Err(self.error(&format!("invalid number `{token}`")));
        }
        Ok(if token.contains(['.', 'e', 'E']) {
            Value::Float(token.parse().unwrap_or(f64::NAN))
        } else {
            Value::Int(token.parse().ok())
        })
    }

    /// A string starting at the current `"`; borrowed when it has no escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, SyntaxError> {
        let start = self.at;
        self.at += 1;
        let mut escaped = false;
        loop {
            match self.peek() {
                None => {
                    self.at = start;
                    return Err(self.error("unterminated string"));
                }
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.at += 2;
                }
                Some(0..=0x1f) => return Err(self.error("control character in string")),
                Some(_) => self.at += 1,
            }
        }
        self.at += 1;
        let raw = self
            .text
            .get(start..self.at)
            .ok_or_else(|| self.error("unterminated string"))?;
        if !escaped {
            return Ok(Cow::Borrowed(&raw[1..raw.len() - 1]));
        }
        serde_json::from_str::<String>(raw)
            .map(Cow::Owned)
            .map_err(|e| SyntaxError {
                pos: self.index.pos(start),
                message: format!("invalid string: {}", strip_position(&e.to_string())),
            })
    }

    fn array(&mut self, depth: usize) -> Result<Value<'a>, SyntaxError> {
        self.at += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value<'a>, SyntaxError> {
        self.at += 1;
        let mut entries: Vec<Entry<'a>> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Table(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key_at = self.at;
            let key_pos = self.index.pos(key_at);
            let key = self.string()?;
            if entries.iter().any(|e| e.key == key) {
                self.at = key_at;
                return Err(self.error(&format!("duplicate key `{key}`")));
            }
            self.expect(b':', "`:` after the key")?;
            let value = self.value(depth + 1)?;
            entries.push(Entry {
                key,
                key_pos,
                value,
            });
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Table(entries));
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }
}

fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::node::Pos;

    fn table(n: Node<'_>) -> Vec<Entry<'_>> {
        match n.value {
            Value::Table(e) => e,
            other => panic!("not a table: {other:?}"),
        }
    }

    #[test]
    fn positions_of_keys_and_values() {
        let e = table(
            parse_json("{\n  \"a\": [\"x\", true],\n  \"b\": {\"c\": \"\\u00e9\"}\n}").unwrap(),
        );
        assert_eq!(e[0].key_pos, Pos { line: 2, col: 3 });
        assert_eq!(e[0].value.pos, Pos { line: 2, col: 8 });
        let inner = table(e.into_iter().nth(1).unwrap().value);
        assert_eq!(inner[0].key_pos, Pos { line: 3, col: 9 });
        assert!(matches!(&inner[0].value.value, Value::Str(s) if s == "é"));
    }

    #[test]
    fn errors() {
        for (text, line, col, msg) in [
            ("{\"a\": 1, \"a\": 2}", 1, 10, "duplicate key `a`"),
            ("{\"a\" 1}", 1, 6, "expected `:` after the key"),
            ("{\"a\": tru}", 1, 7, "expected a JSON value"),
            ("{\"a\": \"x}", 1, 7, "unterminated string"),
            ("{}\n x", 2, 2, "trailing characters after the JSON value"),
            ("", 1, 1, "empty document: expected a JSON object"),
            ("{\"a\": 01}", 1, 7, "invalid number `01`"),
            ("{\"a\": \"\\q\"}", 1, 7, "invalid string: invalid escape"),
        ] {
            let e = parse_json(text).unwrap_err();
            assert_eq!(
                (e.pos.line, e.pos.col, e.message.as_str()),
                (line, col, msg),
                "{text}"
            );
        }
    }

    #[test]
    fn deep_nesting() {
        assert!(parse_json(&"[".repeat(100_000)).is_err());
    }
}
