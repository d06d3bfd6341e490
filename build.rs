//! Generates the protocol layer from `schema/` into `OUT_DIR` (see `crates/heron-codegen/`):
//! ACP v1 at the top of `OUT_DIR`, ACP v2 under `OUT_DIR/v2`, as in `generated/`.
//!
//! This is `heron-protocol`'s build script (`build = "../../build.rs"` in its manifest); it
//! stays beside `schema/` so a schema upgrade is visible at the top of the repository.

use std::path::PathBuf;

fn main() {
    // The package is `crates/heron-protocol`; the schema lives at the repository root.
    let package = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = package.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    for version in &heron_codegen::Version::ALL {
        for file in version.input_files {
            println!("cargo:rerun-if-changed={}", root.join(file).display());
        }
    }
    let files = match heron_codegen::generate_all(&root) {
        Ok(files) => files,
        Err(err) => {
            println!("cargo:error=heron-codegen: {err}");
            std::process::exit(1);
        }
    };
    for (name, text) in &files {
        let path = out.join(name);
        let written =
            path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, text));
        if let Err(err) = written {
            println!("cargo:error=writing {name}: {err}");
            std::process::exit(1);
        }
    }
}
