//! Confinement attacks on the write tools and the roots layer (`..`, sibling prefixes,
//! symlinks out, dangling symlinks, hard links, absolute paths), and every refusal code of
//! validate_additional_directories.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::support::Dirs;
use heron_core::tools::Tool;
use heron_core::tools::edit_file::EditFile;
use heron_core::tools::read_file::ReadFile;
use heron_core::tools::roots::{RootProblem, Roots, validate_additional_directories};
use heron_core::tools::run_command::RunCommand;
use heron_core::tools::write_file::WriteFile;
use serde_json::json;

fn refused(dirs: &Dirs, path: &str) -> String {
    let args = json!({"path": path, "content": "pwned"}).to_string();
    let err = WriteFile.prepare(&args, &dirs.env()).expect_err("the write must be refused");
    let edit = json!({"path": path, "old_string": "a", "new_string": "b"}).to_string();
    assert!(EditFile.prepare(&edit, &dirs.env()).is_err(), "edit_file must refuse {path} too");
    err
}

fn outside_untouched(dirs: &Dirs) {
    let names: Vec<_> =
        std::fs::read_dir(dirs.outside()).expect("outside").flatten().map(|e| e.file_name()).collect();
    for name in names {
        let text = std::fs::read_to_string(dirs.outside().join(&name)).unwrap_or_default();
        assert_ne!(text, "pwned", "{name:?} was written");
    }
}

#[test]
fn dotdot_escape_is_refused() {
    let dirs = Dirs::new();
    let err = refused(&dirs, "../outside/x.txt");
    assert!(err.contains("outside the workspace"), "{err}");
    assert!(refused(&dirs, "a/../../outside/x.txt").contains("outside"));
}

#[test]
fn sibling_with_the_root_as_prefix_is_outside() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.root.path().join("ws-evil")).expect("sibling");
    refused(&dirs, "../ws-evil/x.txt");
    let roots = Roots::new(dirs.ws(), Vec::new());
    let sibling = PathBuf::from(format!("{}-evil/x", dirs.ws().display()));
    assert!(!roots.is_inside(&sibling));
}

#[test]
fn absolute_path_outside_is_refused() {
    let dirs = Dirs::new();
    let target = dirs.outside().join("x.txt");
    refused(&dirs, &target.display().to_string());
    refused(&dirs, "/etc/passwd");
}

#[test]
fn symlinked_directory_pointing_out_is_judged_by_its_target() {
    let dirs = Dirs::new();
    symlink(dirs.outside(), dirs.ws().join("link")).expect("symlink");
    let err = refused(&dirs, "link/x.txt");
    assert!(err.contains(&dirs.outside().display().to_string()), "{err}");
    let roots = Roots::new(dirs.ws(), Vec::new());
    assert_eq!(roots.resolve("link/new/x.txt"), dirs.outside().join("new/x.txt"));
}

/// `..` after a symlink leaves the directory the link points to, as the kernel (and so
/// every command) takes it: the tools read what `cat` reads.
#[tokio::test]
async fn dotdot_after_a_symlink_leaves_the_directory_it_points_to() {
    let dirs = Dirs::new();
    dirs.write("config.txt", "workspace");
    dirs.write("vendor/real/config.txt", "vendor");
    std::fs::create_dir_all(dirs.ws().join("vendor/real/sub")).expect("sub");
    symlink("vendor/real/sub", dirs.ws().join("build")).expect("symlink");
    let roots = Roots::new(dirs.ws(), Vec::new());
    assert_eq!(roots.resolve("build/../config.txt"), dirs.ws().join("vendor/real/config.txt"));
    assert_eq!(roots.resolve("build/./../../config.txt"), dirs.ws().join("vendor/config.txt"));
    // A part that does not exist has no link to follow: its `..` is collapsed as written.
    assert_eq!(roots.resolve("missing/../build/../config.txt"), dirs.ws().join("vendor/real/config.txt"));
    let env = dirs.env();
    let read = crate::support::call(&ReadFile, &env, json!({"path": "build/../config.txt"})).await;
    assert!(read.for_model.contains("vendor"), "{}", read.for_model);
    let shell = crate::support::call(&RunCommand, &env, json!({"command": "cat build/../config.txt"})).await;
    assert!(shell.for_model.contains("vendor"), "{}", shell.for_model);
}

