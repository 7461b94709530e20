//! NCCL calls on device buffers (tested on a GPU by `c_tests/gpu/`);
//! `FERROCOLL_GPU=0` switches them off, and device buffers are then refused
//! with a message naming the switch.
//!
//! Calls on the IPC path are stream-ordered, as NCCL's, where no GPU serves
//! ranks of two processes (see `ipc`): events order the streams, and the
//! call returns once the work is queued. An earlier design made the stream
//! wait on a device word (`cuStreamWaitValue32`) that a proxy thread set,
//! and on an H200 the proxy's copies then never ran, queued behind that
//! wait. Where processes share a GPU, and for staged calls (and sends and
//! receives), a call waits on the host for the work queued before it,
//! runs, and completes before it returns.
//!
//! A call on a stream being captured into a CUDA graph is ordered another
//! way, since a graph replays what was queued and nothing of the host:
//! every rank queues a barrier on its stream (`stream_barrier`, a host
//! function), the leaders their kernels and copies, then a second barrier.
//! Every rank takes the call so where any rank captures it, and
//! `FERROCOLL_ALGO=gpu=graph` forces it for live calls (to test it). What
//! only staging could run is refused in capture; so are ranks sharing a
//! process, whose host functions the driver may run one at a time.
//!
//! Two ways to run: peers on this host with shareable buffers (CUDA IPC) are
//! reduced device to device by a kernel, each rank one slice written to
//! every destination; anything else (other collectives, sends and
//! receives, buffers IPC cannot share, ranks on other hosts) is staged
//! through pinned host memory and run by the host collectives.

use super::comm::Shared;
use super::result::{NcclErr, NcclResult};
use super::stream_barrier::StreamBarrier;
use super::types::ncclResult_t;
use super::work::{self, Job, Kind, Red};
use crate::coll::{self, Ctx};
use crate::gpu::driver::{
    self, copy_async, Dir, Event, Exports, Mappings, PeerEvents, Pinned, Stream,
};
use crate::gpu::kernel::{self, Args, MAX_RANKS};
use crate::reduce::Op;
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::Instant;

fn cuda(e: driver::GpuError) -> NcclErr {
    NcclErr {
        code: ncclResult_t::ncclUnhandledCudaError,
        msg: e.0,
    }
}

/// Bytes of the send and receive buffers that matter at rank `me`.
pub fn spans(job: &Job, n: usize, me: usize) -> (usize, usize) {
    let b = job.count * job.ty.extent();
    let at = |r: usize, x: usize| if r == me { x } else { 0 };
    match job.kind {
        Kind::AllReduce => (b, b),
        Kind::Broadcast(r) => (at(r, b), b),
        Kind::Reduce(r) => (b, at(r, b)),
        Kind::AllGather => (b, n * b),
        Kind::ReduceScatter => (n * b, b),
        Kind::AlltoAll => (n * b, n * b),
        Kind::Gather(r) => (b, at(r, n * b)),
        Kind::Scatter(r) => (at(r, n * b), b),
        Kind::Send(_) => (b, 0),
        Kind::Recv(_) => (0, b),
    }
}

/// Whether `job`'s buffers are device memory: all of them or none, and
/// only where the device path is switched on.
pub fn on_device(job: &Job, n: usize, me: usize) -> NcclResult<bool> {
    let (s, r) = spans(job, n, me);
    let dev = |a: usize| crate::gpu::is_device_memory(a as *const _);
    let (sd, rd) = (
        (s > 0).then(|| dev(job.send)),
        (r > 0).then(|| dev(job.recv)),
    );
    let device = match (sd, rd) {
        (Some(a), Some(b)) if a != b => {
            return Err(NcclErr::usage(format!(
            "sendbuff is {} but recvbuff is {}: both must be device memory, or both host memory",
            if a { "device memory" } else { "host memory" },
            if b { "device memory" } else { "host memory" },
        )))
        }
        (Some(d), _) | (_, Some(d)) => d,
        (None, None) => false,
    };
    if device && !crate::param::params().gpu {
        return Err(NcclErr::usage(
            "the buffers are GPU device memory: ferrocoll's device path is switched off \
             (FERROCOLL_GPU=0): unset it to use device buffers; host and managed memory \
             work without it",
        ));
    }
    Ok(device)
}

/// Checks a device call's stream: any stream of the process, being
/// captured into a CUDA graph or not.
pub fn check_stream(stream: usize) -> NcclResult<()> {
    driver::capturing(stream)
        .map(|_| ())
        .map_err(|e| NcclErr::usage(e.0))
}

/// What a communicator holds for its device calls.
pub struct DeviceState {
    device: c_int,
    /// Its GPU's PCI location: ranks with the same one share a GPU.
    gpu: u64,
    stream: Stream,
    /// Pinned staging; larger batches stage through pageable memory.
    staging: Pinned,
    /// The reduction kernels are loaded.
    kernels: bool,
    /// Peers' buffers opened through CUDA IPC.
    peers: Mappings,
    /// This process's buffers exported for IPC.
    exports: Exports,
    /// Recorded on the caller's stream where a call stands: its inputs are
    /// ready when it fires.
    ready: Event,
    /// Recorded on `stream` after a leader's work: its part is written.
    done: Event,
    /// `ready`'s and `done`'s IPC handles (None where the driver cannot
    /// share events: where calls would be stream-ordered, they are staged).
    handles: Option<([u8; 64], [u8; 64])>,
    /// Peers' events opened here.
    peer_events: PeerEvents,
    /// Orders the caller's stream after the legacy stream's work.
    legacy: Event,
    /// How the communicator's ranks share GPUs (learnt by the first call
    /// on the IPC path).
    sharing: Option<Sharing>,
    /// Where the calls' time went (logged at `FERROCOLL_DEBUG=info`).
    phases: Phases,
    /// The ranks' barrier on streams, made by the first call that needs it
    /// (`stream_barrier`: it lives as long as the process).
    barrier: Option<&'static StreamBarrier>,
}

impl Drop for DeviceState {
    fn drop(&mut self) {
        // Queued work may still use the peers' mappings closed after this.
        let _ = self.stream.synchronize();
        self.phases.log();
    }
}

/// Time spent in each phase of the device calls, summed.
#[derive(Default)]
struct Phases {
    calls: u64,
    spent: Vec<(&'static str, std::time::Duration)>,
}

impl Phases {
    /// Adds the time since `*since` to `phase`, and restarts the clock.
    fn add(&mut self, phase: &'static str, since: &mut Instant) {
        let now = Instant::now();
        let d = now - *since;
        *since = now;
        match self.spent.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, t)) => *t += d,
            None => self.spent.push((phase, d)),
        }
    }

    fn log(&self) {
        if self.calls == 0 {
            return;
        }
        crate::param::debug_log(crate::param::DebugLevel::Info, || {
            let per: Vec<String> = self
                .spent
                .iter()
                .map(|(p, t)| format!("{p} {:.1}", t.as_secs_f64() * 1e6 / self.calls as f64))
                .collect();
            format!(
                "ferrocoll: device path, {} calls, us per call: {}",
                self.calls,
                per.join(", ")
            )
        });
    }
}

impl DeviceState {
    /// Makes the state of `sh` (on its device's context).
    fn new(sh: &Shared) -> NcclResult<DeviceState> {
        let device = sh.device;
        let _ctx = ensure_context(device)?;
        let stream = Stream::new().map_err(cuda)?;
        let staging = Pinned::new(crate::param::params().gpu_staging).map_err(cuda)?;
        // Without NVRTC the reductions go through host memory.
        let kernels = kernel::load(device);
        if let Err(e) = &kernels {
            crate::param::debug_log(crate::param::DebugLevel::Warn, || {
                format!("ferrocoll: reductions on device buffers will be staged through host memory: {e}")
            });
        }
        let (ready, done) = (
            Event::interprocess().map_err(cuda)?,
            Event::interprocess().map_err(cuda)?,
        );
        let handles = ready.handle().and_then(|r| Ok((r, done.handle()?))).ok();
        Ok(DeviceState {
            device,
            gpu: driver::pci_location(device).map_err(cuda)?,
            ready,
            done,
            handles,
            peer_events: PeerEvents::default(),
            legacy: Event::new().map_err(cuda)?,
            sharing: None,
            stream,
            staging,
            kernels: kernels.is_ok(),
            peers: Mappings::default(),
            exports: Exports::default(),
            phases: Phases::default(),
            barrier: None,
        })
    }
}

