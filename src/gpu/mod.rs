//! CUDA, loaded at run time through cudarc (`libcuda.so.1`, and NVRTC for the
//! reduction kernels), so the library builds and runs without CUDA: what the
//! driver says about pointers and streams, the driver objects the NCCL
//! device path holds (`driver`), and its kernels (`kernel`). cudarc's types
//! stay inside this module. Without a driver, every pointer is host memory
//! and no stream exists.

pub mod driver;
pub mod kernel;

pub use driver::GpuError;

use cudarc::driver::sys::CUpointer_attribute as Attr;
use std::ffi::c_void;
use std::os::raw::c_int;

/// Whether a CUDA driver is loaded and initialised (cudarc's
/// `is_culib_present`, then `cuInit`, once per process).
pub fn present() -> bool {
    driver::loaded()
}

/// Whether `p` is device memory the CPU cannot read (not managed memory).
pub fn is_device_memory(p: *const c_void) -> bool {
    if !present() {
        return false;
    }
    // CU_MEMORYTYPE_DEVICE is 2; an unknown host pointer is an error (None).
    let device =
        driver::pointer_attribute(p as usize, Attr::CU_POINTER_ATTRIBUTE_MEMORY_TYPE) == Some(2);
    device
        && driver::pointer_attribute(p as usize, Attr::CU_POINTER_ATTRIBUTE_IS_MANAGED).unwrap_or(0)
            == 0
}

/// The device of the calling thread's current CUDA context (what
/// `cudaGetDevice` set), if CUDA is present and the thread has one.
pub fn current_device() -> Option<c_int> {
    present().then(driver::current_device).flatten()
}

/// Waits for the work queued on `stream` (a `cudaStream_t`/`CUstream`).
/// Fails when there is no driver or the driver reports an error.
///
/// # Safety
/// `stream` is a stream handle of this process's CUDA context (or NULL).
pub unsafe fn synchronize(stream: *mut c_void) -> Result<(), String> {
    if !present() {
        return Err("no CUDA driver is loaded, so there is no stream to wait for".into());
    }
    // SAFETY: `stream` is the caller's CUDA stream handle.
    unsafe { driver::synchronize(stream as usize) }.map_err(|e| e.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_memory_is_never_device_memory() {
        let x = [1u8; 16];
        assert!(!super::is_device_memory(x.as_ptr().cast()));
        if !super::present() {
            // SAFETY: NULL is the legacy default stream.
            assert!(unsafe { super::synchronize(std::ptr::null_mut()) }.is_err());
        }
    }
}
