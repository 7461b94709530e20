//! The process's MPI state: the engine, handle tables, and the one entry
//! path every export goes through (state check, lock, panic catch, error
//! handler).

use super::consts::*;
use super::errors::{class_name, MpiErr, MpiResult};
use super::ops::UserOp;
use super::requests::Requests;
use super::types::Derived;
use crate::bootstrap::launch::Launch;
use crate::bootstrap::pmi::Pmi;
use crate::bootstrap::store::StoreServer;
use crate::bootstrap::wire::wire;
use crate::comm::engine::{Engine, ReqId};
use crate::comm::Comm;
use crate::ffi::boundary;
use crate::ffi::owner_lock::{LockError, OwnerLock};
use crate::transport::shm::segment::Segment;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const FINALIZED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The runtime; the thread that called `MPI_Init` takes it without a
/// locked instruction until another thread makes a call (`OwnerLock`).
static RT: OwnerLock<Option<Runtime>> = OwnerLock::new(None);
/// The world communicator's error handler, readable without the lock (for
/// errors raised when the state itself is unusable).
static WORLD_EH: AtomicI32 = AtomicI32::new(MPI_ERRORS_ARE_FATAL);
/// The segment, for aborting the job from any state.
static SEGMENT: Mutex<Option<Arc<Segment>>> = Mutex::new(None);
/// World rank, for messages (-1 before init).
static RANK: AtomicI32 = AtomicI32::new(-1);

/// Hashes handles (small distinct integers) with one multiply instead of
/// SipHash: every MPI call looks up at least one.
#[derive(Default)]
pub struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.0 = u64::from(v as u32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A table keyed by handle.
pub type Handles<V> = HashMap<c_int, V, std::hash::BuildHasherDefault<HandleHasher>>;

/// A communicator handle's state.
pub struct CommEntry {
    /// The core communicator.
    pub comm: Comm,
    /// `MPI_Comm_set_name`.
    pub name: String,
    /// `MPI_Comm_set_errhandler`.
    pub errhandler: MPI_Errhandler,
}

/// What a request handle stands for.
pub struct ReqEntry {
    /// The engine request, or `None` when it completed at once
    /// (`MPI_PROC_NULL`).
    pub id: Option<ReqId>,
    /// Where a receive's status finds its source's rank in the
    /// communicator.
    pub source: StatusSource,
    /// For receives, the datatype, to report counts in its units.
    pub recv_type: Option<super::types::TypeInfo>,
    /// The communicator handle, whose error handler applies at completion.
    pub comm: MPI_Comm,
}

/// How a request's status names the sender in its communicator.
pub enum StatusSource {
    /// A send, or a receive from `MPI_PROC_NULL`: no sender to name.
    Unnamed,
    /// A receive from this rank of the communicator.
    Rank(std::os::raw::c_int),
    /// An `MPI_ANY_SOURCE` receive: the communicator's members, to turn
    /// the sender's world rank into its rank. Only here is the list shared:
    /// each clone and drop of an `Arc` is a locked instruction, which waits
    /// for the call's stores to reach the cache (after a send, a ring post
    /// whose line the peer holds).
    Any(Arc<[usize]>),
}

/// Everything `MPI_Init` sets up.
pub struct Runtime {
    /// The message engine.
    pub eng: Engine,
    /// Communicator handles.
    pub comms: Handles<CommEntry>,
    /// Request handles.
    pub reqs: Requests,
    /// Derived datatype handles.
    pub types: Handles<Derived>,
    /// User operation handles.
    pub ops: Handles<UserOp>,
    next_handle: u32,
    /// Thread level granted.
    pub thread_level: c_int,
    /// The thread that called `MPI_Init`.
    pub main_thread: std::thread::ThreadId,
    /// Set by a call whose error belongs to another communicator than its
    /// argument (a request's, at completion).
    pub err_comm: Option<MPI_Comm>,
    /// What the launcher lent until `MPI_Finalize`.
    launcher: Launcher,
}

/// The PMI session (finalized at `MPI_Finalize`) and the store this rank
/// serves for the others.
#[derive(Default)]
struct Launcher {
    pmi: Option<Pmi>,
    _server: Option<StoreServer>,
}

impl Runtime {
    fn new(eng: Engine, thread_level: c_int, launcher: Launcher) -> Runtime {
        let mut comms = Handles::default();
        let world = Comm::world(&eng);
        let me = Comm::self_comm(&eng);
        for (h, comm, name) in [
            (MPI_COMM_WORLD, world, "MPI_COMM_WORLD"),
            (MPI_COMM_SELF, me, "MPI_COMM_SELF"),
        ] {
            comms.insert(
                h,
                CommEntry {
                    comm,
                    name: name.into(),
                    errhandler: MPI_ERRORS_ARE_FATAL,
                },
            );
        }
        Runtime {
            eng,
            comms,
            reqs: Requests::default(),
            types: Handles::default(),
            ops: Handles::default(),
            next_handle: 0,
            thread_level,
            main_thread: std::thread::current().id(),
            err_comm: None,
            launcher,
        }
    }

    /// A fresh handle of MPICH's "direct" kind for an object class
    /// (`kind_bits` is e.g. 0x84000000 for communicators).
    pub fn new_handle(&mut self, kind_bits: u32) -> c_int {
        // Indices below 0x100 are left to MPICH's own predefined objects.
        self.next_handle = (self.next_handle + 1) % (0x0400_0000 - 0x100);
        (kind_bits | (0x100 + self.next_handle)) as c_int
    }

    /// The communicator behind a handle.
    pub fn comm(&mut self, h: MPI_Comm) -> MpiResult<&mut CommEntry> {
        self.comms.get_mut(&h).ok_or_else(|| bad_comm(h))
    }

    fn errhandler(&self, comm: MPI_Comm) -> MPI_Errhandler {
        self.comms
            .get(&comm)
            .or_else(|| self.comms.get(&MPI_COMM_WORLD))
            .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errhandler)
    }
}

