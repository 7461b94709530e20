//! Environment management: init/finalize, versions, timers, error strings,
//! error handlers, abort.

use super::consts::*;
use super::errors::{class_text, MpiErr, MpiResult};
use super::ptr;
use super::state::{self, call, call_any};
use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;
use std::time::Instant;

/// The thread level ferrocoll provides: calls are serialised (by
/// `ffi::owner_lock`), but a blocked call holds the state, so concurrent
/// calls are not supported.
const PROVIDED: c_int = MPI_THREAD_SERIALIZED;

const LIBRARY_VERSION: &str = concat!(
    "ferrocoll ",
    env!("CARGO_PKG_VERSION"),
    " (MPI 4.0 subset, MPICH ABI, shared-memory transport)"
);

/// Exports `MPI_Init`.
#[no_mangle]
pub extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    PMPI_Init(argc, argv)
}

/// Profiling twin of `MPI_Init`.
#[no_mangle]
pub extern "C" fn PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    call_any("MPI_Init", || state::init(MPI_THREAD_SINGLE))
}

/// Exports `MPI_Init_thread`.
#[no_mangle]
pub extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    PMPI_Init_thread(argc, argv, required, provided)
}

/// Profiling twin of `MPI_Init_thread`.
#[no_mangle]
pub extern "C" fn PMPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    call_any("MPI_Init_thread", || {
        if !(MPI_THREAD_SINGLE..=MPI_THREAD_MULTIPLE).contains(&required) {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                format!("invalid thread level {required}"),
            ));
        }
        if provided.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "provided is NULL"));
        }
        let level = required.min(PROVIDED);
        state::init(level)?;
        ptr::put(provided, level, "provided")
    })
}

/// Exports `MPI_Initialized`.
#[no_mangle]
pub extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    PMPI_Initialized(flag)
}

/// Profiling twin of `MPI_Initialized`.
#[no_mangle]
pub extern "C" fn PMPI_Initialized(flag: *mut c_int) -> c_int {
    call_any("MPI_Initialized", || {
        ptr::put(flag, state::initialized() as c_int, "flag")
    })
}

/// Exports `MPI_Finalized`.
#[no_mangle]
pub extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    PMPI_Finalized(flag)
}

/// Profiling twin of `MPI_Finalized`.
#[no_mangle]
pub extern "C" fn PMPI_Finalized(flag: *mut c_int) -> c_int {
    call_any("MPI_Finalized", || {
        ptr::put(flag, state::finalized() as c_int, "flag")
    })
}

/// Exports `MPI_Finalize`.
#[no_mangle]
pub extern "C" fn MPI_Finalize() -> c_int {
    PMPI_Finalize()
}

/// Profiling twin of `MPI_Finalize`.
#[no_mangle]
pub extern "C" fn PMPI_Finalize() -> c_int {
    call_any("MPI_Finalize", state::finalize)
}

/// Exports `MPI_Abort`.
#[no_mangle]
pub extern "C" fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    PMPI_Abort(comm, errorcode)
}

/// Profiling twin of `MPI_Abort`: never returns.
#[no_mangle]
pub extern "C" fn PMPI_Abort(_comm: MPI_Comm, errorcode: c_int) -> c_int {
    let rank = state::world_rank();
    crate::param::say(&format!(
        "ferrocoll: MPI_Abort called by rank {rank} with error code {errorcode}; aborting the job"
    ));
    state::abort_job(rank.max(0) as usize, errorcode)
}

/// Exports `MPI_Query_thread`.
#[no_mangle]
pub extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    PMPI_Query_thread(provided)
}

/// Profiling twin of `MPI_Query_thread`.
#[no_mangle]
pub extern "C" fn PMPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", MPI_COMM_WORLD, |rt| {
        ptr::put(provided, rt.thread_level, "provided")
    })
}

/// Exports `MPI_Is_thread_main`.
#[no_mangle]
pub extern "C" fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    PMPI_Is_thread_main(flag)
}

/// Profiling twin of `MPI_Is_thread_main`.
#[no_mangle]
pub extern "C" fn PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
    call("MPI_Is_thread_main", MPI_COMM_WORLD, |rt| {
        ptr::put(
            flag,
            (rt.main_thread == std::thread::current().id()) as c_int,
            "flag",
        )
    })
}

