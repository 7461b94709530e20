//! The CUDA driver API through cudarc's raw bindings, loaded at run time:
//! every call's result checked and turned into a `GpuError`, and the few
//! driver objects the NCCL device path holds (a stream, pinned host memory,
//! IPC mappings) as owned Rust values.
//!
//! Nothing here may run before `loaded()` said yes: cudarc panics when a
//! library or symbol it is asked for is missing.

use cudarc::driver::sys;
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::raw::{c_int, c_uint};
use std::sync::{Mutex, OnceLock};

/// A failed driver call, with what was being done.
#[derive(Clone, Debug)]
pub struct GpuError(pub String);

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Results of driver calls.
pub type Result<T> = std::result::Result<T, GpuError>;

/// `Ok` for `CUDA_SUCCESS`, else an error naming the call and the code.
pub fn check(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError(format!(
            "{what} failed with CUDA error {} ({r:?})",
            r as i32
        )))
    }
}

/// Whether a CUDA driver library is present and `cuInit` succeeded. Asked
/// once: cudarc re-opens the library on every presence check.
pub fn loaded() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // A driver stub missing a symbol makes cudarc panic: that is "no
        // driver" too, never a panic out of the library.
        std::panic::catch_unwind(|| {
            // SAFETY: cudarc's presence probe only dlopens candidates; cuInit
            // is called once the library is known to exist.
            unsafe { sys::is_culib_present() && sys::cuInit(0) == sys::CUresult::CUDA_SUCCESS }
        })
        .unwrap_or(false)
    })
}

/// The primary context of `device` (the one the runtime API and PyTorch
/// use), retained once per process and made current on this thread.
pub fn bind(device: c_int) -> Result<()> {
    static CTX: Mutex<Option<HashMap<c_int, usize>>> = Mutex::new(None);
    let ctx = {
        let mut m = CTX.lock().unwrap_or_else(|p| p.into_inner());
        let m = m.get_or_insert_with(HashMap::new);
        match m.get(&device) {
            Some(&c) => c,
            None => {
                let mut dev: sys::CUdevice = 0;
                let mut ctx: sys::CUcontext = std::ptr::null_mut();
                // SAFETY: out-pointers to locals; retained contexts are kept
                // for the process's life (never released).
                unsafe {
                    check(sys::cuDeviceGet(&mut dev, device), "cuDeviceGet")?;
                    check(
                        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                        "cuDevicePrimaryCtxRetain",
                    )?;
                }
                m.insert(device, ctx as usize);
                ctx as usize
            }
        }
    };
    // SAFETY: a context retained above, never released.
    check(
        unsafe { sys::cuCtxSetCurrent(ctx as sys::CUcontext) },
        "cuCtxSetCurrent",
    )
}

/// The primary context of a device made current for a while; the
/// thread's previous context (the caller's, maybe of another device) is
/// current again when this drops.
pub struct Entered {
    previous: usize,
}

impl Entered {
    /// Makes `device`'s primary context current.
    pub fn enter(device: c_int) -> Result<Entered> {
        let mut prev: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check(
            unsafe { sys::cuCtxGetCurrent(&mut prev) },
            "cuCtxGetCurrent",
        )?;
        bind(device)?;
        Ok(Entered {
            previous: prev as usize,
        })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.previous != 0 {
            // SAFETY: the context that was current before, which the
            // caller still holds.
            unsafe { sys::cuCtxSetCurrent(self.previous as sys::CUcontext) };
        }
    }
}

/// Whether the primary context of `device` is active (the program has
/// used CUDA on it).
pub fn context_active(device: c_int) -> bool {
    let (mut dev, mut flags, mut active): (sys::CUdevice, c_uint, c_int) = (0, 0, 0);
    // SAFETY: out-pointers to locals.
    unsafe {
        sys::cuDeviceGet(&mut dev, device) == sys::CUresult::CUDA_SUCCESS
            && sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)
                == sys::CUresult::CUDA_SUCCESS
            && active != 0
    }
}

