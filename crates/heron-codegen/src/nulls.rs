//! Writes `null` for chosen optional fields that have no value, instead of leaving them
//! out, as the vendor schema's `x-serialize-null` asks (`{"Diff": ["oldText"]}`).
//!
//! typify skips every `None` when serializing. Where the schema allows `null` and a
//! field's absence and its `null` mean the same, some clients still test for `null` only
//! (ACP's `Diff.oldText`, "omitted or `null` for new files", is read by clients as `null`),
//! so Heron says it explicitly. Reading is unchanged: absent and `null` both read as `None`.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::TokenStream;
use quote::ToTokens;
use serde_json::Value;
use syn::punctuated::Punctuated;
use syn::{Fields, Item, LitStr, Meta, Token, parse_quote};

use crate::Error;

/// The fields to write as `null`: definition -> wire names, from `x-serialize-null`.
pub fn wanted(vendor: &Value) -> Result<BTreeMap<String, BTreeSet<String>>, Error> {
    let Some(map) = vendor.get("x-serialize-null") else { return Ok(BTreeMap::new()) };
    let map = map.as_object().ok_or_else(|| Error::new("`x-serialize-null` must be an object"))?;
    map.iter()
        .map(|(def, fields)| {
            let names = fields
                .as_array()
                .ok_or_else(|| Error::new(format!("`x-serialize-null.{def}` must be a list of field names")))?
                .iter()
                .map(|name| {
                    name.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| Error::new(format!("`x-serialize-null.{def}` must hold only strings")))
                })
                .collect::<Result<BTreeSet<_>, _>>()?;
            Ok((def.clone(), names))
        })
        .collect()
}

/// The wire name of a field typify generated: its `rename`, else its Rust name.
fn wire_name(field: &syn::Field) -> Result<String, Error> {
    let mut wire = field.ident.as_ref().map(ToString::to_string).unwrap_or_default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        for meta in serde_metas(attr)? {
            if let Meta::NameValue(pair) = &meta
                && pair.path.is_ident("rename")
            {
                let lit: LitStr = syn::parse2(pair.value.to_token_stream())
                    .map_err(|e| Error::new(format!("a rename typify wrote is not a string: {e}")))?;
                wire = lit.value();
            }
        }
    }
    Ok(wire)
}

fn serde_metas(attr: &syn::Attribute) -> Result<Punctuated<Meta, Token![,]>, Error> {
    attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
        .map_err(|e| Error::new(format!("reading a serde attribute typify wrote: {e}")))
}

/// Rewrites `types` so that each wanted field is written even when it is `None`. Every
/// wanted field must be an optional field of a generated struct; a miss is an error, so a
/// renamed definition cannot silently turn the `null` back into an absence.
pub fn apply(types: TokenStream, wanted: &BTreeMap<String, BTreeSet<String>>) -> Result<TokenStream, Error> {
    if wanted.is_empty() {
        return Ok(types);
    }
    let mut file: syn::File =
        syn::parse2(types).map_err(|e| Error::new(format!("typify output does not parse: {e}")))?;
    let mut done = BTreeSet::new();
    for item in &mut file.items {
        let Item::Struct(item) = item else { continue };
        let name = item.ident.to_string();
        let Some(fields_wanted) = wanted.get(&name) else { continue };
        let Fields::Named(fields) = &mut item.fields else { continue };
        for field in &mut fields.named {
            let wire = wire_name(field)?;
            if !fields_wanted.contains(&wire) {
                continue;
            }
            let mut skipped = false;
            for attr in field.attrs.iter_mut().filter(|a| a.path().is_ident("serde")) {
                let metas = serde_metas(attr)?;
                let before = metas.len();
                let kept: Punctuated<Meta, Token![,]> =
                    metas.into_iter().filter(|meta| !meta.path().is_ident("skip_serializing_if")).collect();
                if kept.len() != before {
                    skipped = true;
                    *attr = parse_quote!(#[serde(#kept)]);
                }
            }
            if !skipped {
                return Err(Error::new(format!(
                    "`{name}.{wire}` is not skipped when absent; it needs no `null`"
                )));
            }
            done.insert((name.clone(), wire));
        }
    }
    for (def, names) in wanted {
        for wire in names {
            if !done.contains(&(def.clone(), wire.clone())) {
                return Err(Error::new(format!(
                    "x-serialize-null names `{def}.{wire}`, which was not generated"
                )));
            }
        }
    }
    Ok(file.into_token_stream())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wanted_field_loses_its_skip_and_keeps_its_rename() {
        let types = quote::quote! {
            pub struct Diff {
                #[serde(rename = "oldText", skip_serializing_if = "::std::option::Option::is_none")]
                #[serde(default)]
                pub old_text: ::std::option::Option<::std::string::String>,
                #[serde(rename = "newText")]
                pub new_text: ::std::string::String,
            }
        };
        let wanted =
            wanted(&serde_json::json!({ "x-serialize-null": { "Diff": ["oldText"] } })).expect("wanted");
        let out = apply(types, &wanted).expect("applied").to_string();
        assert!(!out.contains("skip_serializing_if"), "{out}");
        assert!(out.contains("rename = \"oldText\""), "{out}");
    }

    #[test]
    fn a_wanted_field_that_was_not_generated_is_an_error() {
        let wanted =
            wanted(&serde_json::json!({ "x-serialize-null": { "Diff": ["oldText"] } })).expect("wanted");
        assert!(apply(quote::quote! { pub struct Other { pub x: u8 } }, &wanted).is_err());
    }
}
