//! The bounds a turn puts on one model reply: the bytes it may stream, the size of one tool
//! call's arguments, how many of its calls run and what their results may hold. Below the
//! turn and the reply's readers (`response`, `reply_calls`), which all apply them; and how a
//! long reply is held on its way to the store.

/// Bounds on what one model response may send, and what its tool calls may cost
/// ([`super::reply_calls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::session) struct Limits {
    /// The most bytes of text, thought and tool-call arguments one response may hold; past
    /// it the turn ends `max_tokens`, with what streamed kept exactly as the editor saw it.
    pub(crate) max_reply_bytes: usize,
    /// The most bytes a tool call's arguments may take; a larger call fails without running.
    pub(crate) max_tool_arguments: usize,
    /// The most tokens one reply may take (`--max-tokens`), asked of the provider.
    pub(crate) max_reply_tokens: Option<u32>,
    /// The most tool calls of one response that run; the next fails and ends the response.
    pub(crate) max_tool_calls: usize,
    /// The most bytes the results of one response's tool calls hold together.
    pub(crate) max_tool_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_reply_bytes: 8 * 1024 * 1024,
            max_tool_arguments: crate::llm::MAX_TOOL_ARGUMENT_BYTES,
            max_reply_tokens: None,
            max_tool_calls: crate::config::DEFAULT_MAX_TOOL_CALLS,
            max_tool_result_bytes: crate::config::DEFAULT_MAX_TOOL_RESULT_BYTES,
        }
    }
}

/// The most text one stored message event holds: a long message is kept and stored as
/// consecutive pieces of this size under one message id.
pub(in crate::session) const PIECE_BYTES: usize = 1 << 20;

/// The encoded bytes of finished messages and thoughts that may wait for the next event
/// before they are stored on their own: two of a long reply's pieces.
pub(in crate::session) const UNSTORED_BYTES: usize = 2 * PIECE_BYTES;
