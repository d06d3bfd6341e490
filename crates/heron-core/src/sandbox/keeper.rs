//! The keeper of a local command: a small process between Heron and the command's shell
//! that lets nothing the command started outlive it. A process that leaves the command's
//! process group (`setsid cmd &`, a daemon's double fork) is out of reach of the group
//! kill, but its parent's death hands it to the nearest "child subreaper" ancestor, and the
//! keeper is one: when the shell ends (or is killed with its group, or Heron dies), the
//! keeper kills its group and then every process handed to it, until none is left, and
//! exits as the shell did (its code, or its signal).
//!
//! It is made in the child after `fork` and before `exec` (after the sandbox's own step, so
//! it is confined too): that child becomes the keeper and forks once more for the shell.
//! Everything here runs between `fork` and `exec` of a multi-threaded parent, so it makes
//! only raw, async-signal-safe system calls on memory of its own stack (see the `sandbox`
//! module docs), and the keeper ends with `_exit`, never returning into the runtime.
//!
//! The keeper moves itself out of the command's group into Heron's, so killing the group
//! (timeout, cancel) leaves it alive to clean up; Heron must therefore never SIGKILL the
//! keeper itself, only the group. It closes every descriptor it inherited, so the
//! command's pipes end when the command's processes are gone and `spawn` learns of a
//! failed `exec` from the shell alone. Where the kernel refuses to make a subreaper, the
//! command runs without a keeper, as before.
//!
//! Heron's death reaches the keeper as SIGTERM (`PR_SET_PDEATHSIG`). The kernel sends it
//! when the *thread* that spawned the keeper ends, so spawn from async code on the runtime
//! (whose worker threads live as long as Heron), never from `spawn_blocking`, whose idle
//! threads end after a few seconds and would stop a running command with them.

use std::io;

/// The signals the keeper waits for: a child ended, or it is asked to stop (Heron died or
/// stopped it).
const WAITED: [libc::c_int; 5] = [libc::SIGCHLD, libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// The most rounds of killing what the keeper was handed (2 ms apart): a bound for a
/// command that forks as fast as it is killed; what is left after them goes on to init.
const SWEEPS: usize = 200;

/// Makes `command`'s child split into a keeper and the command (see the module docs). Call
/// it after the command's sandbox step and with `process_group(0)` set; then kill only the
/// group (led by the child's pid), never the child itself, and do not `kill_on_drop`.
pub fn install(command: &mut tokio::process::Command) {
    // SAFETY: `split` makes only async-signal-safe system calls on its own stack and never
    // returns in the keeper (it `_exit`s); in the command it returns to `exec`.
    unsafe {
        command.pre_exec(split);
    }
}

/// Runs in the forked child: returns in the command's process, never in the keeper.
fn split() -> io::Result<()> {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            // No keeper on this kernel: the command runs as before, in its group.
            return Ok(());
        }
        let heron = libc::getppid();
        let mut waited: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut waited);
        for signal in WAITED {
            libc::sigaddset(&raw mut waited, signal);
        }
        // Blocked before the fork, so no signal meant for the keeper is lost.
        let mut before: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, &raw const waited, &raw mut before) != 0 {
            return Err(io::Error::last_os_error());
        }
        let shell = libc::fork();
        if shell < 0 {
            let error = io::Error::last_os_error();
            libc::sigprocmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
            return Err(error);
        }
        if shell == 0 {
            // The command: a subreaper's children are not subreapers; its mask is its own.
            libc::sigprocmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
            scope_signals();
            return Ok(());
        }
        keep(shell, heron, &waited)
    }
}

