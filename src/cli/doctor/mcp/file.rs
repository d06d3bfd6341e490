//! The file `heron doctor --mcp` is given, read into the servers a session would start: Zed
//! settings (`context_servers`, flat or the older `command: {path, args, env}` shape), ACP
//! `mcpServers` as `session/new` carries it (a list, bare or under `mcpServers`), or the
//! common `mcpServers` map of Claude Desktop, Cursor and others. Each definition is checked
//! by the ACP adapter's own check (`acp::mcp::spec_of`), so what passes here is what a
//! session accepts. The env and header values met anywhere are kept apart as secrets.

use std::path::Path;

use heron_core::secret::Secret;
use heron_core::tools::mcp::ServerSpec;
#[cfg(test)]
use heron_core::tools::mcp::TransportSpec;
use heron_core::tools::protected::Protected;
use serde::Deserialize;
use serde_json::Value;

use super::jsonc;
use crate::acp::mcp::{Definition, checked, spec_of_wire};

/// The servers of a file, in its order.
#[derive(Debug)]
pub struct Servers {
    /// What the file was read as, for the report.
    pub shape: &'static str,
    /// One entry per server the file defines.
    pub entries: Vec<Entry>,
    /// Every env and header value in the file: never shown.
    pub secrets: Vec<Secret>,
}

/// One server of the file.
#[derive(Debug)]
pub struct Entry {
    /// Its name: the file's, or `serverN` by its place when it has none.
    pub name: String,
    /// `stdio`, `http` or `sse`, or what the file says when Heron knows no such transport.
    pub transport: String,
    /// What doctor does with it.
    pub found: Found,
}

/// What doctor does with a server.
#[derive(Debug)]
pub enum Found {
    /// Starts it, as a session would.
    Start(ServerSpec),
    /// Reports it failed without starting it: a session would refuse it (or an editor
    /// could not send it); why.
    Refused(String),
    /// Reports it unchecked: it would not reach Heron as written (turned off, or a Zed
    /// extension's, whose command Zed asks the extension for); why.
    Skipped(String),
}

/// The largest file of servers read, in bytes: an editor's settings file is far smaller,
/// and the file is held whole while it is checked.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The servers of the file at `path`, checked as a session in `cwd` with Heron's home
/// `protected` checks them; an error says what is wrong with the file as a whole.
pub fn read(path: &Path, cwd: &Path, protected: &Protected) -> Result<Servers, String> {
    let text = heron_core::whole_file::read_text(path, MAX_FILE_BYTES)
        .map_err(|err| format!("cannot be read: {err}"))?;
    let text = jsonc::plain(&text);
    let value: Value = serde_json::from_str(&text).map_err(|err| format!("is not JSON: {}", placed(&err)))?;
    let secrets = secrets_in(&value);
    let (shape, entries) = match &value {
        Value::Array(items) => ("ACP mcpServers (a list)", acp_list(items, cwd, protected)),
        Value::Object(top) => match (top.get("context_servers"), top.get("mcpServers")) {
            (Some(Value::Object(_)), _) => {
                let file: ZedFile = reread(&text)?;
                ("Zed settings (context_servers)", named(&file.context_servers.0, true, cwd, protected))
            }
            (Some(_), _) => return Err("`context_servers` is not an object of servers by name".to_owned()),
            (None, Some(Value::Array(items))) => ("ACP mcpServers", acp_list(items, cwd, protected)),
            (None, Some(Value::Object(_))) => {
                let file: MapFile = reread(&text)?;
                ("mcpServers by name", named(&file.mcp_servers.0, false, cwd, protected))
            }
            (None, Some(_)) => {
                return Err(
                    "`mcpServers` is neither a list (ACP) nor an object of servers by name".to_owned()
                );
            }
            (None, None) if !top.is_empty() && top.values().all(looks_like_server) => {
                let file: Members = reread(&text)?;
                ("servers by name", named(&file.0, true, cwd, protected))
            }
            (None, None) => {
                return Err("has no `context_servers` (Zed settings) and no `mcpServers` (ACP, or the \
                            common map of servers by name)"
                    .to_owned());
            }
        },
        _ => return Err("is neither a list of servers nor an object".to_owned()),
    };
    Ok(Servers { shape, entries, secrets })
}