/// The device of the calling thread's current context, if it has one.
pub fn current_device() -> Option<c_int> {
    let mut dev: sys::CUdevice = 0;
    // SAFETY: out-pointer to a local.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(dev)
}

/// An attribute of `device`.
pub fn attribute(device: c_int, a: sys::CUdevice_attribute) -> Result<c_int> {
    let mut v: c_int = 0;
    let mut dev: sys::CUdevice = 0;
    // SAFETY: out-pointers to locals.
    unsafe {
        check(sys::cuDeviceGet(&mut dev, device), "cuDeviceGet")?;
        check(
            sys::cuDeviceGetAttribute(&mut v, a, dev),
            "cuDeviceGetAttribute",
        )?;
    }
    Ok(v)
}

/// Device memory of the current context (`ncclMemAlloc`), zeroed.
pub fn alloc(len: usize) -> Result<usize> {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: out-pointer to a local; then `len` bytes of the new block.
    unsafe {
        check(sys::cuMemAlloc_v2(&mut p, len), "cuMemAlloc")?;
        if let Err(e) = check(sys::cuMemsetD8_v2(p, 0, len), "cuMemsetD8") {
            sys::cuMemFree_v2(p);
            return Err(e);
        }
    }
    Ok(p as usize)
}

/// Frees what `alloc` gave.
pub fn free(p: usize) -> Result<()> {
    // SAFETY: the caller passes a block from `alloc`, freed once.
    check(unsafe { sys::cuMemFree_v2(p as u64) }, "cuMemFree")
}

/// A stream handle of the caller's (`cudaStream_t`), as an address so jobs
/// holding it can move between threads.
pub type StreamHandle = usize;

/// Whether `stream` is being captured into a CUDA graph (an invalidated
/// capture counts: work queued there would be lost, not run).
pub fn capturing(stream: StreamHandle) -> Result<bool> {
    let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the caller's stream handle (NCCL's contract); out-pointer to a local.
    check(
        unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut st) },
        "cuStreamIsCapturing",
    )?;
    Ok(st != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// This thread in relaxed capture mode until the value drops: while the
/// caller captures a stream in global mode, our own set-up calls (opening
/// IPC mappings, loading kernels) would otherwise be refused and spoil
/// the capture, as NCCL's would.
pub struct RelaxedCapture(sys::CUstreamCaptureMode);

impl RelaxedCapture {
    /// Enters relaxed mode.
    pub fn enter() -> Result<RelaxedCapture> {
        let mut m = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: in-out pointer to a local.
        check(
            unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut m) },
            "cuThreadExchangeStreamCaptureMode",
        )?;
        Ok(RelaxedCapture(m))
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        let mut m = self.0;
        // SAFETY: in-out pointer to a local; restores the caller's mode.
        unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut m) };
    }
}

/// A host function queued on a stream (`cuLaunchHostFunc`): the driver
/// runs it on a thread of its own once the work before it is done, and
/// work after it waits until it returns. On a stream being captured it
/// becomes a host node of the graph, run at every launch.
pub type HostFn = unsafe extern "C" fn(*mut c_void);

/// Queues `f(data)` on `stream`.
///
/// # Safety
/// `stream` is a stream of this process; `data` stays valid for every run
/// of `f` (for a captured stream: as long as the graph may be launched),
/// and `f` makes no CUDA call.
pub unsafe fn launch_host_fn(stream: StreamHandle, f: HostFn, data: *mut c_void) -> Result<()> {
    // SAFETY: per the contract above.
    check(
        unsafe { sys::cuLaunchHostFunc(stream as sys::CUstream, Some(f), data) },
        "cuLaunchHostFunc",
    )
}

/// Waits for the work queued on a stream of the caller's.
///
/// # Safety
/// `stream` is a stream of this process (or NULL, the legacy stream).
pub unsafe fn synchronize(stream: StreamHandle) -> Result<()> {
    // SAFETY: per the contract above.
    check(
        unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) },
        "cuStreamSynchronize",
    )
}

