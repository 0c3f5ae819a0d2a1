//! The agents pinfold has hooks for, by the names `pinfold hook`, `pinfold init` and the
//! installed hook commands use.

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentName {
    #[value(name = "claude-code")]
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
    Copilot,
}

impl AgentName {
    pub fn name(self) -> &'static str {
        match self {
            AgentName::ClaudeCode => "claude-code",
            AgentName::Codex => "codex",
            AgentName::Gemini => "gemini",
            AgentName::Cursor => "cursor",
            AgentName::Copilot => "copilot",
        }
    }
}
