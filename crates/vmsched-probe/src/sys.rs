//! The system calls the probes make, each behind a small safe function (the only `unsafe` in the
//! crate). Linux only: `pipe2`, `fork`, `sched_setaffinity`, `clock_nanosleep`,
//! `prctl(PR_SET_TIMERSLACK)` as glibc exposes them through the `libc` crate.
//!
//! A forked child runs only what [`fork`] is given, which must not allocate or take locks: the
//! parent may be a multi-threaded Python process, whose other threads do not exist in the child.

use std::io;

pub type Fd = libc::c_int;

fn os_err(call: &str) -> String {
    format!("{call}: {}", io::Error::last_os_error())
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pipe's read and write ends; both are closed on drop.
pub struct Pipe {
    pub r: Fd,
    pub w: Fd,
}

impl Pipe {
    pub fn new() -> Result<Pipe, String> {
        let mut fds = [0 as Fd; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(os_err("pipe2"));
        }
        Ok(Pipe {
            r: fds[0],
            w: fds[1],
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: the descriptors are this pipe's own.
        unsafe {
            libc::close(self.r);
            libc::close(self.w);
        }
    }
}

/// Writes one 8-byte word (a pipe write of that size is atomic). False on failure.
pub fn put(fd: Fd, v: u64) -> bool {
    let b = v.to_ne_bytes();
    // SAFETY: b is 8 readable bytes.
    unsafe { libc::write(fd, b.as_ptr().cast(), 8) == 8 }
}

/// Reads one 8-byte word, blocking; None at end of file or on failure.
pub fn get(fd: Fd) -> Option<u64> {
    let mut b = [0u8; 8];
    // SAFETY: b is 8 writable bytes.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 8) };
    (n == 8).then(|| u64::from_ne_bytes(b))
}

/// A trivial system call (getppid, through syscall(2) so that no library caches it).
pub fn null_syscall() -> i64 {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getppid) }
}

/// The calling thread's CPU affinity.
pub fn affinity() -> Result<libc::cpu_set_t, String> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(os_err("sched_getaffinity"));
    }
    Ok(set)
}

/// The CPUs of the calling thread's affinity.
pub fn allowed() -> Result<Vec<u32>, String> {
    let set = affinity()?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET only reads the set, at an index inside it.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}

/// Sets the calling thread's affinity.
pub fn set_affinity(set: &libc::cpu_set_t) -> Result<(), String> {
    // SAFETY: set is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) } != 0 {
        return Err(os_err("sched_setaffinity"));
    }
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin(cpu: u32) -> Result<(), String> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(format!("cpu {cpu}: beyond CPU_SETSIZE"));
    }
    // SAFETY: as in `affinity`; CPU_SET writes inside the set (checked above).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    set_affinity(&set).map_err(|e| format!("{e} (cpu {cpu})"))
}

/// Puts the calling thread's affinity back when dropped (the probes pin the caller).
pub struct KeepAffinity(libc::cpu_set_t);

impl KeepAffinity {
    pub fn new() -> Result<KeepAffinity, String> {
        affinity().map(KeepAffinity)
    }
}

impl Drop for KeepAffinity {
    fn drop(&mut self) {
        let _ = set_affinity(&self.0);
    }
}

/// A forked child; waited for on drop.
pub struct Child(libc::pid_t);

/// Forks; the child runs `f` and `_exit`s with its result (0 or 1). `f` must not allocate.
pub fn fork(f: impl FnOnce() -> bool) -> Result<Child, String> {
    // SAFETY: fork has no memory preconditions; the child runs only `f` and then _exit, never
    // returning into the caller's code (nor into an interpreter that called it).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    if pid == 0 {
        let ok = f();
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    Ok(Child(pid))
}

impl Child {
    /// Waits for the child; true when it exited with status 0.
    pub fn wait(self) -> bool {
        let pid = self.0;
        std::mem::forget(self);
        wait_pid(pid)
    }
}

fn wait_pid(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: pid is our child's; status is a valid int.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    rc == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: pid is our child's; killing and reaping it cannot affect other processes.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
        wait_pid(self.0);
    }
}

/// The calling thread's timer slack (ns).
pub fn timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

/// Sets the calling thread's timer slack (ns; 0 restores the default).
pub fn set_timer_slack(ns: u64) -> Result<(), String> {
    // SAFETY: PR_SET_TIMERSLACK takes a value, no pointer.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(os_err("prctl(PR_SET_TIMERSLACK)"));
    }
    Ok(())
}

/// Makes the calling thread SCHED_FIFO at `prio`; Err (and the thread unchanged) without the
/// permission (CAP_SYS_NICE or an RLIMIT_RTPRIO).
pub fn set_fifo(prio: i32) -> Result<(), String> {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: p is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(os_err("sched_setscheduler(SCHED_FIFO)"));
    }
    Ok(())
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `t_ns` (restarted on a signal).
pub fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid timespec; the remaining-time pointer may be null with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}
