//! What a session lets its children do: whether the sandbox is on, the home they must not
//! see, the roots and extra paths they may write, and the keys withheld from them. Built
//! without touching the disk; paths are resolved when a child's rules are prepared.

use std::path::PathBuf;

use super::Withheld;
use crate::config::{Config, Home, Keys, SandboxSetting};

/// A session's sandbox policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Whether children are confined (`sandbox = "on"`); keys are withheld either way.
    pub enabled: bool,
    /// Heron's home: no read, write, listing or execution inside it.
    pub home: PathBuf,
    /// The session's write roots: its cwd and additional directories.
    pub roots: Vec<PathBuf>,
    /// More writable paths (`sandbox_writable`, expanded). The temp folder and the device
    /// files programs need are always writable and are not listed here.
    pub writable: Vec<PathBuf>,
    /// The key names and values no child inherits.
    pub withheld: Withheld,
}

impl Policy {
    /// The policy of a session with these roots under this home and config.
    pub fn from_config(config: &Config, home: &Home, keys: &Keys, roots: Vec<PathBuf>) -> Self {
        Self {
            enabled: config.sandbox == SandboxSetting::On,
            home: home.root().to_path_buf(),
            roots,
            writable: config.writable_paths(),
            withheld: Withheld::from_keys(keys),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_decides_on_off_and_the_extra_paths() {
        let home = Home::at("/srv/heron");
        let keys = Keys::from_pairs([("K".to_owned(), "v".to_owned())]);
        let on = Config::parse("sandbox_writable = [\"/opt/cache\"]\n").expect("parses");
        let policy = Policy::from_config(&on, &home, &keys, vec![PathBuf::from("/ws")]);
        assert!(policy.enabled);
        assert_eq!(policy.writable, [PathBuf::from("/opt/cache")]);
        assert_eq!(
            (policy.home.as_path(), policy.roots.as_slice()),
            (home.root(), &[PathBuf::from("/ws")][..])
        );
        let off = Config::parse("sandbox = \"off\"\n").expect("parses");
        assert!(!Policy::from_config(&off, &home, &keys, Vec::new()).enabled);
    }
}