/// The keeper's life: wait for the shell (or a stop), sweep, exit as the shell did.
///
/// # Safety
/// Only in the child between `fork` and `exec`, with `waited` blocked.
unsafe fn keep(shell: libc::pid_t, heron: libc::pid_t, waited: &libc::sigset_t) -> ! {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        // Heron's death (however it dies) stops the keeper, which then sweeps.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
        let mut stop = libc::getppid() != heron;
        // A fork that never `exec`s still shows Heron's start-up environment (keys the
        // editor exported) in `/proc/<keeper>/environ`, which the command could read.
        wipe_environment();
        // Out of the command's group, so that killing the group leaves the keeper to sweep.
        libc::setpgid(0, libc::getpgid(heron));
        close_inherited();
        // Opened now, so a command that lowers the keeper's descriptor limit cannot keep it
        // from listing what it must kill.
        let children = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let mut ended = None;
        while ended.is_none() && !stop {
            let signal = libc::sigwaitinfo(waited, std::ptr::null_mut());
            if signal == libc::SIGCHLD {
                ended = reap(shell);
            } else if signal > 0 {
                stop = true;
            }
        }
        // The command's group is led by the keeper's pid (the group it was made in).
        libc::killpg(libc::getpid(), libc::SIGKILL);
        sweep(children);
        exit_as(ended)
    }
}

/// Reaps every child that ended; the shell's wait status once it is among them.
///
/// # Safety
/// As [`keep`].
unsafe fn reap(shell: libc::pid_t) -> Option<libc::c_int> {
    let mut ended = None;
    loop {
        let mut status = 0;
        // SAFETY: writes the status on this stack frame.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        if pid <= 0 {
            return ended;
        }
        if pid == shell {
            ended = Some(status);
        }
    }
}

/// Kills every process handed to the keeper (its children, which orphans become), round
/// after round, until none is left.
///
/// # Safety
/// As [`keep`].
unsafe fn sweep(children: libc::c_int) {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        for _ in 0..SWEEPS {
            // Without the list (no `/proc`), what left the group cannot be found.
            let Some(killed) = kill_children(children) else { return };
            let mut status = 0;
            while libc::waitpid(-1, &raw mut status, libc::WNOHANG) > 0 {}
            if killed == 0 && libc::waitpid(-1, &raw mut status, libc::WNOHANG) < 0 {
                return;
            }
            // Give the killed a moment to die and their orphans to be handed over.
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000 };
            libc::nanosleep(&raw const pause, std::ptr::null_mut());
        }
    }
}

/// Sends SIGKILL to each child listed in `/proc/thread-self/children` (open as `fd`, read
/// anew from its start); how many it found, or `None` when the list cannot be read.
///
/// # Safety
/// As [`keep`].
unsafe fn kill_children(fd: libc::c_int) -> Option<usize> {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        if fd < 0 || libc::lseek(fd, 0, libc::SEEK_SET) != 0 {
            return None;
        }
        let mut buffer = [0u8; 4096];
        let (mut found, mut pid, mut digits) = (0usize, 0 as libc::pid_t, false);
        loop {
            let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
            let Ok(read) = usize::try_from(read) else { break };
            if read == 0 {
                break;
            }
            for &byte in &buffer[..read] {
                if byte.is_ascii_digit() {
                    pid = pid.saturating_mul(10).saturating_add(libc::pid_t::from(byte - b'0'));
                    digits = true;
                } else if digits {
                    libc::kill(pid, libc::SIGKILL);
                    found += 1;
                    (pid, digits) = (0, false);
                }
            }
        }
        if digits {
            libc::kill(pid, libc::SIGKILL);
            found += 1;
        }
        Some(found)
    }
}

/// `LANDLOCK_SCOPE_SIGNAL` (linux/landlock.h, ABI 6): no signal to a process outside the
/// domain.
const SCOPE_SIGNAL: u64 = 1 << 1;

