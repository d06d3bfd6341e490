//! Emits the unions taken out by normalization: internally tagged enums with newtype
//! variants named after their tags, and open string enums.
//!
//! A closed tagged union (no untagged fallback, no `Other`) derives only `Serialize`; its
//! `Deserialize` goes through `runtime::deserialize_tagged`, which reads the payload straight
//! from the object when the tag comes first, and otherwise falls back to serde's derive,
//! kept as a twin enum in the `buffered` module. Unions with fallbacks keep serde's derive:
//! a known tag with a bad payload may still be one of their fallbacks, so they must buffer.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::normalize::{TaggedVariant, UnionSpec};
use crate::pascal;

/// An identifier from generated text.
pub fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn docs(text: &str) -> TokenStream {
    let lines = text.lines().map(|l| format!(" {l}"));
    quote! { #( #[doc = #lines] )* }
}

const RT: &str = "crate::runtime";

/// The name of an open union's catch-all variant: `Other`, or `Unknown` when a known value
/// is itself called `other` (v2's `ToolKind`), so the two never collide.
fn catch_all<'a>(known: impl IntoIterator<Item = &'a str>) -> Ident {
    let taken = known.into_iter().any(|value| pascal(value) == "Other");
    ident(if taken { "Unknown" } else { "Other" })
}

