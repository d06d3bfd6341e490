//! What Heron does with each variant of the protocol's open-ended parts: every
//! `SessionUpdate` and `ContentBlock` variant and every client and agent capability of the
//! vendored schema, classified in the vendor schema's `x-variants` (`sends`, `accepts`,
//! `uses`, `advertises`, `declined`, each with why). A variant the schema has and
//! `x-variants` does not, or the reverse, fails generation, so a schema upgrade that adds
//! one does not build until someone decides. Emitted as a table in `METHODS.md`, and as
//! Rust: a fieldless `<Union>Kind` per union (with `ALL`, `wire()` and `heron()`, and
//! `kind()` on the union) and a `(path, heron)` table per capability set, which the
//! adapter's own exhaustive matches are tested against.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::Value;

use crate::emit::ident;
use crate::{Error, pascal, ref_name};

/// The unions classified by variant: the union's definition and its tag.
pub const UNIONS: [(&str, &str); 2] = [("SessionUpdate", "sessionUpdate"), ("ContentBlock", "type")];

/// The capability sets classified by dotted path.
pub const CAPABILITIES: [&str; 2] = ["ClientCapabilities", "AgentCapabilities"];

/// The words a classification may use.
const VOCABULARY: [&str; 7] =
    ["sends", "sends when advertised", "accepts", "accepts and sends", "uses", "advertises", "declined"];

/// One classified variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The union or capability set: `SessionUpdate`, `ClientCapabilities`.
    pub group: String,
    /// The tag value or dotted path: `agent_message_chunk`, `fs.readTextFile`.
    pub variant: String,
    /// What Heron does, from [`VOCABULARY`].
    pub heron: String,
    /// Why, in a sentence.
    pub why: String,
}

/// The tag values of a tagged union, in the schema's order.
fn tags(defs: &BTreeMap<String, Value>, union: &str, tag: &str) -> Result<Vec<String>, Error> {
    let def = defs.get(union).ok_or_else(|| Error::new(format!("the schema has no `{union}`")))?;
    let arms = def.get("oneOf").or_else(|| def.get("anyOf")).and_then(Value::as_array);
    let arms = arms.ok_or_else(|| Error::new(format!("`{union}` is not a union")))?;
    Ok(arms
        .iter()
        .filter_map(|arm| arm.pointer(&format!("/properties/{tag}/const")).and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// The definition a property refers to, directly or through `allOf`/`anyOf`.
fn referenced(property: &Value) -> Option<&str> {
    if let Some(reference) = property.get("$ref").and_then(Value::as_str) {
        return ref_name(reference);
    }
    ["allOf", "anyOf", "oneOf"]
        .iter()
        .filter_map(|key| property.get(*key).and_then(Value::as_array))
        .flatten()
        .find_map(|arm| arm.get("$ref").and_then(Value::as_str).and_then(ref_name))
}

/// The capability paths below `def`: each property (but `_meta`) whose definition has
/// properties of its own is walked into; any other (a boolean, an empty marker object) is
/// a path.
fn paths(defs: &BTreeMap<String, Value>, def: &str, prefix: &str, out: &mut Vec<String>) {
    let Some(properties) = defs.get(def).and_then(|d| d.get("properties")).and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if name == "_meta" {
            continue;
        }
        let path = format!("{prefix}{name}");
        let inner = referenced(property).filter(|inner| {
            defs.get(*inner)
                .and_then(|d| d.get("properties"))
                .and_then(Value::as_object)
                .is_some_and(|p| p.keys().any(|k| k != "_meta"))
        });
        match inner {
            Some(inner) => paths(defs, inner, &format!("{path}."), out),
            None => out.push(path),
        }
    }
}

/// Every variant of the schema that must be classified, as (group, variant).
pub fn schema_variants(defs: &BTreeMap<String, Value>) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for (union, tag) in UNIONS {
        out.extend(tags(defs, union, tag)?.into_iter().map(|v| (union.to_owned(), v)));
    }
    for set in CAPABILITIES {
        let mut found = Vec::new();
        paths(defs, set, "", &mut found);
        out.extend(found.into_iter().map(|p| (set.to_owned(), p)));
    }
    Ok(out)
}

/// The classification of every schema variant, from the vendor schema's `x-variants`; `None`
/// when it has none (a protocol version Heron does not classify).
pub fn rows(vendor: &Value, defs: &BTreeMap<String, Value>) -> Result<Option<Vec<Row>>, Error> {
    let Some(map) = vendor.get("x-variants") else { return Ok(None) };
    let map = map.as_object().ok_or_else(|| Error::new("`x-variants` must be an object"))?;
    let mut rows = Vec::new();
    for (group, variant) in schema_variants(defs)? {
        let entry = map.get(&group).and_then(|g| g.get(&variant)).ok_or_else(|| {
            Error::new(format!(
                "`{group}` has `{variant}` in the vendored schema, and `x-variants` does not say what Heron does \
                 with it: classify it in the vendor schema"
            ))
        })?;
        let pair = entry.as_array().filter(|a| a.len() == 2);
        let (heron, why) = match pair.map(|a| (a[0].as_str(), a[1].as_str())) {
            Some((Some(heron), Some(why))) if VOCABULARY.contains(&heron) && !why.is_empty() => (heron, why),
            _ => {
                return Err(Error::new(format!(
                    "`x-variants.{group}.{variant}` must be [what, why], what one of {VOCABULARY:?}"
                )));
            }
        };
        rows.push(Row { group, variant, heron: heron.to_owned(), why: why.to_owned() });
    }
    for (group, variants) in map {
        let variants = variants
            .as_object()
            .ok_or_else(|| Error::new(format!("`x-variants.{group}` must be an object")))?;
        if let Some(stale) =
            variants.keys().find(|v| !rows.iter().any(|r| &r.group == group && &r.variant == *v))
        {
            return Err(Error::new(format!(
                "`x-variants.{group}` names `{stale}`, which the vendored schema lacks"
            )));
        }
    }
    Ok(Some(rows))
}

/// The `METHODS.md` section: one table per group.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "\n### Updates, content and capabilities\n\nEvery `SessionUpdate` and `ContentBlock` variant and every client and agent capability \
         of the vendored schema, and what Heron does with it (`x-variants` in the vendor schema; an unclassified one \
         fails the build).\n",
    );
    let mut group = "";
    for row in rows {
        if row.group != group {
            group = &row.group;
            out.push_str(&format!("\n| `{group}` | Heron | Why |\n|---|---|---|\n"));
        }
        out.push_str(&format!("| `{}` | {} | {} |\n", row.variant, row.heron, row.why));
    }
    out
}

