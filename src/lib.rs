//! Heron: a coding agent that editors drive over the Agent Client Protocol (ACP) v1.
//!
//! This crate is the binary's: the ACP adapter (`acp`, the only place that converts between
//! protocol and core types), the command line (`cli`) and the conformance suite
//! (`conformance`). The layers below are crates of their own: `heron-rpc` (JSON-RPC),
//! `heron-protocol` (generated ACP types), `heron-core` (the agent) and `heron-store`.

pub mod acp;
pub mod cli;
pub mod conformance;
