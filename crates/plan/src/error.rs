//! The error a person reads: a headline, the causes under it, a hint of what to do, and
//! what kind of failure it is (the CLI turns the kind into an exit status in one place,
//! `crates/cli/src/errors.rs`; the server into an HTTP status).

/// What kind of failure an [`Error`] is: what the caller should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The input cannot be used: a flag, a policy or config file, a path, a directory.
    Input,
    /// The decision could not be written to the audit ledger (or the record of sandboxed
    /// roots), so it does not take effect: nothing ran.
    Unrecorded,
    /// The sandbox, the egress proxy or a credential could not be set up: nothing ran.
    Setup,
    /// The command ran, and created a file a program outside the sandbox would run or obey
    /// (moved aside): what it did is not passed on as a success.
    Planted,
}

/// A failure for a person: headline, causes, hint, kind.
#[derive(Debug, Clone)]
pub struct Error {
    pub headline: String,
    pub causes: Vec<String>,
    pub hint: Option<String>,
    pub kind: Kind,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.one_line())
    }
}

impl std::error::Error for Error {}

impl Error {
    /// An [`Kind::Input`] error with this headline; the libraries' errors keep their hints
    /// apart from their messages (`hint()`), and [`Error::hint`] adds one.
    pub fn new(h: impl Into<String>) -> Error {
        Error { headline: h.into(), causes: Vec::new(), hint: None, kind: Kind::Input }
    }

    /// The same error, of this kind.
    pub fn kind(mut self, kind: Kind) -> Error {
        self.kind = kind;
        self
    }

    /// The headline and causes on one line (for protocols that take one line).
    pub fn one_line(&self) -> String {
        let mut line = self.headline.clone();
        for c in &self.causes {
            line.push_str(": ");
            line.push_str(c);
        }
        line.replace('\n', " ")
    }

    pub fn cause(mut self, e: impl std::fmt::Display) -> Error {
        self.causes.push(e.to_string());
        self
    }

    pub fn hint(mut self, h: impl Into<String>) -> Error {
        self.hint = Some(h.into());
        self
    }

    pub fn policy(e: pinfold_policy::PolicyError) -> Error {
        Error { headline: e.to_string(), causes: Vec::new(), hint: e.hint().map(str::to_string), kind: Kind::Input }
    }

    pub fn config(e: pinfold_policy::config::ConfigError) -> Error {
        let mut out = Error { headline: e.to_string(), causes: Vec::new(), hint: e.hint().map(str::to_string), kind: Kind::Input };
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            // A cause the headline already quotes (`cannot read f: No such file…`) is
            // not repeated.
            let s_text = s.to_string();
            if !out.headline.contains(&s_text) {
                out.causes.push(s_text);
            }
            src = s.source();
        }
        out
    }
}
