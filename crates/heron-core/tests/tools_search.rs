//! list_files and grep: ignore rules, hidden files, globs, sorting, caps with markers,
//! argument errors.

use crate::support::{Dirs, call};
use heron_core::tools::Tool;
use heron_core::tools::grep::Grep;
use heron_core::tools::list_files::ListFiles;
use heron_core::types::{ToolKind, ToolStatus};
use serde_json::json;

fn project() -> Dirs {
    let dirs = Dirs::new();
    dirs.write(".gitignore", "target/\n*.log\n");
    dirs.write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    dirs.write("src/lib.rs", "pub fn hello() {}\n");
    dirs.write("README.md", "say hello\n");
    dirs.write("target/debug/out.rs", "hello from target\n");
    dirs.write("build.log", "hello log\n");
    dirs.write(".hidden/secret.rs", "hello hidden\n");
    dirs.write(".git/config", "hello git\n");
    dirs
}

#[tokio::test]
async fn list_files_respects_gitignore_and_skips_hidden_sorted() {
    let dirs = project();
    let env = dirs.env();
    let prepared = ListFiles.prepare("{}", &env).expect("empty arguments are fine");
    assert_eq!(prepared.kind, ToolKind::Search);
    let outcome = ListFiles.run(prepared, env).await;
    assert_eq!(outcome.for_model, "README.md\nsrc/lib.rs\nsrc/main.rs");
}

#[tokio::test]
async fn list_files_filters_with_a_glob_under_a_path() {
    let dirs = project();
    let outcome = call(&ListFiles, &dirs.env(), json!({"path": "src", "pattern": "*.rs"})).await;
    assert_eq!(outcome.for_model, "src/lib.rs\nsrc/main.rs");
    let outcome = call(&ListFiles, &dirs.env(), json!({"pattern": "**/main.rs"})).await;
    assert_eq!(outcome.for_model, "src/main.rs");
}

#[tokio::test]
async fn list_files_caps_with_a_marker() {
    let dirs = Dirs::new();
    for i in 0..1005 {
        dirs.write(&format!("many/f{i:04}.txt"), "");
    }
    let outcome = call(&ListFiles, &dirs.env(), json!({})).await;
    let lines: Vec<&str> = outcome.for_model.lines().collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0], "many/f0000.txt");
    assert!(lines[1000].starts_with("[truncated: showing the first 1000 files"), "{}", lines[1000]);
}

/// Symlinks are listed in their place as `name -> target`, target as the link names it,
/// and a linked directory is not walked: nothing outside the workspace is listed through
/// it, and a link to an ancestor cannot loop.
#[tokio::test]
async fn list_files_shows_symlinks_with_their_targets_without_following_them() {
    use std::os::unix::fs::symlink;
    let dirs = Dirs::new();
    dirs.write("a.txt", "a");
    dirs.write("sub/b.txt", "b");
    std::fs::write(dirs.outside().join("secret.txt"), "s").expect("outside");
    symlink("a.txt", dirs.ws().join("alias.txt")).expect("file link");
    symlink(dirs.outside(), dirs.ws().join("out")).expect("directory link");
    symlink("..", dirs.ws().join("sub/up")).expect("loop link");
    symlink("nowhere", dirs.ws().join("dangling")).expect("dangling link");
    symlink("new\nline", dirs.ws().join("odd")).expect("odd link");
    let outcome = call(&ListFiles, &dirs.env(), json!({})).await;
    let out = format!("out -> {}", dirs.outside().display());
    assert_eq!(
        outcome.for_model.lines().collect::<Vec<_>>(),
        [
            "a.txt",
            "alias.txt -> a.txt",
            "dangling -> nowhere",
            "odd -> new\\nline",
            out.as_str(),
            "sub/b.txt",
            "sub/up -> .."
        ],
        "{}",
        outcome.for_model
    );
    let outcome = call(&ListFiles, &dirs.env(), json!({"pattern": "*.txt"})).await;
    assert_eq!(outcome.for_model, "a.txt\nalias.txt -> a.txt\nsub/b.txt");
}

/// A directory that is a symlink loop is said to be one, not to be missing.
#[tokio::test]
async fn list_files_and_grep_name_a_symlink_loop() {
    let dirs = Dirs::new();
    std::os::unix::fs::symlink("loop2", dirs.ws().join("loop1")).expect("link");
    std::os::unix::fs::symlink("loop1", dirs.ws().join("loop2")).expect("link");
    let listed = call(&ListFiles, &dirs.env(), json!({"path": "loop1"})).await;
    assert_eq!(listed.status, ToolStatus::Failed);
    assert!(
        listed
            .for_model
            .ends_with("loop1 is a symlink loop (too many levels of symbolic links); it leads to no file"),
        "{}",
        listed.for_model
    );
    let searched = call(&Grep, &dirs.env(), json!({"pattern": "x", "path": "loop1"})).await;
    assert!(searched.for_model.contains("loop1 is a symlink loop"), "{}", searched.for_model);
    let missing = call(&ListFiles, &dirs.env(), json!({"path": "nope"})).await;
    assert!(missing.for_model.ends_with("nope does not exist"), "{}", missing.for_model);
}

