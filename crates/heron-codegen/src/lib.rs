//! Generates Heron's protocol layer (types, method table, handler traits, dispatch glue)
//! from the vendored ACP schema and Heron's vendor-extension schema, once per protocol
//! version ([`Version`]: ACP v1 and v2), each through the same stages.
//!
//! `build.rs` and the `heron-codegen` binary are thin front ends over [`generate_all`].

#![deny(missing_docs)]

pub mod api;
pub mod emit;
pub mod extensions;
pub mod lenient;
pub mod merge;
pub mod methods;
pub mod normalize;
pub mod nulls;
pub mod types;
pub mod variants;

use std::path::Path;

pub use merge::Inputs;

/// A generation failure: the schema has a shape the generator does not handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The generated files of one protocol version.
#[derive(Debug, Clone)]
pub struct Output {
    /// `acp.rs`: the Rust code.
    pub rust: String,
    /// This version's part of `METHODS.md`: the method table for people.
    pub methods_md: String,
    /// `schema.json`: the merged definitions, for runtime validation.
    pub schema: String,
}

/// One protocol version the generator emits: where its schemas are, where its files go and
/// where the Rust lands. Every version runs through the same stages; only this differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// The version's name, as in its paths and schema id: `v1`.
    pub name: &'static str,
    /// The stable ACP schema, the unstable one and Heron's vendor schema, relative to the
    /// repository root, in that order.
    pub input_files: [&'static str; 3],
    /// Where `acp.rs` and `schema.json` go, relative to `generated/` (and `OUT_DIR`); empty
    /// for the directory itself.
    pub dir: &'static str,
    /// The Rust module the generated code is included at.
    pub module: &'static str,
    /// The crate-local module that holds this version's `AgentPeer` and `ClientPeer`
    /// handles, which the generated code implements the handler traits for. Each version
    /// has its own, so a v1 peer cannot be handed to code that speaks v2.
    pub peers: &'static str,
    /// `None` for the version whose table opens `METHODS.md`; otherwise the heading of the
    /// section its table gets there.
    pub methods_section: Option<&'static str>,
}

impl Version {
    /// ACP v1, the version editors speak today: `generated/`, `heron_protocol`.
    pub const V1: Version = Version {
        name: "v1",
        input_files: [
            "schema/acp/v1/schema.json",
            "schema/acp/v1/schema.unstable.json",
            "schema/heron/v1.json",
        ],
        dir: "",
        module: "heron_protocol",
        peers: "crate::runtime",
        methods_section: None,
    };

    /// ACP v2: `generated/v2/`, `heron_protocol::v2`.
    pub const V2: Version = Version {
        name: "v2",
        input_files: [
            "schema/acp/v2/schema.json",
            "schema/acp/v2/schema.unstable.json",
            "schema/heron/v2.json",
        ],
        dir: "v2",
        module: "heron_protocol::v2",
        peers: "crate::v2",
        methods_section: Some("ACP v2"),
    };

    /// Every version, in the order their tables appear in `METHODS.md`.
    pub const ALL: [Version; 2] = [Version::V1, Version::V2];

    /// A path under the version's output directory: `acp.rs` -> `v2/acp.rs`.
    pub fn output_path(&self, file: &str) -> String {
        if self.dir.is_empty() { file.to_owned() } else { format!("{}/{file}", self.dir) }
    }
}

/// Reads one version's three schemas below `root`.
pub fn read_inputs(root: &Path, version: &Version) -> Result<Inputs, Error> {
    let read = |rel: &str| -> Result<serde_json::Value, Error> {
        let text =
            std::fs::read_to_string(root.join(rel)).map_err(|e| Error::new(format!("reading {rel}: {e}")))?;
        serde_json::from_str(&text).map_err(|e| Error::new(format!("parsing {rel}: {e}")))
    };
    let [stable, unstable, vendor] = version.input_files;
    Ok(Inputs { stable: read(stable)?, unstable: read(unstable)?, vendor: read(vendor)? })
}