/// The error for a handle that names no communicator.
pub fn bad_comm(h: MPI_Comm) -> MpiErr {
    if h == MPI_COMM_NULL {
        MpiErr::new(MPI_ERR_COMM, "MPI_COMM_NULL passed as a communicator")
    } else {
        MpiErr::new(MPI_ERR_COMM, format!("invalid communicator handle {h:#x}"))
    }
}

/// Runs an export that needs an initialised library: checks the state,
/// locks it, catches panics, and applies `comm`'s error handler.
pub fn call(
    name: &'static str,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Runtime) -> MpiResult<()>,
) -> c_int {
    // `f` always answers, so `run` never returns `None` here.
    run(name, comm, |rt| Some(f(rt))).unwrap_or(MPI_SUCCESS)
}

/// `call` for a fast lane that may decline (`f` returns `None` having
/// changed nothing): `None` when the library is not running or `f`
/// declined, so the caller takes the general way, which also reports
/// every error in the arguments.
#[inline(always)]
pub fn call_if(
    name: &'static str,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Runtime) -> Option<MpiResult<()>>,
) -> Option<c_int> {
    if STATE.load(Ordering::Acquire) != RUNNING {
        return None;
    }
    run(name, comm, f)
}

#[inline(always)]
fn run(
    name: &'static str,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Runtime) -> Option<MpiResult<()>>,
) -> Option<c_int> {
    let out = boundary::catch(|| -> Result<Option<()>, (MpiErr, MPI_Errhandler)> {
        let eh = || WORLD_EH.load(Ordering::Relaxed);
        RT.with(|slot| {
            // `None` once finalized by another thread since the caller's check.
            let rt = slot.as_mut().ok_or_else(|| (not_running(), eh()))?;
            rt.err_comm = None;
            f(rt).transpose().map_err(|e| {
                let eh = rt.errhandler(rt.err_comm.unwrap_or(comm));
                (e, eh)
            })
        })
        .map_err(|e| (lock_error(e), eh()))?
    });
    match out {
        Ok(Ok(done)) => done.map(|()| MPI_SUCCESS),
        Ok(Err((e, eh))) => Some(report(name, e, eh)),
        Err(panic) => Some(report(
            name,
            MpiErr::new(MPI_ERR_INTERN, format!("internal panic: {panic}")),
            WORLD_EH.load(Ordering::Relaxed),
        )),
    }
}

/// Runs an export allowed in any state (no lock is taken unless `f` asks).
pub fn call_any(name: &'static str, f: impl FnOnce() -> MpiResult<()>) -> c_int {
    match boundary::catch(f) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => report(name, e, WORLD_EH.load(Ordering::Relaxed)),
        Err(panic) => report(
            name,
            MpiErr::new(MPI_ERR_INTERN, format!("internal panic: {panic}")),
            WORLD_EH.load(Ordering::Relaxed),
        ),
    }
}

/// Fails unless `MPI_Init` has completed and `MPI_Finalize` has not.
fn running() -> MpiResult<()> {
    match STATE.load(Ordering::Acquire) {
        RUNNING => Ok(()),
        _ => Err(not_running()),
    }
}

/// The error for a call outside `MPI_Init` .. `MPI_Finalize`.
#[cold]
fn not_running() -> MpiErr {
    if STATE.load(Ordering::Acquire) == UNINIT {
        MpiErr::new(MPI_ERR_OTHER, "called before MPI_Init")
    } else {
        MpiErr::new(MPI_ERR_OTHER, "called after MPI_Finalize")
    }
}

fn lock_error(e: LockError) -> MpiErr {
    match e {
        LockError::Poisoned => MpiErr::new(
            MPI_ERR_INTERN,
            "library state poisoned by an earlier internal panic",
        ),
        LockError::Reentered => MpiErr::new(
            MPI_ERR_OTHER,
            "MPI called from inside an MPI call (a user function or error handler)",
        ),
    }
}

