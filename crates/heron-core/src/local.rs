//! Local file and process I/O under Heron's confinement rules, for any client of the core
//! that must keep them outside a session's tools (`heron run` answering an agent's `fs/*`
//! and `terminal/*` requests).
//!
//! Files: regular files only, opened one component at a time without following a symlink,
//! read within a cap, written atomically; paths must already be resolved and checked
//! against the roots (`tools::roots`). Processes: each output stream redacted as it
//! arrives into a sink that bounds it, and signals named. Start a command in the OS sandbox
//! with `sandbox::confine_kept`, whose keeper ends whatever leaves its process group.

pub use crate::tools::fsio::{FileError, Replaced, read_capped, write_atomic};
pub use crate::tools::streams::{OutputSink, collect_redacted, signal_name};
