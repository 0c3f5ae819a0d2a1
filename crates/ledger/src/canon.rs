//! Canonical encoding, version 1 (`pinfold-canon-1`), and the line format built on it.
//!
//! A value's canonical encoding is the UTF-8 JSON text written with:
//! * no whitespace outside strings;
//! * object members sorted by key, comparing the keys' UTF-8 bytes; no duplicate keys;
//! * integers in shortest decimal form (`-`, then digits, no leading zeros, no `+`, no
//!   exponent); floating-point numbers are not allowed (callers record durations in integer
//!   micro- or milliseconds);
//! * strings escaped as serde_json writes them: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
//!   characters below U+0020 as `\u00XX` (lowercase hex), everything else (including `/` and
//!   all non-ASCII) as its raw UTF-8 bytes;
//! * `true`, `false`, `null` as themselves.
//!
//! A ledger line is `{"hash":"<64 lowercase hex>",` followed by the canonical encoding of the
//! record without `hash`, minus its opening `{`, then `\n`. The hash is SHA-256 of that
//! canonical encoding (the body, with its `{`), so a reader checks a record by hashing bytes it
//! already has, without re-encoding.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A value the canonical encoding cannot represent.
#[derive(Debug, thiserror::Error)]
#[error("the canonical encoding has no floating-point numbers: found {0}")]
pub struct FloatError(pub String);

/// Append `v`'s canonical encoding to `out`.
pub fn encode_into(v: &Value, out: &mut Vec<u8>) -> Result<(), FloatError> {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.extend_from_slice(u.to_string().as_bytes());
            } else if let Some(i) = n.as_i64() {
                out.extend_from_slice(i.to_string().as_bytes());
            } else {
                return Err(FloatError(n.to_string()));
            }
        }
        Value::String(s) => string_into(s, out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                encode_into(x, out)?;
            }
            out.push(b']');
        }
        Value::Object(m) => {
            // serde_json's map may preserve insertion order when a dependency enables
            // `preserve_order`: sort explicitly.
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string_into(k, out);
                out.push(b':');
                encode_into(&m[k.as_str()], out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// The canonical encoding of `v`.
pub fn encode(v: &Value) -> Result<Vec<u8>, FloatError> {
    let mut out = Vec::with_capacity(256);
    encode_into(v, &mut out)?;
    Ok(out)
}

fn string_into(s: &str, out: &mut Vec<u8>) {
    // serde_json's string escaping is exactly the one documented above.
    serde_json::to_writer(&mut *out, s).expect("writing a string to a Vec cannot fail");
}

/// SHA-256 as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

pub(crate) fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        let d = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *o = (d(b[2 * i])? << 4) | d(b[2 * i + 1])?;
    }
    Some(out)
}

/// Build a ledger line from a record object without `hash`: returns the line (with its `\n`)
/// and the record's hash.
pub fn line(record: &Value) -> Result<(Vec<u8>, String), FloatError> {
    let body = encode(record)?;
    debug_assert!(body.len() > 2 && body[0] == b'{' && body[1] == b'"');
    let hash = sha256_hex(&body);
    let mut out = Vec::with_capacity(body.len() + 80);
    out.extend_from_slice(b"{\"hash\":\"");
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(b"\",");
    out.extend_from_slice(&body[1..]);
    out.push(b'\n');
    Ok((out, hash))
}

/// Split a line (without its `\n`) into its stored hash and its body (the canonical encoding
/// the hash covers, `{` restored). The body is returned as an owned buffer.
pub fn split_line(line: &[u8]) -> Option<(&str, Vec<u8>)> {
    const P: &[u8] = b"{\"hash\":\"";
    if line.len() < P.len() + 64 + 3 || !line.starts_with(P) {
        return None;
    }
    let hash = std::str::from_utf8(&line[P.len()..P.len() + 64]).ok()?;
    let rest = &line[P.len() + 64..];
    if !rest.starts_with(b"\",\"") {
        return None;
    }
    let mut body = Vec::with_capacity(rest.len());
    body.push(b'{');
    body.extend_from_slice(&rest[2..]);
    Some((hash, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_compact_no_floats() {
        let v = json!({"b": 1, "a": [true, null, -3], "é": "x\ny\u{1}/\"", "A": {}});
        assert_eq!(
            String::from_utf8(encode(&v).unwrap()).unwrap(),
            r#"{"A":{},"a":[true,null,-3],"b":1,"é":"x\ny\u0001/\""}"#
        );
        assert!(encode(&json!({"x": 1.5})).is_err());
    }

    #[test]
    fn line_round_trip() {
        let (l, h) = line(&json!({"seq": 0, "kind": "check"})).unwrap();
        let text = std::str::from_utf8(&l).unwrap();
        assert_eq!(text, format!("{{\"hash\":\"{h}\",\"kind\":\"check\",\"seq\":0}}\n"));
        let (stored, body) = split_line(&l[..l.len() - 1]).unwrap();
        assert_eq!(stored, h);
        assert_eq!(sha256_hex(&body), h);
        // The line is itself valid JSON.
        let _: Value = serde_json::from_slice(&l).unwrap();
    }
}