/// `struct landlock_ruleset_attr` of ABI 6 and later.
#[repr(C)]
struct ScopeOnly {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// In the command, when the sandbox confined it (`no_new_privs` is set): a nested Landlock
/// domain that may not signal outside itself, so the command can neither kill nor stop its
/// keeper. The sandbox's own domain already scopes signals and abstract Unix sockets (so
/// Heron, the editor and the host's servers are out of reach), but the keeper shares that
/// domain, and a domain never scopes its own members. Best effort: a kernel before ABI 6
/// refuses the ruleset, and the command then runs as the sandbox alone confined it.
///
/// # Safety
/// Only in the child between `fork` and `exec`.
unsafe fn scope_signals() {
    // SAFETY: raw system calls on a stack value that outlives them.
    unsafe {
        if libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 {
            return;
        }
        let attr = ScopeOnly { handled_access_fs: 0, handled_access_net: 0, scoped: SCOPE_SIGNAL };
        let size = std::mem::size_of::<ScopeOnly>();
        let ruleset =
            libc::syscall(libc::SYS_landlock_create_ruleset, &raw const attr, size, 0 as libc::c_uint);
        let Ok(ruleset) = libc::c_int::try_from(ruleset) else { return };
        if ruleset >= 0 {
            libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0 as libc::c_uint);
            libc::close(ruleset);
        }
    }
}

/// Overwrites the keeper's copy of the start-up environment (`env_start..env_end` of
/// `/proc/self/stat`, fields 50 and 51) with zeros, so `/proc/<keeper>/environ` shows none
/// of it. The memory is the keeper's own copy: Heron's is untouched.
///
/// # Safety
/// As [`keep`].
unsafe fn wipe_environment() {
    // SAFETY: raw system calls on stack values; the range written is the one the kernel
    // reports as this process's environment, mapped and writable (the initial stack).
    unsafe {
        let fd = libc::open(c"/proc/self/stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut buffer = [0u8; 2048];
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        let Ok(read) = usize::try_from(read) else { return };
        let stat = &buffer[..read];
        // Fields count from the one after the command name, which ends at the last ')'.
        let Some(close) = stat.iter().rposition(|&b| b == b')') else { return };
        let (mut field, mut value) = (2usize, 0usize);
        let (mut start, mut end) = (0usize, 0usize);
        for &byte in &stat[close + 1..] {
            if byte.is_ascii_digit() {
                value = value.saturating_mul(10).saturating_add(usize::from(byte - b'0'));
            } else if byte == b' ' || byte == b'\n' {
                match field {
                    50 => start = value,
                    51 => end = value,
                    _ => {}
                }
                field += 1;
                value = 0;
            }
        }
        if start == 0 || end <= start || end - start > 1 << 24 {
            return;
        }
        let bytes = start as *mut u8;
        for offset in 0..end - start {
            bytes.add(offset).write_volatile(0);
        }
    }
}

/// Closes every descriptor the keeper inherited: the command's pipes and `spawn`'s report
/// channel are the command's to hold, not the keeper's.
///
/// # Safety
/// As [`keep`].
unsafe fn close_inherited() {
    // SAFETY: raw system calls with integer arguments.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, libc::c_uint::MAX, 0 as libc::c_uint) == 0
        {
            return;
        }
        // Before Linux 5.9: close up to the descriptor limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let most = if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            libc::c_int::try_from(limit.rlim_cur).unwrap_or(libc::c_int::MAX).min(1 << 20)
        } else {
            1024
        };
        for fd in 0..most {
            libc::close(fd);
        }
    }
}

/// Exits with the shell's code, or dies of its signal (without a core file); 143 (as
/// SIGTERM) when the keeper was stopped before the shell ended.
///
/// # Safety
/// As [`keep`].
unsafe fn exit_as(ended: Option<libc::c_int>) -> ! {
    // SAFETY: raw system calls on stack values.
    unsafe {
        match ended {
            Some(status) if libc::WIFEXITED(status) => libc::_exit(libc::WEXITSTATUS(status)),
            Some(status) if libc::WIFSIGNALED(status) => {
                let signal = libc::WTERMSIG(status);
                let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                libc::setrlimit(libc::RLIMIT_CORE, &raw const none);
                libc::signal(signal, libc::SIG_DFL);
                let mut only: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&raw mut only);
                libc::sigaddset(&raw mut only, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &raw const only, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal)
            }
            _ => libc::_exit(128 + libc::SIGTERM),
        }
    }
}
