//! Heron: a coding agent that editors drive over the Agent Client Protocol (ACP) v1.

pub mod protocol;
