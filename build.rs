//! Generates the protocol layer from `schema/` into `OUT_DIR` (see `crates/heron-codegen/`).
//!
//! This is `heron-protocol`'s build script (`build = "../../build.rs"` in its manifest); it
//! stays beside `schema/` so a schema upgrade is visible at the top of the repository.

use std::path::PathBuf;

fn main() {
    // The package is `crates/heron-protocol`; the schema lives at the repository root.
    let package = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = package.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    for file in heron_codegen::INPUT_FILES {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let output = match heron_codegen::read_inputs(&root).and_then(|i| heron_codegen::generate(&i)) {
        Ok(output) => output,
        Err(err) => {
            println!("cargo:error=heron-codegen: {err}");
            std::process::exit(1);
        }
    };
    for (name, text) in
        [("acp.rs", &output.rust), ("METHODS.md", &output.methods_md), ("schema.json", &output.schema)]
    {
        if let Err(err) = std::fs::write(out.join(name), text) {
            println!("cargo:error=writing {name}: {err}");
            std::process::exit(1);
        }
    }
}
