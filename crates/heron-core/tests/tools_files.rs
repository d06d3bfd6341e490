//! The file tools (read_file, write_file, edit_file) locally and through a fake editor:
//! windows and truncation, encodings and line endings kept, argument errors, secrets.

use std::sync::Arc;

use crate::support::{Dirs, FakeEditor, Script, call, text_of};
use heron_core::secret::Secret;
use heron_core::tools::edit_file::EditFile;
use heron_core::tools::grep::Grep;
use heron_core::tools::read_file::ReadFile;
use heron_core::tools::write_file::WriteFile;
use heron_core::tools::{Tool, ToolEnv};
use heron_core::types::{ToolKind, ToolOutput, ToolStatus};
use serde_json::json;

fn editor(reads: bool, writes: bool) -> FakeEditor {
    FakeEditor::new(Script { reads, writes, ..Script::full() })
}

fn diff_of(outcome: &heron_core::tools::Outcome) -> (Option<String>, String) {
    match outcome.output.first() {
        Some(ToolOutput::Diff { old_text, new_text, .. }) => (old_text.clone(), new_text.clone()),
        other => panic!("expected a diff, got {other:?}"),
    }
}

#[tokio::test]
async fn read_file_numbers_lines_and_describes_the_call() {
    let dirs = Dirs::new();
    let path = dirs.write("src/main.rs", "fn main() {}\n// end\n");
    let env = dirs.env();
    let prepared = ReadFile.prepare(r#"{"path":"src/main.rs"}"#, &env).expect("prepared");
    assert_eq!(prepared.title, "Read src/main.rs");
    assert_eq!(prepared.kind, ToolKind::Read);
    assert_eq!(prepared.locations[0].path, path.display().to_string());
    assert!(!prepared.outside_roots);
    let outcome = ReadFile.run(prepared, env).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(outcome.for_model, "     1\tfn main() {}\n     2\t// end\n");
    // The editor is shown the text itself; the numbers are for the model.
    assert_eq!(outcome.output, [ToolOutput::Text { text: "fn main() {}\n// end\n".into() }]);
    assert_eq!(
        outcome.raw_output,
        Some(
            json!({ "path": path.display().to_string(), "firstLine": 1, "lastLine": 2, "totalLines": 2, "truncated": false })
        )
    );
}

#[tokio::test]
async fn read_titles_name_the_lines_and_list_titles_the_folder() {
    let dirs = Dirs::new();
    dirs.write("src/main.rs", "a\n");
    let env = dirs.env();
    let title = |args: serde_json::Value| ReadFile.prepare(&args.to_string(), &env).expect("prepared").title;
    assert_eq!(title(json!({ "path": "src/main.rs", "offset": 10, "limit": 31 })), "Read src/main.rs:10-40");
    assert_eq!(title(json!({ "path": "src/main.rs", "offset": 10 })), "Read src/main.rs from line 10");
    assert_eq!(title(json!({ "path": "src/main.rs", "limit": 5 })), "Read src/main.rs:1-5");
    let list = |args: serde_json::Value| {
        heron_core::tools::list_files::ListFiles.prepare(&args.to_string(), &env).expect("prepared").title
    };
    assert_eq!(list(json!({ "path": "src" })), "List src/");
    assert_eq!(list(json!({})), "List the workspace");
}

#[tokio::test]
async fn read_file_window_says_how_to_read_on() {
    let dirs = Dirs::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    dirs.write("ten.txt", text);
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "ten.txt", "offset": 3, "limit": 2})).await;
    assert!(outcome.for_model.starts_with("     3\tline 3\n     4\tline 4\n"), "{}", outcome.for_model);
    assert!(outcome.for_model.contains("showing lines 3-4 of 10; call read_file with offset 5"));
}

#[tokio::test]
async fn read_file_caps_long_files_at_2000_lines() {
    let dirs = Dirs::new();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    dirs.write("long.txt", text);
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "long.txt"})).await;
    assert_eq!(outcome.for_model.lines().count(), 2001);
    assert!(
        outcome.for_model.ends_with(
            "[truncated: showing lines 1-2000 of 2500; call read_file with offset 2001 to read on]"
        )
    );
}