/// Waits, on the host, for what a kernel queued on `stream` now would wait
/// for: the work queued on it, and the work it implicitly follows. A
/// blocking stream (`cudaStreamCreate`) follows the legacy default stream,
/// where a `cudaMemcpy` from pageable memory may still be landing after it
/// returned; the legacy stream (NULL) follows every blocking stream, so for
/// it the whole context is waited for.
///
/// # Safety
/// `stream` is a stream of this process (or NULL, the legacy stream).
pub unsafe fn wait_for_stream(stream: StreamHandle) -> Result<()> {
    if is_legacy(stream) {
        // SAFETY: no arguments; the caller's context is current.
        return check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize");
    }
    // SAFETY: per the contract above.
    unsafe { synchronize(stream) }?;
    // SAFETY: per the contract above.
    if unsafe { follows_legacy(stream) } {
        // SAFETY: the legacy stream of the current context.
        unsafe { synchronize(LEGACY) }?;
    }
    Ok(())
}

/// CUDA's handle of the legacy default stream (`CU_STREAM_LEGACY`).
pub const LEGACY: StreamHandle = 0x1;

/// Whether `stream` is the legacy default stream (NULL or its handle).
pub fn is_legacy(stream: StreamHandle) -> bool {
    stream == 0 || stream == LEGACY
}

/// Whether work on `stream`, not the legacy stream itself, implicitly
/// waits for the legacy stream's: a blocking stream.
///
/// # Safety
/// `stream` is a stream of this process.
pub unsafe fn follows_legacy(stream: StreamHandle) -> bool {
    let mut flags: c_uint = 0;
    // SAFETY: per the contract above; out-pointer to a local.
    let r = unsafe { sys::cuStreamGetFlags(stream as sys::CUstream, &mut flags) };
    // 1 = CU_STREAM_NON_BLOCKING; a stream whose flags cannot be read (the
    // per-thread default stream, say) is taken as blocking.
    !is_legacy(stream) && (r != sys::CUresult::CUDA_SUCCESS || flags & 1 == 0)
}

