//! Heron: a coding agent that editors drive over the Agent Client Protocol (ACP) v1.
//!
//! This crate is the binary's: the ACP adapter (`acp`, the only place that converts between
//! protocol and core types) and the command line (`cli`). The layers below are crates of
//! their own: `heron-rpc` (JSON-RPC), `heron-protocol` (generated ACP types), `heron-core`
//! (the agent), `heron-store`, and the two other products: `heron-client` (the headless
//! client behind `heron run`, driven from `cli::run`) and `heron-conformance` (the
//! conformance kit, re-exported as `conformance` for the command line and the tests).

pub mod acp;
pub mod cli;
pub use heron_conformance as conformance;