/// A single line longer than the cap shows its start, and says so (in the text and in
/// `raw_output`) rather than passing the clip off as the whole line.
#[tokio::test]
async fn a_line_longer_than_the_cap_is_marked_as_cut() {
    let dirs = Dirs::new();
    dirs.write("one-line.json", format!("{}\nend\n", "q".repeat(300 * 1024)));
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "one-line.json"})).await;
    assert!(
        outcome.for_model.contains("line 1 is 307200 bytes long and only its start is shown"),
        "{}",
        tail(&outcome.for_model)
    );
    assert!(
        outcome.for_model.contains("call read_file with offset 2 to read on"),
        "{}",
        tail(&outcome.for_model)
    );
    assert!(text_of(&outcome).contains("only its start is shown"));
    let raw = outcome.raw_output.expect("raw output");
    assert_eq!((raw["truncated"].clone(), raw["lastLine"].clone()), (json!(true), json!(1)));
}

#[tokio::test]
async fn read_file_caps_output_bytes() {
    let dirs = Dirs::new();
    let line = "x".repeat(1000);
    let text: String = (0..1000).map(|_| format!("{line}\n")).collect();
    dirs.write("wide.txt", text);
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "wide.txt"})).await;
    assert!(outcome.for_model.len() <= 256 * 1024 + 200, "{}", outcome.for_model.len());
    assert!(outcome.for_model.contains("[truncated: showing lines 1-"), "marker missing");
}

#[tokio::test]
async fn read_file_refuses_binary_files() {
    let dirs = Dirs::new();
    dirs.write("blob.bin", b"\x7fELF\0\0\x01");
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "blob.bin"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("binary"), "{}", outcome.for_model);
}

#[tokio::test]
async fn read_file_shows_latin1_with_a_note() {
    let dirs = Dirs::new();
    dirs.write("old.txt", b"caf\xe9\n");
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "old.txt"})).await;
    assert!(outcome.for_model.contains("Latin-1"));
    assert!(outcome.for_model.contains("café"), "{}", outcome.for_model);
}