/// The final path is what is judged: a link inside the workspace whose `..` lands outside
/// it is refused for writing and asks first for reading, and Heron's home stays refused.
#[test]
fn dotdot_through_a_symlink_out_is_judged_where_it_lands() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.outside().join("inner")).expect("inner");
    symlink(dirs.outside().join("inner"), dirs.ws().join("deep")).expect("symlink");
    let err = refused(&dirs, "deep/../x.txt");
    assert!(err.contains(&dirs.outside().join("x.txt").display().to_string()), "{err}");
    outside_untouched(&dirs);
    let prepared = ReadFile.prepare(r#"{"path":"deep/../x.txt"}"#, &dirs.env()).expect("prepared");
    assert!(prepared.outside_roots, "a read outside asks first");
    std::fs::create_dir_all(dirs.home().join("logs")).expect("home");
    symlink(dirs.home().join("logs"), dirs.ws().join("logs")).expect("symlink");
    let env = dirs.env_protecting(&dirs.home());
    let err = ReadFile.prepare(r#"{"path":"logs/../.env"}"#, &env).expect_err("home refused");
    assert!(err.contains("Heron's home"), "{err}");
}

#[test]
fn symlinked_file_pointing_out_is_refused() {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside().join("target.txt"), "a").expect("fixture");
    symlink(dirs.outside().join("target.txt"), dirs.ws().join("file-link")).expect("symlink");
    refused(&dirs, "file-link");
}

#[test]
fn dangling_symlink_as_the_target_is_refused() {
    let dirs = Dirs::new();
    symlink(dirs.outside().join("not-yet"), dirs.ws().join("dangling")).expect("symlink");
    let err = refused(&dirs, "dangling");
    assert!(err.contains("symlink"), "{err}");
    // Even when it points inside: the link could be retargeted between check and write.
    symlink(dirs.ws().join("nothing-here"), dirs.ws().join("dangling-in")).expect("symlink");
    refused(&dirs, "dangling-in");
    refused(&dirs, "dangling/below.txt");
}

#[tokio::test]
async fn writing_a_hard_link_to_an_outside_file_replaces_it_and_leaves_the_outside_alone() {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside().join("victim.txt"), "a").expect("fixture");
    std::fs::hard_link(dirs.outside().join("victim.txt"), dirs.ws().join("alias.txt")).expect("hard link");
    let env = dirs.env();
    let prepared = WriteFile
        .prepare(&json!({"path": "alias.txt", "content": "pwned"}).to_string(), &env)
        .expect("prepared");
    let outcome = WriteFile.run(prepared, env).await;
    assert_eq!(outcome.status, heron_core::types::ToolStatus::Completed, "{}", outcome.for_model);
    assert!(outcome.for_model.contains("other hard links"), "{}", outcome.for_model);
    assert_eq!(std::fs::read_to_string(dirs.outside().join("victim.txt")).expect("read"), "a");
    assert_eq!(std::fs::read_to_string(dirs.ws().join("alias.txt")).expect("read"), "pwned");
}

#[test]
fn a_path_with_a_trailing_slash_names_a_directory_and_is_refused() {
    let dirs = Dirs::new();
    let err = refused(&dirs, "newdir/");
    assert!(err.contains("directory"), "{err}");
}

#[tokio::test]
async fn refused_writes_leave_the_outside_untouched_even_when_run_directly() {
    let dirs = Dirs::new();
    symlink(dirs.outside(), dirs.ws().join("link")).expect("symlink");
    let env = dirs.env();
    // A call prepared while the path was harmless, run after the tree changed.
    std::fs::create_dir_all(dirs.ws().join("later")).expect("dir");
    let prepared = WriteFile
        .prepare(&json!({"path": "later/x.txt", "content": "pwned"}).to_string(), &env)
        .expect("prepared");
    std::fs::remove_dir(dirs.ws().join("later")).expect("rmdir");
    symlink(dirs.outside(), dirs.ws().join("later")).expect("swap in a symlink");
    let outcome = WriteFile.run(prepared, env).await;
    assert_eq!(outcome.status, heron_core::types::ToolStatus::Failed);
    outside_untouched(&dirs);
}

#[test]
fn write_inside_an_additional_root_is_allowed() {
    let dirs = Dirs::new();
    let roots = Roots::new(dirs.ws(), vec![dirs.outside()]);
    let target = dirs.outside().join("ok.txt");
    assert_eq!(roots.check_write(&target.display().to_string()), Ok(target));
}