/// A JSON error as `line L, column C: what`.
fn placed(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let what = text.strip_suffix(&suffix).unwrap_or(&text);
    format!("line {}, column {}: {what}", err.line(), err.column())
}

/// The file read again as `T`, to keep the order of its servers (`serde_json`'s maps
/// sort their keys).
fn reread<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|err| format!("cannot be read as servers: {}", placed(&err)))
}

#[derive(Deserialize)]
struct ZedFile {
    context_servers: Members,
}

#[derive(Deserialize)]
struct MapFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: Members,
}

/// An object's members in the file's order.
struct Members(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of servers by name")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Whether `value` reads as one server of a map (for a file that is only the map).
fn looks_like_server(value: &Value) -> bool {
    value.get("command").is_some() || value.get("url").is_some()
}

/// Every string (or number) under an `env` or `headers` key, at any depth; in a list of
/// `{name, value}` pairs only the values.
fn secrets_in(value: &Value) -> Vec<Secret> {
    fn walk(value: &Value, secret: bool, out: &mut Vec<Secret>) {
        match value {
            Value::String(text) if secret => out.push(Secret::new(text.clone())),
            Value::Number(number) if secret => out.push(Secret::new(number.to_string())),
            Value::Array(items) => items.iter().for_each(|item| walk(item, secret, out)),
            Value::Object(members) => {
                for (key, member) in members {
                    let pairs = secret && key == "name";
                    walk(member, (secret && !pairs) || key == "env" || key == "headers", out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, false, &mut out);
    out
}

/// The entries of ACP's `mcpServers` list, each read as `session/new` reads it.
fn acp_list(items: &[Value], cwd: &Path, protected: &Protected) -> Vec<Entry> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let named = item.get("name").and_then(Value::as_str).filter(|name| !name.trim().is_empty());
            let name = named.map_or_else(|| format!("server{}", index + 1), str::to_owned);
            let transport = item.get("type").and_then(Value::as_str).unwrap_or("stdio").to_owned();
            let found = spec_of_wire(index, item, cwd, protected).map_or_else(Found::Refused, Found::Start);
            Entry { name, transport, found }
        })
        .collect()
}

/// `definition` checked as a session checks an editor's.
fn check(index: usize, definition: Definition<'_>, cwd: &Path, protected: &Protected) -> Found {
    checked(index, definition, cwd, protected).map_or_else(Found::Refused, Found::Start)
}

/// A server of a map, its values owned.
enum Owned {
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)> },
    Remote { sse: bool, url: String, headers: Vec<(String, String)> },
}

/// The servers of a map by name (`zed`: Zed's `context_servers`, where a server with
/// neither command nor URL is an extension's).
fn named(members: &[(String, Value)], zed: bool, cwd: &Path, protected: &Protected) -> Vec<Entry> {
    members
        .iter()
        .enumerate()
        .map(|(index, (name, value))| {
            let name = if name.trim().is_empty() { format!("server{}", index + 1) } else { name.clone() };
            let mut transport = transport_of(value);
            let found = match read_named(value, zed) {
                // An editor does not start a server turned off, nor hand it to Heron.
                _ if value.get("enabled") == Some(&Value::Bool(false)) => {
                    Found::Skipped("turned off in the file (`enabled: false`): not started".to_owned())
                }
                _ if value.get("disabled") == Some(&Value::Bool(true)) => {
                    Found::Skipped("turned off in the file (`disabled: true`): not started".to_owned())
                }
                Err(reason) => Found::Refused(reason),
                Ok(None) if zed => {
                    "extension".clone_into(&mut transport);
                    Found::Skipped("not checked: Zed asks the extension for the command it runs".to_owned())
                }
                Ok(None) => Found::Refused("names neither a `command` nor a `url`".to_owned()),
                Ok(Some(Owned::Stdio { command, args, env })) => {
                    let definition = Definition::Stdio { name: &name, command: &command, args: &args, env };
                    check(index, definition, cwd, protected)
                }
                Ok(Some(Owned::Remote { sse, url, headers })) => {
                    let definition = if sse {
                        Definition::Sse { name: &name, url: &url, headers }
                    } else {
                        Definition::Http { name: &name, url: &url, headers }
                    };
                    check(index, definition, cwd, protected)
                }
            };
            Entry { name, transport, found }
        })
        .collect()
}

