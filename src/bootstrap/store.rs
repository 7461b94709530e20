//! A key-value rendezvous store over TCP (like torch's TCPStore or PMI's
//! KVS): one process serves it, every rank connects, publishes what the
//! others need (addresses, ids) and waits for keys or barriers.
//!
//! Every connection passes the job-secret handshake before the server reads
//! a request, so strangers on the network cannot read or plant keys. After
//! it, requests are `op: u8, key_len: u32 LE, key, value_len: u32 LE,
//! value`; replies are `status: u8, len: u32 LE, bytes`. Lengths are
//! checked against `MAX_KEY` / `MAX_VALUE` before anything is allocated; a
//! request over them (or with an unknown op) closes that connection only.

use crate::error::{Error, Result};
use crate::param::say;
use crate::transport::tcp::auth::{handshake, Role, Secret};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest key a request may carry, in bytes.
pub const MAX_KEY: usize = 1024;
/// Longest value a request may carry, in bytes.
pub const MAX_VALUE: usize = 1 << 20;

const SET: u8 = 1;
const GET: u8 = 2;
const CHECK: u8 = 3;
const ADD: u8 = 4;
const OK: u8 = 0;
const MISSING: u8 = 1;
const ERR: u8 = 2;
/// A stranger may hold a connection thread this long before the handshake fails.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on replies to non-blocking requests, so a stopped server cannot hang a rank.
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Slack on top of a get's own timeout before the client stops trusting the server.
const GET_GRACE: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct Shared {
    map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    changed: Condvar,
    stop: AtomicBool,
    /// Clones of open connections, so shutdown can wake their threads.
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_id: AtomicU64,
}

