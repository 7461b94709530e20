//! Kernel buffer sizes of a link's sockets (`FERROCOLL_SOCKET_SNDBUF`,
//! `FERROCOLL_SOCKET_RCVBUF`).
//!
//! Left to autotuning, a socket's send buffer grows to megabytes and one
//! `sendmsg` hands the kernel a whole large message. When both ends of a
//! link send at once (every exchange of a ring), each end's socket is busy
//! in that long send while the other's segments arrive, so they queue on
//! the socket's backlog, show up late and out of order, and trigger
//! spurious fast retransmits. A bounded send buffer keeps each send short,
//! so arrivals are read in between. Measured on this 2-core machine over
//! loopback, 2 ranks exchanging with `MPI_Sendrecv` (us per exchange,
//! medians of 4 alternated rounds, Open MPI's TCP transport in the same
//! rounds):
//!
//! | send / receive buffer | 1 MiB | 8 MiB |
//! |---|---|---|
//! | kernel autotuning (before) | 250-266 | 2610-2810 |
//! | 128 KiB / 4 MiB | 271-282 | 1750-1810 |
//! | 256 KiB / 4 MiB | 215-262 | 1810-1840 |
//! | 512 KiB / 4 MiB (default) | 153-231 | 1650-1720 |
//! | Open MPI (`btl tcp`) | 136-150 | 2340-2510 |
//!
//! Larger send buffers (1-2 MiB) lost the gain (8 MiB: 2870-3180 us), and
//! a 1 MiB receive buffer was slower than autotuning. The kernel doubles
//! both values and caps them at `net.core.wmem_max` / `rmem_max`; a fixed
//! receive buffer also stops autotuning, so it is only set where
//! `rmem_max` allows the size asked for (many distributions cap it near
//! 200 KiB, which would shrink the window below what autotuning reaches).

use crate::param::{debug_log, DebugLevel};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Whether the receive buffer note was logged.
static SAID: AtomicBool = AtomicBool::new(false);

/// Sets `sock`'s send buffer to `snd` bytes and its receive buffer to
/// `rcv` bytes (0: leave the kernel's autotuning). Failures only cost speed,
/// so they are reported at `FERROCOLL_DEBUG=warn`, not returned.
pub fn size(sock: &TcpStream, snd: usize, rcv: usize) {
    if snd > 0 {
        set(sock, libc::SO_SNDBUF, snd);
    }
    if rcv > 0 {
        match rmem_max() {
            Some(max) if max >= rcv => set(sock, libc::SO_RCVBUF, rcv),
            // Said once per process, not once per socket.
            max if !SAID.swap(true, Ordering::Relaxed) => debug_log(DebugLevel::Info, || {
                format!(
                    "TCP receive buffers left to autotuning: net.core.rmem_max is {max:?}, \
                     below FERROCOLL_SOCKET_RCVBUF={rcv}"
                )
            }),
            _ => {}
        }
    }
}

fn set(sock: &TcpStream, opt: libc::c_int, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `sock` is an open socket; the option value is a live c_int
    // whose size is passed along.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        debug_log(DebugLevel::Warn, || {
            format!("setting a TCP socket buffer to {bytes} bytes failed: {e}")
        });
    }
}

/// `net.core.rmem_max`, read once (`None` where /proc does not say).
fn rmem_max() -> Option<usize> {
    static MAX: OnceLock<Option<usize>> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn opt(sock: &TcpStream, opt: libc::c_int) -> usize {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are live and sized for the option.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        v as usize
    }

    #[test]
    fn sets_send_buffer_and_receive_buffer_where_allowed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        size(&s, 64 * 1024, 256 * 1024);
        // The kernel doubles what it is given (bookkeeping overhead).
        assert_eq!(opt(&s, libc::SO_SNDBUF), 128 * 1024);
        let rcv = opt(&s, libc::SO_RCVBUF);
        match rmem_max() {
            Some(max) if max >= 256 * 1024 => assert_eq!(rcv, 512 * 1024),
            _ => assert_ne!(rcv, 512 * 1024, "set beyond rmem_max"),
        }
    }

    #[test]
    fn zero_leaves_the_kernel_default() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let b = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        size(&b, 0, 0);
        assert_eq!(opt(&a, libc::SO_SNDBUF), opt(&b, libc::SO_SNDBUF));
        assert_eq!(opt(&a, libc::SO_RCVBUF), opt(&b, libc::SO_RCVBUF));
    }
}
