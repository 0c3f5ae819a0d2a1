//! Redaction of credentials before a record is written.
//!
//! Every string in a record's `data` (keys are left alone) is scanned for:
//! * provider tokens by prefix: GitHub (`ghp_` `gho_` `ghu_` `ghs_` `ghr_` `github_pat_`),
//!   OpenAI/Anthropic-style `sk-…`, Stripe `sk_live_` `sk_test_` `rk_live_`, Slack `xox?-`
//!   `xapp-`, GitLab `glpat-`, Google `AIza…`, npm `npm_`, Hugging Face `hf_`, PyPI `pypi-`,
//!   AWS access key ids `AKIA`/`ASIA` + 16;
//! * `Authorization:` / `Proxy-Authorization:` header values (the scheme word is kept);
//! * PEM private key blocks (`-----BEGIN … PRIVATE KEY-----` to the matching end, or to the end
//!   of the string when it is cut off);
//! * assignments whose name ends in `password`, `passwd`, `secret`, `token`, `api_key`,
//!   `apikey` (`password=…`, `DB_PASSWORD=…`, `token: …`, `--password=…`, `--token …`);
//! * passwords in URLs (`https://user:pass@host`);
//! * literal values the caller declares secret (for instance the policy's).
//!
//! Each match is replaced by `[REDACTED]` (tokens keep their prefix: `ghp_[REDACTED]`). This is
//! pattern matching: a credential of a shape not listed here is written as it is.

use serde_json::Value;

const MASK: &str = "[REDACTED]";

