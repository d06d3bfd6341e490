//! Integration tests of the JSON-RPC layer over in-memory pipes: one test binary, one module
//! per concern.

mod connection;
mod envelope;
mod framing;