/// The Rust: each union's `Kind` enum and `kind()`, and each capability set's table.
pub fn emit(rows: &[Row]) -> TokenStream {
    let mut out = TokenStream::new();
    for (union, _) in UNIONS {
        let of: Vec<&Row> = rows.iter().filter(|r| r.group == union).collect();
        let name = ident(union);
        let kind = ident(&format!("{union}Kind"));
        let variants: Vec<_> = of.iter().map(|r| ident(&pascal(&r.variant))).collect();
        let wires: Vec<&str> = of.iter().map(|r| r.variant.as_str()).collect();
        let herons: Vec<&str> = of.iter().map(|r| r.heron.as_str()).collect();
        let doc = format!(" Which variant a `{union}` is, without its payload.");
        out.extend(quote! {
            #[doc = #doc]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum #kind { #( #[allow(missing_docs)] #variants, )* }
            impl #kind {
                /// Every variant, in the schema's order.
                pub const ALL: &'static [#kind] = &[ #( #kind::#variants ),* ];
                /// The variant's tag on the wire.
                pub fn wire(self) -> &'static str { match self { #( #kind::#variants => #wires, )* } }
                /// What Heron does with it (`x-variants`).
                pub fn heron(self) -> &'static str { match self { #( #kind::#variants => #herons, )* } }
            }
            impl #name {
                /// Which variant this is.
                pub fn kind(&self) -> #kind { match self { #( #name::#variants(..) => #kind::#variants, )* } }
            }
        });
    }
    for set in CAPABILITIES {
        let of: Vec<&Row> = rows.iter().filter(|r| r.group == set).collect();
        let table = ident(&format!("{}_CLASSIFIED", crate::screaming(set)));
        let count = of.len();
        let paths: Vec<&str> = of.iter().map(|r| r.variant.as_str()).collect();
        let herons: Vec<&str> = of.iter().map(|r| r.heron.as_str()).collect();
        let doc = format!(" Every capability path of `{set}`, and what Heron does with it (`x-variants`).");
        out.extend(quote! {
            #[doc = #doc]
            pub static #table: [(&str, &str); #count] = [ #( (#paths, #herons) ),* ];
        });
    }
    out
}
