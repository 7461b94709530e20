//! Communicator handles: creation from a unique id (blocking, non-blocking,
//! deferred to a group), splitting, queries, finalize, destroy and abort.
//!
//! Each communicator owns its own engine and links, so communicators are
//! independent: one may be used on one thread while another waits on
//! another thread, as NCCL allows.

use super::result::{NcclErr, NcclResult};
use super::types::ncclConfig_t;
use crate::bootstrap::unique_id::{self, UniqueId};
use crate::comm::engine::Engine;
use crate::comm::Comm;
use crate::param::params;
use crate::transport::shm::Segment;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

const LIVE: u64 = 0x6663_6f6c_6c2d_6e63; // "fcoll-nc"
const DEAD: u64 = 0x6465_6164_2d6e_6363; // "dead-ncc"

#[allow(non_camel_case_types)]
/// What an `ncclComm_t` points to. Handles are never freed: after destroy
/// or abort the magic says so and every later call gets a clear error
/// instead of touching freed memory. What the handle pointed to (links,
/// segment) is released then; the handle itself stays (a few dozen bytes
/// per communicator).
pub struct ncclComm {
    magic: AtomicU64,
    shared: Mutex<Option<Arc<Shared>>>,
}

/// A communicator's engine and core communicator, once set up.
pub struct Core {
    /// Its links.
    pub eng: Engine,
    /// Rank, members, sequence numbers.
    pub comm: Comm,
}

enum State {
    Pending,
    Ready(Box<Core>),
    Failed(NcclErr),
    Gone(&'static str),
}

/// Settings read from an `ncclConfig_t`.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// `blocking`: calls wait for set-up (1, the default) or return
    /// `ncclInProgress` (0).
    pub blocking: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { blocking: true }
    }
}

/// Reads the fields of `cfg` that the caller's header had (its `size`).
///
/// # Safety
/// `cfg` is null or points to at least `size_of::<usize>()` readable bytes
/// and then to `(*cfg).size` bytes.
pub unsafe fn settings(cfg: *const ncclConfig_t) -> NcclResult<Settings> {
    let mut s = Settings::default();
    if cfg.is_null() {
        return Ok(s);
    }
    // SAFETY: the caller passes a config whose first field is its size.
    let size = unsafe { std::ptr::read_unaligned(cfg as *const usize) };
    if size < 16 {
        return Err(NcclErr::arg(format!(
            "ncclConfig_t size {size} is too small (use NCCL_CONFIG_INITIALIZER)"
        )));
    }
    // SAFETY: at least 16 bytes (checked): size, magic, version.
    let magic = unsafe { std::ptr::read_unaligned((cfg as *const u8).add(8) as *const u32) };
    if magic != super::types::NCCL_API_MAGIC {
        return Err(NcclErr::arg(format!(
            "ncclConfig_t magic {magic:#x} is wrong (use NCCL_CONFIG_INITIALIZER)"
        )));
    }
    let field = |off: usize| -> Option<c_int> {
        // SAFETY: read only inside the `size` bytes the caller declared.
        (off + 4 <= size).then(|| unsafe {
            std::ptr::read_unaligned((cfg as *const u8).add(off) as *const c_int)
        })
    };
    match field(std::mem::offset_of!(ncclConfig_t, blocking)) {
        Some(0) => s.blocking = false,
        Some(1) | Some(super::types::NCCL_CONFIG_UNDEF_INT) | None => {}
        Some(v) => {
            return Err(NcclErr::arg(format!(
                "ncclConfig_t.blocking = {v} (0 or 1)"
            )))
        }
    }
    Ok(s)
}

