//! Heron: a coding agent that editors drive over the Agent Client Protocol (ACP) v1.

pub mod acp;
pub mod cli;
pub mod protocol;
pub mod rpc;
