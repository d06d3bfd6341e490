//! The processes between Heron and a confined program: the keeper, which lets nothing the
//! program started outlive it, and, where the program gets its own pid namespace, the
//! namespace's first process (its init), which the program runs under.
//!
//! The keeper: a process that leaves the program's process group (`setsid cmd &`, a
//! daemon's double fork) is out of reach of the group kill, but its parent's death hands it
//! to the nearest "child subreaper" ancestor, and the keeper is one: when the program ends
//! (or is killed with its group, or Heron dies), the keeper kills its group and then every
//! process handed to it, until none is left, and exits as the program did (its code, or
//! its signal). Inside a pid namespace the kernel does the sweeping: when the namespace's
//! init ends, every process in it is killed, wherever it went.
//!
//! The init: the first process of a pid namespace ignores the signals it has no handler
//! for, and every orphan of the namespace is handed to it. So the program does not run as
//! that process (a shell or `node` as pid 1 would ignore `kill -TERM` and leave zombies);
//! a small init does, forks the program, reaps orphans and exits as the program did.
//!
//! Both are made in the child after `fork` and before `exec`, before the program confines
//! itself: they are forks of Heron that never `exec` and never run code from outside, and
//! they stay out of the program's Landlock domain, so the program can signal neither.
//! Everything here runs between `fork` and `exec` of a multi-threaded parent, so it makes
//! only raw, async-signal-safe system calls on memory of its own stack (see the `sandbox`
//! module docs), and the keeper and the init end with `_exit`, never returning.
//!
//! The keeper moves itself out of the program's group into Heron's, so killing the group
//! (timeout, cancel) leaves it alive to clean up; Heron must therefore never SIGKILL the
//! keeper itself, only the group. The keeper and the init close every descriptor they
//! inherited, so the program's pipes end when its processes are gone and `spawn` learns of
//! a failed `exec` (or a failed confinement) from the program's side alone.
//!
//! Heron's death reaches the keeper as SIGTERM (`PR_SET_PDEATHSIG`), and the keeper's the
//! init as SIGKILL. The kernel sends it when the *thread* that spawned the keeper ends, so
//! spawn from async code on the runtime (whose worker threads live as long as Heron), never
//! from `spawn_blocking`, whose idle threads end after a few seconds.

use std::io;

/// The signals the keeper and the init wait for: a child ended, or a stop.
const WAITED: [libc::c_int; 5] = [libc::SIGCHLD, libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// The most rounds of killing what the keeper was handed (2 ms apart): a bound for a
/// command that forks as fast as it is killed; what is left after them goes on to init.
const SWEEPS: usize = 200;

/// Splits this child into the keeper (which never returns) and the program's side (which
/// returns `Ok`). When the kernel refuses to make a subreaper, the keeper still waits for
/// the program if `init` (a pid namespace needs a process outside it); otherwise no keeper
/// is made and this process goes on as the program.
///
/// With `init`, the program's side becomes a pid namespace's init, which cannot die of a
/// signal it has no handler for, so it cannot end as the program did; it sends the
/// program's wait status through a pipe instead, whose writing end the program's side gets
/// back here (for [`init_split`]), and the keeper ends as that status says.
///
/// # Safety
/// Only in a child between `fork` and `exec`, leading its own process group.
pub(super) unsafe fn split(init: bool) -> io::Result<Option<libc::c_int>> {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        let subreaper = libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) == 0;
        if !subreaper && !init {
            return Ok(None);
        }
        let mut status = [-1; 2];
        if init && libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
            return Err(io::Error::last_os_error());
        }
        let heron = libc::getppid();
        let (waited, before) = block_waited()?;
        let program = libc::fork();
        if program < 0 {
            let error = io::Error::last_os_error();
            libc::sigprocmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
            return Err(error);
        }
        if program == 0 {
            // The program's side: a subreaper's children are not subreapers; its mask is
            // its own again.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0 as libc::c_ulong, 0, 0, 0);
            libc::sigprocmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
            if status[0] >= 0 {
                libc::close(status[0]);
            }
            return Ok(init.then_some(status[1]));
        }
        if status[1] >= 0 {
            libc::close(status[1]);
        }
        keep(program, heron, &waited, status[0])
    }
}

/// In the first process of a new pid namespace: splits into the namespace's init (which
/// never returns) and the program (which returns `Ok`).
///
/// # Safety
/// Only in a child between `fork` and `exec`, as pid 1 of its namespace.
pub(super) unsafe fn init_split(status: libc::c_int) -> io::Result<()> {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        // The keeper's end is the namespace's end.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        let (waited, before) = block_waited()?;
        let program = libc::fork();
        if program < 0 {
            return Err(io::Error::last_os_error());
        }
        if program == 0 {
            libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong, 0, 0, 0);
            libc::sigprocmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
            libc::close(status);
            return Ok(());
        }
        wipe_environment();
        close_inherited(status);
        let mut ended = None;
        while ended.is_none() {
            let signal = libc::sigwaitinfo(&raw const waited, std::ptr::null_mut());
            if signal == libc::SIGCHLD {
                ended = reap(program);
            } else if signal > 0 {
                // Asked to stop: every process of the namespace goes (pid 1 is spared by
                // `kill(-1)`), then the init ends as if terminated.
                libc::kill(-1, libc::SIGKILL);
                break;
            }
        }
        if let Some(ended) = ended {
            libc::write(status, (&raw const ended).cast(), std::mem::size_of::<libc::c_int>());
        }
        // Leaving ends the namespace: the kernel kills whatever the program left.
        exit_as(ended)
    }
}

