//! One process's TCP links and the thread that helps move their bytes.
//!
//! While the engine waits it moves the bytes itself: it sends straight
//! from the caller's buffer and receives straight into the posted receive,
//! so a large message is copied only by the kernel. What the socket does
//! not take stays in the caller's buffer; only a small remainder is queued,
//! so small sends still complete at once. While the engine sleeps or is
//! back in the program, a progress thread polls the sockets: it sends
//! what is queued, reads ahead into a bounded receive buffer (a full one
//! stops reading, so TCP flow control pushes back on the sender), and
//! rings the rank's doorbell when bytes arrive or a full socket has room
//! again. End of file or an error marks the peer dead, which fails the
//! operations still waiting for it.
//!
//! A link may run over several sockets (`FERROCOLL_NSOCKS`): its byte
//! stream is cut into `STRIPE`-byte pieces dealt to the sockets in turn, so
//! both ends know which socket carries each byte without extra headers.

use super::rxbuf::RxBuf;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most bytes queued for sending to one peer. Larger remainders wait in
/// the caller's buffer: a queued byte costs one more copy.
const TX_MAX: usize = 64 << 10;
/// Most bytes read ahead from one peer before the engine takes them.
const RX_MAX: usize = 4 << 20;
/// A full receive buffer is read into again once the engine took it below
/// this: one wake-up per 2 MiB taken, not one per message (small
/// messages behind a full buffer cost a wake-up each, and a backlog of
/// them took seconds to drain).
const RX_RESUME: usize = RX_MAX / 2;
/// Most bytes the engine reads ahead into the receive buffer when it is
/// not reading into a known destination: a small message's header and data
/// in one call, without copying much of a large one twice.
const ENGINE_FILL: usize = 64 << 10;
/// Header and payload up to this size go out in one send.
const JOIN_MAX: usize = 4096;
/// Bytes moved per read call of the progress thread.
const IO_CHUNK: usize = 256 * 1024;
/// Bytes of a link's stream carried by one socket before the next takes
/// over, when a link has several.
pub const STRIPE: usize = 128 << 10;

/// A link's sockets and the stream positions they carry.
struct Socks(Vec<TcpStream>);

impl Socks {
    /// The socket carrying stream position `pos`, and how many bytes from
    /// there on it carries before the next socket takes over.
    fn at(&self, pos: u64) -> (&TcpStream, usize) {
        let n = self.0.len();
        if n == 1 {
            return (&self.0[0], usize::MAX);
        }
        let piece = pos / STRIPE as u64;
        let left = STRIPE - (pos % STRIPE as u64) as usize;
        (&self.0[(piece % n as u64) as usize], left)
    }
}

/// The sending side: bytes queued, and how many the kernel took so far.
#[derive(Default)]
struct Tx {
    queue: VecDeque<u8>,
    pos: u64,
}

/// The receiving side: bytes read ahead, and how many were read so far.
#[derive(Default)]
struct Rx {
    buf: RxBuf,
    pos: u64,
}

/// One connection's state, shared between the engine and the thread.
struct Conn {
    socks: Socks,
    tx: Mutex<Tx>,
    rx: Mutex<Rx>,
    rx_len: AtomicUsize,
    /// The engine has bytes the socket would not take: the thread wakes it
    /// when there is room.
    tx_blocked: AtomicBool,
    dead: AtomicBool,
    why: Mutex<String>,
    /// When the connection was found dead (the first of several dead
    /// peers is the likely cause: the others may have quit because of it).
    died_at: Mutex<Option<std::time::Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain bytes behind.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The engine's end of one TCP connection.
pub struct TcpLink {
    c: Arc<Conn>,
    wake: Arc<OwnedFd>,
}

impl TcpLink {
    /// Sends as much of `a` then `b` as the socket takes now, queueing a
    /// small remainder; returns the bytes taken. A dead link takes
    /// everything: nothing will read it, and the wait fails on the dead
    /// peer instead.
    pub fn write_parts(&mut self, a: &[u8], b: &[u8]) -> usize {
        let total = a.len() + b.len();
        if self.c.dead.load(Ordering::Acquire) {
            return total;
        }
        let mut tx = lock(&self.c.tx);
        if !tx.queue.is_empty() {
            flush(&self.c, &mut tx);
        }
        let mut sent = 0;
        if tx.queue.is_empty() {
            sent = send_parts(&self.c, &mut tx.pos, [a, b]);
        }
        let rest = total - sent;
        if rest == 0 || self.c.dead.load(Ordering::Acquire) {
            return total;
        }
        if tx.queue.len() + rest <= TX_MAX {
            let (ra, rb) = after([a, b], sent);
            tx.queue.extend(ra);
            tx.queue.extend(rb);
            drop(tx);
            self.kick();
            return total;
        }
        self.c.tx_blocked.store(true, Ordering::Release);
        sent
    }