/// Exports `MPI_Get_processor_name`.
#[no_mangle]
pub extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    PMPI_Get_processor_name(name, resultlen)
}

/// Profiling twin of `MPI_Get_processor_name`.
#[no_mangle]
pub extern "C" fn PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    // Not among the calls MPI allows before MPI_Init or after MPI_Finalize.
    call("MPI_Get_processor_name", MPI_COMM_WORLD, |_| {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        let host = if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        } else {
            "localhost".into()
        };
        ptr::put_str(name, MPI_MAX_PROCESSOR_NAME as usize, &host, resultlen)
    })
}

/// Exports `MPI_Get_version`.
#[no_mangle]
pub extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    PMPI_Get_version(version, subversion)
}

/// Profiling twin of `MPI_Get_version`.
#[no_mangle]
pub extern "C" fn PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    call_any("MPI_Get_version", || {
        ptr::put(version, MPI_VERSION, "version")?;
        ptr::put(subversion, MPI_SUBVERSION, "subversion")
    })
}

/// Exports `MPI_Get_library_version`.
#[no_mangle]
pub extern "C" fn MPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
    PMPI_Get_library_version(version, resultlen)
}

/// Profiling twin of `MPI_Get_library_version`.
#[no_mangle]
pub extern "C" fn PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
    call_any("MPI_Get_library_version", || {
        ptr::put_str(
            version,
            MPI_MAX_LIBRARY_VERSION_STRING as usize,
            LIBRARY_VERSION,
            resultlen,
        )
    })
}

fn epoch() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

/// Exports `MPI_Wtime`.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    PMPI_Wtime()
}

/// Profiling twin of `MPI_Wtime`: seconds on a monotonic clock.
#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    epoch().elapsed().as_secs_f64()
}

/// Exports `MPI_Wtick`.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    PMPI_Wtick()
}

/// Profiling twin of `MPI_Wtick`.
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}

fn known_class(code: c_int) -> MpiResult<&'static str> {
    class_text(code).ok_or_else(|| MpiErr::new(MPI_ERR_ARG, format!("invalid error code {code}")))
}

/// Exports `MPI_Error_string`.
#[no_mangle]
pub extern "C" fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    PMPI_Error_string(errorcode, string, resultlen)
}

/// Profiling twin of `MPI_Error_string`.
#[no_mangle]
pub extern "C" fn PMPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call_any("MPI_Error_string", || {
        let text = known_class(errorcode)?;
        ptr::put_str(string, MPI_MAX_ERROR_STRING as usize, text, resultlen)
    })
}

/// Exports `MPI_Error_class`.
#[no_mangle]
pub extern "C" fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    PMPI_Error_class(errorcode, errorclass)
}

/// Profiling twin of `MPI_Error_class`: ferrocoll's codes are classes.
#[no_mangle]
pub extern "C" fn PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    call_any("MPI_Error_class", || {
        known_class(errorcode)?;
        ptr::put(errorclass, errorcode, "errorclass")
    })
}

/// Exports `MPI_Comm_set_errhandler`.
#[no_mangle]
pub extern "C" fn MPI_Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    PMPI_Comm_set_errhandler(comm, errhandler)
}

/// Profiling twin of `MPI_Comm_set_errhandler`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    call("MPI_Comm_set_errhandler", comm, |rt| {
        if ![MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN, MPI_ERRORS_ABORT].contains(&errhandler) {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                format!("invalid error handler {errhandler:#x}"),
            ));
        }
        rt.comm(comm)?.errhandler = errhandler;
        if comm == MPI_COMM_WORLD {
            state::set_world_errhandler(errhandler);
        }
        Ok(())
    })
}

/// Exports `MPI_Comm_get_errhandler`.
#[no_mangle]
pub extern "C" fn MPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    PMPI_Comm_get_errhandler(comm, errhandler)
}

/// Profiling twin of `MPI_Comm_get_errhandler`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    call("MPI_Comm_get_errhandler", comm, |rt| {
        let eh = rt.comm(comm)?.errhandler;
        ptr::put(errhandler, eh, "errhandler")
    })
}