#[tokio::test]
async fn read_file_reports_a_missing_file() {
    let dirs = Dirs::new();
    let outcome = call(&ReadFile, &dirs.env(), json!({"path": "nope.txt"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("does not exist"));
}

/// A link that loops, a socket and a link to a pipe are each refused as what they are:
/// nothing changed while they were opened, so the refusal must not say so.
#[tokio::test]
async fn read_file_says_what_an_unreadable_path_is() {
    let dirs = Dirs::new();
    let ws = dirs.ws();
    std::os::unix::fs::symlink("loop2", ws.join("loop1")).expect("link");
    std::os::unix::fs::symlink("loop1", ws.join("loop2")).expect("link");
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).expect("socket");
    // What `/dev/stdin` is when stdin is a pipe: a link to a `/proc` fd link that names no path.
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    std::os::unix::fs::symlink(format!("/proc/self/fd/{}", fds[0]), ws.join("stdin")).expect("link");
    let failed = |outcome: heron_core::tools::Outcome| {
        assert_eq!(outcome.status, ToolStatus::Failed, "{}", outcome.for_model);
        assert!(!outcome.for_model.contains("changed"), "{}", outcome.for_model);
        outcome.for_model
    };
    let looped = failed(call(&ReadFile, &dirs.env(), json!({"path": "loop1"})).await);
    assert!(looped.contains("loop1 is a symlink loop"), "{looped}");
    let below = failed(call(&ReadFile, &dirs.env(), json!({"path": "loop1/a.txt"})).await);
    assert!(below.contains("loop1 is a symlink loop"), "{below}");
    let write = WriteFile.prepare(&json!({"path": "loop1", "content": "x"}).to_string(), &dirs.env());
    assert!(write.as_ref().is_err_and(|e| e.contains("loop1 is a symlink loop")), "{write:?}");
    let socket = failed(call(&ReadFile, &dirs.env(), json!({"path": "sock"})).await);
    assert!(socket.contains("sock is a socket, not a regular file"), "{socket}");
    let written = failed(call(&WriteFile, &dirs.env(), json!({"path": "sock", "content": "x"})).await);
    assert!(written.contains("sock is a socket, not a regular file"), "{written}");
    let pipe = failed(call(&ReadFile, &dirs.env(), json!({"path": "stdin"})).await);
    assert!(pipe.contains("stdin is a symlink to pipe:["), "{pipe}");
    assert!(pipe.contains("a FIFO, not a regular file"), "{pipe}");
    let file = dirs.write("file.txt", "x");
    let under_a_file = failed(call(&ReadFile, &dirs.env(), json!({"path": "file.txt/x"})).await);
    assert!(under_a_file.contains(&format!("{} is not a directory", file.display())), "{under_a_file}");
    // SAFETY: both descriptors are this test's own.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
}

#[tokio::test]
async fn read_file_outside_the_roots_is_flagged_for_the_gate() {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside().join("x.txt"), "x").expect("fixture");
    let prepared = ReadFile.prepare(r#"{"path":"../outside/x.txt"}"#, &dirs.env()).expect("prepared");
    assert!(prepared.outside_roots);
    assert_eq!(prepared.locations[0].path, dirs.outside().join("x.txt").display().to_string());
}

#[tokio::test]
async fn read_file_goes_through_the_editor_for_unsaved_buffers() {
    let dirs = Dirs::new();
    let path = dirs.write("a.txt", "on disk\n");
    let fake = editor(true, false);
    fake.set_buffer(&path, "unsaved\n");
    let outcome = call(&ReadFile, &dirs.env_with(Arc::new(fake.clone())), json!({"path": "a.txt"})).await;
    assert_eq!(outcome.for_model, "     1\tunsaved\n");
    assert_eq!(fake.calls(), vec![format!("read_text_file {}", path.display())]);
}

#[tokio::test]
async fn read_file_reads_latin1_locally_even_with_an_editor() {
    let dirs = Dirs::new();
    dirs.write("old.txt", b"caf\xe9\n");
    let fake = editor(true, true);
    let outcome = call(&ReadFile, &dirs.env_with(Arc::new(fake.clone())), json!({"path": "old.txt"})).await;
    assert!(outcome.for_model.contains("café"));
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[tokio::test]
async fn bad_arguments_are_errors_for_the_model_not_panics() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let tools: [&dyn Tool; 3] = [&ReadFile, &WriteFile, &EditFile];
    for tool in tools {
        for bad in ["not json", "[1,2]", r#"{"path": 7}"#, "{}", r#"{"path":"a","offset":-1}"#] {
            let err = tool.prepare(bad, &env).expect_err("bad arguments must be refused");
            assert!(err.contains(&tool.spec().name) || err.contains("must"), "{bad}: {err}");
        }
    }
    assert!(ReadFile.prepare(r#"{"path":"a","limit":0}"#, &env).is_err());
}

#[tokio::test]
async fn specs_describe_the_arguments_the_parser_accepts() {
    let spec = EditFile.spec();
    assert_eq!(spec.name, "edit_file");
    let properties = &spec.parameters["properties"];
    for name in ["path", "old_string", "new_string", "replace_all"] {
        assert!(properties.get(name).is_some(), "{name} missing from {}", spec.parameters);
    }
    let required: Vec<&str> =
        spec.parameters["required"].as_array().expect("required").iter().filter_map(|v| v.as_str()).collect();
    assert!(required.contains(&"old_string") && !required.contains(&"replace_all"), "{required:?}");
}

#[tokio::test]
async fn write_file_creates_a_new_file_with_parents() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let prepared = WriteFile.prepare(r#"{"path":"new/dir/a.txt","content":"hi\n"}"#, &env).expect("prepared");
    assert_eq!(prepared.title, "Create new/dir/a.txt");
    let outcome = WriteFile.run(prepared, env).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert_eq!(std::fs::read_to_string(dirs.ws().join("new/dir/a.txt")).expect("written"), "hi\n");
    assert_eq!(diff_of(&outcome), (None, "hi\n".to_owned()));
}

#[tokio::test]
async fn write_file_diff_carries_the_old_text() {
    let dirs = Dirs::new();
    dirs.write("a.txt", "old\n");
    let outcome = call(&WriteFile, &dirs.env(), json!({"path": "a.txt", "content": "new\n"})).await;
    assert_eq!(diff_of(&outcome), (Some("old\n".to_owned()), "new\n".to_owned()));
}

#[tokio::test]
async fn write_file_keeps_crlf_and_bom() {
    let dirs = Dirs::new();
    let path = dirs.write("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\n");
    call(&WriteFile, &dirs.env(), json!({"path": "win.txt", "content": "uno\ndos\n"})).await;
    assert_eq!(std::fs::read(path).expect("read"), b"\xef\xbb\xbfuno\r\ndos\r\n");
}

#[tokio::test]
async fn write_file_keeps_latin1_when_the_text_fits() {
    let dirs = Dirs::new();
    let path = dirs.write("old.txt", b"caf\xe9\n");
    call(&WriteFile, &dirs.env(), json!({"path": "old.txt", "content": "th\u{e9}\n"})).await;
    assert_eq!(std::fs::read(path).expect("read"), b"th\xe9\n");
}

#[tokio::test]
async fn write_file_goes_through_the_editor_for_utf8_files() {
    let dirs = Dirs::new();
    let path = dirs.write("a.txt", "old\n");
    let fake = editor(true, true);
    let outcome = call(
        &WriteFile,
        &dirs.env_with(Arc::new(fake.clone())),
        json!({"path": "a.txt", "content": "new\n"}),
    )
    .await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(fake.buffer(&path).as_deref(), Some("new\n"));
    assert_eq!(std::fs::read_to_string(&path).expect("disk"), "old\n", "the editor owns the write");
    assert_eq!(fake.methods(), vec!["read_text_file", "write_text_file"]);
}

#[tokio::test]
async fn write_file_writes_latin1_files_locally_even_with_an_editor() {
    let dirs = Dirs::new();
    let path = dirs.write("old.txt", b"caf\xe9\n");
    let fake = editor(true, true);
    call(
        &WriteFile,
        &dirs.env_with(Arc::new(fake.clone())),
        json!({"path": "old.txt", "content": "\u{e9}t\u{e9}\n"}),
    )
    .await;
    assert_eq!(std::fs::read(&path).expect("read"), b"\xe9t\xe9\n");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[tokio::test]
async fn emoji_in_paths_and_content_round_trip() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let outcome = call(&WriteFile, &env, json!({"path": "🦀/notes 📝.md", "content": "hello 🌍\n"})).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    let read = call(&ReadFile, &env, json!({"path": "🦀/notes 📝.md"})).await;
    assert_eq!(read.for_model, "     1\thello 🌍\n");
    let edited =
        call(&EditFile, &env, json!({"path": "🦀/notes 📝.md", "old_string": "🌍", "new_string": "🪐"}))
            .await;
    assert_eq!(edited.status, ToolStatus::Completed, "{}", edited.for_model);
    assert_eq!(std::fs::read_to_string(dirs.ws().join("🦀/notes 📝.md")).expect("read"), "hello 🪐\n");
}

#[tokio::test]
async fn edit_file_replaces_one_occurrence_and_shows_a_diff() {
    let dirs = Dirs::new();
    let path = dirs.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    let env = dirs.env();
    let prepared = EditFile
        .prepare(&json!({"path": "src/lib.rs", "old_string": "fn b", "new_string": "fn c"}).to_string(), &env)
        .expect("prepared");
    assert_eq!(prepared.title, "Edit src/lib.rs");
    let outcome = EditFile.run(prepared, env).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "fn a() {}\nfn c() {}\n");
    assert_eq!(
        diff_of(&outcome),
        (Some("fn a() {}\nfn b() {}\n".to_owned()), "fn a() {}\nfn c() {}\n".to_owned())
    );
    assert!(outcome.for_model.contains("line 2"), "{}", outcome.for_model);
}

#[tokio::test]
async fn edit_file_fails_clearly_when_old_string_is_missing() {
    let dirs = Dirs::new();
    dirs.write("a.txt", "abc\n");
    let outcome =
        call(&EditFile, &dirs.env(), json!({"path": "a.txt", "old_string": "zzz", "new_string": "y"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("not found"), "{}", outcome.for_model);
}

#[tokio::test]
async fn edit_file_refuses_an_ambiguous_match_and_says_how_many() {
    let dirs = Dirs::new();
    let path = dirs.write("a.txt", "x x x\n");
    let outcome =
        call(&EditFile, &dirs.env(), json!({"path": "a.txt", "old_string": "x", "new_string": "y"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("3 times"), "{}", outcome.for_model);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "x x x\n");
}

#[tokio::test]
async fn edit_file_replace_all_replaces_every_occurrence() {
    let dirs = Dirs::new();
    let path = dirs.write("a.txt", "x x x\n");
    let args = json!({"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": true});
    call(&EditFile, &dirs.env(), args).await;
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "y y y\n");
}

#[tokio::test]
async fn edit_file_matches_lf_text_against_a_crlf_file_and_keeps_crlf() {
    let dirs = Dirs::new();
    let path = dirs.write("win.txt", b"one\r\ntwo\r\nthree\r\n");
    let args = json!({"path": "win.txt", "old_string": "one\ntwo\n", "new_string": "1\n2\n"});
    let outcome = call(&EditFile, &dirs.env(), args).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert_eq!(std::fs::read(&path).expect("read"), b"1\r\n2\r\nthree\r\n");
}

#[tokio::test]
async fn edit_file_keeps_the_utf8_bom() {
    let dirs = Dirs::new();
    let path = dirs.write("bom.txt", b"\xef\xbb\xbfhello\n");
    call(&EditFile, &dirs.env(), json!({"path": "bom.txt", "old_string": "hello", "new_string": "bye"}))
        .await;
    assert_eq!(std::fs::read(&path).expect("read"), b"\xef\xbb\xbfbye\n");
}

#[tokio::test]
async fn edit_file_keeps_latin1_bytes_exact() {
    let dirs = Dirs::new();
    let path = dirs.write("old.txt", b"na\xefve caf\xe9 \xff\n");
    let args = json!({"path": "old.txt", "old_string": "caf\u{e9}", "new_string": "th\u{e9}"});
    let outcome = call(&EditFile, &dirs.env(), args).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert_eq!(std::fs::read(&path).expect("read"), b"na\xefve th\xe9 \xff\n");
}

#[tokio::test]
async fn edit_file_refuses_characters_latin1_cannot_hold() {
    let dirs = Dirs::new();
    let path = dirs.write("old.txt", b"caf\xe9\n");
    let args = json!({"path": "old.txt", "old_string": "caf\u{e9}", "new_string": "🦀"});
    let outcome = call(&EditFile, &dirs.env(), args).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("Latin-1"), "{}", outcome.for_model);
    assert_eq!(std::fs::read(&path).expect("read"), b"caf\xe9\n");
}

#[tokio::test]
async fn edit_file_edits_the_editor_buffer_when_the_editor_writes() {
    let dirs = Dirs::new();
    let path = dirs.write("a.txt", "on disk\n");
    let fake = editor(true, true);
    fake.set_buffer(&path, "unsaved text\n");
    let args = json!({"path": "a.txt", "old_string": "unsaved", "new_string": "edited"});
    let outcome = call(&EditFile, &dirs.env_with(Arc::new(fake.clone())), args).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert_eq!(fake.buffer(&path).as_deref(), Some("edited text\n"));
    assert_eq!(std::fs::read_to_string(&path).expect("disk"), "on disk\n");
}

#[tokio::test]
async fn edit_file_with_an_editor_keeps_crlf() {
    let dirs = Dirs::new();
    let path = dirs.write("win.txt", b"one\r\ntwo\r\n");
    let fake = editor(true, true);
    let args = json!({"path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"});
    call(&EditFile, &dirs.env_with(Arc::new(fake.clone())), args).await;
    assert_eq!(fake.buffer(&path).as_deref(), Some("1\r\n2\r\n"));
}

#[tokio::test]
async fn secrets_are_scrubbed_from_what_tools_return() {
    let dirs = Dirs::new();
    dirs.write(".env.local", "KEY=sk-live-123456\n");
    let env = ToolEnv { secrets: Arc::new(vec![Secret::new("sk-live-123456")]), ..dirs.env() };
    let outcome = call(&ReadFile, &env, json!({"path": ".env.local"})).await;
    assert!(!outcome.for_model.contains("sk-live-123456"), "{}", outcome.for_model);
    assert!(!text_of(&outcome).contains("sk-live-123456"));
    assert!(outcome.for_model.contains("KEY=***"));
}

/// A hostile model pads the line holding a key so that a clip falls inside the key: what
/// is clipped was redacted first, so no part of the key survives the cut.
#[tokio::test]
async fn a_clip_inside_a_key_leaves_no_part_of_it() {
    let key = "sk-live-0123456789abcdefghij";
    let dirs = Dirs::new();
    // grep clips each matching line at 400 characters; here the key starts at 390.
    dirs.write("padded.txt", format!("{}{key} tail\n", "y".repeat(390)));
    // read_file clips a single line longer than its cap (256 KiB).
    dirs.write("long.txt", format!("{}{key}\n", "z".repeat(256 * 1024 - 12)));
    let env = ToolEnv { secrets: Arc::new(vec![Secret::new(key)]), ..dirs.env() };
    let grep = call(&Grep, &env, json!({"pattern": "tail", "path": "padded.txt"})).await;
    let read = call(&ReadFile, &env, json!({"path": "long.txt"})).await;
    for (what, outcome) in [("grep", &grep), ("read_file", &read)] {
        for text in [outcome.for_model.clone(), text_of(outcome)] {
            assert!(!text.contains("sk-live-0"), "{what} kept part of the key: …{}", tail(&text));
        }
    }
    assert!(grep.for_model.contains("y***"), "{}", tail(&grep.for_model));
}

fn tail(text: &str) -> &str {
    let start = (0..=text.len().saturating_sub(120)).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    &text[start..]
}

#[tokio::test]
async fn cancelled_read_stops() {
    let dirs = Dirs::new();
    dirs.write("a.txt", "x\n");
    let env = dirs.env();
    env.cancel.cancel();
    let outcome = call(&ReadFile, &env, json!({"path": "a.txt"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
}

/// A file with another name (a hard link) is not written through the editor, which writes
/// in place and so through every name: it is replaced by a rename, the other name keeps the
/// old text, and what the user approves says so.
#[tokio::test]
async fn a_hard_linked_file_is_replaced_by_a_rename_and_never_written_through_the_editor() {
    let dirs = Dirs::new();
    let path = dirs.write("shared.txt", "old\n");
    let other = dirs.ws().join("other-name.txt");
    std::fs::hard_link(&path, &other).expect("a second name");
    let fake = editor(true, true);
    let env = dirs.env_with(Arc::new(fake.clone()));
    let args = json!({"path": "shared.txt", "content": "new\n"}).to_string();
    let prepared = WriteFile.prepare(&args, &env).expect("prepared");
    let previewed = WriteFile.preview(prepared, env.clone()).await.expect("previewed");
    let note = previewed.content.iter().find_map(|output| match output {
        ToolOutput::Text { text } if text.contains("hard links") => Some(text.clone()),
        _ => None,
    });
    assert!(note.is_some_and(|n| n.contains("2 names")), "the request says it: {:?}", previewed.content);
    let outcome = WriteFile.run(previewed, env).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{outcome:?}");
    assert!(!fake.methods().contains(&"write_text_file".to_owned()), "{:?}", fake.methods());
    assert_eq!(std::fs::read_to_string(&path).expect("this name"), "new\n");
    assert_eq!(std::fs::read_to_string(&other).expect("the other name"), "old\n");
}

/// Files other programs run later are asked in every posture, and the title says why: a
/// git directory made under another name, git hooks outside `.git`, `.envrc`, editor tasks.
#[tokio::test]
async fn files_other_programs_run_later_are_always_asked_with_the_reason_in_the_title() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.ws().join("vendor/objects")).expect("objects");
    std::fs::write(dirs.ws().join("vendor/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    std::fs::write(dirs.ws().join("vendor/config"), "[core]\n").expect("config");
    let env = dirs.env();
    for (path, reason) in [
        ("vendor/hooks/post-checkout", "git directory"),
        (".husky/pre-commit", "git hook"),
        (".envrc", "direnv"),
        (".vscode/tasks.json", "editor task"),
        (".git/config", "in .git"),
    ] {
        let args = json!({"path": path, "content": "x\n"}).to_string();
        let prepared = WriteFile.prepare(&args, &env).expect("prepared");
        assert!(prepared.always_ask.is_some(), "{path} is always asked");
        assert!(prepared.title.contains(reason), "{path}: {}", prepared.title);
    }
    let plain =
        WriteFile.prepare(&json!({"path": "src/lib.rs", "content": "x"}).to_string(), &env).expect("ok");
    assert!(plain.always_ask.is_none() && !plain.title.contains('('), "{}", plain.title);
}

/// W1: a file past the 64 MiB a tool reads whole is refused by the reading and the
/// changing tools alike, naming the cap (sparse: nothing is written to the disk, and what
/// is read stops one byte past the cap).
#[tokio::test]
async fn a_file_past_the_whole_read_cap_is_refused_naming_it() {
    let dirs = Dirs::new();
    let path = dirs.write("huge.log", "");
    let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open");
    file.set_len(64 * 1024 * 1024 + 1).expect("grow");
    let env = dirs.env();
    let read = call(&ReadFile, &env, json!({ "path": "huge.log" })).await;
    let edit =
        call(&EditFile, &env, json!({ "path": "huge.log", "old_string": "a", "new_string": "b" })).await;
    for outcome in [read, edit] {
        assert_eq!(outcome.status, ToolStatus::Failed, "{}", outcome.for_model);
        assert!(
            outcome.for_model.contains("larger than the 67108864 bytes a tool reads whole"),
            "{}",
            outcome.for_model
        );
    }
}