/// Makes the device state of a communicator just set up, when the device
/// path is on and the program uses CUDA on its device, so that its pinned
/// memory and the kernels' compilation are not part of the first call. A
/// failure is only logged: the first device call tries again.
pub fn prepare(sh: &Arc<Shared>) {
    if !crate::param::params().gpu || !crate::gpu::present() || !driver::context_active(sh.device) {
        return;
    }
    if let Err(e) = sh.device_state(|| DeviceState::new(sh)) {
        crate::param::debug_log(crate::param::DebugLevel::Warn, || {
            format!("ferrocoll: cannot prepare the GPU path: {}", e.msg)
        });
    }
}

/// Makes `device`'s primary context current until the value drops (the
/// caller's own context, maybe of another device, comes back then).
fn ensure_context(device: c_int) -> NcclResult<driver::Entered> {
    driver::Entered::enter(device).map_err(cuda)
}

/// Runs device `jobs` of one communicator after the work queued before
/// them on their streams: queued on the streams where the IPC path takes
/// them, else to completion.
pub fn submit(sh: &Arc<Shared>, jobs: Vec<Job>) -> NcclResult<()> {
    let _ctx = ensure_context(sh.device)?;
    let modes = modes(&jobs)?;
    refuse_in_capture(&jobs, &modes)?;
    // Our own CUDA calls (allocations on first use, opening mappings,
    // loading kernels) must not spoil a capture in global mode.
    let _relaxed = if modes.contains(&Mode::Captured) {
        Some(driver::RelaxedCapture::enter().map_err(cuda)?)
    } else {
        None
    };
    let state = sh.device_state(|| DeviceState::new(sh))?;
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    st.phases.calls += 1;
    // A refusal fails the call, not the communicator (ncclCommGetAsyncError).
    match sh.with_core(|core| run(sh, &jobs, &modes, core, &mut st))? {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// Waits on the host for the work queued on `jobs`' streams.
fn wait_for_streams(jobs: &[Job], st: &mut DeviceState) -> NcclResult<()> {
    let mut t = Instant::now();
    let mut streams: Vec<usize> = jobs.iter().map(|j| j.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in streams {
        // SAFETY: the caller's stream (NCCL's contract).
        unsafe { driver::wait_for_stream(s) }.map_err(cuda)?;
    }
    st.phases.add("stream", &mut t);
    Ok(())
}

/// How a rank takes a call on the IPC path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Ordered by events, or completed on the host (`Sharing`).
    Events,
    /// Ordered by barriers queued on the streams (`StreamBarrier`),
    /// forced by `FERROCOLL_ALGO=gpu=graph` (which tests them).
    Barriers,
    /// The stream is being captured into a CUDA graph: barriers on the
    /// streams, and nothing but the IPC path.
    Captured,
}

/// The message of a call refused while its stream is captured.
fn refused_in_capture(name: &str, why: &str) -> NcclErr {
    NcclErr::usage(format!(
        "{name} on a stream being captured into a CUDA graph (here or at another rank): \
         {why}; ferrocoll captures collectives of one host on device buffers that CUDA IPC \
         can share"
    ))
}

/// Each job's `Mode`, from its stream.
fn modes(jobs: &[Job]) -> NcclResult<Vec<Mode>> {
    let forced = crate::param::params().algo_for("gpu");
    jobs.iter()
        .map(|j| {
            Ok(if driver::capturing(j.stream).map_err(cuda)? {
                Mode::Captured
            } else if forced == Some("graph") {
                Mode::Barriers
            } else {
                Mode::Events
            })
        })
        .collect()
}

/// Refuses the captured jobs that only staging could run (every rank
/// capturing the same calls refuses alike, before meeting the others).
fn refuse_in_capture(jobs: &[Job], modes: &[Mode]) -> NcclResult<()> {
    let staged = crate::param::params().algo_for("gpu") == Some("staged");
    for (j, _) in jobs
        .iter()
        .zip(modes)
        .filter(|(_, m)| **m == Mode::Captured)
    {
        let why = if j.is_p2p() {
            "sends and receives are staged through host memory"
        } else if matches!(j.red, Some(Red::PreMulAt(_))) {
            "a PreMulSum scalar in device memory (ncclScalarDevice) is read on the host; \
             use ncclScalarHostImmediate"
        } else if staged {
            "FERROCOLL_ALGO=gpu=staged stages every call through host memory"
        } else {
            continue;
        };
        return Err(refused_in_capture(j.name, why));
    }
    Ok(())
}

/// Runs one batch on the core: as the host path does, its sends and
/// receives (staged) are posted first and complete last, and its
/// collectives run in call order between, each taking the IPC path or
/// staging as every rank decides alike in that collective's own exchange
/// (ranks' batches may differ in their point-to-point parts).
fn run(
    sh: &Arc<Shared>,
    jobs: &[Job],
    modes: &[Mode],
    core: &mut super::comm::Core,
    st: &mut DeviceState,
) -> NcclResult<Option<NcclErr>> {
    let forced = crate::param::params().algo_for("gpu");
    // Staging, and a scalar in device memory, need the streams' work done
    // first; so does a staged call after one queued on the IPC path.
    let mut waited = false;
    let host_first = jobs
        .iter()
        .any(|j| j.is_p2p() || matches!(j.red, Some(Red::PreMulAt(_))));
    if host_first {
        // (A captured stream's earlier work is the graph's to order.)
        let live: Vec<Job> = jobs
            .iter()
            .zip(modes)
            .filter(|(_, m)| **m != Mode::Captured)
            .map(|(j, _)| j.clone())
            .collect();
        wait_for_streams(&live, st)?;
        waited = true;
    }
    let mut jobs = jobs.to_vec();
    for j in &mut jobs {
        resolve_scalar(j, st)?;
    }
    let (n, me) = (core.comm.size(), core.comm.rank());
    let p2p: Vec<Job> = jobs.iter().filter(|j| j.is_p2p()).cloned().collect();
    // Point-to-point staging lives through the collectives, which use the
    // pinned block: it gets pageable memory of its own.
    let layout = Layout::of(&p2p, n, me);
    let mut block = vec![0u8; layout.total];
    let base = block.as_mut_ptr() as usize;
    let host_p2p = layout.host_jobs(&p2p, n, me, base);
    layout.copy(Dir::ToHost, base, st)?;
    let posted = work::post_p2p(&host_p2p, core)?;
    let mut refused = None;
    for (j, &mode) in jobs.iter().zip(modes).filter(|(j, _)| !j.is_p2p()) {
        if forced != Some("staged") && peer_kind(j.kind) {
            match ipc(sh, j, core, st, waited, mode)? {
                Route::Queued => {
                    waited = false;
                    continue;
                }
                // Every rank stops here alike; the sends and receives
                // still complete.
                Route::Refused(e) => {
                    refused = Some(e);
                    break;
                }
                Route::Staged => {}
            }
        }
        if !waited {
            wait_for_streams(std::slice::from_ref(j), st)?;
        }
        if piecewise(j.kind) && j.count * j.ty.extent() > PIECE {
            staged_pieces(j, core, st)?;
        } else {
            staged(std::slice::from_ref(j), core, st)?;
        }
    }
    work::finish_p2p(posted, core)?;
    layout.copy(Dir::ToDevice, base, st)?;
    Ok(refused)
}

/// Reads a PreMulSum scalar that lives in device memory, now that the
/// stream has reached the call (`ncclScalarDevice`).
fn resolve_scalar(j: &mut Job, st: &mut DeviceState) -> NcclResult<()> {
    if let Some(Red::PreMulAt(addr)) = j.red {
        let mut v = vec![0u8; j.ty.size()];
        // SAFETY: the scalar is device memory of the type's size (checked
        // when the op was made; the caller keeps it while the op exists),
        // and `v` outlives the synchronised copy.
        unsafe {
            copy_async(
                Dir::ToHost,
                v.as_mut_ptr() as usize,
                addr,
                v.len(),
                st.stream.handle(),
            )
        }
        .map_err(cuda)?;
        st.stream.synchronize().map_err(cuda)?;
        j.red = Some(Red::PreMul(v));
    }
    Ok(())
}

/// Collectives the IPC path runs: all but sends and receives.
fn peer_kind(k: Kind) -> bool {
    !matches!(k, Kind::Send(_) | Kind::Recv(_))
}

/// Collectives the IPC path runs as copies alone.
fn copy_kind(k: Kind) -> bool {
    matches!(
        k,
        Kind::AllGather | Kind::Broadcast(_) | Kind::AlltoAll | Kind::Gather(_) | Kind::Scatter(_)
    )
}

/// One rank's part of the IPC exchange.
#[derive(Clone, Copy)]
struct Record {
    /// Its buffers are shared and its kernels loaded.
    ok: bool,
    /// It can order the call by events.
    events_ok: bool,
    /// It can order the call by barriers on the streams.
    barriers_ok: bool,
    /// Its `Mode`.
    mode: u8,
    /// Its process (`process_id`).
    process: u64,
    /// Its CUDA device.
    dev: i32,
    /// Its GPU's PCI location.
    gpu: u64,
    send_raw: u64,
    recv_raw: u64,
    send: driver::Exported,
    recv: driver::Exported,
    scalar: [u8; 8],
    /// Its `ready` and `done` events: raw (for ranks of its process) and
    /// IPC handles.
    ready_raw: u64,
    done_raw: u64,
    ready: [u8; 64],
    done: [u8; 64],
}

const RECORD: usize = 4 + 8 + 4 + 8 + 8 + 8 + (64 + 8) * 2 + 8 + 8 + 8 + 64 + 64;

/// This process, told apart from every other on the host: its pid, and
/// when it first asked. Ranks compare it to use each other's raw pointers,
/// and processes in different pid namespaces may share a pid.
fn process_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        u64::from(std::process::id()) << 40 ^ t
    })
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(RECORD);
        v.extend([
            self.ok as u8,
            self.events_ok as u8,
            self.barriers_ok as u8,
            self.mode,
        ]);
        v.extend(self.process.to_le_bytes());
        v.extend(self.dev.to_le_bytes());
        for x in [self.gpu, self.send_raw, self.recv_raw] {
            v.extend(x.to_le_bytes());
        }
        for e in [&self.send, &self.recv] {
            v.extend(e.handle);
            v.extend(e.offset.to_le_bytes());
        }
        v.extend(self.scalar);
        v.extend(self.ready_raw.to_le_bytes());
        v.extend(self.done_raw.to_le_bytes());
        v.extend(self.ready);
        v.extend(self.done);
        v
    }

    fn decode(b: &[u8]) -> Record {
        // Fields in `encode`'s order.
        let mut r = Reader { b, at: 0 };
        Record {
            ok: r.array::<1>()[0] != 0,
            events_ok: r.array::<1>()[0] != 0,
            barriers_ok: r.array::<1>()[0] != 0,
            mode: r.array::<1>()[0],
            process: r.u64(),
            dev: i32::from_le_bytes(r.array()),
            gpu: r.u64(),
            send_raw: r.u64(),
            recv_raw: r.u64(),
            send: r.exported(),
            recv: r.exported(),
            scalar: r.array(),
            ready_raw: r.u64(),
            done_raw: r.u64(),
            ready: r.array(),
            done: r.array(),
        }
    }
}

