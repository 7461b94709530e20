//! A PMI-1 wire-protocol client: what MPICH's `mpiexec.hydra` and Slurm's
//! `srun --mpi=pmi2` serve to the processes they start. The launcher hands
//! over a connected socket (`PMI_FD`) or an address (`PMI_PORT` plus
//! `PMI_ID`); requests and replies are lines of `key=value` words.
//!
//! Each request goes out in one `write`, one at a time, and stays under
//! 1024 bytes, because Slurm's server reads one `read()` per request.
//! Replies are read into a bounded buffer: a launcher that never ends a
//! line cannot make this process allocate without limit.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Longest request line we send, newline included (Slurm reads 1024).
pub const MAX_REQUEST: usize = 1023;
/// Longest reply line we accept.
pub const MAX_REPLY: usize = 64 * 1024;

/// A byte stream both ways.
trait Duplex: Read + Write + Send {}
impl<T: Read + Write + Send> Duplex for T {}

/// The launcher connection: a Unix socket pair or TCP (its read timeout
/// already set).
type Conn = Box<dyn Duplex>;

/// One process's PMI-1 session: its rank, the job size and the job's
/// key-value space.
pub struct Pmi {
    conn: Conn,
    pending: Vec<u8>,
    rank: usize,
    size: usize,
    kvs: String,
    key_max: usize,
    value_max: usize,
    finalized: bool,
}

/// One parsed reply line: its `key=value` words in order (words without
/// `=` are dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Reply(pub Vec<(String, String)>);

