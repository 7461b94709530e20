//! Setting up the TCP links of a job: the address this rank listens on
//! (`FERROCOLL_SOCKET_IFNAME`), and one authenticated connection per peer
//! (higher ranks connect to lower ones, so no pair dials twice).

use super::auth::{handshake, Role, Secret};
use crate::error::{Error, Result};
use crate::param::{say, MAX_NSOCKS};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// IPv4 addresses of the interfaces that are up: (name, address).
pub fn interfaces() -> Vec<(String, Ipv4Addr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below; each node
    // and its name/address stay valid until then.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut p = head;
        while !p.is_null() {
            let ifa = &*p;
            let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
            if up && !ifa.ifa_addr.is_null() && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                    .to_string_lossy()
                    .into_owned();
                out.push((name, ip));
            }
            p = ifa.ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}

/// Whether interface `name` passes a `FERROCOLL_SOCKET_IFNAME` filter:
/// comma-separated names or prefixes; a leading `^` excludes them instead;
/// a leading `=` makes them exact names (as NCCL's `NCCL_SOCKET_IFNAME`).
pub fn ifname_matches(filter: &str, name: &str) -> bool {
    let (exclude, rest) = match filter.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, filter),
    };
    let (exact, rest) = match rest.strip_prefix('=') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let hit = rest
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| {
            if exact {
                name == p
            } else {
                name.starts_with(p)
            }
        });
    hit != exclude
}

