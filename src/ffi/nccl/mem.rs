//! Memory exports. `ncclMemAlloc` gives device memory of the calling
//! thread's current device when CUDA is present and the thread has a
//! context (as NCCL does), else page-aligned host memory (host mode).
//! Registration records the range and returns a handle (there is nothing to
//! pin or map, but handles are checked like NCCL's).

#![allow(non_snake_case)]

use super::comm::shared_of;
use super::result::{entry, NcclErr};
use super::types::*;
use std::collections::HashMap;
use std::os::raw::c_void;
use std::sync::Mutex;

/// Blocks `ncclMemAlloc` handed out: address -> (size, on the device).
static ALLOCATED: Mutex<Option<HashMap<usize, (usize, bool)>>> = Mutex::new(None);
/// Registration handles: handle address -> (buffer, size).
static REGISTERED: Mutex<Option<HashMap<usize, (usize, usize)>>> = Mutex::new(None);

fn layout(size: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(size.max(1), 4096).ok()
}

/// Exports `ncclMemAlloc`.
#[no_mangle]
pub extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> ncclResult_t {
    pncclMemAlloc(ptr, size)
}

/// Profiling twin of `ncclMemAlloc`.
#[no_mangle]
pub extern "C" fn pncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> ncclResult_t {
    entry("ncclMemAlloc", || {
        if ptr.is_null() {
            return Err(NcclErr::arg("ptr is NULL"));
        }
        let l = layout(size).ok_or_else(|| NcclErr::arg(format!("size {size} is too large")))?;
        let on_device = crate::gpu::current_device().is_some();
        let p = if on_device {
            crate::gpu::driver::alloc(size.max(1)).map_err(|e| NcclErr {
                code: ncclResult_t::ncclUnhandledCudaError,
                msg: e.0,
            })? as *mut u8
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { std::alloc::alloc_zeroed(l) }
        };
        if p.is_null() {
            return Err(NcclErr {
                code: ncclResult_t::ncclSystemError,
                msg: format!("out of memory allocating {size} bytes"),
            });
        }
        ALLOCATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(p as usize, (size, on_device));
        // SAFETY: checked non-null.
        unsafe { *ptr = p as *mut c_void };
        Ok(())
    })
}

/// Exports `ncclMemFree`.
#[no_mangle]
pub extern "C" fn ncclMemFree(ptr: *mut c_void) -> ncclResult_t {
    pncclMemFree(ptr)
}

/// Profiling twin of `ncclMemFree`.
#[no_mangle]
pub extern "C" fn pncclMemFree(ptr: *mut c_void) -> ncclResult_t {
    entry("ncclMemFree", || {
        if ptr.is_null() {
            return Ok(());
        }
        let (size, on_device) = ALLOCATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .remove(&(ptr as usize))
            .ok_or_else(|| NcclErr::arg("ptr did not come from ncclMemAlloc"))?;
        if on_device {
            return crate::gpu::driver::free(ptr as usize).map_err(|e| NcclErr {
                code: ncclResult_t::ncclUnhandledCudaError,
                msg: e.0,
            });
        }
        let l = layout(size).expect("allocated with this layout");
        // SAFETY: allocated by ncclMemAlloc with this layout, freed once.
        unsafe { std::alloc::dealloc(ptr as *mut u8, l) };
        Ok(())
    })
}

/// Exports `ncclCommRegister`.
#[no_mangle]
pub extern "C" fn ncclCommRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    handle: *mut *mut c_void,
) -> ncclResult_t {
    pncclCommRegister(comm, buff, size, handle)
}

/// Profiling twin of `ncclCommRegister`.
#[no_mangle]
pub extern "C" fn pncclCommRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    handle: *mut *mut c_void,
) -> ncclResult_t {
    entry("ncclCommRegister", || {
        // SAFETY: shared_of checks the handle.
        unsafe { shared_of(comm) }?;
        if handle.is_null() || (buff.is_null() && size > 0) {
            return Err(NcclErr::arg("buff and handle must not be NULL"));
        }
        let h = Box::into_raw(Box::new(0u64)) as usize;
        REGISTERED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(h, (buff as usize, size));
        // SAFETY: checked non-null.
        unsafe { *handle = h as *mut c_void };
        Ok(())
    })
}

/// Exports `ncclCommDeregister`.
#[no_mangle]
pub extern "C" fn ncclCommDeregister(comm: ncclComm_t, handle: *mut c_void) -> ncclResult_t {
    pncclCommDeregister(comm, handle)
}

/// Profiling twin of `ncclCommDeregister`.
#[no_mangle]
pub extern "C" fn pncclCommDeregister(comm: ncclComm_t, handle: *mut c_void) -> ncclResult_t {
    entry("ncclCommDeregister", || {
        // SAFETY: shared_of checks the handle.
        unsafe { shared_of(comm) }?;
        REGISTERED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .remove(&(handle as usize))
            .ok_or_else(|| NcclErr::arg("handle did not come from ncclCommRegister"))?;
        // SAFETY: made by Box::into_raw in ncclCommRegister, removed once above.
        drop(unsafe { Box::from_raw(handle as *mut u64) });
        Ok(())
    })
}

/// Exports `ncclCommMemStats`.
#[no_mangle]
pub extern "C" fn ncclCommMemStats(
    comm: ncclComm_t,
    stat: ncclCommMemStatArg,
    value: *mut u64,
) -> ncclResult_t {
    pncclCommMemStats(comm, stat, value)
}

/// Profiling twin of `ncclCommMemStats`: host mode holds no GPU memory, so
/// every statistic is 0 (and nothing is suspended).
#[no_mangle]
pub extern "C" fn pncclCommMemStats(
    comm: ncclComm_t,
    stat: ncclCommMemStatArg,
    value: *mut u64,
) -> ncclResult_t {
    entry("ncclCommMemStats", || {
        // SAFETY: shared_of checks the handle.
        unsafe { shared_of(comm) }?;
        if value.is_null() {
            return Err(NcclErr::arg("value is NULL"));
        }
        if !(0..=3).contains(&stat) {
            return Err(NcclErr::arg(format!("unknown statistic {stat}")));
        }
        // SAFETY: checked non-null.
        unsafe { *value = 0 };
        Ok(())
    })
}
