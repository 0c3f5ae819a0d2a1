//! The checkpoint signing key: an ed25519 seed in its own file, mode 0600, apart from the log,
//! and its public half beside it for anyone who verifies.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use crate::canon::{hex, unhex};
use crate::Error;

/// What a checkpoint signature covers: this context string, then the canonical encoding of
/// `{"head":…,"key":…,"records":…,"size":…}`.
pub const SIGNING_CONTEXT: &[u8] = b"pinfold ledger checkpoint v1\0";

/// Load the signing key at `path`, creating it (and `pub_path`) when neither exists.
pub fn load_or_create(path: &Path, pub_path: &Path) -> Result<SigningKey, Error> {
    match fs::metadata(path) {
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(Error::KeyPermissions { path: path.to_path_buf(), mode });
            }
            let mut text = String::new();
            fs::File::open(path)
                .and_then(|mut f| f.read_to_string(&mut text))
                .map_err(|e| Error::io("read the signing key", path, e))?;
            let seed = unhex::<32>(text.trim()).ok_or_else(|| Error::BadKey(path.to_path_buf()))?;
            let key = SigningKey::from_bytes(&seed);
            if !pub_path.exists() {
                write_public(pub_path, &key.verifying_key())?;
            }
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut seed))
                .map_err(|e| Error::io("read random bytes for a key", Path::new("/dev/urandom"), e))?;
            // Written whole to a file of our own, then linked into place: a writer killed
            // half-way leaves no empty or partial key behind, and of two processes creating
            // one at once, the first link wins and the other uses that key.
            let tmp = temp_beside(path);
            let _ = fs::remove_file(&tmp); // left by a crashed process that had our pid
            let written = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .and_then(|mut f| f.write_all(format!("{}\n", hex(&seed)).as_bytes()).and_then(|()| f.sync_all()));
            let linked = written.and_then(|()| fs::hard_link(&tmp, path));
            let _ = fs::remove_file(&tmp);
            match linked {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return load_or_create(path, pub_path),
                Err(e) => return Err(Error::io("create the signing key", path, e)),
            }
            sync_parent(path);
            let key = SigningKey::from_bytes(&seed);
            write_public(pub_path, &key.verifying_key())?;
            Ok(key)
        }
        Err(e) => Err(Error::io("read the signing key", path, e)),
    }
}

/// A name beside `path` that no other process uses.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Best effort: make a new name in `path`'s directory durable.
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = fs::File::open(dir).and_then(|d| d.sync_all());
    }
}

fn write_public(path: &Path, key: &VerifyingKey) -> Result<(), Error> {
    let tmp = temp_beside(path);
    fs::write(&tmp, format!("{}\n", hex(key.as_bytes())))
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| Error::io("write the public key", path, e))
}

/// The public key that verifies checkpoints: from `pub_path`, else derived from the private key
/// when it is readable. `Ok(None)` when neither exists.
pub fn load_public(path: &Path, pub_path: &Path) -> Result<Option<(VerifyingKey, PathBuf)>, Error> {
    if let Ok(text) = fs::read_to_string(pub_path) {
        let bytes = unhex::<32>(text.trim()).ok_or_else(|| Error::BadKey(pub_path.to_path_buf()))?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| Error::BadKey(pub_path.to_path_buf()))?;
        return Ok(Some((key, pub_path.to_path_buf())));
    }
    if let Ok(text) = fs::read_to_string(path) {
        let seed = unhex::<32>(text.trim()).ok_or_else(|| Error::BadKey(path.to_path_buf()))?;
        return Ok(Some((SigningKey::from_bytes(&seed).verifying_key(), path.to_path_buf())));
    }
    Ok(None)
}

pub fn sign(key: &SigningKey, statement: &[u8]) -> String {
    let mut msg = SIGNING_CONTEXT.to_vec();
    msg.extend_from_slice(statement);
    hex(&key.sign(&msg).to_bytes())
}

pub fn verify(key: &VerifyingKey, statement: &[u8], sig_hex: &str) -> bool {
    let Some(sig) = unhex::<64>(sig_hex) else { return false };
    let mut msg = SIGNING_CONTEXT.to_vec();
    msg.extend_from_slice(statement);
    key.verify(&msg, &Signature::from_bytes(&sig)).is_ok()
}

pub fn public_hex(key: &VerifyingKey) -> String {
    hex(key.as_bytes())
}

/// The public half of the signing key at `path`, when that file can be read (`None` when it
/// cannot: absent, or not ours to read). A readable file that is not a key is an error.
pub fn read_signing_public(path: &Path) -> Result<Option<VerifyingKey>, Error> {
    let Ok(text) = fs::read_to_string(path) else { return Ok(None) };
    let seed = unhex::<32>(text.trim()).ok_or_else(|| Error::BadKey(path.to_path_buf()))?;
    Ok(Some(SigningKey::from_bytes(&seed).verifying_key()))
}