/// The transport a server of a map names, for the report.
fn transport_of(value: &Value) -> String {
    match value.get("type").or_else(|| value.get("transport")).and_then(Value::as_str) {
        Some(kind) => remote_kind(kind).map_or(kind, |sse| if sse { "sse" } else { "http" }).to_owned(),
        None if value.get("url").is_some() => "http".to_owned(),
        None if value.get("command").is_some() => "stdio".to_owned(),
        None => "no transport".to_owned(),
    }
}

/// For a remote transport's name, whether it is SSE; `None` for any other name.
fn remote_kind(kind: &str) -> Option<bool> {
    match kind {
        "sse" => Some(true),
        "http" | "streamable-http" | "streamable_http" | "streamableHttp" => Some(false),
        _ => None,
    }
}

/// A server of a map: `None` when it names neither a command nor a URL. Zed's older shape
/// nests the command: `command: {path, args, env}`.
fn read_named(value: &Value, zed: bool) -> Result<Option<Owned>, String> {
    let Value::Object(_) = value else { return Err("is not an object".to_owned()) };
    let kind = value.get("type").or_else(|| value.get("transport")).and_then(Value::as_str);
    if let Some(kind) = kind
        && kind != "stdio"
        && remote_kind(kind).is_none()
    {
        return Err(format!("type: `{kind}` is not a transport Heron starts (stdio, http, sse)"));
    }
    if let Some(url) = value.get("url") {
        let url = url.as_str().ok_or("`url` is not a string")?;
        let sse = kind.and_then(remote_kind).unwrap_or(false);
        return Ok(Some(Owned::Remote { sse, url: url.to_owned(), headers: pairs(value, "headers")? }));
    }
    match value.get("command") {
        None if zed && value.get("source").and_then(Value::as_str) == Some("custom") => {
            Err("names neither a `command` nor a `url`".to_owned())
        }
        None => Ok(None),
        Some(Value::String(command)) => Ok(Some(Owned::Stdio {
            command: command.clone(),
            args: strings(value, "args")?,
            env: pairs(value, "env")?,
        })),
        Some(nested @ Value::Object(_)) => {
            let command =
                nested.get("path").and_then(Value::as_str).ok_or("`command.path` is not a string")?;
            let inside = |e: String| e.replacen('`', "`command.", 1);
            let args = strings(nested, "args").map_err(inside)?;
            let env = pairs(nested, "env").map_err(inside)?;
            Ok(Some(Owned::Stdio { command: command.to_owned(), args, env }))
        }
        Some(_) => Err("`command` is neither a string nor an object with a `path`".to_owned()),
    }
}

