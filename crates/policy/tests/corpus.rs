//! The verdict corpus: every `tests/corpus/*.toml` is a policy with `[[tests]]` cases
//! (command, expected verdict, optional cwd). Each file is loaded as `pinfold check -c FILE`
//! would load it, with a fixed home (`/home/agent`) and a fresh project directory as cwd, and
//! every case (plus the `tests` of every rule the file pulls in) must get its verdict.
//!
//! Expectations are written from the README, not from what pinfold happens to answer; a case
//! pinfold gets wrong is a bug to fix in pinfold, not an expectation to edit.

use std::path::{Path, PathBuf};

use pinfold_policy::Policy;
use pinfold_policy::config::{LoadOptions, load_file};

/// The corpus must not silently shrink.
const MIN_CASES: usize = 300;

fn corpus_files(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// Load every file in `tests/SUB` and run its cases; returns (case count, failures).
fn run(sub: &str) -> (usize, Vec<String>) {
    let project = tempfile::tempdir().expect("temporary project directory");
    let opts = LoadOptions {
        explicit: None,
        cwd: project.path().to_path_buf(),
        home: Some(PathBuf::from("/home/agent")),
        xdg_config_home: None,
    };
    let files = corpus_files(sub);
    assert!(!files.is_empty(), "no corpus files");
    let mut cases = 0;
    let mut failures = Vec::new();
    for file in &files {
        let config = load_file(file, &opts).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        cases += config.tests.len();
        let policy = Policy::new(config).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for f in policy.run_tests() {
            let what = f.rule.as_deref().map(|r| format!(" (rule `{r}`)")).unwrap_or_default();
            failures.push(format!(
                "{}{what}: `{}`: expected {}, got {}: {}",
                f.location, f.command, f.expected, f.got, f.reason
            ));
        }
    }
    (cases, failures)
}

#[test]
fn corpus() {
    let (cases, failures) = run("corpus");
    assert!(
        failures.is_empty(),
        "{} of the corpus cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases >= MIN_CASES, "the corpus has {cases} cases, fewer than {MIN_CASES}");
}

/// Cases pinfold gets wrong today (`tests/corpus/pending`, each with the reason). Ignored so
/// the suite stays green; run with `--ignored` after a fix and move passing cases up.
#[test]
#[ignore = "known pinfold bugs"]
fn known_bugs() {
    let (_, failures) = run("corpus/pending");
    assert!(failures.is_empty(), "{} known bugs remain:\n{}", failures.len(), failures.join("\n"));
}

/// The cache must never change a verdict: every corpus file loaded through `load_cached`,
/// first as a miss (compiled from the files) and then as a hit (rules decoded lazily from the
/// entry), gives the same answer to every case.
#[test]
fn corpus_through_the_cache() {
    let project = tempfile::tempdir().expect("temporary project directory");
    let cache = tempfile::tempdir().expect("temporary cache directory");
    let mut hits = 0;
    let mut failures = Vec::new();
    for file in corpus_files("corpus") {
        let opts = LoadOptions {
            explicit: Some(file.clone()),
            cwd: project.path().to_path_buf(),
            home: Some(PathBuf::from("/home/agent")),
            xdg_config_home: None,
        };
        for round in 0..2 {
            let policy = pinfold_policy::load_cached(&opts, cache.path())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if round == 1 {
                hits += 1;
            }
            for f in policy.run_tests() {
                failures.push(format!("round {round}: {}: `{}`: expected {}, got {}", f.location, f.command, f.expected, f.got));
            }
        }
    }
    assert!(hits > 0);
    assert!(failures.is_empty(), "the cache changed verdicts:\n{}", failures.join("\n"));
    let entries = std::fs::read_dir(cache.path()).unwrap().count();
    assert_eq!(entries, corpus_files("corpus").len(), "one entry per corpus file");
}
