//! The keys no child inherits: every variable of Heron's environment named like a key in
//! `HERON_HOME/.env`, or whose value contains one of their values. What a command sets
//! itself (an MCP server's `env`) is its definition's choice and is kept.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::config::Keys;
use crate::secret::Secret;

/// Values shorter than this are withheld only when a variable equals them exactly, so that
/// a short key does not strip every variable that happens to contain its letters (the same
/// floor as redaction).
const SHORTEST_CONTAINED: usize = 4;

/// Key names and values kept out of children's environments.
#[derive(Debug, Clone, Default)]
pub struct Withheld {
    names: BTreeSet<String>,
    values: Vec<Secret>,
}

impl Withheld {
    /// Every name and non-empty value of `.env`.
    pub fn from_keys(keys: &Keys) -> Self {
        Self::new(keys.names().map(str::to_owned), keys.all().cloned())
    }

    /// These names and values.
    fn new(names: impl IntoIterator<Item = String>, values: impl IntoIterator<Item = Secret>) -> Self {
        Self {
            names: names.into_iter().collect(),
            values: values.into_iter().filter(|v| !v.is_empty()).collect(),
        }
    }

    /// Whether a variable must not reach a child.
    fn withholds(&self, name: &OsStr, value: &OsStr) -> bool {
        let value = value.as_bytes();
        name.to_str().is_some_and(|name| self.names.contains(name))
            || self.values.iter().map(|secret| secret.expose().as_bytes()).any(|secret| {
                value == secret || (secret.len() >= SHORTEST_CONTAINED && contains(value, secret))
            })
    }

    /// Removes from `command` every inherited variable withheld; variables the command
    /// sets itself stay.
    pub(super) fn scrub(&self, command: &mut std::process::Command) {
        let own: BTreeSet<std::ffi::OsString> = command
            .get_envs()
            .filter(|(_, value)| value.is_some())
            .map(|(name, _)| name.to_os_string())
            .collect();
        for (name, value) in std::env::vars_os() {
            if !own.contains(&name) && self.withholds(&name, &value) {
                command.env_remove(&name);
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn withheld() -> Withheld {
        Withheld::new(["OPENAI_API_KEY".to_owned()], [Secret::new("sk-live-123456"), Secret::new("ab")])
    }

    #[test]
    fn a_key_name_or_a_key_value_is_withheld_and_nothing_else() {
        let w = withheld();
        assert!(w.withholds(OsStr::new("OPENAI_API_KEY"), OsStr::new("anything")));
        assert!(w.withholds(OsStr::new("COPY"), OsStr::new("sk-live-123456")));
        assert!(w.withholds(OsStr::new("URL"), OsStr::new("https://x/?key=sk-live-123456&a=1")));
        assert!(!w.withholds(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin")));
    }

    #[test]
    fn a_short_value_is_withheld_only_when_equal() {
        let w = withheld();
        assert!(w.withholds(OsStr::new("X"), OsStr::new("ab")));
        assert!(!w.withholds(OsStr::new("LANG"), OsStr::new("abc.UTF-8")));
    }

    #[test]
    fn what_a_command_sets_itself_is_kept() {
        let w = Withheld::new(["PATH".to_owned(), "HERON_TEST_OWN".to_owned()], []);
        let mut command = tokio::process::Command::new("env");
        command.env("HERON_TEST_OWN", "mine");
        w.scrub(command.as_std_mut());
        let envs: Vec<_> = command.as_std().get_envs().collect();
        assert!(envs.contains(&(OsStr::new("HERON_TEST_OWN"), Some(OsStr::new("mine")))), "{envs:?}");
        if std::env::var_os("PATH").is_some() {
            assert!(envs.contains(&(OsStr::new("PATH"), None)), "inherited PATH removed: {envs:?}");
        }
    }
}
