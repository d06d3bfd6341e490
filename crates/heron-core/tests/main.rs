//! Integration tests of the agent core, driven through its own API (no protocol, no pipes):
//! one test binary, one module per concern, one shared support module.

mod support;

mod llm_anthropic;
mod llm_bounds;
mod llm_caching;
mod llm_local;
mod llm_openai;
mod llm_responses;
mod llm_scripted;
mod llm_servers;
mod session_compaction;
mod session_first_request;
mod session_history;
mod session_turns;
mod tools_commands;
mod tools_confinement;
mod tools_deadlines;
mod tools_files;
mod tools_mcp;
mod tools_mcp_bounds;
mod tools_mcp_http;
mod tools_mcp_stderr;
mod tools_plan_question;
mod tools_protected;
mod tools_sandbox;
mod tools_sandbox_sockets;
mod tools_search;
