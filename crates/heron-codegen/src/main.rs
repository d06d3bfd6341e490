//! `heron-codegen`: refreshes or checks the committed copy of the generated code.
//!
//! `cargo run -p heron-codegen -- refresh` rewrites `generated/` from `schema/` (every
//! protocol version: `generated/` for v1, `generated/v2/` for v2);
//! `cargo run -p heron-codegen -- check` fails when any of it is out of date.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let root = root();
    let files = match heron_codegen::generate_all(&root) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("heron-codegen: {err}");
            return ExitCode::FAILURE;
        }
    };
    let dir = root.join("generated");
    match mode.as_str() {
        "refresh" => {
            for (name, text) in &files {
                if let Err(err) = write(&dir.join(name), text) {
                    eprintln!("heron-codegen: writing generated/{name}: {err}");
                    return ExitCode::FAILURE;
                }
            }
            eprintln!("heron-codegen: generated/ refreshed; review the diff");
            ExitCode::SUCCESS
        }
        "check" => {
            let stale: Vec<&str> = files
                .iter()
                .filter(|(name, text)| {
                    std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(text.as_str())
                })
                .map(|(name, _)| name.as_str())
                .collect();
            if stale.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "heron-codegen: generated/ is stale: {}; run `cargo run -p heron-codegen -- refresh`",
                    stale.join(", ")
                );
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!("usage: heron-codegen refresh|check");
            ExitCode::from(2)
        }
    }
}
