//! [`protocol_version!`]: binds one generated protocol version to the shared runtime, its
//! `Method` to [`ProtocolMethod`](crate::version::ProtocolMethod) and its `Agent`/`Client`
//! dispatch functions to [`crate::serve`]'s sides. It names the serving, validation and
//! version modules, so it sits above all three, used only where a version is generated
//! (the crate root and `v2`). Invariant: each version is bound by exactly one line.

/// Implements [`ProtocolMethod`](crate::version::ProtocolMethod) for a generated module's
/// `Method`, and [`crate::serve::Side`] for [`crate::serve::AgentSide`] and
/// [`crate::serve::ClientSide`] over its `Agent` and `Client` traits and their generated
/// dispatch functions.
///
/// `schema` is the version's merged `schema.json`; `upgrade` rewrites older clients' params
/// of the methods the agent side serves before they are validated and decoded.
macro_rules! protocol_version {
    ($($module:ident)::+, schema: $schema:expr, upgrade: $upgrade:path $(,)?) => {
        const _: () = {
            use ::serde_json::value::RawValue;
            use $crate::serve::{AgentSide, ClientSide, Side};
            use $crate::runtime::{NotificationFuture, ResponseFuture, RpcError};
            use $($module)::+ as generated;

            static SCHEMA: $crate::schema::EmbeddedSchema = $crate::schema::EmbeddedSchema::new($schema);

            impl $crate::version::ProtocolMethod for generated::Method {
                fn from_wire(name: &str) -> Option<Self> {
                    generated::Method::from_wire(name)
                }

                fn info(self) -> &'static $crate::runtime::MethodInfo {
                    generated::Method::info(self)
                }

                fn upgrade(self, params: Option<&RawValue>) -> Option<::std::borrow::Cow<'_, RawValue>> {
                    $upgrade(self, params)
                }

                fn schema() -> &'static $crate::schema::EmbeddedSchema {
                    &SCHEMA
                }
            }

            impl<A: generated::Agent> Side<generated::Method> for AgentSide<A> {
                fn request(
                    &self,
                    method: generated::Method,
                    params: Option<&RawValue>,
                ) -> Result<ResponseFuture, RpcError> {
                    // Older clients' params are rewritten before they are decoded.
                    let params = $crate::version::ProtocolMethod::upgrade(method, params);
                    generated::dispatch_agent_request(&self.0, method, params.as_deref())
                }

                fn notification(
                    &self,
                    method: generated::Method,
                    params: Option<&RawValue>,
                ) -> Result<NotificationFuture, RpcError> {
                    generated::dispatch_agent_notification(&self.0, method, params)
                }
            }

            impl<C: generated::Client> Side<generated::Method> for ClientSide<C> {
                fn request(
                    &self,
                    method: generated::Method,
                    params: Option<&RawValue>,
                ) -> Result<ResponseFuture, RpcError> {
                    generated::dispatch_client_request(&self.0, method, params)
                }

                fn notification(
                    &self,
                    method: generated::Method,
                    params: Option<&RawValue>,
                ) -> Result<NotificationFuture, RpcError> {
                    generated::dispatch_client_notification(&self.0, method, params)
                }
            }
        };
    };
}

pub(crate) use protocol_version;
