//! Configuration at a scale no one tries, over the real binary: a catalog of 100,000 models
//! beside a provider whose base URL is not a URL. A session still opens with a model option
//! of bounded size, any configured model can be chosen, the broken provider fails only the
//! prompt that uses it, and the others go on working. (How long `session/new` takes with
//! such a config is a benchmark row in BENCHMARKS.md, not a test.)

use serde_json::{Value, json};

use crate::support::{Dirs, Process};

/// A `config.toml` whose `big` provider lists `count` models, with a `bad` provider whose
/// base URL is not a URL.
fn catalog(count: usize) -> String {
    let models: Vec<String> = (0..count).map(|i| format!("\"m{i}\"")).collect();
    format!(
        "default_model = \"demo/demo\"\n[providers.big]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         models = [{}]\n[providers.bad]\nkind = \"openai\"\nbase_url = \"not a url\"\nmodels = [\"x\"]\n",
        models.join(",")
    )
}

/// The answer to a prompt, skipping what the turn streams and letting its tools run.
fn prompt(heron: &mut Process, session: &str, id: &str) -> Value {
    heron.send_prompt(json!(id), session, "Hello");
    heron.until_answer(&json!(id), |heron, message| {
        if message["method"] == "session/request_permission" {
            heron.reply(message, json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } }));
        }
    })
}

fn set_model(heron: &mut Process, session: &str, id: &str, model: &str) -> Value {
    let params = json!({ "sessionId": session, "configId": "model", "value": model });
    heron.request(json!(id), "session/set_config_option", params)
}

#[test]
fn a_catalog_of_100000_models_and_a_broken_provider_leave_sessions_working() {
    let dirs = Dirs::new();
    dirs.write_home("config.toml", &catalog(100_000));
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
    let opened = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = opened["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{opened}")).to_owned();
    let size = opened.to_string().len();
    assert!(size < 64 * 1024, "the session's options stay small: {size} bytes");
    let options = opened["result"]["configOptions"].as_array().expect("options");
    let model = options.iter().find(|o| o["id"] == "model").expect("a model option");
    assert_eq!(model["options"].as_array().map(Vec::len), Some(256), "{model}");

    let chosen = set_model(&mut heron, &session, "far", "big/m99999");
    assert!(chosen.get("result").is_some(), "a model past the listed ones is taken: {chosen}");
    assert!(chosen.to_string().len() < 64 * 1024, "and the answer stays small");

    let chosen = set_model(&mut heron, &session, "bad", "bad/x");
    assert!(chosen.get("result").is_some(), "{chosen}");
    let failed = prompt(&mut heron, &session, "p1");
    let text = failed["error"].to_string();
    assert!(
        failed.get("error").is_some() && text.contains("not a url"),
        "the prompt names the URL: {failed}"
    );

    let chosen = set_model(&mut heron, &session, "demo", "demo/demo");
    assert!(chosen.get("result").is_some(), "{chosen}");
    let answered = prompt(&mut heron, &session, "p2");
    assert_eq!(answered["result"]["stopReason"], "end_turn", "the other providers still work: {answered}");
}
