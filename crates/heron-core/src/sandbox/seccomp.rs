//! The system calls a confined program may not make, refused with `EPERM` by a seccomp
//! filter: mounting anything, making block or character device nodes, raw and packet
//! sockets, loading kernel code, rebooting, reading the kernel log; and, where it has no
//! pid namespace of its own, acting on processes it did not start (resource limits,
//! priorities, scheduling, another process's memory, attaching a tracer, and, where
//! Landlock does not scope signals, signalling Heron or the editor).
//!
//! Without capabilities most of these fail anyway; the filter is the wall that still
//! stands where a kernel bug or a user namespace of the program's own would give one back.
//! Everything else is allowed: the filter is a short deny list, not an allow list, so no
//! build tool or interpreter meets a refusal it does not expect.
//!
//! Built with `seccompiler` in the parent, once per process (the programs are plain data);
//! installed in the child with raw `prctl` calls. On x86-64 a second, hand-written filter
//! refuses the x32 and i386 entry points, whose call numbers differ and would otherwise
//! pass the deny list unseen.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The two programs a child installs.
#[derive(Debug)]
pub(super) struct Filters {
    /// The deny list.
    main: Vec<libc::sock_filter>,
    /// Other call conventions of the same machine, refused (x86-64 only; else empty).
    guard: Vec<libc::sock_filter>,
}

/// What the filter must also cover, from what this machine gives the child.
#[derive(Debug, Clone, Copy)]
pub(super) struct Needs {
    /// The child has no pid namespace: calls aimed at other processes are refused.
    pub outside_processes: bool,
    /// Landlock does not scope signals here: signals to Heron and its ancestors are refused.
    pub signals: bool,
}

/// `S_IFMT`, and the two node types no program may make.
const FILE_TYPE: u64 = 0o170_000;
const NODE_TYPES: [u64; 2] = [0o060_000, 0o020_000];

/// `PTRACE_ATTACH`, `PTRACE_SEIZE`: taking hold of a running process.
const ATTACH: [u64; 2] = [16, 0x4206];

/// Builds the filters for `needs`; `lineage` is Heron's pid and its ancestors' (the editor).
pub(super) fn build(needs: Needs, lineage: &[i32]) -> Result<Filters, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let always = [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_reboot,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_syslog,
        libc::SYS_acct,
    ];
    for call in always {
        rules.insert(call, Vec::new());
    }
    let node = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        NODE_TYPES.iter().map(|kind| rule(&[(arg, Len::Dword, Op::MaskedEq(FILE_TYPE), *kind)])).collect()
    };
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, node(1)?);
    rules.insert(libc::SYS_mknodat, node(2)?);
    let raw = u64::try_from(libc::SOCK_RAW).unwrap_or(3);
    let domain = |d: libc::c_int| u64::try_from(d).unwrap_or(u64::MAX);
    rules.insert(
        libc::SYS_socket,
        vec![
            rule(&[(0, Len::Dword, Op::Eq, domain(libc::AF_PACKET))])?,
            rule(&[(0, Len::Dword, Op::Eq, domain(libc::AF_INET)), (1, Len::Dword, Op::MaskedEq(0xf), raw)])?,
            rule(&[
                (0, Len::Dword, Op::Eq, domain(libc::AF_INET6)),
                (1, Len::Dword, Op::MaskedEq(0xf), raw),
            ])?,
        ],
    );
    if needs.outside_processes {
        // Zero names the caller itself in each of these.
        for (call, arg) in [
            (libc::SYS_prlimit64, 0),
            (libc::SYS_setpriority, 1),
            (libc::SYS_ioprio_set, 1),
            (libc::SYS_sched_setaffinity, 0),
            (libc::SYS_sched_setparam, 0),
            (libc::SYS_sched_setscheduler, 0),
            (libc::SYS_sched_setattr, 0),
        ] {
            rules.insert(call, vec![rule(&[(arg, Len::Dword, Op::Ne, 0)])?]);
        }
        rules.insert(libc::SYS_process_vm_readv, Vec::new());
        rules.insert(libc::SYS_process_vm_writev, Vec::new());
        rules.insert(
            libc::SYS_ptrace,
            ATTACH
                .iter()
                .map(|request| rule(&[(0, Len::Qword, Op::Eq, *request)]))
                .collect::<Result<_, _>>()?,
        );
    }
    if needs.signals {
        let pid = |p: i32| u64::from(p.cast_unsigned());
        let aimed: Vec<u64> = lineage.iter().flat_map(|p| [pid(*p), pid(p.wrapping_neg())]).collect();
        let at = |arg: u8| -> Result<Vec<SeccompRule>, String> {
            aimed.iter().map(|p| rule(&[(arg, Len::Dword, Op::Eq, *p)])).collect()
        };
        for call in [
            libc::SYS_kill,
            libc::SYS_tgkill,
            libc::SYS_pidfd_open,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
        ] {
            rules.insert(call, at(0)?);
        }
        // A thread id of Heron's would reach it; programs use `tgkill`.
        rules.insert(libc::SYS_tkill, Vec::new());
    }
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno(libc::EPERM)), arch)
            .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut main: Vec<libc::sock_filter> =
        program.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
    // The program starts with the architecture check, whose third instruction kills a
    // process calling through another convention. Refused instead, as the guard does: a
    // 32-bit program fails its calls rather than dying of SIGSYS.
    match main.get_mut(2) {
        Some(kill) if kill.code == RET && kill.k == libc::SECCOMP_RET_KILL_PROCESS => {
            kill.k = libc::SECCOMP_RET_ERRNO | errno(libc::ENOSYS);
        }
        _ => {
            return Err(
                "seccompiler's program does not start with the expected architecture check".to_owned()
            );
        }
    }
    Ok(Filters { main, guard: guard() })
}

