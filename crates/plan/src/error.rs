//! The error a person reads: a headline, the causes under it, and a hint of what to do.

/// A failure for a person: headline, causes, hint.
#[derive(Debug, Clone)]
pub struct Error {
    pub headline: String,
    pub causes: Vec<String>,
    pub hint: Option<String>,
}

impl Error {
    /// An error with this headline; the libraries' errors keep their hints apart from their
    /// messages (`hint()`), and [`Error::hint`] adds one.
    pub fn new(h: impl Into<String>) -> Error {
        Error { headline: h.into(), causes: Vec::new(), hint: None }
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
        Error { headline: e.to_string(), causes: Vec::new(), hint: e.hint().map(str::to_string) }
    }

    pub fn config(e: pinfold_policy::config::ConfigError) -> Error {
        let mut out = Error { headline: e.to_string(), causes: Vec::new(), hint: e.hint().map(str::to_string) };
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
