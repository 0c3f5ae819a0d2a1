//! Where a config problem is, and what it is.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// A place in a policy file: `file:line:col`, 1-based.
///
/// `file` is a display path (relative to the working directory when the file lies below it) or
/// the name of an embedded preset such as `pinfold:recommended`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// Everything that can go wrong while loading configuration.
///
/// Every variant that concerns the content of a file carries a [`Location`]; the CLI renders
/// `Display` as the headline and shows [`ConfigError::hint`], when there is one, on its own
/// line. `Display` never holds the hint.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid TOML/YAML/JSON, or does not follow the schema, or refers to
    /// something that does not exist.
    #[error("{location}: {message}")]
    Invalid {
        location: Location,
        /// Dotted key path of the offending value, e.g. `rules[3].sandbox`; empty for the
        /// document itself.
        key_path: String,
        message: String,
        hint: Option<String>,
    },
    /// A file could not be read. `location` is the `extends` entry that asked for it, if any.
    #[error("{}cannot read {}: {source}", render_at(location.as_ref()), path.display())]
    Io {
        path: PathBuf,
        location: Option<Location>,
        #[source]
        source: std::io::Error,
    },
    /// A name pinfold reads policy from (`pinfold.toml`, `pinfold.local.yaml`, the global
    /// `config.json`…) is taken by something that is not a regular file, following symlinks: a
    /// directory, a FIFO, a device, a socket, a dangling symlink or a symlink loop. Not
    /// "absent": that would silently load a weaker policy than the one meant to be there.
    #[error("{} is {what}, not a policy file", path.display())]
    NotAFile {
        path: PathBuf,
        /// What is there instead: "a directory", "a symlink to a FIFO (`/tmp/p`)"…
        what: String,
    },
    /// Two policy files with different extensions sit in one directory.
    #[error("ambiguous configuration: {} and {} both exist; keep only one", first.display(), second.display())]
    Ambiguous { first: PathBuf, second: PathBuf },
    /// A file extends itself, directly or through others.
    #[error("{location}: `extends` cycle: {}", chain.join(" -> "))]
    ExtendsCycle {
        location: Location,
        /// The files involved, the first repeated at the end.
        chain: Vec<String>,
    },
    /// The working directory, named without links by the caller (as `getcwd` names it), is
    /// elsewhere now: a directory on its way was swapped for a link, by a command running
    /// beside this one perhaps. Policy found from there would be found in the wrong place, and
    /// the project root made writable would be another directory.
    #[error("the working directory {} leads to {} now: a directory on its way was replaced by a link (a command running beside this one may have swapped it)", cwd.display(), now.display())]
    WorkingDirMoved { cwd: PathBuf, now: PathBuf },
}

const NOT_A_FILE_HINT: &str =
    "policy is read only from a regular file (or a symlink to one): replace it with one, or remove it";

fn render_at(location: Option<&Location>) -> String {
    match location {
        Some(l) => format!("{l}: "),
        None => String::new(),
    }
}

impl ConfigError {
    /// The place in a file the error points at, if it has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ConfigError::Invalid { location, .. } | ConfigError::ExtendsCycle { location, .. } => {
                Some(location)
            }
            ConfigError::Io { location, .. } => location.as_ref(),
            ConfigError::Ambiguous { .. } | ConfigError::NotAFile { .. } | ConfigError::WorkingDirMoved { .. } => None,
        }
    }

    /// A suggestion for fixing the error, if there is one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { hint, .. } => hint.as_deref(),
            ConfigError::NotAFile { .. } => Some(NOT_A_FILE_HINT),
            ConfigError::WorkingDirMoved { .. } => Some("run the command again from the real directory; if something keeps swapping it, stop that first"),
            _ => None,
        }
    }

    /// The key path of the offending value (`rules[3].allow`), if known.
    pub fn key_path(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key_path, .. } => Some(key_path),
            _ => None,
        }
    }

    /// The message without location.
    pub fn message(&self) -> String {
        match self {
            ConfigError::Invalid { message, .. } => message.clone(),
            ConfigError::ExtendsCycle { chain, .. } => {
                format!("`extends` cycle: {}", chain.join(" -> "))
            }
            ConfigError::NotAFile { path, what } => format!("{} is {what}, not a policy file", path.display()),
            other => other.to_string(),
        }
    }
}

/// Edit distance counting a swap of two neighbours as one edit (optimal string alignment),
/// case-insensitive, for "did you mean" hints.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().flat_map(char::to_lowercase).collect();
    let b: Vec<char> = b.chars().flat_map(char::to_lowercase).collect();
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 0..a.len() {
        cur[0] = i + 1;
        for j in 0..b.len() {
            let mut d = (prev[j] + usize::from(a[i] != b[j]))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                d = d.min(before[j - 1] + 1);
            }
            cur[j + 1] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Words longer than this get no suggestion: hints are for names a person mistypes, and the
/// distance costs the product of the two lengths.
const MAX_SUGGEST_LEN: usize = 64;

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub(crate) fn suggest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    // Lengths as `edit_distance` compares them: lowercased.
    let folded = |s: &str| s.chars().flat_map(char::to_lowercase).count();
    let len = folded(word);
    if len > MAX_SUGGEST_LEN {
        return None;
    }
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        // An edit changes the length by at most one: a candidate whose length differs by more
        // than `limit` is too far and not measured.
        .filter(|c| folded(c).abs_diff(len) <= limit)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `did you mean `x`?` for the closest candidate.
pub(crate) fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<String> {
    suggest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("rule", "rules"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("Allow", "allow"), 0);
        assert_eq!(edit_distance("dney", "deny"), 1);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            suggest("rule", ["extends", "rules", "tests"]),
            Some("rules")
        );
        assert_eq!(suggest("sandboxes", ["sandbox", "paths"]), Some("sandbox"));
        assert_eq!(suggest("zzz", ["rules"]), None);
    }

    #[test]
    fn display_without_hint() {
        let e = ConfigError::Invalid {
            location: Location {
                file: "pinfold.toml".into(),
                line: 12,
                col: 9,
            },
            key_path: "rule".into(),
            message: "unknown key `rule` at the top level".into(),
            hint: Some("did you mean `rules`?".into()),
        };
        assert_eq!(e.to_string(), "pinfold.toml:12:9: unknown key `rule` at the top level");
        assert_eq!(e.hint(), Some("did you mean `rules`?"));
        let e = ConfigError::NotAFile { path: "/p/pinfold.toml".into(), what: "a directory".into() };
        assert_eq!(e.to_string(), "/p/pinfold.toml is a directory, not a policy file");
        assert_eq!(e.hint(), Some(NOT_A_FILE_HINT));
    }
}