impl Reply {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses one reply line (without its newline).
pub fn parse_line(line: &str) -> Reply {
    Reply(
        line.split_ascii_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Builds a request line from `key=value` words, refusing words that would
/// change its meaning (spaces, newlines, `=` in keys) and lines over the
/// limit.
pub fn request(words: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut line = String::new();
    for (k, v) in words {
        let bad = |s: &str| s.is_empty() || s.bytes().any(|b| b.is_ascii_whitespace());
        if bad(k) || k.contains('=') || v.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(Error::InvalidArg(format!(
                "PMI: cannot send {k}={v:?} (spaces, newlines or '=' in a key)"
            )));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    line.push('\n');
    if line.len() > MAX_REQUEST {
        return Err(Error::InvalidArg(format!(
            "PMI: request of {} bytes (at most {MAX_REQUEST})",
            line.len()
        )));
    }
    Ok(line.into_bytes())
}

fn env_num(k: &str) -> Result<Option<usize>> {
    match std::env::var(k) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::InvalidArg(format!("bad {k}={v} from the launcher"))),
        Err(_) => Ok(None),
    }
}

impl Pmi {
    /// Whether the environment names a PMI server (`PMI_FD` or `PMI_PORT`).
    pub fn offered() -> bool {
        std::env::var_os("PMI_FD").is_some() || std::env::var_os("PMI_PORT").is_some()
    }

    /// Connects to the launcher named by the environment and initialises
    /// the session; replies must come within `timeout` each.
    pub fn from_env(timeout: Duration) -> Result<Pmi> {
        let set = |e| Error::os("PMI: set timeout", e);
        let (conn, announce): (Conn, _) = if let Some(fd) = env_num("PMI_FD")? {
            let fd = i32::try_from(fd).map_err(|_| Error::InvalidArg("bad PMI_FD".into()))?;
            // SAFETY: F_GETFD only inspects the descriptor; it fails on a closed one.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(Error::InvalidArg(format!(
                    "PMI_FD={fd} is not an open descriptor"
                )));
            }
            // SAFETY: the launcher passed this descriptor to us for PMI and
            // nothing else in the process uses it; it is now owned here.
            // Close-on-exec keeps it from programs this process starts.
            let s = unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                UnixStream::from_raw_fd(fd)
            };
            s.set_read_timeout(Some(timeout)).map_err(set)?;
            (Box::new(s), None)
        } else {
            let port = std::env::var("PMI_PORT").unwrap_or_default();
            let s = TcpStream::connect(port.trim())
                .map_err(|e| Error::os(&format!("PMI: connect to PMI_PORT={port}"), e))?;
            let _ = s.set_nodelay(true);
            s.set_read_timeout(Some(timeout)).map_err(set)?;
            // PMI_PORT: say who we are; the server answers with our rank and size.
            let id = std::env::var("PMI_ID").unwrap_or_else(|_| "0".into());
            (Box::new(s), Some(id.trim().to_string()))
        };
        Pmi::start(conn, env_num("PMI_RANK")?, env_num("PMI_SIZE")?, announce)
    }

    /// Initialises a session over `conn`. `announce`: the `PMI_ID` to
    /// introduce this process with, from which the server tells rank and
    /// size; otherwise they are `rank` and `size` (from the environment).
    fn start(
        conn: Conn,
        mut rank: Option<usize>,
        mut size: Option<usize>,
        announce: Option<String>,
    ) -> Result<Pmi> {
        let mut pmi = Pmi {
            conn,
            pending: Vec::new(),
            rank: 0,
            size: 0,
            kvs: String::new(),
            key_max: 64,
            value_max: 256,
            finalized: false,
        };
        if let Some(id) = announce {
            pmi.send(&[("cmd", "initack"), ("pmiid", &id)])?;
            pmi.expect("initack")?;
            for _ in 0..3 {
                let r = pmi.recv()?;
                match (r.get("cmd"), r.get("size"), r.get("rank")) {
                    (Some("set"), Some(n), _) => size = n.parse().ok(),
                    (Some("set"), _, Some(n)) => rank = n.parse().ok(),
                    _ => {}
                }
            }
        }
        pmi.send(&[
            ("cmd", "init"),
            ("pmi_version", "1"),
            ("pmi_subversion", "1"),
        ])?;
        let r = pmi.expect("response_to_init")?;
        if r.get("rc").is_some_and(|rc| rc != "0") {
            return Err(Error::Os(format!("PMI: init refused ({:?})", r.0)));
        }
        pmi.send(&[("cmd", "get_maxes")])?;
        let r = pmi.expect("maxes")?;
        let num = |k: &str, d: usize| r.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
        pmi.key_max = num("keylen_max", 64);
        pmi.value_max = num("vallen_max", 256);
        pmi.send(&[("cmd", "get_my_kvsname")])?;
        let r = pmi.expect("my_kvsname")?;
        pmi.kvs = r
            .get("kvsname")
            .ok_or_else(|| Error::Os("PMI: no kvsname in reply".into()))?
            .to_string();
        match (rank, size) {
            (Some(r), Some(n)) if n > 0 && r < n => {
                pmi.rank = r;
                pmi.size = n;
                Ok(pmi)
            }
            _ => Err(Error::InvalidArg(format!(
                "PMI: no valid rank and size (PMI_RANK {rank:?}, PMI_SIZE {size:?})"
            ))),
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of processes in the job.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The job's key-value space name (unique per job for the launcher).
    pub fn kvs_name(&self) -> &str {
        &self.kvs
    }

    /// Publishes `value` under `key`; others see it after the next barrier.
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.check_sizes(key, value)?;
        let kvs = self.kvs.clone();
        self.send(&[
            ("cmd", "put"),
            ("kvsname", &kvs),
            ("key", key),
            ("value", value),
        ])?;
        let r = self.expect("put_result")?;
        match r.get("rc") {
            Some("0") | None => Ok(()),
            _ => Err(Error::Os(format!("PMI: put {key} refused ({:?})", r.0))),
        }
    }

    /// Waits until every process of the job has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        self.send(&[("cmd", "barrier_in")])?;
        self.expect("barrier_out").map(drop)
    }

    /// The value another process put under `key` before the last barrier.
    pub fn get(&mut self, key: &str) -> Result<String> {
        self.check_sizes(key, "")?;
        let kvs = self.kvs.clone();
        self.send(&[("cmd", "get"), ("kvsname", &kvs), ("key", key)])?;
        let r = self.expect("get_result")?;
        match (r.get("rc"), r.get("value")) {
            (Some("0") | None, Some(v)) => Ok(v.to_string()),
            _ => Err(Error::InvalidArg(format!(
                "PMI: no value for key {key} ({:?})",
                r.0
            ))),
        }
    }

    /// Ends the session (the launcher then expects this process to exit).
    pub fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        self.send(&[("cmd", "finalize")])?;
        self.expect("finalize_ack").map(drop)
    }

    fn check_sizes(&self, key: &str, value: &str) -> Result<()> {
        if key.len() > self.key_max || value.len() > self.value_max {
            return Err(Error::InvalidArg(format!(
                "PMI: key {key} ({} bytes) or its value ({} bytes) exceeds the launcher's \
                 limits ({} / {})",
                key.len(),
                value.len(),
                self.key_max,
                self.value_max
            )));
        }
        Ok(())
    }

    fn send(&mut self, words: &[(&str, &str)]) -> Result<()> {
        let line = request(words)?;
        self.conn
            .write_all(&line)
            .map_err(|e| Error::os("PMI: write to the launcher", e))
    }

    /// Reads replies until one with `cmd=<cmd>`.
    fn expect(&mut self, cmd: &str) -> Result<Reply> {
        loop {
            let r = self.recv()?;
            if r.get("cmd") == Some(cmd) {
                return Ok(r);
            }
        }
    }

    fn recv(&mut self) -> Result<Reply> {
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return Ok(parse_line(&String::from_utf8_lossy(&line[..i])));
            }
            if self.pending.len() > MAX_REPLY {
                return Err(Error::Os(format!("PMI: reply line over {MAX_REPLY} bytes")));
            }
            let mut buf = [0u8; 4096];
            match self.conn.read(&mut buf) {
                Ok(0) => return Err(Error::Os("PMI: the launcher closed the connection".into())),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::os("PMI: read from the launcher (timed out?)", e));
                }
            }
        }
    }
}

