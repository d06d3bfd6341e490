//! How far a turn and its tools may go: the reply cap, the calls of one reply and the
//! bytes of their results, goal continuations, the share of the
//! context window a request may fill, and each kind of tool call's deadline, with what
//! `config.toml` says of them. Invariant: every bound has a default here, and a setting of
//! 0 seconds counts as 1, so no call is given no time at all.

use std::time::Duration;

use super::{Config, ProviderConfig};

/// The share of the context window a request may fill before Heron compacts it: room is
/// left for the answer and for the estimate being off.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;

/// Refuses a `compact_at` that is no share of a window (`where_` names the table).
pub(super) fn check_compact_at(value: Option<f64>, where_: &str) -> Result<(), String> {
    match value {
        Some(share) if !(share > 0.0 && share <= 1.0) => Err(format!(
            "{where_}compact_at = {share}: it is the share of the context window a request may fill, \
             above 0 and at most 1 (e.g. 0.8)"
        )),
        _ => Ok(()),
    }
}

/// The reply cap when `config.toml` does not say: far beyond real answers, far below what
/// would hurt.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 * 1024 * 1024;

/// The tool calls of one reply that run when `config.toml` does not say: more than a real
/// step asks for at once, few enough that a runaway reply stops early.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 64;

/// What one reply's tool results may hold when `config.toml` does not say: more than any
/// context window takes in one step.
pub const DEFAULT_MAX_TOOL_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// Continuations a goal-mode prompt may start when `config.toml` does not say.
pub const DEFAULT_GOAL_CONTINUATIONS: u32 = 10;

/// Subagents of one session running at once when `config.toml` does not say: enough for a
/// few surveys side by side, few enough that they do not flood the provider.
pub const DEFAULT_MAX_SUBAGENTS: usize = 3;

/// Model requests of one subagent when `config.toml` does not say: room for a survey of a
/// tree, a stop for a child that loops.
pub const DEFAULT_SUBAGENT_MAX_STEPS: usize = 12;

/// How long one subagent may run when `config.toml` does not say: as long as an MCP call.
pub const DEFAULT_SUBAGENT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long an unanswered permission request waits before it is denied: the tinycode
/// guide's 120 s auto-deny.
pub const DEFAULT_PERMISSION_TIMEOUT: Duration = Duration::from_secs(120);

/// What a tool waits on, which decides its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Files and the session's own state: seconds (`tool_timeout_s`).
    Quick,
    /// A shell command, which kills itself at its own timeout (at most
    /// `command_timeout_s`); the deadline is a backstop a little past that.
    Command,
    /// Another program's tool (MCP): `mcp_timeout_s`.
    External,
    /// The user's answer to a question: no deadline; the user or the editor cancels.
    Person,
}

/// The deadlines of a session's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Built-in tools over files and the session (default 30 s).
    pub quick: Duration,
    /// The longest a command may run (default 600 s); a command that asks for no timeout
    /// gets the smaller of 120 s and this.
    pub command: Duration,
    /// MCP tool calls (default 300 s).
    pub external: Duration,
}

/// How long past its own timeout a command's call may take to kill it and collect the rest
/// of its output (or to have the editor kill and release its terminal).
pub const COMMAND_GRACE: Duration = Duration::from_secs(15);

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            quick: Duration::from_secs(30),
            command: Duration::from_secs(600),
            external: Duration::from_secs(300),
        }
    }
}

impl Deadlines {
    /// The deadline of a call at `pace`; `None` for a wait only a cancel ends.
    pub fn of(&self, pace: Pace) -> Option<Duration> {
        match pace {
            Pace::Quick => Some(self.quick),
            Pace::Command => Some(self.command + COMMAND_GRACE),
            Pace::External => Some(self.external),
            Pace::Person => None,
        }
    }

    /// The setting a user raises when `pace` runs out.
    pub(crate) fn setting(pace: Pace) -> &'static str {
        match pace {
            Pace::Quick => "tool_timeout_s",
            Pace::Command => "command_timeout_s",
            Pace::External => "mcp_timeout_s",
            Pace::Person => "",
        }
    }
}

impl Config {
    /// How long tool calls may take; a setting of 0 counts as 1 s.
    pub fn deadlines(&self) -> Deadlines {
        let defaults = Deadlines::default();
        let secs =
            |set: Option<u64>, default: Duration| set.map_or(default, |s| Duration::from_secs(s.max(1)));
        Deadlines {
            quick: secs(self.tool_timeout_s, defaults.quick),
            command: secs(self.command_timeout_s, defaults.command),
            external: secs(self.mcp_timeout_s, defaults.external),
        }
    }

    /// The reply cap, in bytes.
    pub(crate) fn reply_cap(&self) -> usize {
        usize::try_from(self.max_reply_bytes.unwrap_or(DEFAULT_MAX_REPLY_BYTES)).unwrap_or(usize::MAX)
    }

