//! Per-peer links. A link moves a stream of framed bytes to one peer and
//! from it; posting, matching and waiting live in `comm::engine`, which
//! drives every link of a rank from one progress loop, so a rank sending a
//! large message keeps draining what its peers send it (no ring deadlock).

pub mod frame;
pub mod shm;
pub mod tcp;

use frame::FRAME_BYTES;
use shm::ring::Ring;
use std::collections::VecDeque;

/// One peer's connection, chosen per peer: shared memory on this host, TCP
/// to other hosts (or everywhere when forced), a loop-back queue for the
/// rank itself.
pub enum Link {
    /// Two rings in the job's shared segment (to the peer, from the peer).
    Shm {
        /// Bytes from this rank to the peer.
        tx: Ring,
        /// Bytes from the peer to this rank.
        rx: Ring,
    },
    /// A rank talking to itself: an in-process byte queue.
    SelfLoop(VecDeque<u8>),
    /// A TCP connection, served by the process's progress thread.
    Tcp(tcp::link::TcpLink),
}

impl Link {
    /// Takes as much of `a`, then `b`, as the link accepts now; returns
    /// the bytes taken. `uncached`: shared memory gets `b` past the cache
    /// (`shm::far`).
    pub fn write_parts(&mut self, a: &[u8], b: &[u8], uncached: bool) -> usize {
        match self {
            Link::Shm { tx, .. } => {
                let n = tx.write_some(a, false);
                if n < a.len() {
                    return n;
                }
                n + tx.write_some(b, uncached)
            }
            Link::SelfLoop(q) => {
                q.extend(a);
                q.extend(b);
                a.len() + b.len()
            }
            Link::Tcp(t) => t.write_parts(a, b),
        }
    }

    /// Writes `a` then `b` as one unit if the link has room for both now;
    /// `uncached` as for `write_parts`.
    pub fn write_both(&mut self, a: &[u8], b: &[u8], uncached: bool) -> bool {
        match self {
            Link::Shm { tx, .. } => tx.write_both(a, b, uncached),
            Link::Tcp(t) => t.write_both(a, b),
            Link::SelfLoop(q) => {
                q.extend(a);
                q.extend(b);
                true
            }
        }
    }

    /// Bytes waiting to be read.
    pub fn readable(&self) -> usize {
        match self {
            Link::Shm { rx, .. } => rx.readable(),
            Link::SelfLoop(q) => q.len(),
            Link::Tcp(t) => t.readable(),
        }
    }

    /// Copies the next `dst.len()` bytes without consuming them, where the
    /// link can show them now in one piece (shared memory only).
    pub fn peek(&self, dst: &mut [u8]) -> bool {
        match self {
            Link::Shm { rx, .. } => rx.peek(dst),
            _ => false,
        }
    }

    /// The shared-memory post due, when the next bytes are one whole
    /// (`Ring::post_framed`): its header bytes and the rest where it lies;
    /// `None` on other links or when the next bytes are not such a post.
    pub fn post_framed(&self) -> Option<([u8; FRAME_BYTES], &[u8])> {
        match self {
            Link::Shm { rx, .. } => rx.post_framed(),
            _ => None,
        }
    }

    /// Marks the first `n` bytes that `post_framed` showed as read.
    pub fn consume_post(&mut self, n: usize) {
        match self {
            Link::Shm { rx, .. } => rx.consume_post(n),
            _ => unreachable!("post_framed shows posts of shared-memory links only"),
        }
    }

    /// Hands up to `max` waiting bytes to `f` in order, consuming them.
    pub fn read_with(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        match self {
            Link::Shm { rx, .. } => rx.read_with(max, f),
            Link::Tcp(t) => t.read_with(max, f),
            Link::SelfLoop(q) => {
                let n = max.min(q.len());
                let (a, b) = q.as_slices();
                let first = n.min(a.len());
                f(&a[..first]);
                if n > first {
                    f(&b[..n - first]);
                }
                q.drain(..n);
                n
            }
        }
    }

    /// Fills `dst` with waiting bytes, in order; returns how many. A TCP
    /// link reads the socket straight into `dst` when nothing was read
    /// ahead, so the bytes are not copied twice.
    pub fn read_into(&mut self, dst: &mut [u8]) -> usize {
        if let Link::Tcp(t) = self {
            return t.read_into(dst);
        }
        let mut o = 0;
        self.read_with(dst.len(), |s| {
            crate::copy::copy_message(&mut dst[o..o + s.len()], s);
            o += s.len();
        })
    }

    /// `read_into` for a destination that is not read again soon (a large
    /// message): shared-memory bytes are stored past the cache
    /// (`copy_uncached`).
    pub fn read_into_uncached(&mut self, dst: &mut [u8]) -> usize {
        if !matches!(self, Link::Shm { .. }) {
            return self.read_into(dst);
        }
        let mut o = 0;
        self.read_with(dst.len(), |s| {
            crate::copy::copy_uncached(&mut dst[o..o + s.len()], s);
            o += s.len();
        })
    }

    /// Whether reads go to the socket themselves (`read_into` needs no
    /// `readable` first).
    pub fn reads_directly(&self) -> bool {
        matches!(self, Link::Tcp(_))
    }

    /// Whether writes go to shared memory (where `uncached` counts).
    pub fn is_shm(&self) -> bool {
        matches!(self, Link::Shm { .. })
    }

    /// Whether bytes written here are seen by another process (so the
    /// peer's doorbell must be rung).
    pub fn is_remote(&self) -> bool {
        matches!(self, Link::Shm { .. })
    }

    /// Whether the peer left this side's last messages unread (a
    /// shared-memory ring whose posts it still held at the last look; see
    /// `Ring::backlogged`); cheap.
    pub fn backlogged(&self) -> bool {
        match self {
            Link::Shm { tx, .. } => tx.backlogged(),
            _ => false,
        }
    }

    /// Whether the link can carry nothing more (its peer is gone); cheap,
    /// unlike `failure`.
    pub fn has_failed(&self) -> bool {
        match self {
            Link::Tcp(t) => t.has_failed(),
            _ => false,
        }
    }

    /// Why the link can carry nothing more (its peer is gone) and since
    /// when, if so; `drained` tells whether everything it brought was read.
    pub fn failure(&self) -> Option<(String, std::time::Instant, bool)> {
        match self {
            Link::Tcp(t) => t.died_at().map(|at| (t.why(), at, t.is_dead())),
            _ => None,
        }
    }
}