#[tokio::test]
async fn list_files_refuses_an_invalid_glob() {
    let dirs = Dirs::new();
    let err = ListFiles.prepare(r#"{"pattern":"src/[abc"}"#, &dirs.env()).expect_err("invalid glob");
    assert!(err.contains("glob"), "{err}");
}

#[tokio::test]
async fn list_files_outside_the_roots_is_flagged() {
    let dirs = Dirs::new();
    let prepared = ListFiles.prepare(r#"{"path":"../outside"}"#, &dirs.env()).expect("prepared");
    assert!(prepared.outside_roots);
}

#[tokio::test]
async fn grep_reports_path_line_text_respecting_ignores() {
    let dirs = project();
    let outcome = call(&Grep, &dirs.env(), json!({"pattern": "hel+o"})).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(
        outcome.for_model,
        "README.md:1: say hello\nsrc/lib.rs:1: pub fn hello() {}\nsrc/main.rs:2:     println!(\"hello\");\n"
    );
}

#[tokio::test]
async fn grep_filters_by_glob_and_path() {
    let dirs = project();
    let outcome =
        call(&Grep, &dirs.env(), json!({"pattern": "hello", "path": "src", "glob": "lib.rs"})).await;
    assert_eq!(outcome.for_model, "src/lib.rs:1: pub fn hello() {}\n");
}

#[tokio::test]
async fn grep_skips_binary_files_and_says_when_nothing_matched() {
    let dirs = Dirs::new();
    dirs.write("a.bin", b"needle\0\x01");
    let outcome = call(&Grep, &dirs.env(), json!({"pattern": "needle"})).await;
    assert_eq!(outcome.for_model, "[no matches]");
}

#[tokio::test]
async fn grep_caps_matches_with_a_marker() {
    let dirs = Dirs::new();
    let text: String = (0..600).map(|i| format!("match {i}\n")).collect();
    dirs.write("many.txt", text);
    let outcome = call(&Grep, &dirs.env(), json!({"pattern": "match"})).await;
    assert_eq!(outcome.for_model.lines().count(), 501);
    assert!(outcome.for_model.contains("[truncated: showing the first 500 matches"), "marker missing");
}

#[tokio::test]
async fn grep_invalid_regex_is_refused_at_prepare() {
    let dirs = Dirs::new();
    let err = Grep.prepare(r#"{"pattern":"fn ("}"#, &dirs.env()).expect_err("invalid regex");
    assert!(err.contains("invalid regular expression"), "{err}");
    assert!(Grep.prepare(r#"{"path":"src"}"#, &dirs.env()).is_err(), "pattern is required");
}

#[tokio::test]
async fn grep_matches_latin1_lines() {
    let dirs = Dirs::new();
    dirs.write("old.txt", b"caf\xe9 ok\n");
    let outcome = call(&Grep, &dirs.env(), json!({"pattern": "ok"})).await;
    assert!(outcome.for_model.starts_with("old.txt:1: caf"), "{}", outcome.for_model);
}

#[tokio::test]
async fn cancelled_walk_stops() {
    let dirs = project();
    let env = dirs.env();
    env.cancel.cancel();
    let outcome = call(&Grep, &env, json!({"pattern": "hello"})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert_eq!(outcome.for_model, "cancelled");
}

#[tokio::test]
async fn search_tools_walk_the_disk_even_with_an_editor() {
    let dirs = project();
    let fake = crate::support::FakeEditor::new(crate::support::Script::full());
    let env = dirs.env_with(std::sync::Arc::new(fake.clone()));
    let listed = call(&ListFiles, &env, json!({"pattern": "*.md"})).await;
    assert_eq!(listed.for_model, "README.md");
    let found = call(&Grep, &env, json!({"pattern": "say"})).await;
    assert_eq!(found.for_model, "README.md:1: say hello\n");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[tokio::test]
async fn grep_clips_long_lines_and_stops_at_its_byte_cap_with_a_marker() {
    let dirs = Dirs::new();
    // 400 matching lines of 1,000 characters: under the match cap, past the byte cap once
    // each line is clipped to 400 characters.
    let text: String = (0..400).map(|i| format!("match {i} {}\n", "w".repeat(990))).collect();
    dirs.write("wide.txt", text);
    let outcome = call(&Grep, &dirs.env(), json!({"pattern": "match"})).await;
    let lines: Vec<&str> = outcome.for_model.lines().collect();
    let matches: Vec<&&str> = lines.iter().filter(|l| l.starts_with("wide.txt:")).collect();
    assert!(matches.iter().all(|l| l.ends_with('…') && l.chars().count() <= 400 + 20), "clipped lines");
    assert!(matches.len() < 400, "stopped by bytes before the last match: {}", matches.len());
    let shown: usize = matches.iter().map(|l| l.len() + 1).sum();
    assert!(shown <= 128 * 1024, "{shown}");
    assert!(outcome.for_model.contains("[truncated"), "the marker says it was cut");
}