/// Token prefixes and the fewest token characters that must follow.
const TOKENS: &[(&str, usize)] = &[
    ("github_pat_", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("sk_live_", 16),
    ("sk_test_", 16),
    ("rk_live_", 16),
    ("sk-", 20),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("xapp-", 10),
    ("glpat-", 20),
    ("AIza", 30),
    ("npm_", 30),
    ("hf_", 30),
    ("pypi-", 50),
];

const SECRET_NAMES: &[&str] = &["password", "passwd", "secret", "token", "api_key", "apikey", "api-key"];

/// Redact every string inside `v`; returns how many credentials were replaced.
pub fn redact_value(v: &mut Value, literals: &[String]) -> usize {
    match v {
        Value::String(s) => {
            let (out, n) = redact_str(s, literals);
            if n > 0 {
                *s = out;
            }
            n
        }
        Value::Array(a) => a.iter_mut().map(|x| redact_value(x, literals)).sum(),
        Value::Object(m) => m.values_mut().map(|x| redact_value(x, literals)).sum(),
        _ => 0,
    }
}

/// Redact one string: the result and the number of replacements.
pub fn redact_str(s: &str, literals: &[String]) -> (String, usize) {
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    private_keys(s, &mut spans);
    authorization(s, &mut spans);
    tokens(s, &mut spans);
    assignments(s, &mut spans);
    url_passwords(s, &mut spans);
    for lit in literals.iter().filter(|l| l.len() >= 4) {
        for (i, _) in s.match_indices(lit.as_str()) {
            spans.push((i, i + lit.len(), MASK.to_string()));
        }
    }
    if spans.is_empty() {
        return (s.to_string(), 0);
    }
    // Earliest first; at one start, the longest.
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out = String::with_capacity(s.len());
    let (mut at, mut n) = (0, 0);
    for (start, end, rep) in spans {
        if start < at {
            continue; // inside a span already replaced
        }
        out.push_str(&s[at..start]);
        out.push_str(&rep);
        at = end;
        n += 1;
    }
    out.push_str(&s[at..]);
    (out, n)
}

fn is_tok(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn private_keys(s: &str, spans: &mut Vec<(usize, usize, String)>) {
    let mut from = 0;
    while let Some(i) = s[from..].find("-----BEGIN ").map(|i| i + from) {
        let head_end = match s[i + 11..].find("-----") {
            Some(j) => i + 11 + j,
            None => break,
        };
        if !s[i + 11..head_end].ends_with("PRIVATE KEY") {
            from = head_end;
            continue;
        }
        let end = match s[head_end..].find("-----END ") {
            Some(j) => {
                let e = head_end + j + 9;
                s[e..].find("-----").map_or(s.len(), |k| e + k + 5)
            }
            None => s.len(),
        };
        spans.push((i, end, "[REDACTED private key]".to_string()));
        from = end;
    }
}

fn authorization(s: &str, spans: &mut Vec<(usize, usize, String)>) {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("authorization:").map(|i| i + from) {
        let b = s.as_bytes();
        let mut v = i + "authorization:".len();
        while v < b.len() && b[v] == b' ' {
            v += 1;
        }
        let stop = |c: u8| matches!(c, b'\n' | b'\r' | b'"' | b'\'');
        let mut end = v;
        while end < b.len() && !stop(b[end]) {
            end += 1;
        }
        // Keep the scheme word (`Bearer`, `Basic`, `token`) when a credential follows it.
        let mut start = v;
        if let Some(sp) = s[v..end].find(' ')
            && s[v..v + sp].bytes().all(|c| c.is_ascii_alphabetic()) {
                start = v + sp + 1;
            }
        if end > start {
            spans.push((start, end, MASK.to_string()));
        }
        from = end.max(i + 1);
    }
}

fn tokens(s: &str, spans: &mut Vec<(usize, usize, String)>) {
    let b = s.as_bytes();
    for (prefix, min) in TOKENS {
        for (i, _) in s.match_indices(prefix) {
            if i > 0 && b[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let mut end = i + prefix.len();
            while end < b.len() && is_tok(b[end]) {
                end += 1;
            }
            if end - i - prefix.len() >= *min {
                spans.push((i, end, format!("{prefix}{MASK}")));
            }
        }
    }
    // AWS access key ids: AKIA or ASIA and exactly 16 more upper-case letters or digits.
    for p in ["AKIA", "ASIA"] {
        for (i, _) in s.match_indices(p) {
            let end = i + 20;
            if (i > 0 && b[i - 1].is_ascii_alphanumeric()) || end > b.len() {
                continue;
            }
            let body = &b[i + 4..end];
            let after_ok = end == b.len() || !b[end].is_ascii_alphanumeric();
            if after_ok && body.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
                spans.push((i, end, format!("{p}{MASK}")));
            }
        }
    }
}

fn assignments(s: &str, spans: &mut Vec<(usize, usize, String)>) {
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        let spaced = c == b' ';
        if c != b'=' && c != b':' && !spaced {
            continue;
        }
        // The name just before the separator.
        let mut n = i;
        while n > 0 && (is_tok(b[n - 1]) || b[n - 1] == b'.') {
            n -= 1;
        }
        let name = s[n..i].to_ascii_lowercase();
        if !SECRET_NAMES.iter().any(|k| name.ends_with(k)) {
            continue;
        }
        // `--token VALUE` only for long options; `name: value` and `name=value` for any name.
        if spaced && !name.starts_with("--") {
            continue;
        }
        let mut v = i + 1;
        if c == b':' {
            while v < b.len() && b[v] == b' ' {
                v += 1;
            }
        }
        let (start, end) = match b.get(v) {
            Some(&q @ (b'"' | b'\'')) => match s[v + 1..].find(q as char) {
                Some(j) => (v + 1, v + 1 + j),
                None => (v + 1, b.len()),
            },
            _ => {
                let mut e = v;
                while e < b.len() && !matches!(b[e], b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'&' | b';' | b',' | b'}' | b')') {
                    e += 1;
                }
                (v, e)
            }
        };
        // `password=$PASS` names a variable, not a secret.
        if end > start && b[start] != b'$' && &s[start..end] != MASK {
            spans.push((start, end, MASK.to_string()));
        }
    }
}

fn url_passwords(s: &str, spans: &mut Vec<(usize, usize, String)>) {
    for (i, _) in s.match_indices("://") {
        let rest = &s[i + 3..];
        let end = rest.find(|c: char| c == '/' || c == '@' || c.is_whitespace() || c == '"' || c == '\'').unwrap_or(rest.len());
        if rest[end..].starts_with('@')
            && let Some(colon) = rest[..end].find(':')
                && colon + 1 < end {
                    spans.push((i + 3 + colon + 1, i + 3 + end, MASK.to_string()));
                }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        redact_str(s, &[]).0
    }

    #[test]
    fn provider_tokens() {
        for (input, want) in [
            ("git push https://x:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/a", "git push https://x:ghp_[REDACTED]@github.com/a"),
            ("echo ghp_abcdefghijklmnopqrstuvwxyz0123", "echo ghp_[REDACTED]"),
            ("GH=github_pat_11ABCDEFG0123456789_abcdefghijk", "GH=github_pat_[REDACTED]"),
            ("curl -d key=sk-ant-api03-abcdefghijklmnopqrstuv x", "curl -d key=sk-[REDACTED] x"),
            ("stripe sk_live_0123456789abcdefgh", "stripe sk_live_[REDACTED]"),
            ("slack xoxb-123456789012-abcdefghij", "slack xoxb-[REDACTED]"),
            ("aws AKIAIOSFODNN7EXAMPLE done", "aws AKIA[REDACTED] done"),
            ("glpat-abcdefghij0123456789", "glpat-[REDACTED]"),
            ("AIzaSyA-abcdefghijklmnopqrstuvwxyz0123", "AIza[REDACTED]"),
        ] {
            assert_eq!(r(input), want, "{input}");
        }
        // Too short, or inside a word: left alone.
        assert_eq!(r("task-sk-1 ghp_short AKIAX"), "task-sk-1 ghp_short AKIAX");
    }

    #[test]
    fn headers_keys_assignments() {
        assert_eq!(
            r("curl -H 'Authorization: Bearer abc.def.ghi' https://api"),
            "curl -H 'Authorization: Bearer [REDACTED]' https://api"
        );
        assert_eq!(r("authorization:xyz123\nnext"), "authorization:[REDACTED]\nnext");
        let pem = "key: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY----- tail";
        assert_eq!(r(pem), "key: [REDACTED private key] tail");
        assert_eq!(r("-----BEGIN RSA PRIVATE KEY-----\nMIIEow"), "[REDACTED private key]");
        assert_eq!(r("-----BEGIN PUBLIC KEY-----\nMIIB"), "-----BEGIN PUBLIC KEY-----\nMIIB");
        assert_eq!(r("mysql --password=hunter2 -u root"), "mysql --password=[REDACTED] -u root");
        assert_eq!(r("DB_PASSWORD='two words' make"), "DB_PASSWORD='[REDACTED]' make");
        assert_eq!(r("login --token abc123 x"), "login --token [REDACTED] x");
        assert_eq!(r("password: hunter2"), "password: [REDACTED]");
        assert_eq!(r("PASSWORD=$PASS ./run"), "PASSWORD=$PASS ./run");
        assert_eq!(r("psql postgres://app:s3cret@db/x"), "psql postgres://app:[REDACTED]@db/x");
        assert_eq!(redact_str("echo hunter22", &["hunter22".into()]).0, "echo [REDACTED]");
    }

    #[test]
    fn counts_and_nested_values() {
        let mut v = serde_json::json!({"command": "echo ghp_abcdefghijklmnopqrstuvwxyz0123", "argv": ["password=x1", "ok"], "n": 3});
        assert_eq!(redact_value(&mut v, &[]), 2);
        assert_eq!(v["argv"][0], "password=[REDACTED]");
    }
}