/// Reads an encoded record's fields in turn.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> [u8; N] {
        self.at += N;
        self.b[self.at - N..self.at].try_into().expect("N bytes")
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    fn exported(&mut self) -> driver::Exported {
        driver::Exported {
            handle: self.array(),
            offset: self.u64(),
        }
    }
}

/// How the ranks order a call on the IPC path, from their records: by
/// barriers on the streams (true) where any rank captures a graph or they
/// are forced and every rank can, else by events (false); Err says why the
/// call cannot take the IPC path.
fn protocol(recs: &[Record]) -> Result<bool, String> {
    if let Some(k) = recs.iter().position(|r| !r.ok) {
        return Err(format!(
            "rank {k}'s buffers cannot be shared through CUDA IPC, or its device lacks \
             the reduction kernels"
        ));
    }
    let captured = recs.iter().any(|r| r.mode == Mode::Captured as u8);
    if recs.iter().any(|r| r.mode != Mode::Events as u8) {
        let local = |a: usize| (0..a).find(|&b| recs[b].process == recs[a].process);
        let why = if let Some(k) = recs.iter().position(|r| !r.barriers_ok) {
            Some(format!(
                "rank {k} has no shared memory of this host holding every rank"
            ))
        } else if let Some((a, b)) = (0..recs.len()).find_map(|a| local(a).map(|b| (b, a))) {
            Some(format!(
                "ranks {a} and {b} are in one process, whose host functions the CUDA \
                 driver may run one at a time"
            ))
        } else {
            None
        };
        match why {
            None => return Ok(true),
            Some(w) if captured => return Err(w),
            // Forced only: ordered by events instead.
            Some(_) => {}
        }
    }
    match recs.iter().position(|r| !r.events_ok) {
        Some(k) => Err(format!("rank {k} cannot order the call by events")),
        None => Ok(false),
    }
}

/// Exchanges with every rank, on the host core, `mine` (fixed size).
fn exchange(core: &mut super::comm::Core, name: &'static str, mine: &[u8]) -> NcclResult<Vec<u8>> {
    let n = core.comm.size();
    let len = mine.len();
    let mut all = vec![0u8; n * len];
    let blocks: Vec<(usize, usize)> = (0..n).map(|p| (p * len, len)).collect();
    let c = &mut Ctx::new(&mut core.eng, &mut core.comm).named(name);
    coll::allgather::allgatherv(c, Some(mine), &mut all, &blocks)?;
    Ok(all)
}

/// How the ranks of a communicator share their GPUs, for the IPC path.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sharing {
    /// No GPU serves ranks of two processes: calls are stream-ordered.
    Apart,
    /// Some GPU serves ranks of several processes: calls complete on the
    /// host. Their kernels take turns on the GPU, and any work of theirs
    /// in a call (even an event) costs a switch of contexts: on an H100,
    /// stream-ordered calls took 300 us where these take 30.
    Shared,
}

/// `Sharing` from every rank's (process, GPU).
fn sharing(ranks: &[(u64, u64)]) -> Sharing {
    let shared = ranks
        .iter()
        .any(|a| ranks.iter().any(|b| a.1 == b.1 && a.0 != b.0));
    if shared {
        Sharing::Shared
    } else {
        Sharing::Apart
    }
}

/// Where a call on device buffers went.
enum Route {
    /// Queued on the IPC path.
    Queued,
    /// To the staged path, as every rank decided.
    Staged,
    /// Refused by every rank alike (a capture the IPC path cannot take):
    /// the call fails, the communicator stays usable.
    Refused(NcclErr),
}

