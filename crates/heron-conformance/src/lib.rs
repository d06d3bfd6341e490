//! Heron's conformance kit, a library of its own so the binary is a thin shell over it.
//!
//! Conformance transcripts: a readable NDJSON format for ACP exchanges (`format`), a matcher
//! that survives harmless change (`matcher`), a runner that replays a transcript against
//! Heron or any other agent command (`runner`), the acp profile built into the binary
//! (`bundled`), the table, JUnit and JSON reports (`report`) and the recorder behind
//! `heron acp --record` (`record`). The format is documented in `conformance/README.md`.

pub mod bundled;
pub mod format;
pub mod matcher;
pub mod model_server;
pub mod recipe;
pub mod record;
pub mod report;
pub mod runner;

pub use format::{Header, Item, Profile, Scenario};
pub use runner::{AgentCommand, Outcome, Replayed, Transport, replay, run_file, run_text};

/// Every `*.ndjson` file named by `paths`, in order; a directory stands for the transcripts
/// in it, sorted by name.
pub fn transcript_files(paths: &[std::path::PathBuf]) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(path)?
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}
