//! `PINFOLD_HOOK_ORIGIN` tokens: proof that `pinfold hook` wrote this exact `pinfold exec`.
//!
//! When the hook answers *ask* and the person approves in the agent, the agent runs the
//! rewritten command, and `pinfold exec` would judge the sub-command again and refuse it (ask,
//! and exec cannot ask). The token tells exec that the hook already put this sub-command
//! before a person: a valid token turns exec's *ask* into a run **in the named sandbox**. It
//! never turns a *deny* into anything, and never runs anything without the sandbox.
//!
//! Format: `v1.<expiry, unix seconds>.<HMAC-SHA256, 64 hex digits>`, the MAC taken under a
//! random 32-byte key over (a domain tag, the expiry, the preset, the canonical working
//! directory, the exact sub-command text), each length-prefixed. A token copied onto another
//! command, another preset or another directory, altered, or older than [`TTL_SECS`], is
//! refused.
//!
//! The key lives in `$XDG_STATE_HOME/pinfold/hook.key` (else `~/.local/state/pinfold/hook.key`),
//! created 0600 in a 0700 directory by the first hook run. Whoever can read it can mint
//! tokens, so the sandbox must not be able to read it.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use crate::Dirs;
use sha2::Sha256;

/// The environment variable carrying the token.
pub const ENV: &str = "PINFOLD_HOOK_ORIGIN";
/// How long a token stays valid: the person must approve within this time.
pub const TTL_SECS: u64 = 600;
const KEY_LEN: usize = 32;
const DOMAIN: &[u8] = b"pinfold-hook-origin-v1";

type HmacSha256 = Hmac<Sha256>;

/// Where the key lives ([`Dirs::hook_key`]).
fn key_path(dirs: &Dirs) -> Result<&Path, String> {
    dirs.hook_key.as_deref().ok_or_else(|| "neither XDG_STATE_HOME nor HOME is set".to_string())
}

/// Read the key; an error says why it is unusable.
pub fn load_key(dirs: &Dirs) -> Result<[u8; KEY_LEN], String> {
    read_key(key_path(dirs)?)
}

fn read_key(path: &Path) -> Result<[u8; KEY_LEN], String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("{} is readable by others (mode {:o}); delete it", path.display(), meta.permissions().mode() & 0o777));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut key = [0u8; KEY_LEN];
    let mut rest = Vec::new();
    f.read_exact(&mut key).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    f.read_to_end(&mut rest).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !rest.is_empty() {
        return Err(format!("{} is not a pinfold hook key (wrong size)", path.display()));
    }
    Ok(key)
}

/// Read the key, creating it (random, 0600, in a 0700 directory) when there is none yet.
/// Concurrent first runs agree on one key: each writes its own file and hard-links it into
/// place, and the link fails for all but the first.
pub fn load_or_create_key(dirs: &Dirs) -> Result<[u8; KEY_LEN], String> {
    let path = key_path(dirs)?;
    if std::fs::symlink_metadata(path).is_ok() {
        return read_key(path);
    }
    let dir = path.parent().ok_or("the key path has no directory")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut key = [0u8; KEY_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let tmp = dir.join(format!(".hook.key.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(&key)?;
        f.sync_all()
    };
    let linked = write().and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(path),
        Err(e) => Err(format!("cannot create {}: {e}", path.display())),
    }
}

fn mac(key: &[u8; KEY_LEN], expiry: u64, text: &str, preset: &str, cwd: &Path) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    let expiry = expiry.to_string();
    for field in [DOMAIN, expiry.as_bytes(), preset.as_bytes(), cwd.as_os_str().as_bytes(), text.as_bytes()] {
        m.update(&(field.len() as u64).to_le_bytes());
        m.update(field);
    }
    m
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A token for running `text` under `preset` in `cwd`, valid until `now + TTL_SECS`.
pub fn mint(key: &[u8; KEY_LEN], text: &str, preset: &str, cwd: &Path, now: u64) -> String {
    let expiry = now + TTL_SECS;
    let tag = mac(key, expiry, text, preset, cwd).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("v1.{expiry}.{hex}")
}

/// Check a token for exactly this text, preset and cwd; an error says why it does not hold.
pub fn verify(key: &[u8; KEY_LEN], token: &str, text: &str, preset: &str, cwd: &Path, now: u64) -> Result<(), String> {
    let mut parts = token.split('.');
    let (Some("v1"), Some(expiry), Some(hex), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err("not a pinfold hook token".into());
    };
    let expiry: u64 = expiry.parse().map_err(|_| "not a pinfold hook token")?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return Err("not a pinfold hook token".into());
    }
    let tag: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0)).collect();
    mac(key, expiry, text, preset, cwd)
        .verify_slice(&tag)
        .map_err(|_| "it was not issued for this command, sandbox and directory (or it was altered)".to_string())?;
    if expiry <= now {
        return Err(format!("it expired {} s ago (tokens last {TTL_SECS} s)", now - expiry));
    }
    if expiry > now + TTL_SECS + 60 {
        return Err("its expiry lies too far in the future".into());
    }
    Ok(())
}

