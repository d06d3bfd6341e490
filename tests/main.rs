//! Integration tests of the `heron` binary's crate: the ACP adapter over in-memory pipes,
//! the real binary over stdio, the conformance suite and recording. One test binary, one
//! module per concern, one shared support module.

mod support;

mod acp_approvals;
mod acp_bounds;
mod acp_compaction;
mod acp_context;
mod acp_durability;
mod acp_engine;
mod acp_extensions;
mod acp_goal;
mod acp_inbox;
mod acp_inbox_contract;
mod acp_mcp;
mod acp_mcp_http;
mod acp_memory;
mod acp_notices;
mod acp_outcome;
mod acp_process;
mod acp_prompt;
mod acp_queue;
mod acp_reload;
mod acp_replay;
mod acp_session_lock;
mod acp_sessions;
mod acp_settings;
mod acp_signals;
mod acp_startup;
mod acp_status;
mod acp_steer;
mod acp_store;
mod acp_titles;
mod acp_tools;
mod acp_trust;
mod acp_v2;
mod acpx;
mod conformance;
mod conformance_acp;
mod conformance_untrusted;
mod doctor;
mod editors;
mod hostile_input;
mod layers;
mod mcp_everything;
mod mcp_real;
mod providers;
mod providers_live;
mod record;
mod registry;
mod run_client;
mod run_lifecycle;
mod sandbox_walls;
mod seed_contract;
mod skills;
mod zed;
