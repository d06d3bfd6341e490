//! What the shared runtime needs of one generated protocol version (ACP v1 at the crate
//! root, ACP v2 in [`crate::v2`]): its method table and schema as [`ProtocolMethod`], and
//! [`protocol_version!`], which ties the version's generated dispatch functions to
//! [`crate::serve`]'s sides. Serving and validation are written once, generic over it.

use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;

use serde_json::value::RawValue;

use crate::table::MethodInfo;
use crate::validate::EmbeddedSchema;

/// One version's generated `Method`, as [`crate::serve`] and [`crate::validate`] see it.
/// Implemented by [`protocol_version!`] and nowhere else.
pub trait ProtocolMethod: Copy + Eq + Hash + Debug + Send + Sync + 'static {
    /// Looks a wire name or legacy alias up.
    fn from_wire(name: &str) -> Option<Self>;

    /// This method's row of the version's table.
    fn info(self) -> &'static MethodInfo;

    /// The params as this version's schema expects them, for params older clients still
    /// send in an earlier shape; borrowed when nothing changes.
    fn upgrade(self, params: Option<&RawValue>) -> Option<Cow<'_, RawValue>>;

    /// The merged schema the version's types were generated from, compiled on first use.
    fn schema() -> &'static EmbeddedSchema;
}

/// The params as sent: the `upgrade` of a version with no legacy shapes to rewrite.
pub(crate) fn as_sent<M>(_method: M, params: Option<&RawValue>) -> Option<Cow<'_, RawValue>> {
    params.map(Cow::Borrowed)
}

/// Implements [`ProtocolMethod`] for a generated module's `Method`, and
/// [`crate::serve::Side`] for [`crate::serve::AgentSide`] and [`crate::serve::ClientSide`]
/// over its `Agent` and `Client` traits and their generated dispatch functions.
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

            static SCHEMA: $crate::validate::EmbeddedSchema = $crate::validate::EmbeddedSchema::new($schema);

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

                fn schema() -> &'static $crate::validate::EmbeddedSchema {
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