/// The IPC path: `Route::Staged` (having done nothing the caller sees)
/// when some rank cannot take part, which every rank learns from the same
/// exchange, or `Refused` where a rank captures the call. `waited`: the
/// host has waited for the stream's work already.
///
/// Where any rank captures the call into a graph (or `mode` forces it),
/// barriers on the streams order it: see the module's documentation.
///
/// Where no GPU is shared by processes, the call is stream-ordered, as
/// NCCL's: each rank records `ready` on its stream where the call stands,
/// the ranks meet on the host (never waiting for the GPU), each GPU's
/// leader queues the work on its own stream behind every rank's `ready`
/// and records `done`, and every rank's stream waits for the leaders'
/// `done`; the call returns as soon as that is queued. Where a GPU is
/// shared by processes, every rank waits for its stream on the host first,
/// the leaders run the work to completion, and only they use the GPU.
fn ipc(
    sh: &Arc<Shared>,
    job: &Job,
    core: &mut super::comm::Core,
    st: &mut DeviceState,
    waited: bool,
    mode: Mode,
) -> NcclResult<Route> {
    let (n, me) = (core.comm.size(), core.comm.rank());
    if n > MAX_RANKS || core.eng.multi_host() {
        if mode == Mode::Captured {
            return Ok(Route::Refused(refused_in_capture(
                job.name,
                &format!("its ranks span hosts, or number over {MAX_RANKS}"),
            )));
        }
        return Ok(Route::Staged);
    }
    let mut t = Instant::now();
    let sharing = match st.sharing {
        Some(s) => s,
        // Stream order where processes share a GPU too: slow, but it tests
        // the events between processes on a machine with one GPU.
        None if crate::param::params().algo_for("gpu") == Some("ordered") => {
            *st.sharing.insert(Sharing::Apart)
        }
        None => {
            // Once per communicator: every rank's process and GPU.
            let mut mine = process_id().to_le_bytes().to_vec();
            mine.extend(st.gpu.to_le_bytes());
            let all = exchange(core, job.name, &mine)?;
            let ranks: Vec<(u64, u64)> = all
                .chunks_exact(16)
                .map(|c| {
                    let mut r = Reader { b: c, at: 0 };
                    (r.u64(), r.u64())
                })
                .collect();
            *st.sharing.insert(sharing(&ranks))
        }
    };
    let stream = job.stream;
    let ordered = if mode != Mode::Events {
        // Ordered by barriers on the stream, should every rank agree.
        Ok(())
    } else if sharing == Sharing::Shared {
        if waited {
            Ok(())
        } else {
            // SAFETY: the caller's stream (NCCL's contract).
            unsafe { driver::wait_for_stream(stream) }
        }
    } else {
        // Where the call stands on its stream: this rank's inputs are
        // ready once `ready` fires.
        (|| -> driver::Result<()> {
            // SAFETY (all three): the caller's stream (NCCL's contract).
            if driver::is_legacy(stream) {
                // The legacy stream follows every blocking stream, which no
                // event can say: waited for on the host.
                if !waited {
                    unsafe { driver::wait_for_stream(stream) }?;
                }
            } else if unsafe { driver::follows_legacy(stream) } {
                // As a kernel queued on a blocking stream would.
                unsafe { st.legacy.order(driver::LEGACY, stream) }?;
            }
            unsafe { st.ready.record(stream) }
        })()
    };
    st.phases.add("stream", &mut t);
    let (sl, rl) = spans(job, n, me);
    let none = driver::Exported {
        handle: [0; 64],
        offset: 0,
    };
    let send = if sl > 0 {
        st.exports.export(job.send)
    } else {
        Some(none)
    };
    let recv = if rl > 0 {
        st.exports.export(job.recv)
    } else {
        Some(none)
    };
    st.phases.add("export", &mut t);
    let mut scalar = [0u8; 8];
    if let Some(Red::PreMul(v)) = &job.red {
        scalar[..v.len()].copy_from_slice(v);
    }
    // An AlltoAll in place would overwrite blocks other ranks still read.
    let in_place_alltoall = matches!(job.kind, Kind::AlltoAll) && job.send == job.recv;
    let (ready, done) = st.handles.unwrap_or(([0; 64], [0; 64]));
    let mine = Record {
        ok: send.is_some()
            && recv.is_some()
            && (st.kernels || copy_kind(job.kind))
            && !in_place_alltoall,
        // Barrier modes did not order the stream above: no events then.
        events_ok: mode == Mode::Events
            && ordered.is_ok()
            && (sharing == Sharing::Shared || st.handles.is_some()),
        // Every rank maps the host's segment as the communicator's rank.
        barriers_ok: sh.segment().is_some_and(|s| s.nranks() == n),
        mode: mode as u8,
        process: process_id(),
        dev: st.device,
        gpu: st.gpu,
        send_raw: job.send as u64,
        recv_raw: job.recv as u64,
        send: send.unwrap_or(none),
        recv: recv.unwrap_or(none),
        scalar,
        ready_raw: st.ready.raw(),
        done_raw: st.done.raw(),
        ready,
        done,
    };
    let all = exchange(core, job.name, &mine.encode())?;
    st.phases.add("exchange", &mut t);
    let recs: Vec<Record> = all.chunks_exact(RECORD).map(Record::decode).collect();
    let captured = recs.iter().any(|r| r.mode == Mode::Captured as u8);
    let barriers = match protocol(&recs) {
        Ok(b) => b,
        Err(why) if captured => return Ok(Route::Refused(refused_in_capture(job.name, &why))),
        Err(_) => return Ok(Route::Staged),
    };
    // Peers' buffers and events in this process: ranks of this process use
    // theirs as is.
    let mut opened = Ok(());
    let mut sends = vec![0usize; n];
    let mut recvs = vec![0usize; n];
    let mut readies = vec![0u64; n];
    let mut dones = vec![0u64; n];
    for (k, r) in recs.iter().enumerate() {
        let local = r.process == mine.process;
        // A rank of this process on another device would need peer access
        // enabled between the two contexts: staged instead.
        if local && r.dev != st.device {
            opened = Err(driver::GpuError(format!(
                "rank {k} of this process uses device {}, this rank device {}",
                r.dev, st.device
            )));
            break;
        }
        let mut map = |raw: u64, e: &driver::Exported| -> driver::Result<usize> {
            if local || raw == 0 {
                Ok(raw as usize)
            } else {
                // Work queued on the callers' streams (or captured) may use
                // the mapping after `st.stream` is done: kept open.
                st.peers.address(e, &st.stream, barriers)
            }
        };
        let mut event = |raw: u64, h: &[u8; 64]| -> driver::Result<u64> {
            if local || sharing == Sharing::Shared || barriers {
                Ok(raw)
            } else {
                st.peer_events.event(h)
            }
        };
        let s = spans(job, n, k);
        let got = (|| {
            sends[k] = if s.0 > 0 {
                map(r.send_raw, &r.send)?
            } else {
                0
            };
            recvs[k] = if s.1 > 0 {
                map(r.recv_raw, &r.recv)?
            } else {
                0
            };
            readies[k] = event(r.ready_raw, &r.ready)?;
            dones[k] = event(r.done_raw, &r.done)?;
            Ok::<(), driver::GpuError>(())
        })();
        if let Err(e) = got {
            opened = Err(e);
            break;
        }
    }
    st.phases.add("map", &mut t);
    // Everyone must have mapped everything before anyone writes.
    let flags = exchange(core, job.name, &[opened.is_ok() as u8])?;
    st.phases.add("agree", &mut t);
    if flags.contains(&0) && captured {
        return Ok(Route::Refused(refused_in_capture(
            job.name,
            "a rank could not map its peers' buffers",
        )));
    }
    if flags.contains(&0) {
        crate::param::debug_log(crate::param::DebugLevel::Info, || {
            format!(
                "ferrocoll: {} staged through host memory: a rank could not map its peers' buffers ({})",
                job.name,
                opened.as_ref().err().map(|e| e.0.as_str()).unwrap_or("another rank")
            )
        });
        return Ok(Route::Staged);
    }
    let leaders = leaders(&recs);
    let actions = plan(job, n, me, &sends, &recvs, &recs);
    if barriers {
        let bar = *st.barrier.get_or_insert_with(|| {
            let seg = sh.segment().expect("checked by barriers_ok");
            StreamBarrier::leak(seg, me, n, Arc::downgrade(sh))
        });
        // Every rank's inputs are ready, then the leaders work on their
        // streams, then every leader's part is written.
        // SAFETY (all three): the caller's stream (NCCL's contract).
        if n > 1 {
            unsafe { bar.queue(stream) }.map_err(cuda)?;
        }
        launch(job, &actions, st, stream).map_err(cuda)?;
        if n > 1 {
            unsafe { bar.queue(stream) }.map_err(cuda)?;
        }
        st.phases.add("queued", &mut t);
        return Ok(Route::Queued);
    }
    if !actions.is_empty() {
        let ours = st.stream.handle();
        if sharing == Sharing::Apart {
            // A leader's work starts once every rank's inputs are ready.
            for &e in &readies {
                // SAFETY: our stream; an event of this process or opened here.
                unsafe { driver::wait_event(ours, e) }.map_err(cuda)?;
            }
        }
        launch(job, &actions, st, ours).map_err(cuda)?;
        if sharing == Sharing::Apart {
            // SAFETY: our own stream.
            unsafe { st.done.record(ours) }.map_err(cuda)?;
        } else {
            st.stream.synchronize().map_err(cuda)?;
        }
        st.phases.add("device", &mut t);
    }
    // Every leader's part is queued (Apart) or written (Shared) ...
    let c = &mut Ctx::new(&mut core.eng, &mut core.comm).named(job.name);
    coll::barrier::barrier(c)?;
    st.phases.add("barrier", &mut t);
    // ... and nothing later on this rank's stream (reading its result,
    // reusing its input) runs before it is written.
    if sharing == Sharing::Apart {
        for &k in &leaders {
            // SAFETY: the caller's stream; an event of this process or
            // opened here.
            unsafe { driver::wait_event(stream, dones[k]) }.map_err(cuda)?;
        }
    }
    Ok(Route::Queued)
}

/// One step of a rank's share of an IPC collective.
#[derive(Clone)]
enum Action {
    /// `len` bytes device to device.
    Copy { dst: usize, src: usize, len: usize },
    /// The reduction kernel over `args` (boxed: 600 bytes).
    Reduce { op: Op, args: Box<Args> },
}

/// Queues this rank's share of an IPC collective on `on`.
fn launch(
    job: &Job,
    actions: &[Action],
    st: &DeviceState,
    on: driver::StreamHandle,
) -> driver::Result<()> {
    for a in actions {
        match *a {
            // SAFETY: both are buffers of the call's size (NCCL's
            // signature, checked by the export), kept while `on` (ours or
            // the caller's stream) may use them: until the host barrier,
            // or mapped for good where barriers on the streams order it.
            Action::Copy { dst, src, len } => unsafe {
                copy_async(Dir::Device, dst, src, len, on)?
            },
            // SAFETY: every source and destination is a buffer of the
            // call's size, of this context or mapped into it, kept as for
            // copies.
            Action::Reduce { op, ref args } => unsafe {
                kernel::reduce(st.device, job.ty, op, args, on)?
            },
        }
    }
    Ok(())
}