/// Where `device` sits on the PCI bus (domain, bus, device), the same for
/// every process that sees it under whatever ordinal.
pub fn pci_location(device: c_int) -> Result<u64> {
    use sys::CUdevice_attribute as A;
    let at = |a| attribute(device, a).map(|v| v as u64);
    Ok(at(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)? << 32
        | at(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)? << 16
        | at(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?)
}

/// A stream of our own. Non-blocking: it never waits for the legacy stream,
/// which may itself be waiting for our work.
pub struct Stream(sys::CUstream);

// SAFETY: a CUstream may be used from any thread of its process.
unsafe impl Send for Stream {}

impl Stream {
    /// Makes one in the current context.
    pub fn new() -> Result<Stream> {
        let mut s: sys::CUstream = std::ptr::null_mut();
        // SAFETY: out-pointer to a local. 1 = CU_STREAM_NON_BLOCKING.
        check(unsafe { sys::cuStreamCreate(&mut s, 1) }, "cuStreamCreate")?;
        Ok(Stream(s))
    }

    /// Its handle.
    pub fn handle(&self) -> StreamHandle {
        self.0 as StreamHandle
    }

    /// Waits for everything queued on it.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: our own live stream.
        check(
            unsafe { sys::cuStreamSynchronize(self.0) },
            "cuStreamSynchronize",
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: our own stream, destroyed once.
        unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

/// Makes `stream` wait, on the device, for the latest record of `event`
/// (of this process, or opened from another) at the time of this call.
///
/// # Safety
/// `stream` is a stream of this process's context (or NULL) and `event` a
/// live event of it (an `Event`, or opened by `PeerEvents`).
pub unsafe fn wait_event(stream: StreamHandle, event: u64) -> Result<()> {
    // SAFETY: per the contract above.
    check(
        unsafe { sys::cuStreamWaitEvent(stream as sys::CUstream, event as sys::CUevent, 0) },
        "cuStreamWaitEvent",
    )
}

/// Peers' events opened in this process, by IPC handle (a communicator's
/// peers keep theirs for its life).
#[derive(Default)]
pub struct PeerEvents {
    open: HashMap<[u8; 64], u64>,
}

impl PeerEvents {
    /// The event behind a peer's `handle`, opened on first use.
    pub fn event(&mut self, handle: &[u8; 64]) -> Result<u64> {
        if let Some(&e) = self.open.get(handle) {
            return Ok(e);
        }
        let h = sys::CUipcEventHandle {
            reserved: handle.map(|b| b as std::os::raw::c_char),
        };
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the handle came from a peer's
        // cuIpcGetEventHandle.
        check(
            unsafe { sys::cuIpcOpenEventHandle(&mut e, h) },
            "cuIpcOpenEventHandle",
        )?;
        self.open.insert(*handle, e as u64);
        Ok(e as u64)
    }
}

impl Drop for PeerEvents {
    fn drop(&mut self) {
        for (_, e) in self.open.drain() {
            // SAFETY: opened by cuIpcOpenEventHandle, destroyed once.
            unsafe { sys::cuEventDestroy_v2(e as sys::CUevent) };
        }
    }
}

/// An event of ours: ordinary (to order one stream after another's work
/// so far), or interprocess (other processes can wait on it through CUDA
/// IPC, ranks of this process by its raw handle).
pub struct Event(sys::CUevent);

// SAFETY: a CUevent may be used from any thread of the process.
unsafe impl Send for Event {}

impl Event {
    /// A new ordinary event, without timing.
    pub fn new() -> Result<Event> {
        Event::with_flags(2)
    }

    /// A new interprocess event (so without timing). Where the driver
    /// cannot make one, an ordinary one: its `handle` then fails, and only
    /// ranks of this process can wait on it.
    pub fn interprocess() -> Result<Event> {
        // 4 = CU_EVENT_INTERPROCESS, which requires timing off.
        Event::with_flags(2 | 4).or_else(|_| Event::new())
    }

    /// 2 = CU_EVENT_DISABLE_TIMING.
    fn with_flags(flags: c_uint) -> Result<Event> {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check(
            unsafe { sys::cuEventCreate(&mut e, flags) },
            "cuEventCreate",
        )?;
        Ok(Event(e))
    }

    /// Its raw handle, for ranks of this process.
    pub fn raw(&self) -> u64 {
        self.0 as u64
    }

    /// Its IPC handle, for other processes.
    pub fn handle(&self) -> Result<[u8; 64]> {
        let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: our live event; out-pointer to a local.
        check(
            unsafe { sys::cuIpcGetEventHandle(&mut h, self.0) },
            "cuIpcGetEventHandle",
        )?;
        Ok(h.reserved.map(|b| b.to_ne_bytes()[0]))
    }

    /// Records it on `stream`: it fires when the stream gets there.
    ///
    /// # Safety
    /// `stream` is a stream of this process's context (or NULL / the legacy
    /// stream's handle).
    pub unsafe fn record(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: our live event; the stream per the contract above.
        check(
            unsafe { sys::cuEventRecord(self.0, stream as sys::CUstream) },
            "cuEventRecord",
        )
    }

    /// Makes `later` wait for the work queued on `earlier` so far.
    ///
    /// # Safety
    /// Both are streams of this process's context (or NULL / the legacy
    /// stream's handle).
    pub unsafe fn order(&self, earlier: StreamHandle, later: StreamHandle) -> Result<()> {
        // SAFETY: per the contract above; our live event.
        unsafe {
            self.record(earlier)?;
            wait_event(later, self.raw())
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: our event, destroyed once (the driver defers the release
        // until work waiting on it is done).
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// Page-locked host memory of a fixed size, allocated once (staging for
/// the host-staged path): allocating or freeing pinned memory may wait for
/// all work on the device, including streams waiting for us, so it never
/// happens while the device path runs.
pub struct Pinned {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain host memory owned by this value.
unsafe impl Send for Pinned {}

impl Pinned {
    /// `len` bytes (none for 0).
    pub fn new(len: usize) -> Result<Pinned> {
        let mut p: *mut c_void = std::ptr::null_mut();
        if len > 0 {
            // 1 = CU_MEMHOSTALLOC_PORTABLE: usable from every context, and
            // not write-combined, so the host reads it at full speed.
            // SAFETY: out-pointer to a local.
            check(
                unsafe { sys::cuMemHostAlloc(&mut p, len, 1) },
                "cuMemHostAlloc",
            )?;
        }
        Ok(Pinned { ptr: p.cast(), len })
    }

    /// Its address and size.
    pub fn block(&self) -> (*mut u8, usize) {
        (self.ptr, self.len)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
        }
    }
}

/// Which way a copy goes.
#[derive(Clone, Copy, Debug)]
pub enum Dir {
    /// Device to pinned host memory.
    ToHost,
    /// Pinned host memory to device.
    ToDevice,
    /// Device to device (also through IPC mappings).
    Device,
}

/// Queues a copy of `len` bytes on `on`.
///
/// # Safety
/// `on` is a stream of this process; `dst` and `src` are valid for `len`
/// bytes on the sides `dir` names, and stay so until `on` has done the copy.
pub unsafe fn copy_async(
    dir: Dir,
    dst: usize,
    src: usize,
    len: usize,
    on: StreamHandle,
) -> Result<()> {
    let on = on as sys::CUstream;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: per the contract above.
    let r = unsafe {
        match dir {
            Dir::ToHost => sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src as u64, len, on),
            Dir::ToDevice => sys::cuMemcpyHtoDAsync_v2(dst as u64, src as *const c_void, len, on),
            Dir::Device => sys::cuMemcpyDtoDAsync_v2(dst as u64, src as u64, len, on),
        }
    };
    check(r, "cuMemcpyAsync")
}

/// A device buffer as another process can open it: the IPC handle of its
/// allocation and the buffer's offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exported {
    /// `CUipcMemHandle`'s bytes.
    pub handle: [u8; 64],
    /// Offset of the buffer in the allocation.
    pub offset: u64,
}

/// Exports of this process's allocations, by the driver's buffer ID (never
/// reused within a process, so a freed and reallocated buffer is exported
/// afresh): `cuIpcGetMemHandle` is a call into the kernel driver, a
/// pointer attribute is not.
#[derive(Default)]
pub struct Exports {
    /// Buffer ID -> (allocation base, size, handle).
    by_id: HashMap<u64, (u64, u64, [u8; 64])>,
}

/// Exports remembered; beyond that the table starts again.
const EXPORTS_KEPT: usize = 256;

impl Exports {
    /// `export(ptr)`, remembered.
    pub fn export(&mut self, ptr: usize) -> Option<Exported> {
        let id = pointer_u64(
            ptr,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID,
        )?;
        if let Some(&(base, size, handle)) = self.by_id.get(&id) {
            let p = ptr as u64;
            if p >= base && p < base + size {
                return Some(Exported {
                    handle,
                    offset: p - base,
                });
            }
        }
        let (e, base, size) = export_with_range(ptr)?;
        if self.by_id.len() >= EXPORTS_KEPT {
            self.by_id.clear();
        }
        self.by_id.insert(id, (base, size, e.handle));
        Some(e)
    }
}

/// A 64-bit attribute of `cuPointerGetAttribute` for `p`.
fn pointer_u64(p: usize, a: sys::CUpointer_attribute) -> Option<u64> {
    let mut v: u64 = 0;
    // SAFETY: the driver writes one unsigned long long for this attribute.
    let r = unsafe { sys::cuPointerGetAttribute(&mut v as *mut u64 as *mut c_void, a, p as u64) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

/// Exports the allocation holding `ptr`, with the allocation's base and
/// size; `None` when it cannot be shared (memory from a stream-ordered pool
/// or a virtual-memory mapping).
fn export_with_range(ptr: usize) -> Option<(Exported, u64, u64)> {
    let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: out-pointers to locals; the driver checks the address.
    unsafe {
        check(
            sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr as u64),
            "cuMemGetAddressRange",
        )
        .ok()?;
        check(sys::cuIpcGetMemHandle(&mut h, base), "cuIpcGetMemHandle").ok()?;
    }
    Some((
        Exported {
            handle: h.reserved.map(|b| b.to_ne_bytes()[0]),
            offset: ptr as u64 - base,
        },
        base,
        size as u64,
    ))
}

/// Peers' allocations opened in this process, by handle: the most
/// recently used `MAPPINGS_KEPT`, each closed when it falls out or on drop,
/// except those a CUDA graph may use, kept while the mappings live.
/// An allocation stays alive while it is mapped here, so an unbounded cache
/// would keep every buffer a peer ever freed.
#[derive(Default)]
pub struct Mappings {
    /// Handle -> (base, last use, kept).
    open: HashMap<[u8; 64], (sys::CUdeviceptr, u64, bool)>,
    clock: u64,
}

/// Mappings kept: twice the most one call opens (a send and a receive
/// buffer for each rank), so a call never closes its own.
pub const MAPPINGS_KEPT: usize = 4 * super::kernel::MAX_RANKS;

// SAFETY: device addresses, usable from any thread of the process.
unsafe impl Send for Mappings {}

impl Mappings {
    /// The address in this process of the buffer `e` names; `keep` keeps
    /// it open from now on (work queued on streams other than `users`, or
    /// captured into a graph, may use it at any time).
    ///
    /// Kernels and copies on `users` may still read an evicted mapping:
    /// they are waited for before it is closed.
    pub fn address(&mut self, e: &Exported, users: &Stream, keep: bool) -> Result<usize> {
        self.clock += 1;
        if let Some(m) = self.open.get_mut(&e.handle) {
            m.1 = self.clock;
            m.2 |= keep;
            return Ok((m.0 + e.offset) as usize);
        }
        let evictable = self.open.iter().filter(|(_, m)| !m.2);
        if evictable.clone().count() >= MAPPINGS_KEPT {
            let oldest = *evictable
                .min_by_key(|(_, m)| m.1)
                .map(|(h, _)| h)
                .expect("full");
            if let Some((b, _, _)) = self.open.remove(&oldest) {
                users.synchronize()?;
                // SAFETY: opened by cuIpcOpenMemHandle, closed once; no
                // work uses it any more (waited for above; kept ones are
                // never closed here).
                unsafe { sys::cuIpcCloseMemHandle(b) };
            }
        }
        let h = sys::CUipcMemHandle {
            reserved: e.handle.map(|b| b as std::os::raw::c_char),
        };
        let mut b: sys::CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; the handle came from a peer's
        // cuIpcGetMemHandle. 1 = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
        check(
            unsafe { sys::cuIpcOpenMemHandle_v2(&mut b, h, 1) },
            "cuIpcOpenMemHandle",
        )?;
        self.open.insert(e.handle, (b, self.clock, keep));
        Ok((b + e.offset) as usize)
    }
}

impl Drop for Mappings {
    fn drop(&mut self) {
        for (_, (b, _, _)) in self.open.drain() {
            // SAFETY: opened by cuIpcOpenMemHandle, closed once.
            unsafe { sys::cuIpcCloseMemHandle(b) };
        }
    }
}

/// A flag of `cuPointerGetAttribute` for `p` (None when the driver does not
/// know the pointer: plain host memory).
pub fn pointer_attribute(p: usize, a: sys::CUpointer_attribute) -> Option<c_uint> {
    let mut v: c_uint = 0;
    // SAFETY: the driver writes one c_uint for these attributes.
    let r =
        unsafe { sys::cuPointerGetAttribute(&mut v as *mut c_uint as *mut c_void, a, p as u64) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}