/// The state a handle shares with group workers and set-up threads.
pub struct Shared {
    /// This rank.
    pub rank: usize,
    /// Ranks in the communicator.
    pub size: usize,
    /// The CUDA device it was created for (host mode: the device index it was given).
    pub device: c_int,
    /// From the config.
    pub settings: Settings,
    state: Mutex<State>,
    /// Set-up still running (readable while a call holds `state`).
    setting_up: AtomicBool,
    ready: Condvar,
    cancel: Arc<AtomicBool>,
    segment: OnceLock<Arc<Segment>>,
    /// The first failure of an operation (`ncclCommGetAsyncError`).
    failure: Mutex<Option<NcclErr>>,
    /// `ncclCommFinalize` was called (a second call is an error, as in NCCL).
    pub finalized: AtomicBool,
    /// PreMulSum operations created on it (index + `ncclNumOps` is the handle).
    pub redops: Mutex<Vec<Option<super::work::PreMul>>>,
    /// What its device-buffer calls hold (stream, staging, mappings).
    device_state: OnceLock<Arc<Mutex<super::device::DeviceState>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// A communicator whose set-up has not finished.
    pub fn pending(rank: usize, size: usize, device: c_int, settings: Settings) -> Arc<Shared> {
        Arc::new(Shared {
            rank,
            size,
            device,
            settings,
            state: Mutex::new(State::Pending),
            setting_up: AtomicBool::new(true),
            ready: Condvar::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            segment: OnceLock::new(),
            failure: Mutex::new(None),
            finalized: AtomicBool::new(false),
            redops: Mutex::new(Vec::new()),
            device_state: OnceLock::new(),
        })
    }

    /// Fails once `ncclCommFinalize` was called: after it the communicator
    /// takes no new work and may only be queried and destroyed.
    pub fn check_open(&self) -> NcclResult<()> {
        if self.finalized.load(Ordering::SeqCst) {
            return Err(NcclErr::arg(
                "comm was finalized (ncclCommFinalize): it takes no new work",
            ));
        }
        Ok(())
    }

    /// Joins the communicator `id` names and records the outcome.
    pub fn set_up(self: &Arc<Self>, id: &UniqueId) -> NcclResult<()> {
        let r = unique_id::join(id, self.size, self.rank).map_err(NcclErr::from);
        let mut st = lock(&self.state);
        let out = match r {
            Ok(mut w) => {
                if self.cancel.load(Ordering::SeqCst) {
                    *st = State::Gone("aborted during set-up");
                    Err(NcclErr::usage("the communicator was aborted during set-up"))
                } else {
                    w.engine.cancel_with(self.cancel.clone());
                    let _ = self.segment.set(w.segment.clone());
                    let comm = Comm::world(&w.engine);
                    *st = State::Ready(Box::new(Core {
                        eng: w.engine,
                        comm,
                    }));
                    Ok(())
                }
            }
            Err(e) => {
                *lock(&self.failure) = Some(e.clone());
                *st = State::Failed(e.clone());
                Err(e)
            }
        };
        self.setting_up.store(false, Ordering::SeqCst);
        drop(st);
        self.ready.notify_all();
        if out.is_ok() {
            super::device::prepare(self);
        }
        out
    }

