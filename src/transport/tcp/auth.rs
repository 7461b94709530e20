//! Job secret and the mutual challenge-response that every TCP connection
//! (store and data) passes before any other byte is trusted.
//!
//! Both sides send a fixed-size hello (magic, a fresh 32-byte nonce, an
//! id), then an HMAC-SHA256 over both hellos keyed with the job secret,
//! tagged with the side's role so a reply cannot be reflected back. Only
//! fixed-size reads happen before the tags are checked (in constant time),
//! so a stranger can make a listener read at most 112 bytes and nothing is
//! sized by what it sends.

use crate::error::{Error, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};

const MAGIC: &[u8; 8] = b"FRCL\x00\x00\x00\x01";
const HELLO: usize = 8 + 32 + 8;
const TAG: usize = 32;

/// A job's shared secret (256 bits).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A fresh random secret.
    pub fn random() -> Result<Secret> {
        let mut s = [0u8; 32];
        getrandom::getrandom(&mut s)
            .map_err(|e| Error::Unsupported(format!("no randomness for the job secret: {e}")))?;
        Ok(Secret(s))
    }

    /// A secret derived from a job's public name, for launchers that carry
    /// no secret (torchrun- or Slurm-style environments without
    /// `FERROCOLL_SECRET`): it keeps other jobs' ranks apart, not attackers out.
    pub fn derived(name: &str) -> Secret {
        use sha2::Digest;
        let d = Sha256::digest(format!("ferrocoll-derived-secret/{name}").as_bytes());
        Secret(d.into())
    }

    /// Parses 64 hex digits (as `to_hex` writes them).
    pub fn from_hex(s: &str) -> Result<Secret> {
        let s = s.trim();
        let bad = || Error::InvalidArg("the job secret must be 64 hex digits".into());
        if s.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(s.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(Secret(out))
    }

    /// The secret's bytes (to carry it inside an NCCL unique id).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A secret from its bytes.
    pub fn from_bytes(b: [u8; 32]) -> Secret {
        Secret(b)
    }

    /// 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn tag(&self, role: u8, first: &[u8], second: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        m.update(b"ferrocoll-auth");
        m.update(&[role]);
        m.update(first);
        m.update(second);
        m
    }
}

/// Which end of a connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Opened the connection.
    Connector,
    /// Accepted it.
    Acceptor,
}

fn hello(id: u64) -> Result<[u8; HELLO]> {
    let mut h = [0u8; HELLO];
    h[..8].copy_from_slice(MAGIC);
    getrandom::getrandom(&mut h[8..40])
        .map_err(|e| Error::Unsupported(format!("no randomness for a nonce: {e}")))?;
    h[40..].copy_from_slice(&id.to_le_bytes());
    Ok(h)
}

/// Runs the handshake on `stream` (whose read timeout bounds the wait) and
/// returns the id the peer claimed, now proven to come from a holder of
/// `secret`. Any failure means the peer is not part of the job.
pub fn handshake<S: Read + Write>(
    stream: &mut S,
    secret: &Secret,
    role: Role,
    id: u64,
) -> Result<u64> {
    let io = |e: std::io::Error| Error::os("connection handshake", e);
    let mine = hello(id)?;
    stream.write_all(&mine).map_err(io)?;
    let mut theirs = [0u8; HELLO];
    stream.read_exact(&mut theirs).map_err(io)?;
    if &theirs[..8] != MAGIC {
        return Err(Error::InvalidArg(
            "peer is not a ferrocoll rank (bad greeting)".into(),
        ));
    }
    // Both tags cover (connector's hello, acceptor's hello).
    let (first, second) = match role {
        Role::Connector => (&mine, &theirs),
        Role::Acceptor => (&theirs, &mine),
    };
    let (my_role, their_role) = match role {
        Role::Connector => (b'C', b'A'),
        Role::Acceptor => (b'A', b'C'),
    };
    let tag = secret.tag(my_role, first, second).finalize().into_bytes();
    stream.write_all(&tag).map_err(io)?;
    let mut got = [0u8; TAG];
    stream.read_exact(&mut got).map_err(io)?;
    secret
        .tag(their_role, first, second)
        .verify_slice(&got)
        .map_err(|_| Error::InvalidArg("peer failed authentication (wrong job secret)".into()))?;
    Ok(u64::from_le_bytes(
        theirs[40..].try_into().expect("8 bytes"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair(a: Secret, b: Secret) -> (Result<u64>, Result<u64>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            handshake(&mut s, &b, Role::Acceptor, 7)
        });
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let r = handshake(&mut s, &a, Role::Connector, 3);
        drop(s);
        (r, t.join().unwrap())
    }

    #[test]
    fn same_secret_passes_and_wrong_secret_fails_both_ways() {
        let s = Secret::random().unwrap();
        let (a, b) = pair(s.clone(), s.clone());
        assert_eq!((a.unwrap(), b.unwrap()), (7, 3));
        let (a, b) = pair(s.clone(), Secret::random().unwrap());
        assert!(a.is_err() && b.is_err());
        assert_eq!(Secret::from_hex(&s.to_hex()).unwrap(), s);
        assert!(Secret::from_hex("zz").is_err());
        assert!(Secret::from_hex(&"g".repeat(64)).is_err());
    }
}
