//! The congestion control of a link's sockets (`FERROCOLL_SOCKET_CC`).
//!
//! A job's links are short paths between its own hosts, and collective
//! traffic comes in bursts (a ring step sends a block at once, then waits).
//! BBR, the default on many hosts and on this one, paces each connection at
//! the bandwidth it estimated from earlier deliveries, and bursty traffic
//! keeps that estimate low: one connection stayed paced at 21-23 Gbit/s,
//! about 2.7 GB/s, while the path carried more. Reno sends what its window
//! allows at once. Measured on this 2-core machine between two network
//! namespaces joined by veth (MTU 1500), us, alternated runs of one build:
//!
//! | | reno | cubic | bbr (this host's default) |
//! |---|---|---|---|
//! | raw sockets, 1 MiB each way at once, 30 exchanges (median of 5) | 453 (fast runs 180) | 453 | 550 |
//! | 2 MiB each way | 362 | 924 | 1002 |
//! | allreduce, 4 ranks (2 hosts x 2), 2 MiB | 878-902 | 1137-1470 | 1617-1632 |
//! | allreduce, 4 ranks, 8 MiB | 5721-6239 | 8223-9216 | 8632-8709 |
//!
//! Over loopback (MTU 64 KiB) the choice made no difference. Reno is
//! built into every Linux kernel and allowed to unprivileged processes, so
//! setting it does not fail; `FERROCOLL_SOCKET_CC=system` keeps the host's
//! choice (worth it across sites, where round trips are long and a
//! loss-based control ramps up slowly).

use crate::param::{debug_log, DebugLevel};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a failure to set the control was logged.
static SAID: AtomicBool = AtomicBool::new(false);

/// Sets `sock`'s congestion control to `name` (`None`: the host's
/// default). A control the kernel lacks or refuses only costs speed, so it
/// is reported once at `FERROCOLL_DEBUG=warn` and the socket keeps the
/// host's default.
pub fn choose(sock: &TcpStream, name: Option<&str>) {
    let Some(name) = name else { return };
    // SAFETY: `sock` is an open socket; the option value is `name`'s bytes,
    // whose length is passed along (the kernel copies at most that many).
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 && !SAID.swap(true, Ordering::Relaxed) {
        let e = std::io::Error::last_os_error();
        debug_log(DebugLevel::Warn, || {
            format!(
                "FERROCOLL_SOCKET_CC={name}: the kernel refused it ({e}); links keep the host's \
                 congestion control (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
            )
        });
    }
}

/// The congestion control `sock` runs.
pub fn current(sock: &TcpStream) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` and `len` are live; `len` holds `buf`'s size, so the
    // kernel writes within it.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let bytes = &buf[..(len as usize).min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn sets_reno_on_both_ends() {
        let (a, b) = pair();
        choose(&a, Some("reno"));
        choose(&b, Some("reno"));
        assert_eq!(current(&a).as_deref(), Some("reno"));
        assert_eq!(current(&b).as_deref(), Some("reno"));
    }

    #[test]
    fn none_and_unknown_names_keep_the_default() {
        let (a, b) = pair();
        let default = current(&a).expect("a TCP socket has a congestion control");
        choose(&a, None);
        assert_eq!(current(&a), Some(default.clone()));
        choose(&b, Some("no-such-control"));
        assert_eq!(current(&b), Some(default));
    }
}
