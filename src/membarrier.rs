//! `membarrier(2)`: a full memory barrier run on other threads, so that a
//! rare path (a thread taking the MPI state from its owner, a rank about to
//! sleep) pays for the ordering that a frequent path (every call, every
//! doorbell ring) then need not. Unavailable on old kernels, under some
//! seccomp filters and in Miri: callers fall back to fences.

use crate::bootstrap::bind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Commands (linux/membarrier.h).
const CMD_QUERY: libc::c_int = 0;
const CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;
const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn call(cmd: libc::c_int) -> libc::c_long {
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: membarrier takes two integers and touches no user memory.
    unsafe {
        libc::syscall(libc::SYS_membarrier, cmd, 0)
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = cmd;
        -1
    }
}

/// Whether the kernel offers both commands and registering with the
/// second succeeds.
fn register(run: libc::c_int, reg: libc::c_int) -> bool {
    let want = (run | reg) as libc::c_long;
    let cmds = call(CMD_QUERY);
    cmds >= 0 && cmds & want == want && call(reg) == 0
}

/// Registers this process for `private`; false if unavailable.
pub fn register_private() -> bool {
    register(CMD_PRIVATE_EXPEDITED, CMD_REGISTER_PRIVATE_EXPEDITED)
}

/// Runs a full barrier on every running thread of this process (after
/// `register_private`); false if the call failed.
pub fn private() -> bool {
    call(CMD_PRIVATE_EXPEDITED) == 0
}

/// The CPU the thread that registered this process for `global` was bound
/// to alone then (`usize::MAX`: it was not, or nothing registered).
static REGISTERED_ON: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Registers this process as a target of `global`, once per process; false
/// if unavailable.
pub fn register_global() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let on = bind::alone_on();
        let ok = register(CMD_GLOBAL_EXPEDITED, CMD_REGISTER_GLOBAL_EXPEDITED);
        if let (true, Some(cpu)) = (ok, on) {
            REGISTERED_ON.store(cpu, Ordering::Relaxed);
        }
        ok
    })
}

/// Whether `global` run by another process surely reaches the calling
/// thread: this process registered (`register_global`) while the thread
/// was bound to one CPU alone, and it still is.
///
/// The kernel sends these barriers only to CPUs marked for them. It marks
/// the CPU a process registers on, and any CPU that switches to the process
/// from another one; but a CPU that ran the process before it registered
/// and then only idled still holds its address space, switches back to it
/// as to the same one, and stays unmarked: its barriers skip the thread
/// there for good (Linux 6.18 here, a process that ran on CPU 1, registered
/// on CPU 0 and went back: 0 of 1000 barriers from another process reached
/// it, 1000 of 1000 where it registered on CPU 1). A bound thread that
/// registered where it is bound runs on a marked CPU only.
pub fn reaches_me() -> bool {
    if !register_global() {
        return false;
    }
    let on = REGISTERED_ON.load(Ordering::Relaxed);
    on != usize::MAX && bind::alone_on() == Some(on)
}

/// Runs a full barrier on every running thread of every process that
/// called `register_global`; false if the call failed.
pub fn global() -> bool {
    call(CMD_GLOBAL_EXPEDITED) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_barriers_run() {
        if !register_global() {
            eprintln!("skipped: membarrier (global expedited) unavailable");
            return;
        }
        assert!(register_global(), "registration is remembered");
        assert!(global());
    }

    #[test]
    fn a_thread_free_to_move_is_not_counted_on() {
        // A new thread may run on any CPU the process may use.
        let (free, reached) = std::thread::spawn(|| (bind::alone_on().is_none(), reaches_me()))
            .join()
            .unwrap();
        if free {
            assert!(!reached, "the barriers may miss a thread that moves");
        } else {
            eprintln!("skipped: this process may use one CPU only");
        }
    }
}