/// All unions, in definition order, then the `buffered` module with serde's derived reading
/// of the closed tagged unions.
pub fn unions(specs: &[UnionSpec]) -> TokenStream {
    let (items, twins): (Vec<TokenStream>, Vec<Option<TokenStream>>) = specs.iter().map(union).unzip();
    let twins: Vec<TokenStream> = twins.into_iter().flatten().collect();
    let buffered = (!twins.is_empty()).then(|| {
        quote! {
            /// Serde's derived reading of each closed tagged union: the reference behaviour,
            /// used when the tag is not the first member and to report decode errors.
            #[doc(hidden)]
            pub mod buffered { #(#twins)* }
        }
    });
    quote! { #(#items)* #buffered }
}

/// A union's items, and for a closed tagged union its twin in the `buffered` module.
fn union(spec: &UnionSpec) -> (TokenStream, Option<TokenStream>) {
    match spec {
        UnionSpec::Tagged { name, doc, tag, variants, fallbacks, open } if fallbacks.is_empty() && !*open => {
            closed_tagged(name, doc, tag, variants)
        }
        UnionSpec::Tagged { name, doc, tag, variants, fallbacks, open } => {
            let name = ident(name);
            let doc = docs(doc);
            let tagged = variants.iter().map(|v| {
                let variant = ident(&pascal(&v.value));
                let value = &v.value;
                let doc = docs(&v.doc);
                match &v.payload {
                    Some(payload) => {
                        let payload = ident(payload);
                        quote! { #doc #[serde(rename = #value)] #variant(#payload), }
                    }
                    None => quote! { #doc #[serde(rename = #value)] #variant, },
                }
            });
            let untagged = fallbacks.iter().map(|f| {
                let variant = ident(&f.variant);
                let payload = ident(&f.payload);
                let doc = docs(&f.doc);
                quote! { #doc #[serde(untagged)] #variant(#payload), }
            });
            let other = open.then(|| {
                let text = format!(" A `{tag}` this version of the protocol does not know, kept as sent.");
                let other = catch_all(variants.iter().map(|v| v.value.as_str()));
                quote! {
                    #[doc = #text]
                    #[serde(untagged)]
                    #other(::serde_json::Map<::std::string::String, ::serde_json::Value>),
                }
            });
            let item = quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
                #[serde(tag = #tag)]
                pub enum #name { #(#tagged)* #(#untagged)* #other }
            };
            (item, None)
        }
        UnionSpec::OpenString { name, doc, values } => {
            let name = ident(name);
            let doc = docs(doc);
            let variants: Vec<Ident> = values.iter().map(|(v, _)| ident(&pascal(v))).collect();
            let wire: Vec<&String> = values.iter().map(|(v, _)| v).collect();
            let value_docs = values.iter().map(|(_, d)| docs(d));
            let other = catch_all(values.iter().map(|(v, _)| v.as_str()));
            let item = quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
                pub enum #name {
                    #( #value_docs #[serde(rename = #wire)] #variants, )*
                    /// A value this version of the protocol does not know, kept as sent.
                    #[serde(untagged)]
                    #other(::std::string::String),
                }

                impl #name {
                    /// The wire value.
                    pub fn as_str(&self) -> &str {
                        match self {
                            #( Self::#variants => #wire, )*
                            Self::#other(value) => value,
                        }
                    }
                }
            };
            (item, None)
        }
    }
}

/// A closed tagged union: the public enum (derived `Serialize`, hand-routed `Deserialize`),
/// and its twin with serde's derived `Deserialize` plus the tag identifier.
fn closed_tagged(
    name: &str,
    doc: &str,
    tag: &str,
    variants: &[TaggedVariant],
) -> (TokenStream, Option<TokenStream>) {
    let rt: TokenStream = RT.parse().unwrap_or_default();
    let expecting = format!("internally tagged enum {name}");
    let tag_name = ident(&format!("{name}Tag"));
    let name = ident(name);
    let doc = docs(doc);
    let idents: Vec<Ident> = variants.iter().map(|v| ident(&pascal(&v.value))).collect();
    let wire: Vec<&String> = variants.iter().map(|v| &v.value).collect();

    let public = variants.iter().zip(&idents).map(|(v, variant)| {
        let value = &v.value;
        let doc = docs(&v.doc);
        match &v.payload {
            Some(payload) => {
                let payload = ident(payload);
                quote! { #doc #[serde(rename = #value)] #variant(#payload), }
            }
            None => quote! { #doc #[serde(rename = #value)] #variant, },
        }
    });
    let twin = variants.iter().zip(&idents).map(|(v, variant)| {
        let value = &v.value;
        match &v.payload {
            Some(payload) => {
                let payload = ident(payload);
                quote! { #[serde(rename = #value)] #variant(super::#payload), }
            }
            None => quote! { #[serde(rename = #value)] #variant, },
        }
    });
    let read = variants.iter().zip(&idents).map(|(v, variant)| match &v.payload {
        Some(_) => quote! { buffered::#tag_name::#variant => body.payload().map(Self::#variant), },
        None => quote! { buffered::#tag_name::#variant => body.unit().map(|()| Self::#variant), },
    });
    let convert = variants.iter().zip(&idents).map(|(v, variant)| match &v.payload {
        Some(_) => quote! { buffered::#name::#variant(payload) => Self::#variant(payload), },
        None => quote! { buffered::#name::#variant => Self::#variant, },
    });

    let item = quote! {
        #doc
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize)]
        #[serde(tag = #tag)]
        pub enum #name { #(#public)* }

        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                #rt::deserialize_tagged(deserializer)
            }
        }

        impl #rt::TaggedUnion for #name {
            const TAG: &'static str = #tag;
            const EXPECTING: &'static str = #expecting;
            type Tag = buffered::#tag_name;
            type Buffered = buffered::#name;

            fn read_variant<'de, M: ::serde::de::MapAccess<'de>>(
                tag: Self::Tag,
                body: #rt::VariantBody<M>,
            ) -> ::std::result::Result<Self, M::Error> {
                match tag { #(#read)* }
            }
        }

        impl ::std::convert::From<buffered::#name> for #name {
            fn from(buffered: buffered::#name) -> Self {
                match buffered { #(#convert)* }
            }
        }
    };
    // The same name as the public enum, so serde's messages name the same type.
    let twin = quote! {
        #[derive(::serde::Deserialize)]
        #[serde(tag = #tag)]
        pub enum #name { #(#twin)* }

        #[derive(::serde::Deserialize)]
        #[serde(variant_identifier)]
        pub enum #tag_name { #( #[serde(rename = #wire)] #idents, )* }
    };
    (item, Some(twin))
}
