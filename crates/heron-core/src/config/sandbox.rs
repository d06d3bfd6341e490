//! What `config.toml` says about the OS sandbox of the model's commands (and of MCP servers,
//! with `sandbox_mcp`): whether it is on, and the paths they may write besides the
//! session's roots. Invariant: no configured
//! writable path lies inside Heron's home, as written or through a link (checked at load).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Config;

/// `sandbox = "on" | "off"` in `config.toml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxSetting {
    /// Commands are confined (where the kernel allows it), and MCP servers with `sandbox_mcp`.
    #[default]
    On,
    /// They run with Heron's own rights.
    Off,
}

/// The tool caches sandboxed commands may write when `sandbox_writable` is not set: where
/// cargo, npm, yarn, pnpm, pip, uv, Go, Maven and Gradle keep what they download and build,
/// so that builds work in the sandbox. Never a tool's programs (`~/.cargo/bin`,
/// `~/.local/bin`, `~/.rustup`, `~/go/bin`), Python's site-packages or a config file
/// (`~/.cargo/config.toml`): those run, or steer what runs, outside the sandbox later.
/// Cargo's three lock and tracking files are files, not folders; a path that does not
/// exist when a command starts is not granted.
pub const DEFAULT_SANDBOX_WRITABLE: [&str; 15] = [
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.cargo/.package-cache",
    "~/.cargo/.package-cache-mutate",
    "~/.cargo/.global-cache",
    "~/.cache",
    "~/.npm/_cacache",
    "~/.npm/_logs",
    "~/go/pkg/mod",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.gradle/daemon",
    "~/.yarn/berry/cache",
    "~/.pnpm-store",
    "~/.local/share/pnpm/store",
];

impl Config {
    /// The extra paths sandboxed commands may write, `~` expanded against `$HOME`. Without
    /// `HOME`, paths under `~` are left out (a configured one is refused at load).
    pub(crate) fn writable_paths(&self) -> Vec<PathBuf> {
        let user_home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        self.writable_entries().filter_map(|entry| expand_tilde(entry, user_home.as_deref())).collect()
    }

    fn writable_entries(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match &self.sandbox_writable {
            Some(paths) => Box::new(paths.iter().map(String::as_str)),
            None => Box::new(DEFAULT_SANDBOX_WRITABLE.into_iter()),
        }
    }

    /// Refuses a configured writable path inside Heron's home (whose keys the sandbox hides)
    /// or under `~` without `HOME`. Defaults are not checked: a home at `~` itself must not
    /// make every config invalid, and the sandbox never grants a path inside the home anyway.
    pub(super) fn check_writable_outside(&self, heron_home: &Path) -> Result<(), String> {
        let user_home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let Some(configured) = &self.sandbox_writable else { return Ok(()) };
        for entry in configured {
            let Some(path) = expand_tilde(entry, user_home.as_deref()) else {
                return Err(format!("sandbox_writable: `{entry}` needs HOME to be set"));
            };
            if is_within(&path, heron_home) {
                return Err(format!(
                    "sandbox_writable: `{entry}` is inside HERON_HOME ({}), which holds the API keys that \
                     sandboxed commands must never see; list a path outside it",
                    heron_home.display()
                ));
            }
        }
        Ok(())
    }
}

/// `~` or `~/rest` against the user's home; other paths as they are. `None` when `~` is
/// used and there is no home.
fn expand_tilde(entry: &str, user_home: Option<&Path>) -> Option<PathBuf> {
    match entry.strip_prefix('~') {
        Some("") => user_home.map(Path::to_path_buf),
        Some(rest) if rest.starts_with('/') => user_home.map(|home| home.join(rest.trim_start_matches('/'))),
        _ => Some(PathBuf::from(entry)),
    }
}

/// Whether `path` is `dir` or inside it, as written and after following symlinks (so that a
/// link into the home is caught too).
fn is_within(path: &Path, dir: &Path) -> bool {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let resolve = |p: &Path| crate::paths::resolve_against(&cwd, &p.to_string_lossy());
    path.starts_with(dir) || resolve(path).starts_with(resolve(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Home;

    #[test]
    fn the_sandbox_is_on_by_default_and_off_only_when_said() {
        assert_eq!(Config::parse("").expect("parses").sandbox, SandboxSetting::On);
        assert_eq!(Config::parse("sandbox = \"off\"\n").expect("parses").sandbox, SandboxSetting::Off);
        let err = Config::parse("sandbox = \"ask\"\n").expect_err("refused");
        assert!(err.starts_with("line 1, column 11: ") && err.contains("`on` or `off`"), "{err}");
        let err = Config::parse("sandbox_writeable = [\"/x\"]\n").expect_err("refused");
        assert!(err.starts_with("line 1, column 1: ") && err.contains("sandbox_writeable"), "{err}");
    }

    #[test]
    fn writable_paths_default_to_the_tool_caches_and_expand_the_tilde() {
        let home = Path::new("/home/u");
        assert_eq!(expand_tilde("~/.cargo", Some(home)), Some(PathBuf::from("/home/u/.cargo")));
        assert_eq!(expand_tilde("~", Some(home)), Some(PathBuf::from("/home/u")));
        assert_eq!(expand_tilde("/opt/cache", None), Some(PathBuf::from("/opt/cache")));
        assert_eq!(expand_tilde("~/.npm", None), None);
        let unset = Config::parse("").expect("parses");
        let defaults: Vec<&str> = unset.writable_entries().collect();
        assert_eq!(defaults, DEFAULT_SANDBOX_WRITABLE);
        let listed = Config::parse("sandbox_writable = [\"/opt/cache\"]\n").expect("parses");
        assert_eq!(listed.writable_paths(), [PathBuf::from("/opt/cache")]);
        let err = Config::parse("sandbox_writable = [\"cache\"]\n").expect_err("relative");
        assert!(err.contains("`cache`"), "{err}");
    }

    #[test]
    fn a_writable_path_inside_the_home_is_refused_at_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path().join("heron"));
        std::fs::create_dir_all(home.root()).expect("home");
        let inside = home.root().join("cache");
        std::fs::write(
            home.config_path(),
            format!("sandbox_writable = [\"/tmp\", \"{}\"]\n", inside.display()),
        )
        .expect("config");
        let err = Config::load(&home).expect_err("refused").to_string();
        assert!(err.contains("inside HERON_HOME") && err.contains(&inside.display().to_string()), "{err}");
        // A link into the home is the home.
        std::os::unix::fs::symlink(home.root(), dir.path().join("link")).expect("link");
        let linked = dir.path().join("link/cache");
        std::fs::write(home.config_path(), format!("sandbox_writable = [\"{}\"]\n", linked.display()))
            .expect("config");
        assert!(Config::load(&home).is_err(), "a path through a link into the home is refused");
        std::fs::write(home.config_path(), "sandbox_writable = [\"/opt/elsewhere\"]\n").expect("config");
        assert!(Config::load(&home).is_ok());
    }
}