/// Generates one version from its parsed inputs.
pub fn generate(inputs: &Inputs, version: &Version) -> Result<Output, Error> {
    let merged = merge::merge(inputs)?;
    let table = methods::method_table(inputs, &merged)?;
    let normalized = normalize::normalize(&merged.defs)?;
    let types = lenient::apply(types::typify(&normalized)?, &normalized.lenient)?;
    let types = nulls::apply(types, &nulls::wanted(&inputs.vendor)?)?;
    let unions = emit::unions(&normalized.unions);
    let implemented = api::implemented(&inputs.vendor);
    let type_names: Vec<String> = normalized.defs.keys().cloned().collect();
    let api = api::emit(version, &table, &implemented, &type_names);
    let extension_specs = extensions::extensions(&inputs.vendor, &table)?;
    let extensions = extensions::emit(&extension_specs);
    let classified = variants::rows(&inputs.vendor, &merged.defs)?;
    let kinds = classified.as_deref().map(variants::emit).unwrap_or_default();

    let file: syn::File = syn::parse2(quote::quote! { #types #unions #api #extensions #kinds })
        .map_err(|e| Error::new(format!("generated code does not parse: {e}")))?;
    let header = "// @generated by heron-codegen from schema/. Do not edit: run \
                  `cargo run -p heron-codegen -- refresh` instead.\n\n";
    let rust = format!("{header}{}", prettyplease::unparse(&file));
    let schema = serde_json::to_string_pretty(&merge::validation_document(&merged, version))
        .map_err(|e| Error::new(e.to_string()))?;
    let declined = api::declined(&inputs.vendor);
    if let Some((wire, _)) =
        declined.iter().find(|(wire, _)| !table.iter().any(|m| &m.wire == wire) || implemented.contains(wire))
    {
        return Err(Error::new(format!("`x-declined` names `{wire}`, which is no method or is implemented")));
    }
    let methods_md = api::methods_md(version, &table, &implemented, &declined)
        + &extensions::markdown(&extension_specs)
        + &classified.as_deref().map(variants::markdown).unwrap_or_default();
    Ok(Output { rust, methods_md, schema: schema + "\n" })
}

/// Generates every version below `root`: each file's path relative to `generated/` (and
/// `OUT_DIR`) with its text. `METHODS.md` holds every version's table, one after another.
pub fn generate_all(root: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut files = Vec::new();
    let mut methods_md = String::new();
    for version in &Version::ALL {
        let output = read_inputs(root, version)
            .and_then(|inputs| generate(&inputs, version))
            .map_err(|e| Error::new(format!("ACP {}: {e}", version.name)))?;
        files.push((version.output_path("acp.rs"), output.rust));
        files.push((version.output_path("schema.json"), output.schema));
        methods_md.push_str(&output.methods_md);
    }
    files.push(("METHODS.md".to_owned(), methods_md));
    Ok(files)
}

/// `ClientCapabilities` as `CLIENT_CAPABILITIES`: a name for a static.
pub fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// The last segment of a `#/$defs/Name` reference.
pub fn ref_name(reference: &str) -> Option<&str> {
    reference.strip_prefix("#/$defs/").or_else(|| reference.strip_prefix("#/definitions/"))
}

/// PascalCase of a wire value: `resource_link` -> `ResourceLink`, `session/set_mode` ->
/// `SessionSetMode`, `_heron/session/mcpStatus` -> `HeronSessionMcpStatus`.
pub fn pascal(value: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for ch in value.chars() {
        if ch.is_ascii_alphanumeric() {
            if upper {
                out.push(ch.to_ascii_uppercase());
            } else {
                out.push(ch);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'V');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pascal_names_follow_word_boundaries() {
        assert_eq!(pascal("resource_link"), "ResourceLink");
        assert_eq!(pascal("session/set_mode"), "SessionSetMode");
        assert_eq!(pascal("_heron/session/mcpStatus"), "HeronSessionMcpStatus");
        assert_eq!(pascal("date-time"), "DateTime");
        assert_eq!(pascal("$/cancel_request"), "CancelRequest");
    }

    #[test]
    fn ref_name_takes_the_last_segment() {
        assert_eq!(ref_name("#/$defs/SessionId"), Some("SessionId"));
        assert_eq!(ref_name("other.json#/x"), None);
    }
}
