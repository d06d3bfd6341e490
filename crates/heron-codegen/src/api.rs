//! Emits the method table, the `Agent` and `Client` handler traits, their dispatch glue,
//! the peer implementations that send over a connection, and `METHODS.md`.

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::Value;

use crate::Version;
use crate::emit::ident;
use crate::methods::{Kind, MethodSpec, Side, Stability};

/// Methods a side must serve whatever it advertises; the rest default to method-not-found.
const BASELINE: [&str; 6] = [
    "initialize",
    "session/new",
    "session/prompt",
    "session/cancel",
    "session/update",
    "session/request_permission",
];

const RT: &str = "crate::runtime";

fn rt() -> TokenStream {
    RT.parse().unwrap_or_default()
}

/// The wire names the vendor schema marks as implemented by Heron (`x-implemented`).
pub fn implemented(vendor: &Value) -> Vec<String> {
    vendor
        .get("x-implemented")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn side_tokens(side: Side) -> TokenStream {
    let rt = rt();
    match side {
        Side::Agent => quote! { #rt::Side::Agent },
        Side::Client => quote! { #rt::Side::Client },
        Side::Protocol => quote! { #rt::Side::Protocol },
    }
}

/// Everything except the types.
pub fn emit(
    version: &Version,
    table: &[MethodSpec],
    implemented: &[String],
    type_names: &[String],
) -> TokenStream {
    let rt = rt();
    let variants: Vec<_> = table.iter().map(|m| ident(&m.variant())).collect();
    let count = table.len();
    let rows = table.iter().map(|m| {
        let wire = &m.wire;
        let aliases = &m.aliases;
        let side = side_tokens(m.side);
        let kind = match m.kind {
            Kind::Request => quote! { #rt::Kind::Request },
            Kind::Notification => quote! { #rt::Kind::Notification },
        };
        let params = &m.params;
        let result = match &m.result {
            Some(r) => quote! { Some(#r) },
            None => quote! { None },
        };
        let stability = match m.stability {
            Stability::Stable => quote! { #rt::Stability::Stable },
            Stability::Unstable => quote! { #rt::Stability::Unstable },
            Stability::Vendor => quote! { #rt::Stability::Vendor },
        };
        let baseline = BASELINE.contains(&m.wire.as_str());
        let implemented = implemented.contains(&m.wire);
        quote! {
            #rt::MethodInfo {
                wire: #wire,
                aliases: &[#(#aliases),*],
                side: #side,
                kind: #kind,
                params: #params,
                result: #result,
                stability: #stability,
                baseline: #baseline,
                implemented: #implemented,
            }
        }
    });
    let lookup = table.iter().map(|m| {
        let variant = ident(&m.variant());
        let wire = &m.wire;
        let aliases = &m.aliases;
        quote! { #wire #(| #aliases)* => Some(Method::#variant), }
    });

    let agent_trait = handler_trait(table, Side::Agent);
    let client_trait = handler_trait(table, Side::Client);
    let agent_dispatch = dispatch(table, Side::Agent);
    let client_dispatch = dispatch(table, Side::Client);
    let peers: TokenStream = version.peers.parse().unwrap_or_default();
    let agent_peer = peer(&peers, table, Side::Agent);
    let client_peer = peer(&peers, table, Side::Client);
    let canonical = canonical(table, type_names);

    quote! {
        /// Every method in the table, one variant each.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Method { #(#variants,)* }

        /// The method table, indexed by `Method as usize`.
        pub static METHODS: [#rt::MethodInfo; #count] = [#(#rows,)*];

        impl Method {
            /// Every method, in table order.
            pub const ALL: [Method; #count] = [#(Method::#variants,)*];

            /// Looks a wire name or legacy alias up.
            pub fn from_wire(name: &str) -> Option<Method> {
                match name { #(#lookup)* _ => None }
            }

            /// This method's row.
            pub fn info(self) -> &'static #rt::MethodInfo {
                &METHODS[self as usize]
            }

            /// The wire name.
            pub fn wire(self) -> &'static str {
                self.info().wire
            }
        }

        #agent_trait
        #client_trait
        #agent_dispatch
        #client_dispatch
        #agent_peer
        #client_peer
        #canonical
    }
}

fn handled_by(table: &[MethodSpec], side: Side) -> impl Iterator<Item = &MethodSpec> {
    table.iter().filter(move |m| m.side == side)
}

fn method_doc(m: &MethodSpec) -> TokenStream {
    let summary = format!(" {}", m.summary);
    let wire = format!(
        " Wire: `{}`, {} {}.",
        m.wire,
        match m.stability {
            Stability::Stable => "stable",
            Stability::Unstable => "unstable",
            Stability::Vendor => "Heron vendor",
        },
        match m.kind {
            Kind::Request => "request",
            Kind::Notification => "notification",
        }
    );
    quote! { #[doc = #summary] #[doc = ""] #[doc = #wire] }
}

fn handler_trait(table: &[MethodSpec], side: Side) -> TokenStream {
    let rt = rt();
    let (name, doc) = match side {
        Side::Agent => ("Agent", " What an agent serves: the requests and notifications an editor sends."),
        _ => ("Client", " What an editor serves: the requests and notifications an agent sends."),
    };
    let name = ident(name);
    let fns = handled_by(table, side).map(|m| {
        let f = ident(&m.fn_name());
        let params = ident(&m.params);
        let wire = &m.wire;
        let doc = method_doc(m);
        // A request's handler returns its result, or the result and what follows it.
        let ret = match (&m.result, m.kind) {
            (Some(r), Kind::Request) => {
                let r = ident(r);
                quote! { Result<impl Into<#rt::Answered<#r>> + Send + use<Self>, #rt::RpcError> }
            }
            (Some(r), Kind::Notification) => {
                let r = ident(r);
                quote! { Result<#r, #rt::RpcError> }
            }
            (None, _) => quote! { Result<(), #rt::RpcError> },
        };
        let answered = m.result.as_ref().map_or_else(
            || quote! { () },
            |r| {
                let r = ident(r);
                quote! { #r }
            },
        );
        let sig = quote! {
            fn #f(&self, params: #params) -> impl ::std::future::Future<Output = #ret> + Send + 'static
        };
        if BASELINE.contains(&wire.as_str()) {
            quote! { #doc #sig; }
        } else {
            let body = match m.kind {
                Kind::Request => quote! {
                    ::std::future::ready(Err::<#answered, _>(#rt::RpcError::method_not_found(#wire)))
                },
                Kind::Notification => quote! { ::std::future::ready(Ok(())) },
            };
            quote! {
                #doc
                #[allow(unused_variables)]
                #sig { #body }
            }
        }
    });
    quote! {
        #[doc = #doc]
        ///
        /// Each handler runs its synchronous part when called (on the reader, in arrival
        /// order) and returns a `'static` future for the rest.
        pub trait #name: Send + Sync + 'static { #(#fns)* }
    }
}

fn dispatch(table: &[MethodSpec], side: Side) -> TokenStream {
    let rt = rt();
    let (trait_name, req_fn, note_fn) = match side {
        Side::Agent => ("Agent", "dispatch_agent_request", "dispatch_agent_notification"),
        _ => ("Client", "dispatch_client_request", "dispatch_client_notification"),
    };
    let trait_name = ident(trait_name);
    let req_fn = ident(req_fn);
    let note_fn = ident(note_fn);
    let requests = handled_by(table, side).filter(|m| m.kind == Kind::Request).map(|m| {
        let variant = ident(&m.variant());
        let f = ident(&m.fn_name());
        let params = ident(&m.params);
        let answered = m.result.as_ref().map_or_else(
            || quote! { () },
            |r| {
                let r = ident(r);
                quote! { #r }
            },
        );
        quote! {
            Method::#variant => {
                let params: #params = #rt::decode_params(params)?;
                let running = handler.#f(params);
                Ok(Box::pin(async move { #rt::encode_answer::<#answered>(running.await.map(Into::into)) }))
            }
        }
    });
    let notifications = handled_by(table, side).filter(|m| m.kind == Kind::Notification).map(|m| {
        let variant = ident(&m.variant());
        let f = ident(&m.fn_name());
        let params = ident(&m.params);
        let wire = &m.wire;
        quote! {
            Method::#variant => {
                let params: #params = #rt::decode_params(params)?;
                let running = handler.#f(params);
                Ok(Box::pin(async move {
                    if let Err(error) = running.await {
                        ::tracing::warn!(method = #wire, %error, "notification handler failed");
                    }
                }))
            }
        }
    });
    let req_doc = format!(" Decodes a request for `{trait_name}` and starts its handler.");
    let note_doc = format!(" Decodes a notification for `{trait_name}` and starts its handler.");
    quote! {
        #[doc = #req_doc]
        ///
        /// Methods the other side handles, and notifications, are method-not-found.
        pub fn #req_fn<H: #trait_name + ?Sized>(
            handler: &H,
            method: Method,
            params: Option<&::serde_json::value::RawValue>,
        ) -> Result<#rt::ResponseFuture, #rt::RpcError> {
            match method {
                #(#requests)*
                _ => Err(#rt::RpcError::method_not_found(method.wire())),
            }
        }

        #[doc = #note_doc]
        pub fn #note_fn<H: #trait_name + ?Sized>(
            handler: &H,
            method: Method,
            params: Option<&::serde_json::value::RawValue>,
        ) -> Result<#rt::NotificationFuture, #rt::RpcError> {
            match method {
                #(#notifications)*
                _ => Err(#rt::RpcError::method_not_found(method.wire())),
            }
        }
    }
}

/// The handler trait of `side` implemented for its peer handle in `peers` by sending.
fn peer(peers: &TokenStream, table: &[MethodSpec], side: Side) -> TokenStream {
    let rt = rt();
    let (trait_name, peer) = match side {
        Side::Agent => ("Agent", "AgentPeer"),
        _ => ("Client", "ClientPeer"),
    };
    let trait_name = ident(trait_name);
    let peer = ident(peer);
    let fns = handled_by(table, side).map(|m| {
        let f = ident(&m.fn_name());
        let params = ident(&m.params);
        let wire = &m.wire;
        match &m.result {
            Some(r) => {
                let r = ident(r);
                // A call resolves to the peer's result itself: refined on purpose.
                quote! {
                    #[allow(refining_impl_trait)]
                    fn #f(&self, params: #params) -> impl ::std::future::Future<Output = Result<#r, #rt::RpcError>> + Send + 'static {
                        #rt::Outgoing::call(&self.0, #wire, params)
                    }
                }
            }
            None => quote! {
                fn #f(&self, params: #params) -> impl ::std::future::Future<Output = Result<(), #rt::RpcError>> + Send + 'static {
                    #rt::Outgoing::notify(&self.0, #wire, params)
                }
            },
        }
    });
    let doc = format!(" Calls the remote `{trait_name}` over a connection.");
    quote! {
        #[doc = #doc]
        impl<O: #rt::Outgoing> #trait_name for #peers::#peer<O> { #(#fns)* }
    }
}

fn canonical(table: &[MethodSpec], type_names: &[String]) -> TokenStream {
    let rt = rt();
    let params = table.iter().map(|m| {
        let variant = ident(&m.variant());
        let ty = ident(&m.params);
        quote! { Method::#variant => #rt::to_value(&#rt::decode_params::<#ty>(Some(raw))?), }
    });
    let results = table.iter().filter_map(|m| {
        let variant = ident(&m.variant());
        let ty = ident(m.result.as_ref()?);
        Some(quote! { Method::#variant => #rt::to_value(&#rt::decode_params::<#ty>(Some(raw))?), })
    });
    let by_name = type_names.iter().map(|name| {
        let ty = ident(name);
        quote! { #name => Some(#rt::decode_params::<#ty>(Some(raw)).and_then(|v| #rt::to_value(&v))), }
    });
    quote! {
        /// Decodes `raw` as the definition called `name` and encodes it again; `None` when
        /// no definition has that name.
        pub fn canonical_def(name: &str, raw: &::serde_json::value::RawValue) -> Option<Result<::serde_json::Value, #rt::RpcError>> {
            match name { #(#by_name)* _ => None }
        }

        /// Decodes `raw` as the params of `method` and encodes it again: what Heron makes of
        /// a message. Used by round-trip tests and the conformance runner.
        pub fn canonical_params(method: Method, raw: &::serde_json::value::RawValue) -> Result<::serde_json::Value, #rt::RpcError> {
            match method { #(#params)* }
        }

        /// Decodes `raw` as the result of `method` and encodes it again. Notifications have
        /// no result and are method-not-found.
        pub fn canonical_result(method: Method, raw: &::serde_json::value::RawValue) -> Result<::serde_json::Value, #rt::RpcError> {
            #[allow(unreachable_patterns)]
            match method {
                #(#results)*
                _ => Err(#rt::RpcError::method_not_found(method.wire())),
            }
        }
    }
}

/// A version's part of `METHODS.md`: one row per method, then the declined ones. The first
/// version's opens the document; a later one is a section under its own heading.
pub fn methods_md(
    version: &Version,
    table: &[MethodSpec],
    implemented: &[String],
    declined: &[(String, String)],
) -> String {
    let (mut out, sub) = match version.methods_section {
        None => (
            String::from(
                "# ACP methods\n\n\
                 Generated by `heron-codegen` from `schema/`; do not edit. \"Handled by\" is the side \
                 that receives the message. \"Heron\" says whether Heron serves (agent side) or \
                 calls (client side) the method.\n\n",
            ),
            "##",
        ),
        Some(title) => (
            format!(
                "\n## {title}\n\nThe methods of `{}`, generated from `{}`, `{}` and `{}`; the columns \
                 mean what they mean above.\n\n",
                version.module, version.input_files[0], version.input_files[1], version.input_files[2]
            ),
            "###",
        ),
    };
    out.push_str(
        "| Method | Kind | Handled by | Params | Result | Stability | Legacy aliases | Heron |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for m in table {
        let row = format!(
            "| `{}` | {} | {} | `{}` | {} | {} | {} | {} |\n",
            m.wire,
            match m.kind {
                Kind::Request => "request",
                Kind::Notification => "notification",
            },
            match m.side {
                Side::Agent => "agent",
                Side::Client => "client",
                Side::Protocol => "either",
            },
            m.params,
            m.result.as_ref().map(|r| format!("`{r}`")).unwrap_or_else(|| "-".into()),
            match m.stability {
                Stability::Stable => "stable",
                Stability::Unstable => "unstable",
                Stability::Vendor => "vendor",
            },
            if m.aliases.is_empty() {
                "-".to_owned()
            } else {
                m.aliases.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
            },
            if implemented.contains(&m.wire) {
                "yes"
            } else if declined.iter().any(|(wire, _)| *wire == m.wire) {
                "declined (below)"
            } else {
                "not yet"
            },
        );
        out.push_str(&row);
    }
    if !declined.is_empty() {
        out.push_str(&format!(
            "\n{sub} Declined\n\nMethods Heron does not serve, and why (`x-declined` in the vendor schema).\n\n"
        ));
        for (wire, why) in declined {
            out.push_str(&format!("- `{wire}`: {why}\n"));
        }
    }
    out
}

/// The methods the vendor schema says Heron declines to serve, with the reason
/// (`x-declined`), in the schema's order.
pub fn declined(vendor: &Value) -> Vec<(String, String)> {
    vendor
        .get("x-declined")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter().filter_map(|(wire, why)| Some((wire.clone(), why.as_str()?.to_owned()))).collect()
        })
        .unwrap_or_default()
}
