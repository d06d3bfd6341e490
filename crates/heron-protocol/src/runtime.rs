//! The small hand-written runtime that the generated dispatch glue and peer handles of every
//! protocol version call, gathered in one path (`crate::runtime`) so the generator names one
//! module. Each piece lives in its own file: decoding ([`crate::decode`]), typed calls
//! ([`crate::peer`]), the method table's shapes ([`crate::table`]), unbuffered tagged
//! unions ([`crate::tagged`]) and what serving needs of a version ([`crate::version`]).

pub use crate::decode::{Answered, decode_params, decode_result, encode_answer, encode_result, to_value};
pub use crate::peer::{AgentPeer, ClientPeer, Outgoing, PendingReply};
pub use crate::table::{Extension, Kind, MethodInfo, Side, Stability};
pub use crate::tagged::{TaggedUnion, VariantBody, deserialize_tagged};
pub use crate::version::ProtocolMethod;
pub use heron_rpc::{NotificationFuture, ResponseFuture, RpcError, Then};
