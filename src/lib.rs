//! Heron: a coding agent that editors drive over the Agent Client Protocol (ACP) v1.

pub mod acp;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod llm;
pub mod protocol;
pub mod rpc;
pub mod secret;
pub mod session;
pub mod store;
pub mod tools;
