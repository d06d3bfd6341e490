//! Heron's home is out of every tool's reach, and the file tools act on regular files only,
//! bounded, opened where they were resolved: the attacks a hostile model tries.

use std::os::unix::fs::symlink;
use std::time::Duration;

use crate::support::{Dirs, call, text_of};
use heron_core::tools::Tool;
use heron_core::tools::edit_file::EditFile;
use heron_core::tools::grep::Grep;
use heron_core::tools::list_files::ListFiles;
use heron_core::tools::read_file::ReadFile;
use heron_core::tools::run_command::RunCommand;
use heron_core::tools::write_file::WriteFile;
use heron_core::types::ToolStatus;
use serde_json::json;

const KEY: &str = "sk-live-0123456789abcdef";

fn prepare_err(tool: &dyn Tool, env: &heron_core::tools::ToolEnv, args: serde_json::Value) -> String {
    tool.prepare(&args.to_string(), env).expect_err("must be refused before it runs")
}

#[test]
fn no_tool_prepares_a_call_inside_the_home() {
    let dirs = Dirs::new();
    let home = dirs.home_inside();
    let env = dirs.env_protecting(&home);
    for err in [
        prepare_err(&ReadFile, &env, json!({ "path": ".heron/.env" })),
        prepare_err(&ReadFile, &env, json!({ "path": home.join("config.toml").display().to_string() })),
        prepare_err(&WriteFile, &env, json!({ "path": ".heron/config.toml", "content": "x" })),
        prepare_err(&EditFile, &env, json!({ "path": ".heron/.env", "old_string": "a", "new_string": "b" })),
        prepare_err(&ListFiles, &env, json!({ "path": ".heron" })),
        prepare_err(&Grep, &env, json!({ "pattern": "sk-", "path": ".heron" })),
        prepare_err(&RunCommand, &env, json!({ "command": "cat .env", "cwd": ".heron" })),
    ] {
        assert!(err.contains("Heron's home"), "{err}");
        assert!(!err.contains(KEY));
    }
}

#[tokio::test]
async fn a_walk_of_a_cwd_that_contains_the_home_steps_around_it() {
    let dirs = Dirs::new();
    let home = dirs.home_inside();
    dirs.write("src/main.rs", "fn main() {}\n// sk-not-a-key\n");
    let env = dirs.env_protecting(&home);
    // Hidden files are skipped anyway; ask for them by name through a glob too.
    let listed = call(&ListFiles, &env, json!({ "pattern": "**/*" })).await;
    assert!(!text_of(&listed).contains(".heron"), "{}", text_of(&listed));
    let found = call(&Grep, &env, json!({ "pattern": "sk-", "glob": "**/*" })).await;
    let found = text_of(&found);
    assert!(found.contains("src/main.rs"), "{found}");
    assert!(!found.contains(".heron") && !found.contains(KEY), "{found}");
}

#[tokio::test]
async fn a_symlink_or_hard_link_to_a_home_file_is_refused() {
    let dirs = Dirs::new();
    let home = dirs.home_inside();
    let env = dirs.env_protecting(&home);
    symlink(home.join(".env"), dirs.ws().join("innocent.txt")).expect("symlink");
    let err = prepare_err(&ReadFile, &env, json!({ "path": "innocent.txt" }));
    assert!(err.contains("Heron's home"), "{err}");
    std::fs::hard_link(home.join(".env"), dirs.ws().join("alias.txt")).expect("hard link");
    let outcome = call(&ReadFile, &env, json!({ "path": "alias.txt" })).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(!outcome.for_model.contains(KEY), "{}", outcome.for_model);
    let found = call(&Grep, &env, json!({ "pattern": "sk-live" })).await;
    assert!(!text_of(&found).contains(KEY), "grep is no yes/no oracle through a hard link");
}

#[tokio::test]
async fn a_fifo_fails_at_once_instead_of_hanging_the_turn() {
    let dirs = Dirs::new();
    let fifo = dirs.ws().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let env = dirs.env();
    let read = tokio::time::timeout(Duration::from_secs(5), call(&ReadFile, &env, json!({ "path": "pipe" })))
        .await
        .expect("read_file of a FIFO does not wait for a writer");
    assert!(read.for_model.contains("FIFO"), "{}", read.for_model);
    let edit = json!({ "path": "pipe", "old_string": "a", "new_string": "b" });
    let edited =
        tokio::time::timeout(Duration::from_secs(5), call(&EditFile, &env, edit)).await.expect("no hang");
    assert_eq!(edited.status, ToolStatus::Failed);
    let write = json!({ "path": "pipe", "content": "x" });
    let written =
        tokio::time::timeout(Duration::from_secs(5), call(&WriteFile, &env, write)).await.expect("no hang");
    assert_eq!(written.status, ToolStatus::Failed);
    assert!(std::fs::symlink_metadata(&fifo).expect("still there").file_type().is_fifo_like());
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

#[tokio::test]
async fn a_device_is_refused_and_memory_stays_small() {
    let dirs = Dirs::new();
    symlink("/dev/zero", dirs.ws().join("zero")).expect("symlink");
    let env = dirs.env();
    let outcome =
        tokio::time::timeout(Duration::from_secs(5), call(&ReadFile, &env, json!({ "path": "/dev/zero" })))
            .await
            .expect("a device read ends at once");
    assert!(outcome.for_model.contains("character device"), "{}", outcome.for_model);
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_after_approval_is_not_read_through() {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside().join("secret.txt"), "outside secret").expect("secret");
    dirs.write("sub/secret.txt", "inside");
    let env = dirs.env();
    let prepared = ReadFile.prepare(&json!({ "path": "sub/secret.txt" }).to_string(), &env).expect("inside");
    assert!(!prepared.outside_roots);
    // What an approved command in the same model response could do before the read runs.
    std::fs::remove_dir_all(dirs.ws().join("sub")).expect("rm");
    symlink(dirs.outside(), dirs.ws().join("sub")).expect("swap");
    let outcome = ReadFile.run(prepared, env).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(!outcome.for_model.contains("outside secret"), "{}", outcome.for_model);
}

#[tokio::test]
async fn listings_escape_control_characters_in_names() {
    let dirs = Dirs::new();
    dirs.write("evil\nsrc/fake.rs: 1: planted", "x");
    let listed = call(&ListFiles, &dirs.env(), json!({})).await;
    let text = text_of(&listed);
    assert!(text.contains("evil\\nsrc"), "{text}");
    assert_eq!(text.lines().count(), 1, "one file, one line: {text}");
}

#[tokio::test]
async fn a_tree_deeper_than_the_walk_says_so_instead_of_finding_nothing() {
    let dirs = Dirs::new();
    let deep: String = (0..70).map(|i| format!("d{i}/")).collect();
    dirs.write(&format!("{deep}leaf.txt"), "x");
    let listed = call(&ListFiles, &dirs.env(), json!({})).await;
    let text = text_of(&listed);
    assert!(text.contains("deeper than"), "{text}");
}