/// This rank's share of an IPC collective. The work is split by GPU, not
/// by rank: the lowest rank on each GPU does that GPU's share, and the
/// others nothing, since kernels of processes sharing a GPU take turns on
/// it (a context switch each) rather than run together.
fn plan(
    job: &Job,
    n: usize,
    me: usize,
    sends: &[usize],
    recvs: &[usize],
    recs: &[Record],
) -> Vec<Action> {
    let gpu = |k: usize| recs[k].gpu;
    let leaders = leaders(recs);
    let Some(j) = leaders.iter().position(|&k| k == me) else {
        return Vec::new();
    };
    match job.kind {
        // Per-rank blocks: those of every rank on this GPU.
        Kind::AllGather
        | Kind::ReduceScatter
        | Kind::AlltoAll
        | Kind::Gather(_)
        | Kind::Scatter(_) => (0..n)
            .filter(|&k| gpu(k) == gpu(me))
            .flat_map(|k| part(job, n, k, (j, leaders.len()), sends, recvs, recs))
            .collect(),
        _ => part(job, n, me, (j, leaders.len()), sends, recvs, recs),
    }
}

/// The lowest rank on each GPU, in rank order.
fn leaders(recs: &[Record]) -> Vec<usize> {
    (0..recs.len())
        .filter(|&k| (0..k).all(|i| recs[i].gpu != recs[k].gpu))
        .collect()
}

/// One part of an IPC collective: slice `j` of `m` of the buffer
/// (`AllReduce`, `Reduce`, `Broadcast`), or rank `me`'s blocks
/// (`ReduceScatter`: its block of the result; `AllGather`, `Gather`: its
/// input; `AlltoAll`: its input's blocks; `Scatter`: its block of the
/// root's input), copied or reduced and written wherever they belong; a
/// block already in place is not copied.
fn part(
    job: &Job,
    n: usize,
    me: usize,
    (j, m): (usize, usize),
    sends: &[usize],
    recvs: &[usize],
    recs: &[Record],
) -> Vec<Action> {
    let ext = job.ty.extent();
    let c = job.count;
    let b = c * ext;
    let share = |len: usize| (len * j / m, len * (j + 1) / m);
    // One block, unless it is already where it belongs (in place).
    let block = |dst: usize, src: usize| {
        (dst != src)
            .then_some(Action::Copy { dst, src, len: b })
            .into_iter()
    };
    match job.kind {
        Kind::Gather(root) => block(recvs[root] + me * b, sends[me]).collect(),
        Kind::Scatter(root) => block(recvs[me], sends[root] + me * b).collect(),
        Kind::AlltoAll => (0..n)
            .flat_map(|r| block(recvs[r] + me * b, sends[me] + r * b))
            .collect(),
        Kind::AllGather => recvs
            .iter()
            .map(|&r| r + me * b)
            .filter(|&dst| dst != sends[me])
            .map(|dst| Action::Copy {
                dst,
                src: sends[me],
                len: b,
            })
            .collect(),
        Kind::Broadcast(root) => {
            let (lo, hi) = share(b);
            recvs
                .iter()
                .filter(|&&r| r != sends[root] && hi > lo)
                .map(|&r| Action::Copy {
                    dst: r + lo,
                    src: sends[root] + lo,
                    len: hi - lo,
                })
                .collect()
        }
        _ => {
            let red = job.red.as_ref().expect("reductions carry an op");
            let mut a = Args {
                nsrc: n as c_int,
                ..Args::default()
            };
            for (d, &s) in a.src.iter_mut().zip(sends) {
                *d = s as u64;
            }
            let op = match red {
                Red::Op(op) => *op,
                Red::Avg if work::is_float(job.ty) => {
                    a.mode = 1;
                    a.fscale = [1.0 / n as f64; MAX_RANKS];
                    Op::Sum
                }
                Red::Avg => {
                    a.mode = if n > 1 { 2 } else { 0 };
                    Op::Sum
                }
                Red::PreMul(_) => {
                    a.mode = 1;
                    for (k, r) in recs.iter().enumerate() {
                        match work::factor_of(job.ty, &r.scalar) {
                            work::Factor::F(f) => a.fscale[k] = f,
                            work::Factor::I(i) => a.iscale[k] = i as i64,
                        }
                    }
                    Op::Sum
                }
                Red::PreMulAt(_) => unreachable!("resolved before running"),
            };
            match job.kind {
                Kind::AllReduce => {
                    let (lo, hi) = share(c);
                    (a.begin, a.end) = (lo as u64, hi as u64);
                    a.ndst = n as c_int;
                    for (d, &r) in a.dst.iter_mut().zip(recvs) {
                        *d = r as u64;
                    }
                }
                Kind::Reduce(root) => {
                    let (lo, hi) = share(c);
                    (a.begin, a.end) = (lo as u64, hi as u64);
                    a.ndst = 1;
                    a.dst[0] = recvs[root] as u64;
                }
                Kind::ReduceScatter => {
                    (a.begin, a.end, a.dst_shift) =
                        ((me * c) as u64, ((me + 1) * c) as u64, (me * c) as u64);
                    a.ndst = 1;
                    a.dst[0] = recvs[me] as u64;
                }
                _ => unreachable!("peer_kind"),
            }
            vec![Action::Reduce {
                op,
                args: Box::new(a),
            }]
        }
    }
}

/// A device range staged at offset `host` of the staging block.
#[derive(Debug, PartialEq)]
struct Region {
    dev: usize,
    len: usize,
    host: usize,
    /// Holds input (copied in before the host collective).
    input: bool,
    /// Holds output (copied back after it).
    output: bool,
}

/// Where a batch's significant buffers go in the staging block: one region
/// per buffer, or one for both where they overlap (in-place layouts keep
/// their relative places).
struct Layout {
    regions: Vec<Region>,
    total: usize,
}

impl Layout {
    fn of(jobs: &[Job], n: usize, me: usize) -> Layout {
        let mut l = Layout {
            regions: Vec::new(),
            total: 0,
        };
        let mut place = |dev: usize, len: usize, input: bool, output: bool| {
            l.regions.push(Region {
                dev,
                len,
                host: l.total,
                input,
                output,
            });
            l.total += len.next_multiple_of(64);
        };
        for j in jobs {
            let (sl, rl) = spans(j, n, me);
            let overlap = sl > 0 && rl > 0 && j.send < j.recv + rl && j.recv < j.send + sl;
            if overlap {
                let lo = j.send.min(j.recv);
                let hi = (j.send + sl).max(j.recv + rl);
                place(lo, hi - lo, true, true);
            } else {
                if sl > 0 {
                    place(j.send, sl, true, false);
                }
                if rl > 0 {
                    place(j.recv, rl, false, true);
                }
            }
        }
        l
    }

    /// The host address of device range `a..a+len` (0 for an empty one)
    /// with the block at `base`.
    fn at(&self, base: usize, a: usize, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        let r = self
            .regions
            .iter()
            .find(|r| a >= r.dev && a + len <= r.dev + r.len)
            .expect("every significant buffer was placed");
        base + r.host + (a - r.dev)
    }

    /// Copies the inputs to the block at `base` (`ToHost`) or the outputs
    /// back (`ToDevice`), and waits for the copies.
    fn copy(&self, dir: Dir, base: usize, st: &DeviceState) -> NcclResult<()> {
        if self.regions.is_empty() {
            return Ok(());
        }
        for r in &self.regions {
            if matches!(dir, Dir::ToHost) && r.input || matches!(dir, Dir::ToDevice) && r.output {
                let (dst, src) = match dir {
                    Dir::ToHost => (base + r.host, r.dev),
                    _ => (r.dev, base + r.host),
                };
                // SAFETY: the caller's device range (NCCL's signature) and
                // the staging block at `base`, which holds `total` bytes.
                unsafe { copy_async(dir, dst, src, r.len, st.stream.handle()) }.map_err(cuda)?;
            }
        }
        st.stream.synchronize().map_err(cuda)
    }

    /// `jobs` on the staged copies.
    fn host_jobs(&self, jobs: &[Job], n: usize, me: usize, base: usize) -> Vec<Job> {
        jobs.iter()
            .map(|j| {
                let (sl, rl) = spans(j, n, me);
                Job {
                    send: self.at(base, j.send, sl),
                    recv: self.at(base, j.recv, rl),
                    device: false,
                    ..j.clone()
                }
            })
            .collect()
    }
}

