//! The command line that runs a program behind a session's walls in a process Heron does
//! not start itself: an editor's terminal. Heron asks the editor to run its own launcher
//! (`heron sandbox-exec`), which loads the same home and builds the same policy for the
//! same roots, then starts the program confined exactly as a local command. Invariant: the
//! model's command is one argument after `--`, never parsed by a shell on the way in.
//!
//! The launcher is the `heron` binary, which registers itself at start ([`set`]); a program
//! that embeds the core without it has none, and its editor terminals run the command as it
//! is (the route it reports says so).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::Policy;

/// The subcommand of the launcher that confines a program.
pub const SUBCOMMAND: &str = "sandbox-exec";

static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();

/// Registers `program` (the `heron` binary, an absolute path) as the launcher of commands
/// run in editor terminals. The first registration wins.
pub fn set(program: PathBuf) {
    let _ = LAUNCHER.set(program);
}

/// The registered launcher, if any.
pub fn get() -> Option<&'static Path> {
    LAUNCHER.get().map(PathBuf::as_path)
}

/// The program and arguments that run `sh -c command` behind `policy`'s walls through
/// `launcher`: the home and the roots are named, so the launcher builds the policy the
/// session has (from the same `config.toml` and `.env`), whatever the terminal's
/// environment says.
pub fn wrap(launcher: &Path, policy: &Policy, command: &str) -> (String, Vec<String>) {
    let mut args = vec![SUBCOMMAND.to_owned(), "--home".to_owned(), policy.home.display().to_string()];
    for root in &policy.roots {
        args.push("--root".to_owned());
        args.push(root.display().to_string());
    }
    args.extend(["--".to_owned(), "sh".to_owned(), "-c".to_owned(), command.to_owned()]);
    (launcher.display().to_string(), args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Home, Keys};

    #[test]
    fn the_command_is_one_argument_after_the_home_and_the_roots() {
        let config = Config::parse("").expect("config");
        let home = Home::at("/h");
        let roots = vec![PathBuf::from("/ws"), PathBuf::from("/more")];
        let policy = Policy::from_config(&config, &home, &Keys::default(), roots);
        let (program, args) = wrap(Path::new("/bin/heron"), &policy, "echo hi; rm -rf --no-preserve-root /");
        assert_eq!(program, "/bin/heron");
        assert_eq!(
            args,
            [
                "sandbox-exec",
                "--home",
                "/h",
                "--root",
                "/ws",
                "--root",
                "/more",
                "--",
                "sh",
                "-c",
                "echo hi; rm -rf --no-preserve-root /"
            ]
        );
    }
}
