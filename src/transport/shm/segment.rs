//! The job's shared-memory segment: a header (attach count, pids, abort
//! flag, a count of sleeping ranks), one doorbell, one "where it runs"
//! word and one stream-barrier word per rank, each rank's collective slot
//! areas and one ring per ordered pair of ranks.
//!
//! Rank 0 creates `/dev/shm/ferrocoll-<job>` (mode 0600), the others open it;
//! the last rank to map it unlinks it, so a crash leaves nothing behind.

use super::futex::Doorbell;
use super::ring::{Ring, CTRL_BYTES};
use super::slots::{Area, AREAS, AREA_BYTES};
use crate::error::{Error, Result};
use crate::membarrier;
use memmap2::MmapRaw;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{compiler_fence, fence, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MAGIC: u64 = 0x4645_5252_4f43_4f4c; // "FERROCOL"
const HEADER_BYTES: usize = 4096;
const PIDS_OFFSET: usize = 256;
/// Where the count of registered sleepers lies (`Segment::anyone_asleep`):
/// a line of its own, written only as ranks go to sleep and wake.
const SLEEPERS_OFFSET: usize = 128;
// The header's fields must end before the sleepers' line, and that line
// before the pids.
const _: () = assert!(
    std::mem::size_of::<Header>() <= SLEEPERS_OFFSET && SLEEPERS_OFFSET + 64 <= PIDS_OFFSET
);
/// Most ranks one segment serves (pids must fit in the header page).
pub const MAX_RANKS: usize = (HEADER_BYTES - PIDS_OFFSET) / 4;
/// Upper bound on all rings together; large jobs get smaller rings.
const RING_BUDGET: usize = 512 << 20;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    nranks: AtomicU32,
    ring_bytes: AtomicU32,
    attached: AtomicU32,
    /// 0, or 1 + the world rank that aborted.
    abort_rank: AtomicU32,
    abort_code: AtomicI32,
    /// 0, or 1 + the world rank some rank found dead while it still
    /// needed it: every rank's waits then fail naming it, also waits on
    /// live ranks that stopped because of it.
    dead_rank: AtomicU32,
    /// How many attached ranks cannot take part in global `membarrier`s:
    /// while any, every waker fences (see `Segment::settle`).
    fenced: AtomicU32,
}

/// A mapped segment shared by all ranks of one host.
pub struct Segment {
    map: MmapRaw,
    nranks: usize,
    ring_bytes: usize,
    /// Offsets of the parts, computed once: every slot and doorbell access
    /// needs one.
    layout: Layout,
    /// Wakers need no fence between publishing and reading a doorbell,
    /// because a rank about to sleep runs a barrier on them all (`settle`).
    asymmetric: bool,
    /// The barriers other ranks run reach this rank's thread
    /// (`membarrier::reaches_me` when it attached).
    covered: bool,
}

// SAFETY: all shared state in the mapping is accessed through atomics or
// through rings whose protocol hands each byte range to one side at a time.
unsafe impl Sync for Segment {}
// SAFETY: as above; the mapping itself may move between threads.
unsafe impl Send for Segment {}

/// Offsets of the parts of a segment.
#[derive(Clone, Copy)]
struct Layout {
    bells: usize,
    cpus: usize,
    barriers: usize,
    turns: usize,
    slots: usize,
    rings: usize,
    total: usize,
}

fn layout(nranks: usize, ring_bytes: usize) -> Layout {
    let bells = HEADER_BYTES;
    let cpus = bells + nranks * 64;
    let barriers = cpus + nranks * 64;
    let turns = barriers + nranks * 64;
    let slots = (turns + nranks * 64).div_ceil(4096) * 4096;
    let rings = (slots + nranks * AREAS * AREA_BYTES).div_ceil(4096) * 4096;
    let total = rings + nranks * nranks * (CTRL_BYTES + ring_bytes);
    Layout {
        bells,
        cpus,
        barriers,
        turns,
        slots,
        rings,
        total,
    }
}