/// `value[key]` as a list of strings; none when absent or null.
fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, item)| {
                item.as_str().map(str::to_owned).ok_or(format!("`{key}[{at}]` is not a string"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not a list of strings")),
    }
}

/// `value[key]` as name and value pairs from an object of strings; none when absent or
/// null. A value is never named in an error: it may be a secret.
fn pairs(value: &Value, key: &str) -> Result<Vec<(String, String)>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(members)) => members
            .iter()
            .map(|(name, member)| match member {
                Value::String(text) => Ok((name.clone(), text.clone())),
                _ => Err(format!("`{key}.{name}` is not a string")),
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not an object of strings by name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: &str = "/srv/heron-home";

    /// The servers of a file holding `text`, checked for a session in `/ws`.
    fn parse(text: &str) -> Result<Servers, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("servers.json");
        std::fs::write(&path, text).expect("write");
        read(&path, Path::new("/ws"), &Protected::for_home(Path::new(HOME)))
    }

    /// Each entry as `name (transport): start | refused: why | skipped: why`.
    fn lines(servers: &Servers) -> Vec<String> {
        servers
            .entries
            .iter()
            .map(|entry| {
                let what = match &entry.found {
                    Found::Start(spec) => format!("start {spec:?}"),
                    Found::Refused(why) => format!("refused: {why}"),
                    Found::Skipped(why) => format!("skipped: {why}"),
                };
                format!("{} ({}): {what}", entry.name, entry.transport)
            })
            .collect()
    }

    fn spec(servers: &Servers, at: usize) -> &ServerSpec {
        match &servers.entries[at].found {
            Found::Start(spec) => spec,
            other => panic!("not started: {other:?}"),
        }
    }

    #[test]
    fn zed_settings_keep_their_order_and_both_command_shapes() {
        let servers = parse(
            r#"{
              // Zed's settings.json
              "context_servers": {
                "zeta": { "source": "custom", "command": "npx", "args": ["-y", "pkg",], "env": { "TOKEN": "tok-1234" }, },
                "alpha": { "command": { "path": "/usr/bin/srv", "args": ["--stdio"], "env": { "A": "b" } }, "settings": {} },
                "remote": { "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer abc-xyz" } },
                "ext": { "settings": { "key": "v" } },
                "off": { "command": "x", "enabled": false },
              },
            }"#,
        )
        .expect("read");
        assert_eq!(servers.shape, "Zed settings (context_servers)");
        let names: Vec<&str> = servers.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha", "remote", "ext", "off"], "the file's order");
        assert_eq!(
            spec(&servers, 0).transport,
            TransportSpec::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "pkg".into()],
                env: vec![("TOKEN".into(), "tok-1234".into())],
            }
        );
        assert_eq!(
            spec(&servers, 1).transport,
            TransportSpec::Stdio {
                command: "/usr/bin/srv".into(),
                args: vec!["--stdio".into()],
                env: vec![("A".into(), "b".into())],
            }
        );
        assert_eq!(
            spec(&servers, 2).transport,
            TransportSpec::Http {
                url: "https://mcp.example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer abc-xyz".into())],
            }
        );
        let lines = lines(&servers);
        assert!(lines[3].starts_with("ext (extension): skipped: not checked"), "{lines:?}");
        assert!(lines[4].starts_with("off (stdio): skipped: turned off"), "{lines:?}");
        let secrets: Vec<&str> = servers.secrets.iter().map(Secret::expose).collect();
        for value in ["tok-1234", "b", "Bearer abc-xyz"] {
            assert!(secrets.contains(&value), "{value} among {secrets:?}");
        }
        assert!(!secrets.contains(&"npx") && !secrets.contains(&"v"), "{secrets:?}");
    }

    #[test]
    fn an_acp_list_is_read_as_session_new_reads_it() {
        let list = r#"[
            {"name": "fs", "command": "srv", "args": ["--x"], "env": [{"name": "K", "value": "val-9876"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": [{"name": "X-Key", "value": "hdr-5555"}]},
            {"type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []},
            {"name": "half", "command": "srv"},
            {"name": "", "command": " ", "args": [], "env": []},
            {"type": "ws", "name": "socket", "url": "ws://x"},
            {"name": "home", "command": "/srv/heron-home/bin/x", "args": [], "env": []}
        ]"#;
        let servers = parse(list).expect("read");
        assert_eq!(servers.shape, "ACP mcpServers (a list)");
        let lines = lines(&servers);
        assert!(lines[0].starts_with("fs (stdio): start"), "{lines:?}");
        assert!(lines[0].contains("env: [\"K\"]") && !lines[0].contains("val-9876"), "{lines:?}");
        assert!(lines[1].starts_with("web (http): start"), "{lines:?}");
        assert!(lines[2].starts_with("old (sse): start"), "{lines:?}");
        assert_eq!(lines[3], "half (stdio): refused: not an ACP server definition: missing field `args`");
        assert_eq!(lines[4], "server5 (stdio): refused: command: must name the server's executable");
        assert!(lines[5].starts_with("socket (ws): refused: type: `ws` is not a transport"), "{lines:?}");
        assert!(
            lines[6]
                .starts_with("home (stdio): refused: command: /srv/heron-home/bin/x is inside Heron's home")
        );
        let secrets: Vec<&str> = servers.secrets.iter().map(Secret::expose).collect();
        assert_eq!(secrets, ["val-9876", "hdr-5555"], "values, never the names of the pairs");

        // Older clients send `env` and `headers` as objects; `session/new` takes them.
        let older = parse(r#"[{"name": "o", "command": "srv", "args": [], "env": {"K": "v-obj-1"}}]"#);
        let older = older.expect("read");
        assert_eq!(
            spec(&older, 0).transport,
            TransportSpec::Stdio {
                command: "srv".into(),
                args: vec![],
                env: vec![("K".into(), "v-obj-1".into())]
            }
        );

        let wrapped = parse(&format!("{{\"mcpServers\": {list}}}")).expect("read");
        assert_eq!(wrapped.shape, "ACP mcpServers");
        assert_eq!(self::lines(&wrapped), lines);
    }

    #[test]
    fn the_common_map_takes_a_type_and_turned_off_servers() {
        let servers = parse(
            r#"{"mcpServers": {
                "b-sse": {"type": "sse", "url": "https://example.com/sse"},
                "a-http": {"type": "streamable-http", "url": "https://example.com/mcp", "headers": {"K": "v"}},
                "c": {"command": "srv", "args": ["--x"], "env": {"PORT": 8080}},
                "d": {"command": "srv", "disabled": true},
                "e": {"description": "nothing to start"},
                "f": {"command": "srv", "args": "--x"}
            }}"#,
        )
        .expect("read");
        assert_eq!(servers.shape, "mcpServers by name");
        let lines = lines(&servers);
        assert!(
            lines[0].starts_with("b-sse (sse): start ServerSpec { name: \"b-sse\", transport: Sse"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("a-http (http): start ServerSpec { name: \"a-http\", transport: Http"));
        assert_eq!(lines[2], "c (stdio): refused: `env.PORT` is not a string", "the value is never named");
        assert!(lines[3].starts_with("d (stdio): skipped: turned off"), "{lines:?}");
        assert_eq!(lines[4], "e (no transport): refused: names neither a `command` nor a `url`");
        assert_eq!(lines[5], "f (stdio): refused: `args` is not a list of strings");
        let nested = parse(r#"{"context_servers": {"n": {"command": {"path": "srv", "env": {"K": true}}}}}"#);
        assert_eq!(
            self::lines(&nested.expect("read")),
            ["n (stdio): refused: `command.env.K` is not a string"]
        );
        let unknown = parse(r#"{"mcpServers": {"w": {"type": "websocket", "url": "ws://x"}}}"#);
        assert_eq!(
            self::lines(&unknown.expect("read")),
            ["w (websocket): refused: type: `websocket` is not a transport Heron starts (stdio, http, sse)"]
        );
        assert!(servers.secrets.iter().any(|s| s.expose() == "8080"), "a number in env is a secret too");
    }

    #[test]
    fn a_file_that_is_only_a_map_of_servers_is_read_as_one() {
        let servers =
            parse(r#"{"one": {"command": "srv"}, "two": {"url": "https://example.com/mcp"}}"#).expect("read");
        assert_eq!(servers.shape, "servers by name");
        assert_eq!(servers.entries.len(), 2);
    }

    #[test]
    fn what_is_wrong_with_a_file_is_said_with_its_place() {
        let error =
            parse("{\n  \"context_servers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}")
                .expect_err("not JSON");
        assert_eq!(error, "is not JSON: line 4, column 5: expected `,` or `}`");
        let error = parse("{\"theme\": \"dark\"}").expect_err("no servers");
        assert!(error.starts_with("has no `context_servers`"), "{error}");
        let error = parse("{\"context_servers\": []}").expect_err("not a map");
        assert!(error.contains("`context_servers` is not an object"), "{error}");
        let error = parse("{\"mcpServers\": 3}").expect_err("neither");
        assert!(error.contains("`mcpServers` is neither a list"), "{error}");
        assert!(parse("42").expect_err("scalar").contains("neither a list"));
        let missing =
            read(Path::new("/no/such/file.json"), Path::new("/ws"), &Protected::for_home(Path::new(HOME)));
        assert!(missing.expect_err("absent").starts_with("cannot be read: "));
    }

    #[test]
    fn an_empty_list_names_no_server() {
        assert!(parse("{\"context_servers\": {}}").expect("read").entries.is_empty());
        assert!(parse("[]").expect("read").entries.is_empty());
    }

    #[test]
    fn a_file_past_its_bound_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("settings.json");
        std::fs::File::create(&path).expect("create").set_len(MAX_FILE_BYTES + 1).expect("grow");
        let Err(why) = read(&path, dir.path(), &Protected::default()) else { panic!("refused") };
        assert!(why.contains(&format!("larger than {MAX_FILE_BYTES} bytes")), "{why}");
    }
}
