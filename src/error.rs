//! Errors of the core. No C types here: `ffi/` maps them to MPI classes.

use thiserror::Error;

/// Everything the core can fail with.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// A caller-supplied argument is invalid (bad rank, size mismatch, ...).
    #[error("invalid argument: {0}")]
    InvalidArg(String),
    /// A message was longer than the receive buffer.
    #[error("message truncated: {got} bytes arrived for a {cap}-byte buffer from rank {src}")]
    Truncated {
        /// Bytes the sender sent.
        got: usize,
        /// Bytes the receive buffer holds.
        cap: usize,
        /// Sender's rank in the communicator.
        src: usize,
    },
    /// A peer process exited or was killed while an operation still needed it.
    #[error("peer rank {rank} died during {op}")]
    PeerDied {
        /// World rank of the dead peer.
        rank: usize,
        /// What was waiting for it.
        op: &'static str,
    },
    /// A wait passed its deadline.
    #[error("timed out after {secs} s in {op} waiting for rank(s) {peers}")]
    Timeout {
        /// The deadline in seconds.
        secs: f64,
        /// What was waiting.
        op: &'static str,
        /// The peers that had not answered.
        peers: String,
    },
    /// Another rank aborted the job.
    #[error("rank {rank} aborted the job with code {code}")]
    Aborted {
        /// World rank that called abort.
        rank: usize,
        /// Its error code.
        code: i32,
    },
    /// The communicator was aborted locally (`ncclCommAbort`) while the
    /// operation waited.
    #[error("{op} stopped: the communicator was aborted")]
    Cancelled {
        /// What was waiting.
        op: &'static str,
    },
    /// A peer sent bytes that cannot be part of a well-formed message
    /// stream (a broken or foreign process): nothing more from it is read.
    #[error("rank {rank} sent a malformed message stream: {why}")]
    Protocol {
        /// World rank of the sender.
        rank: usize,
        /// What was wrong.
        why: String,
    },
    /// Ranks called a collective with different arguments
    /// (`FERROCOLL_CHECK`); the message names both sides.
    #[error("{0}")]
    Mismatch(String),
    /// A feature outside what ferrocoll implements.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Operating-system failure (shared memory, files).
    #[error("system error: {0}")]
    Os(String),
    /// An earlier failure left this communicator in an unknown state.
    #[error("communicator poisoned by an earlier failure: {0}")]
    Poisoned(String),
}

/// Result of core operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn os(what: &str, e: std::io::Error) -> Self {
        Error::Os(format!("{what}: {e}"))
    }
}