/// Fuzzing entry point: a whole client session against a launcher whose
/// replies are arbitrary bytes.
#[cfg(feature = "fuzzing")]
pub fn fuzz(data: &[u8]) {
    // The first byte picks how the session starts: rank and size from the
    // environment, or told by the server after an `initack`.
    let (first, rest) = data.split_first().unwrap_or((&0, &[]));
    let conn = Box::new(crate::fuzz::Pipe::new(rest));
    let start = match first % 3 {
        0 => Pmi::start(conn, Some(0), Some(2), None),
        1 => Pmi::start(conn, None, None, Some("0".into())),
        _ => Pmi::start(conn, Some(3), Some(2), None),
    };
    if let Ok(mut pmi) = start {
        let _ = pmi
            .put("addr-0", "10.0.0.1:4000")
            .and_then(|_| pmi.barrier())
            .and_then(|_| pmi.get("addr-1"))
            .and_then(|_| pmi.finalize());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_requests_are_bounded() {
        let r = parse_line("cmd=get_result rc=0 msg=success value=10.0.0.1:5=x");
        assert_eq!(r.get("cmd"), Some("get_result"));
        assert_eq!(r.get("value"), Some("10.0.0.1:5=x"));
        assert_eq!(r.get("nothing"), None);
        assert_eq!(parse_line("garbage without pairs").0, vec![]);
        assert_eq!(
            request(&[("cmd", "put"), ("key", "a")]).unwrap(),
            b"cmd=put key=a\n"
        );
        assert!(request(&[("cmd", "put"), ("value", "a b")]).is_err());
        assert!(request(&[("cmd", "put"), ("k=y", "a")]).is_err());
        let long = "x".repeat(MAX_REQUEST);
        assert!(request(&[("cmd", "put"), ("value", &long)]).is_err());
    }

    #[test]
    fn a_session_over_a_socket_pair() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut got = String::new();
            let mut replies = vec![
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
                "cmd=my_kvsname kvsname=kvs_7_0\n",
                "cmd=put_result rc=0 msg=success\n",
                "cmd=barrier_out\n",
                "cmd=get_result rc=0 msg=success value=hello\n",
                "cmd=get_result rc=-1 msg=key_not_found\n",
            ]
            .into_iter();
            let mut buf = [0u8; 2048];
            // One request per read: each is a single write from the client.
            while let Ok(n @ 1..) = theirs.read(&mut buf) {
                got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
                match replies.next() {
                    Some(r) => theirs.write_all(r.as_bytes()).unwrap(),
                    None => break,
                }
            }
            got
        });
        let mut pmi = Pmi {
            conn: Box::new(ours),
            pending: Vec::new(),
            rank: 0,
            size: 2,
            kvs: String::new(),
            key_max: 0,
            value_max: 0,
            finalized: false,
        };
        pmi.send(&[("cmd", "init"), ("pmi_version", "1")]).unwrap();
        pmi.expect("response_to_init").unwrap();
        pmi.send(&[("cmd", "get_maxes")]).unwrap();
        assert_eq!(pmi.expect("maxes").unwrap().get("vallen_max"), Some("1024"));
        pmi.key_max = 64;
        pmi.value_max = 1024;
        pmi.send(&[("cmd", "get_my_kvsname")]).unwrap();
        pmi.kvs = pmi
            .expect("my_kvsname")
            .unwrap()
            .get("kvsname")
            .unwrap()
            .into();
        pmi.put("k", "hello").unwrap();
        pmi.barrier().unwrap();
        assert_eq!(pmi.get("k").unwrap(), "hello");
        assert!(pmi.get("missing").is_err());
        assert!(pmi.put(&"k".repeat(65), "v").is_err());
        drop(pmi);
        let log = server.join().unwrap();
        assert!(log.contains("cmd=put kvsname=kvs_7_0 key=k value=hello\n"));
        assert!(log.contains("cmd=barrier_in\n"));
    }
}