/// Set in a rank's `Segment::on_cpu` word while it has handed its core
/// over; the rest of the word still says which CPU that was.
pub const PAUSED: u32 = 1 << 31;

/// Set by a rank that hands this rank a message to read in place (a
/// `Pull`) or tells it that a send of its was read (`Done`), cleared by this
/// rank as it makes progress: while it is set, this rank has a copy to make
/// or a call to finish once it gets a core. A hint: the plain store of
/// a rank's next hand-over or return clears it too, which costs only a
/// poll where a yield would have served better. (Keeping it with a load
/// before each such store read 4-5% slower in one alternated run of 4
/// ranks' sendrecv 8-512 B, within this host's noise; the store stayed
/// plain.)
pub const WORK: u32 = 1 << 30;

/// Set with `PAUSED` by a rank that hands its core over inside a
/// collective's wait: it sends and receives no program's messages until
/// it runs again.
pub const IDLE: u32 = 1 << 29;

/// The CPU part of an `on_cpu` word (1 + the CPU, 0 if unknown), paused
/// or not.
pub fn cpu_of(on_cpu: u32) -> u32 {
    on_cpu & !(PAUSED | WORK | IDLE)
}

/// Whether an `on_cpu` word says its rank runs now.
pub fn runs(on_cpu: u32) -> bool {
    cpu_of(on_cpu) != 0 && on_cpu & PAUSED == 0
}

/// 1 + the CPU the calling thread runs on (0 if the kernel cannot say),
/// as `Segment::on_cpu` holds it.
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).map_or(0, |c| c.saturating_add(1))
}

/// Ring size for a job: the requested size, shrunk so all rings fit the budget.
pub fn ring_bytes_for(nranks: usize, requested: usize) -> usize {
    let per = RING_BUDGET / (nranks * nranks).max(1);
    (requested.min(per).max(16 * 1024) / 4096) * 4096
}

/// Path of a job's segment.
pub fn path_for(job: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/ferrocoll-{job}"))
}

impl Segment {
    /// Creates an anonymous segment for ranks living in this process
    /// (thread-per-rank tests). Nothing is left in the file system.
    pub fn anonymous(nranks: usize, ring_bytes: usize) -> Result<Segment> {
        let ring_bytes = ring_bytes_for(nranks, ring_bytes);
        let lay = layout(nranks, ring_bytes);
        let map = memmap2::MmapOptions::new()
            .len(lay.total)
            .map_anon()
            .map_err(|e| Error::os("mmap anonymous segment", e))?;
        let map: MmapRaw = MmapRaw::from(map);
        let seg = Segment {
            map,
            nranks,
            ring_bytes,
            layout: lay,
            // Every rank is a thread of this process, free to run on any
            // CPU: the barriers may miss it, so wakers fence (a test that
            // wants them binds its threads first, see the tests' `mark`).
            asymmetric: false,
            covered: false,
        };
        seg.init_header();
        // Every rank is this process, whose memory each may read.
        for r in 0..nranks {
            seg.pid(r).store(std::process::id(), Ordering::Release);
        }
        // No rank attaches by name: all are here (`settle` returns at once).
        seg.header()
            .attached
            .store(nranks as u32, Ordering::Release);
        Ok(seg)
    }

    /// Rank `rank` of `nranks` attaches to the job's segment at `path`,
    /// creating it if `rank == 0`, waiting for it otherwise. Bind the
    /// rank first (`bind::bind`): whether the other ranks' barriers reach
    /// it is decided here (`membarrier::reaches_me`).
    pub fn attach(
        path: &Path,
        rank: usize,
        nranks: usize,
        ring_bytes: usize,
        deadline: Duration,
    ) -> Result<Segment> {
        let covered = membarrier::reaches_me();
        Self::attach_covered(path, rank, nranks, ring_bytes, deadline, covered)
    }

