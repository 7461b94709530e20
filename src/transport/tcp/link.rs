//! One process's TCP links and the thread that moves their bytes.
//!
//! The engine only touches per-peer queues (`TcpLink`); a progress thread
//! polls every socket, reads whatever arrives into the receive queues
//! (bounded: a full queue stops reading, so TCP flow control pushes back
//! on the sender) and writes what the engine queued. After new bytes
//! arrive it calls `notify` (the rank's doorbell), so a sleeping engine
//! wakes up. A socket that reports end of file or an error marks its peer
//! dead, which fails the operations still waiting for that peer.

use super::rxbuf::RxBuf;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most bytes queued for sending to one peer; the engine retries later
/// from its own buffer. Kept small: a queued byte costs one more copy
/// (2-rank pingpong 8 MiB over loop-back: 3.7 ms with 4 MiB, 2.4 ms with 512 KiB).
const TX_MAX: usize = 512 << 10;
/// Most bytes read ahead from one peer before the engine takes them.
const RX_MAX: usize = 4 << 20;
/// Header and payload up to this size go out in one send.
const JOIN_MAX: usize = 4096;
/// Bytes moved per read or write call.
const IO_CHUNK: usize = 256 * 1024;

/// Queues shared between the engine and the progress thread.
struct Queues {
    tx: Mutex<VecDeque<u8>>,
    rx: Mutex<RxBuf>,
    rx_len: AtomicUsize,
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
    q: Arc<Queues>,
    /// The socket, for sending directly when nothing is queued.
    sock: Arc<TcpStream>,
    wake: Arc<OwnedFd>,
}

impl TcpLink {
    /// Queues or sends as much of `data` as fits now.
    pub fn write_some(&mut self, data: &[u8]) -> usize {
        if self.is_dead() {
            // Nothing will read it; report it taken so sends complete and
            // the wait fails on the dead peer instead.
            return data.len();
        }
        let mut tx = lock(&self.q.tx);
        let mut sent = 0;
        if tx.is_empty() {
            sent = send_now(&self.sock, data);
        }
        let room = TX_MAX.saturating_sub(tx.len());
        let take = (data.len() - sent).min(room);
        tx.extend(&data[sent..sent + take]);
        if take > 0 {
            drop(tx);
            self.kick();
        }
        sent + take
    }

    /// Writes `a` then `b` only if both fit now.
    pub fn write_both(&mut self, a: &[u8], b: &[u8]) -> bool {
        if self.is_dead() {
            return true;
        }
        let tx = lock(&self.q.tx);
        if tx.len() + a.len() + b.len() > TX_MAX {
            return false;
        }
        drop(tx);
        if a.len() + b.len() <= JOIN_MAX {
            // One send, so a small message leaves as one segment.
            let mut both = [0u8; JOIN_MAX];
            both[..a.len()].copy_from_slice(a);
            both[a.len()..a.len() + b.len()].copy_from_slice(b);
            let n = self.write_some(&both[..a.len() + b.len()]);
            debug_assert_eq!(n, a.len() + b.len());
            return true;
        }
        let n = self.write_some(a);
        debug_assert_eq!(n, a.len());
        let m = self.write_some(b);
        debug_assert_eq!(m, b.len());
        true
    }

    /// Bytes received and not yet read. With nothing queued the engine
    /// reads the socket itself (unless the progress thread is at it), so a
    /// polling rank does not wait for that thread to be scheduled.
    pub fn readable(&self) -> usize {
        if let Ok(mut tx) = self.q.tx.try_lock() {
            // Queued sends leave from here too while the engine polls.
            if !tx.is_empty() && !self.q.dead.load(Ordering::Acquire) {
                flush(&self.sock, &self.q, &mut tx);
            }
        }
        let n = self.q.rx_len.load(Ordering::Acquire);
        if n > 0 || self.q.dead.load(Ordering::Acquire) {
            return n;
        }
        if let Ok(mut rx) = self.q.rx.try_lock() {
            fill(&self.sock, &self.q, &mut rx);
        }
        self.q.rx_len.load(Ordering::Acquire)
    }