/// The store's server: a listener thread plus one thread per connection.
/// Dropping it (or `shutdown`) stops accepting and closes every connection.
pub struct StoreServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl StoreServer {
    /// Binds `bind` (port 0 picks a free port) and starts serving clients
    /// that hold `secret`.
    pub fn start(bind: SocketAddr, secret: Secret) -> Result<StoreServer> {
        let listener = TcpListener::bind(bind).map_err(|e| Error::os("store: bind", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::os("store: local address", e))?;
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("ferrocoll-store".into())
            .spawn(move || accept_loop(listener, sh, Arc::new(secret)))
            .map_err(|e| Error::os("store: spawn listener thread", e))?;
        Ok(StoreServer {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections open now (authenticated or not yet).
    pub fn clients(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// The value under `key`, read in this process (no connection needed).
    pub fn value(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.shared.map).get(key.as_bytes()).cloned()
    }

    /// Stops accepting, wakes blocked gets and closes every connection.
    /// Idempotent; `Drop` calls it.
    pub fn shutdown(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stop.store(true, SeqCst);
        // Under the map lock, so a get between its check and its wait still wakes.
        drop(lock(&self.shared.map));
        self.shared.changed.notify_all();
        for s in lock(&self.shared.conns).values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        // accept() only returns on a connection: make one to ourselves.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => [127, 0, 0, 1].into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, secret: Arc<Secret>) {
    for conn in listener.incoming() {
        if shared.stop.load(SeqCst) {
            return;
        }
        let Ok(stream) = conn else {
            // e.g. out of file descriptors: back off instead of spinning.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let (sh, sec) = (shared.clone(), secret.clone());
        // If the thread cannot start, the stream drops and the client sees EOF.
        let _ = std::thread::Builder::new()
            .name("ferrocoll-store-conn".into())
            .spawn(move || connection(stream, &sh, &sec));
    }
}

fn connection(mut stream: TcpStream, shared: &Shared, secret: &Secret) {
    let id = shared.next_id.fetch_add(1, SeqCst);
    {
        // Checked under the lock shutdown sweeps with, so no stream is missed.
        let mut conns = lock(&shared.conns);
        if shared.stop.load(SeqCst) {
            return;
        }
        if let Ok(clone) = stream.try_clone() {
            conns.insert(id, clone);
        }
    }
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let _ = stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    match handshake(&mut stream, secret, Role::Acceptor, 0) {
        Err(e) => say(&format!(
            "ferrocoll: store: rejected connection from {peer}: {e}"
        )),
        Ok(rank) => {
            // Ranks may stay idle for the whole job; shutdown wakes us instead.
            let _ = stream.set_read_timeout(None);
            let _ = stream.set_nodelay(true);
            if let Err(why) = serve(&mut stream, shared) {
                if !shared.stop.load(SeqCst) {
                    say(&format!(
                        "ferrocoll: store: closed connection from {peer} (rank {rank}): {why}"
                    ));
                }
            }
        }
    }
    lock(&shared.conns).remove(&id);
}

fn read_field(s: &mut impl Read, max: usize, what: &str) -> std::result::Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(format!(
            "{what} of {len} bytes is over the {max}-byte limit"
        ));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Answers requests until the client closes (Ok) or breaks the protocol (Err).
fn serve(s: &mut (impl Read + Write), shared: &Shared) -> std::result::Result<(), String> {
    loop {
        let mut op = [0u8; 1];
        match s.read(&mut op) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
        if !(SET..=ADD).contains(&op[0]) {
            return Err(format!("unknown request {}", op[0]));
        }
        let key = read_field(s, MAX_KEY, "key")?;
        let val = read_field(s, MAX_VALUE, "value")?;
        let (status, body) = apply(shared, op[0], key, val);
        s.write_all(&frame(status, &[&body]))
            .map_err(|e| e.to_string())?;
    }
}

fn found(v: Option<&Vec<u8>>) -> (u8, Vec<u8>) {
    v.map_or((MISSING, Vec::new()), |v| (OK, v.clone()))
}

/// Length-prefixed message: a head byte (op or status), then each part as
/// `u32 LE length + bytes`.
fn frame(head: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![head];
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn apply(shared: &Shared, op: u8, key: Vec<u8>, val: Vec<u8>) -> (u8, Vec<u8>) {
    let mut map = lock(&shared.map);
    match op {
        SET => {
            map.insert(key, val);
            shared.changed.notify_all();
            (OK, Vec::new())
        }
        GET => {
            let Ok(ms) = <[u8; 8]>::try_from(val.as_slice()) else {
                return (ERR, b"get needs an 8-byte timeout".to_vec());
            };
            let wait = Duration::from_millis(u64::from_le_bytes(ms));
            let (map, _) = shared
                .changed
                .wait_timeout_while(map, wait, |m| {
                    !m.contains_key(&key) && !shared.stop.load(SeqCst)
                })
                .unwrap_or_else(PoisonError::into_inner);
            if shared.stop.load(SeqCst) {
                return (ERR, b"the store server is shutting down".to_vec());
            }
            found(map.get(&key))
        }
        CHECK => found(map.get(&key)),
        _ => {
            let Ok(delta) = <[u8; 8]>::try_from(val.as_slice()) else {
                return (ERR, b"add needs an 8-byte delta".to_vec());
            };
            let old = match map.get(&key).map(|v| <[u8; 8]>::try_from(v.as_slice())) {
                None => 0,
                Some(Ok(b)) => i64::from_le_bytes(b),
                Some(Err(_)) => return (ERR, b"key does not hold a counter".to_vec()),
            };
            let Some(new) = old.checked_add(i64::from_le_bytes(delta)) else {
                return (ERR, b"counter overflow".to_vec());
            };
            map.insert(key, new.to_le_bytes().to_vec());
            shared.changed.notify_all();
            (OK, new.to_le_bytes().to_vec())
        }
    }
}

/// One rank's authenticated connection to the store. Requests are answered
/// in order. After any error other than a server-side get timeout (a
/// `Timeout` from `get` or `barrier` whose wait the server ended), the
/// connection is unusable and every later call fails.
pub struct StoreClient {
    stream: TcpStream,
    broken: bool,
}

impl StoreClient {
    /// Connects to the store at `addr` as `rank`, retrying until `deadline`
    /// has passed because the server may not be up yet.
    pub fn connect(
        addr: SocketAddr,
        secret: &Secret,
        rank: u64,
        deadline: Duration,
    ) -> Result<StoreClient> {
        let start = Instant::now();
        let mut stream = loop {
            let left = deadline.saturating_sub(start.elapsed());
            let step = left.clamp(Duration::from_millis(1), Duration::from_secs(1));
            match TcpStream::connect_timeout(&addr, step) {
                Ok(s) => break s,
                Err(e) if start.elapsed() >= deadline => {
                    return Err(Error::Timeout {
                        secs: deadline.as_secs_f64(),
                        op: "store connect",
                        peers: format!("store server at {addr} ({e})"),
                    })
                }
                Err(_) => std::thread::sleep(left.min(Duration::from_millis(25))),
            }
        };
        let io = |e| Error::os("store connect", e);
        // A server that accepted answers at once; give it a second even at the deadline.
        let hs = deadline
            .saturating_sub(start.elapsed())
            .max(Duration::from_secs(1));
        stream.set_read_timeout(Some(hs)).map_err(io)?;
        stream.set_write_timeout(Some(OP_TIMEOUT)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        handshake(&mut stream, secret, Role::Connector, rank)?;
        Ok(StoreClient {
            stream,
            broken: false,
        })
    }

    /// Stores `value` under `key`, replacing any earlier value.
    pub fn set(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.call(SET, key, value, OP_TIMEOUT, "store set")
            .map(drop)
    }

    /// Waits up to `timeout` for `key` to exist and returns its value.
    pub fn get(&mut self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let ms = timeout.as_millis().min(u64::MAX as u128) as u64;
        let wait = timeout.saturating_add(GET_GRACE);
        self.call(GET, key, &ms.to_le_bytes(), wait, "store get")?
            .ok_or_else(|| Error::Timeout {
                secs: timeout.as_secs_f64(),
                op: "store get",
                peers: key.to_string(),
            })
    }

    /// The value of `key` now, if it exists (never waits for it).
    pub fn check(&mut self, key: &str) -> Result<Option<Vec<u8>>> {
        self.call(CHECK, key, &[], OP_TIMEOUT, "store check")
    }

    /// Atomically adds `delta` to the counter `key` (missing counts as 0)
    /// and returns the new value.
    pub fn add(&mut self, key: &str, delta: i64) -> Result<i64> {
        let v = self.call(ADD, key, &delta.to_le_bytes(), OP_TIMEOUT, "store add")?;
        let b = v.and_then(|v| <[u8; 8]>::try_from(v).ok());
        b.map(i64::from_le_bytes)
            .ok_or_else(|| Error::Os("store add: malformed reply".into()))
    }

    /// Returns once `n` clients have called `barrier` with this `name`. Each
    /// name serves one barrier only: its counter is never reset.
    pub fn barrier(&mut self, name: &str, n: usize, timeout: Duration) -> Result<()> {
        let arrived = self.add(&format!("{name}/count"), 1)?;
        let done = format!("{name}/done");
        match usize::try_from(arrived) {
            Ok(k) if k == n => self.set(&done, b"1"),
            Ok(k) if k < n => self.get(&done, timeout).map(drop),
            _ => Err(Error::InvalidArg(format!(
                "barrier '{name}': arrival {arrived} of {n} (name reused?)"
            ))),
        }
    }

    /// Sends one request and reads its reply: `Some(body)` when found,
    /// `None` when the key was missing.
    fn call(
        &mut self,
        op: u8,
        key: &str,
        val: &[u8],
        wait: Duration,
        what: &'static str,
    ) -> Result<Option<Vec<u8>>> {
        if self.broken {
            return Err(Error::Os(format!(
                "{what}: store connection unusable after an earlier failure"
            )));
        }
        if key.len() > MAX_KEY || val.len() > MAX_VALUE {
            return Err(Error::InvalidArg(format!(
                "{what}: key or value over the store's limits ({MAX_KEY} / {MAX_VALUE} bytes)"
            )));
        }
        let req = frame(op, &[key.as_bytes(), val]);
        // Any failure below leaves a reply half-read or unsent: poison first.
        self.broken = true;
        let fail = |e: std::io::Error| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => Error::Timeout {
                secs: wait.as_secs_f64(),
                op: what,
                peers: key.to_string(),
            },
            ErrorKind::UnexpectedEof => Error::Os(format!("{what}: the store server closed")),
            _ => Error::os(what, e),
        };
        self.stream.set_read_timeout(Some(wait)).map_err(fail)?;
        self.stream.write_all(&req).map_err(fail)?;
        let (status, body) = read_reply(&mut self.stream)
            .map_err(|e| e.map_or_else(|| Error::Os(format!("{what}: oversized reply")), fail))?;
        self.broken = false;
        match status {
            OK => Ok(Some(body)),
            MISSING => Ok(None),
            _ => Err(Error::InvalidArg(format!(
                "{what} '{key}': {}",
                String::from_utf8_lossy(&body)
            ))),
        }
    }
}

/// Reads one reply: its status and body. `Err(None)` for a body over
/// `MAX_VALUE`, which is refused before anything is allocated.
fn read_reply(s: &mut impl Read) -> std::result::Result<(u8, Vec<u8>), Option<std::io::Error>> {
    let mut head = [0u8; 5];
    s.read_exact(&mut head)?;
    let len = u32::from_le_bytes(head[1..].try_into().expect("4 bytes")) as usize;
    if len > MAX_VALUE {
        return Err(None);
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok((head[0], body))
}

/// Fuzzing entry points: the server's request loop and the client's reply
/// reader over arbitrary bytes.
#[cfg(feature = "fuzzing")]
pub mod fuzz {
    use super::*;
    use crate::fuzz::Pipe;

    /// Serves `data` as one authenticated client's requests. Gets of
    /// missing keys return at once: the store is shutting down.
    pub fn server(data: &[u8]) {
        let shared = Shared::default();
        shared.stop.store(true, SeqCst);
        let _ = serve(&mut Pipe::new(data), &shared);
    }

    /// Reads `data` as replies until it runs out or one is malformed.
    pub fn replies(data: &[u8]) {
        let mut p = Pipe::new(data);
        while read_reply(&mut p).is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn server() -> (StoreServer, Secret) {
        let secret = Secret::random().unwrap();
        let srv = StoreServer::start("127.0.0.1:0".parse().unwrap(), secret.clone()).unwrap();
        (srv, secret)
    }

    fn client(srv: &StoreServer, secret: &Secret, rank: u64) -> StoreClient {
        StoreClient::connect(srv.addr(), secret, rank, Duration::from_secs(5)).unwrap()
    }

    const LONG: Duration = Duration::from_secs(5);

    #[test]
    fn set_get_check_across_clients() {
        let (srv, secret) = server();
        let (mut a, mut b) = (client(&srv, &secret, 0), client(&srv, &secret, 1));
        let waiter = thread::spawn(move || (b.get("addr/0", LONG), b));
        thread::sleep(Duration::from_millis(100));
        assert_eq!(a.check("addr/0").unwrap(), None);
        a.set("addr/0", b"10.0.0.1:4000").unwrap();
        let (got, mut b) = waiter.join().unwrap();
        assert_eq!(got.unwrap(), b"10.0.0.1:4000");
        b.set("addr/0", b"").unwrap();
        assert_eq!(a.check("addr/0").unwrap(), Some(Vec::new()));
        let big = vec![7u8; MAX_VALUE];
        a.set("big", &big).unwrap();
        assert_eq!(b.get("big", LONG).unwrap(), big);
        assert!(a.set("x", &vec![0u8; MAX_VALUE + 1]).is_err());
    }

    #[test]
    fn add_and_barrier_with_four_threads() {
        let (srv, secret) = server();
        let ts: Vec<_> = (0..4u64)
            .map(|r| {
                let mut c = client(&srv, &secret, r);
                thread::spawn(move || {
                    c.add("sum", r as i64 + 1).unwrap();
                    c.set(&format!("here/{r}"), b"y").unwrap();
                    c.barrier("b1", 4, LONG).unwrap();
                    // Everyone arrived before anyone left.
                    for p in 0..4 {
                        assert!(c.check(&format!("here/{p}")).unwrap().is_some());
                    }
                    c.barrier("b2", 4, LONG).unwrap();
                    c.add("sum", 0).unwrap()
                })
            })
            .collect();
        for t in ts {
            assert_eq!(t.join().unwrap(), 10);
        }
        let mut c = client(&srv, &secret, 9);
        assert!(
            c.barrier("b1", 4, LONG).is_err(),
            "a fifth arrival is an error"
        );
        assert!(c.add("here/0", 1).is_err(), "not a counter");
        assert_eq!(c.add("sum", -10).unwrap(), 0);
    }

    #[test]
    fn get_times_out_promptly_and_connection_survives() {
        let (srv, secret) = server();
        let mut c = client(&srv, &secret, 0);
        let t0 = Instant::now();
        let err = c.get("never", Duration::from_millis(200)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(err, Error::Timeout { op: "store get", ref peers, .. } if peers == "never")
        );
        c.set("k", b"v").unwrap();
        assert_eq!(c.get("k", LONG).unwrap(), b"v");
    }

    #[test]
    fn strangers_are_rejected_and_service_continues() {
        let (srv, secret) = server();
        let wrong = Secret::random().unwrap();
        assert!(StoreClient::connect(srv.addr(), &wrong, 1, LONG).is_err());
        let mut junk = TcpStream::connect(srv.addr()).unwrap();
        let mut bytes = [0u8; 200];
        getrandom::getrandom(&mut bytes).unwrap();
        let _ = junk.write_all(&bytes);
        drop(junk);
        let mut c = client(&srv, &secret, 0);
        c.set("k", b"v").unwrap();
        assert_eq!(c.get("k", LONG).unwrap(), b"v");
    }

    #[test]
    fn oversized_lengths_close_only_that_connection() {
        let (srv, secret) = server();
        for req in [
            [&[SET][..], &(MAX_KEY as u32 + 1).to_le_bytes()].concat(),
            [frame(SET, &[b"k"]), u32::MAX.to_le_bytes().to_vec()].concat(),
            vec![99u8],
        ] {
            let mut raw = TcpStream::connect(srv.addr()).unwrap();
            raw.set_read_timeout(Some(LONG)).unwrap();
            handshake(&mut raw, &secret, Role::Connector, 5).unwrap();
            raw.write_all(&req).unwrap();
            let mut buf = [0u8; 1];
            assert!(matches!(raw.read(&mut buf), Ok(0) | Err(_)), "closed");
        }
        let mut c = client(&srv, &secret, 0);
        assert_eq!(c.add("n", 3).unwrap(), 3);
    }

    #[test]
    fn shutdown_wakes_waiters_and_stops_listening() {
        let (mut srv, secret) = server();
        let addr = srv.addr();
        let mut c = client(&srv, &secret, 0);
        let waiter = thread::spawn(move || c.get("never", Duration::from_secs(30)));
        thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        srv.shutdown();
        assert!(waiter.join().unwrap().is_err());
        assert!(t0.elapsed() < Duration::from_secs(3));
        drop(srv);
        assert!(StoreClient::connect(addr, &secret, 0, Duration::from_millis(100)).is_err());
    }
}