/// Blocks [`WAITED`] (before a fork, so no signal meant for the parent side is lost);
/// returns the set and the mask it replaced.
///
/// # Safety
/// As [`split`].
unsafe fn block_waited() -> io::Result<(libc::sigset_t, libc::sigset_t)> {
    // SAFETY: raw system calls on stack values.
    unsafe {
        let mut waited: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut waited);
        for signal in WAITED {
            libc::sigaddset(&raw mut waited, signal);
        }
        let mut before: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, &raw const waited, &raw mut before) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((waited, before))
    }
}

/// The keeper's life: wait for the program (or a stop), sweep, exit as the program did.
///
/// # Safety
/// Only in the child between `fork` and `exec`, with `waited` blocked.
unsafe fn keep(program: libc::pid_t, heron: libc::pid_t, waited: &libc::sigset_t, status: libc::c_int) -> ! {
    // SAFETY: raw system calls on stack values (see the module docs).
    unsafe {
        // Heron's death (however it dies) stops the keeper, which then sweeps.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
        let mut stop = libc::getppid() != heron;
        // A fork that never `exec`s still shows Heron's start-up environment (keys the
        // editor exported) in `/proc/<keeper>/environ`, which the command could read.
        wipe_environment();
        // Out of the command's group, so that killing the group leaves the keeper to sweep.
        // Heron's group may be out of sight (Heron itself runs in a pid namespace whose
        // processes do not include its group's leader): then the keeper stays in the group,
        // never kills it (that would kill the keeper), and sweeps what it is handed instead.
        let group = libc::getpgid(heron);
        let left = group > 0 && libc::setpgid(0, group) == 0;
        close_inherited(status);
        // Opened now, so a command that lowers the keeper's descriptor limit cannot keep it
        // from listing what it must kill.
        let children = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let mut ended = None;
        while ended.is_none() && !stop {
            let signal = libc::sigwaitinfo(waited, std::ptr::null_mut());
            if signal == libc::SIGCHLD {
                ended = reap(program);
            } else if signal > 0 {
                stop = true;
            }
        }
        // The command's group is led by the keeper's pid (the group it was made in).
        if left {
            libc::killpg(libc::getpid(), libc::SIGKILL);
        }
        sweep(children);
        // A namespace's init reports how the program really ended (see `split`).
        if ended.is_some() && status >= 0 {
            let mut reported: libc::c_int = 0;
            let size = std::mem::size_of::<libc::c_int>();
            if usize::try_from(libc::read(status, (&raw mut reported).cast(), size)).ok() == Some(size) {
                ended = Some(reported);
            }
        }
        exit_as(ended)
    }
}

/// Reaps every child that ended; the program's wait status once it is among them.
///
/// # Safety
/// As [`keep`].
unsafe fn reap(program: libc::pid_t) -> Option<libc::c_int> {
    let mut ended = None;
    loop {
        let mut status = 0;
        // SAFETY: writes the status on this stack frame.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        if pid <= 0 {
            return ended;
        }
        if pid == program {
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

/// Closes every descriptor the keeper inherited but `kept` (the status pipe, or -1): the
/// command's pipes and `spawn`'s report channel are the command's to hold, not the keeper's.
///
/// # Safety
/// As [`keep`].
unsafe fn close_inherited(kept: libc::c_int) {
    // SAFETY: raw system calls with integer arguments.
    unsafe {
        let close_range = |first: libc::c_int, last: libc::c_uint| {
            let first = libc::c_uint::try_from(first).unwrap_or(0);
            first > last || libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) == 0
        };
        let closed = match libc::c_uint::try_from(kept) {
            Ok(0) => close_range(1, libc::c_uint::MAX),
            Ok(kept) => close_range(0, kept - 1) && close_range(kept as libc::c_int + 1, libc::c_uint::MAX),
            Err(_) => close_range(0, libc::c_uint::MAX),
        };
        if closed {
            return;
        }
        // Before Linux 5.9: close up to the descriptor limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let most = if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            libc::c_int::try_from(limit.rlim_cur).unwrap_or(libc::c_int::MAX).min(1 << 20)
        } else {
            1024
        };
        for fd in (0..most).filter(|fd| *fd != kept) {
            libc::close(fd);
        }
    }
}

/// Exits with the program's code, or dies of its signal (without a core file); 143 (as
/// SIGTERM) when it was stopped before the program ended.
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