/// Applies an error handler: return the class, or print one line and
/// abort the job.
fn report(name: &str, e: MpiErr, eh: MPI_Errhandler) -> c_int {
    let rank = RANK.load(Ordering::Relaxed);
    let class = class_name(e.class).unwrap_or("MPI_ERR_UNKNOWN");
    crate::param::debug_log(crate::param::DebugLevel::Warn, || {
        format!("{name} (rank {rank}): {} [{class}]", e.msg)
    });
    if eh == MPI_ERRORS_RETURN {
        return e.class;
    }
    let who = if rank >= 0 {
        format!("rank {rank}")
    } else {
        "before MPI_Init".into()
    };
    crate::param::say(&format!("ferrocoll: {name} ({who}): {} [{class}]", e.msg));
    abort_job(rank.max(0) as usize, 1)
}

/// Ends this process and makes the other ranks stop too: the segment's
/// abort flag wakes them, and the launcher sees our exit code.
pub fn abort_job(rank: usize, code: c_int) -> ! {
    if let Ok(seg) = SEGMENT.lock() {
        if let Some(seg) = seg.as_ref() {
            seg.set_abort(rank, code);
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // An exit status of 0 mod 256 would read as success.
    let status = if code & 0xff == 0 { 1 } else { code & 0xff };
    // SAFETY: _exit ends the process without running atexit handlers that
    // could block on MPI state held by this thread.
    unsafe { libc::_exit(status) }
}

/// `MPI_Init`/`MPI_Init_thread`: discovers the job from the launcher's
/// environment (singleton without one) and attaches to the segment.
pub fn init(thread_level: c_int) -> MpiResult<()> {
    match STATE.load(Ordering::Acquire) {
        RUNNING => return Err(MpiErr::new(MPI_ERR_OTHER, "MPI_Init called twice")),
        FINALIZED => {
            return Err(MpiErr::new(
                MPI_ERR_OTHER,
                "MPI_Init called after MPI_Finalize",
            ))
        }
        _ => {}
    }
    RT.with(|slot| start(slot, thread_level))
        .map_err(lock_error)?
}

/// `init` with the state held: builds the runtime into `slot`.
fn start(slot: &mut Option<Runtime>, thread_level: c_int) -> MpiResult<()> {
    let launch = Launch::discover().map_err(MpiErr::from)?;
    let source = launch.source;
    let (eng, keep) = if launch.size == 1 {
        (Engine::singleton(), Launcher::default())
    } else {
        // An MPI rank is a process of its own: its thread may be bound.
        let w = wire(launch, true).map_err(MpiErr::from)?;
        *SEGMENT
            .lock()
            .map_err(|_| MpiErr::new(MPI_ERR_INTERN, "library state poisoned"))? =
            Some(w.segment.clone());
        let keep = Launcher {
            pmi: w.pmi,
            _server: w.server,
        };
        (w.engine, keep)
    };
    RANK.store(eng.rank() as i32, Ordering::Relaxed);
    crate::param::debug_log(crate::param::DebugLevel::Info, || {
        format!(
            "rank {} of {} initialised ({:?} transport, launched by {source:?}; peers: {})",
            eng.rank(),
            eng.size(),
            crate::param::params().transport,
            eng.link_summary()
        )
    });
    *slot = Some(Runtime::new(eng, thread_level, keep));
    RT.claim();
    STATE.store(RUNNING, Ordering::Release);
    Ok(())
}

/// `MPI_Finalize`: waits for every rank, then makes the state final.
pub fn finalize() -> MpiResult<()> {
    running()?;
    RT.with(stop).map_err(lock_error)?
}

/// `finalize` with the state held.
fn stop(slot: &mut Option<Runtime>) -> MpiResult<()> {
    let Some(rt) = slot.as_mut() else {
        return Err(not_running());
    };
    let world = rt.comm(MPI_COMM_WORLD)?;
    let mut comm = world.comm.clone();
    crate::coll::barrier::barrier(
        &mut crate::coll::Ctx::new(&mut rt.eng, &mut comm).named("MPI_Finalize"),
    )
    .map_err(MpiErr::from)?;
    if let Some(pmi) = rt.launcher.pmi.as_mut() {
        pmi.finalize().map_err(MpiErr::from)?;
    }
    STATE.store(FINALIZED, Ordering::Release);
    *slot = None;
    if let Ok(mut s) = SEGMENT.lock() {
        *s = None;
    }
    Ok(())
}

/// Whether `MPI_Init` has completed.
pub fn initialized() -> bool {
    STATE.load(Ordering::Acquire) != UNINIT
}

/// Whether `MPI_Finalize` has completed.
pub fn finalized() -> bool {
    STATE.load(Ordering::Acquire) == FINALIZED
}

/// Records a new error handler for the world communicator's lock-free copy.
pub fn set_world_errhandler(eh: MPI_Errhandler) {
    WORLD_EH.store(eh, Ordering::Relaxed);
}

/// World rank, or -1 before init.
pub fn world_rank() -> i32 {
    RANK.load(Ordering::Relaxed)
}
