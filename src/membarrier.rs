//! `membarrier(2)`: a full memory barrier run on other threads, so that a
//! rare path (a thread taking the MPI state from its owner, a rank about to
//! sleep) pays for the ordering that a frequent path (every call, every
//! doorbell ring) then need not. Unavailable on old kernels, under some
//! seccomp filters and in Miri: callers fall back to fences.

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

/// Registers this process as a target of `global`, once per process; false
/// if unavailable.
pub fn register_global() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| register(CMD_GLOBAL_EXPEDITED, CMD_REGISTER_GLOBAL_EXPEDITED))
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
}
