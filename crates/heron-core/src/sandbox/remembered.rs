//! What the sandbox probe found last time, remembered in Heron's home with the state of the
//! machine and the process it was found in, so `heron acp` can report the walls in its
//! `initialize` answer at once instead of waiting for a probe that forks three processes
//! and makes four namespaces. Only that report reads it: every command still gets what this
//! process's own probe finds (`support`), which runs anyway and writes the record again
//! when it differs.
//!
//! The record counts only when everything that decides what the probe can find is the same:
//! the kernel and its boot parameters, this binary, the user, the process's capabilities,
//! seccomp and `no_new_privs`, the namespaces it runs in (a sandboxed editor starts Heron in
//! its own), and the kernel's limits on making namespaces. Not the boot itself: a machine
//! started again the same way finds the same, and its first start after a reboot is the one
//! an editor's user waits on most often. What a reboot could change beyond these (a
//! security module's profiles) costs at most that start's report, which its probe mends. The file is the user's, like the rest of the
//! home; it is read within a few KiB, and anything unexpected in it is no record. What the
//! finding says is its owner's (`support`): this module keeps it, and reads none of it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The record's name in Heron's home.
const FILE: &str = "sandbox-probe.json";

/// The most of the file read: a record is a few hundred bytes.
const MAX_BYTES: u64 = 8 * 1024;

/// Where the record is kept in the home at `home`.
pub(super) fn path_in(home: &Path) -> PathBuf {
    home.join(FILE)
}

/// Everything that decides what the probe finds, as one line; `None` where the process
/// cannot read it (then nothing is remembered).
pub(super) fn context() -> Option<String> {
    let read = |path: &str| std::fs::read_to_string(path).map(|text| text.trim().to_owned());
    let link = |path: &str| std::fs::read_link(path).map(|link| link.display().to_string());
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let fields: Vec<&str> = status
        .lines()
        .filter(|line| ["CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:"].iter().any(|f| line.starts_with(f)))
        .collect();
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let modified = exe.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
    let mut parts = vec![
        read("/proc/sys/kernel/osrelease").ok()?,
        // `lsm=` decides whether Landlock stands, among others.
        read("/proc/cmdline").ok()?,
        format!("{} {} {}", env!("CARGO_PKG_VERSION"), exe.len(), modified),
        // SAFETY: getuid and geteuid read the caller's ids and cannot fail.
        format!("uid {} {}", unsafe { libc::getuid() }, unsafe { libc::geteuid() }),
        fields.join(" "),
    ];
    for ns in ["user", "mnt", "pid", "net", "ipc"] {
        parts.push(link(&format!("/proc/self/ns/{ns}")).ok()?);
    }
    // Settings a kernel may not have: their absence is part of the state too.
    for setting in [
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/user/max_mnt_namespaces",
        "/proc/sys/user/max_pid_namespaces",
        "/proc/sys/user/max_net_namespaces",
        "/proc/sys/user/max_ipc_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ] {
        parts.push(read(setting).unwrap_or_else(|_| "-".to_owned()));
    }
    Some(parts.join("|").replace(['\n', '\r'], " "))
}

/// What the record says for `context`, if it is a record of that state: the finding as
/// [`remember`] was given it, for its owner to decode.
pub(super) fn recall(path: &Path, context: &str) -> Option<Value> {
    // Only a regular file is read (a FIFO would hold the start forever), whole or not at all.
    let text = crate::whole_file::read_text(path, MAX_BYTES).ok()?;
    let mut record: Value = serde_json::from_str(&text).ok()?;
    if record["context"].as_str()? != context {
        return None;
    }
    Some(record.get_mut("found")?.take())
}

/// Writes the record of `found` for `context`, whole or not at all.
pub(super) fn remember(path: &Path, context: &str, found: Value) {
    let bytes = json!({ "context": context, "found": found }).to_string().into_bytes();
    if let Err(error) = write_whole(path, &bytes) {
        tracing::debug!(%error, path = %path.display(), "cannot remember what the sandbox probe found");
    }
}

/// Writes `bytes` to a new file beside `path` and renames it over `path`, so a reader sees
/// the old record or the new one. The new file is made, never opened through a link.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let beside = path.with_extension(format!("json.{}", std::process::id()));
    let _ = std::fs::remove_file(&beside);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&beside)?;
    let written = file.write_all(bytes).and_then(|()| std::fs::rename(&beside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&beside);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_recalled_in_the_same_state_only() {
        let dir = tempfile::tempdir().expect("dir");
        let path = path_in(dir.path());
        let context = context().expect("this process can read its state");
        assert_eq!(recall(&path, &context), None, "nothing remembered yet");
        remember(&path, &context, json!({ "walls": [true] }));
        assert_eq!(recall(&path, &context), Some(json!({ "walls": [true] })));
        assert_eq!(recall(&path, &format!("{context}x")), None, "another state");
        remember(&path, &context, json!({ "walls": [false] }));
        assert_eq!(recall(&path, &context), Some(json!({ "walls": [false] })), "written again whole");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 1, "nothing left beside it: {left:?}");
    }

    #[test]
    fn the_state_names_the_kernel_the_binary_and_the_namespaces_but_not_the_boot() {
        let context = context().expect("state");
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel");
        assert!(context.contains(kernel.trim()), "{context}");
        let limit = std::fs::read_to_string("/proc/sys/user/max_net_namespaces").expect("limit");
        assert!(context.contains(&format!("|{}|", limit.trim())), "{context}");
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
        assert!(!context.contains(boot.trim()), "a reboot alone does not forget: {context}");
        let user = std::fs::read_link("/proc/self/ns/user").expect("user namespace");
        assert!(context.contains(&user.display().to_string()), "{context}");
        assert!(context.contains(env!("CARGO_PKG_VERSION")), "{context}");
        assert!(!context.contains('\n'), "{context}");
    }

    #[test]
    fn a_file_that_is_not_a_record_is_none_and_a_fifo_is_not_waited_on() {
        let dir = tempfile::tempdir().expect("dir");
        let path = path_in(dir.path());
        let context = context().expect("state");
        let long =
            json!({ "context": context, "found": "x".repeat(usize::try_from(MAX_BYTES).expect("small")) });
        for case in ["not json".to_owned(), json!({ "context": context }).to_string(), long.to_string()] {
            std::fs::write(&path, &case).expect("write");
            assert_eq!(recall(&path, &context), None, "{}", &case[..case.len().min(120)]);
        }
        std::fs::remove_file(&path).expect("remove");
        let fifo = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path only.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
        assert_eq!(recall(&path, &context), None, "a FIFO is no record");
    }
}
