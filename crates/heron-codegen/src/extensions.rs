//! Heron's vendor extensions as clients discover them: the vendor schema's `x-extensions`
//! groups its methods into named, versioned extensions (`sessionInbox`, `sessionSteer`,
//! ...), checked against the method table and emitted as the `EXTENSIONS` table that
//! `initialize` advertises from.

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::Value;

use crate::Error;
use crate::methods::{MethodSpec, Stability};

/// One extension: its name, schema version and methods by short name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionSpec {
    /// The key clients look for, e.g. `sessionInbox`.
    pub name: String,
    /// Bumped when the extension's wire contract changes incompatibly.
    pub schema_version: u64,
    /// (short name, wire name) of each request, in the schema's order.
    pub methods: Vec<(String, String)>,
    /// (short name, wire name) of each notification Heron sends.
    pub notifications: Vec<(String, String)>,
}

/// Reads `x-extensions`; every method it names must be a vendor method of the table.
pub fn extensions(vendor: &Value, table: &[MethodSpec]) -> Result<Vec<ExtensionSpec>, Error> {
    let Some(map) = vendor.get("x-extensions") else { return Ok(Vec::new()) };
    let map = map.as_object().ok_or_else(|| Error::new("`x-extensions` must be an object"))?;
    let mut out = Vec::new();
    for (name, spec) in map {
        let version = spec
            .get("schemaVersion")
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::new(format!("extension `{name}` needs an integer `schemaVersion`")))?;
        let members = |key: &str| -> Result<Vec<(String, String)>, Error> {
            let Some(entries) = spec.get(key) else { return Ok(Vec::new()) };
            let entries = entries
                .as_object()
                .ok_or_else(|| Error::new(format!("`{key}` of extension `{name}` must be an object")))?;
            entries
                .iter()
                .map(|(short, wire)| {
                    let wire = wire
                        .as_str()
                        .ok_or_else(|| Error::new(format!("`{name}.{key}.{short}` must be a string")))?;
                    let known = table.iter().any(|m| m.wire == wire && m.stability == Stability::Vendor);
                    if !known {
                        return Err(Error::new(format!(
                            "extension `{name}` names `{wire}`, which is no vendor method"
                        )));
                    }
                    Ok((short.clone(), wire.to_owned()))
                })
                .collect()
        };
        let methods = members("methods")?;
        if methods.is_empty() {
            return Err(Error::new(format!("extension `{name}` has no methods")));
        }
        out.push(ExtensionSpec {
            name: name.clone(),
            schema_version: version,
            methods,
            notifications: members("notifications")?,
        });
    }
    Ok(out)
}

/// The `EXTENSIONS` table.
pub fn emit(extensions: &[ExtensionSpec]) -> TokenStream {
    let rows = extensions.iter().map(|e| {
        let name = &e.name;
        let version = e.schema_version;
        let pairs = |list: &[(String, String)]| {
            let items = list.iter().map(|(short, wire)| quote! { (#short, #wire) });
            quote! { &[#(#items),*] }
        };
        let methods = pairs(&e.methods);
        let notifications = pairs(&e.notifications);
        quote! {
            crate::runtime::Extension {
                name: #name,
                schema_version: #version,
                methods: #methods,
                notifications: #notifications,
            }
        }
    });
    let count = extensions.len();
    quote! {
        /// Heron's vendor extensions, as `initialize` advertises them (`x-extensions`).
        pub static EXTENSIONS: [crate::runtime::Extension; #count] = [#(#rows,)*];
    }
}

/// The `METHODS.md` section listing each extension, its version and its methods; nothing
/// when there are none.
pub fn markdown(extensions: &[ExtensionSpec]) -> String {
    if extensions.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## Heron's extensions\n\n\
         `initialize` advertises each extension whose methods Heron serves under \
         `agentCapabilities._meta.heron.<name>`, with its `schemaVersion` and `methods` (and \
         `notifications`) by short name.\n\n\
         | Extension | schemaVersion | Methods | Notifications |\n|---|---|---|---|\n",
    );
    for e in extensions {
        let list = |pairs: &[(String, String)]| {
            if pairs.is_empty() {
                return "-".to_owned();
            }
            pairs.iter().map(|(short, wire)| format!("{short}: `{wire}`")).collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            e.name,
            e.schema_version,
            list(&e.methods),
            list(&e.notifications)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_naming_an_unknown_method_is_refused() {
        let vendor = serde_json::json!({ "x-extensions": {
            "x": { "schemaVersion": 1, "methods": { "go": "_heron/nope" } } } });
        let err = extensions(&vendor, &[]).expect_err("refused");
        assert!(err.to_string().contains("_heron/nope"), "{err}");
        let unversioned = serde_json::json!({ "x-extensions": { "x": { "methods": {} } } });
        assert!(extensions(&unversioned, &[]).is_err());
    }
}
