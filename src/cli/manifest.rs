//! `heron manifest`: this build's entry for the ACP registry (`agent.json`, the format of
//! `schema/registry/agent.schema.json`), from Cargo.toml: the package's name, version,
//! description, authors, license, repository and homepage (the registry's `website`) as
//! Cargo compiled them in, and the release archives of `[package.metadata.registry]`. The
//! committed copy is `docs/registry/agent.json`; a test regenerates it and validates it
//! against the schema.
//!
//! Heron is a native program with no npm or PyPI wrapper, so of the registry's
//! distributions (`binary`, `npx`, `uvx`) only `binary` fits: one archive per platform,
//! holding the `heron` executable, started as `heron acp`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use serde::{Deserialize, Serialize};

/// The package manifest, read for its `[package.metadata.registry]` table.
const CARGO_TOML: &str = include_str!("../../Cargo.toml");

/// Options of `heron manifest` (none yet).
#[derive(Debug, Clone, Default, Args)]
pub struct ManifestArgs {}

/// `[package.metadata.registry]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryMetadata {
    /// The display name.
    name: String,
    /// The archive address, with `{version}` and `{target}` (a Rust target triple) in it.
    archive: String,
    /// Registry platform (`linux-x86_64`, ...) to the Rust target its archive is built for.
    targets: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct CargoManifest {
    package: Package,
}

#[derive(Debug, Deserialize)]
struct Package {
    metadata: PackageMetadata,
}

#[derive(Debug, Deserialize)]
struct PackageMetadata {
    registry: RegistryMetadata,
}

/// One registry entry; fields in the order the registry's own entries use.
#[derive(Debug, Serialize)]
struct Entry {
    id: &'static str,
    name: String,
    version: &'static str,
    description: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    repository: Option<&'static str>,
    /// The registry's name for the package's `homepage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    website: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    authors: Vec<&'static str>,
    license: &'static str,
    distribution: Distribution,
}

#[derive(Debug, Serialize)]
struct Distribution {
    binary: BTreeMap<String, BinaryTarget>,
}

#[derive(Debug, Serialize)]
struct BinaryTarget {
    archive: String,
    cmd: &'static str,
    args: [&'static str; 1],
}

/// The entry as pretty JSON with a final newline, as committed.
pub fn render() -> Result<String, String> {
    let manifest: CargoManifest = toml::from_str(CARGO_TOML)
        .map_err(|e| format!("Cargo.toml has no usable [package.metadata.registry]: {}", e.message()))?;
    let registry = manifest.package.metadata.registry;
    let version = env!("CARGO_PKG_VERSION");
    let binary = registry
        .targets
        .iter()
        .map(|(platform, triple)| {
            let archive = registry.archive.replace("{version}", version).replace("{target}", triple);
            (platform.clone(), BinaryTarget { archive, cmd: "./heron", args: ["acp"] })
        })
        .collect();
    let entry = Entry {
        id: env!("CARGO_PKG_NAME"),
        name: registry.name,
        version,
        description: env!("CARGO_PKG_DESCRIPTION"),
        repository: Some(env!("CARGO_PKG_REPOSITORY")).filter(|url| !url.is_empty()),
        website: Some(env!("CARGO_PKG_HOMEPAGE")).filter(|url| !url.is_empty()),
        authors: env!("CARGO_PKG_AUTHORS").split(':').filter(|author| !author.is_empty()).collect(),
        license: env!("CARGO_PKG_LICENSE"),
        distribution: Distribution { binary },
    };
    let json = serde_json::to_string_pretty(&entry).map_err(|e| format!("cannot encode the entry: {e}"))?;
    Ok(format!("{json}\n"))
}

/// Runs `heron manifest`: the entry on stdout.
pub fn run(_args: ManifestArgs) -> ExitCode {
    match render() {
        Ok(json) => super::after_output(super::write_stdout(&json), ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("heron: {err}");
            ExitCode::FAILURE
        }
    }
}
