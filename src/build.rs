//! The `heron` binary's build script: in release builds on x86-64 Linux, asks the linker to
//! place the functions a typical session runs first and together (`src/symbol-order.txt`,
//! written by `scripts/update-symbol-order`).
//!
//! Why: Linux maps code from the page cache in whole folios, so a function touched in a
//! region of `.text` maps the region; the ordering keeps what a session runs in a few MiB
//! instead of spread over the whole binary (BENCHMARKS.md, "Code layout"). It changes where
//! code sits, never what it does: a name the build does not have is skipped by the linker.
//!
//! Only there, because only there is the linker known to read the file: Rust links
//! `x86_64-unknown-linux-gnu` with its own lld by default, and GNU ld has no such option.
//! `HERON_SYMBOL_ORDER=0` turns it off for a toolchain set up to link otherwise.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/symbol-order.txt");
    println!("cargo:rerun-if-env-changed=HERON_SYMBOL_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let wanted = var("PROFILE") == "release"
        && var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("HERON_SYMBOL_ORDER") != "0";
    if !wanted {
        return;
    }
    let order = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("src/symbol-order.txt");
    if !order.is_file() {
        return;
    }
    println!("cargo:rustc-link-arg-bin=heron=-Wl,--symbol-ordering-file={}", order.display());
    // Names from another toolchain or dependency set are expected to be missing.
    println!("cargo:rustc-link-arg-bin=heron=-Wl,--no-warn-symbol-ordering");
}
