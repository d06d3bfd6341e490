//! `heron-codegen`: refreshes or checks the committed copy of the generated code.
//!
//! `cargo run -p heron-codegen -- refresh` rewrites `generated/` from `schema/`;
//! `cargo run -p heron-codegen -- check` fails when `generated/` is out of date.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let root = root();
    let output = match heron_codegen::read_inputs(&root).and_then(|i| heron_codegen::generate(&i)) {
        Ok(output) => output,
        Err(err) => {
            eprintln!("heron-codegen: {err}");
            return ExitCode::FAILURE;
        }
    };
    let files =
        [("acp.rs", &output.rust), ("METHODS.md", &output.methods_md), ("schema.json", &output.schema)];
    let dir = root.join("generated");
    match mode.as_str() {
        "refresh" => {
            for (name, text) in files {
                if let Err(err) =
                    std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(name), text))
                {
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
                .map(|(name, _)| *name)
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