    /// Runs `f` on the set-up communicator, waiting for a non-blocking
    /// set-up to finish. A failure is remembered for `ncclCommGetAsyncError`.
    pub fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> NcclResult<R>) -> NcclResult<R> {
        let mut st = lock(&self.state);
        let mut deadline = None;
        while matches!(*st, State::Pending) {
            let deadline = *deadline.get_or_insert_with(|| {
                Instant::now() + params().setup_timeout + Duration::from_secs(5)
            });
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NcclErr::usage("the communicator's set-up has not finished"));
            }
            st = self
                .ready
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if self.cancel.load(Ordering::SeqCst) {
            *st = State::Gone("aborted");
        }
        let out = match &mut *st {
            State::Ready(core) => f(core),
            State::Failed(e) => Err(e.clone()),
            State::Gone(why) => Err(NcclErr::usage(format!("the communicator was {why}"))),
            State::Pending => unreachable!("waited above"),
        };
        if self.cancel.load(Ordering::SeqCst) {
            // Aborted while this call ran: free the links now.
            *st = State::Gone("aborted");
        }
        if let Err(e) = &out {
            let mut failure = lock(&self.failure);
            if failure.is_none() && e.code != super::types::ncclResult_t::ncclInvalidArgument {
                *failure = Some(e.clone());
            }
        }
        out
    }

    /// The state of its device calls, made by `make` on first use.
    pub fn device_state(
        &self,
        make: impl FnOnce() -> NcclResult<super::device::DeviceState>,
    ) -> NcclResult<Arc<Mutex<super::device::DeviceState>>> {
        if let Some(d) = self.device_state.get() {
            return Ok(d.clone());
        }
        let d = Arc::new(Mutex::new(make()?));
        Ok(self.device_state.get_or_init(|| d).clone())
    }

    /// Its host's shared-memory segment, once set up.
    pub fn segment(&self) -> Option<Arc<Segment>> {
        self.segment.get().cloned()
    }

    /// Records a failure found outside a call (on a driver thread) for
    /// `ncclCommGetAsyncError`, unless one is recorded already.
    pub fn fail(&self, e: NcclErr) {
        lock(&self.failure).get_or_insert(e);
    }

    /// `ncclCommGetAsyncError`: in progress, the first failure, or success.
    pub fn async_error(&self) -> Result<(), NcclErr> {
        if self.setting_up.load(Ordering::SeqCst) {
            return Err(NcclErr::in_progress());
        }
        match &*lock(&self.failure) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Stops the communicator at once: waits on other threads fail within
    /// about 50 ms, peers on this host see the abort, and the links are
    /// freed as soon as no call holds them.
    pub fn abort(&self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(seg) = self.segment.get() {
            seg.set_abort(self.rank, 1);
        }
        // A call in progress returns within its next health check; take the
        // links from it if that happens soon, otherwise it frees them itself.
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            if let Ok(mut st) = self.state.try_lock() {
                *st = State::Gone("aborted");
                return;
            }
            if Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Frees the links (`ncclCommDestroy`), after any call in progress.
    pub fn destroy(&self) {
        *lock(&self.state) = State::Gone("destroyed");
    }
}

/// Makes a handle for `shared`.
pub fn new_handle(shared: Arc<Shared>) -> *mut ncclComm {
    Box::into_raw(Box::new(ncclComm {
        magic: AtomicU64::new(LIVE),
        shared: Mutex::new(Some(shared)),
    }))
}

/// The live communicator behind a handle.
///
/// # Safety
/// `h` is null or a handle this library returned (live or destroyed).
pub unsafe fn shared_of(h: *const ncclComm) -> NcclResult<Arc<Shared>> {
    if h.is_null() {
        return Err(NcclErr::arg("comm is NULL"));
    }
    if !(h as usize).is_multiple_of(std::mem::align_of::<ncclComm>()) {
        return Err(NcclErr::arg("comm is not a communicator handle"));
    }
    // SAFETY: handles are never freed, so a pointer we returned stays readable.
    let c = unsafe { &*h };
    match c.magic.load(Ordering::Acquire) {
        LIVE => lock(&c.shared)
            .clone()
            .ok_or_else(|| NcclErr::arg("comm was destroyed or aborted")),
        DEAD => Err(NcclErr::arg("comm was destroyed or aborted")),
        _ => Err(NcclErr::arg("comm is not a communicator handle")),
    }
}

/// Marks a handle dead (after destroy or abort) and lets go of its
/// communicator, which is freed once no call holds it (the caller's own
/// reference included).
///
/// # Safety
/// As for `shared_of`, and the handle is live.
pub unsafe fn retire(h: *const ncclComm) {
    // SAFETY: see `shared_of`.
    let c = unsafe { &*h };
    c.magic.store(DEAD, Ordering::Release);
    lock(&c.shared).take();
}
