//! Emits the unions taken out by normalization: internally tagged enums with newtype
//! variants named after their tags, and open string enums.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::normalize::UnionSpec;
use crate::pascal;

/// An identifier from generated text.
pub fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn docs(text: &str) -> TokenStream {
    let lines = text.lines().map(|l| format!(" {l}"));
    quote! { #( #[doc = #lines] )* }
}

/// All unions, in definition order.
pub fn unions(specs: &[UnionSpec]) -> TokenStream {
    specs.iter().map(union).collect()
}

fn union(spec: &UnionSpec) -> TokenStream {
    match spec {
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
                quote! {
                    #[doc = #text]
                    #[serde(untagged)]
                    Other(::serde_json::Map<::std::string::String, ::serde_json::Value>),
                }
            });
            quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
                #[serde(tag = #tag)]
                pub enum #name { #(#tagged)* #(#untagged)* #other }
            }
        }
        UnionSpec::OpenString { name, doc, values } => {
            let name = ident(name);
            let doc = docs(doc);
            let variants: Vec<Ident> = values.iter().map(|(v, _)| ident(&pascal(v))).collect();
            let wire: Vec<&String> = values.iter().map(|(v, _)| v).collect();
            let value_docs = values.iter().map(|(_, d)| docs(d));
            quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
                pub enum #name {
                    #( #value_docs #[serde(rename = #wire)] #variants, )*
                    /// A value this version of the protocol does not know, kept as sent.
                    #[serde(untagged)]
                    Other(::std::string::String),
                }

                impl #name {
                    /// The wire value.
                    pub fn as_str(&self) -> &str {
                        match self {
                            #( Self::#variants => #wire, )*
                            Self::Other(value) => value,
                        }
                    }
                }
            }
        }
    }
}