    /// Writes `a` then `b` only if both are taken now.
    pub fn write_both(&mut self, a: &[u8], b: &[u8]) -> bool {
        let n = a.len() + b.len();
        if self.c.dead.load(Ordering::Acquire) {
            return true;
        }
        if n > JOIN_MAX || lock(&self.c.tx).queue.len() + n > TX_MAX {
            // Large: the caller sends it in parts, straight from its buffer.
            return false;
        }
        // One send, so a small message leaves as one segment.
        let mut both = [0u8; JOIN_MAX];
        both[..a.len()].copy_from_slice(a);
        both[a.len()..n].copy_from_slice(b);
        let taken = self.write_parts(&both[..n], &[]);
        debug_assert_eq!(taken, n);
        true
    }

    /// Bytes received and not yet read. With nothing read ahead the engine
    /// reads the socket itself (unless the progress thread is at it), so a
    /// polling rank does not wait for that thread to be scheduled.
    pub fn readable(&self) -> usize {
        if let Ok(mut tx) = self.c.tx.try_lock() {
            // Queued sends leave from here too while the engine polls.
            if !tx.queue.is_empty() && !self.c.dead.load(Ordering::Acquire) {
                flush(&self.c, &mut tx);
            }
        }
        let n = self.c.rx_len.load(Ordering::Acquire);
        if n > 0 || self.c.dead.load(Ordering::Acquire) {
            return n;
        }
        if let Ok(mut rx) = self.c.rx.try_lock() {
            fill(&self.c, &mut rx, ENGINE_FILL);
        }
        self.c.rx_len.load(Ordering::Acquire)
    }

    /// Hands up to `max` received bytes to `f` in order, consuming them.
    pub fn read_with(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut rx = lock(&self.c.rx);
        let n = max.min(rx.buf.len());
        f(rx.buf.front(n));
        self.consumed(&mut rx, n);
        n
    }

    /// Fills `dst` from the bytes read ahead, or else straight from the
    /// socket; returns how many bytes it got (0: none arrived yet).
    pub fn read_into(&mut self, dst: &mut [u8]) -> usize {
        let mut rx = lock(&self.c.rx);
        if rx.buf.len() > 0 {
            let n = dst.len().min(rx.buf.len());
            crate::copy::copy(&mut dst[..n], rx.buf.front(n));
            self.consumed(&mut rx, n);
            return n;
        }
        if self.c.dead.load(Ordering::Acquire) {
            return 0;
        }
        recv_into(&self.c, &mut rx.pos, dst)
    }

    fn consumed(&self, rx: &mut Rx, n: usize) {
        rx.buf.consume(n);
        self.c.rx_len.fetch_sub(n, Ordering::Release);
        if rx.buf.len() < RX_RESUME && rx.buf.len() + n >= RX_RESUME {
            // The thread stopped reading this socket; it may resume now.
            self.kick();
        }
    }

    /// Whether the connection ended (peer exited, crashed or reset it).
    pub fn is_dead(&self) -> bool {
        self.c.dead.load(Ordering::Acquire) && self.readable() == 0
    }

    /// Whether the connection was found dead (one atomic load: checked
    /// before every send).
    pub fn has_failed(&self) -> bool {
        self.c.dead.load(Ordering::Acquire)
    }

    /// When the connection was found dead, if it was (bytes it brought
    /// before may still wait to be read).
    pub fn died_at(&self) -> Option<std::time::Instant> {
        *lock(&self.c.died_at)
    }

    /// Why the connection died (empty while it lives).
    pub fn why(&self) -> String {
        lock(&self.c.why).clone()
    }

    fn kick(&self) {
        kick(&self.wake);
    }
}

/// The rest of `parts` after its first `skip` bytes.
fn after(parts: [&[u8]; 2], skip: usize) -> (&[u8], &[u8]) {
    let [a, b] = parts;
    if skip >= a.len() {
        (&[], &b[skip - a.len()..])
    } else {
        (&a[skip..], b)
    }
}

/// Wakes the progress thread out of `poll`.
fn kick(wake: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writing 8 bytes from a live u64 to our own eventfd.
    unsafe {
        libc::write(
            wake.as_raw_fd(),
            &one as *const u64 as *const libc::c_void,
            8,
        )
    };
}

/// Sends as much of `parts` as the sockets take now, without blocking;
/// returns the bytes sent. An error marks the connection dead.
fn send_parts(c: &Conn, pos: &mut u64, parts: [&[u8]; 2]) -> usize {
    let total = parts[0].len() + parts[1].len();
    let mut done = 0;
    while done < total {
        let (sock, left) = c.socks.at(*pos);
        let (a, b) = after(parts, done);
        match send_vec(sock, a, b, left) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                *pos += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                mark_dead(c, format!("connection failed: {e}"));
                break;
            }
        }
    }
    done
}

