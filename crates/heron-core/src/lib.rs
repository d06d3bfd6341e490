//! Heron's agent, in its own terms: sessions (manager, actors, the turn loop, settings, goal,
//! inbox), tools with their confinement, the OS sandbox of the processes they start, model
//! providers, MCP clients, and Heron's home (config and keys). Persistence is `heron-store`'s.
//!
//! It knows no protocol: no ACP type, no JSON-RPC. The `heron` binary's adapter is the only
//! place that converts between the protocol and the types here.

#![deny(missing_docs)]
// A `pub` item is the crate's API or it is narrowed to where it is used.
#![warn(unreachable_pub)]

pub mod config;
pub mod extensions;
pub mod llm;
pub mod local;
pub mod paths;
pub mod sandbox;
pub mod secret;
pub mod session;
pub mod tools;
pub mod types;
pub mod whole_file;

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable, `'static` future: what trait objects of the core return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
