//! A confined program's capabilities: none. Every set is cleared in the child before
//! `exec` (effective, permitted, inheritable, ambient, and the bounding set that `exec`
//! would otherwise hand back to root), and `no_new_privs` keeps a setuid program or a file
//! capability from bringing any back. As root this is what stops the rest of root's power:
//! making device nodes, raw and packet sockets, mounts, `reboot`, reading the kernel log,
//! tracing any process. A child that still holds a capability after this does not start.
//!
//! Runs between `fork` and `exec`: raw system calls on stack memory only (see `sandbox`).

/// The header and the two data words of `capget`/`capset` (version 3, 64 capabilities).
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const VERSION_3: u32 = 0x2008_0522;

/// The highest capability number any kernel may know; numbers past the running kernel's
/// last are refused with `EINVAL`, which ends the bounding-set loop early.
const MOST: u32 = 63;

/// Clears every capability set of this process and sets `no_new_privs`; fails (with the
/// errno) when a capability remains.
///
/// # Safety
/// Only in a child between `fork` and `exec`, or in a process about to `exec`.
pub(super) unsafe fn drop_all() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments touches no memory of ours; capget and capset
    // read and write the header and two data words on this stack frame.
    unsafe {
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0);
        // Needs CAP_SETPCAP, so it comes before the sets are cleared. Without it (an
        // ordinary user) it fails, and the bounding set then matters for no one: `exec`
        // gives a non-root, `no_new_privs` process nothing from it.
        for cap in 0..=MOST {
            if libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        let mut header = Header { version: VERSION_3, pid: 0 };
        let none = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        if libc::syscall(libc::SYS_capset, &raw mut header, none.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut held = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        let mut header = Header { version: VERSION_3, pid: 0 };
        if libc::syscall(libc::SYS_capget, &raw mut header, held.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let any = held.iter().any(|word| word.effective | word.permitted | word.inheritable != 0);
        // Root regains its bounding set at `exec`: it must be empty too.
        let bounded =
            (0..=MOST).any(|cap| libc::prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0, 0, 0) == 1);
        if any || (bounded && libc::geteuid() == 0) {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// Whether this process holds `CAP_SYS_ADMIN` in its own user namespace: then it makes its
/// namespaces directly; otherwise it needs a user namespace of its own first.
pub(super) fn holds_sys_admin() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let mut header = Header { version: VERSION_3, pid: 0 };
    let mut held = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: capget writes the header and the two data words on this stack frame.
    let read = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, held.as_mut_ptr()) };
    read == 0 && held[0].effective & (1 << CAP_SYS_ADMIN) != 0
}
