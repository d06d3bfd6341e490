//! The small hand-written runtime that the generated dispatch glue and peer handles call,
//! gathered in one path (`crate::runtime`) so the generator names one module. Each piece
//! lives in its own file: decoding ([`crate::decode`]), typed calls ([`crate::peer`]), the
//! method table's shapes ([`crate::table`]) and unbuffered tagged unions ([`crate::tagged`]).

pub use crate::decode::{decode_params, decode_result, encode_result, to_value};
pub use crate::peer::{AgentPeer, ClientPeer, Outgoing};
pub use crate::table::{Extension, Kind, MethodInfo, Side, Stability};
pub use crate::tagged::{TaggedUnion, VariantBody, deserialize_tagged};
pub use heron_rpc::{NotificationFuture, ResponseFuture, RpcError};