/// `BPF_RET | BPF_K`.
const RET: u16 = 0x06;

fn errno(code: libc::c_int) -> u32 {
    u32::try_from(code).unwrap_or(1)
}

fn rule(conditions: &[(u8, Len, Op, u64)]) -> Result<SeccompRule, String> {
    let conditions = conditions
        .iter()
        .map(|(arg, len, op, value)| SeccompCondition::new(*arg, len.clone(), op.clone(), *value))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// On x86-64: call numbers with the x32 bit (`0x40000000`) are refused with `ENOSYS`.
/// (The i386 entry point has its own architecture value, refused by the main program.)
fn guard() -> Vec<libc::sock_filter> {
    if !cfg!(target_arch = "x86_64") {
        return Vec::new();
    }
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    // `struct seccomp_data`: `nr` at 0.
    vec![
        libc::sock_filter { code: LD_W_ABS, jt: 0, jf: 0, k: 0 },
        libc::sock_filter { code: JGE_K, jt: 0, jf: 1, k: 0x4000_0000 },
        libc::sock_filter { code: RET, jt: 0, jf: 0, k: libc::SECCOMP_RET_ERRNO | errno(libc::ENOSYS) },
        libc::sock_filter { code: RET, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
    ]
}

/// Installs the filters on this process (after `no_new_privs`).
///
/// # Safety
/// Only in a child between `fork` and `exec` (raw system calls on memory the filters own).
pub(super) unsafe fn install(filters: &Filters) -> std::io::Result<()> {
    for program in [&filters.guard, &filters.main] {
        if program.is_empty() {
            continue;
        }
        let fprog = libc::sock_fprog {
            len: u16::try_from(program.len()).unwrap_or(u16::MAX),
            filter: program.as_ptr().cast_mut(),
        };
        // SAFETY: the program outlives the call, which copies it into the kernel.
        let set = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &raw const fprog,
                0,
                0,
            )
        };
        if set != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_build_for_every_combination_of_needs() {
        for (outside_processes, signals) in [(false, false), (true, false), (false, true), (true, true)] {
            let filters = build(Needs { outside_processes, signals }, &[1234, 1]).expect("builds");
            assert!(filters.main.len() > 20, "{outside_processes} {signals}: {}", filters.main.len());
            assert_eq!(filters.guard.is_empty(), !cfg!(target_arch = "x86_64"));
        }
    }
}