    /// `attach` for a rank that the other ranks' barriers reach or not
    /// (`covered`); one that they do not keeps every waker fencing.
    fn attach_covered(
        path: &Path,
        rank: usize,
        nranks: usize,
        ring_bytes: usize,
        deadline: Duration,
        covered: bool,
    ) -> Result<Segment> {
        if nranks > MAX_RANKS {
            return Err(Error::Unsupported(format!(
                "{nranks} ranks on one host (at most {MAX_RANKS})"
            )));
        }
        let ring_bytes = ring_bytes_for(nranks, ring_bytes);
        let lay = layout(nranks, ring_bytes);
        let total = lay.total;
        let file = if rank == 0 {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| Error::os(&format!("create {}", path.display()), e))?;
            f.set_len(total as u64)
                .map_err(|e| Error::os("size shared-memory segment", e))?;
            f
        } else {
            open_when_ready(path, total, deadline)?
        };
        let map = MmapRaw::map_raw(&file).map_err(|e| Error::os("mmap segment", e))?;
        let seg = Segment {
            map,
            nranks,
            ring_bytes,
            layout: lay,
            asymmetric: false,
            covered,
        };
        if rank == 0 {
            seg.init_header();
        } else {
            seg.wait_for_magic(deadline)?;
            let h = seg.header();
            let (n, rb) = (
                h.nranks.load(Ordering::Acquire) as usize,
                h.ring_bytes.load(Ordering::Acquire) as usize,
            );
            if n != nranks || rb != ring_bytes {
                return Err(Error::InvalidArg(format!(
                    "segment {} was made for {n} ranks with {rb}-byte rings, \
                     this rank expects {nranks} and {ring_bytes} (FERROCOLL_SHM_RING_BYTES differs?)",
                    path.display()
                )));
            }
        }
        seg.pid(rank).store(std::process::id(), Ordering::Release);
        if !covered {
            seg.header().fenced.fetch_add(1, Ordering::AcqRel);
        }
        if seg.header().attached.fetch_add(1, Ordering::AcqRel) + 1 == nranks as u32 {
            // Everyone has it mapped: the name is no longer needed.
            let _ = std::fs::remove_file(path);
        }
        Ok(seg)
    }

    /// Waits until all ranks have attached, then chooses how wakers order
    /// their data before a doorbell (`fence_for_wake`). Call before this
    /// rank touches any doorbell.
    ///
    /// A waker's stores and its load of a doorbell's `waiters` must not
    /// pass each other, or a rank that registers and re-checks just then
    /// sleeps on data it cannot see yet. A full fence per publish costs the
    /// round trip of its store (10-17 ns per rooted call at 2 ranks). When
    /// global `membarrier` surely reaches every rank of the segment (each
    /// registered where it is bound, `membarrier::reaches_me`), a rank that
    /// registers as a sleeper runs one instead
    /// (`prepare_sleep`): each waker then passes a full barrier somewhere,
    /// and wherever it falls, either the sleeper sees the data or the waker
    /// sees the sleeper. Every rank decides once all have said whether they
    /// can, so all decide alike.
    pub fn settle(&mut self, deadline: Duration) -> Result<()> {
        let (h, start) = (self.header(), Instant::now());
        while h.attached.load(Ordering::Acquire) < self.nranks as u32 {
            if start.elapsed() > deadline {
                let missing = (0..self.nranks)
                    .filter(|&r| self.pid(r).load(Ordering::Acquire) == 0)
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>();
                return Err(Error::Timeout {
                    secs: deadline.as_secs_f64(),
                    op: "MPI_Init (shared-memory segment)",
                    peers: missing.join(","),
                });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        self.asymmetric = self.covered && h.fenced.load(Ordering::Acquire) == 0;
        crate::param::debug_log(crate::param::DebugLevel::Info, || {
            format!(
                "wakers fence: {} (this rank reached by barriers: {})",
                !self.asymmetric, self.covered
            )
        });
        Ok(())
    }

    /// Orders this rank's published data before its loads of doorbells
    /// (then `Doorbell::ring_fenced`): a full fence unless `settle` chose
    /// barriers run by the sleepers.
    #[inline]
    pub fn fence_for_wake(&self) {
        if self.asymmetric {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// Wakes `rank` if it sleeps, after this rank published something it
    /// may be waiting for.
    #[inline]
    pub fn wake(&self, rank: usize) {
        self.fence_for_wake();
        self.doorbell(rank).ring_fenced();
    }

    /// Registers `rank` (this rank) as a sleeper on its doorbell and
    /// returns `Doorbell::prepare`'s count; re-check for work, then `sleep`
    /// or `cancel_sleep`. None (not registered): the barrier on the wakers
    /// failed, so this rank must not sleep.
    ///
    /// It counts itself among the segment's sleepers first
    /// (`anyone_asleep`), before the fence or barrier that orders its
    /// registration before its re-check, as the doorbell's own count.
    #[cold]
    #[inline(never)]
    pub fn prepare_sleep(&self, rank: usize) -> Option<u32> {
        let bell = self.doorbell(rank);
        self.sleepers().fetch_add(1, Ordering::SeqCst);
        let seen = bell.prepare();
        if self.asymmetric && !membarrier::global() {
            self.cancel_sleep(rank);
            return None;
        }
        Some(seen)
    }

    /// `rank` (this rank), registered by `prepare_sleep`, found work and
    /// does not sleep.
    pub fn cancel_sleep(&self, rank: usize) {
        self.doorbell(rank).cancel();
        self.sleepers().fetch_sub(1, Ordering::SeqCst);
    }

    /// `rank` (this rank), registered by `prepare_sleep` (which returned
    /// `seen`), sleeps until its doorbell rings or `timeout` passes.
    /// Returns whether the doorbell rang (`Doorbell::sleep`).
    pub fn sleep(&self, rank: usize, seen: u32, timeout: Duration) -> bool {
        let rung = self.doorbell(rank).sleep(seen, timeout);
        self.sleepers().fetch_sub(1, Ordering::SeqCst);
        rung
    }

    /// Whether some rank of this segment is registered to sleep
    /// (`prepare_sleep`). A waker that ordered what it published before
    /// this load (as before `Doorbell::ring_fenced`) and finds none needs
    /// to look at no doorbell: a rank registering later re-checks after
    /// its registration and finds the data. One load of a line that only
    /// changes as ranks go to sleep and wake, instead of one doorbell per
    /// peer.
    #[inline]
    pub fn anyone_asleep(&self) -> bool {
        self.sleepers().load(Ordering::Relaxed) != 0
    }

    /// Wakes those of `ranks` that sleep, after this rank published what
    /// they may wait for and ordered it before these loads (a SeqCst
    /// fence, or `fence_for_wake`): `Doorbell::ring_fenced` on each, once
    /// some rank sleeps at all (`anyone_asleep`).
    #[inline]
    pub fn wake_fenced(&self, ranks: impl IntoIterator<Item = usize>) {
        if self.anyone_asleep() {
            for r in ranks {
                self.doorbell(r).ring_fenced();
            }
        }
    }

    fn sleepers(&self) -> &AtomicU32 {
        // SAFETY: the word lies inside the header page, 64-byte aligned,
        // zero-initialised, and used only atomically.
        unsafe { &*(self.base().add(SLEEPERS_OFFSET) as *const AtomicU32) }
    }

    fn init_header(&self) {
        let h = self.header();
        h.nranks.store(self.nranks as u32, Ordering::Relaxed);
        h.ring_bytes
            .store(self.ring_bytes as u32, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
    }

    fn wait_for_magic(&self, deadline: Duration) -> Result<()> {
        let start = Instant::now();
        while self.header().magic.load(Ordering::Acquire) != MAGIC {
            if start.elapsed() > deadline {
                return Err(Error::Timeout {
                    secs: deadline.as_secs_f64(),
                    op: "MPI_Init (segment header)",
                    peers: "0".into(),
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned, and
        // the header holds only atomics.
        unsafe { &*(self.base() as *const Header) }
    }

    fn pid(&self, rank: usize) -> &AtomicU32 {
        assert!(rank < self.nranks);
        // SAFETY: rank < nranks <= MAX_RANKS keeps the slot inside the header
        // page; the slot is an aligned u32 used only atomically.
        unsafe { &*(self.base().add(PIDS_OFFSET + 4 * rank) as *const AtomicU32) }
    }

    /// Number of ranks the segment serves.
    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// Records `pid` as `rank`'s process (tests: a peer whose process is
    /// gone).
    #[cfg(test)]
    pub fn set_pid(&self, rank: usize, pid: u32) {
        self.pid(rank).store(pid, Ordering::Release);
    }

    /// Process id of `rank`, or 0 if it has not attached yet.
    pub fn pid_of(&self, rank: usize) -> u32 {
        self.pid(rank).load(Ordering::Acquire)
    }

    /// How many ranks have attached so far.
    pub fn attached(&self) -> usize {
        self.header().attached.load(Ordering::Acquire) as usize
    }

    /// The doorbell of `rank`.
    pub fn doorbell(&self, rank: usize) -> &Doorbell {
        assert!(rank < self.nranks);
        let bells = self.layout.bells;
        // SAFETY: doorbells are 64-byte aligned slots inside the mapping, made
        // only of atomics.
        unsafe { &*(self.base().add(bells + 64 * rank) as *const Doorbell) }
    }

    /// Where `rank` runs: 1 + the CPU it last found itself on (0 before it
    /// knows), with `PAUSED` set while it has handed its core over inside
    /// a wait (a yield or a sleep). A rank preempted by the kernel still
    /// reads as running, so a waiter trusts it only for a bounded time.
    /// Each rank's word has a line of its own: it changes at every
    /// hand-over, and waiters poll it.
    pub fn on_cpu(&self, rank: usize) -> &AtomicU32 {
        assert!(rank < self.nranks);
        let cpus = self.layout.cpus;
        // SAFETY: the word is 64-byte aligned inside the mapping (see
        // `layout`), zero-initialised, and used only atomically.
        unsafe { &*(self.base().add(cpus + 64 * rank) as *const AtomicU32) }
    }

    /// `rank`'s time on its core, on a line of its own: the clock units
    /// (`comm::slice::stamp`) of its turns so far (high half, wrapping)
    /// and when its current turn began (low half, never 0), or 0 while it
    /// has handed its core over. A rank that yielded tells from it how
    /// long the ranks of its CPU ran meanwhile (`comm::slice`). Apart from
    /// the `on_cpu` word, which ranks of other CPUs poll: the ranks of its
    /// own CPU read it.
    pub fn turn(&self, rank: usize) -> &AtomicU64 {
        assert!(rank < self.nranks);
        let turns = self.layout.turns;
        // SAFETY: the word is 64-byte aligned inside the mapping (see
        // `layout`), zero-initialised, and used only atomically.
        unsafe { &*(self.base().add(turns + 64 * rank) as *const AtomicU64) }
    }

    /// How many stream barriers `rank` has reached (NCCL calls ordered on
    /// their CUDA streams by host functions, `ffi::nccl::stream_barrier`),
    /// wrapping. A line of its own: the driver's threads poll it.
    pub fn barrier_word(&self, rank: usize) -> &AtomicU32 {
        assert!(rank < self.nranks);
        let at = self.layout.barriers;
        // SAFETY: the word is 64-byte aligned inside the mapping (see
        // `layout`), zero-initialised, and used only atomically.
        unsafe { &*(self.base().add(at + 64 * rank) as *const AtomicU32) }
    }

    /// Collective slot area `area` of `rank`.
    pub fn area(&self, rank: usize, area: usize) -> Area {
        assert!(rank < self.nranks && area < AREAS);
        let slots = self.layout.slots;
        // SAFETY: the area lies inside the mapping (see `layout`), is 64-byte
        // aligned (AREA_BYTES is a multiple of 64), zero-initialised, and
        // lives as long as the mapping.
        unsafe { Area::from_raw(self.base().add(slots + (rank * AREAS + area) * AREA_BYTES)) }
    }

    /// The ring carrying bytes from `src` to `dst`.
    pub fn ring(&self, src: usize, dst: usize) -> Ring {
        assert!(src < self.nranks && dst < self.nranks);
        let rings = self.layout.rings;
        let off = rings + (dst * self.nranks + src) * (CTRL_BYTES + self.ring_bytes);
        // SAFETY: the offset lies inside the mapping (see `layout`), the ring
        // memory is zero-initialised by ftruncate/anonymous mapping, and only
        // `src` writes to it and only `dst` reads from it.
        unsafe { Ring::from_raw(self.base().add(off), self.ring_bytes) }
    }

    /// Marks the job as aborted by `rank` and wakes every rank.
    pub fn set_abort(&self, rank: usize, code: i32) {
        let h = self.header();
        h.abort_code.store(code, Ordering::Release);
        let _ =
            h.abort_rank
                .compare_exchange(0, rank as u32 + 1, Ordering::AcqRel, Ordering::Acquire);
        for r in 0..self.nranks {
            self.doorbell(r).ring();
        }
    }

    /// Records that world rank `rank` died while the job still needed it
    /// (the first such rank stays) and wakes every rank. Returns the rank
    /// recorded: `rank`, or the one another rank recorded first, which the
    /// error should name (a peer may have quit because of that one).
    pub fn set_dead(&self, rank: usize) -> usize {
        let h = self.header();
        let first = match h.dead_rank.compare_exchange(
            0,
            rank as u32 + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => rank,
            Err(r) => r as usize - 1,
        };
        for r in 0..self.nranks {
            self.doorbell(r).ring();
        }
        first
    }

    /// The world rank recorded by `set_dead`, if any.
    pub fn dead(&self) -> Option<usize> {
        match self.header().dead_rank.load(Ordering::Acquire) {
            0 => None,
            r => Some(r as usize - 1),
        }
    }

    /// The (rank, code) that aborted the job, if any.
    pub fn aborted(&self) -> Option<(usize, i32)> {
        let h = self.header();
        match h.abort_rank.load(Ordering::Acquire) {
            0 => None,
            r => Some((r as usize - 1, h.abort_code.load(Ordering::Acquire))),
        }
    }
}

fn open_when_ready(path: &Path, total: usize, deadline: Duration) -> Result<File> {
    let start = Instant::now();
    loop {
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => {
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                if len as usize >= total {
                    return Ok(f);
                }
                if len != 0 {
                    return Err(Error::InvalidArg(format!(
                        "segment {} has {len} bytes, expected {total}",
                        path.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::os(&format!("open {}", path.display()), e)),
        }
        if start.elapsed() > deadline {
            return Err(Error::Timeout {
                secs: deadline.as_secs_f64(),
                op: "MPI_Init (waiting for rank 0's segment)",
                peers: "0".into(),
            });
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// True if a process with this pid exists (signal 0 probe).
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::bind;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// Two threads hand a count back and forth and sleep on their
    /// doorbells for it, after a spin of varying length so that a sleeper
    /// often registers just as its peer publishes. Both ways of ordering
    /// wakes: barriers run by sleepers, fences run by wakers; and both ways
    /// of waking: the doorbell looked at always (`wake`), or only where the
    /// segment counts a sleeper (`wake_fenced`, as `coll::slots` rings).
    #[test]
    fn wakes_are_never_lost() {
        for asymmetric in [true, false] {
            for hinted in [false, true] {
                let mut seg = Segment::anonymous(2, 16384).unwrap();
                // The threads below make the barriers reach them (`mark`).
                seg.asymmetric = asymmetric && membarrier::register_global();
                hand_over(Arc::new(seg), hinted);
            }
        }
    }

    /// Binds the calling thread to the `nth` CPU it may use (modulo), and
    /// has another process run there, so that the kernel marks that CPU
    /// for this process's barriers as it switches back to this thread
    /// (`membarrier::reaches_me`): the test process registered long before,
    /// from wherever a thread of it then ran.
    fn mark(nth: usize) {
        let cpus = bind::allowed_cpus().unwrap();
        assert!(bind::pin(cpus[nth % cpus.len()]));
        let ran = std::process::Command::new("true").status();
        assert!(
            matches!(&ran, Ok(s) if s.success()),
            "running `true`: {ran:?}"
        );
    }

    #[test]
    fn sleepers_are_counted_until_they_wake_or_cancel() {
        let seg = Segment::anonymous(2, 16384).unwrap();
        assert!(!seg.anyone_asleep());
        let Some(_) = seg.prepare_sleep(0) else {
            return; // no barrier on the wakers here: nobody may sleep
        };
        assert!(seg.anyone_asleep());
        seg.cancel_sleep(0);
        assert!(!seg.anyone_asleep());
        let seen = seg.prepare_sleep(1).unwrap();
        assert!(seg.anyone_asleep());
        seg.sleep(1, seen, Duration::from_millis(1));
        assert!(!seg.anyone_asleep());
    }

    /// What `hand_over` saw: the longest time a count lay published while
    /// its peer slept on without being rung (a lost wake-up), and the
    /// longest sleep (which a host that stops a thread's virtual CPU for a
    /// while also lengthens, wake-ups or not).
    #[derive(Clone, Copy, Default)]
    struct Seen {
        unrung: Duration,
        slowest: Duration,
    }

    /// Publishes and hands the count over `steps` times each way. A sleep
    /// that ends without a ring while the count it waits for has been
    /// published for over a second is a lost wake-up: the waker saw no
    /// sleeper. A sleep that only lasts long (its peer had not run) is not.
    fn hand_over(seg: Arc<Segment>, hinted: bool) {
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        // When each thread last published, in ns from `epoch`.
        let published = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let epoch = Instant::now();
        let steps: u64 = if cfg!(miri) { 30 } else { 30_000 };
        // Steps the threads take: thread 0 lowers it past `LIMIT` (once a
        // host that kept the other thread off its CPU made 30 000 steps
        // under qemu take 18 minutes), before it publishes the last step's
        // count, so thread 1 sees it once that count arrives.
        let last = Arc::new(AtomicU64::new(steps));
        const LIMIT: Duration = Duration::from_secs(30);
        const SPIN: u32 = 16;
        let run = |me: usize| {
            let (seg, counts, published) = (seg.clone(), counts.clone(), published.clone());
            let last = last.clone();
            move || {
                if seg.asymmetric {
                    mark(me);
                }
                let mut seen = Seen::default();
                for i in 0..steps {
                    if i >= last.load(Ordering::Acquire) {
                        break;
                    }
                    let want = if me == 0 { i } else { i + 1 };
                    // Spin 0-15 rounds (a different length each step), about
                    // as long as a hand-over takes.
                    let spin = (i.wrapping_mul(0x9E37_79B9) >> 7) as u32 % SPIN;
                    let mut spun = 0;
                    while counts[1 - me].load(Ordering::Acquire) < want {
                        if spun < spin {
                            spun += 1;
                            std::hint::spin_loop();
                            continue;
                        }
                        let Some(bell) = seg.prepare_sleep(me) else {
                            std::thread::yield_now();
                            continue;
                        };
                        if counts[1 - me].load(Ordering::Acquire) >= want {
                            seg.cancel_sleep(me);
                            break;
                        }
                        let t = Instant::now();
                        let rung = seg.sleep(me, bell, Duration::from_secs(2));
                        let now = epoch.elapsed();
                        seen.slowest = seen.slowest.max(t.elapsed());
                        // The peer publishes at most once before this
                        // thread does, so its time is that of `want`.
                        if !rung && counts[1 - me].load(Ordering::Acquire) >= want {
                            let at =
                                Duration::from_nanos(published[1 - me].load(Ordering::Relaxed));
                            seen.unrung = seen.unrung.max(now.saturating_sub(at));
                        }
                    }
                    if me == 0 && epoch.elapsed() > LIMIT {
                        last.store(i + 1, Ordering::Relaxed);
                    }
                    published[me].store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    counts[me].store(i + 1, Ordering::Release);
                    if !hinted {
                        seg.wake(1 - me);
                    } else {
                        seg.fence_for_wake();
                        seg.wake_fenced([1 - me]);
                    }
                }
                seen
            }
        };
        // Both on threads of their own: `mark` binds them.
        let (t0, t1) = (std::thread::spawn(run(0)), std::thread::spawn(run(1)));
        let (a, b) = (t0.join().unwrap(), t1.join().unwrap());
        let (unrung, slowest) = (a.unrung.max(b.unrung), a.slowest.max(b.slowest));
        let how = format!("asymmetric: {}, hinted: {hinted}", seg.asymmetric);
        let took = last.load(Ordering::Relaxed);
        if took < steps {
            eprintln!("note: {took} of {steps} steps in {LIMIT:?}, the rest skipped ({how})");
        }
        assert!(
            unrung < Duration::from_secs(1),
            "a wake-up was lost (a count lay published for {unrung:?} while its peer slept \
             unrung; {how})"
        );
        if slowest >= Duration::from_secs(1) {
            // Not a lost wake-up (that would have failed above): the peer
            // did not run for that long.
            eprintln!("note: a sleep lasted {slowest:?} with no wake-up lost ({how})");
        }
    }

    #[test]
    fn attach_unlinks_after_last_rank() {
        let path = path_for(&format!("unit-{}-{}", std::process::id(), line!()));
        let _ = std::fs::remove_file(&path);
        let p2 = path.clone();
        let t = std::thread::spawn(move || {
            Segment::attach(&p2, 1, 2, 8192, Duration::from_secs(10)).map(|_| ())
        });
        let s0 = Segment::attach(&path, 0, 2, 8192, Duration::from_secs(10)).unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(s0.attached(), 2);
        assert!(!path.exists());
        assert_eq!(s0.pid_of(0), std::process::id());
        s0.set_abort(1, 7);
        assert_eq!(s0.aborted(), Some((1, 7)));
        assert_eq!(s0.dead(), None);
        assert_eq!(s0.set_dead(1), 1);
        assert_eq!(s0.set_dead(0), 1, "the later finder names the first");
        assert_eq!(s0.dead(), Some(1), "the first death recorded stays");
    }

    #[test]
    fn settle_waits_for_every_rank() {
        // Thread-per-rank (and 1-rank) segments have every rank at once.
        let mut a = Segment::anonymous(3, 16384).unwrap();
        a.settle(Duration::ZERO).unwrap();
        assert!(!a.asymmetric, "threads of one process: wakers fence");
        // Second round: a rank that the barriers do not reach.
        for unable in [false, true] {
            let path = path_for(&format!("unit-{}-{}-{unable}", std::process::id(), line!()));
            let _ = std::fs::remove_file(&path);
            let wait = Duration::from_secs(10);
            let mut s0 = Segment::attach_covered(&path, 0, 2, 8192, wait, true).unwrap();
            let e = s0
                .settle(Duration::from_millis(50))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("shared-memory segment") && e.contains('1'),
                "{e}"
            );
            assert!(!s0.asymmetric, "undecided: wakers fence");
            let p2 = path.clone();
            let t = std::thread::spawn(move || {
                let mut s1 = Segment::attach_covered(&p2, 1, 2, 8192, wait, !unable)?;
                s1.settle(wait)?;
                Ok::<bool, Error>(s1.asymmetric)
            });
            s0.settle(wait).unwrap();
            let a1 = t.join().unwrap().unwrap();
            assert_eq!(s0.asymmetric, !unable);
            assert_eq!(a1, s0.asymmetric, "every rank decides alike");
        }
    }

    #[test]
    fn wrong_ring_size_is_reported() {
        let path = path_for(&format!("unit-{}-{}", std::process::id(), line!()));
        let _ = std::fs::remove_file(&path);
        let _s0 = Segment::attach(&path, 0, 2, 16384, Duration::from_secs(10)).unwrap();
        let e = Segment::attach(&path, 1, 2, 65536, Duration::from_secs(2));
        assert!(e.is_err());
        let _ = std::fs::remove_file(&path);
    }
}
