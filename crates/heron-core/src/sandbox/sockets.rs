//! The host's control sockets, which a confined child must not reach: the desktop session's
//! D-Bus bus and systemd (through which `systemd-run --user` starts anything, unconfined),
//! tmux and screen servers (`tmux send-keys` types into a shell outside), the X11 server,
//! docker, podman and containerd (a container with `/` mounted), snapd and the system bus.
//!
//! Why they need a layer of their own: connecting to a Unix socket by its path is not a
//! file access that Landlock controls (before ABI 9), so a socket stays reachable wherever
//! the sandbox lets the child read. Abstract sockets have no path and are scoped by
//! Landlock itself (`rules`); these pathname ones are covered in the child's private mount
//! namespace, where it gets one (`child`): a folder by an empty read-only tmpfs, a single
//! socket by `/dev/null`, on which `connect` fails. Where no mount namespace can be made
//! (Heron is not root), they stay reachable; docs/security.md says so.
//!
//! The ssh agent's socket (`SSH_AUTH_SOCK`) is kept on purpose, as it is in the
//! environment: a folder that holds it is covered entry by entry around it.

use std::path::{Path, PathBuf};

/// Sockets, or folders of sockets, that control something outside the sandbox, wherever a
/// user or root may have them; `{uid}` is Heron's user id.
const HOST_CONTROL: [&str; 16] = [
    "/run/user/{uid}",
    "/tmp/.X11-unix",
    "/tmp/.ICE-unix",
    "/tmp/tmux-{uid}",
    "/run/screen",
    "/var/run/screen",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/systemd/private",
    "/run/systemd/io.systemd.Manager",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
];

/// The most paths one child covers: a bound on a runtime folder with many entries.
const MAX_COVERS: usize = 256;

/// The host-control sockets of this machine's user: [`HOST_CONTROL`], plus the session's
/// runtime folder and tmux's folder where the environment moves them. Only names are
/// built; what exists is found when a child's steps are prepared.
pub(super) fn host_control() -> Vec<PathBuf> {
    // SAFETY: getuid takes nothing and cannot fail.
    let uid = unsafe { libc::getuid() }.to_string();
    let mut paths: Vec<PathBuf> =
        HOST_CONTROL.iter().map(|path| PathBuf::from(path.replace("{uid}", &uid))).collect();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        paths.push(PathBuf::from(runtime));
    }
    if let Some(tmux) = std::env::var_os("TMUX_TMPDIR").filter(|dir| !dir.is_empty()) {
        paths.push(PathBuf::from(tmux).join(format!("tmux-{uid}")));
    }
    paths.retain(|path| path.is_absolute());
    paths
}

/// What to cover for `paths`, as (folders, other files): each that exists, resolved, once;
/// a folder that holds one of `keep` (the ssh agent's socket, a workspace root) is covered
/// entry by entry around it instead of whole.
pub(super) fn covers(paths: &[PathBuf], keep: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let keep: Vec<PathBuf> = keep.iter().filter_map(|path| std::fs::canonicalize(path).ok()).collect();
    let mut found = Covers::default();
    for path in paths {
        // A covered path inside a kept one (a socket in a workspace on `/tmp`) is still
        // covered: it is the host's, not the user's work.
        if let Ok(real) = std::fs::canonicalize(path) {
            found.around(&real, &keep);
        }
    }
    (found.folders, found.files)
}

#[derive(Default)]
struct Covers {
    folders: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

impl Covers {
    fn full(&self) -> bool {
        self.folders.len() + self.files.len() >= MAX_COVERS
    }

    fn add(&mut self, real: PathBuf) {
        let taken = |list: &[PathBuf]| list.iter().any(|covered| real.starts_with(covered));
        if self.full() || taken(&self.folders) || taken(&self.files) {
            return;
        }
        match std::fs::symlink_metadata(&real) {
            Ok(meta) if meta.is_dir() => self.folders.push(real),
            Ok(meta) if !meta.file_type().is_symlink() => self.files.push(real),
            _ => {}
        }
    }

    /// Covers `real` whole, or, when it holds a kept path, each of its entries except the
    /// way to it.
    fn around(&mut self, real: &Path, keep: &[PathBuf]) {
        if keep.iter().any(|kept| kept == real) {
            return;
        }
        if !keep.iter().any(|kept| kept.starts_with(real)) {
            self.add(real.to_path_buf());
            return;
        }
        let Ok(entries) = std::fs::read_dir(real) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                self.around(&path, keep);
            } else if !keep.contains(&path) {
                self.add(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_control_sockets_are_listed_for_this_user() {
        // SAFETY: getuid takes nothing and cannot fail.
        let uid = unsafe { libc::getuid() };
        let listed = host_control();
        for expected in [
            format!("/run/user/{uid}"),
            format!("/tmp/tmux-{uid}"),
            "/tmp/.X11-unix".to_owned(),
            "/var/run/docker.sock".to_owned(),
            "/run/docker.sock".to_owned(),
            "/run/dbus/system_bus_socket".to_owned(),
        ] {
            assert!(listed.contains(&PathBuf::from(&expected)), "{expected} in {listed:?}");
        }
    }

    #[test]
    fn a_folder_is_covered_whole_unless_it_holds_a_kept_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        for sub in ["run/bus-dir", "run/keyring", "tmux"] {
            std::fs::create_dir_all(base.join(sub)).expect("dirs");
        }
        for file in ["run/bus", "run/keyring/ssh", "run/keyring/control", "docker.sock"] {
            std::fs::write(base.join(file), "").expect("file");
        }
        let paths = [base.join("run"), base.join("tmux"), base.join("docker.sock"), base.join("missing")];
        let (folders, files) = covers(&paths, &[]);
        assert_eq!(
            (folders, files),
            (vec![base.join("run"), base.join("tmux")], vec![base.join("docker.sock")])
        );

        let (mut folders, mut files) = covers(&paths, &[base.join("run/keyring/ssh")]);
        folders.sort();
        files.sort();
        assert_eq!(folders, [base.join("run/bus-dir"), base.join("tmux")]);
        assert_eq!(files, [base.join("docker.sock"), base.join("run/bus"), base.join("run/keyring/control")]);
    }

    #[test]
    fn a_folder_of_more_entries_than_the_covers_is_covered_up_to_the_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir(base.join("run")).expect("run");
        // The kept socket makes the folder covered entry by entry.
        for index in 0..MAX_COVERS + 10 {
            std::fs::write(base.join(format!("run/socket-{index}")), "").expect("entry");
        }
        std::fs::write(base.join("run/ssh"), "").expect("kept");
        std::fs::write(base.join("docker.sock"), "").expect("after the bound");
        let (folders, files) = covers(&[base.join("run"), base.join("docker.sock")], &[base.join("run/ssh")]);
        assert!(folders.is_empty(), "{folders:?}");
        assert_eq!(files.len(), MAX_COVERS, "no more than the bound is covered");
        assert!(!files.contains(&base.join("docker.sock")), "what comes past it is not covered");
        assert!(!files.contains(&base.join("run/ssh")), "the kept path stays reachable");
    }

    #[test]
    fn a_path_reached_twice_through_a_link_is_covered_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir(base.join("run")).expect("run");
        std::fs::write(base.join("run/docker.sock"), "").expect("socket");
        std::os::unix::fs::symlink(base.join("run"), base.join("var-run")).expect("link");
        let (_, files) = covers(&[base.join("run/docker.sock"), base.join("var-run/docker.sock")], &[]);
        assert_eq!(files, [base.join("run/docker.sock")]);
    }
}
