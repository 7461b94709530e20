//! Turning C pointers into slices and writing through out-pointers: the
//! MPI face's only raw-memory accesses.

use super::consts::{MPI_Status, MPI_ERR_ARG, MPI_ERR_BUFFER};
use super::errors::{MpiErr, MpiResult};
use std::os::raw::{c_char, c_void};

/// `MPI_IN_PLACE`.
pub const IN_PLACE: *const c_void = usize::MAX as *const c_void;
/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`: MPICH's sentinel is the
/// address 1 exactly, not an aligned dangling pointer.
#[allow(clippy::manual_dangling_ptr)]
pub const STATUS_IGNORE: *mut MPI_Status = 1 as *mut MPI_Status;

/// True for `MPI_IN_PLACE`.
pub(crate) fn is_in_place(p: *const c_void) -> bool {
    p == IN_PLACE
}

/// Fails with `MPI_ERR_BUFFER` for a null (or `MPI_IN_PLACE`) buffer that
/// must hold `len > 0` bytes.
pub(crate) fn check_buf(p: *const c_void, len: usize, what: &str) -> MpiResult<()> {
    if len > 0 && (p.is_null() || is_in_place(p)) {
        return Err(MpiErr::new(
            MPI_ERR_BUFFER,
            format!(
                "{what} is {} but holds {len} bytes",
                if p.is_null() { "NULL" } else { "MPI_IN_PLACE" }
            ),
        ));
    }
    Ok(())
}

/// Fails with `MPI_ERR_BUFFER` if two byte ranges overlap (MPI forbids
/// aliased send and receive buffers outside `MPI_IN_PLACE`).
pub(crate) fn check_disjoint(
    a: *const c_void,
    alen: usize,
    b: *const c_void,
    blen: usize,
) -> MpiResult<()> {
    let (a, b) = (a as usize, b as usize);
    if alen > 0 && blen > 0 && a < b + blen && b < a + alen {
        return Err(MpiErr::new(
            MPI_ERR_BUFFER,
            "send and receive buffers overlap (use MPI_IN_PLACE)",
        ));
    }
    Ok(())
}

/// The `len` bytes at `p`.
///
/// # Safety
/// Unless `len == 0`, `p` must be valid for reads of `len` bytes for `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p as *const u8, len) }
}

/// The `len` writable bytes at `p`.
///
/// # Safety
/// Unless `len == 0`, `p` must be valid for reads and writes of `len` bytes
/// for `'a` and not aliased by any other live reference.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut c_void, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) }
}

/// Writes `v` through an out-pointer, failing with `MPI_ERR_ARG` for null.
pub(crate) fn put<T>(p: *mut T, v: T, what: &str) -> MpiResult<()> {
    if p.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, format!("{what} is NULL")));
    }
    // SAFETY: non-null; the MPI contract makes out-pointers valid for writes.
    unsafe { p.write(v) };
    Ok(())
}

/// Reads an in-out pointer, failing with `MPI_ERR_ARG` for null.
pub(crate) fn get<T: Copy>(p: *const T, what: &str) -> MpiResult<T> {
    if p.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, format!("{what} is NULL")));
    }
    // SAFETY: non-null; the MPI contract makes in-out pointers readable.
    Ok(unsafe { p.read() })
}

/// Reads `n` elements of a C array, failing with `MPI_ERR_ARG` for null.
pub(crate) fn array<'a, T>(p: *const T, n: usize, what: &str) -> MpiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, format!("{what} is NULL")));
    }
    // SAFETY: non-null; the MPI contract makes the array hold n elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Writable view of `n` elements of a C array (null: `MPI_ERR_ARG`).
pub(crate) fn array_mut<'a, T>(p: *mut T, n: usize, what: &str) -> MpiResult<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, format!("{what} is NULL")));
    }
    // SAFETY: non-null; the MPI contract makes the array hold n elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Copies `s` into a C string buffer of `cap` bytes (NUL-terminated,
/// truncated to fit) and stores the length without the NUL in `len`.
pub(crate) fn put_str(
    buf: *mut c_char,
    cap: usize,
    s: &str,
    len: *mut std::os::raw::c_int,
) -> MpiResult<()> {
    if buf.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, "string buffer is NULL"));
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: the MPI contract sizes `buf` for `cap` bytes; n + 1 <= cap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    put(len, n as std::os::raw::c_int, "resultlen")
}

/// Reads a NUL-terminated C string (lossily), failing for null.
pub(crate) fn read_str(p: *const c_char) -> MpiResult<String> {
    if p.is_null() {
        return Err(MpiErr::new(MPI_ERR_ARG, "string is NULL"));
    }
    // SAFETY: non-null and NUL-terminated per the MPI contract.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Writes a status unless it is `MPI_STATUS_IGNORE`.
pub(crate) fn put_status(p: *mut MPI_Status, st: MPI_Status) -> MpiResult<()> {
    if p == STATUS_IGNORE {
        return Ok(());
    }
    put(p, st, "status")
}

/// The statuses array of a multiple-completion call, or `None` for
/// `MPI_STATUSES_IGNORE`.
pub(crate) fn statuses<'a>(
    p: *mut MPI_Status,
    n: usize,
) -> MpiResult<Option<&'a mut [MPI_Status]>> {
    if p == STATUS_IGNORE {
        return Ok(None);
    }
    array_mut(p, n, "array_of_statuses").map(Some)
}