/// The staged path for collectives: inputs to pinned host memory (pageable
/// beyond the pinned block), the host collectives on the copies, outputs
/// back to the device.
fn staged(jobs: &[Job], core: &mut super::comm::Core, st: &mut DeviceState) -> NcclResult<()> {
    let (n, me) = (core.comm.size(), core.comm.rank());
    let layout = Layout::of(jobs, n, me);
    let (pinned, room) = st.staging.block();
    let mut pageable = Vec::new();
    let total = layout.total;
    let base = if total <= room {
        pinned as usize
    } else {
        pageable.resize(total, 0u8);
        pageable.as_mut_ptr() as usize
    };
    let host_jobs = layout.host_jobs(jobs, n, me, base);
    let mut t = Instant::now();
    layout.copy(Dir::ToHost, base, st)?;
    st.phases.add("to host", &mut t);
    work::run_batch(&host_jobs, core)?;
    st.phases.add("host", &mut t);
    layout.copy(Dir::ToDevice, base, st)?;
    st.phases.add("to device", &mut t);
    Ok(())
}

/// Bytes of one buffer's piece in a staged call cut into pieces: the same
/// for every rank, whatever its staging block, so all cut alike.
const PIECE: usize = 4 << 20;

/// Collectives whose elements are independent, which the staged path may
/// run a piece (a range of elements) at a time.
fn piecewise(k: Kind) -> bool {
    matches!(k, Kind::AllReduce | Kind::Reduce(_) | Kind::Broadcast(_))
}

/// One piece of a staged call: the host collective on a slot of host
/// memory, and where its bytes sit on the device.
#[derive(Debug)]
struct Piece {
    /// The call on the slot's copies.
    host: Job,
    /// Offset of the piece in the device buffers, and its length.
    off: usize,
    len: usize,
}

/// Cuts elementwise `job` into pieces of `PIECE` bytes, piece i in slot
/// i % 2 of two slots of `slot` bytes at `base` (input first, then output,
/// or one region in place); buffers insignificant at `me` stay 0.
fn cut(job: &Job, n: usize, me: usize, base: usize, slot: usize) -> Vec<Piece> {
    let ext = job.ty.extent();
    let per = (PIECE / ext).max(1);
    let (sl, rl) = spans(job, n, me);
    let in_place = sl > 0 && rl > 0 && job.send == job.recv;
    (0..job.count.div_ceil(per))
        .map(|i| {
            let lo = i * per;
            let count = per.min(job.count - lo);
            let at = base + (i % 2) * slot;
            let out = if in_place { at } else { at + per * ext };
            Piece {
                host: Job {
                    send: if sl > 0 { at } else { 0 },
                    recv: if rl > 0 { out } else { 0 },
                    count,
                    device: false,
                    ..job.clone()
                },
                off: lo * ext,
                len: count * ext,
            }
        })
        .collect()
}

