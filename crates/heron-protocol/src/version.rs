//! What the shared runtime needs of one generated protocol version (ACP v1 at the crate
//! root, ACP v2 in [`crate::v2`]): its method table and schema as [`ProtocolMethod`].
//! Serving and validation are written once, generic over it; `bind` implements it for each
//! generated version.

use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;

use serde_json::value::RawValue;

use crate::schema::EmbeddedSchema;
use crate::table::MethodInfo;

/// One version's generated `Method`, as [`crate::serve`] and [`crate::validate`] see it.
/// Implemented by [`protocol_version!`](crate::bind::protocol_version) and nowhere else.
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
