//! Errors of the NCCL face: result codes, the texts `ncclGetErrorString`
//! and `ncclGetLastError` return, and the entry wrapper every export runs
//! its body in (panic catch, last error, `FERROCOLL_DEBUG` log line).

use super::types::ncclResult_t::{self, *};
use crate::error::Error;
use crate::ffi::boundary;
use crate::param::{debug_log, DebugLevel};
use std::cell::RefCell;
use std::ffi::CString;
use std::os::raw::c_char;

/// A failed call: its result code and a readable message.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclErr {
    /// What the call returns.
    pub code: ncclResult_t,
    /// What `ncclGetLastError` says.
    pub msg: String,
}

/// Result of the NCCL face's internals.
pub type NcclResult<T> = Result<T, NcclErr>;

impl NcclErr {
    /// `ncclInvalidArgument` with `msg`.
    pub fn arg(msg: impl Into<String>) -> NcclErr {
        NcclErr {
            code: ncclInvalidArgument,
            msg: msg.into(),
        }
    }

    /// `ncclInvalidUsage` with `msg`.
    pub fn usage(msg: impl Into<String>) -> NcclErr {
        NcclErr {
            code: ncclInvalidUsage,
            msg: msg.into(),
        }
    }

    /// Not an error: a non-blocking communicator is still being set up.
    pub fn in_progress() -> NcclErr {
        NcclErr {
            code: ncclInProgress,
            msg: String::new(),
        }
    }
}

impl From<Error> for NcclErr {
    fn from(e: Error) -> NcclErr {
        let code = match &e {
            Error::InvalidArg(_) => ncclInvalidArgument,
            // Ranks disagreeing on sizes is a usage error, as in NCCL.
            Error::Truncated { .. }
            | Error::Unsupported(_)
            | Error::Cancelled { .. }
            | Error::Mismatch(_) => ncclInvalidUsage,
            Error::PeerDied { .. } | Error::Aborted { .. } | Error::Protocol { .. } => {
                ncclRemoteError
            }
            Error::Timeout { .. } => ncclTimeout,
            Error::Os(_) => ncclSystemError,
            Error::Poisoned(_) => ncclInternalError,
        };
        NcclErr {
            code,
            msg: e.to_string(),
        }
    }
}

/// NCCL's texts for each result (`ncclGetErrorString`).
pub fn describe(code: i32) -> &'static std::ffi::CStr {
    match code {
        0 => c"no error",
        1 => c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        2 => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        3 => c"internal error - please report this issue to the NCCL developers",
        4 => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        5 => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        6 => c"remote process exited or there was a network error",
        7 => c"NCCL operation in progress",
        8 => c"timeout",
        _ => c"unknown result code",
    }
}

thread_local! {
    /// This thread's last error text (`ncclGetLastError`), kept until the
    /// thread's next error so the returned pointer stays valid.
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as this thread's last error.
pub fn set_last(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// This thread's last error text.
pub fn last() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// Runs an export's body: a panic becomes `ncclInternalError`; an error is
/// logged at `FERROCOLL_DEBUG=warn` (or `NCCL_DEBUG=WARN`) and kept as the
/// last error.
pub fn entry(name: &'static str, f: impl FnOnce() -> NcclResult<()>) -> ncclResult_t {
    let e = match boundary::catch(f) {
        Ok(Ok(())) => return ncclSuccess,
        Ok(Err(e)) if e.code == ncclInProgress => return ncclInProgress,
        Ok(Err(e)) => e,
        Err(panic) => NcclErr {
            code: ncclInternalError,
            msg: format!("internal panic: {panic}"),
        },
    };
    let msg = format!("{name}: {}", e.msg);
    debug_log(DebugLevel::Warn, || format!("NCCL WARN {msg}"));
    set_last(&msg);
    e.code
}
