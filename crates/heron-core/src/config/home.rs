//! The paths under Heron's home and the API keys of its `.env`. Invariant: keys are read
//! from `.env` only, never from the process environment, and are held as [`Secret`]s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::secret::Secret;

/// The paths under Heron's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `HERON_HOME`, else `~/.heron`.
    pub fn from_env() -> Result<Self, ConfigError> {
        if let Some(dir) = std::env::var_os("HERON_HOME").filter(|d| !d.is_empty()) {
            return Ok(Self { root: PathBuf::from(dir) });
        }
        let home = std::env::var_os("HOME").filter(|d| !d.is_empty()).ok_or(ConfigError::NoHome)?;
        Ok(Self { root: PathBuf::from(home).join(".heron") })
    }

    /// A home at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `.env`, where keys live.
    pub fn env_path(&self) -> PathBuf {
        self.root.join(".env")
    }

    /// `heron.db`, the session store.
    pub fn db_path(&self) -> PathBuf {
        self.root.join("heron.db")
    }
}

/// API keys from `HERON_HOME/.env`. The process environment is never consulted.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    keys: BTreeMap<String, Secret>,
}

/// Says once per process, on stderr, that `.env` has another name (a hard link): the
/// sandbox hides the home by path, so a command could read the keys through that name.
fn warn_if_linked(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        static SAID: std::sync::Once = std::sync::Once::new();
        if let Ok(metadata) = std::fs::metadata(path)
            && metadata.nlink() > 1
        {
            SAID.call_once(|| {
                tracing::warn!(
                    path = %path.display(),
                    names = metadata.nlink(),
                    "the key file has another name (a hard link), through which commands could read it; \
                     `heron doctor` says how to find it"
                );
            });
        }
    }
}

/// The largest `.env` read, in bytes.
pub const MAX_ENV_BYTES: u64 = 1024 * 1024;
/// The most keys `.env` may hold.
pub(crate) const MAX_KEYS: usize = 1000;

impl Keys {
    /// Reads `.env`; a missing file means no keys. One over `MAX_ENV_BYTES` or with more
    /// than `MAX_KEYS` keys is refused, naming the bound.
    pub fn load(home: &Home) -> Result<Self, ConfigError> {
        let path = home.env_path();
        // Every key is redacted from every log line, output and error: a file of thousands
        // would make each of those slow, and one this large is not a file of keys.
        let bytes = match crate::whole_file::read_bytes(&path, MAX_ENV_BYTES) {
            Ok(bytes) => bytes,
            Err(crate::whole_file::WholeFileError::NotFound) => return Ok(Self::default()),
            Err(crate::whole_file::WholeFileError::TooLarge { .. }) => {
                return Err(ConfigError::Invalid {
                    path: path.display().to_string(),
                    reason: format!("a .env of keys is at most {MAX_ENV_BYTES} bytes, and it is larger"),
                });
            }
            Err(e) => {
                return Err(ConfigError::Io { path: path.display().to_string(), reason: e.to_string() });
            }
        };
        let iter = dotenvy::from_read_iter(bytes.as_slice());
        let mut keys = BTreeMap::new();
        for item in iter {
            // The parser's message can quote the line, which may hold a key: say only where.
            let (name, value) = item.map_err(|_| ConfigError::Invalid {
                path: path.display().to_string(),
                reason: "a line is not NAME=value".to_owned(),
            })?;
            keys.insert(name, Secret::new(value));
            if keys.len() > MAX_KEYS {
                return Err(ConfigError::Invalid {
                    path: path.display().to_string(),
                    reason: format!("it holds more than {MAX_KEYS} keys"),
                });
            }
        }
        warn_if_linked(&path);
        Ok(Self { keys })
    }

    /// Keys given directly (tests, `heron setup`).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { keys: pairs.into_iter().map(|(k, v)| (k, Secret::new(v))).collect() }
    }

    /// The key called `name`, if set and non-empty.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.keys.get(name).filter(|s| !s.is_empty())
    }

    /// The name of every key in `.env`, set or empty: what children must not inherit.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Every key, for redaction.
    pub fn all(&self) -> impl Iterator<Item = &Secret> {
        self.keys.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_env_file_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        std::fs::write(home.env_path(), "LOCAL_API_KEY=sk-test-1234\nEMPTY=\n").expect("write");
        let keys = Keys::load(&home).expect("loads");
        assert_eq!(keys.get("LOCAL_API_KEY").map(Secret::expose), Some("sk-test-1234"));
        assert!(keys.get("EMPTY").is_none());
        assert!(keys.get("PATH").is_none(), "the process environment is never read");
    }

    #[test]
    fn an_env_past_its_bounds_is_refused_naming_the_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let many: String = (0..=MAX_KEYS).map(|n| format!("KEY_{n}=v{n}\n")).collect();
        std::fs::write(home.env_path(), many).expect("write");
        let refused = Keys::load(&home).expect_err("too many keys").to_string();
        assert!(refused.contains(&format!("more than {MAX_KEYS} keys")), "{refused}");
        let huge = format!("K={}\n", "v".repeat(usize::try_from(MAX_ENV_BYTES).unwrap_or(0)));
        std::fs::write(home.env_path(), huge).expect("write");
        let refused = Keys::load(&home).expect_err("too large").to_string();
        assert!(refused.contains("at most"), "{refused}");
        assert!(!refused.contains("vvvv"), "no value is quoted: {refused}");
    }

    #[cfg(unix)]
    #[test]
    fn an_env_that_is_a_fifo_or_grows_past_its_bound_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let name = std::ffi::CString::new(home.env_path().as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path and a plain mode.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let refused = Keys::load(&home).expect_err("not a file").to_string();
        assert!(refused.contains("not a regular file"), "{refused}");
        std::fs::remove_file(home.env_path()).expect("remove");
        // A sparse file: its size is what a reader sees, whatever it would have checked first.
        let file = std::fs::File::create(home.env_path()).expect("create");
        file.set_len(MAX_ENV_BYTES + 1).expect("grow");
        let refused = Keys::load(&home).expect_err("too large").to_string();
        assert!(refused.contains(&format!("at most {MAX_ENV_BYTES} bytes")), "{refused}");
    }
}
