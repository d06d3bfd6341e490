//! Integration tests of the JSON-RPC layer over in-memory pipes: one test binary, one module
//! per concern, one shared support module (the connection under test).

mod support;

mod connection_answers;
mod connection_cancel;
mod connection_outgoing;
mod connection_shutdown;
mod envelope;
mod framing;
