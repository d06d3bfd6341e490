//! Memory stays bounded whatever the model sends, over the real binary: a reply far past
//! the cap ends `max_tokens` with what streamed kept exactly as the editor saw it; a long
//! stream to an editor that reads slowly holds the model back instead of queueing; a tool
//! call with huge arguments fails without running. Peaks are read from /proc (VmHWM).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::endpoint::{Reply, config, delta, endpoint, finish};
use crate::support::{Dirs, Launch, Process};

const MIB: usize = 1024 * 1024;

/// The real `heron acp` on `dirs`, whose stdout is read a line at a time: nothing is
/// read ahead of the test, so a test that stops reading stops Heron's writes at once.
fn start(dirs: &Dirs) -> Process {
    Launch::acp(&dirs.home(), &[]).read_ahead(0).start()
}

fn home(url: &str, extra: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home("config.toml", &config(url, extra));
    dirs.write_home(".env", "NET_KEY=sk-net-0123456789\n");
    dirs
}

/// `count` deltas of `size` bytes of text.
fn text_stream(count: usize, size: usize) -> Reply {
    let piece = "x".repeat(size);
    Reply::Generated {
        count,
        make: Box::new(
            move |i| if i + 1 == count { finish("stop") } else { delta(json!({ "content": piece })) },
        ),
    }
}

fn streamed_text(message: &Value, into: &mut usize) {
    if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
        *into += message["params"]["update"]["content"]["text"].as_str().map_or(0, str::len);
    }
}

#[test]
fn a_reply_far_past_the_cap_ends_max_tokens_and_memory_stays_small() {
    // 300 MiB offered; the default cap is 8 MiB.
    let url = endpoint(vec![text_stream(300 * 16, 64 * 1024)]);
    let dirs = home(&url, "");
    let mut agent = start(&dirs);
    let session = agent.new_session(&dirs.ws());
    agent.send_prompt(json!(3), &session, "go");
    let mut shown = 0;
    let answer = agent.until_answer(&json!(3), |_, m| streamed_text(m, &mut shown));
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    assert_eq!(shown, 8 * MIB, "the editor saw exactly the cap");
    let peak = agent.peak_memory();
    eprintln!("peak RSS through a 300 MiB reply: {:.1} MiB", peak as f64 / MIB as f64);
    assert!(peak < 96 * MIB, "peak {peak} bytes");
    // What is stored is what the editor saw.
    agent.send(json!({"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":session,"cwd":dirs.ws(),"mcpServers":[]}}));
    let mut replayed = 0;
    agent.until_answer(&json!(4), |_, m| streamed_text(m, &mut replayed));
    assert_eq!(replayed, 8 * MIB, "the stored message is the one the editor saw");
}

#[test]
fn streaming_to_an_editor_that_stops_reading_holds_the_model_back() {
    // 32 MiB in 16 KiB deltas (the reply cap raised to allow it), to an editor that stops
    // reading for a while after the first MiB: the model waits for it instead of Heron
    // reading on and queueing what the editor has not taken.
    const TOTAL: usize = 20 * MIB;
    let url = endpoint(vec![text_stream(TOTAL / (16 * 1024) + 1, 16 * 1024)]);
    let dirs = home(&url, "max_reply_bytes = 67108864\n");
    let mut agent = start(&dirs);
    let session = agent.new_session(&dirs.ws());
    let before = agent.memory();
    agent.send_prompt(json!(3), &session, "go");
    let (mut shown, mut paused) = (0, None);
    let answer = agent.until_answer(&json!(3), |agent, m| {
        streamed_text(m, &mut shown);
        if paused.is_none() && shown >= MIB {
            // Long enough for the model to stream all of it, were nothing holding it back.
            std::thread::sleep(Duration::from_millis(2500));
            paused = Some(agent.memory().saturating_sub(before));
        }
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(shown, TOTAL, "the editor got all of it once it read on");
    let growth = paused.expect("the reader paused");
    eprintln!(
        "RSS grew {:.1} MiB while the editor did not read; peak {:.1} MiB ({:.1} MiB over the session's start)",
        growth as f64 / MIB as f64,
        agent.peak_memory() as f64 / MIB as f64,
        agent.peak_memory().saturating_sub(before) as f64 / MIB as f64
    );
    // Held: what was read (1 MiB), and what Heron is ahead by (the chunk budget and the
    // write queue, 1 MiB each) in the reply and in the queue, and buffers. Reading on would
    // hold all 20 MiB twice.
    assert!(growth < 16 * MIB, "grew {growth} bytes while the editor did not read");
    // At the end of the turn the reply is held once, for the history, and its encoded
    // pieces only a few at a time on their way to the store: holding them all until the
    // turn's end was stored (a second copy) took the peak past twice the reply, and joining
    // it for the transcript (a third) past three times.
    let peak_growth = agent.peak_memory().saturating_sub(before);
    assert!(peak_growth < 2 * TOTAL, "the peak grew {peak_growth} bytes over a {TOTAL}-byte reply");
}

#[test]
fn a_tool_call_with_huge_arguments_fails_without_running_or_filling_memory() {
    // One `write_file` call whose arguments stream in 64 KiB pieces, 50 MiB in all.
    let count = 50 * 16;
    let calls = Reply::Generated {
        count,
        make: Box::new(move |i| match i {
            0 => delta(
                json!({ "tool_calls": [{ "index": 0, "id": "c1", "function": { "name": "write_file", "arguments": "{\"path\":\"big.txt\",\"content\":\"" } }] }),
            ),
            _ if i + 1 == count => finish("tool_calls"),
            _ => delta(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "y".repeat(64 * 1024) } }] }),
            ),
        }),
    };
    let url = endpoint(vec![calls, Reply::Events(vec![delta(json!({ "content": "ok" })), finish("stop")])]);
    let dirs = home(&url, "");
    let mut agent = start(&dirs);
    let session = agent.new_session(&dirs.ws());
    agent.send_prompt(json!(3), &session, "go");
    let mut told = Vec::new();
    let answer = agent.until_answer(&json!(3), |_, m| {
        if m["params"]["update"]["status"] == "failed" {
            told.push(m.to_string());
        }
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(told.iter().any(|t| t.contains("larger than")), "{told:?}");
    assert!(!std::path::Path::new(&dirs.ws()).join("big.txt").exists());
    let peak = agent.peak_memory();
    eprintln!("peak RSS through 50 MiB of tool arguments: {:.1} MiB", peak as f64 / MIB as f64);
    assert!(peak < 96 * MIB, "peak {peak} bytes");
    let db = std::fs::metadata(dirs.home().join("heron.db")).map(|m| m.len()).unwrap_or(0);
    assert!(db < 8 * MIB as u64, "the store holds {db} bytes");
}