/// `pinfold exec`'s side: the `PINFOLD_HOOK_ORIGIN` token, when it holds for this run. The
/// plan lets an ASK (never anything else) run with it.
///
/// Some only when exec got exactly one argument (the shell text the hook wrote) and a
/// `--sandbox`, no option widens that sandbox (`plain`), and the token verifies for this
/// text, preset and canonical cwd. A token that does not hold is ignored with a warning on
/// stderr, so the normal verdict applies.
pub fn exec_token(command: &[String], sandbox: Option<&str>, cwd: &Path, plain: bool, dirs: &Dirs) -> Option<String> {
    let token = std::env::var_os(ENV)?;
    let why = (|| {
        let token = token.to_str().ok_or("not a pinfold hook token")?;
        let [text] = command else { return Err("the hook passes the command as one argument".to_string()) };
        let preset = sandbox.ok_or("the hook always names --sandbox")?;
        if !plain {
            return Err("an option widens the sandbox (-c, --write, --net, --keep-env or --allow-degraded)".into());
        }
        let cwd = std::fs::canonicalize(cwd).map_err(|e| format!("cannot resolve the working directory: {e}"))?;
        let key = load_key(dirs)?;
        verify(&key, token, text, preset, &cwd, now()).map(|()| token.to_string())
    })();
    match why {
        Ok(token) => Some(token),
        Err(why) => {
            say!("pinfold: ignoring {ENV}: {why}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_text_preset_cwd_and_time() {
        let key = [7u8; KEY_LEN];
        let cwd = Path::new("/p");
        let t = mint(&key, "wc -l", "readonly", cwd, 1000);
        assert!(verify(&key, &t, "wc -l", "readonly", cwd, 1000).is_ok());
        assert!(verify(&key, &t, "wc -l ", "readonly", cwd, 1000).is_err());
        assert!(verify(&key, &t, "wc -l", "workspace", cwd, 1000).is_err());
        assert!(verify(&key, &t, "wc -l", "readonly", Path::new("/q"), 1000).is_err());
        assert!(verify(&key, &t, "wc -l", "readonly", cwd, 1000 + TTL_SECS).is_err());
        assert!(verify(&[8u8; KEY_LEN], &t, "wc -l", "readonly", cwd, 1000).is_err());
        // Field boundaries are length-prefixed: moving bytes between fields breaks the MAC.
        let a = mint(&key, "b", "a", cwd, 0);
        assert!(verify(&key, &a, "", "ab", cwd, 0).is_err());
        let mut bad = t.clone();
        bad.pop();
        bad.push('0');
        assert!(verify(&key, &bad, "wc -l", "readonly", cwd, 1000).is_err() || t.ends_with('0'));
        assert!(verify(&key, "v1.x.y", "wc -l", "readonly", cwd, 1000).is_err());
    }
}
