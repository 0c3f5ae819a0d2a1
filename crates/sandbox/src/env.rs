//! Which environment variables look like secrets, and the scrubbing itself.
//!
//! A confined command does not need the user's tokens: it gets the environment minus every
//! variable whose name matches [`SECRET_PATTERNS`] (case-insensitive), unless the policy keeps
//! it by name.

/// Name patterns (`*` matches anything) of variables removed by default.
pub const SECRET_PATTERNS: &[&str] = &[
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_KEY",
    "*_KEY_ID",
    "*APIKEY*",
    "*API_KEY*",
    "*CREDENTIAL*",
    "*PRIVATE_KEY*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GCP_*",
    "CLOUDSDK_*",
    "DIGITALOCEAN_*",
    "HEROKU_API_*",
    "NPM_CONFIG__AUTH*",
    "*_AUTH",
    "*_AUTH_TOKEN",
    "SSH_AUTH_SOCK",
    "KUBECONFIG",
    "VAULT_*",
    "DOCKER_AUTH_CONFIG",
    // Where a container engine listens: reaching it is root on the host.
    "DOCKER_HOST",
    "CONTAINER_HOST",
    // Connection strings and other secrets by another name.
    "DATABASE_URL",
    "*_DATABASE_URL",
    "*_DSN",
    "MYSQL_PWD",
    "*_JWT",
    "JWT",
    "*_PAT",
    "*_PASS",
    "PGPASS",
    "*PASSPHRASE*",
    "*BEARER*",
    "*_KEY_*",
    "SSHPASS",
    "BW_SESSION",
    "OP_SESSION_*",
    "AUTHORIZATION",
    "*WEBHOOK*",
    "NETRC",
    "AUTH",
    "COOKIE",
    "*_COOKIE",
];

/// Whether a variable named so is removed by default.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_PATTERNS.iter().any(|p| pinfold_glob::is_match(p, &upper, pinfold_glob::Syntax::STAR))
}

/// Whether a value carries a secret whatever its name: a URL with a password in it
/// (`scheme://user:pass@host`, as `MONGODB_URI` and `REDIS_URL` hold), a connection string's
/// or query's password (`Password=…`, `password=…`), an HTTP authorization header or its value
/// (`Bearer …`, `Basic …`, `token …`), a PEM private key.
pub fn has_url_password(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if ["password=", "pwd=", "authorization:", "private key-----"].iter().any(|m| lower.contains(m)) {
        return true;
    }
    // An authorization header's value alone (`AUTH_HEADER='Bearer …'`, noted by an outside
    // attack).
    let header = lower.trim();
    if let Some(cred) = ["bearer ", "basic ", "token "].iter().find_map(|m| header.strip_prefix(m)) {
        let cred = cred.trim();
        if cred.len() >= 8 && cred.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b)) {
            return true;
        }
    }
    value.split("://").skip(1).any(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.split_once(':').is_some_and(|(_, pass)| !pass.is_empty()))
    })
}

/// The environment for the command: `env` minus secrets not in `keep`, plus `set`. Returns
/// the new environment and the names removed.
pub fn scrub(env: impl Iterator<Item = (String, String)>, keep: &[String], set: &[(String, String)]) -> (Vec<(String, String)>, Vec<String>) {
    let mut out = Vec::new();
    let mut removed = Vec::new();
    for (k, v) in env {
        // pinfold's own plumbing: the sandbox spec and the hook's approval token, which is
        // worth nothing inside but has no business there.
        if k.starts_with("PINFOLD_SANDBOX_") || k == "PINFOLD_HOOK_ORIGIN" {
            continue;
        }
        if set.iter().any(|(s, _)| *s == k) {
            continue;
        }
        if (is_secret_name(&k) || has_url_password(&v)) && !keep.contains(&k) {
            removed.push(k);
        } else {
            out.push((k, v));
        }
    }
    out.extend(set.iter().cloned());
    removed.sort();
    (out, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for n in ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_API_KEY", "DB_PASSWORD", "OPENAI_API_KEY", "aws_profile", "SSH_AUTH_SOCK", "NPM_TOKEN", "ANTHROPIC_API_KEY", "KUBECONFIG", "DOCKER_HOST", "DATABASE_URL", "SENTRY_DSN", "MYSQL_PWD", "CI_JOB_JWT", "SLACK_WEBHOOK", "NETRC"] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["PATH", "HOME", "CARGO_HOME", "LANG", "TERM", "KEYBOARD", "RUST_LOG", "MONKEY"] {
            assert!(!is_secret_name(n), "{n}");
        }
        // What an outside attack found passing through.
        for n in ["GITHUB_PAT", "GH_PAT", "DB_PASS", "SMTP_PASS", "RABBITMQ_DEFAULT_PASS", "PGPASS", "JWT", "BEARER", "SIGNING_KEY_B64", "GPG_PASSPHRASE", "SSHPASS", "BW_SESSION", "OP_SESSION_my", "Authorization"] {
            assert!(is_secret_name(n), "{n}");
        }
    }

    // address-literal: never connected (values only parsed for a password)
    #[test]
    fn urls_with_passwords() {
        for v in [
            "mongodb://app:s3cret@db:27017/x",
            "redis://:pw@cache:6379",
            "https://u:p@example.test/path",
            "a postgres://u:p@h/db",
            "Server=h;User Id=u;Password=p13;",
            "jdbc:mysql://h/db?user=u&password=p27",
            "http.extraheader=Authorization: basic abc",
            "-----BEGIN PRIVATE KEY-----\nMII",
            // An authorization header's value under any name (`AUTH_HEADER`).
            "Bearer eyJhbGciOiJIUzI1NiJ9.x.y",
            "Basic dXNlcjpwYXNzd29yZA==",
            "token ghp_0123456789abcdef",
        ] {
            assert!(has_url_password(v), "{v}");
        }
        for v in ["https://example.test/a:b@c", "http://user@host", "https://host:8080/", "/usr/bin:/bin", "mailto:a@b", "http://u:@h", "Basic", "token x", "bearer of news"] {
            assert!(!has_url_password(v), "{v}");
        }
    }

    #[test]
    fn scrubbing_keeps_and_sets() {
        let env = vec![("A_TOKEN".to_string(), "x".to_string()), ("PATH".into(), "/bin".into()), ("KEEP_TOKEN".into(), "k".into()), ("TMPDIR".into(), "/tmp".into()), ("PINFOLD_HOOK_ORIGIN".into(), "v1.x".into())];
        let (out, removed) = scrub(env.into_iter(), &["KEEP_TOKEN".into()], &[("TMPDIR".into(), "/t".into())]);
        assert_eq!(removed, ["A_TOKEN"]);
        assert!(out.contains(&("KEEP_TOKEN".into(), "k".into())));
        assert!(out.contains(&("TMPDIR".into(), "/t".into())));
        assert!(!out.contains(&("TMPDIR".into(), "/tmp".into())));
        assert!(!out.iter().any(|(k, _)| k == "PINFOLD_HOOK_ORIGIN"));
    }
}
