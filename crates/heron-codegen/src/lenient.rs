//! Adds lenient reading to the struct fields typify generated, following the schema's
//! `x-deserialize-*` annotations, which typify ignores.
//!
//! An optional field marked default-on-error reads a malformed value (an unknown enum value,
//! an unknown union tag, a wrong type) as absent instead of rejecting the whole message.
//! Arrays marked skip-invalid-items drop malformed items. Required fields stay strict about
//! being present; default-on-null lets them be `null`. A patch field ("Set to null to
//! clear") becomes `Option<Option<T>>`, so clearing can be said and heard.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Fields, Item, LitStr, parse_quote};

use crate::Error;
use crate::normalize::Lenient;

const RT: &str = "crate::lenient";

/// What typify already says about a field.
struct FieldFacts {
    wire: String,
    has_default: bool,
}

fn facts(field: &syn::Field) -> Result<FieldFacts, Error> {
    let mut wire = field.ident.as_ref().map(ToString::to_string).unwrap_or_default();
    let mut has_default = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                let lit: LitStr = meta.value()?.parse()?;
                wire = lit.value();
            } else if meta.path.is_ident("default") {
                has_default = true;
                if meta.input.peek(syn::Token![=]) {
                    let _: syn::Expr = meta.value()?.parse()?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            }
            Ok(())
        })
        .map_err(|e| Error::new(format!("reading a serde attribute typify wrote: {e}")))?;
    }
    Ok(FieldFacts { wire, has_default })
}

fn is_option(ty: &syn::Type) -> bool {
    let text = ty.to_token_stream().to_string().replace(' ', "");
    text.starts_with("::std::option::Option<") || text.starts_with("Option<")
}

/// Rewrites `types` in place. Every annotated property must land on a field; a miss means
/// typify changed how it names fields, and is an error rather than a silent strictness.
pub fn apply(
    types: TokenStream,
    lenient: &BTreeMap<String, BTreeMap<String, Lenient>>,
) -> Result<TokenStream, Error> {
    let mut file: syn::File =
        syn::parse2(types).map_err(|e| Error::new(format!("typify output does not parse: {e}")))?;
    let mut applied = 0usize;
    for item in &mut file.items {
        let Item::Struct(item) = item else { continue };
        let Some(props) = lenient.get(&item.ident.to_string()) else { continue };
        let Fields::Named(fields) = &mut item.fields else { continue };
        for field in &mut fields.named {
            let facts = facts(field)?;
            let Some(rule) = props.get(&facts.wire) else { continue };
            let optional = facts.has_default || is_option(&field.ty);
            if *rule == Lenient::Patch {
                if !is_option(&field.ty) {
                    return Err(Error::new(format!(
                        "patch field `{}.{}` is not optional",
                        item.ident, facts.wire
                    )));
                }
                // Absent, null and a value each mean something: one more Option level.
                let inner = field.ty.clone();
                field.ty = parse_quote!(::std::option::Option<#inner>);
            }
            let function = match (rule, optional) {
                (Lenient::Patch, _) => "patch",
                (Lenient::SkipInvalidItems, true) => "lenient_items",
                (Lenient::SkipInvalidItems, false) => "skip_invalid_items",
                (Lenient::DefaultOnError, true) => "default_on_error",
                // A required field stays strict: the message is wrong without it.
                (Lenient::DefaultOnError, false) => continue,
                (Lenient::DefaultOnNull, _) => "null_as_default",
            };
            let path = format!("{RT}::{function}");
            field.attrs.push(parse_quote!(#[serde(deserialize_with = #path)]));
            if optional && !facts.has_default {
                field.attrs.push(parse_quote!(#[serde(default)]));
            }
            applied += 1;
        }
    }
    let expected: usize = lenient.values().map(BTreeMap::len).sum();
    if applied == 0 && expected > 0 {
        return Err(Error::new("no lenient annotation matched a generated field"));
    }
    Ok(file.into_token_stream())
}