    /// Hands up to `max` received bytes to `f` in order, consuming them.
    pub fn read_with(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut rx = lock(&self.q.rx);
        let n = max.min(rx.len());
        f(rx.front(n));
        rx.consume(n);
        self.q.rx_len.fetch_sub(n, Ordering::Release);
        let was_full = rx.len() + n >= RX_MAX;
        drop(rx);
        if was_full {
            // The thread stopped reading this socket; it may resume now.
            self.kick();
        }
        n
    }

    /// Whether the connection ended (peer exited, crashed or reset it).
    pub fn is_dead(&self) -> bool {
        self.q.dead.load(Ordering::Acquire) && self.readable() == 0
    }

    /// When the connection was found dead, if it was (bytes it brought
    /// before may still wait to be read).
    pub fn died_at(&self) -> Option<std::time::Instant> {
        *lock(&self.q.died_at)
    }

    /// Why the connection died (empty while it lives).
    pub fn why(&self) -> String {
        lock(&self.q.why).clone()
    }

    fn kick(&self) {
        kick(&self.wake);
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

/// Non-blocking send of as much as the socket takes now (errors are left
/// for the progress thread to notice).
fn send_now(sock: &TcpStream, data: &[u8]) -> usize {
    send_raw(sock, data).unwrap_or(0)
}

/// One non-blocking `send`. Not `write`: in a C program SIGPIPE is not
/// ignored, and writing to a closed socket would kill the process.
fn send_raw(sock: &TcpStream, data: &[u8]) -> std::io::Result<usize> {
    if data.is_empty() {
        return Ok(0);
    }
    // SAFETY: `data` is a live slice; MSG_DONTWAIT keeps the call from
    // blocking and MSG_NOSIGNAL turns a closed peer into EPIPE, not SIGPIPE.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            data.as_ptr() as *const libc::c_void,
            data.len().min(IO_CHUNK),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Owns the progress thread; stopping it (on drop) closes every socket.
pub struct TcpLinks {
    queues: Vec<Arc<Queues>>,
    stop: Arc<AtomicBool>,
    /// Set while the engine polls the sockets itself: the thread then stops
    /// waking for arrivals, which would only preempt the polling rank.
    engine_polls: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TcpLinks {
    /// Starts the progress thread over `socks` (peer index, stream) and
    /// returns one engine link per socket, in the same order. `notify` is
    /// called after bytes arrive or a peer dies.
    pub fn start(
        socks: Vec<TcpStream>,
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
        for s in socks {
            s.set_nonblocking(true)
                .and_then(|_| s.set_nodelay(true))
                .map_err(|e| Error::os("configuring a TCP link", e))?;
            let q = Arc::new(Queues {
                tx: Mutex::new(VecDeque::new()),
                rx: Mutex::new(RxBuf::default()),
                rx_len: AtomicUsize::new(0),
                dead: AtomicBool::new(false),
                why: Mutex::new(String::new()),
                died_at: Mutex::new(None),
            });
            let sock = Arc::new(s);
            links.push(TcpLink {
                q: q.clone(),
                sock: sock.clone(),
                wake: wake.clone(),
            });
            conns.push((sock, q));
        }
        let queues = conns.iter().map(|(_, q)| q.clone()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let engine_polls = Arc::new(AtomicBool::new(false));
        let (st, wk, ep) = (stop.clone(), wake.clone(), engine_polls.clone());
        let thread = std::thread::Builder::new()
            .name("ferrocoll-tcp".into())
            .spawn(move || run(conns, wk, st, ep, notify))
            .map_err(|e| Error::os("starting the TCP progress thread", e))?;
        Ok((
            TcpLinks {
                queues,
                stop,
                engine_polls,
                wake,
                thread: Some(thread),
            },
            links,
        ))
    }
}

impl TcpLinks {
    /// The engine starts polling the sockets itself (spinning in a wait).
    pub fn engine_polls(&self) {
        self.engine_polls.store(true, Ordering::Release);
    }

    /// The engine stops polling: it is about to sleep (`sleeping`), when
    /// the thread must watch for arrivals again, or it returns to the
    /// program, when the thread must at least send what is still queued.
    pub fn engine_stops(&self, sleeping: bool) {
        if !self.engine_polls.swap(false, Ordering::AcqRel) {
            return;
        }
        if sleeping || self.queues.iter().any(|q| !lock(&q.tx).is_empty()) {
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
                .queues
                .iter()
                .any(|q| !q.dead.load(Ordering::Acquire) && !lock(&q.tx).is_empty())
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

fn mark_dead(q: &Queues, why: String) {
    *lock(&q.why) = why;
    lock(&q.died_at).get_or_insert_with(std::time::Instant::now);
    q.dead.store(true, Ordering::Release);
}

/// The progress thread: poll, read, write, until told to stop.
fn run(
    conns: Vec<(Arc<TcpStream>, Arc<Queues>)>,
    wake: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    engine_polls: Arc<AtomicBool>,
    notify: impl Fn(),
) {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(conns.len() + 1);
    while !stop.load(Ordering::Acquire) {
        fds.clear();
        fds.push(pollfd(wake.as_raw_fd(), libc::POLLIN));
        // While the engine polls, it moves the bytes both ways itself.
        let watch_rx = !engine_polls.load(Ordering::Acquire);
        for (s, q) in &conns {
            let mut ev = 0;
            if !q.dead.load(Ordering::Acquire) {
                if watch_rx && q.rx_len.load(Ordering::Acquire) < RX_MAX {
                    ev |= libc::POLLIN;
                }
                if watch_rx && !lock(&q.tx).is_empty() {
                    ev |= libc::POLLOUT;
                }
            }
            fds.push(pollfd(if ev == 0 { -1 } else { s.as_raw_fd() }, ev));
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
        let mut arrived = false;
        for (i, (s, q)) in conns.iter().enumerate() {
            let re = fds[i + 1].revents;
            if re == 0 {
                continue;
            }
            if re & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                arrived |= read_ready(s, q);
            }
            if re & libc::POLLOUT != 0 {
                write_ready(s, q);
            }
        }
        if arrived {
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

/// Reads what the socket has (up to the queue's bound); returns whether
/// anything arrived or the peer died. Reading and queueing happen under
/// the receive lock, so the engine and the progress thread may both read
/// one socket without reordering bytes.
fn read_ready(s: &TcpStream, q: &Queues) -> bool {
    let mut rx = lock(&q.rx);
    fill(s, q, &mut rx)
}

fn fill(s: &TcpStream, q: &Queues, rx: &mut RxBuf) -> bool {
    let mut any = false;
    while rx.len() < RX_MAX && !q.dead.load(Ordering::Acquire) {
        let buf = rx.space(IO_CHUNK.min(RX_MAX - rx.len()));
        let want = buf.len();
        match (&*s).read(buf) {
            Ok(0) => {
                mark_dead(q, "connection closed by the peer".into());
                return true;
            }
            Ok(n) => {
                rx.commit(n);
                q.rx_len.fetch_add(n, Ordering::Release);
                any = true;
                if n < want {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                mark_dead(q, format!("connection failed: {e}"));
                return true;
            }
        }
    }
    any
}

/// Writes queued bytes until the socket is full.
fn write_ready(s: &TcpStream, q: &Queues) {
    let mut tx = lock(&q.tx);
    flush(s, q, &mut tx);
}

fn flush(s: &TcpStream, q: &Queues, tx: &mut VecDeque<u8>) {
    while !tx.is_empty() {
        let (a, _) = tx.as_slices();
        let a = &a[..a.len().min(IO_CHUNK)];
        match send_raw(s, a) {
            Ok(0) => break,
            Ok(n) => {
                tx.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                tx.clear();
                mark_dead(q, format!("connection failed: {e}"));
                return;
            }
        }
    }
}