#[test]
fn run_command_cwd_outside_the_roots_is_refused() {
    let dirs = Dirs::new();
    let err =
        RunCommand.prepare(r#"{"command":"true","cwd":"../outside"}"#, &dirs.env()).expect_err("outside");
    assert!(err.contains("outside the workspace"), "{err}");
}

fn code_of(dirs: &[String], cwd: &Path, protected: &[PathBuf]) -> (usize, RootProblem) {
    let err = validate_additional_directories(dirs, cwd, protected).expect_err("must be refused");
    (err.index, err.problem)
}

#[test]
fn additional_directories_that_are_fine_come_back_canonical() {
    let dirs = Dirs::new();
    let extra = dirs.root.path().join("outside/./").display().to_string();
    let ok = validate_additional_directories(&[extra], &dirs.ws(), &[]).expect("accepted");
    assert_eq!(ok, vec![dirs.outside()]);
}

#[test]
fn additional_directory_must_be_absolute() {
    let dirs = Dirs::new();
    assert_eq!(code_of(&["outside".to_owned()], &dirs.ws(), &[]), (0, RootProblem::Relative));
}

#[test]
fn additional_directory_must_exist_and_be_a_directory() {
    let dirs = Dirs::new();
    let missing = dirs.root.path().join("missing").display().to_string();
    assert_eq!(code_of(&[missing], &dirs.ws(), &[]), (0, RootProblem::Missing));
    let file = dirs.write("f.txt", "x").display().to_string();
    let ok = dirs.outside().display().to_string();
    assert_eq!(code_of(&[ok, file], &dirs.root.path().join("other"), &[]), (1, RootProblem::Missing));
}

#[test]
fn additional_directory_owned_by_someone_else_is_refused() {
    let dirs = Dirs::new();
    // SAFETY: getuid has no preconditions.
    let dir = if unsafe { libc::getuid() } == 0 {
        std::os::unix::fs::chown(dirs.outside(), Some(65534), Some(65534)).expect("chown as root");
        dirs.outside()
    } else {
        PathBuf::from("/usr")
    };
    assert_eq!(code_of(&[dir.display().to_string()], &dirs.ws(), &[]), (0, RootProblem::NotOwned));
}

#[test]
fn protected_directory_is_refused_directly_inside_and_through_a_symlink_but_may_be_contained() {
    let dirs = Dirs::new();
    let around = dirs.root.path().join("box");
    let home = around.join("heron-home");
    std::fs::create_dir_all(home.join("logs")).expect("home");
    let protected = [home.clone()];
    let cwd = dirs.ws();
    for dir in [home.clone(), home.join("logs")] {
        assert_eq!(code_of(&[dir.display().to_string()], &cwd, &protected), (0, RootProblem::Protected));
    }
    // As for a cwd, a directory around the home is a root the tools and the sandbox step
    // around the home in.
    let accepted = validate_additional_directories(&[around.display().to_string()], &cwd, &protected);
    assert_eq!(accepted, Ok(vec![std::fs::canonicalize(&around).expect("canonical")]));
    symlink(&home, dirs.outside().join("sneaky")).expect("symlink");
    let via_link = dirs.outside().join("sneaky").display().to_string();
    assert_eq!(code_of(&[via_link], &cwd, &protected), (0, RootProblem::Protected));
}

#[test]
fn additional_directory_overlapping_the_cwd_or_another_is_refused() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.ws().join("sub")).expect("sub");
    let sub = dirs.ws().join("sub").display().to_string();
    assert_eq!(code_of(&[sub], &dirs.ws(), &[]), (0, RootProblem::Overlap));
    let parent = dirs.root.path().display().to_string();
    assert_eq!(code_of(&[parent], &dirs.ws(), &[]), (0, RootProblem::Overlap));
    std::fs::create_dir_all(dirs.outside().join("inner")).expect("inner");
    let twice = [dirs.outside().display().to_string(), dirs.outside().join("inner").display().to_string()];
    assert_eq!(code_of(&twice, &dirs.ws(), &[]), (1, RootProblem::Overlap));
}

#[test]
fn more_than_32_additional_directories_are_refused() {
    let dirs = Dirs::new();
    let many: Vec<String> = (0..33).map(|i| format!("/nowhere/{i}")).collect();
    assert_eq!(code_of(&many, &dirs.ws(), &[]), (32, RootProblem::TooMany));
}
