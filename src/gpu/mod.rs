//! What the process's CUDA driver says about pointers and streams, loaded at
//! run time (`libcuda.so.1`), so the library builds and runs without CUDA.
//! Host mode uses it to refuse device buffers with a clear error instead of
//! reading them from the CPU, and to order host-buffer calls after a user's
//! stream. Without a driver, every pointer is host memory and no stream exists.

use std::ffi::c_void;
use std::os::raw::{c_int, c_uint};
use std::sync::OnceLock;

type CuInit = unsafe extern "C" fn(c_uint) -> c_int;
type CuPointerGetAttribute = unsafe extern "C" fn(*mut c_void, c_int, u64) -> c_int;
type CuStreamSynchronize = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
const ATTR_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
const ATTR_IS_MANAGED: c_int = 8;
/// `CU_MEMORYTYPE_DEVICE`.
const MEMORYTYPE_DEVICE: c_uint = 2;

struct Driver {
    pointer_attribute: CuPointerGetAttribute,
    stream_synchronize: CuStreamSynchronize,
}

fn driver() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER.get_or_init(load).as_ref()
}

fn load() -> Option<Driver> {
    // SAFETY: dlopen/dlsym with NUL-terminated names; the handle is never
    // closed, so the symbols stay valid for the process's life, and their
    // types are the CUDA driver API's documented signatures.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return None;
        }
        let sym = |name: &std::ffi::CStr| {
            let p = libc::dlsym(h, name.as_ptr());
            (!p.is_null()).then_some(p)
        };
        let init = std::mem::transmute::<*mut c_void, CuInit>(sym(c"cuInit")?);
        if init(0) != 0 {
            return None;
        }
        Some(Driver {
            pointer_attribute: std::mem::transmute::<*mut c_void, CuPointerGetAttribute>(sym(
                c"cuPointerGetAttribute",
            )?),
            stream_synchronize: std::mem::transmute::<*mut c_void, CuStreamSynchronize>(sym(
                c"cuStreamSynchronize",
            )?),
        })
    }
}

/// Whether a CUDA driver is loaded and initialised.
pub fn present() -> bool {
    driver().is_some()
}

/// Whether `p` is device memory the CPU cannot read (not managed memory).
pub fn is_device_memory(p: *const c_void) -> bool {
    let Some(d) = driver() else {
        return false;
    };
    let (mut kind, mut managed): (c_uint, c_uint) = (0, 0);
    // SAFETY: the driver writes one c_uint per attribute; an unknown host
    // pointer makes it return an error, which means host memory.
    unsafe {
        if (d.pointer_attribute)(
            &mut kind as *mut c_uint as *mut c_void,
            ATTR_MEMORY_TYPE,
            p as u64,
        ) != 0
        {
            return false;
        }
        if (d.pointer_attribute)(
            &mut managed as *mut c_uint as *mut c_void,
            ATTR_IS_MANAGED,
            p as u64,
        ) != 0
        {
            managed = 0;
        }
    }
    kind == MEMORYTYPE_DEVICE && managed == 0
}

/// Waits for the work queued on `stream` (a `cudaStream_t`/`CUstream`).
/// Fails when there is no driver or the driver reports an error.
///
/// # Safety
/// `stream` is a stream handle of this process's CUDA context (or NULL).
pub unsafe fn synchronize(stream: *mut c_void) -> Result<(), String> {
    let d = driver().ok_or("no CUDA driver is loaded, so there is no stream to wait for")?;
    // SAFETY: `stream` is the caller's CUDA stream handle.
    match unsafe { (d.stream_synchronize)(stream) } {
        0 => Ok(()),
        e => Err(format!("cuStreamSynchronize failed with CUDA error {e}")),
    }
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
