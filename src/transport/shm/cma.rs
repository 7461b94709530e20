//! Cross-memory attach: a rank reads a message straight out of its
//! sender's memory (`process_vm_readv`), one copy instead of the ring's
//! two. Ranks of one job run as one user, which the kernel requires; where
//! it still refuses (a container's seccomp or Yama policy), the caller
//! falls back to the ring.

/// Bytes one `process_vm_readv` call is asked for: the kernel pins the
/// sender's pages in batches anyway, and a bounded call keeps one fault or
/// refusal from wasting a long copy.
const CALL_MAX: usize = 1 << 30;

/// Lets the job's other ranks read this process's memory where the Yama
/// security module restricts such access to a process's ancestors
/// (`kernel.yama.ptrace_scope` 1, Ubuntu's default): ranks are siblings,
/// so every read would be refused there. Open MPI does the same for its
/// reads. Where Yama is absent or stricter, nothing changes (the call
/// fails quietly, and refused reads fall back to the rings).
pub fn let_peers_read() {
    // SAFETY: PR_SET_PTRACER takes plain integers and touches no memory of
    // ours.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// Whether this process may read memory this way at all (a container's
/// seccomp policy may forbid the call outright): a read of its own memory,
/// made once. Tests ask it; the library learns from its reads.
pub fn allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let word = [7u8; 8];
        let mut got = [0u8; 8];
        read(std::process::id(), word.as_ptr() as u64, &mut got).is_ok() && got == word
    })
}

/// Why a read failed: the `errno` of the failing call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused(pub i32);

/// `process_vm_readv` or `process_vm_writev`: which way the bytes go.
#[derive(Clone, Copy)]
enum Way {
    /// From the other process into ours.
    In,
    /// From ours into the other process.
    Out,
}

/// Moves `len` bytes between `local` in this process and address `remote`
/// of process `pid`, the way `way` says, in calls of at most `CALL_MAX`.
///
/// # Safety
/// `local` must be valid for `len` bytes: writable and not otherwise in use
/// for `Way::In`, readable for `Way::Out` (the kernel then only reads it).
unsafe fn transfer(
    pid: u32,
    remote: u64,
    local: *mut u8,
    len: usize,
    way: Way,
) -> Result<(), Refused> {
    let mut done = 0;
    while done < len {
        let want = (len - done).min(CALL_MAX);
        let here = libc::iovec {
            iov_base: local.wrapping_add(done).cast(),
            iov_len: want,
        };
        let far = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: want,
        };
        let pid = pid as libc::pid_t;
        // SAFETY: `here` covers `want` bytes inside the caller's range (this
        // function's contract); the kernel checks the remote range, in the
        // other process.
        let got = unsafe {
            match way {
                Way::In => libc::process_vm_readv(pid, &here, 1, &far, 1, 0),
                Way::Out => libc::process_vm_writev(pid, &here, 1, &far, 1, 0),
            }
        };
        match got {
            n if n > 0 => done += n as usize,
            0 => return Err(Refused(libc::EFAULT)),
            _ => {
                return Err(Refused(
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                ))
            }
        }
    }
    Ok(())
}

/// Reads `dst.len()` bytes at address `remote` of process `pid` into `dst`.
/// Fails (with nothing promised about `dst`'s contents) when the kernel
/// refuses or the range is not mapped there.
pub fn read(pid: u32, remote: u64, dst: &mut [u8]) -> Result<(), Refused> {
    // SAFETY: `dst` is borrowed mutably for the call, so writable and ours.
    unsafe { transfer(pid, remote, dst.as_mut_ptr(), dst.len(), Way::In) }
}

/// Writes `src` at address `remote` of process `pid`, as `read` reads. The
/// remote range is the other process's to lend (a receive that asked).
pub fn write(pid: u32, remote: u64, src: &[u8]) -> Result<(), Refused> {
    // SAFETY: `src` is borrowed for the call and readable; `Way::Out` only
    // reads it.
    unsafe { transfer(pid, remote, src.as_ptr().cast_mut(), src.len(), Way::Out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_refuses_unmapped() {
        let src: Vec<u8> = (0..300_000u32).map(|i| (i * 31 + 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let me = std::process::id();
        match read(me, src.as_ptr() as u64, &mut dst) {
            Ok(()) => assert_eq!(dst, src),
            // Some sandboxes forbid the call altogether: then it must say so.
            Err(Refused(e)) => assert!(e == libc::EPERM || e == libc::ENOSYS, "errno {e}"),
        }
        let mut one = [0u8; 8];
        assert!(read(me, 8, &mut one).is_err(), "page 0 is never mapped");
        assert_eq!(read(me, 8, &mut []), Ok(()));
        let mut back = vec![0u8; src.len()];
        match write(me, back.as_mut_ptr() as u64, &src) {
            Ok(()) => assert_eq!(back, src),
            Err(Refused(e)) => assert!(e == libc::EPERM || e == libc::ENOSYS, "errno {e}"),
        }
        assert!(write(me, 8, &one).is_err(), "page 0 is never mapped");
    }
}