/// The address to listen on: the first interface passing `filter`, or
/// without one the first non-loopback interface; loopback when `local`
/// (every rank on this host) and no filter is given.
pub fn choose_ip(filter: Option<&str>, local: bool) -> Result<IpAddr> {
    let ifs = interfaces();
    let pick = match filter {
        Some(f) => ifs.iter().find(|(n, _)| ifname_matches(f, n)),
        None if local => None,
        None => ifs
            .iter()
            .find(|(_, ip)| !ip.is_loopback())
            .or_else(|| ifs.first()),
    };
    match (pick, filter) {
        (Some((_, ip)), _) => Ok(IpAddr::V4(*ip)),
        (None, None) => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        (None, Some(f)) => Err(Error::InvalidArg(format!(
            "FERROCOLL_SOCKET_IFNAME={f} matches no interface that is up (have: {})",
            ifs.iter()
                .map(|(n, ip)| format!("{n} {ip}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What a dialling rank says about itself in the handshake: its rank, and
/// which of how many sockets to the acceptor this one is.
fn dial_id(rank: usize, idx: usize, n: usize) -> u64 {
    rank as u64 | (idx as u64) << 32 | (n as u64) << 48
}

/// (rank, socket index, socket count) from `dial_id`, if well formed.
fn parse_dial_id(id: u64) -> Option<(usize, usize, usize)> {
    let (rank, idx, n) = (id & 0xffff_ffff, (id >> 32) & 0xffff, id >> 48);
    (n >= 1 && n <= MAX_NSOCKS as u64 && idx < n).then_some((
        rank as usize,
        idx as usize,
        n as usize,
    ))
}

/// Connects world rank `me` to every rank whose entry in `addrs` is set
/// (their listening addresses), with `nsocks` sockets per pair: ranks
/// below `me` are dialled (our `nsocks` counts), ranks above are accepted
/// on `listener` (theirs counts). Connections that fail the handshake or
/// claim a rank or socket that is not expected are dropped and logged.
/// Returns (peer, sockets) pairs.
pub fn connect_all(
    me: usize,
    listener: &TcpListener,
    addrs: &[Option<SocketAddr>],
    secret: &Secret,
    deadline: Instant,
    nsocks: usize,
) -> Result<Vec<(usize, Vec<TcpStream>)>> {
    let nsocks = nsocks.clamp(1, MAX_NSOCKS);
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut out = Vec::new();
    for (p, a) in addrs.iter().enumerate().take(me) {
        let Some(a) = a else { continue };
        let socks = (0..nsocks)
            .map(|i| dial(me, dial_id(me, i, nsocks), p, *a, secret, deadline))
            .collect::<Result<Vec<_>>>()?;
        out.push((p, socks));
    }
    // Sockets accepted so far from each expected peer.
    let mut from: Vec<(usize, Vec<Option<TcpStream>>)> = (me + 1..addrs.len())
        .filter(|&p| addrs[p].is_some())
        .map(|p| (p, Vec::new()))
        .collect();
    let complete = |v: &Vec<Option<TcpStream>>| !v.is_empty() && v.iter().all(Option::is_some);
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::os("listening for peers", e))?;
    while !from.iter().all(|(_, v)| complete(v)) {
        let (mut s, addr) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if left().is_zero() {
                    let waiting: Vec<usize> = from
                        .iter()
                        .filter(|(_, v)| !complete(v))
                        .map(|(p, _)| *p)
                        .collect();
                    return Err(timeout(me, &waiting));
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => return Err(Error::os("accepting a peer", e)),
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(
            left().clamp(Duration::from_millis(100), Duration::from_secs(10)),
        ));
        let id = match handshake(&mut s, secret, Role::Acceptor, me as u64) {
            Ok(id) => id,
            Err(e) => {
                say(&format!(
                    "ferrocoll: rank {me}: rejected connection from {addr}: {e}"
                ));
                continue;
            }
        };
        let slot = parse_dial_id(id).and_then(|(rank, idx, n)| {
            let (_, got) = from.iter_mut().find(|(p, _)| *p == rank)?;
            if got.is_empty() {
                got.resize_with(n, || None);
            }
            (got.len() == n && got[idx].is_none()).then(|| &mut got[idx])
        });
        match slot {
            Some(slot) => {
                let _ = s.set_read_timeout(None);
                *slot = Some(s);
            }
            None => say(&format!(
                "ferrocoll: rank {me}: dropped connection from {addr}: claims rank {} socket {} of {}, which is not expected",
                id & 0xffff_ffff,
                (id >> 32) & 0xffff,
                id >> 48
            )),
        }
    }
    for (p, v) in from {
        out.push((p, v.into_iter().map(|s| s.expect("complete")).collect()));
    }
    Ok(out)
}

fn timeout(me: usize, waiting: &[usize]) -> Error {
    Error::Timeout {
        secs: crate::param::params().setup_timeout.as_secs_f64(),
        op: "TCP set-up",
        peers: format!(
            "{} (rank {me} waited for them to connect)",
            waiting
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// Dials rank `p` at `a` until it answers and proves it holds the secret.
fn dial(
    me: usize,
    id: u64,
    p: usize,
    a: SocketAddr,
    secret: &Secret,
    deadline: Instant,
) -> Result<TcpStream> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timeout(me, &[p]));
        }
        let Ok(mut s) = TcpStream::connect_timeout(&a, left.min(Duration::from_secs(2))) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let _ = s.set_read_timeout(Some(
            left.clamp(Duration::from_millis(100), Duration::from_secs(10)),
        ));
        let id = handshake(&mut s, secret, Role::Connector, id)
            .map_err(|e| Error::InvalidArg(format!("connecting to rank {p} at {a}: {e}")))?;
        if id as usize != p {
            return Err(Error::InvalidArg(format!(
                "the listener at {a} is rank {id}, not rank {p}"
            )));
        }
        let _ = s.set_read_timeout(None);
        return Ok(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifname_filters() {
        assert!(ifname_matches("eth", "eth0"));
        assert!(!ifname_matches("^eth", "eth0"));
        assert!(ifname_matches("^eth,lo", "veth1"));
        assert!(!ifname_matches("=eth", "eth0"));
        assert!(ifname_matches("=eth0,lo", "lo"));
        assert!(choose_ip(Some("no-such-if"), false).is_err());
        assert!(choose_ip(Some("lo"), false).unwrap().is_loopback());
    }

    #[test]
    fn dial_ids_round_trip_and_reject_nonsense() {
        assert_eq!(parse_dial_id(dial_id(5, 0, 1)), Some((5, 0, 1)));
        assert_eq!(parse_dial_id(dial_id(70_000, 3, 4)), Some((70_000, 3, 4)));
        // A plain rank (no socket count) and out-of-range sockets are refused.
        assert_eq!(parse_dial_id(5), None);
        assert_eq!(parse_dial_id(dial_id(1, 4, 4)), None);
        assert_eq!(parse_dial_id(dial_id(1, 0, MAX_NSOCKS + 1)), None);
    }
}