/// The staged path for one large elementwise collective, a piece at a
/// time through two slots of host memory (pinned where the staging block
/// holds them): the copy of the next piece to the host runs while the host
/// collective works on this one. Across hosts this pipelines the device
/// copies with the network.
fn staged_pieces(job: &Job, core: &mut super::comm::Core, st: &mut DeviceState) -> NcclResult<()> {
    let (n, me) = (core.comm.size(), core.comm.rank());
    let ext = job.ty.extent();
    let slot = (2 * (PIECE / ext).max(1) * ext).next_multiple_of(64);
    let (pinned, room) = st.staging.block();
    let mut pageable = Vec::new();
    let base = if 2 * slot <= room {
        pinned as usize
    } else {
        pageable.resize(2 * slot, 0u8);
        pageable.as_mut_ptr() as usize
    };
    let pieces = cut(job, n, me, base, slot);
    let mut t = Instant::now();
    let copy_in = |p: &Piece, st: &DeviceState| -> NcclResult<()> {
        // SAFETY: a piece of the caller's send buffer (NCCL's signature)
        // and its slot, which holds it; the slot outlives the copy (the
        // stream is synchronised before this function returns).
        unsafe {
            copy_async(
                Dir::ToHost,
                p.host.send,
                job.send + p.off,
                p.len,
                st.stream.handle(),
            )
        }
        .map_err(cuda)
    };
    let copy_out = |p: &Piece, st: &DeviceState| -> NcclResult<()> {
        // SAFETY: as for copy_in, to the caller's receive buffer.
        unsafe {
            copy_async(
                Dir::ToDevice,
                job.recv + p.off,
                p.host.recv,
                p.len,
                st.stream.handle(),
            )
        }
        .map_err(cuda)
    };
    let mut go = || -> NcclResult<()> {
        // Which buffers matter here (the same for every piece).
        let sends = pieces[0].host.send != 0;
        let recvs = pieces[0].host.recv != 0;
        for p in pieces.iter().take(2).filter(|_| sends) {
            copy_in(p, st)?;
        }
        for (i, p) in pieces.iter().enumerate() {
            // This piece's input is in (and the next one's on its way).
            if i == 0 {
                st.stream.synchronize().map_err(cuda)?;
            }
            work::run_batch(std::slice::from_ref(&p.host), core)?;
            if recvs {
                copy_out(p, st)?;
            }
            st.stream.synchronize().map_err(cuda)?;
            // This slot is free again: the piece after next goes there.
            if let Some(q) = pieces.get(i + 2).filter(|_| sends) {
                copy_in(q, st)?;
            }
        }
        Ok(())
    };
    let r = go();
    // No copy may still use the slots when they go.
    let done = st.stream.synchronize().map_err(cuda);
    st.phases.add("pieces", &mut t);
    r.and(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ElemType;

    fn job(kind: Kind, send: usize, recv: usize, count: usize) -> Job {
        Job {
            name: "test",
            kind,
            send,
            recv,
            count,
            ty: ElemType::F32,
            red: None,
            stream: 0,
            device: true,
        }
    }

    #[test]
    fn significant_spans_follow_nccl() {
        let b = 40; // 10 floats
        assert_eq!(spans(&job(Kind::AllReduce, 1, 2, 10), 4, 1), (b, b));
        assert_eq!(spans(&job(Kind::Broadcast(2), 1, 2, 10), 4, 1), (0, b));
        assert_eq!(spans(&job(Kind::Broadcast(2), 1, 2, 10), 4, 2), (b, b));
        assert_eq!(spans(&job(Kind::Reduce(0), 1, 2, 10), 4, 1), (b, 0));
        assert_eq!(spans(&job(Kind::AllGather, 1, 2, 10), 4, 1), (b, 4 * b));
        assert_eq!(spans(&job(Kind::ReduceScatter, 1, 2, 10), 4, 1), (4 * b, b));
        assert_eq!(spans(&job(Kind::Gather(3), 1, 2, 10), 4, 3), (b, 4 * b));
        assert_eq!(spans(&job(Kind::Scatter(3), 1, 2, 10), 4, 1), (0, b));
        assert_eq!(spans(&job(Kind::Recv(1), 0, 2, 10), 4, 0), (0, b));
    }

    #[test]
    fn staging_keeps_in_place_layouts() {
        let (n, me, b) = (4, 2, 40);
        // AllGather in place: send is this rank's block of recv.
        let recv = 0x10_000;
        let jobs = [job(Kind::AllGather, recv + me * b, recv, 10)];
        let l = Layout::of(&jobs, n, me);
        assert_eq!(l.regions.len(), 1);
        assert_eq!((l.regions[0].dev, l.regions[0].len), (recv, n * b));
        let h = l.host_jobs(&jobs, n, me, 0x1000);
        assert_eq!(h[0].send, h[0].recv + me * b, "still in place");
        assert!(!h[0].device);
        // Apart: two regions, input then output, 64-byte aligned.
        let jobs = [job(Kind::AllReduce, 0x20_000, 0x30_000, 10)];
        let l = Layout::of(&jobs, n, me);
        assert_eq!(l.regions.len(), 2);
        assert!(l.regions[0].input && !l.regions[0].output);
        assert!(!l.regions[1].input && l.regions[1].output);
        assert_eq!(l.regions[1].host, 64);
        assert_eq!(l.total, 128);
        let h = l.host_jobs(&jobs, n, me, 0x1000);
        assert_eq!((h[0].send, h[0].recv), (0x1000, 0x1040));
        // A broadcast's insignificant send buffer is not staged.
        let jobs = [job(Kind::Broadcast(0), 0x40_000, 0x40_000, 10)];
        let l = Layout::of(&jobs, n, me);
        assert_eq!(l.regions.len(), 1);
        assert!(l.regions[0].output && !l.regions[0].input);
        assert_eq!(l.host_jobs(&jobs, n, me, 0x1000)[0].send, 0);
    }

    /// Runs plans on host memory as the device would: copies, and the
    /// kernel's rule per element (sources scaled and reduced in rank order
    /// with the host kernels, written to every destination).
    fn interpret(ty: ElemType, actions: &[Action]) {
        let e = ty.extent();
        for a in actions {
            match a {
                // SAFETY (both arms): the test's buffers, as the plan names them.
                &Action::Copy { dst, src, len } => unsafe {
                    std::ptr::copy(src as *const u8, dst as *mut u8, len)
                },
                Action::Reduce { op, args } => {
                    let apply = crate::reduce::kernel(*op, ty).expect("kernel");
                    let load = |k: usize, i: usize| {
                        let at = args.src[k] as usize + i * e;
                        // SAFETY: an element of a source buffer the test owns.
                        let mut v =
                            unsafe { std::slice::from_raw_parts(at as *const u8, e) }.to_vec();
                        if args.mode == 1 {
                            let f = if work::is_float(ty) {
                                work::Factor::F(args.fscale[k])
                            } else {
                                work::Factor::I(i128::from(args.iscale[k]))
                            };
                            work::scale(ty, &mut v, &f);
                        }
                        v
                    };
                    for i in args.begin as usize..args.end as usize {
                        let mut acc = load(0, i);
                        for k in 1..args.nsrc as usize {
                            apply(&load(k, i), &mut acc);
                        }
                        if args.mode == 2 {
                            work::divide(ty, &mut acc, args.nsrc as usize);
                        }
                        for d in &args.dst[..args.ndst as usize] {
                            let at = *d as usize + (i - args.dst_shift as usize) * e;
                            // SAFETY: an element of a destination the test owns.
                            unsafe { std::slice::from_raw_parts_mut(at as *mut u8, e) }
                                .copy_from_slice(&acc);
                        }
                    }
                }
            }
        }
    }

    /// Three ranks' buffers in one address space, as ranks of one process
    /// use them: runs every rank's plan for `j` (rank k on GPU `gpu(k)`)
    /// and returns the receive buffers (`in_place(k)`: rank k receives at
    /// that offset of its send buffer, and the whole send buffer is
    /// returned).
    fn run_plans(
        gpu: fn(usize) -> u64,
        j: &Job,
        send: &mut [Vec<u8>],
        recv: &mut [Vec<u8>],
        in_place: impl Fn(usize) -> Option<usize>,
        scalars: &[i32],
    ) -> Vec<Vec<u8>> {
        let n = send.len();
        let sends: Vec<usize> = (0..n)
            .map(|k| {
                if spans(j, n, k).0 > 0 {
                    send[k].as_mut_ptr() as usize
                } else {
                    0
                }
            })
            .collect();
        let recvs: Vec<usize> = (0..n)
            .map(|k| match in_place(k) {
                Some(off) => send[k].as_mut_ptr() as usize + off,
                None if spans(j, n, k).1 > 0 => recv[k].as_mut_ptr() as usize,
                None => 0,
            })
            .collect();
        let recs: Vec<Record> = (0..n)
            .map(|k| {
                let mut scalar = [0u8; 8];
                scalar[..4].copy_from_slice(&scalars.get(k).copied().unwrap_or(1).to_ne_bytes());
                Record {
                    ok: true,
                    events_ok: true,
                    barriers_ok: true,
                    mode: Mode::Events as u8,
                    process: 1,
                    dev: 0,
                    gpu: gpu(k),
                    send_raw: 0,
                    recv_raw: 0,
                    send: driver::Exported {
                        handle: [0; 64],
                        offset: 0,
                    },
                    recv: driver::Exported {
                        handle: [0; 64],
                        offset: 0,
                    },
                    scalar,
                    ready_raw: 0,
                    done_raw: 0,
                    ready: [0; 64],
                    done: [0; 64],
                }
            })
            .collect();
        let mut acting = 0;
        for me in 0..n {
            let p = plan(j, n, me, &sends, &recvs, &recs);
            acting += !p.is_empty() as usize;
            interpret(j.ty, &p);
        }
        let gpus = (0..n).filter(|&k| (0..k).all(|i| gpu(i) != gpu(k))).count();
        assert!(acting <= gpus, "one rank per GPU acts");
        (0..n)
            .map(|k| match in_place(k) {
                Some(_) => send[k].clone(),
                None => recv[k].clone(),
            })
            .collect()
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    fn as_f32(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    fn as_i32(b: &[u8]) -> Vec<i32> {
        b.chunks_exact(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// Every GPU's share, written where it belongs, gives NCCL's result:
    /// uneven shares (7 elements over 3 ranks), in place, Avg, PreMulSum,
    /// roots; with the three ranks on one GPU, on two, and on three.
    #[test]
    fn ipc_plans_give_nccl_results() {
        for gpu in [|_| 0, |k| (k / 2) as u64, |k| k as u64] {
            ipc_plans_with(gpu);
        }
    }

    fn ipc_plans_with(gpu: fn(usize) -> u64) {
        let (n, c) = (3usize, 7usize);
        let x = |r: usize, i: usize| (r * 10 + i) as f32;
        let inputs = |len: usize| -> Vec<Vec<u8>> {
            (0..n)
                .map(|r| f32s(&(0..len).map(|i| x(r, i)).collect::<Vec<_>>()))
                .collect()
        };
        let zeros = |len: usize| vec![vec![0u8; len * 4]; n];
        let mut jb = job(Kind::AllReduce, 0, 0, c);
        jb.red = Some(Red::Op(Op::Sum));
        let sum = |i: usize| (0..n).map(|r| x(r, i)).sum::<f32>();
        // AllReduce, apart and in place.
        for in_place in [false, true] {
            let mut s = inputs(c);
            let mut r = zeros(c);
            let out = run_plans(gpu, &jb, &mut s, &mut r, |_| in_place.then_some(0), &[]);
            for o in &out {
                assert_eq!(
                    as_f32(o),
                    (0..c).map(sum).collect::<Vec<_>>(),
                    "in place {in_place}"
                );
            }
        }
        // Avg of floats: each input scaled by 1/n (rounded), then summed.
        jb.red = Some(Red::Avg);
        let out = run_plans(gpu, &jb, &mut inputs(c), &mut zeros(c), |_| None, &[]);
        let k = (1.0f64 / n as f64) as f32;
        let avg = |i: usize| {
            (0..n).fold(
                0.0f32,
                |a, r| if r == 0 { x(r, i) * k } else { a + x(r, i) * k },
            )
        };
        assert_eq!(as_f32(&out[2]), (0..c).map(avg).collect::<Vec<_>>());
        // Integers: PreMulSum with each rank's scalar; Avg sums then divides.
        let mut ji = jb.clone();
        ji.ty = ElemType::I32;
        let ints = |_: ()| -> Vec<Vec<u8>> {
            (0..n)
                .map(|r| i32s(&(0..c).map(|i| (r * 10 + i) as i32).collect::<Vec<_>>()))
                .collect()
        };
        ji.red = Some(Red::PreMul(vec![0; 4]));
        let out = run_plans(gpu, &ji, &mut ints(()), &mut zeros(c), |_| None, &[2, 3, 5]);
        let want: Vec<i32> = (0..c)
            .map(|i| (0..n).map(|r| (r * 10 + i) as i32 * [2, 3, 5][r]).sum())
            .collect();
        assert_eq!(as_i32(&out[1]), want);
        ji.red = Some(Red::Avg);
        let out = run_plans(gpu, &ji, &mut ints(()), &mut zeros(c), |_| None, &[]);
        let want: Vec<i32> = (0..c)
            .map(|i| (0..n).map(|r| (r * 10 + i) as i32).sum::<i32>() / n as i32)
            .collect();
        assert_eq!(as_i32(&out[0]), want);
        // Reduce (max) to rank 1: only its buffer is written.
        let mut jr = job(Kind::Reduce(1), 0, 0, c);
        jr.red = Some(Red::Op(Op::Max));
        let out = run_plans(gpu, &jr, &mut inputs(c), &mut zeros(c), |_| None, &[]);
        assert_eq!(
            as_f32(&out[1]),
            (0..c).map(|i| x(n - 1, i)).collect::<Vec<_>>()
        );
        assert_eq!(as_f32(&out[0]), vec![0.0; c]);
        // ReduceScatter: rank k gets block k of the sum, apart and in place.
        let mut js = job(Kind::ReduceScatter, 0, 0, c);
        js.red = Some(Red::Op(Op::Sum));
        for in_place in [false, true] {
            let mut s = inputs(n * c);
            let mut r = zeros(c);
            let out = run_plans(
                gpu,
                &js,
                &mut s,
                &mut r,
                |k| in_place.then_some(k * c * 4),
                &[],
            );
            for (k, o) in out.iter().enumerate() {
                let got = if in_place {
                    as_f32(&o[k * c * 4..(k + 1) * c * 4])
                } else {
                    as_f32(o)
                };
                assert_eq!(
                    got,
                    (k * c..(k + 1) * c).map(sum).collect::<Vec<_>>(),
                    "in place {in_place}"
                );
            }
        }
        // AllGather; Broadcast from rank 2.
        let ja = job(Kind::AllGather, 0, 0, c);
        let out = run_plans(gpu, &ja, &mut inputs(c), &mut zeros(n * c), |_| None, &[]);
        let all: Vec<f32> = (0..n).flat_map(|r| (0..c).map(move |i| x(r, i))).collect();
        for o in &out {
            assert_eq!(as_f32(o), all);
        }
        let jbc = job(Kind::Broadcast(2), 0, 0, c);
        let out = run_plans(gpu, &jbc, &mut inputs(c), &mut zeros(c), |_| None, &[]);
        for o in &out {
            assert_eq!(as_f32(o), (0..c).map(|i| x(2, i)).collect::<Vec<_>>());
        }
        // AlltoAll: rank k's block r goes to rank r's block k.
        let jt = job(Kind::AlltoAll, 0, 0, c);
        let out = run_plans(
            gpu,
            &jt,
            &mut inputs(n * c),
            &mut zeros(n * c),
            |_| None,
            &[],
        );
        for (r, o) in out.iter().enumerate() {
            let want: Vec<f32> = (0..n)
                .flat_map(|k| (r * c..(r + 1) * c).map(move |i| x(k, i)))
                .collect();
            assert_eq!(as_f32(o), want, "alltoall at {r}");
        }
        // Gather to rank 1.
        let jg = job(Kind::Gather(1), 0, 0, c);
        let out = run_plans(gpu, &jg, &mut inputs(c), &mut zeros(n * c), |_| None, &[]);
        let all: Vec<f32> = (0..n).flat_map(|k| (0..c).map(move |i| x(k, i))).collect();
        assert_eq!(as_f32(&out[1]), all, "gather");
        assert_eq!(as_f32(&out[0]), vec![0.0; n * c], "only the root receives");
        // Scatter from rank 2, apart and in place (the root's block stays).
        let js = job(Kind::Scatter(2), 0, 0, c);
        for in_place in [false, true] {
            let at = |k: usize| (in_place && k == 2).then_some(2 * c * 4);
            let out = run_plans(gpu, &js, &mut inputs(n * c), &mut zeros(c), at, &[]);
            for (k, o) in out.iter().enumerate() {
                let got = if at(k).is_some() {
                    as_f32(&o[2 * c * 4..3 * c * 4])
                } else {
                    as_f32(o)
                };
                let want: Vec<f32> = (k * c..(k + 1) * c).map(|i| x(2, i)).collect();
                assert_eq!(got, want, "scatter to {k}, in place {in_place}");
            }
        }
    }

    #[test]
    fn processes_sharing_a_gpu_are_told() {
        assert_eq!(sharing(&[(1, 7)]), Sharing::Apart);
        assert_eq!(sharing(&[(1, 7), (2, 8)]), Sharing::Apart, "a GPU each");
        assert_eq!(sharing(&[(1, 7), (1, 7)]), Sharing::Apart, "one process");
        assert_eq!(sharing(&[(1, 7), (1, 8), (2, 8)]), Sharing::Shared);
    }

    /// A staged call in pieces covers every element once, alternates two
    /// slots, keeps in-place calls in place, and leaves insignificant
    /// buffers out.
    #[test]
    fn pieces_cover_the_call() {
        let per = PIECE / 4;
        let (base, slot) = (0x1000_0000, 2 * PIECE);
        let mut j = job(Kind::AllReduce, 0x10_0000_0000, 0x20_0000_0000, 2 * per + 5);
        let p = cut(&j, 2, 0, base, slot);
        assert_eq!(p.len(), 3);
        assert_eq!(
            p.iter()
                .map(|p| (p.off, p.len, p.host.count))
                .collect::<Vec<_>>(),
            [(0, PIECE, per), (PIECE, PIECE, per), (2 * PIECE, 20, 5)]
        );
        assert_eq!(
            p.iter()
                .map(|p| (p.host.send, p.host.recv))
                .collect::<Vec<_>>(),
            [
                (base, base + PIECE),
                (base + slot, base + slot + PIECE),
                (base, base + PIECE)
            ]
        );
        assert!(p.iter().all(|p| !p.host.device));
        j.recv = j.send;
        assert!(cut(&j, 2, 0, base, slot)
            .iter()
            .all(|p| p.host.send == p.host.recv));
        // Broadcast from 1: rank 0 has no input, rank 1 both; Reduce to 1:
        // rank 0 has no output.
        j = job(Kind::Broadcast(1), 0x10_0000_0000, 0x20_0000_0000, per + 1);
        assert!(cut(&j, 2, 0, base, slot).iter().all(|p| p.host.send == 0));
        assert!(cut(&j, 2, 1, base, slot).iter().all(|p| p.host.send != 0));
        j.kind = Kind::Reduce(1);
        assert!(cut(&j, 2, 0, base, slot).iter().all(|p| p.host.recv == 0));
        assert!(piecewise(Kind::AllReduce) && !piecewise(Kind::AllGather));
    }

    #[test]
    fn records_survive_the_exchange() {
        let r = Record {
            ok: true,
            events_ok: false,
            barriers_ok: true,
            mode: Mode::Captured as u8,
            process: 4242 << 40 | 77,
            dev: 3,
            gpu: 0x1_0042_0000,
            send_raw: 0x7f00_0000_1000,
            recv_raw: 0x7f00_0000_2000,
            send: driver::Exported {
                handle: [7; 64],
                offset: 96,
            },
            recv: driver::Exported {
                handle: [9; 64],
                offset: 128,
            },
            scalar: 0.5f64.to_le_bytes(),
            ready_raw: 0x5555_0000,
            done_raw: 0x6666_0000,
            ready: [3; 64],
            done: [4; 64],
        };
        let bytes = r.encode();
        assert_eq!(bytes.len(), RECORD);
        let d = Record::decode(&bytes);
        assert!(d.ok && !d.events_ok && d.barriers_ok);
        assert_eq!(d.mode, Mode::Captured as u8);
        assert_eq!(
            (d.process, d.dev, d.gpu, d.send_raw, d.recv_raw),
            (r.process, r.dev, r.gpu, r.send_raw, r.recv_raw)
        );
        assert_eq!((d.send, d.recv, d.scalar), (r.send, r.recv, r.scalar));
        assert_eq!(
            (d.ready_raw, d.done_raw, d.ready, d.done),
            (r.ready_raw, r.done_raw, r.ready, r.done)
        );
    }

    #[test]
    fn ranks_agree_how_a_call_is_ordered() {
        let base = Record::decode(&[0u8; RECORD]);
        let rec = |process: u64, mode: Mode| Record {
            ok: true,
            events_ok: mode == Mode::Events,
            barriers_ok: true,
            mode: mode as u8,
            process,
            ..base
        };
        use Mode::*;
        // Events unless a rank captures or barriers are forced.
        assert_eq!(protocol(&[rec(1, Events), rec(2, Events)]), Ok(false));
        // One rank capturing puts every rank on barriers.
        assert_eq!(protocol(&[rec(1, Events), rec(2, Captured)]), Ok(true));
        assert_eq!(protocol(&[rec(1, Barriers), rec(2, Barriers)]), Ok(true));
        // Ranks of one process cannot use barriers: forced ones fall back
        // (here to staging: they did not order by events), captured fail.
        let e = protocol(&[rec(1, Barriers), rec(1, Barriers)]).unwrap_err();
        assert!(e.contains("events"), "{e}");
        let e = protocol(&[rec(2, Events), rec(1, Captured), rec(1, Captured)]).unwrap_err();
        assert!(
            e.contains("ranks 1 and 2") && e.contains("one process"),
            "{e}"
        );
        let mut no_seg = rec(2, Events);
        no_seg.barriers_ok = false;
        let e = protocol(&[rec(1, Captured), no_seg]).unwrap_err();
        assert!(e.contains("rank 1 has no shared memory"), "{e}");
        let mut unshared = rec(2, Captured);
        unshared.ok = false;
        let e = protocol(&[rec(1, Captured), unshared]).unwrap_err();
        assert!(e.contains("rank 1's buffers"), "{e}");
    }
}