    /// How many tool calls of one reply run (at least one).
    pub fn tool_call_cap(&self) -> usize {
        self.max_tool_calls_per_reply
            .map_or(DEFAULT_MAX_TOOL_CALLS, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .max(1)
    }

    /// How many subagents of a session run at once (at least one).
    pub fn subagent_cap(&self) -> usize {
        self.max_subagents.map_or(DEFAULT_MAX_SUBAGENTS, |n| usize::try_from(n).unwrap_or(usize::MAX)).max(1)
    }

    /// How long one subagent may run; a setting of 0 counts as 1 s.
    pub fn subagent_time(&self) -> Duration {
        self.subagent_timeout_s.map_or(DEFAULT_SUBAGENT_TIMEOUT, |s| Duration::from_secs(s.max(1)))
    }

    /// How many model requests one subagent makes (at least one).
    pub fn subagent_steps(&self) -> usize {
        self.subagent_max_steps
            .map_or(DEFAULT_SUBAGENT_MAX_STEPS, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .max(1)
    }

    /// The bytes one reply's tool results may hold.
    pub fn tool_result_cap(&self) -> usize {
        self.max_tool_result_bytes
            .map_or(DEFAULT_MAX_TOOL_RESULT_BYTES, |n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The share of `provider`'s context window past which requests are compacted.
    pub fn compact_at(&self, provider: &ProviderConfig) -> f64 {
        provider.compact_at.or(self.compact_at).unwrap_or(DEFAULT_COMPACT_AT)
    }

    /// Continuations one goal-mode prompt may start.
    pub(crate) fn goal_continuations(&self) -> u32 {
        self.max_goal_continuations.unwrap_or(DEFAULT_GOAL_CONTINUATIONS)
    }

    /// How long a permission request waits for an answer before it counts as a rejection
    /// (`permission_timeout_s`, default [`DEFAULT_PERMISSION_TIMEOUT`]).
    pub(crate) fn permission_timeout(&self) -> Duration {
        self.permission_timeout_s.map_or(DEFAULT_PERMISSION_TIMEOUT, Duration::from_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_at_defaults_to_eighty_percent_and_a_provider_overrides_the_top_level() {
        let config = Config::parse(
            "compact_at = 0.6\n[providers.a]\nkind = \"scripted\"\n\
             [providers.b]\nkind = \"scripted\"\ncompact_at = 0.9\n",
        )
        .expect("parses");
        assert_eq!(config.compact_at(&config.providers["a"]), 0.6);
        assert_eq!(config.compact_at(&config.providers["b"]), 0.9);
        let plain = Config::parse("[providers.a]\nkind = \"scripted\"\n").expect("parses");
        assert_eq!(plain.compact_at(&plain.providers["a"]), DEFAULT_COMPACT_AT);
        for bad in ["compact_at = 0.0", "compact_at = 1.5", "compact_at = nan"] {
            let err = Config::parse(bad).expect_err(bad);
            assert!(err.contains("compact_at"), "{err}");
        }
        let err =
            Config::parse("[providers.a]\nkind = \"scripted\"\ncompact_at = -1.0\n").expect_err("negative");
        assert!(err.contains("provider `a`"), "{err}");
    }

    #[test]
    fn subagent_bounds_default_and_a_zero_still_lets_one_run() {
        let plain = Config::parse("").expect("parses");
        assert_eq!((plain.subagent_cap(), plain.subagent_steps()), (3, 12));
        assert_eq!(plain.subagent_time(), Duration::from_secs(300));
        let zero_time = Config::parse("subagent_timeout_s = 0\n").expect("parses");
        assert_eq!(zero_time.subagent_time(), Duration::from_secs(1));
        let set = Config::parse("max_subagents = 5\nsubagent_max_steps = 4\n").expect("parses");
        assert_eq!((set.subagent_cap(), set.subagent_steps()), (5, 4));
        let zero = Config::parse("max_subagents = 0\nsubagent_max_steps = 0\n").expect("parses");
        assert_eq!((zero.subagent_cap(), zero.subagent_steps()), (1, 1));
    }

    #[test]
    fn an_unanswered_permission_request_is_denied_after_120_s_by_default() {
        assert_eq!(Config::parse("").expect("parses").permission_timeout(), Duration::from_secs(120));
        let config = Config::parse("permission_timeout_s = 5\n").expect("parses");
        assert_eq!(config.permission_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn goal_continuations_default_to_ten_and_follow_the_config() {
        assert_eq!(Config::parse("").expect("parses").goal_continuations(), 10);
        let config = Config::parse("max_goal_continuations = 3\n").expect("parses");
        assert_eq!(config.goal_continuations(), 3);
    }
}