/// One non-blocking `sendmsg` of `a` then `b`, at most `limit` bytes. Not
/// `write`: in a C program SIGPIPE is not ignored, and writing to a closed
/// socket would kill the process.
fn send_vec(sock: &TcpStream, a: &[u8], b: &[u8], limit: usize) -> std::io::Result<usize> {
    let a = &a[..a.len().min(limit)];
    let b = &b[..b.len().min(limit - a.len())];
    let mut iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    let (start, count) = match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ok(0),
        (true, false) => (1, 1),
        (false, true) => (0, 1),
        (false, false) => (0, 2),
    };
    // SAFETY: a zeroed msghdr is valid; it points at `iov`, which lives
    // across the call and describes live slices.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr().add(start);
        msg.msg_iovlen = count;
        libc::sendmsg(
            sock.as_raw_fd(),
            &msg,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Reads what the sockets have into `dst`, in stream order, without
/// blocking; returns the bytes read. End of file or an error marks the
/// connection dead.
fn recv_into(c: &Conn, pos: &mut u64, dst: &mut [u8]) -> usize {
    let mut got = 0;
    while got < dst.len() {
        let (sock, left) = c.socks.at(*pos);
        let want = (dst.len() - got).min(left);
        match (&*sock).read(&mut dst[got..got + want]) {
            Ok(0) => {
                mark_dead(c, "connection closed by the peer".into());
                break;
            }
            Ok(n) => {
                got += n;
                *pos += n as u64;
                if n < want {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                mark_dead(c, format!("connection failed: {e}"));
                break;
            }
        }
    }
    got
}

/// Owns the progress thread; stopping it (on drop) closes every socket.
pub struct TcpLinks {
    conns: Vec<Arc<Conn>>,
    stop: Arc<AtomicBool>,
    /// Set while the engine polls the sockets itself: the thread then stops
    /// waking for arrivals, which would only preempt the polling rank.
    engine_polls: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TcpLinks {
    /// Starts the progress thread over `socks` (each link's sockets, at
    /// least one) and returns one engine link per entry, in the same order.
    /// `notify` is called after bytes arrive, a full socket has room again,
    /// or a peer dies.
    pub fn start(
        socks: Vec<Vec<TcpStream>>,
        notify: impl Fn() + Send + 'static,
    ) -> Result<(TcpLinks, Vec<TcpLink>)> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::os("eventfd", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut links = Vec::new();
        let mut conns = Vec::new();
        let p = crate::param::params();
        for set in socks {
            if set.is_empty() {
                return Err(Error::InvalidArg("a TCP link needs a socket".into()));
            }
            for s in &set {
                s.set_nonblocking(true)
                    .and_then(|_| s.set_nodelay(true))
                    .map_err(|e| Error::os("configuring a TCP link", e))?;
                super::sockbuf::size(s, p.socket_sndbuf, p.socket_rcvbuf);
                super::congestion::choose(s, p.socket_cc.as_deref());
            }
            let c = Arc::new(Conn {
                socks: Socks(set),
                tx: Mutex::default(),
                rx: Mutex::default(),
                rx_len: AtomicUsize::new(0),
                tx_blocked: AtomicBool::new(false),
                dead: AtomicBool::new(false),
                why: Mutex::new(String::new()),
                died_at: Mutex::new(None),
            });
            links.push(TcpLink {
                c: c.clone(),
                wake: wake.clone(),
            });
            conns.push(c);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let engine_polls = Arc::new(AtomicBool::new(false));
        let (cs, st, wk, ep) = (
            conns.clone(),
            stop.clone(),
            wake.clone(),
            engine_polls.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("ferrocoll-tcp".into())
            .spawn(move || run(cs, wk, st, ep, notify))
            .map_err(|e| Error::os("starting the TCP progress thread", e))?;
        Ok((
            TcpLinks {
                conns,
                stop,
                engine_polls,
                wake,
                thread: Some(thread),
            },
            links,
        ))
    }

    /// The engine starts polling the sockets itself (spinning in a wait).
    pub fn engine_polls(&self) {
        self.engine_polls.store(true, Ordering::Release);
    }

    /// The engine stops polling: it is about to sleep (`sleeping`), when
    /// the thread must watch for arrivals and room again, or it returns to
    /// the program, when the thread must at least send what is queued.
    pub fn engine_stops(&self, sleeping: bool) {
        if !self.engine_polls.swap(false, Ordering::AcqRel) {
            return;
        }
        if sleeping || self.conns.iter().any(|c| !lock(&c.tx).queue.is_empty()) {
            kick(&self.wake);
        }
    }
}

/// How long closing the links waits for queued bytes to leave.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for TcpLinks {
    fn drop(&mut self) {
        // A completed send may still sit in a queue: let it leave first.
        self.engine_stops(false);
        let start = std::time::Instant::now();
        while start.elapsed() < FLUSH_LIMIT
            && self
                .conns
                .iter()
                .any(|c| !c.dead.load(Ordering::Acquire) && !lock(&c.tx).queue.is_empty())
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.stop.store(true, Ordering::Release);
        kick(&self.wake);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn mark_dead(c: &Conn, why: String) {
    *lock(&c.why) = why;
    lock(&c.died_at).get_or_insert_with(std::time::Instant::now);
    c.dead.store(true, Ordering::Release);
}

/// The progress thread: poll, read, write, until told to stop.
fn run(
    conns: Vec<Arc<Conn>>,
    wake: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    engine_polls: Arc<AtomicBool>,
    notify: impl Fn(),
) {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(2 * conns.len() + 1);
    // What each entry after the first watches: (connection, sending side).
    let mut what: Vec<(usize, bool)> = Vec::with_capacity(2 * conns.len());
    while !stop.load(Ordering::Acquire) {
        fds.clear();
        what.clear();
        fds.push(pollfd(wake.as_raw_fd(), libc::POLLIN));
        // While the engine polls, it moves the bytes both ways itself.
        if !engine_polls.load(Ordering::Acquire) {
            for (i, c) in conns.iter().enumerate() {
                if c.dead.load(Ordering::Acquire) {
                    continue;
                }
                if c.rx_len.load(Ordering::Acquire) < RX_RESUME {
                    let pos = lock(&c.rx).pos;
                    fds.push(pollfd(c.socks.at(pos).0.as_raw_fd(), libc::POLLIN));
                    what.push((i, false));
                }
                let tx = lock(&c.tx);
                if !tx.queue.is_empty() || c.tx_blocked.load(Ordering::Acquire) {
                    fds.push(pollfd(c.socks.at(tx.pos).0.as_raw_fd(), libc::POLLOUT));
                    what.push((i, true));
                }
            }
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1000) };
        if n <= 0 {
            continue;
        }
        if fds[0].revents != 0 {
            let mut v = [0u8; 8];
            // SAFETY: reading 8 bytes into a live array from our eventfd.
            unsafe { libc::read(wake.as_raw_fd(), v.as_mut_ptr() as *mut libc::c_void, 8) };
        }
        let mut news = false;
        for (k, &(i, sending)) in what.iter().enumerate() {
            let re = fds[k + 1].revents;
            if re == 0 {
                continue;
            }
            let c = &conns[i];
            if sending {
                flush(c, &mut lock(&c.tx));
                // The engine has more to send: wake it.
                news |= c.tx_blocked.swap(false, Ordering::AcqRel);
                news |= c.dead.load(Ordering::Acquire);
            } else {
                news |= fill(c, &mut lock(&c.rx), RX_MAX);
            }
        }
        if news {
            notify();
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Reads what the sockets have into the receive buffer, up to `limit`
/// bytes waiting; returns whether anything arrived or the peer died.
/// Reading and buffering happen under the receive lock, so the engine and
/// the progress thread may both read one socket without reordering bytes.
fn fill(c: &Conn, rx: &mut Rx, limit: usize) -> bool {
    let mut any = false;
    while rx.buf.len() < limit && !c.dead.load(Ordering::Acquire) {
        let Rx { buf, pos } = rx;
        let space = buf.space(IO_CHUNK.min(limit - buf.len()));
        let room = space.len();
        let n = recv_into(c, pos, space);
        buf.commit(n);
        c.rx_len.fetch_add(n, Ordering::Release);
        any |= n > 0 || c.dead.load(Ordering::Acquire);
        if n < room {
            // Drained for now (or dead).
            break;
        }
    }
    any
}

/// Sends queued bytes until the sockets are full.
fn flush(c: &Conn, tx: &mut Tx) {
    let Tx { queue, pos } = tx;
    let (a, b) = queue.as_slices();
    let n = send_parts(c, pos, [a, b]);
    queue.drain(..n);
    if c.dead.load(Ordering::Acquire) {
        queue.clear();
    }
}
