//! Error classes: names, texts, the mapping from core errors, and the
//! error-handler decision (return the code, or print and abort the job).

use super::consts::*;
use crate::error::Error;
use std::os::raw::c_int;

/// (class, name, text) for every error class the header defines.
pub const CLASSES: &[(c_int, &str, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS", "no error"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"),
    (MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag"),
    (MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (MPI_ERR_OP, "MPI_ERR_OP", "invalid reduce operation"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (
        MPI_ERR_ARG,
        "MPI_ERR_ARG",
        "invalid argument of some other kind",
    ),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE", "message truncated"),
    (MPI_ERR_OTHER, "MPI_ERR_OTHER", "other error"),
    (MPI_ERR_INTERN, "MPI_ERR_INTERN", "internal error"),
    (
        MPI_ERR_IN_STATUS,
        "MPI_ERR_IN_STATUS",
        "error code is in status",
    ),
    (MPI_ERR_PENDING, "MPI_ERR_PENDING", "pending request"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"),
    (MPI_ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"),
    (MPI_ERR_AMODE, "MPI_ERR_AMODE", "invalid file access mode"),
    (MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name"),
    (
        MPI_ERR_CONVERSION,
        "MPI_ERR_CONVERSION",
        "data conversion error",
    ),
    (
        MPI_ERR_DUP_DATAREP,
        "MPI_ERR_DUP_DATAREP",
        "duplicate data representation",
    ),
    (MPI_ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS", "file exists"),
    (MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file in use"),
    (MPI_ERR_FILE, "MPI_ERR_FILE", "invalid file handle"),
    (MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info object"),
    (MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY", "invalid info key"),
    (
        MPI_ERR_INFO_VALUE,
        "MPI_ERR_INFO_VALUE",
        "invalid info value",
    ),
    (
        MPI_ERR_INFO_NOKEY,
        "MPI_ERR_INFO_NOKEY",
        "info key not found",
    ),
    (MPI_ERR_IO, "MPI_ERR_IO", "I/O error"),
    (MPI_ERR_NAME, "MPI_ERR_NAME", "invalid service name"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"),
    (
        MPI_ERR_NOT_SAME,
        "MPI_ERR_NOT_SAME",
        "collective arguments differ between processes",
    ),
    (MPI_ERR_NO_SPACE, "MPI_ERR_NO_SPACE", "not enough space"),
    (MPI_ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE", "no such file"),
    (MPI_ERR_PORT, "MPI_ERR_PORT", "invalid port"),
    (MPI_ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"),
    (
        MPI_ERR_READ_ONLY,
        "MPI_ERR_READ_ONLY",
        "read-only file or file system",
    ),
    (MPI_ERR_SERVICE, "MPI_ERR_SERVICE", "invalid service"),
    (MPI_ERR_SPAWN, "MPI_ERR_SPAWN", "spawn error"),
    (
        MPI_ERR_UNSUPPORTED_DATAREP,
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    (
        MPI_ERR_UNSUPPORTED_OPERATION,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "unsupported operation",
    ),
    (MPI_ERR_WIN, "MPI_ERR_WIN", "invalid window"),
    (MPI_ERR_BASE, "MPI_ERR_BASE", "invalid base address"),
    (MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid keyval"),
    (
        MPI_ERR_RMA_CONFLICT,
        "MPI_ERR_RMA_CONFLICT",
        "conflicting RMA accesses",
    ),
    (
        MPI_ERR_RMA_SYNC,
        "MPI_ERR_RMA_SYNC",
        "wrong RMA synchronization",
    ),
    (MPI_ERR_SIZE, "MPI_ERR_SIZE", "invalid size"),
    (MPI_ERR_DISP, "MPI_ERR_DISP", "invalid displacement"),
    (MPI_ERR_ASSERT, "MPI_ERR_ASSERT", "invalid assert"),
    (
        MPI_ERR_RMA_RANGE,
        "MPI_ERR_RMA_RANGE",
        "RMA target out of range",
    ),
    (
        MPI_ERR_RMA_ATTACH,
        "MPI_ERR_RMA_ATTACH",
        "RMA attach failed",
    ),
    (
        MPI_ERR_RMA_SHARED,
        "MPI_ERR_RMA_SHARED",
        "RMA shared memory error",
    ),
    (
        MPI_ERR_RMA_FLAVOR,
        "MPI_ERR_RMA_FLAVOR",
        "wrong RMA window flavor",
    ),
    (MPI_ERR_SESSION, "MPI_ERR_SESSION", "invalid session"),
    (
        MPI_ERR_PROC_ABORTED,
        "MPI_ERR_PROC_ABORTED",
        "a peer process aborted or died",
    ),
    (
        MPI_ERR_VALUE_TOO_LARGE,
        "MPI_ERR_VALUE_TOO_LARGE",
        "value too large",
    ),
    (
        MPI_T_ERR_MEMORY,
        "MPI_T_ERR_MEMORY",
        "tool interface: out of memory",
    ),
    (
        MPI_T_ERR_NOT_INITIALIZED,
        "MPI_T_ERR_NOT_INITIALIZED",
        "tool interface: not initialized",
    ),
    (
        MPI_T_ERR_CANNOT_INIT,
        "MPI_T_ERR_CANNOT_INIT",
        "tool interface: cannot be initialized",
    ),
    (
        MPI_T_ERR_INVALID_INDEX,
        "MPI_T_ERR_INVALID_INDEX",
        "tool interface: invalid index",
    ),
    (
        MPI_T_ERR_INVALID_ITEM,
        "MPI_T_ERR_INVALID_ITEM",
        "tool interface: invalid item",
    ),
    (
        MPI_T_ERR_INVALID_HANDLE,
        "MPI_T_ERR_INVALID_HANDLE",
        "tool interface: invalid handle",
    ),
    (
        MPI_T_ERR_OUT_OF_HANDLES,
        "MPI_T_ERR_OUT_OF_HANDLES",
        "tool interface: out of handles",
    ),
    (
        MPI_T_ERR_OUT_OF_SESSIONS,
        "MPI_T_ERR_OUT_OF_SESSIONS",
        "tool interface: out of sessions",
    ),
    (
        MPI_T_ERR_INVALID_SESSION,
        "MPI_T_ERR_INVALID_SESSION",
        "tool interface: invalid session",
    ),
    (
        MPI_T_ERR_CVAR_SET_NOT_NOW,
        "MPI_T_ERR_CVAR_SET_NOT_NOW",
        "tool interface: control variable cannot be set now",
    ),
    (
        MPI_T_ERR_CVAR_SET_NEVER,
        "MPI_T_ERR_CVAR_SET_NEVER",
        "tool interface: control variable can never be set",
    ),
    (
        MPI_T_ERR_PVAR_NO_STARTSTOP,
        "MPI_T_ERR_PVAR_NO_STARTSTOP",
        "tool interface: performance variable cannot be started or stopped",
    ),
    (
        MPI_T_ERR_PVAR_NO_WRITE,
        "MPI_T_ERR_PVAR_NO_WRITE",
        "tool interface: performance variable cannot be written",
    ),
    (
        MPI_T_ERR_PVAR_NO_ATOMIC,
        "MPI_T_ERR_PVAR_NO_ATOMIC",
        "tool interface: performance variable cannot be read and reset atomically",
    ),
    (
        MPI_T_ERR_INVALID_NAME,
        "MPI_T_ERR_INVALID_NAME",
        "tool interface: invalid name",
    ),
    (
        MPI_T_ERR_INVALID,
        "MPI_T_ERR_INVALID",
        "tool interface: invalid use",
    ),
    (
        MPI_T_ERR_NOT_SUPPORTED,
        "MPI_T_ERR_NOT_SUPPORTED",
        "tool interface: not supported",
    ),
];

/// An MPI error: its class and a message for the one-line report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiErr {
    /// Error class (returned as the error code).
    pub class: c_int,
    /// What went wrong, for the fatal-handler line and debugging.
    pub msg: String,
}

impl MpiErr {
    /// An error of `class` with a message.
    pub fn new(class: c_int, msg: impl Into<String>) -> MpiErr {
        MpiErr {
            class,
            msg: msg.into(),
        }
    }
}

/// Shorthand for results of the MPI layer.
pub type MpiResult<T> = Result<T, MpiErr>;

/// Name of an error class (`MPI_ERR_TYPE`), if it is one.
pub fn class_name(class: c_int) -> Option<&'static str> {
    CLASSES.iter().find(|c| c.0 == class).map(|c| c.1)
}

/// Readable text of an error class, if it is one.
pub fn class_text(class: c_int) -> Option<&'static str> {
    CLASSES.iter().find(|c| c.0 == class).map(|c| c.2)
}

impl From<Error> for MpiErr {
    fn from(e: Error) -> MpiErr {
        let class = match &e {
            Error::InvalidArg(_) => MPI_ERR_ARG,
            Error::Truncated { .. } => MPI_ERR_TRUNCATE,
            Error::PeerDied { .. } | Error::Aborted { .. } => MPI_ERR_PROC_ABORTED,
            Error::Timeout { .. } | Error::Cancelled { .. } => MPI_ERR_OTHER,
            Error::Unsupported(_) => MPI_ERR_UNSUPPORTED_OPERATION,
            Error::Os(_) | Error::Mismatch(_) | Error::Protocol { .. } => MPI_ERR_OTHER,
            Error::Poisoned(_) => MPI_ERR_INTERN,
        };
        MpiErr::new(class, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_a_distinct_name_and_text() {
        for (i, (c, n, t)) in CLASSES.iter().enumerate() {
            assert!(n.starts_with("MPI_") && !t.is_empty());
            assert!(CLASSES[i + 1..].iter().all(|o| o.0 != *c));
        }
        assert_eq!(class_name(MPI_ERR_TYPE), Some("MPI_ERR_TYPE"));
        assert_eq!(class_text(12345), None);
    }
}
