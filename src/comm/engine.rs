//! The per-process message engine: posts sends and receives on per-peer
//! links, matches arriving messages to posted receives (MPI order: per
//! sender, in posting order; unmatched messages are buffered), and waits with
//! spin, then yield, then futex sleep, noticing dead peers and deadlines.

use super::buffer::RawBuf;
use super::slice;
use crate::bootstrap::bind;
use crate::copy::message_uncached_from;
use crate::error::{Error, Result};
use crate::param;
use crate::param::params;
use crate::transport::frame::{Frame, FrameKind, AUX_MAX, FRAME_BYTES};
use crate::transport::shm::cma;
use crate::transport::shm::far::{Watch, TIMED_FROM};
use crate::transport::shm::ring::CHUNK as RING_CHUNK;
use crate::transport::shm::segment::{cpu_of, current_cpu, pid_alive, runs, IDLE, PAUSED, WORK};
use crate::transport::shm::slots::AREAS;
use crate::transport::shm::Segment;
use crate::transport::tcp::link::TcpLinks;
use crate::transport::Link;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Handle of a pending operation inside one engine.
pub type ReqId = usize;

/// What a completed operation reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// World rank of the sender (receives), or of the destination (sends).
    pub source: usize,
    /// Tag of the matched message.
    pub tag: i32,
    /// Bytes delivered into the receive buffer.
    pub bytes: usize,
    /// Set when the message did not fit (`Error::Truncated`). Boxed: a
    /// status moves by value through every completion, and the error is
    /// rare (32 bytes instead of 72; 2 ranks, Irecv + Isend + Waitall 8 B,
    /// alternated, us: 0.359-0.385 / 0.350-0.359).
    pub error: Option<Box<Error>>,
}

/// Envelope of a message found by probing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// World rank of the sender.
    pub source: usize,
    /// Its tag.
    pub tag: i32,
    /// Its length in bytes.
    pub bytes: usize,
}

/// `irecv_parts`'s source for any.
const ANY_SOURCE: usize = usize::MAX;

/// `irecv_parts`'s tag for any (outside `i32`).
const ANY_TAG: i64 = i64::MIN;

/// Which messages a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// World rank of the sender, or any.
    pub source: Option<usize>,
    /// Communicator context.
    pub ctx: u32,
    /// Tag, or any.
    pub tag: Option<i32>,
}

impl Match {
    fn accepts(&self, src: usize, f: &Frame) -> bool {
        f.ctx == self.ctx
            && self.source.is_none_or(|s| s == src)
            && self.tag.is_none_or(|t| t == f.tag)
    }
}

/// Where a send stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Header and data go out together.
    Eager,
    /// Announcing a large message (`Rts`).
    Announce,
    /// Announced; waiting for the receiver's `Cts`.
    AwaitCts,
    /// Sending the data the receiver asked for.
    Data,
}

enum Kind {
    Send {
        dst: usize,
        hdr: [u8; FRAME_BYTES],
        off: usize,
        buf: RawBuf,
        phase: Phase,
    },
    Recv {
        m: Match,
        buf: RawBuf,
        /// The announced message this receive asked for and the world
        /// rank asked, until its data arrives.
        incoming: Option<(usize, Frame)>,
    },
}

/// A receiver's place for the data of an announced message, as carried by
/// `Cts` and `Data` frames: a receive, or (top bit) a buffered message.
fn place_token(t: &Target) -> u64 {
    match *t {
        Target::Req(id) => id as u64,
        Target::Unexpected(uid) => uid | 1 << 63,
    }
}

fn place_of(token: u64) -> Target {
    if token >> 63 == 1 {
        Target::Unexpected(token & !(1 << 63))
    } else {
        Target::Req(token as usize)
    }
}

struct Req {
    kind: Kind,
    done: bool,
    status: Status,
    /// `MPI_Request_free` was called: drop it silently when it completes.
    detached: bool,
}

enum Target {
    Req(ReqId),
    Unexpected(u64),
}

enum Rx {
    Header {
        got: usize,
        hdr: [u8; FRAME_BYTES],
    },
    Body {
        frame: Frame,
        target: Target,
        off: usize,
    },
}

struct Unexpected {
    id: u64,
    src: usize,
    frame: Frame,
    data: Vec<u8>,
    complete: bool,
    claimed: Option<ReqId>,
    /// An announced message whose data has not been asked for: the
    /// sender's token.
    announced: Option<u64>,
    /// Its data was asked for and has not started to arrive.
    asked: bool,
    /// Announced by a `Pull`: its data may be read from the sender's memory.
    pull: bool,
}

/// One write of message data to `link` by `write(link, max, uncached)`,
/// which takes at most `max` bytes of a `body`-byte message and returns the
/// bytes it took. In shared memory, bodies from `TIMED_FROM` bytes follow
/// the rank's far watch (`transport::shm::far`), as streamed collectives
/// do: past the cache while the host's cores sit far apart, else cached and
/// timed; a cached write while far is a probe. `write` returns the bytes
/// it wrote, header included, so that the watch can time them: a 16 KiB
/// write took 0.7-1.3 us here in the usual state and 6.3-7.1 far (p10-p90),
/// a 64 KiB one 2.0-3.3 and 24-28.
/// With the cores far apart, 2 ranks, 3 runs each, us, `FERROCOLL_FAR=off`
/// / auto (Open MPI): pingpong 1 MiB 419-466 / 72-84 (81-88), 16 MiB
/// 6535-6974 / 1045-1288 (2552-3261); sendrecv 16 KiB 9.2-9.3 / 3.2-3.4
/// (4.9-5.5), 4 MiB 2581-3298 / 481-583 (339-354), 16 MiB 13794-14324 /
/// 1880-2114 (2856-3015). In the usual state alike: pingpong 1 MiB 34.0 /
/// 35.0-35.2, 16 MiB 1535-1539 / 1513-1552. Uncached writes there would
/// cost twice as much up to 4 MiB (the reader then reads from memory):
/// pingpong 1 MiB 77-78. Eager messages (`send_now`) once told the watch
/// they wrote 1 byte, so it never timed them: far, pingpong 16 KiB took
/// 8.7-10.3 us then and 3.0-4.0 since (off 9.1-10.0, Open MPI 3.1-3.7).
fn write_watched(
    far: &mut Watch,
    link: &mut Link,
    body: usize,
    write: impl FnOnce(&mut Link, usize, bool) -> usize,
) -> usize {
    if body < TIMED_FROM || !link.is_shm() {
        return write(link, usize::MAX, false);
    }
    let plan = far.plan(params().far);
    if !plan.timed {
        return write(link, usize::MAX, plan.uncached);
    }
    // One ring chunk per timed write: a chunk tells the state, so a probe
    // while far costs no more than one, and a wrong reading no more than
    // three (timing writes of up to the whole ring, 1 MiB, a probe that
    // read fast in the far state cost three slow 1 MiB writes: 16 MiB
    // messages then took 1.2-8.7 ms there, now 1.0-2.1).
    let t = Instant::now();
    let n = write(link, RING_CHUNK, false);
    far.record("messages", n, t.elapsed());
    n
}

/// How often a wait looks at the health of the peers it needs
/// (`Engine::check_health`): whether one died, the job was aborted, the
/// wait was cancelled or timed out.
const HEALTH_EVERY: Duration = Duration::from_millis(50);
/// A wait whose rounds keep moving something reads the clock once in this
/// many of them, for `HEALTH_EVERY`.
const MOVES_PER_LOOK: u32 = 8;
/// `Engine::check_reader` reads the clock once in this many writes that
/// found their peer behind, and looks for the peer's process at most once
/// in `READER_CHECK`.
const READER_WRITES: u32 = 64;
const READER_CHECK: Duration = HEALTH_EVERY;
/// A yield shorter than this found nothing else to run on the core.
const YIELD_ALONE: Duration = Duration::from_micros(2);
/// How long a waiter whose yields come straight back keeps polling before it
/// sleeps: its peer runs on another core and will be done soon, and a sleep
/// costs a wake-up system call on each side. With ranks outnumbering cores
/// a waiter spins only 16 times, so before this a 4-rank pingpong (two
/// ranks idle) slept at every full or empty ring: the two busy ranks ran
/// at 54% CPU each, and 32 MiB took 6.6-9.2 ms against 2.4 ms at 2 ranks.
const ALONE_POLL: Duration = Duration::from_micros(100);
/// How long a wait for one peer keeps polling, with ranks outnumbering
/// cores, while that peer reads as running on another core; a peer last
/// seen on this rank's own core is not running, so a wait for it yields at
/// once. Before, a short spin then a yield handed the core over also while
/// the awaited peer was about to publish, and the rank that came in
/// mostly found nothing to do and yielded back: 4 ranks on 2 cores, 16 B
/// allreduce, 0.55-0.73 core switches per rank and call, 0.51 now (one a
/// core and call is the floor). Alternated runs, medians of 3, us,
/// before/after (Open MPI): allreduce 16 B 2.52/2.29 (5.44), barrier
/// 2.24/2.10 (3.71), alltoall 16 B 2.63/2.43 (3.44), allgather 256 B
/// 2.65/2.38 (4.64), reduce_scatter 4 KiB 3.77/3.10 (8.93); rooted calls
/// equal. 1, 2.5, 5, 10 and 30 us read alike.
const RUN_POLL: Duration = Duration::from_micros(5);

/// How long into a wait for one peer in a latency-bound call
/// (`Awaited::Peer`) it may still poll while that peer runs (`RUN_POLL`).
/// Each yield began a new stretch of polling, so such a wait whose peer
/// kept running on another core without publishing (a broadcast's root
/// busy with messages to another rank) never came to sleep: it polled 5
/// us, yielded, and polled again, taking its core from a mate with work.
/// 4 ranks on 2 cores, pingpong between ranks 0 and 1 while 2 and 3 wait
/// for a broadcast from 0: rank 3 switched 33 000 times a second with rank
/// 1, and with this bound sleeps (50 switches a second). Waits on messages
/// keep polling as long as their peers run: there a bound of 100 us made
/// a 4-rank halo of 2 MiB 16-23% slower (far).
const RUN_POLL_WITHIN: Duration = Duration::from_micros(100);

/// Yields `Engine::wait_for_mate` makes before it waits as other waits
/// do: a rank on this core that computes keeps it for a time slice, and
/// one that is asleep will not come back by being yielded to.
const MATE_YIELDS: u32 = 16;

/// Distinct peers a wait for several requests keeps on the stack; more
/// go to a `Vec`.
const FEW_PEERS: usize = 8;

/// The peers whose running a wait watches where ranks outnumber cores
/// (`Engine::wait_inner`). Once one of them is off the cores (paused, or
/// last seen on this rank's own core) polling cannot end the wait: it
/// skips its spin and hands its core over. While every one of them runs
/// on another core it polls on, for up to `RUN_POLL`, instead of yielding.
///
/// Waits on several requests (`MPI_Waitall` of a halo exchange) had
/// watched nobody: they spun, then yielded whatever their peers did. 4
/// ranks on 2 cores, halo (two `MPI_Irecv` and two `MPI_Isend`, one
/// `MPI_Waitall`), 10 rounds alternated, medians, us, before / after (Open
/// MPI): 8 B 4.57 / 3.22 (3.16), 128 B 4.27 / 3.37 (3.19), 2 KiB 6.72 /
/// 4.64 (5.92), 32 KiB 17.6 / 15.4 (22.5), 512 KiB 162 / 154 (230);
/// sendrecv (one request at small sizes) 1.42-2.00 / 1.49-1.97 at 8 B -
/// 2 KiB, 70 / 68 at 512 KiB. Polling while any one of them ran, and
/// spinning unless all were off the cores, read the same.
#[derive(Clone, Copy)]
enum Awaited<'a> {
    /// None: spin, then hand the core over.
    Nobody,
    /// One world rank (`Engine::wait_for_running`, a single request).
    Peer(usize),
    /// The peers of those of these requests that are still pending.
    Requests(&'a [ReqId]),
    /// As `Requests`, where one of them moves a message from the
    /// rendezvous size up (`Engine::bulky`): polled for only while no other
    /// rank of this core has work marked (`Engine::mate_has_work`).
    Copying(&'a [ReqId]),
}

/// One rank's engine: its links to every world rank and all pending work.
pub struct Engine {
    me: usize,
    links: Vec<Link>,
    seg: Option<Arc<Segment>>,
    /// Each world rank's index in `seg` (None: on another host).
    on_seg: Vec<Option<usize>>,
    sendq: Vec<VecDeque<ReqId>>,
    rx: Vec<Rx>,
    posted: Vec<ReqId>,
    unexpected: VecDeque<Unexpected>,
    next_unexpected: u64,
    reqs: Vec<Option<Req>>,
    free: Vec<ReqId>,
    spin: u32,
    /// `spin` for the waits of collectives on the slots (`wait_for`).
    slot_spin: u32,
    /// Ranks outnumber this machine's cores and share its segment: a wait
    /// for one peer looks where that peer runs before it hands the core
    /// over (`Segment::on_cpu`).
    informed: bool,
    /// Ranks outnumber this machine's cores (`set_machine_ranks`).
    crowded: bool,
    /// This rank's time on its core, kept where the slice watch looks.
    turn: Turn,
    /// Whether other processes compete for this rank's core, and the
    /// slices it asks for meanwhile (`comm::slice`).
    slice: crate::comm::slice::Watch,
    /// The ranks last seen on this rank's CPU, for `yield_core`.
    mates: Mates,
    /// 1 + the CPU this rank last found itself on (`current_cpu`).
    cpu: u32,
    /// Set after a fatal failure: pending work was dropped, the links are in
    /// an unknown state, and every later operation fails.
    broken: Option<Error>,
    /// Next context id this process may hand out (see `Comm::dup`).
    pub next_ctx_id: u32,
    /// Forced algorithms (collective, algorithm), from `FERROCOLL_ALGO`.
    pub algo: Vec<(String, String)>,
    /// Collective slot areas of this rank no communicator holds (bit i =
    /// area i); area 0 belongs to the world.
    pub areas_free: u64,
    /// Areas of freed communicators, free again once every member has
    /// finished reading them: (area, members' world ranks, last call).
    pub draining: Vec<(usize, Arc<[usize]>, u64)>,
    /// Highest slot call number this rank has used on any area.
    pub slot_epoch: u64,
    /// This rank's part in telling whether the host's cores sit far apart
    /// (`transport::shm::far`).
    pub far: Watch,
    /// Buffers of delivered unexpected messages, for reuse.
    spare: Vec<Vec<u8>>,
    /// Empty buffers of `SMALL_CAP` bytes for small unexpected messages.
    small: Vec<Vec<u8>>,
    /// Messages to other ranks of at least this many bytes wait until the
    /// receiver asks for them, so they land in the posted receive buffer
    /// instead of being buffered and copied again.
    pub rndv_min: usize,
    /// The TCP progress thread, when some links are TCP (stopped on drop).
    tcp: Option<TcpLinks>,
    /// Set from another thread to make waits give up (`ncclCommAbort`).
    cancel: Option<Arc<AtomicBool>>,
    /// Each world rank's host, numbered from 0 in order of first rank.
    hosts: Vec<u32>,
    /// Whether `hosts` names more than one host (asked on every call).
    multi_host: bool,
    /// Announced messages over shared memory go by `Pull`, read from the
    /// sender's memory (`FERROCOLL_CMA`); off once the kernel refused a
    /// read here, so this rank asks for the data instead.
    cma: bool,
    /// Where `cma` holds, a busy sender's messages go by `Pull` too
    /// (`busy_sender_reads`, `FERROCOLL_CMA_BUSY`).
    read_busy: bool,
    /// Writes that found their peer holding every post of the link
    /// (`Link::backlogged`), and when such a peer's process was last looked
    /// for (`check_reader`).
    backlogged: u32,
    reader_checked: Option<Instant>,
}

/// Unexpected-message buffers kept for reuse: sizes and count. A sender
/// may run a ring's worth ahead (1 MiB: 21 messages of 48 KiB), and each
/// buffer the pool could not keep was allocated afresh, its pages faulted
/// in and zeroed, for the next such message: 4 ranks on 2 cores, three
/// senders to one receiver, us per round, 8 / 64 kept: 32 KiB 19.9-25.1 /
/// 17.8-18.5, 48 KiB 34.9-39.3 / 25.4-25.6 (Open MPI 16.5, 19.8); the
/// total idle stays bounded by `SPARE_TOTAL`.
const SPARE_MIN: usize = 16 * 1024;
const SPARE_MAX: usize = 64 << 20;
const SPARE_COUNT: usize = 64;
/// At most this many bytes sit idle in the pool.
const SPARE_TOTAL: usize = 96 << 20;
/// Initialised bytes of a pooled buffer that `scratch_for` may cut off
/// for a smaller need (or as many as the need, if more), rather than
/// allocate afresh.
const CUT_MAX: usize = 256 * 1024;
/// Unexpected messages up to this many bytes are buffered in pooled
/// buffers of this capacity (`Engine::small`, at most `SMALL_COUNT` idle),
/// not in fresh allocations: in a halo exchange where ranks outnumber
/// cores, a neighbour that runs ahead sends before the receive is posted,
/// and each such message cost a `malloc` and a `free`.
const SMALL_CAP: usize = 1024;
/// Most idle buffers `Engine::small` keeps.
const SMALL_COUNT: usize = 32;
/// A buffered message's buffer starts at most this large and then grows
/// with the bytes that arrive (at most doubling), so no allocation is
/// sized by a length a peer merely announced.
const BUFFER_AHEAD: usize = 4 << 20;

/// Messages from this size are announced and wait for their receive, which
/// then reads them from the sender's memory (`FrameKind::Pull`) where the
/// two may not wait for each other's turn on a core. Below it they go
/// through the ring: two copies, but the reader's comes from lines the
/// writer has just handed over, and the sender's buffer stays in its own
/// core. A program that writes what it sends (`bench/mpibench.c -t`;
/// NetPIPE) leaves its buffer's lines modified in its core, and a read in
/// place then fetches each from there, and the next write takes each back.
/// Alternated 2-rank runs with `-t`, medians of 3, us, pulled from 8 KiB /
/// from 64 KiB / from 256 KiB (Open MPI, MPICH): pingpong 8 KiB 3.41 /
/// 2.14 / 2.13 (3.50, 2.03), 16 KiB 5.21 / 3.62 / 3.66 (5.22, 5.39), 32 KiB
/// 9.11 / 6.32 / 6.39 (8.83, 8.47), 64 KiB 15.7 / 15.4 / 12.2 (15.2,
/// 15.1), 128 KiB 22.2 / 23.2 / 22.0 (22.0, 21.6); sendrecv 8 KiB 4.48 /
/// 2.29 / 2.37 (5.30, 2.16), 32 KiB 11.8 / 6.96 / 7.51, 64 KiB 20.8 / 21.5
/// / 14.4 (21.4, 21.5), 128 KiB 34.0 / 35.0 / 27.4 (36.2, 36.1); halo 8
/// KiB 6.60 / 4.01 / 3.93 (7.09, 4.18), 32 KiB 14.8 / 13.4 / 13.6, 64 KiB
/// 25.1 / 25.5 / 25.6, 128 KiB 43.9 / 45.4 / 50.0. NetPIPE (`NPmpich2`,
/// which sends from the buffer it received into) read 8 KiB at 3.0-3.4 us
/// pulled and 2.1 through the ring (MPICH 2.0), 16 KiB 4.6 and 3.5 (5.3).
/// A buffer that never changes reads faster pulled, since the reader's
/// core keeps its lines from the last call: without `-t`, pingpong 16 KiB
/// 1.89 pulled, 3.72 through the ring (Open MPI 2.44), 64 KiB 4.43 and
/// 11.0 (4.92).
const PULL_RNDV: usize = 128 * 1024;
/// `PULL_RNDV` where ranks outnumber cores, for a collective's messages:
/// eager from 32 to 128 KiB, a gatherv's senders filled the root's rings
/// while it copied out of one at a time. 4 ranks on 2 cores, near (3
/// rounds), medians, us, by the smallest block (blocks of 1-1.25 times
/// it), announced from 32 KiB / from 128 KiB: `MPI_Gatherv` 64 KiB 17.6 /
/// 32.7, 100000 B 24.3 / 57.8, `MPI_Alltoallv` 64 KiB 41.7 / 38.3. (A
/// program's messages stream from `PULL_RNDV` there, `Engine::announces`;
/// a paired one from `CROWDED_PAIRED_RNDV`.)
const CROWDED_PULL_RNDV: usize = 32 * 1024;
/// Reads of at least this many bytes (about 90 us) may move to an idle
/// core first (`Engine::borrow_idle_core`). From 256 KiB, those of 256 KiB
/// lost: 4 ranks on 2 cores, medians of 8, us, staying / moving: sendrecv
/// 25.3 / 37.0, halo 54.3 / 110.
const BORROW_FROM: usize = 1 << 20;

/// Reads `[from, to)` of a message at `addr` of process `pid` into the same
/// range of `buf`.
fn read_part(
    pid: u32,
    addr: u64,
    buf: RawBuf,
    from: usize,
    to: usize,
) -> std::result::Result<(), cma::Refused> {
    let mut res = Ok(());
    buf.fill_at(from, to - from, |d| {
        res = cma::read(pid, addr.wrapping_add(from as u64), d);
        d.len()
    });
    res
}

/// How a send chooses between leaving eagerly and waiting for its receive.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// By its size (`Engine::rndv_min`), and once announced streamed
    /// through the ring (`reads_in_place`): a collective's messages.
    Plain,
    /// A program's own send (`MPI_Send`, `MPI_Isend` and the like): as
    /// `Plain`, but announced from the size of ranks with cores of their
    /// own (`rndv_default`) also where ranks outnumber cores.
    Program,
    /// Its caller waits for a receive in the same call (`MPI_Sendrecv`):
    /// where ranks outnumber cores it leaves eagerly below
    /// `CROWDED_PAIRED_RNDV` (unless every other rank of the host waits in
    /// a collective, `Engine::lone_pair`); elsewhere as `Program`.
    Paired,
    /// Announced whatever its size over shared memory, and read in place
    /// where reads work (`reads_in_place`): a root sending to several ranks
    /// (`Ctx::send_announced`).
    Rooted,
    /// A root's message to its one receiver, which has a core of its own
    /// (`coll::slots::scatter_kind`): eager below `LONE_EAGER`, else
    /// through the ring's rendezvous.
    Lone,
    /// A collective's message that its receiver folds piece by piece as it
    /// lands (`Engine::exchange_folding`): as `Plain`, but never read in
    /// place by a busy sender's rule (`busy_sender_reads`): a read lands
    /// whole, and the fold would then read it back from memory.
    Folded,
    /// A 2-rank all-to-all's or allgather's message, whose sender receives
    /// one as large from its receiver meanwhile and copies its own block
    /// besides: read in place wherever busy senders' messages are
    /// (`read_busy`), whatever its size, else as `Plain`. Streamed, each
    /// core copied each byte it moved twice, and its own block once more
    /// (`coll::alltoall`, `coll::select::reads_untimed`).
    Swap,
}

/// A `SendKind::Lone` message leaves eagerly below this size (unless
/// `FERROCOLL_RNDV_BYTES` sets the rendezvous size): its receiver empties
/// the ring while the root fills it, where read in place it would fetch
/// the root's freshly written lines from the other core. 2-rank scatter,
/// `-t`, alternated, medians of 5, us, per-rank block, read in place /
/// eager (Open MPI): 128 KiB 38.4 / 24.2 (42.3), 256 KiB 76.9 / 46.1
/// (80.2), 512 KiB 167 / 110 (174), 768 KiB 206 / 195 (240), 1 MiB 244 /
/// 292 (303). Larger ones now stream through the ring's rendezvous
/// instead (`reads_in_place`), about as fast as eager (2 MiB
/// blocks 128 / 112 near, 156 / 147 far), and a receiver that comes late
/// buffers none of them.
const LONE_EAGER: usize = 768 * 1024;

/// Where reads work and ranks outnumber cores, a `SendKind::Paired` send
/// leaves eagerly below this size, though a collective's are announced
/// from `CROWDED_PULL_RNDV` and a program's other sends from `PULL_RNDV`.
/// An eager send completes once the ring takes it, and the call then waits
/// only for its own receive; an announced one waits for its receiver to
/// get a core. Since announced sends stream there too (`reads_in_place`),
/// from 1 MiB rather than 2: `-t`, alternated, near (3 rounds), medians,
/// us, eager below 2 MiB / below 1 MiB: 4 ranks sendrecv 1 MiB 129 / 111;
/// 3 ranks 120 / 107; 8 ranks 504 / 277; 128 KiB-512 KiB and 2 MiB alike
/// (announced from 512 KiB, 4 ranks read alike at 512 KiB and 1 MiB). The
/// figures that follow date from when announced sends were read in place
/// there. 4 ranks on 2 cores, `-t`, alternated, medians of 3, us, pulled
/// from 8 KiB / from 64 KiB / from 128 KiB (Open
/// MPI): sendrecv 32 KiB 28.0 / 15.5 / 15.3 (17.8), 64 KiB 43.3 / 43.2 /
/// 30.5 (29.3), 128 KiB 75.4 / 73.5 / 73.5 (51.0). Pulled from 128 KiB /
/// from 512 KiB, medians of 6: 128 KiB 92.5 / 85.7, 256 KiB 188 / 180,
/// 512 KiB 327 / 327 (eager 1 MiB: 626 against 427 pulled). Those were
/// an Intel host's; on an AMD EPYC host (Zen 4) eager won up to 1 MiB:
/// pulled from 512 KiB / from 2 MiB, alternated, paired, far (6 rounds):
/// 512 KiB 266 / 207, 1 MiB 538 / 422, 2 MiB 1097 / 1074 (both pulled);
/// near (2 rounds): 512 KiB 108 / 70, 1 MiB 195 / 162 (Open MPI 94-105
/// and 186 in the same hour). An `MPI_Sendrecv` posts its own receive in
/// the same call, so what such a send leaves buffered is bounded by it.
const CROWDED_PAIRED_RNDV: usize = 1 << 20;
/// `rndv_min` elsewhere (the ring's rendezvous saves a copy into a buffer,
/// for one round trip more).
const RING_RNDV: usize = 64 * 1024;

/// `Engine::rndv_min` unless `FERROCOLL_RNDV_BYTES` sets it.
fn rndv_default(pull: bool, crowded: bool) -> usize {
    params().rndv_min.unwrap_or(match (pull, crowded) {
        (true, false) => PULL_RNDV,
        (true, true) => CROWDED_PULL_RNDV,
        (false, _) => RING_RNDV,
    })
}

/// Whether an announced send of `kind` over shared memory, where reads
/// work, offers its data to be read in place (`FrameKind::Pull`) instead of
/// streaming through the ring once its receive is posted
/// (`FrameKind::Rts`): only a root's messages to several ranks
/// (`SendKind::Rooted`), each of which its receiver reads at once while
/// the root goes on (on Intel CPUs a busy sender's are read too, by
/// `busy_sender_reads`). Every other message streams, wherever ranks run: the
/// sender copies its freshly written lines from its own cache while the
/// receiver on the other core takes each chunk it hands over, where read in
/// place each line crossed from the sender's core at the kernel's pace.
/// Where ranks outnumber cores every announced message had been read in
/// place, since a read needs no sender to run; on this AMD EPYC guest (Zen
/// 5, 2 vCPUs) streaming won everywhere. `-t`, alternated, medians, us,
/// read in place / streamed (Open MPI in the same rounds): 4 ranks on 2
/// cores, far (3 rounds), halo 32 KiB 32.9 / 20.3 (35.1), 128 KiB 90.5 /
/// 42.6 (108), 512 KiB 321 / 138 (423), 2 MiB 1245 / 546 (1573), 8 MiB 5890
/// / 2936 (6524); sendrecv 2 MiB 987 / 292 (650), 8 MiB 4107 / 1633 (3057)
/// (below 2 MiB eager either way then, `CROWDED_PAIRED_RNDV`); pingpong 8 MiB 386
/// / 348 (932); `MPI_Alltoallv` of uneven blocks (each of 1-1.25 times the
/// size), by the smallest block, 64 KiB 133 / 63.8 (110), 256 KiB 418 /
/// 160 (346), 1 MiB 1491 / 650 (1254), 4 MiB 6913 / 3840 (5934);
/// `MPI_Gatherv` alike, 64 KiB 46.2 / 27.7 (37.9), 1 MiB 509 / 271 (446),
/// 4 MiB 3204 / 1833 (3245); 3 ranks, far, halo 128 KiB 111 / 30.3 (109), 2
/// MiB 1605 / 477 (1655); sendrecv 2 MiB 652 / 249 (648), 8 MiB 2975 / 1246
/// (3508); 8 ranks, near, halo 32 KiB 41.6 / 23.6 (39.9), 512 KiB 313 / 227
/// (312), 8 MiB 9763 / 8738 (9461), sendrecv 2 MiB 965 / 712 (904), 8 MiB
/// 5935 / 4825 (5599); smaller messages (eager) alike. A streamed message
/// needs its sender inside the library meanwhile. With ranks on cores of
/// their own, 2 ranks, alternated, medians of 4 rounds near / 6 far (a
/// cache line's round trip 100-130 / over 500 ns), us, read in place /
/// streamed: near pingpong 1 MiB 50.2 / 27.2, 4 MiB 175 / 112, 16 MiB 1421
/// / 826; sendrecv 1 MiB 86.8 / 48.3, 4 MiB 342 / 200; halo 1 MiB 161 /
/// 87.1, 4 MiB 776 / 384; gather 256 KiB 10.5 / 5.15, 1 MiB 37.8 / 21.8; far
/// pingpong 1 MiB 98.4 / 44.0, 4 MiB 388 / 169; sendrecv 4 MiB 705 / 322;
/// halo 4 MiB 1068 / 603; allgather 1 MiB 76.9 / 45.7, 4 MiB 352 / 191;
/// scatter 4 MiB 361 / 156; the others alike (paired 0.93-1.07), but near
/// gather 16 MiB 908 / 947 and allgather 16 MiB 1096 / 1170. (141b9e5 had
/// streamed only a program's messages below 1 MiB: far, reads won above,
/// pingpong 4 MiB 386 against 555. The ring's copies have since gone whole
/// from 32 KiB on this CPU, `copy::whole_from`.) A large message read in
/// place was once shared, the sender writing the back half meanwhile; with
/// only rooted messages read, nothing is.
fn reads_in_place(kind: SendKind) -> bool {
    kind == SendKind::Rooted
}

/// A busy sender's message (`busy_sender_reads`) counts from this many
/// bytes of receives live at its sender (`Engine::receiving`).
const BUSY_RECEIVING: usize = 512 * 1024;
/// ... and is read in place once it and those receives together pass this
/// many bytes, where ranks have cores of their own,
const BUSY_READ_PAST: usize = 2 << 20;
/// ... or this many where they outnumber cores.
const CROWDED_BUSY_READ_PAST: usize = 1 << 20;

/// Whether an announced message of `len` bytes (of a kind other than
/// `SendKind::Folded`), whose sender has `receiving` bytes of receives
/// live (pending, or done and not yet waited for), is read in place by
/// its receiver rather than streamed, where the CPU's default or
/// `FERROCOLL_CMA_BUSY` says so (`Engine::read_busy`).
/// A streamed message costs its sender a copy into the ring: that pays in
/// a ping-pong, whose sender would wait meanwhile (the two copies overlap,
/// and the sender's come from its own cache), but a sender with messages
/// of its own to take in has no core to spare, and a read in place leaves
/// one copy per byte for both directions together. On this Intel Xeon
/// guest (2 vCPUs, 2 MiB L2 each, 2026-12-01), `-t`, alternated, medians of
/// 3, us, streamed / read in place (Open MPI in the same rounds): 2 ranks,
/// `MPI_Sendrecv` 512 KiB 73.3 / 114, 1 MiB 177 / 235, 2 MiB 401 / 299
/// (297), 8 MiB 1678 / 1106 (1113); halo (two `MPI_Irecv` before two
/// `MPI_Isend`) 512 KiB 154 / 150, 1 MiB 338 / 292, 2 MiB 737 / 489 (494),
/// 8 MiB 3082 / 1902 (1929); alltoall 8 MiB 1288 / 1043 (1023); allgather
/// 8 MiB 994 / 883 (876); but pingpong (nothing received meanwhile) 2 MiB
/// 213 / 297 (252), 8 MiB 845 / 992 (927). 4 ranks on 2 cores: sendrecv
/// 1 MiB 430 / 375, 2 MiB 873 / 613 (578), 8 MiB 4228 / 2513 (2380); halo
/// 512 KiB 375 / 311, 2 MiB 1606 / 1203 (1032), 8 MiB 8925 / 5620 (6091);
/// pingpong 512 KiB 44.9 / 81.3. On an AMD EPYC (Zen 5) guest streaming
/// won also there (2 ranks, near: sendrecv 4 MiB 200 against 342 read,
/// halo 4 MiB 384 against 776; see `reads_in_place`), so it reads so only
/// on Intel CPUs unless told (`reads_busy_default`).
fn busy_sender_reads(len: usize, receiving: usize, crowded: bool) -> bool {
    let past = if crowded {
        CROWDED_BUSY_READ_PAST
    } else {
        BUSY_READ_PAST
    };
    receiving >= BUSY_RECEIVING && len.saturating_add(receiving) > past
}

/// `FERROCOLL_CMA_BUSY`, else whether this is an Intel CPU, where busy
/// senders' messages read in place measured faster (`busy_sender_reads`).
fn reads_busy_default() -> bool {
    params()
        .cma_busy
        .unwrap_or(crate::cpu::vendor() == crate::cpu::Vendor::Intel)
}

/// Most bytes one `drain` call reads from a link before returning.
const DRAIN_BUDGET: usize = 4 << 20;
/// Most steps (a header, a piece of a body, a whole small message) one
/// `drain` call takes: the budget alone let a rank whose peer sent it
/// 8-byte messages faster than it took them spend half a second in one
/// call, buffering 100000 of them, where other processes kept both cores
/// busy (and its wait looked at its peers' health only between calls).
const DRAIN_STEPS: usize = 4096;

/// Largest message `Engine::take_whole` takes in one step (larger ones
/// spend their time copying, not in the steps).
const WHOLE_MAX: usize = 4096;

const HDR0: Rx = Rx::Header {
    got: 0,
    hdr: [0; FRAME_BYTES],
};

impl Engine {
    /// An engine for world rank `me` over a shared segment (all ranks on
    /// this host). `seg.nranks()` is the world size.
    pub fn over_shm(me: usize, seg: Arc<Segment>) -> Engine {
        let n = seg.nranks();
        let local: Vec<usize> = (0..n).collect();
        Engine::over_host(me, n, seg, &local, Vec::new()).expect("no TCP links to start")
    }

    /// An engine whose links to the peers in `tcp` are those TCP
    /// connections and to every other rank the shared segment, which holds
    /// the whole world. Collective slots (which assume every member maps
    /// the segment) are then off.
    pub fn over_shm_and_tcp(
        me: usize,
        seg: Arc<Segment>,
        tcp: Vec<(usize, Vec<std::net::TcpStream>)>,
    ) -> Result<Engine> {
        let n = seg.nranks();
        let local: Vec<usize> = (0..n).collect();
        Engine::over_host(me, n, seg, &local, tcp)
    }

    /// An engine for world rank `me` of `size` whose segment `seg` is
    /// shared by the world ranks `local` (in segment order, `me` among
    /// them): rings to those, the connections in `tcp` to the others.
    /// A local peer listed in `tcp` (forced TCP) talks over TCP.
    pub fn over_host(
        me: usize,
        size: usize,
        seg: Arc<Segment>,
        local: &[usize],
        tcp: Vec<(usize, Vec<std::net::TcpStream>)>,
    ) -> Result<Engine> {
        if local.windows(2).any(|w| w[0] >= w[1]) || local.iter().any(|&w| w >= size) {
            return Err(Error::InvalidArg(format!(
                "host ranks {local:?} are not ascending world ranks below {size}"
            )));
        }
        let mut on_seg = vec![None; size];
        for (i, &w) in local.iter().enumerate() {
            on_seg[w] = Some(i);
        }
        let my = on_seg[me].ok_or_else(|| {
            Error::InvalidArg(format!("rank {me} is missing from its host's segment"))
        })?;
        if params().cma && local.len() > 1 {
            // Before any offer of this rank's memory goes out.
            cma::let_peers_read();
        }
        let mut links: Vec<Link> = (0..size)
            .map(|p| match on_seg[p] {
                _ if p == me => Link::SelfLoop(VecDeque::new()),
                Some(q) => Link::Shm {
                    tx: seg.ring(my, q),
                    rx: seg.ring(q, my),
                },
                // Replaced by its TCP link below; checked to be there.
                None => Link::SelfLoop(VecDeque::new()),
            })
            .collect();
        let missing = (0..size).find(|&p| on_seg[p].is_none() && !tcp.iter().any(|t| t.0 == p));
        if let Some(p) = missing {
            return Err(Error::InvalidArg(format!("no link to rank {p}")));
        }
        let mut guard = None;
        if !tcp.is_empty() {
            let (peers, socks): (Vec<usize>, Vec<_>) = tcp.into_iter().unzip();
            let bell = seg.clone();
            let (g, tlinks) = TcpLinks::start(socks, move || bell.doorbell(my).ring())?;
            for (p, l) in peers.into_iter().zip(tlinks) {
                links[p] = Link::Tcp(l);
            }
            guard = Some(g);
        }
        let mut eng = Engine::with_links(me, links, Some(seg));
        eng.on_seg = on_seg;
        eng.tcp = guard;
        eng.set_machine_ranks(local.len());
        // Area 0 is the world's (`Comm::world`).
        if size > 1 {
            eng.populate_slots(0, &(0..size).collect::<Vec<_>>());
        }
        Ok(eng)
    }

    /// Maps slot area `area` of the world ranks `members` (this rank
    /// among them) ahead of use (`coll::slots::populate`), where
    /// collectives may use the slots.
    pub fn populate_slots(&self, area: usize, members: &[usize]) {
        if let (true, Some(seg)) = (self.slots_usable(), self.seg.as_ref()) {
            crate::coll::slots::populate(seg, area, self.me, members);
        }
    }

    /// Sets how long waits spin from the number of ranks sharing this
    /// machine's cores (the ranks of this host, or more where several
    /// "hosts" share one kernel, as network namespaces do).
    pub fn set_machine_ranks(&mut self, ranks: usize) {
        let crowded = ranks > bind::cores();
        self.spin = match (crowded, self.tcp.is_some()) {
            (false, _) => params().spin,
            // Ranks outnumber cores and must hand the core over quickly, at once
            // over TCP, where every poll of a socket is a system call
            // (2 namespaces x 2 ranks over veth: 3.2 ms spinning 2000 times,
            // 41 us with no spin). Over shared memory a short spin (about
            // 1 us) still catches a peer that runs on another core; 4 ranks
            // on 2 cores, medians of 3: allreduce 8 B 5.4 us spinning 16
            // times, 8.3 us spinning 64, barrier 3.1 against 9.7 us,
            // alltoall 8 KiB 5.1 against 6.8 us; pingpong 8 KiB loses
            // (1.4 against 0.9 us).
            (true, false) => params().spin.min(16),
            (true, true) => 0,
        };
        // Collectives on the slots hand over sooner still: each call needs
        // every rank of a core to run, so waiting for the other core's
        // ranks rarely pays. 4 ranks on 2 cores, 8 B, us, spinning 16 / 6
        // / 2 times: allreduce 2.32-2.35 / 2.01-2.07 / 2.57-2.61, barrier
        // 2.17-2.35 / 1.84-1.87 / 2.39-2.43, alltoall 2.42 / 2.08-2.12,
        // bcast 0.151-0.154 / 0.141-0.145 / 0.139-0.140. Messages keep
        // `spin`: 4-rank pingpong 8 B took 0.26 us at 16 and 0.34-0.39 at 6.
        self.slot_spin = if crowded { self.spin.min(6) } else { self.spin };
        self.rndv_min = rndv_default(self.cma, crowded);
        self.informed = crowded && self.tcp.is_none() && self.seg.is_some();
        self.crowded = crowded;
        self.slice.crowded(self.informed);
        self.note_running();
    }

    /// Whether ranks outnumber this machine's cores (as
    /// `set_machine_ranks` found).
    pub fn crowded(&self) -> bool {
        self.crowded
    }

    /// Whether a busy sender's messages, and a 2-rank all-to-all's or
    /// allgather's (`SendKind::Swap`), are read in place where reads
    /// work: by the CPU or `FERROCOLL_CMA_BUSY`, fixed at start and so
    /// alike on a host's ranks, which may choose algorithms by it.
    pub fn reads_busy(&self) -> bool {
        self.read_busy
    }

    /// Whether this rank sees where its peers run (`informed`).
    pub fn informed(&self) -> bool {
        self.informed
    }

    /// Whether world rank `w` was last seen, running or paused, on this
    /// rank's CPU (`Segment::on_cpu`), so that it cannot run while this
    /// rank does; false unless `informed`.
    pub fn shares_core(&self, w: usize) -> bool {
        self.informed
            && self.cpu != 0
            && self
                .on_seg
                .get(w)
                .copied()
                .flatten()
                .is_some_and(|p| cpu_of(self.peer_cpu(p)) == self.cpu)
    }

    /// Whether collectives may use the shared segment's slots: every link
    /// to another rank is shared memory.
    pub fn slots_usable(&self) -> bool {
        self.seg.is_some() && self.tcp.is_none()
    }

    /// How many peers each kind of link reaches, e.g. `1 shm + 4 tcp`.
    pub fn link_summary(&self) -> String {
        let shm = self
            .links
            .iter()
            .filter(|l| matches!(l, Link::Shm { .. }))
            .count();
        let tcp = self
            .links
            .iter()
            .filter(|l| matches!(l, Link::Tcp(_)))
            .count();
        format!("{shm} shm + {tcp} tcp")
    }

    /// A single rank with no peers.
    pub fn singleton() -> Engine {
        Engine::with_links(0, vec![Link::SelfLoop(VecDeque::new())], None)
    }

    fn with_links(me: usize, links: Vec<Link>, seg: Option<Arc<Segment>>) -> Engine {
        let n = links.len();
        // `over_host` adjusts it to the ranks sharing this host's cores.
        let spin = params().spin;
        Engine {
            me,
            links,
            on_seg: (0..n).map(Some).collect(),
            seg,
            sendq: (0..n).map(|_| VecDeque::new()).collect(),
            rx: (0..n).map(|_| HDR0).collect(),
            posted: Vec::new(),
            unexpected: VecDeque::new(),
            next_unexpected: 0,
            reqs: Vec::new(),
            free: Vec::new(),
            spin,
            slot_spin: spin,
            informed: false,
            turn: Turn::default(),
            slice: crate::comm::slice::Watch::new(params().slice),
            mates: Mates::default(),
            crowded: false,
            cpu: 0,
            broken: None,
            next_ctx_id: 2,
            algo: params().algo.clone(),
            areas_free: ((1u64 << AREAS) - 1) & !1,
            draining: Vec::new(),
            slot_epoch: 0,
            far: Default::default(),
            spare: Vec::new(),
            small: Vec::new(),
            rndv_min: rndv_default(params().cma, false),
            tcp: None,
            cancel: None,
            hosts: vec![0; n],
            multi_host: false,
            cma: params().cma,
            read_busy: reads_busy_default(),
            backlogged: 0,
            reader_checked: None,
        }
    }

    /// Makes every wait fail with `Error::Cancelled` once `flag` is set
    /// (checked while the wait sleeps, at least every 50 ms).
    pub fn cancel_with(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// Records which host each world rank runs on (`hosts[w]`, numbered
    /// from 0), for host-aware collectives.
    pub fn set_hosts(&mut self, hosts: Vec<u32>) -> Result<()> {
        if hosts.len() != self.links.len() {
            return Err(Error::InvalidArg(format!(
                "{} host numbers for {} ranks",
                hosts.len(),
                self.links.len()
            )));
        }
        self.multi_host = hosts.iter().any(|&h| h != hosts[0]);
        self.hosts = hosts;
        Ok(())
    }

    /// The host of world rank `w` (0 for all on a single host).
    pub fn host_of(&self, w: usize) -> u32 {
        self.hosts[w]
    }

    /// Whether the world spans more than one host.
    pub fn multi_host(&self) -> bool {
        self.multi_host
    }

    /// This engine's world rank.
    pub fn rank(&self) -> usize {
        self.me
    }

    /// World size.
    pub fn size(&self) -> usize {
        self.links.len()
    }

    /// The shared segment, if any (abort flag, pids).
    pub fn segment(&self) -> Option<&Arc<Segment>> {
        self.seg.as_ref()
    }

    // Inlined, so the request is built in its slot rather than moved there
    // (as `Requests::insert`): 2 ranks 8 B, alternated, us, before / after:
    // Irecv + Isend + Waitall 0.195-0.201 / 0.188-0.194, two of each
    // 0.359-0.364 / 0.338-0.348. Inlining `irecv` as well lost (0.192-0.199).
    #[inline(always)]
    fn alloc(&mut self, kind: Kind) -> ReqId {
        let r = Req {
            kind,
            done: false,
            status: Status::default(),
            detached: false,
        };
        match self.free.pop() {
            Some(id) => {
                self.reqs[id] = Some(r);
                id
            }
            None => {
                self.reqs.push(Some(r));
                self.reqs.len() - 1
            }
        }
    }

    fn req(&mut self, id: ReqId) -> &mut Req {
        self.reqs[id].as_mut().expect("live request")
    }

    /// Inlined, so that `status` is stored into the request field by
    /// field: passed in memory (32 bytes), it was read back in 16-byte
    /// loads that the store buffer cannot forward from its callers' 8-byte
    /// stores.
    #[inline(always)]
    fn complete(&mut self, id: ReqId, status: Status) {
        let r = self.req(id);
        r.done = true;
        r.status = status;
        if r.detached {
            self.release(id);
        }
    }

    /// Completes send `id` of `bytes` to `dst`.
    fn complete_send(&mut self, id: ReqId, dst: usize, bytes: usize) {
        let status = Status {
            source: dst,
            tag: 0,
            bytes,
            error: None,
        };
        self.complete(id, status);
    }

    fn release(&mut self, id: ReqId) {
        self.reqs[id] = None;
        self.free.push(id);
    }

    /// Fails if an earlier fatal error broke this engine.
    pub fn check(&self) -> Result<()> {
        match &self.broken {
            Some(e) => Err(Error::Poisoned(e.to_string())),
            None => Ok(()),
        }
    }

    /// Gives up all pending work after a fatal error: no request keeps a
    /// caller's buffer, and every later operation fails with `err`.
    pub fn poison(&mut self, err: Error) {
        if self.broken.is_none() {
            self.broken = Some(err.clone());
        }
        for q in &mut self.sendq {
            q.clear();
        }
        self.posted.clear();
        self.unexpected.clear();
        for rx in &mut self.rx {
            *rx = HDR0;
        }
        for r in self.reqs.iter_mut().flatten() {
            if !r.done {
                r.done = true;
                r.status.error = Some(Box::new(err.clone()));
                r.kind = Kind::Recv {
                    m: Match {
                        source: None,
                        ctx: u32::MAX,
                        tag: None,
                    },
                    buf: RawBuf::EMPTY,
                    incoming: None,
                };
            }
        }
    }

    /// Posts a send of `buf` to world rank `dst` for `op`. Fails at once if
    /// the connection to `dst` died: a dead TCP link takes every byte, so
    /// sends would otherwise complete forever (a rank that only sends, as
    /// rank 0 of a scan, never noticed its peer was gone).
    pub fn isend(
        &mut self,
        dst: usize,
        ctx: u32,
        tag: i32,
        buf: RawBuf,
        op: &'static str,
    ) -> Result<ReqId> {
        self.isend_as(dst, ctx, tag, buf, op, SendKind::Plain)
    }

    /// `isend` of a send of `kind`.
    pub fn isend_as(
        &mut self,
        dst: usize,
        ctx: u32,
        tag: i32,
        buf: RawBuf,
        op: &'static str,
        kind: SendKind,
    ) -> Result<ReqId> {
        self.check()?;
        if self.links[dst].has_failed() {
            return Err(self.link_death(dst, op));
        }
        let announce = self.announces(dst, buf.len(), kind)
            || (kind == SendKind::Rooted && !buf.is_empty() && self.links[dst].is_remote());
        let mut frame = Frame::eager(ctx, tag, buf.len());
        let id = self.alloc(Kind::Send {
            dst,
            hdr: [0; FRAME_BYTES],
            off: 0,
            buf,
            phase: if announce {
                Phase::Announce
            } else {
                Phase::Eager
            },
        });
        if announce
            && self.cma
            && self.links[dst].is_shm()
            && id <= AUX_MAX as usize
            && (reads_in_place(kind)
                || (self.read_busy
                    && (kind == SendKind::Swap
                        || (kind != SendKind::Folded
                            && busy_sender_reads(buf.len(), self.receiving(), self.crowded)))))
        {
            // The receiver reads it where it lies: one copy, not two
            // through the ring, and no sender needs to run meanwhile.
            frame.kind = FrameKind::Pull;
            frame.token = buf.tail(0).as_ptr() as u64;
            frame.aux = id as u32;
        } else if announce {
            frame.kind = FrameKind::Rts;
            frame.token = id as u64;
        }
        if let Some(Req {
            kind: Kind::Send { hdr, .. },
            ..
        }) = self.reqs[id].as_mut()
        {
            *hdr = frame.encode();
        }
        self.sendq[dst].push_back(id);
        // Push what fits right away: small messages complete here.
        if self.push_sends(dst) {
            self.check_reader(dst, op)?;
        }
        // Only waits where ranks outnumber cores look at the mark
        // (`Awaited::Copying`); elsewhere it would cost a line crossing.
        if frame.kind == FrameKind::Pull {
            self.mark_work(dst);
        }
        Ok(id)
    }

    /// Sends a message that needs no request, at once: eager (shared-memory
    /// messages from the rendezvous size wait for their receive), nothing
    /// queued to `dst` before it (messages keep their order), and the link
    /// takes header and data together now; a send of `kind`, never a rooted
    /// one. `Ok(false)`: nothing was done, and `isend_as` must take the
    /// message.
    pub fn send_now(
        &mut self,
        dst: usize,
        ctx: u32,
        tag: i32,
        data: &[u8],
        kind: SendKind,
        op: &'static str,
    ) -> Result<bool> {
        self.check()?;
        if kind == SendKind::Rooted
            || self.announces(dst, data.len(), kind)
            || !self.sendq[dst].is_empty()
        {
            return Ok(false);
        }
        if dst == self.me && self.send_to_self(ctx, tag, data) {
            return Ok(true);
        }
        let link = &mut self.links[dst];
        if link.has_failed() {
            return Ok(false);
        }
        let frame = Frame::eager(ctx, tag, data.len()).encode();
        let wrote = write_watched(&mut self.far, link, data.len(), |link, max, uncached| {
            if data.len() <= max && link.write_both(&frame, data, uncached) {
                frame.len() + data.len()
            } else {
                0
            }
        });
        if wrote == 0 {
            return Ok(false);
        }
        self.ring_bell(dst);
        self.check_reader(dst, op)?;
        Ok(true)
    }

    /// Delivers an eager message from this rank to itself at once, as
    /// `drain` would deliver it off the loop-back link: into the first
    /// posted receive that accepts it, else buffered whole. Only while
    /// that link holds nothing and is between messages, so that messages
    /// from this rank keep their order. Through the link, a message was
    /// encoded, queued, read back and decoded: 1 rank, 8 B, about 1900
    /// instructions an `MPI_Sendrecv` to itself (callgrind), where Open
    /// MPI takes about 1160.
    fn send_to_self(&mut self, ctx: u32, tag: i32, data: &[u8]) -> bool {
        let me = self.me;
        let idle = matches!(&self.links[me], Link::SelfLoop(q) if q.is_empty())
            && matches!(self.rx[me], Rx::Header { got: 0, .. });
        if !idle {
            return false;
        }
        let frame = Frame::eager(ctx, tag, data.len());
        match self.match_posted(me, &frame) {
            Some(id) => {
                let buf = self.recv_buf(id);
                let n = data.len().min(buf.len());
                buf.write_at(0, &data[..n]);
                let status = recv_status(me, &frame, buf.len());
                self.complete(id, status);
            }
            None => {
                let mut copy = if data.len() <= SMALL_CAP {
                    self.buffer_for(data.len())
                } else {
                    self.scratch_for(data.len())
                };
                copy.copy_from_slice(data);
                self.buffer_unexpected(me, frame, copy, None);
                if let Some(u) = self.unexpected.back_mut() {
                    u.complete = true;
                }
            }
        }
        true
    }

    /// Fails, naming `dst`, if the peer that left this rank's last writes
    /// to it unread (`Link::backlogged`) is no longer running: a rank that
    /// only sends to a killed peer never waits for it until the link's ring
    /// fills, tens of thousands of small messages later. Rank 1 of a 3-rank
    /// `MPI_Scan` whose rank 2 was killed (it receives from rank 0 only)
    /// went on for 60 s and more where other processes kept both cores
    /// busy, each call then taking milliseconds. The process is looked for
    /// (one system call) at most every `READER_CHECK`, and the clock read
    /// once in `READER_WRITES` such writes.
    fn check_reader(&mut self, dst: usize, op: &'static str) -> Result<()> {
        if !self.links[dst].backlogged() {
            return Ok(());
        }
        self.backlogged = self.backlogged.wrapping_add(1);
        if !self.backlogged.is_multiple_of(READER_WRITES) {
            return Ok(());
        }
        let now = Instant::now();
        if self
            .reader_checked
            .is_some_and(|t| now.duration_since(t) < READER_CHECK)
        {
            return Ok(());
        }
        self.reader_checked = Some(now);
        let (Some(seg), Some(q)) = (&self.seg, self.on_seg[dst]) else {
            return Ok(());
        };
        if pid_alive(seg.pid_of(q)) {
            return Ok(());
        }
        // The error names the first rank of this host found dead: `dst`
        // may have quit because of it (rank 1 of a chained scan whose rank
        // 2 was killed), and every rank should name the same one.
        let rank = seg.set_dead(dst);
        let e = Error::PeerDied { rank, op };
        self.poison(e.clone());
        Err(e)
    }

    /// Receives the next message from world rank `src` into `buf` without
    /// posting a request, when nothing could take it first: no posted
    /// receive, nothing buffered from `src`, no send queued anywhere, and
    /// `src`'s shared-memory link between messages. It waits for the
    /// header as long as a wait spins, and takes the message if it is an
    /// eager one on `ctx` with `tag` (any tag for `None`) that fits `buf`.
    /// `Ok(None)`: nothing was consumed, and `irecv` must take the receive.
    /// A body still arriving is waited for as a posted receive's would be.
    pub fn recv_now(
        &mut self,
        src: usize,
        ctx: u32,
        tag: Option<i32>,
        buf: &mut [u8],
        op: &'static str,
    ) -> Result<Option<Status>> {
        self.check()?;
        let between = matches!(self.rx.get(src), Some(Rx::Header { got: 0, .. }));
        if !between
            || src == self.me
            || !self.links[src].is_remote()
            || !self.posted.is_empty()
            || self.unexpected.iter().any(|u| u.src == src)
            || self.sendq.iter().any(|q| !q.is_empty())
        {
            return Ok(None);
        }
        let mut hdr = [0u8; FRAME_BYTES];
        let mut idle = 0;
        // Where ranks outnumber cores, a sender that is not running now
        // cannot send during a spin: the posted wait, which hands the core
        // over, comes at once. 4 ranks on 2 cores, sendrecv 8-128 B, us, alternated,
        // spinning / not: 2.22-2.71 / 1.66-1.74 (Open MPI 1.92-2.24, or
        // 3.76-4.02 by run).
        let off_cpu = self.informed && self.on_seg[src].is_some_and(|q| !runs(self.peer_cpu(q)));
        let spin = if off_cpu { 0 } else { self.spin };
        while !self.links[src].peek(&mut hdr) {
            if idle >= spin {
                return Ok(None);
            }
            idle += 1;
            std::hint::spin_loop();
        }
        let takes = |f: &Frame| {
            f.kind == FrameKind::Eager
                && f.ctx == ctx
                && tag.is_none_or(|t| t == f.tag)
                && f.len <= buf.len() as u64
        };
        let Some(frame) = Frame::decode(&hdr).filter(takes) else {
            return Ok(None);
        };
        let len = frame.len as usize;
        let link = &mut self.links[src];
        link.read_with(FRAME_BYTES, |_| {});
        let got = link.read_into(&mut buf[..len]);
        // The sender may be waiting for ring space.
        self.ring_bell(src);
        if got == len {
            return Ok(Some(recv_status(src, &frame, buf.len())));
        }
        let (m, raw) = blocking_recv(src, ctx, tag, buf);
        let id = self.alloc(Kind::Recv {
            m,
            buf: raw,
            incoming: None,
        });
        self.rx[src] = Rx::Body {
            frame,
            target: Target::Req(id),
            off: got,
        };
        self.wait(id, op).map(Some)
    }

    /// A blocking receive from world rank `src` through a posted request:
    /// `irecv` and `wait`. A truncation is in the status, as for `wait`.
    pub fn recv_posted(
        &mut self,
        src: usize,
        ctx: u32,
        tag: Option<i32>,
        buf: &mut [u8],
        op: &'static str,
    ) -> Result<Status> {
        let (m, raw) = blocking_recv(src, ctx, tag, buf);
        let id = self.irecv(m, raw)?;
        self.wait(id, op)
    }

    /// Whether a `len`-byte send of `kind` to `dst` waits for its receive
    /// (rendezvous over shared memory) instead of leaving eagerly.
    fn announces(&self, dst: usize, len: usize, kind: SendKind) -> bool {
        // Every size below is at least `rndv_min`: smaller messages leave
        // eagerly without a look at the peers (`alone_with`).
        if len < self.rndv_min || !self.links[dst].is_remote() {
            return false;
        }
        let from = match kind {
            // A program's own messages stream once announced, wherever
            // ranks run (`reads_in_place`): from the size of ranks with
            // cores of their own. Where ranks outnumber cores, `-t`,
            // alternated, near (3 rounds), medians, us, from 32 KiB / from
            // 128 KiB: 4 ranks halo 32 KiB 12.0 / 8.59, 64 KiB 17.0 / 15.9;
            // 3 ranks halo 32 KiB 9.70 / 6.10, 64 KiB 13.0 / 11.0; 8 ranks
            // halo 32 KiB 24.5 / 15.8, 64 KiB 35.6 / 27.3, pingpong 32 KiB
            // 1.22 / 1.07; sendrecv (paired) and 16 KiB or 128 KiB up alike.
            // (`rndv_default` gives `FERROCOLL_RNDV_BYTES` where it is set.)
            SendKind::Program => rndv_default(self.cma, false),
            SendKind::Paired if self.lone_pair(dst) => rndv_default(self.cma, false),
            SendKind::Paired if self.crowded && self.cma && params().rndv_min.is_none() => {
                self.rndv_min.max(CROWDED_PAIRED_RNDV)
            }
            SendKind::Lone if params().rndv_min.is_none() => self.rndv_min.max(LONE_EAGER),
            _ => self.rndv_min,
        };
        len >= from
    }

    /// Whether ranks outnumber cores but every rank of this host other
    /// than this one and `peer` has handed its core over inside a
    /// collective's wait (`IDLE`), as while two ranks of four exchange
    /// messages and the others wait in a broadcast: the two then have
    /// cores of their own, and a paired send between them is announced as
    /// where ranks do not outnumber cores (from `PULL_RNDV`, not
    /// `CROWDED_PAIRED_RNDV`). Only where reads work and
    /// `FERROCOLL_RNDV_BYTES` is unset. A look at a line of each other
    /// rank, only for messages from the rendezvous size. (Ranks asleep in
    /// any wait would not do: in a 4-rank halo they sleep in waits on
    /// messages, and such a test made it 15-38% slower, far.)
    fn lone_pair(&self, peer: usize) -> bool {
        self.informed && self.cma && params().rndv_min.is_none() && self.alone_with(peer)
    }

    /// Whether every other rank of this segment but `peer` is paused in a
    /// collective's wait (`lone_pair`).
    fn alone_with(&self, peer: usize) -> bool {
        let idle = PAUSED | IDLE;
        self.on_seg.iter().enumerate().all(|(w, at)| {
            w == self.me || w == peer || at.is_none_or(|q| self.peer_cpu(q) & idle == idle)
        })
    }

    /// Posts a receive into `buf`.
    #[inline(always)]
    pub fn irecv(&mut self, m: Match, buf: RawBuf) -> Result<ReqId> {
        let tag = m.tag.map_or(ANY_TAG, i64::from);
        self.irecv_parts(m.source.unwrap_or(ANY_SOURCE), m.ctx, tag, buf)
    }

    /// `irecv` of a `Match` taken apart (`ANY_SOURCE`, `ANY_TAG` for
    /// none), so that it arrives in registers: passed whole (32 bytes, in
    /// memory), it was written by the caller field by field and read back
    /// here in wide loads that the store buffer cannot forward, each of
    /// which waited for every older store to reach the cache.
    #[inline(never)]
    fn irecv_parts(&mut self, source: usize, ctx: u32, tag: i64, buf: RawBuf) -> Result<ReqId> {
        let m = Match {
            source: (source != ANY_SOURCE).then_some(source),
            ctx,
            tag: i32::try_from(tag).ok(),
        };
        self.check()?;
        let id = self.alloc(Kind::Recv {
            m,
            buf,
            incoming: None,
        });
        let hit = self
            .unexpected
            .iter()
            .position(move |u| u.claimed.is_none() && m.accepts(u.src, &u.frame));
        match hit {
            Some(pos) if self.unexpected[pos].announced.is_some() => {
                // Read or ask for the data straight into this receive.
                let u = self.unexpected.remove(pos).expect("index in range");
                self.recycle(u.data);
                if u.pull {
                    self.pull(id, u.src, u.frame);
                } else {
                    self.ask_for(id, u.src, u.frame, u.announced.expect("checked"));
                }
            }
            Some(pos) if self.unexpected[pos].complete => {
                let u = self.unexpected.remove(pos).expect("index in range");
                self.deliver_buffered(id, u);
            }
            Some(pos) => self.unexpected[pos].claimed = Some(id),
            None => self.posted.push(id),
        }
        Ok(id)
    }

    fn deliver_buffered(&mut self, id: ReqId, u: Unexpected) {
        let buf = self.recv_buf(id);
        let n = u.data.len().min(buf.len());
        buf.write_at(0, &u.data[..n]);
        let status = recv_status(u.src, &u.frame, buf.len());
        self.complete(id, status);
        self.recycle(u.data);
    }

    /// Scratch space of `len` bytes (unexpected messages, collectives'
    /// temporaries) holding whatever an earlier user left: pooled buffers
    /// keep their length, so reuse costs no zeroing, and large fresh
    /// allocations (mmap, a page fault per 4 KiB every time) are rare.
    pub fn scratch_for(&mut self, len: usize) -> Vec<u8> {
        // The smallest buffer that fits, so large ones stay for large needs.
        // One whose length is far beyond `len` is left alone too: cut to
        // `len`, it would be zeroed again up to its old length at the next
        // large need (an in-place ring over TCP re-zeroed a 2 MiB buffer
        // every call of an 8 MiB host-aware allreduce, 5.5% of its samples).
        let may_cut = len.max(CUT_MAX);
        let best = self
            .spare
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= len && v.len().saturating_sub(len) <= may_cut)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i);
        let mut v = match best {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(len),
        };
        if v.len() < len {
            v.resize(len, 0);
        }
        v.truncate(len);
        v
    }

    /// A buffer for a message of `len` bytes from a peer: a pooled one that
    /// holds it whole, or a fresh one of at most `BUFFER_AHEAD` bytes that
    /// `drain` grows as the bytes arrive.
    fn buffer_for(&mut self, len: usize) -> Vec<u8> {
        if len <= SMALL_CAP {
            // Past what the pool keeps (a sender far ahead), a buffer of
            // the message's size: one of `SMALL_CAP` took 128 times the
            // bytes of an 8-byte message, and a rank buffering a flood of
            // them grew by 100 MiB a second.
            let fresh = if self.unexpected.len() < SMALL_COUNT {
                SMALL_CAP
            } else {
                len
            };
            let mut v = self
                .small
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(fresh));
            v.resize(len, 0);
            return v;
        }
        if self.spare.iter().any(|v| v.capacity() >= len) {
            self.scratch_for(len)
        } else {
            self.scratch_for(len.min(BUFFER_AHEAD))
        }
    }

    /// Keeps a buffer that is no longer needed for `scratch_for`, or, of
    /// `SMALL_CAP` bytes, for `buffer_for`'s small messages.
    pub fn recycle(&mut self, mut data: Vec<u8>) {
        if data.capacity() == SMALL_CAP {
            if self.small.len() < SMALL_COUNT {
                data.clear();
                self.small.push(data);
            }
            return;
        }
        let pooled: usize = self.spare.iter().map(Vec::capacity).sum();
        if data.capacity() >= SPARE_MIN
            && data.capacity() <= SPARE_MAX
            && pooled + data.capacity() <= SPARE_TOTAL
        {
            if self.spare.len() == SPARE_COUNT {
                // Keep the larger buffers.
                let (i, _) = self
                    .spare
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, v)| v.capacity())
                    .expect("pool is full");
                if self.spare[i].capacity() >= data.capacity() {
                    return;
                }
                self.spare.swap_remove(i);
            }
            // Keep the length: up to it, scratch users need not zero again.
            self.spare.push(data);
        }
    }

    /// Receive `id` takes the message `frame` that `src` announced with
    /// `token`: sends `Cts` and waits for the data.
    fn ask_for(&mut self, id: ReqId, src: usize, frame: Frame, token: u64) {
        if let Kind::Recv { incoming, .. } = &mut self.req(id).kind {
            *incoming = Some((src, frame));
        }
        // `aux` 1 tells the sender of a `Pull` that this rank cannot read
        // its memory (`on_cts`).
        let refused = u32::from(frame.kind == FrameKind::Pull && !self.cma);
        self.send_control(src, FrameKind::Cts, token, id as u64, refused);
    }

    /// Whether this rank reads peers' memory (`transport::shm::cma`): on
    /// unless `FERROCOLL_CMA=off` or the kernel refused a read here.
    pub fn pulls(&self) -> bool {
        self.cma
    }

    /// Stops this rank reading peers' memory, as a refused read does.
    pub fn stop_pulls(&mut self) {
        self.cma = false;
        self.rndv_min = rndv_default(false, self.crowded);
    }

    /// The process id of world rank `w`, if it shares this host's segment.
    pub fn pid_of(&self, w: usize) -> Option<u32> {
        match (&self.seg, self.on_seg.get(w).copied().flatten()) {
            (Some(seg), Some(q)) => Some(seg.pid_of(q)).filter(|&p| p != 0),
            _ => None,
        }
    }

    /// Receive `id` takes the message `frame` that `src` announced with a
    /// `Pull`: reads it from `src`'s memory and tells `src` (`Done`); where
    /// the kernel refuses, asks for it as for an `Rts`, and asks so from
    /// then on.
    fn pull(&mut self, id: ReqId, src: usize, frame: Frame) {
        self.clear_work();
        let (buf, sender) = (self.recv_buf(id), frame.aux);
        if let (true, Some(pid)) = (self.cma, self.pid_of(src)) {
            // Past the buffer's end nothing is read (truncation is
            // reported in the status).
            let fit = buf.len().min(frame.len as usize);
            let home = if fit >= BORROW_FROM {
                self.borrow_idle_core()
            } else {
                None
            };
            let read = read_part(pid, frame.token, buf, 0, fit);
            if let Some(home) = home {
                // Back home, where this rank's tuning assumes it runs; a
                // refusal leaves it where it is.
                bind::pin(home);
                self.note_running();
            }
            match read {
                Ok(()) => {
                    self.send_control(src, FrameKind::Done, sender.into(), 0, 0);
                    self.complete(id, recv_status(src, &frame, buf.len()));
                    return;
                }
                Err(cma::Refused(errno)) => {
                    self.stop_pulls();
                    param::debug_log(param::DebugLevel::Warn, || {
                        format!(
                            "reading a message from rank {src}'s memory failed (errno {errno}); \
                             messages now come through the shared-memory rings"
                        )
                    });
                }
            }
        }
        self.ask_for(id, src, frame, sender.into());
    }

    /// Our send `id` to `dst` that offered its data to be read (a `Pull`)
    /// and awaits its reader, with its buffer.
    fn offered(&self, dst: usize, id: u64) -> Option<(ReqId, RawBuf)> {
        let i = usize::try_from(id).ok()?;
        match self.reqs.get(i)? {
            Some(Req {
                kind:
                    Kind::Send {
                        dst: d,
                        hdr,
                        buf,
                        phase: Phase::AwaitCts,
                        ..
                    },
                done: false,
                ..
            }) if *d == dst && Frame::decode(hdr).is_some_and(|f| f.kind == FrameKind::Pull) => {
                Some((i, *buf))
            }
            _ => None,
        }
    }

    /// `dst` has read the data of our send `id` (a `Pull`): it is done.
    fn on_done(&mut self, dst: usize, id: u64) -> std::result::Result<(), String> {
        let Some((id, buf)) = self.offered(dst, id) else {
            return Err(format!("a read of send {id}, which offered none"));
        };
        self.complete_send(id, dst, buf.len());
        Ok(())
    }

    /// Queues a header-only frame to `dst`; the request frees itself.
    fn send_control(&mut self, dst: usize, kind: FrameKind, token: u64, len: u64, aux: u32) {
        let frame = Frame {
            kind,
            ctx: 0,
            tag: 0,
            len,
            token,
            aux,
        };
        let id = self.alloc(Kind::Send {
            dst,
            hdr: frame.encode(),
            off: 0,
            buf: RawBuf::EMPTY,
            phase: Phase::Eager,
        });
        self.req(id).detached = true;
        self.sendq[dst].push_back(id);
        self.push_sends(dst);
        if kind == FrameKind::Done {
            self.mark_work(dst);
        }
    }

    /// Marks `dst` (`WORK`) as having something to act on once it runs: a
    /// message to read, or a send of its read and done. Only where ranks
    /// outnumber cores, whose waits look at it (`Awaited::Copying`). The
    /// `Done` lets a rank move on to its next call, and so give the other
    /// core work: 4 ranks on 2 cores, alternated, medians of 4, us, a pull
    /// marked / a `Done` too (Open MPI in the last compare run): sendrecv
    /// 32 KiB 9.53 / 8.32 (6.79), 128 KiB 18.8 / 15.2 (13.7), 512 KiB 70.2
    /// / 64.2 (59.1); halo 32 KiB 14.0 / 13.4, 128 KiB 30.4 / 28.8; 8 B -
    /// 8 KiB and pingpong alike. Kept with an atomic RMW at each hand-over
    /// as well, the mark lost 7-10% on sendrecv and halo of 8-512 B.
    fn mark_work(&self, dst: usize) {
        if !self.crowded {
            return;
        }
        if let (Some(seg), Some(q)) = (&self.seg, self.on_seg[dst]) {
            seg.on_cpu(q).fetch_or(WORK, Ordering::Relaxed);
        }
    }

    /// Buffers every announced message nobody has asked for yet. Called by a
    /// wait that found nothing to do: a sender blocked on its announcement
    /// must not wait for a receive this rank may never post first (two ranks
    /// sending to each other before receiving).
    fn accept_announced(&mut self) -> bool {
        let mut asked = Vec::new();
        for i in 0..self.unexpected.len() {
            if let Some(token) = self.unexpected[i].announced.take() {
                let len = self.unexpected[i].frame.len as usize;
                let data = self.buffer_for(len);
                let u = &mut self.unexpected[i];
                u.data = data;
                u.asked = true;
                asked.push((u.src, token, place_token(&Target::Unexpected(u.id))));
            }
        }
        for &(src, token, place) in &asked {
            self.send_control(src, FrameKind::Cts, token, place, 0);
        }
        !asked.is_empty()
    }

    /// Bytes of receive `id` that have landed in its buffer so far (its
    /// length once complete). They land in order, so these are final.
    pub fn arrived(&self, id: ReqId) -> usize {
        let Some(r) = self.reqs.get(id).and_then(Option::as_ref) else {
            return 0;
        };
        if r.done {
            return r.status.bytes;
        }
        let Kind::Recv { m, .. } = r.kind else {
            return 0;
        };
        match m.source.map(|s| &self.rx[s]) {
            Some(Rx::Body {
                target: Target::Req(t),
                off,
                ..
            }) if *t == id => *off,
            _ => 0,
        }
    }

    /// Bytes of this rank's receives not yet waited for (their buffers'
    /// lengths), done or not, for `busy_sender_reads`: a receive posted
    /// just before the send that found its message offered read it at once,
    /// and its rank has copied as much as a pending one will. A look at
    /// every live request, only for messages from the rendezvous size.
    fn receiving(&self) -> usize {
        self.reqs
            .iter()
            .flatten()
            .map(|r| match r.kind {
                Kind::Recv { buf, .. } => buf.len(),
                _ => 0,
            })
            .sum()
    }

    /// Whether a request has completed (no progress is made).
    pub fn is_done(&self, id: ReqId) -> bool {
        self.reqs[id].as_ref().is_some_and(|r| r.done)
    }

    /// Removes a completed request and returns its status.
    pub fn take(&mut self, id: ReqId) -> Status {
        let st = std::mem::take(&mut self.req(id).status);
        self.release(id);
        st
    }

    /// Lets a pending request finish on its own (`MPI_Request_free`).
    pub fn detach(&mut self, id: ReqId) {
        if self.is_done(id) {
            self.release(id);
        } else {
            self.req(id).detached = true;
        }
    }

    /// Looks for a buffered message matching `m` without receiving it.
    pub fn iprobe(&mut self, m: Match) -> Option<Envelope> {
        self.progress();
        self.find_unexpected(m)
    }

    fn find_unexpected(&self, m: Match) -> Option<Envelope> {
        self.unexpected
            .iter()
            .find(|u| u.claimed.is_none() && m.accepts(u.src, &u.frame))
            .map(|u| Envelope {
                source: u.src,
                tag: u.frame.tag,
                bytes: u.frame.len as usize,
            })
    }

    /// Blocks until a message matching `m` is available.
    pub fn probe(&mut self, m: Match, op: &'static str) -> Result<Envelope> {
        let mut found = None;
        let peers: Vec<usize> = m.source.into_iter().collect();
        self.wait_loop(op, &peers, |e| {
            found = e.find_unexpected(m);
            found.is_some()
        })?;
        Ok(found.expect("set when the loop ends"))
    }

    /// Waits for one request and returns its status (the request is freed).
    /// A request that a failure ended (not a truncation, which the status
    /// reports) fails the wait with that failure.
    pub fn wait(&mut self, id: ReqId, op: &'static str) -> Result<Status> {
        // A completed request needs no health check (as in `wait_loop`, a
        // peer's death no longer matters to it): `MPI_Waitall` finishes
        // each of its requests here after waiting for them all.
        if !self.is_done(id) {
            self.wait_all(&[id], op)?;
        }
        let st = self.take(id);
        match st.error {
            Some(ref e) if !matches!(**e, Error::Truncated { .. }) => Err((**e).clone()),
            _ => Ok(st),
        }
    }

    /// Waits until every request in `ids` has completed (they stay
    /// allocated; `take` each).
    pub fn wait_all(&mut self, ids: &[ReqId], op: &'static str) -> Result<()> {
        self.check_host(op)?;
        let mut pending = ids.iter().copied().filter(|&i| !self.is_done(i));
        let (first, second) = (pending.next(), pending.next());
        let Some(id) = first else {
            return Ok(());
        };
        if second.is_none() {
            // One request left (every blocking call, and a sendrecv whose
            // send went out at once): its peer, without a `Vec`.
            // Where ranks outnumber cores, past its spin it polls on while
            // that peer runs on another core and yields while it does not
            // (`wait_for_running`'s rule, with this wait's spin). 4 ranks on
            // 2 cores, us, alternated, before/after: sendrecv 8 B 2.27-2.71 / 1.68-1.76,
            // 4 KiB 3.00-3.17 (spin only) / 2.37-2.40; pingpong 32 KiB
            // 4.09-4.18 / 2.83-2.94, 64 KiB 8.3-8.6 / 5.1-5.2; gather 4 MiB
            // 166-168 / 144-145; scatter 4 MiB 151-152 / 156.
            let peer = self.peers_of_one(id);
            let awaited = self.awaited_for(&id);
            return self.wait_checked(op, peer.as_slice(), false, self.spin, awaited, |e| {
                e.is_done(id)
            });
        }
        // A few requests (a halo exchange's): their peers without a `Vec`;
        // the wait watches those of the pending ones (`Awaited`).
        let mut few = [0usize; FEW_PEERS];
        let Some(k) = self.few_peers(ids, &mut few) else {
            let peers = self.peers_of(ids);
            return self.wait_loop(op, &peers, |e| ids.iter().all(|&i| e.is_done(i)));
        };
        let awaited = if self.crowded && ids.iter().any(|&i| self.bulky(i)) {
            Awaited::Copying(ids)
        } else {
            Awaited::Requests(ids)
        };
        self.wait_checked(op, &few[..k], false, self.spin, awaited, |e| {
            ids.iter().all(|&i| e.is_done(i))
        })
    }

    /// What a wait for the single pending request `id` watches: its peer,
    /// or (`Awaited::Copying`) the request itself where its message is
    /// announced (`bulky`) while ranks outnumber cores.
    fn awaited_for<'a>(&self, id: &'a ReqId) -> Awaited<'a> {
        match self.peers_of_one(*id) {
            Some(_) if self.crowded && self.bulky(*id) => {
                Awaited::Copying(std::slice::from_ref(id))
            }
            Some(p) => Awaited::Peer(p),
            None => Awaited::Nobody,
        }
    }

    /// Whether pending request `id` moves a message from the rendezvous
    /// size up (through the ring's rendezvous, or a root's read in place;
    /// the figures below are from when every such message was read in
    /// place where ranks outnumber cores). Once
    /// bounded at 1 MiB: a larger read keeps the core for 100 us or more,
    /// and a rank that yielded to it got its core back only after (4 ranks
    /// on 2 cores, us, unbounded / bounded: sendrecv 2 MiB 687 / 484, 8 MiB
    /// 2672 / 2386). Since a `Done` marks its sender too
    /// (`Engine::mark_work`), a yield goes to a mate that has something to
    /// do, and the bound lost: alternated, medians of 4, bounded /
    /// unbounded, sendrecv 1 MiB 219 / 190, 2 MiB 478 / 387 (Open MPI
    /// 385-424 this session), 4 MiB 979 / 837, 8 MiB 2111 / 2028, 16 MiB
    /// 7678 / 7222; halo 2 MiB 907 / 880, 8 MiB 5443 / 5286; pingpong,
    /// allgather, alltoall, bcast, gather, scatter, reduce, allreduce and
    /// reduce_scatter from 1 MiB alike.
    fn bulky(&self, id: ReqId) -> bool {
        match self.reqs.get(id).and_then(Option::as_ref) {
            Some(r) if !r.done => match &r.kind {
                Kind::Send { buf, .. } | Kind::Recv { buf, .. } => buf.len() >= self.rndv_min,
            },
            _ => false,
        }
    }

    /// Waits until one of `ids` has completed; returns its index in `ids`.
    pub fn wait_any(&mut self, ids: &[ReqId], op: &'static str) -> Result<usize> {
        let mut which = 0;
        let done = |e: &Engine| match ids.iter().position(|&i| e.is_done(i)) {
            Some(p) => {
                which = p;
                true
            }
            None => false,
        };
        // A few peers (a loop of `MPI_Waitany` over a halo's receives)
        // without a `Vec`.
        let mut few = [0usize; FEW_PEERS];
        match self.few_peers(ids, &mut few) {
            Some(k) => self.wait_loop(op, &few[..k], done)?,
            None => {
                let peers = self.peers_of(ids);
                self.wait_loop(op, &peers, done)?
            }
        }
        Ok(which)
    }

    /// The distinct peers that pending requests in `ids` depend on, into
    /// `few`; their number, or `None` where there are more.
    fn few_peers(&self, ids: &[ReqId], few: &mut [usize; FEW_PEERS]) -> Option<usize> {
        let mut k = 0;
        for &i in ids {
            if let Some(p) = self.peers_of_one(i) {
                if !few[..k].contains(&p) {
                    *few.get_mut(k)? = p;
                    k += 1;
                }
            }
        }
        Some(k)
    }

    /// The world rank a pending request depends on, if any other.
    fn peers_of_one(&self, id: ReqId) -> Option<usize> {
        self.reqs[id]
            .as_ref()
            .filter(|r| !r.done)
            .and_then(|r| match r.kind {
                Kind::Send { dst, .. } => Some(dst),
                Kind::Recv { m, .. } => m.source,
            })
            .filter(|&p| p != self.me)
    }

    /// World ranks that pending requests in `ids` depend on.
    fn peers_of(&self, ids: &[ReqId]) -> Vec<usize> {
        let mut v: Vec<usize> = ids.iter().filter_map(|&i| self.peers_of_one(i)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Makes progress until `done` holds: spin, then yield, then sleep on the
    /// doorbell (yielding goes on for up to `ALONE_POLL` while yields come
    /// straight back). Fails on abort, on the death of a peer in `peers`, or when
    /// `FERROCOLL_TIMEOUT` passes.
    /// A peer's death fails the wait only while a request still needs it
    /// (it may have sent everything first).
    fn wait_loop(
        &mut self,
        op: &'static str,
        peers: &[usize],
        done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        self.wait_checked(op, peers, false, self.spin, Awaited::Nobody, done)
    }

    /// Waits, progressing every link, until `done` holds; `peers` are the
    /// world ranks whose death or silence makes it fail. Any death among
    /// `peers` fails the wait: what is awaited is not a message that may
    /// already have arrived. For collectives on the slots (`slot_spin`).
    pub fn wait_for(
        &mut self,
        op: &'static str,
        peers: &[usize],
        done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        self.wait_checked(op, peers, true, self.slot_spin, Awaited::Nobody, done)
    }

    /// `wait_for` one `peer` in a latency-bound call: where ranks outnumber
    /// cores it polls on while that peer runs on another core and yields at
    /// once while it does not (`RUN_POLL`). Bandwidth-bound waits (streamed
    /// collectives) use `wait_for`: there a rank that polls keeps the
    /// neighbour that shares its core from copying its part (4 ranks on 2
    /// cores, bcast 1 MiB 119 against 83 us).
    pub fn wait_for_running(
        &mut self,
        op: &'static str,
        peer: usize,
        done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        self.wait_checked(op, &[peer], true, self.slot_spin, Awaited::Peer(peer), done)
    }

    /// `wait_for_running` for a peer that `shares_core` with this rank, in
    /// a latency-bound call: it can only run once this rank yields, so
    /// this rank yields at once and again, progressing the links between
    /// yields, up to `MATE_YIELDS` times before it waits as
    /// `wait_for_running` does (health checks, then sleep). It does not
    /// mark itself paused meanwhile: waiters on other cores then poll for
    /// it a little longer instead of handing their cores over, which pays
    /// since a call needs every rank of both cores anyway.
    pub fn wait_for_mate(
        &mut self,
        op: &'static str,
        peer: usize,
        mut done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        self.check()?;
        for _ in 0..MATE_YIELDS {
            self.yield_core();
            self.progress();
            if self.broken.is_some() {
                break;
            }
            if done(self) {
                return Ok(());
            }
        }
        self.wait_for_running(op, peer, done)
    }

    /// Fails at once, poisoning the engine, once the job was aborted or
    /// another rank of this host found a peer dead: `check_health` says
    /// the same, but only after 50 ms of one wait, and a rank whose waits
    /// all end sooner never looked. In a 5-rank `MPI_Scan` whose rank 2
    /// was killed, ranks 0 and 1 went on for 4-58 s: rank 0 only sends,
    /// and rank 1 found its message there at every call while its link to
    /// the dead rank filled (the fault test allows 5 s). One load of a line
    /// that nobody writes meanwhile.
    fn check_host(&mut self, op: &'static str) -> Result<()> {
        let Some(seg) = &self.seg else {
            return Ok(());
        };
        let e = if let Some((rank, code)) = seg.aborted() {
            Error::Aborted { rank, code }
        } else if let Some(rank) = seg.dead() {
            Error::PeerDied { rank, op }
        } else {
            return Ok(());
        };
        self.poison(e.clone());
        Err(e)
    }

    /// `wait_inner` on a healthy engine; a failure poisons it.
    fn wait_checked(
        &mut self,
        op: &'static str,
        peers: &[usize],
        strict: bool,
        spin: u32,
        awaited: Awaited<'_>,
        done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        self.check()?;
        let r = self.wait_inner(op, peers, strict, spin, awaited, done);
        if let Some(t) = &self.tcp {
            t.engine_stops(false);
        }
        // `Ok` rebuilt rather than `r` moved: only its tag was stored, and
        // moving it read the whole 32 bytes back in 16-byte loads, which
        // waited for every older store to reach the cache.
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                self.poison(e.clone());
                Err(e)
            }
        }
    }

    fn wait_inner(
        &mut self,
        op: &'static str,
        peers: &[usize],
        strict: bool,
        spin: u32,
        awaited: Awaited<'_>,
        mut done: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        // (start, last health check): read the clock only once spinning ends.
        let mut clock: Option<(Instant, Instant)> = None;
        let mut idle: u32 = 0;
        // Rounds that moved something, and so never reached the checks of
        // an idle one.
        let mut moves: u32 = 0;
        // Whether the last yield came straight back, and when this stretch
        // of yields began (set at its first yield, so a wait that ends while
        // spinning never reads the clock).
        let (mut alone, mut stretch) = (false, None);
        // The peers this wait needs, where this rank can see whether they
        // run (`informed`), and since when one has been seen running on
        // another core in this stretch of polling.
        let watch = if self.informed {
            awaited
        } else {
            Awaited::Nobody
        };
        let mut running_since: Option<Instant> = None;
        // When this wait next says it is long (`FERROCOLL_STALL_WARN`).
        let mut warn_at = params().stall_warn;
        if let Some(t) = &self.tcp {
            t.engine_polls();
        }
        loop {
            let moved = self.progress();
            if let Some(e) = &self.broken {
                // A peer's malformed stream poisoned the engine meanwhile.
                return Err(e.clone());
            }
            if done(self) {
                return Ok(());
            }
            if moved {
                idle = 0;
                moves = moves.wrapping_add(1);
                // Arrivals that never stop must not keep the wait from
                // looking at the peers it needs: rank 1 of a 3-rank
                // `MPI_Scan` whose rank 2 was killed waited for room in its
                // full link to rank 2 while buffering rank 0's messages,
                // which came faster than it took them where other processes
                // kept both cores busy, and went on for 60 s and more.
                if moves.is_multiple_of(MOVES_PER_LOOK) {
                    if let Some(seg) = self.seg.clone() {
                        let now = Instant::now();
                        let (start, last) = clock.get_or_insert((now, now));
                        if now.duration_since(*last) >= HEALTH_EVERY {
                            *last = now;
                            let start = *start;
                            self.check_health(&seg, op, peers, strict, start, &mut done)?;
                            self.say_if_long(op, peers, start, &mut warn_at);
                        }
                    }
                }
                continue;
            }
            idle = idle.saturating_add(1);
            if idle <= spin {
                // A peer last seen on this rank's own CPU (running or
                // paused) is not running now, nor is one paused elsewhere:
                // spinning cannot help, only handing the core over. With
                // the second rule (and a sendrecv whose send went out
                // waiting as one request, see `wait_all`), 4 ranks on 2
                // cores, alternated, us, before / after: sendrecv 8 B
                // 1.66-1.70 / 1.40-1.43, 128 B 1.71-1.73 / 1.47-1.48,
                // 2 KiB 2.09-2.12 / 1.86-1.89 (Open MPI 1.19-1.58 at 8 B);
                // allreduce, bcast and pingpong alike, 2 and 8 ranks too.
                if idle == 1
                    && self.any_awaited(watch, |at| cpu_of(at) == self.cpu || at & PAUSED != 0)
                {
                    idle = spin;
                }
                std::hint::spin_loop();
                continue;
            }
            let Some(seg) = self.seg.clone() else {
                // No peers: nothing else can make this complete.
                return Err(Error::InvalidArg(format!(
                    "{op} can never complete: no matching message or receiver"
                )));
            };
            let now = Instant::now();
            let (start, last) = clock.get_or_insert((now, now));
            if idle == spin.saturating_add(1) {
                stretch = Some(now);
            }
            if !matches!(watch, Awaited::Nobody) {
                // Every awaited peer runs on another core and will publish
                // soon: polling on beats handing the core to a rank that
                // most likely waits too. Bounded, since a peer preempted by
                // the kernel still reads as running.
                if idle == spin.saturating_add(1) {
                    self.cpu = current_cpu();
                }
                let since = *running_since.get_or_insert(now);
                if now.duration_since(since) < RUN_POLL
                    && (!matches!(watch, Awaited::Peer(_))
                        || now.duration_since(*start) < RUN_POLL_WITHIN)
                    && self.all_awaited(watch, |at| runs(at) && cpu_of(at) != self.cpu)
                    && !(matches!(watch, Awaited::Copying(_)) && self.mate_has_work(&seg))
                {
                    std::hint::spin_loop();
                    // Back here at the next idle round, past the spin.
                    idle = spin;
                    continue;
                }
            }
            let polling = alone && stretch.is_some_and(|s| now.duration_since(s) < ALONE_POLL);
            if idle <= spin.saturating_add(16) || polling {
                self.yield_over(&seg, strict);
                alone = now.elapsed() < YIELD_ALONE;
                running_since = None;
            } else {
                if self.accept_announced() {
                    idle = 0;
                    continue;
                }
                if let Some(t) = &self.tcp {
                    t.engine_stops(true);
                }
                let me = self.on_seg[self.me].unwrap_or(0);
                let Some(seen) = seg.prepare_sleep(me) else {
                    self.yield_over(&seg, strict);
                    continue;
                };
                if self.progress() || done(self) {
                    seg.cancel_sleep(me);
                    idle = 0;
                    continue;
                }
                self.hand_over(&seg, strict, || {
                    seg.sleep(me, seen, Duration::from_millis(20));
                });
                running_since = None;
            }
            if now.duration_since(*last) >= HEALTH_EVERY {
                *last = now;
                let start = *start;
                self.check_health(&seg, op, peers, strict, start, &mut done)?;
                self.say_if_long(op, peers, start, &mut warn_at);
            }
        }
    }

    /// The `Segment::on_cpu` words of the peers that `awaited` names and
    /// this rank can see, those of requests only while they are pending.
    fn awaited_cpus<'a>(&'a self, awaited: Awaited<'a>) -> impl Iterator<Item = u32> + 'a {
        let (peer, ids) = match awaited {
            Awaited::Nobody => (None, &[][..]),
            Awaited::Peer(p) => (Some(p), &[][..]),
            Awaited::Requests(ids) | Awaited::Copying(ids) => (None, ids),
        };
        peer.into_iter()
            .chain(ids.iter().filter_map(|&i| self.peers_of_one(i)))
            .filter_map(|w| self.on_seg.get(w).copied().flatten())
            .map(|p| self.peer_cpu(p))
    }

    /// Whether `awaited` names a peer this rank can see and every such
    /// peer's `on_cpu` word meets `test`.
    fn all_awaited(&self, awaited: Awaited<'_>, test: impl Fn(u32) -> bool) -> bool {
        let mut any = false;
        self.awaited_cpus(awaited).all(|at| {
            any = true;
            test(at)
        }) && any
    }

    /// Whether some awaited peer's `on_cpu` word meets `test`.
    fn any_awaited(&self, awaited: Awaited<'_>, test: impl Fn(u32) -> bool) -> bool {
        self.awaited_cpus(awaited).any(test)
    }

    /// Where segment rank `p` runs (`Segment::on_cpu`); 0 without a segment.
    #[inline]
    fn peer_cpu(&self, p: usize) -> u32 {
        self.seg
            .as_ref()
            .map_or(0, |s| s.on_cpu(p).load(Ordering::Relaxed))
    }

    /// Says this rank runs, and on which CPU (`Segment::on_cpu`).
    fn note_running(&mut self) {
        self.cpu = current_cpu();
        if let (Some(seg), Some(me)) = (&self.seg, self.on_seg.get(self.me).copied().flatten()) {
            seg.on_cpu(me).store(self.cpu, Ordering::Relaxed);
        }
    }

    /// Where the slice watch looks, says this rank hands its core over
    /// (`on: false`) or has it back (`Segment::turn`), at `now` (`slice::stamp`).
    fn note_turn(turn: &mut Turn, seg: &Segment, me: usize, on: bool, now: u32) {
        if on {
            turn.back = now.max(1);
        } else if turn.back != 0 {
            turn.busy = turn.busy.wrapping_add(slice::elapsed(turn.back, now));
            turn.back = 0;
        }
        let back = on.then_some(turn.back);
        seg.turn(me)
            .store(slice::turn_word(turn.busy, back), Ordering::Relaxed);
    }

    /// Yields this rank's core. Where the slice watch looks
    /// (`comm::slice`), tells it how long no rank of this CPU ran during a
    /// long yield: a process outside the job held the core then. What the
    /// ranks of this CPU had run when the yield began is taken from their
    /// turn words as this rank last read them: they cannot run on its CPU
    /// while it does, so the words it read at the end of its last yield
    /// still hold (or, where one of them ran in a short yield since, say
    /// less, which only makes the yield look shorter). So only a long yield
    /// reads them, and only at its end; every 64 yields, or when this rank
    /// moved, they are looked up again. Every yield counts this rank's own
    /// turn (`note_turn`): two clock reads and two stores to a line of its
    /// own.
    fn yield_core(&mut self) {
        let me = self.on_seg.get(self.me).copied().flatten();
        let (Some(seg), Some(me), true) = (self.seg.as_deref(), me, self.slice.watching()) else {
            std::thread::yield_now();
            return;
        };
        if self.mates.cpu != self.cpu || self.mates.left == 0 {
            self.mates.look(seg, me, self.cpu);
        }
        self.mates.left -= 1;
        let start = slice::stamp();
        Self::note_turn(&mut self.turn, seg, me, false, start);
        std::thread::yield_now();
        let end = slice::stamp();
        Self::note_turn(&mut self.turn, seg, me, true, end);
        let foreign = if slice::elapsed(start, end) >= slice::SLOW_YIELD_FLOOR {
            let before = self.mates.ran_by(start);
            let after = self.mates.ran_by_now(seg, end);
            slice::foreign(start, end, before, after)
        } else {
            0
        };
        self.slice.yielded(end, foreign);
    }

    /// Whether another rank last seen on this rank's CPU was marked as
    /// having work (`WORK`: a message to read, a send done) that it has not
    /// acted on yet: polling on for a peer on another core would keep it
    /// from that, so a wait on announced messages (`Awaited::Copying`)
    /// yields instead. (Measured while such messages were read in place;
    /// now only a root's are, `reads_in_place`.) 4 ranks on 2
    /// cores, alternated, medians of 3, us, polling on / yielding (Open
    /// MPI): sendrecv 32 KiB 10.6 / 9.0 (6.6), 128 KiB 23.2 / 16.7 (12.7),
    /// 512 KiB 78.7-86.0 / 64.6-66.6 (55.6); halo 32 KiB 18.6 / 13.3, 128
    /// KiB 33.4 / 28.5; pingpong, whose other ranks are idle, 2.15 / 2.16
    /// at 32 KiB and 5.9 / 5.3 at 128 KiB.
    fn mate_has_work(&self, seg: &Segment) -> bool {
        let me = self.on_seg[self.me].unwrap_or(0);
        (0..seg.nranks()).any(|p| {
            let at = seg.on_cpu(p).load(Ordering::Relaxed);
            p != me && at & WORK != 0 && cpu_of(at) == self.cpu
        })
    }

    /// Where ranks outnumber cores and this rank is bound to its CPU, moves
    /// it for a long read to a CPU whose ranks all wait with nothing marked
    /// (`idle_cpu`), if a rank of its own CPU has work marked: that rank
    /// then gets the core meanwhile, instead of one core copying for two
    /// while the other idles. Returns the CPU to go back to. Moves are
    /// few (a handful per rank in a run of a few hundred calls), enough to
    /// leave a schedule in which one core waits. 4 ranks on 2 cores,
    /// alternated, us, staying / moving from `BORROW_FROM`, medians of 12:
    /// sendrecv 2 MiB 428 / 435, 4 MiB 894 / 876, 8 MiB 2344 / 2132 (Open
    /// MPI 1623-1727 in compare runs); halo 2 MiB 964 / 929, 8 MiB 5561 /
    /// 5464; of 8: sendrecv 16 MiB 7214 / 6894, allgather and alltoall 512
    /// KiB - 16 MiB alike. Unbound ranks, which the kernel moves at will,
    /// read sendrecv 8 MiB at 1669 against 2147 but small calls lost
    /// (sendrecv 8 B 1.03 -> 1.35 us, halo 256 KiB 54 -> 83).
    fn borrow_idle_core(&mut self) -> Option<usize> {
        if !self.informed {
            return None;
        }
        let seg = self.seg.clone()?;
        if !self.mate_has_work(&seg) {
            return None;
        }
        let home = bind::home()?;
        let words: Vec<u32> = (0..seg.nranks())
            .map(|p| seg.on_cpu(p).load(Ordering::Relaxed))
            .collect();
        let idle = idle_cpu(&words, self.cpu)?;
        if !bind::pin(idle as usize - 1) {
            return None;
        }
        self.note_running();
        Some(home)
    }

    /// Clears this rank's `WORK` mark as it makes progress or reads a
    /// message in place.
    #[inline]
    fn clear_work(&self) {
        if let (Some(seg), Some(me)) = (&self.seg, self.on_seg.get(self.me).copied().flatten()) {
            let w = seg.on_cpu(me);
            if w.load(Ordering::Relaxed) & WORK != 0 {
                w.fetch_and(!WORK, Ordering::Relaxed);
            }
        }
    }

    /// Runs `leave` (a yield or a sleep) with this rank marked as not
    /// running, where waits look at it (`informed`), and as `IDLE` inside
    /// a collective's wait (`coll`).
    fn hand_over(&mut self, seg: &Segment, coll: bool, leave: impl FnOnce()) {
        if !self.informed {
            leave();
            return;
        }
        self.mark_paused(seg, coll);
        let me = self.on_seg[self.me].unwrap_or(0);
        let watching = self.slice.watching();
        if watching {
            Self::note_turn(&mut self.turn, seg, me, false, slice::stamp());
        }
        leave();
        if watching {
            Self::note_turn(&mut self.turn, seg, me, true, slice::stamp());
        }
        self.note_running();
    }

    /// `hand_over` with a yield (`yield_core`).
    fn yield_over(&mut self, seg: &Segment, coll: bool) {
        if !self.informed {
            self.yield_core();
            return;
        }
        self.mark_paused(seg, coll);
        self.yield_core();
        self.note_running();
    }

    /// Marks this rank as not running (`PAUSED`), and as `IDLE` inside a
    /// collective's wait (`coll`).
    fn mark_paused(&self, seg: &Segment, coll: bool) {
        let me = self.on_seg[self.me].unwrap_or(0);
        let idle = if coll { IDLE } else { 0 };
        seg.on_cpu(me)
            .store(self.cpu | PAUSED | idle, Ordering::Relaxed);
    }

    /// The error for a wait or send that met the dead connection to
    /// `seen`: it names the rank a rank of this host already found dead,
    /// else the first connection of this rank to die (the peer at hand may
    /// have quit because of it), and records that rank for the host's
    /// other ranks.
    fn link_death(&self, seen: usize, op: &'static str) -> Error {
        let rank = match self.seg.as_ref().and_then(|s| s.dead()) {
            Some(r) => r,
            None => {
                let (p, why) = (0..self.links.len())
                    .filter_map(|p| self.links[p].failure().map(|(why, at, _)| (at, p, why)))
                    .min_by_key(|d| (d.0, d.1))
                    .map_or((seen, String::new()), |(_, p, why)| (p, why));
                param::debug_log(param::DebugLevel::Warn, || {
                    format!("link to rank {p} failed: {why}")
                });
                p
            }
        };
        // Another rank may have recorded one since: name that one.
        let rank = self.seg.as_ref().map_or(rank, |s| s.set_dead(rank));
        Error::PeerDied { rank, op }
    }

    /// Whether a pending request still needs world rank `p`.
    fn still_needs(&self, p: usize) -> bool {
        self.reqs.iter().flatten().any(|r| {
            !r.done
                && match r.kind {
                    Kind::Send { dst, .. } => dst == p,
                    Kind::Recv { m, .. } => m.source == Some(p),
                }
        })
    }

    fn check_health(
        &mut self,
        seg: &Segment,
        op: &'static str,
        peers: &[usize],
        strict: bool,
        start: Instant,
        done: &mut impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        // This rank may have slept since it last looked: a peer can have
        // given it what the wait needs (a slot flag, a last message) and
        // exited meanwhile, which is no failure. Seen at MPI_Finalize, 3
        // ranks on 2 cores: "peer rank 1 died" after rank 1 had published
        // its barrier flag and left.
        self.progress();
        if done(self) {
            return Ok(());
        }
        if let Some((rank, code)) = seg.aborted() {
            return Err(Error::Aborted { rank, code });
        }
        // Another rank of this host found a peer dead: the ranks this wait
        // needs may be stuck because of it, so fail now, naming the dead one.
        if let Some(rank) = seg.dead() {
            return Err(Error::PeerDied { rank, op });
        }
        if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(Error::Cancelled { op });
        }
        // A dead connection fails the wait once everything it brought was
        // read and the wait still needs that peer. The error names the
        // first connection of this rank to die, which may be another one:
        // the peer this wait needs may have quit because of it.
        let failed = peers.iter().copied().find(|&p| {
            matches!(self.links[p].failure(), Some((_, _, true))) && (strict || self.still_needs(p))
        });
        if let Some(p) = failed {
            return Err(self.link_death(p, op));
        }
        for &p in peers {
            let on_host = self.on_seg.get(p).copied().flatten();
            if on_host.is_some_and(|q| !pid_alive(seg.pid_of(q))) {
                // It may have sent everything before exiting: drain first.
                self.progress();
                if done(self) {
                    return Ok(());
                }
                if strict || self.still_needs(p) {
                    let rank = seg.set_dead(p);
                    return Err(Error::PeerDied { rank, op });
                }
            }
        }
        if let Some(t) = params().timeout {
            if start.elapsed() > t {
                return Err(Error::Timeout {
                    secs: t.as_secs_f64(),
                    op,
                    peers: rank_list(peers),
                });
            }
        }
        Ok(())
    }

    /// Says on stderr that a wait in `op` for `peers` begun at `start` has
    /// lasted `warn_at` (`FERROCOLL_STALL_WARN`), if it has, and doubles
    /// `warn_at`: a hang is never silent, and a long legitimate wait says
    /// little.
    fn say_if_long(
        &self,
        op: &'static str,
        peers: &[usize],
        start: Instant,
        warn_at: &mut Option<Duration>,
    ) {
        if let Some(w) = warn_at.filter(|&w| start.elapsed() >= w) {
            *warn_at = w.checked_mul(2);
            param::say(&stall_note(self.me, op, peers, w));
        }
    }

    /// One pass over every link: push queued sends, drain arrivals.
    /// Returns whether anything moved.
    pub fn progress(&mut self) -> bool {
        // Running, this rank acts on what it was marked for.
        if self.crowded {
            self.clear_work();
        }
        let mut moved = false;
        for p in 0..self.links.len() {
            if !self.sendq[p].is_empty() {
                moved |= self.push_sends(p);
            }
            let body = matches!(self.rx[p], Rx::Body { .. }) && self.links[p].reads_directly();
            if body || self.links[p].readable() > 0 {
                moved |= self.drain(p);
            }
        }
        moved
    }

    fn ring_bell(&self, peer: usize) {
        if let Some(seg) = &self.seg {
            if let (true, Some(q)) = (self.links[peer].is_remote(), self.on_seg[peer]) {
                seg.wake(q);
            }
        }
    }

    fn push_sends(&mut self, dst: usize) -> bool {
        let mut wrote = 0;
        while let Some(&id) = self.sendq[dst].front() {
            let Some(Req {
                kind:
                    Kind::Send {
                        hdr,
                        off,
                        buf,
                        phase,
                        ..
                    },
                ..
            }) = self.reqs[id].as_mut()
            else {
                unreachable!("send queue holds sends")
            };
            let total = FRAME_BYTES
                + match phase {
                    Phase::Announce => 0,
                    _ => buf.len(),
                };
            let body = &buf.tail(0)[..total - FRAME_BYTES];
            while *off < total {
                let n = write_watched(
                    &mut self.far,
                    &mut self.links[dst],
                    body.len(),
                    |link, max, uncached| {
                        // A message that fits goes out as one unit: one
                        // publication, and the receiver finds header and data
                        // together.
                        if *off == 0 && body.len() <= max && link.write_both(hdr, body, uncached) {
                            return total;
                        }
                        if *off < FRAME_BYTES {
                            link.write_parts(&hdr[*off..], &body[..body.len().min(max)], uncached)
                        } else {
                            let from = *off - FRAME_BYTES;
                            let to = body.len().min(from.saturating_add(max));
                            link.write_parts(&[], &body[from..to], uncached)
                        }
                    },
                );
                if n == 0 {
                    break;
                }
                *off += n;
                wrote += n;
            }
            if *off < total {
                break;
            }
            let bytes = buf.len();
            self.sendq[dst].pop_front();
            if *phase == Phase::Announce {
                // Completes after the receiver asks for the data.
                *phase = Phase::AwaitCts;
                continue;
            }
            self.complete_send(id, dst, bytes);
        }
        if wrote > 0 {
            self.ring_bell(dst);
        }
        wrote > 0
    }

    /// `dst` asked for the data of our announced send `id` (`Cts`), into
    /// its place `place`.
    fn on_cts(&mut self, dst: usize, id: u64, place: u64) -> std::result::Result<(), String> {
        let Ok(id) = usize::try_from(id) else {
            return Err(format!("a request for the data of send {id}"));
        };
        let Some(Req {
            kind:
                Kind::Send {
                    dst: d,
                    hdr,
                    off,
                    buf,
                    phase: phase @ Phase::AwaitCts,
                },
            done: false,
            ..
        }) = self.reqs.get_mut(id).and_then(Option::as_mut)
        else {
            return Err(format!(
                "a request for the data of send {id}, which awaits none"
            ));
        };
        if *d != dst {
            return Err(format!("a request for the data of a send to rank {d}"));
        }
        let mut f = Frame::eager(0, 0, buf.len());
        f.kind = FrameKind::Data;
        f.token = place;
        *hdr = f.encode();
        *off = 0;
        *phase = Phase::Data;
        self.sendq[dst].push_back(id);
        self.push_sends(dst);
        Ok(())
    }

    /// Reads what `src`'s link holds: headers, and bodies into their
    /// receives or into unexpected buffers. It stops after a message that
    /// completes a receive when no other posted receive may take the next
    /// one from `src`: what follows stays in the link until a later
    /// progress call, by which time its receive is usually posted, so it
    /// lands straight in the user's buffer. Draining on buffered every
    /// message a sender had run ahead with (pages faulted in, zeroed,
    /// copied twice): a 2-rank stream of blocking sends and receives ran at
    /// 4 GB/s from 8 to 48 KiB per message, us per message before/after
    /// (Open MPI): 8 KiB 2.06/0.62 (2.55), 16 KiB 4.06/1.20 (3.29), 32 KiB
    /// 8.15/2.34 (4.29), 48 KiB 12.5/3.47 (5.37). Where ranks outnumber
    /// cores it drains on as before: a sender that finds its ring full
    /// must hand its core over, which costs more than the second copy
    /// (4 ranks on 2 cores, three senders to one receiver, us per round,
    /// drain on / stop: 16 KiB 12.3 / 22.2, 32 KiB 18.4 / 38.8).
    fn drain(&mut self, src: usize) -> bool {
        let mut read = 0;
        // Bounded, so that a peer sending as fast as this rank reads cannot
        // keep it here: the wait must see its own receive complete (a scan
        // over TCP livelocked so, its first rank sending for ever).
        for _ in 0..DRAIN_STEPS {
            if read >= DRAIN_BUDGET {
                break;
            }
            if let Some((n, completed)) = self.take_whole(src) {
                read += n;
                if completed && !self.crowded && !self.awaits_from(src) {
                    break;
                }
                continue;
            }
            let in_body = matches!(self.rx[src], Rx::Body { .. });
            // A body is read straight into its destination (a TCP link
            // reads the socket itself), so no `readable` first.
            if !in_body && self.links[src].readable() == 0 {
                break;
            }
            match &mut self.rx[src] {
                Rx::Header { got, hdr } => {
                    let mut g = *got;
                    read += self.links[src].read_with(FRAME_BYTES - g, |s| {
                        hdr[g..g + s.len()].copy_from_slice(s);
                        g += s.len();
                    });
                    *got = g;
                    if g == FRAME_BYTES {
                        let hdr = *hdr;
                        if let Err(why) = self.on_header(src, &hdr) {
                            // The stream from `src` can no longer be
                            // followed: fail everything, naming the sender.
                            param::debug_log(param::DebugLevel::Warn, || {
                                format!("rank {src} sent a malformed stream: {why}")
                            });
                            self.poison(Error::Protocol { rank: src, why });
                            return true;
                        }
                    }
                }
                Rx::Body { frame, target, off } => {
                    let len = frame.len as usize;
                    let want = len - *off;
                    let o = *off;
                    let link = &mut self.links[src];
                    let n = match target {
                        Target::Req(id) => {
                            let Some(Req {
                                kind: Kind::Recv { buf, .. },
                                ..
                            }) = self.reqs[*id].as_ref()
                            else {
                                unreachable!("body targets a receive")
                            };
                            let fit = buf.len().saturating_sub(o).min(want);
                            // A message too large for the cache goes on to
                            // memory past it (`message_uncached_from` has the
                            // figures).
                            if fit > 0 && len >= message_uncached_from() {
                                buf.fill_at(o, fit, |d| link.read_into_uncached(d))
                            } else if fit > 0 {
                                buf.fill_at(o, fit, |d| link.read_into(d))
                            } else {
                                // Past the buffer's end the bytes are dropped
                                // (truncation is reported in the status).
                                link.read_with(want, |_| {})
                            }
                        }
                        Target::Unexpected(uid) => {
                            let uid = *uid;
                            let pos = unexpected_pos(&self.unexpected, uid)
                                .expect("buffered message exists");
                            let u = &mut self.unexpected[pos];
                            // Grow with what arrives, at most doubling.
                            if u.data.len() == o {
                                let grown = len.min(o + o.max(BUFFER_AHEAD));
                                u.data.resize(grown, 0);
                            }
                            link.read_into(&mut u.data[o..])
                        }
                    };
                    if n == 0 {
                        break;
                    }
                    read += n;
                    *off = o + n;
                    if o + n == len
                        && self.finish_message(src)
                        && !self.crowded
                        && !self.awaits_from(src)
                    {
                        break;
                    }
                }
            }
        }
        if read > 0 {
            // The sender may be waiting for ring space.
            self.ring_bell(src);
        }
        read > 0
    }

    /// Takes a small eager message that lies whole at the head of `src`'s
    /// shared-memory link straight into the posted receive it matches, in
    /// one step: `(bytes read, true)`. `None` (nothing read) for anything
    /// else, which `drain` takes a piece at a time: the header into `rx`,
    /// a match, the body, the end of the message. That way cost about 600
    /// instructions per 8-byte message.
    fn take_whole(&mut self, src: usize) -> Option<(usize, bool)> {
        if !matches!(self.rx[src], Rx::Header { got: 0, .. }) || self.posted.is_empty() {
            return None;
        }
        if let Some(taken) = self.take_from_post(src) {
            return taken;
        }
        let mut hdr = [0u8; FRAME_BYTES];
        if !self.links[src].peek(&mut hdr) {
            return None;
        }
        // A malformed header is `on_header`'s to report.
        let frame = Frame::decode(&hdr).filter(|f| f.kind == FrameKind::Eager)?;
        let len = usize::try_from(frame.len)
            .ok()
            .filter(|&l| l <= WHOLE_MAX && FRAME_BYTES + l <= self.links[src].readable())?;
        let id = self.match_posted(src, &frame)?;
        let (buf, link) = (self.recv_buf(id), &mut self.links[src]);
        link.read_with(FRAME_BYTES, |_| {});
        let fit = buf.len().min(len);
        let got = buf.fill_at(0, fit, |d| link.read_into(d));
        // Past the buffer's end the bytes are dropped (truncation is
        // reported in the status).
        let dropped = link.read_with(len - fit, |_| {});
        debug_assert_eq!(got + dropped, len, "the message lay whole on the link");
        self.complete(id, recv_status(src, &frame, buf.len()));
        Some((FRAME_BYTES + len, true))
    }

    /// `take_whole` where the next bytes of `src`'s link are a post not
    /// yet read into (`None` where they are not): a message that lies
    /// whole in it is read where it lies, header and body, with one look
    /// at the post (`Ring::post_framed`, which gives a short header back
    /// lengthened). The
    /// way through `peek` looks five times (`peek`, `readable` and three
    /// reads) and copies the header out: 8-byte messages took about 270
    /// instructions between the link and the engine's calls. `Some(None)`:
    /// not taken, and that way could not take it either, since it too
    /// sees only the post's bytes.
    fn take_from_post(&mut self, src: usize) -> Option<Option<(usize, bool)>> {
        let (head, rest) = self.links[src].post_framed()?;
        let whole = || {
            let frame = Frame::decode(&head).filter(|f| f.kind == FrameKind::Eager)?;
            let len = usize::try_from(frame.len)
                .ok()
                .filter(|&l| l <= rest.len())?;
            Some((frame, len))
        };
        let Some((frame, len)) = whole() else {
            return Some(None);
        };
        let Some(hit) = self.find_posted(src, &frame) else {
            return Some(None);
        };
        let id = self.posted[hit];
        let buf = self.recv_buf(id);
        let fit = buf.len().min(len);
        // Past the buffer's end the bytes are dropped (truncation is
        // reported in the status).
        let body = &rest[..fit];
        buf.fill_at(0, fit, |d| {
            crate::copy::copy_message(d, body);
            fit
        });
        self.links[src].consume_post(FRAME_BYTES + len);
        self.posted.remove(hit);
        self.complete(id, recv_status(src, &frame, buf.len()));
        Some(Some((FRAME_BYTES + len, true)))
    }

    /// The buffer of receive `id`.
    fn recv_buf(&self, id: ReqId) -> RawBuf {
        match self.reqs[id].as_ref() {
            Some(Req {
                kind: Kind::Recv { buf, .. },
                ..
            }) => *buf,
            _ => unreachable!("a live receive"),
        }
    }

    /// Acts on a header from `src`; `Err` says why it cannot be part of a
    /// well-formed stream (the bytes came from a broken or foreign peer).
    fn on_header(
        &mut self,
        src: usize,
        hdr: &[u8; FRAME_BYTES],
    ) -> std::result::Result<(), String> {
        let frame = Frame::decode(hdr).ok_or("a header with a bad magic number or kind")?;
        // (A `Cts` carries a place token where the others carry a length.)
        if frame.kind != FrameKind::Cts && frame.len > isize::MAX as u64 {
            return Err(format!("a message of {} bytes", frame.len));
        }
        self.rx[src] = HDR0;
        match frame.kind {
            FrameKind::Eager => {
                let target = match self.match_posted(src, &frame) {
                    Some(id) => Target::Req(id),
                    None => {
                        let data = self.buffer_for(frame.len as usize);
                        self.buffer_unexpected(src, frame, data, None)
                    }
                };
                self.start_body(src, frame, target);
            }
            FrameKind::Rts => match self.match_posted(src, &frame) {
                Some(id) => self.ask_for(id, src, frame, frame.token),
                None => {
                    self.buffer_unexpected(src, frame, Vec::new(), Some(frame.token));
                }
            },
            FrameKind::Pull if !self.links[src].is_shm() => {
                return Err("an offer to read its memory from another host".into());
            }
            FrameKind::Pull => match self.match_posted(src, &frame) {
                Some(id) => self.pull(id, src, frame),
                None => {
                    let u = self.buffer_unexpected(src, frame, Vec::new(), Some(frame.aux.into()));
                    if let Target::Unexpected(uid) = u {
                        let pos = unexpected_pos(&self.unexpected, uid).expect("just queued");
                        self.unexpected[pos].pull = true;
                    }
                }
            },
            FrameKind::Done => self.on_done(src, frame.token)?,
            FrameKind::Cts => {
                if frame.aux == 1 && self.cma {
                    // The receiver cannot read this rank's memory: announce
                    // no more `Pull`s, and only messages the ring would
                    // take slower than a round trip.
                    self.stop_pulls();
                }
                self.on_cts(src, frame.token, frame.len)?
            }
            FrameKind::Data => {
                let target = place_of(frame.token);
                // Only a place that asked `src` for its data takes it.
                let announced = match target {
                    Target::Req(id) => match self.reqs.get_mut(id).and_then(Option::as_mut) {
                        Some(Req {
                            kind: Kind::Recv { incoming, .. },
                            ..
                        }) => incoming.take_if(|(from, _)| *from == src).map(|(_, f)| f),
                        _ => None,
                    },
                    Target::Unexpected(uid) => unexpected_pos(&self.unexpected, uid)
                        .map(|pos| &mut self.unexpected[pos])
                        .filter(|u| u.src == src && u.asked)
                        .map(|u| {
                            u.asked = false;
                            u.frame
                        }),
                };
                let Some(announced) = announced else {
                    return Err("data for no receive that asked for it".into());
                };
                if frame.len != announced.len {
                    return Err(format!(
                        "{} bytes of data for a message announced as {}",
                        frame.len, announced.len
                    ));
                }
                self.start_body(src, announced, target);
            }
        }
        Ok(())
    }

    /// Removes and returns the first posted receive that accepts `frame`.
    fn match_posted(&mut self, src: usize, frame: &Frame) -> Option<ReqId> {
        let hit = self.find_posted(src, frame)?;
        Some(self.posted.remove(hit))
    }

    /// Where in `posted` the first receive that accepts `frame` from `src`
    /// is.
    fn find_posted(&self, src: usize, frame: &Frame) -> Option<usize> {
        self.posted.iter().position(|&id| {
            matches!(&self.reqs[id], Some(Req { kind: Kind::Recv { m, .. }, .. }) if m.accepts(src, frame))
        })
    }

    /// Keeps a message no receive has matched yet.
    fn buffer_unexpected(
        &mut self,
        src: usize,
        frame: Frame,
        data: Vec<u8>,
        announced: Option<u64>,
    ) -> Target {
        let id = self.next_unexpected;
        self.next_unexpected += 1;
        self.unexpected.push_back(Unexpected {
            id,
            src,
            frame,
            data,
            complete: false,
            claimed: None,
            announced,
            asked: false,
            pull: false,
        });
        Target::Unexpected(id)
    }

    /// The payload of `frame` follows on `src`'s link, for `target`.
    fn start_body(&mut self, src: usize, frame: Frame, target: Target) {
        self.rx[src] = Rx::Body {
            frame,
            target,
            off: 0,
        };
        if frame.len == 0 {
            self.finish_message(src);
        }
    }

    /// Ends the message whose body `src`'s link delivered; returns whether
    /// that completed a receive.
    fn finish_message(&mut self, src: usize) -> bool {
        let Rx::Body { frame, target, .. } = std::mem::replace(&mut self.rx[src], HDR0) else {
            unreachable!("finishing a body")
        };
        match target {
            Target::Req(id) => {
                let st = recv_status(src, &frame, self.recv_buf(id).len());
                self.complete(id, st);
                true
            }
            Target::Unexpected(uid) => {
                let pos = unexpected_pos(&self.unexpected, uid).expect("buffered message exists");
                let u = &mut self.unexpected[pos];
                u.complete = true;
                match u.claimed {
                    Some(id) => {
                        let u = self.unexpected.remove(pos).expect("index in range");
                        self.deliver_buffered(id, u);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    /// Whether a posted receive may take the next message from `src`.
    fn awaits_from(&self, src: usize) -> bool {
        self.posted.iter().any(|&id| {
            matches!(&self.reqs[id], Some(Req { kind: Kind::Recv { m, .. }, .. }) if m.source.is_none_or(|s| s == src))
        })
    }
}

/// A CPU (as `Segment::on_cpu` words name it, 1 + the CPU) other than
/// `mine` on which every rank, by its word in `words`, has handed its core
/// over with no work marked.
fn idle_cpu(words: &[u32], mine: u32) -> Option<u32> {
    words
        .iter()
        .map(|&w| cpu_of(w))
        .filter(|&c| c != 0 && c != mine)
        .find(|&c| {
            words
                .iter()
                .filter(|&&w| cpu_of(w) == c)
                .all(|&w| w & PAUSED != 0 && w & WORK == 0)
        })
}

/// Where buffered message `uid` is in `q`, if there. Ids grow as messages
/// are queued and removal keeps the order, so a binary search finds it: a
/// scan cost O(backlog) per arriving message, and a rank behind a sender
/// that ran far ahead (rank 1 of a scan over TCP) took seconds to catch up.
/// World ranks as a wait's messages name them: `0,3`, or `any`.
fn rank_list(peers: &[usize]) -> String {
    if peers.is_empty() {
        return "any".into();
    }
    let list: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
    list.join(",")
}

/// What rank `me` says once a wait in `op` for `peers` has blocked for
/// `waited` (`FERROCOLL_STALL_WARN`): without `FERROCOLL_TIMEOUT`, ranks
/// that never make the matching call, or make it with another count or
/// root, would otherwise wait in silence.
fn stall_note(me: usize, op: &str, peers: &[usize], waited: Duration) -> String {
    format!(
        "ferrocoll: rank {me} has waited {} s in {op} for rank(s) {} and waits on \
         (FERROCOLL_TIMEOUT=SECS ends such a wait with an error; FERROCOLL_CHECK=1 reports \
         mismatched collectives)",
        waited.as_secs_f64(),
        rank_list(peers)
    )
}

fn unexpected_pos(q: &VecDeque<Unexpected>, uid: u64) -> Option<usize> {
    q.binary_search_by_key(&uid, |u| u.id).ok()
}

/// A collective's receive must be filled exactly: a shorter or longer
/// message means the ranks passed mismatched arguments.
fn exact_fill(st: &Status, want: usize, op: &str) -> Result<()> {
    if st.error.is_none() && st.bytes == want {
        return Ok(());
    }
    let got = match st.error.as_deref() {
        Some(Error::Truncated { got, .. }) => *got,
        // The request was ended by a failure (a dead or broken peer).
        Some(e) => return Err(e.clone()),
        None => st.bytes,
    };
    Err(Error::InvalidArg(format!(
        "{op}: world rank {} sent {got} bytes where {want} were expected \
         (ranks passed different counts or datatypes)",
        st.source
    )))
}

/// The match and buffer of a receive from `src` into `buf` that the
/// caller waits for before it returns (`recv_now`, `recv_posted`).
fn blocking_recv(src: usize, ctx: u32, tag: Option<i32>, buf: &mut [u8]) -> (Match, RawBuf) {
    let m = Match {
        source: Some(src),
        ctx,
        tag,
    };
    // SAFETY: the request is waited for and freed before the caller
    // returns, within `buf`'s borrow (or the engine is poisoned, which drops
    // every request's buffer).
    (m, unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) })
}

fn recv_status(src: usize, f: &Frame, cap: usize) -> Status {
    let len = f.len as usize;
    Status {
        source: src,
        tag: f.tag,
        bytes: len.min(cap),
        error: (len > cap).then(|| Box::new(Error::Truncated { got: len, cap, src })),
    }
}

impl Engine {
    /// Sends `send` (world rank, bytes) while receiving exactly
    /// `recv.1.len()` bytes from world rank `recv.0`, on context `ctx` with
    /// tag `tag`, handing each `piece` bytes of the receive (the last piece
    /// may be shorter) to `fold(offset, bytes)` as soon as it has landed:
    /// the bytes are used while still in cache, and the rest keeps arriving
    /// meanwhile. Returns once everything was sent, received and folded.
    #[allow(clippy::too_many_arguments)]
    pub fn exchange_folding(
        &mut self,
        ctx: u32,
        tag: i32,
        send: Option<(usize, &[u8])>,
        recv: (usize, &mut [u8]),
        piece: usize,
        mut fold: impl FnMut(usize, &mut [u8]),
        op: &'static str,
    ) -> Result<()> {
        let (src, rbuf) = recv;
        let len = rbuf.len();
        let piece = piece.max(1);
        // SAFETY: `rbuf` is borrowed for this whole call, which returns only
        // once the receive completed or the engine was poisoned (dropping
        // every pending request); it is only touched through `raw` below.
        let raw = unsafe { RawBuf::new(rbuf.as_mut_ptr(), len) };
        let m = Match {
            source: Some(src),
            ctx,
            tag: Some(tag),
        };
        let rid = self.irecv(m, raw)?;
        let sid = match send {
            Some((dst, buf)) => {
                // SAFETY: as above; send buffers are only read.
                let sraw = unsafe { RawBuf::new(buf.as_ptr() as *mut u8, buf.len()) };
                Some(self.isend_as(dst, ctx, tag, sraw, op, SendKind::Folded)?)
            }
            None => None,
        };
        let ids: Vec<ReqId> = std::iter::once(rid).chain(sid).collect();
        let peers = self.peers_of(&ids);
        let mut folded = 0;
        loop {
            let landed = self.arrived(rid);
            while folded < landed && (landed - folded >= piece || self.is_done(rid)) {
                let hi = (folded + piece).min(landed);
                // SAFETY: bytes below `landed` are final: the engine writes a
                // receive in order and only beyond what has landed.
                fold(folded, unsafe { raw.landed_mut(folded, hi - folded) });
                folded = hi;
            }
            if self.is_done(rid) && folded == self.arrived(rid) {
                break;
            }
            let target = (folded + piece).min(len);
            self.wait_loop(op, &peers, |e| e.arrived(rid) >= target || e.is_done(rid))?;
        }
        if let Some(s) = sid {
            self.wait(s, op)?;
        }
        let st = self.take(rid);
        exact_fill(&st, len, op)
    }

    /// Sends and receives a set of messages on context `ctx` with one tag
    /// (sends of `kind`, see `isend_as`), running `meanwhile` once every
    /// message is posted and before the wait: work of the caller's own
    /// that overlaps the transfers (a root's own block, while its receivers
    /// take theirs), one piece per call till it returns `false`, the links
    /// progressed between pieces, so that a ring its receiver empties is
    /// refilled meanwhile. Returns when all have completed. Every receive must be
    /// filled exactly (collectives know their sizes); a shorter or longer
    /// message means the ranks called the collective with mismatched
    /// arguments.
    ///
    /// Peers are given in some numbering that `world` turns into world ranks.
    #[allow(clippy::too_many_arguments)]
    pub fn exchange_then(
        &mut self,
        ctx: u32,
        tag: i32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
        world: impl Fn(usize) -> usize,
        op: &'static str,
        kind: SendKind,
        mut meanwhile: impl FnMut() -> bool,
    ) -> Result<()> {
        let mut ids = Vec::with_capacity(sends.len() + recvs.len());
        for (src, buf) in recvs.iter_mut() {
            let m = Match {
                source: Some(world(*src)),
                ctx,
                tag: Some(tag),
            };
            // SAFETY: `buf` is borrowed for this whole call, and the call only
            // returns once the request completed or the engine was poisoned
            // (which drops every pending request).
            let raw = unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) };
            ids.push(self.irecv(m, raw)?);
        }
        let nrecv = ids.len();
        for (dst, buf) in sends {
            // SAFETY: as above; send buffers are only read.
            let raw = unsafe { RawBuf::new(buf.as_ptr() as *mut u8, buf.len()) };
            ids.push(self.isend_as(world(*dst), ctx, tag, raw, op, kind)?);
        }
        while meanwhile() {
            self.progress();
        }
        self.wait_all(&ids, op)?;
        let mut bad = None;
        for (i, &id) in ids.iter().enumerate() {
            let st = self.take(id);
            if i < nrecv && bad.is_none() {
                bad = exact_fill(&st, recvs[i].1.len(), op).err();
            }
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What `crate::fuzz` needs to feed a peer's byte stream to an engine.
#[cfg(feature = "fuzzing")]
impl Engine {
    /// World rank 0 of 2, whose link to rank 1 is the TCP connection `sock`.
    pub fn fuzz_over_tcp(sock: std::net::TcpStream) -> Result<Engine> {
        let (g, mut tcp) = TcpLinks::start(vec![vec![sock]], || {})?;
        let links = vec![Link::SelfLoop(VecDeque::new()), Link::Tcp(tcp.remove(0))];
        let mut e = Engine::with_links(0, links, None);
        e.tcp = Some(g);
        Ok(e)
    }

    /// What an idle wait does besides sleeping: asks for announced data.
    pub fn fuzz_idle(&mut self) -> bool {
        self.accept_announced()
    }

    /// Whether rank 1's connection closed and everything it sent was read,
    /// or the engine gave up on it.
    pub fn fuzz_finished(&self) -> bool {
        self.broken.is_some() || matches!(self.links[1].failure(), Some((_, _, true)))
    }
}

/// A rank's own record of its `Segment::turn` word.
#[derive(Clone, Copy, Debug, Default)]
struct Turn {
    /// Clock units (`slice::stamp`) of its past turns (wrapping).
    busy: u32,
    /// When its current turn began (`slice::stamp`); 0: not known, or
    /// off its core.
    back: u32,
}

/// The ranks of a segment last seen on one CPU (`Engine::yield_core`), and
/// their `Segment::turn` words as this rank last read them.
#[derive(Debug, Default)]
struct Mates {
    /// The CPU (`Segment::on_cpu`'s CPU part) they were seen on.
    cpu: u32,
    /// Yields left before they are looked up again.
    left: u32,
    ranks: Vec<usize>,
    words: Vec<u64>,
}

impl Mates {
    /// Yields between two lookups.
    const FOR: u32 = 64;

    /// Looks up the ranks of `seg` but `me` last seen on `cpu`, and reads
    /// their turn words.
    fn look(&mut self, seg: &Segment, me: usize, cpu: u32) {
        self.cpu = cpu;
        self.left = Mates::FOR;
        self.ranks.clear();
        self.ranks.extend(
            (0..seg.nranks())
                .filter(|&p| p != me && cpu_of(seg.on_cpu(p).load(Ordering::Relaxed)) == cpu),
        );
        self.read(seg);
    }

    fn read(&mut self, seg: &Segment) {
        self.words.clear();
        self.words.extend(
            self.ranks
                .iter()
                .map(|&p| seg.turn(p).load(Ordering::Relaxed)),
        );
    }

    /// The sum of the clock units they had run by `now` (`slice::ran_by`,
    /// wrapping), from the words last read.
    fn ran_by(&self, now: u32) -> u32 {
        self.words
            .iter()
            .fold(0u32, |sum, &w| sum.wrapping_add(slice::ran_by(w, now)))
    }

    /// `ran_by` from their words as they are now, which are kept.
    fn ran_by_now(&mut self, seg: &Segment, now: u32) -> u32 {
        self.read(seg);
        self.ran_by(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_waits_name_the_call_and_the_ranks() {
        assert_eq!(
            stall_note(3, "MPI_Allreduce", &[0, 2], Duration::from_millis(500)),
            "ferrocoll: rank 3 has waited 0.5 s in MPI_Allreduce for rank(s) 0,2 and waits on \
             (FERROCOLL_TIMEOUT=SECS ends such a wait with an error; FERROCOLL_CHECK=1 reports \
             mismatched collectives)"
        );
        assert!(stall_note(0, "MPI_Recv", &[], Duration::from_secs(60))
            .starts_with("ferrocoll: rank 0 has waited 60 s in MPI_Recv for rank(s) any and"));
    }

    #[test]
    fn scratch_pool_reuses_best_fit_without_growing_lengths() {
        let mut e = Engine::singleton();
        let mut big = Vec::with_capacity(8 << 20);
        big.resize(100, 7u8);
        e.recycle(big);
        e.recycle(vec![1u8; 64 * 1024]);
        // Best fit: the 64 KiB buffer, cut to length, contents left as is.
        let v = e.scratch_for(1000);
        assert_eq!((v.len(), v.capacity()), (1000, 64 * 1024));
        assert!(v.iter().all(|&b| b == 1));
        e.recycle(v);
        // A recycled buffer keeps its length: nothing is zeroed on the way.
        assert!(e.spare.iter().all(|v| v.len() <= 1000));
        let w = e.scratch_for(1 << 20);
        assert_eq!((w.len(), w.capacity()), (1 << 20, 8 << 20));
        assert!(w[..100].iter().all(|&b| b == 7) && w[100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn scratch_pool_does_not_cut_long_buffers_for_small_needs() {
        let mut e = Engine::singleton();
        e.recycle(vec![3u8; 4 << 20]);
        // Cutting it to 64 KiB would cost zeroing 4 MiB at the next large
        // need: a fresh buffer serves the small one.
        let x = e.scratch_for(64 * 1024);
        assert!(x.capacity() < 4 << 20);
        e.recycle(x);
        assert!(e.spare.iter().any(|v| v.len() == 4 << 20));
        let y = e.scratch_for(4 << 20);
        assert!(y.len() == 4 << 20 && y.iter().all(|&b| b == 3));
        e.recycle(y);
        // A need within CUT_MAX of its length still takes it.
        assert_eq!(e.scratch_for((4 << 20) - 1000).capacity(), 4 << 20);
    }

    /// Small unexpected messages wait in pooled buffers of `SMALL_CAP`
    /// bytes, which go back to the pool once delivered (at most
    /// `SMALL_COUNT` of them); a larger one does not take one. Fails if a
    /// small message gets a buffer of another size, if its bytes change, or
    /// if the pool does not take its buffers back, or keeps too many.
    #[test]
    fn small_unexpected_messages_reuse_pooled_buffers() {
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg.clone());
        let mut rx = Engine::over_shm(1, seg);
        let lens = [8, 100, SMALL_CAP, SMALL_CAP + 1];
        let msgs: Vec<Vec<u8>> = lens
            .iter()
            .map(|&n| (0..n).map(|j| (j * 3 + n) as u8).collect())
            .collect();
        for (tag, m) in msgs.iter().enumerate() {
            // SAFETY: `msgs` outlives the engines.
            let raw = unsafe { RawBuf::new(m.as_ptr() as *mut u8, m.len()) };
            let id = tx.isend(1, 7, tag as i32, raw, "send").unwrap();
            assert!(tx.is_done(id), "{} bytes go eagerly", m.len());
        }
        while rx.unexpected.len() < lens.len() || !rx.unexpected.iter().all(|u| u.complete) {
            rx.progress();
        }
        for u in &rx.unexpected {
            let pooled = u.data.capacity() == SMALL_CAP;
            assert_eq!(pooled, u.data.len() <= SMALL_CAP, "{} bytes", u.data.len());
        }
        for (tag, m) in msgs.iter().enumerate() {
            let mut got = vec![0u8; m.len()];
            // SAFETY: `got` outlives the receive, complete on return.
            let r = unsafe { post_recv(&mut rx, 0, Some(tag as i32), &mut got) };
            assert!(rx.is_done(r));
            assert!(&got == m, "{} bytes", m.len());
        }
        assert_eq!(rx.small.len(), 3, "the three small buffers are back");
        for _ in 0..SMALL_COUNT + 5 {
            rx.recycle(Vec::with_capacity(SMALL_CAP));
        }
        assert_eq!(rx.small.len(), SMALL_COUNT);
        assert!(rx.small.iter().all(|v| v.is_empty()));
    }

    /// Whether the rendezvous sizes and reads in place are the engine's
    /// own (neither `FERROCOLL_RNDV_BYTES` nor `FERROCOLL_CMA` set), which
    /// the tests of send kinds assume; says why not where they are not.
    fn default_rendezvous() -> bool {
        let default = params().rndv_min.is_none() && params().cma;
        if !default {
            eprintln!("skipped: FERROCOLL_RNDV_BYTES or FERROCOLL_CMA set");
        }
        default
    }

    /// Where ranks outnumber cores, a paired send (`MPI_Sendrecv`'s) below
    /// `CROWDED_PAIRED_RNDV` leaves eagerly, while a plain one of the same
    /// size (from `CROWDED_PULL_RNDV`) waits for its reader; elsewhere both
    /// wait from `PULL_RNDV`. Fails if either chooses otherwise.
    #[test]
    fn paired_sends_leave_eagerly_where_ranks_outnumber_cores() {
        if !default_rendezvous() {
            return;
        }
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg);
        // Within one ring chunk, which `send_now` writes at once.
        let crowded_len = CROWDED_PULL_RNDV + CROWDED_PULL_RNDV / 2;
        assert!((CROWDED_PULL_RNDV..CROWDED_PAIRED_RNDV).contains(&crowded_len));
        let bufs = [vec![3u8; PULL_RNDV], vec![3u8; crowded_len]];
        for (crowded, data) in [(false, &bufs[0]), (true, &bufs[1])] {
            // SAFETY: `bufs` outlives the engine, dropped first.
            let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, data.len()) };
            tx.crowded = crowded;
            tx.rndv_min = rndv_default(true, crowded);
            let paired = tx.isend_as(1, 7, 1, raw, "send", SendKind::Paired).unwrap();
            let plain = tx.isend(1, 7, 1, raw, "send").unwrap();
            assert_eq!(tx.is_done(paired), crowded, "crowded {crowded}");
            assert!(!tx.is_done(plain), "crowded {crowded}");
            assert_eq!(
                tx.send_now(1, 7, 1, data, SendKind::Paired, "test")
                    .unwrap(),
                crowded
            );
            assert!(!tx.send_now(1, 7, 1, data, SendKind::Plain, "test").unwrap());
        }
        drop(tx);
    }

    /// Every announced send but a root's to several ranks
    /// (`SendKind::Rooted`, read in place: `Pull`) streams through the ring
    /// (`Rts`), whether ranks outnumber cores or not, where busy senders'
    /// messages are not read (`read_busy` off, or no receive pending here);
    /// where ranks outnumber cores, a paired one leaves eagerly below
    /// `CROWDED_PAIRED_RNDV`. Fails if any announces itself otherwise.
    #[test]
    fn announced_sends_stream_where_ranks_have_cores_of_their_own() {
        if !default_rendezvous() {
            return;
        }
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg);
        tx.read_busy = false;
        let mid = vec![5u8; 4 * PULL_RNDV];
        let big = vec![5u8; 4 << 20];
        assert!(mid.len() < big.len() && PULL_RNDV < mid.len());
        assert!(big.len() >= CROWDED_PAIRED_RNDV.max(LONE_EAGER));
        for crowded in [false, true] {
            tx.crowded = crowded;
            tx.rndv_min = rndv_default(true, crowded);
            let paired_mid = if crowded {
                FrameKind::Eager
            } else {
                FrameKind::Rts
            };
            for (data, kind, want) in [
                (&mid, SendKind::Program, FrameKind::Rts),
                (&mid, SendKind::Paired, paired_mid),
                (&mid, SendKind::Plain, FrameKind::Rts),
                (&mid, SendKind::Rooted, FrameKind::Pull),
                (&big, SendKind::Program, FrameKind::Rts),
                (&big, SendKind::Paired, FrameKind::Rts),
                (&big, SendKind::Plain, FrameKind::Rts),
                (&big, SendKind::Lone, FrameKind::Rts),
                (&big, SendKind::Rooted, FrameKind::Pull),
            ] {
                // SAFETY: `mid` and `big` outlive the engine, dropped first.
                let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, data.len()) };
                let id = tx.isend_as(1, 7, 1, raw, "send", kind).unwrap();
                let got = announced_as(&tx, id);
                assert!(
                    got == want,
                    "crowded {crowded}, {} bytes: send kind {} announced as frame kind {}, not {}",
                    data.len(),
                    kind as u8,
                    got as u8,
                    want as u8
                );
            }
        }
        drop(tx);
    }

    /// The frame kind send `id` announced itself with.
    fn announced_as(tx: &Engine, id: ReqId) -> FrameKind {
        match tx.reqs[id].as_ref().map(|r| &r.kind) {
            Some(Kind::Send { hdr, .. }) => Frame::decode(hdr).expect("a header").kind,
            _ => panic!("request {id} is no send"),
        }
    }

    /// A busy sender's message is read in place from `BUSY_RECEIVING`
    /// bytes of receives pending at its sender, once it and they together
    /// pass `BUSY_READ_PAST` (`CROWDED_BUSY_READ_PAST` where ranks
    /// outnumber cores), and not at or below either. Fails if a bound is
    /// off by one or the two thresholds are swapped.
    #[test]
    fn busy_senders_are_read_past_their_bounds() {
        for (crowded, past) in [(false, BUSY_READ_PAST), (true, CROWDED_BUSY_READ_PAST)] {
            let r = BUSY_RECEIVING;
            assert!(r < past, "crowded {crowded}");
            assert!(
                !busy_sender_reads(past - r, r, crowded),
                "crowded {crowded}"
            );
            assert!(
                busy_sender_reads(past - r + 1, r, crowded),
                "crowded {crowded}"
            );
            // Too little received, however large the message.
            assert!(!busy_sender_reads(usize::MAX, r - 1, crowded));
            assert!(!busy_sender_reads(0, 0, crowded));
            assert!(busy_sender_reads(usize::MAX, r, crowded));
        }
        const { assert!(CROWDED_BUSY_READ_PAST < BUSY_READ_PAST) };
        assert!(busy_sender_reads(BUSY_READ_PAST, BUSY_RECEIVING, true));
        assert!(!busy_sender_reads(
            BUSY_READ_PAST - BUSY_RECEIVING,
            BUSY_RECEIVING,
            false
        ));
    }

    /// With `read_busy` on, an announced message goes by `Pull` while its
    /// sender has large receives live (pending, or completed but not yet
    /// waited for, as one that read its message at once), and by `Rts`
    /// without them, with `read_busy` off, or when its receiver folds it
    /// (`SendKind::Folded`); a root's goes by `Pull` either way, a 2-rank
    /// exchange's (`SendKind::Swap`) whenever `read_busy` is on. Fails if
    /// any announces itself otherwise.
    #[test]
    fn busy_senders_offer_their_messages_to_be_read() {
        if !default_rendezvous() {
            return;
        }
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg);
        tx.read_busy = true;
        tx.crowded = false;
        tx.rndv_min = rndv_default(true, false);
        let big = vec![5u8; BUSY_READ_PAST];
        let mut inbox = vec![0u8; BUSY_RECEIVING];
        let send = |tx: &mut Engine, kind: SendKind| {
            // SAFETY: `big` outlives the engine, dropped first.
            let raw = unsafe { RawBuf::new(big.as_ptr() as *mut u8, big.len()) };
            let id = tx.isend_as(1, 7, 1, raw, "send", kind).unwrap();
            announced_as(tx, id) as u8
        };
        let (pull, rts) = (FrameKind::Pull as u8, FrameKind::Rts as u8);
        assert_eq!(send(&mut tx, SendKind::Program), rts, "nothing received");
        assert_eq!(send(&mut tx, SendKind::Swap), pull, "swap");
        // SAFETY: `inbox` outlives the engine, dropped first.
        let raw = unsafe { RawBuf::new(inbox.as_mut_ptr(), inbox.len()) };
        let m = Match {
            source: Some(1),
            ctx: 7,
            tag: Some(2),
        };
        let rid = tx.irecv(m, raw).unwrap();
        for kind in [SendKind::Program, SendKind::Paired, SendKind::Plain] {
            assert_eq!(send(&mut tx, kind), pull, "kind {}", kind as u8);
        }
        assert_eq!(send(&mut tx, SendKind::Folded), rts, "folded");
        tx.read_busy = false;
        assert_eq!(send(&mut tx, SendKind::Program), rts, "read_busy off");
        assert_eq!(send(&mut tx, SendKind::Swap), rts, "swap, read_busy off");
        assert_eq!(send(&mut tx, SendKind::Rooted), pull, "rooted");
        tx.read_busy = true;
        // Received already, not yet waited for: still busy. (As a message
        // that matched it would have, it leaves the posted receives.)
        tx.posted.retain(|&p| p != rid);
        tx.complete(rid, Status::default());
        assert_eq!(
            send(&mut tx, SendKind::Program),
            pull,
            "received, not taken"
        );
        tx.take(rid);
        assert_eq!(send(&mut tx, SendKind::Program), rts, "receive taken");
        drop(tx);
    }

    /// Where ranks outnumber cores, two ranks count as alone
    /// (`lone_pair`) only while every other rank is paused inside a
    /// collective's wait (`IDLE`), not in any other wait nor running; and
    /// a paired send between them then goes as where ranks have cores of
    /// their own, while a program's send is announced from `PULL_RNDV`
    /// either way. Fails if any of these reads otherwise.
    #[test]
    fn pairs_are_alone_while_the_others_wait_in_collectives() {
        if !default_rendezvous() {
            return;
        }
        let seg = Arc::new(Segment::anonymous(4, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg.clone());
        tx.crowded = true;
        tx.informed = true;
        tx.rndv_min = rndv_default(true, true);
        let set = |r: usize, w: u32| seg.on_cpu(r).store(w, Ordering::Relaxed);
        for (two, three, alone) in [
            (1 | PAUSED | IDLE, 2 | PAUSED | IDLE, true),
            (1 | PAUSED, 2 | PAUSED | IDLE, false),
            (1, 2 | PAUSED | IDLE, false),
            (1 | PAUSED | IDLE, 2 | IDLE, false),
        ] {
            set(2, two);
            set(3, three);
            assert_eq!(tx.lone_pair(1), alone, "words {two:#x} {three:#x}");
            // Rank 2 is not rank 1's partner: rank 1 runs.
            set(1, 1);
            assert!(!tx.lone_pair(2));
        }
        let small = vec![4u8; CROWDED_PULL_RNDV];
        let mid = vec![5u8; 2 * PULL_RNDV];
        assert!(mid.len() < CROWDED_PAIRED_RNDV);
        // SAFETY: `small` and `mid` outlive the engine, dropped first.
        let (small, mid) = unsafe {
            (
                RawBuf::new(small.as_ptr() as *mut u8, small.len()),
                RawBuf::new(mid.as_ptr() as *mut u8, mid.len()),
            )
        };
        for alone in [true, false] {
            set(2, 1 | PAUSED | IDLE);
            set(3, 2 | PAUSED | if alone { IDLE } else { 0 });
            let id = tx
                .isend_as(1, 7, 1, small, "send", SendKind::Program)
                .unwrap();
            assert!(tx.is_done(id), "alone {alone}: eager below PULL_RNDV");
            let id = tx.isend_as(1, 7, 2, mid, "send", SendKind::Paired).unwrap();
            assert_eq!(
                tx.is_done(id),
                !alone,
                "alone {alone}: a paired send is announced from PULL_RNDV only when alone"
            );
        }
        drop(tx);
    }

    /// A rank that hands its core over inside a wait says so in its
    /// `on_cpu` word, and says where it runs again once back: waiters for
    /// it decide from that whether to poll or to yield.
    #[test]
    fn waits_mark_hand_overs() {
        use std::sync::atomic::AtomicBool;
        let seg = Arc::new(Segment::anonymous(2, 16384).unwrap());
        let go = Arc::new(AtomicBool::new(false));
        let peer = {
            let (seg, go) = (seg.clone(), go.clone());
            std::thread::spawn(move || {
                // Releases rank 0 also when this thread fails.
                struct Release(Arc<Segment>, Arc<AtomicBool>);
                impl Drop for Release {
                    fn drop(&mut self) {
                        self.1.store(true, Ordering::Release);
                        self.0.wake(0);
                    }
                }
                let _release = Release(seg.clone(), go);
                let mut e = Engine::over_shm(1, seg.clone());
                e.set_machine_ranks(usize::MAX);
                let running = seg.on_cpu(1).load(Ordering::Relaxed);
                // Rank 0 waits for `go`: once it spins no more it must read
                // as not running (it yields, then sleeps).
                let start = Instant::now();
                let seen = loop {
                    if seg.on_cpu(0).load(Ordering::Relaxed) & PAUSED != 0 {
                        break true;
                    }
                    if start.elapsed() > Duration::from_secs(5) {
                        break false;
                    }
                    std::hint::spin_loop();
                };
                (running, e.cpu, seen)
            })
        };
        let mut e = Engine::over_shm(0, seg.clone());
        e.set_machine_ranks(usize::MAX);
        assert!(e.informed);
        e.wait_for_running("test wait", 1, |_| go.load(Ordering::Acquire))
            .unwrap();
        let (running, cpu, seen) = peer.join().unwrap();
        assert!(
            running != 0 && running == cpu,
            "rank 1 did not say where it runs"
        );
        assert!(seen, "rank 0 never read as handed over");
        assert_eq!(seg.on_cpu(0).load(Ordering::Relaxed), e.cpu);
        assert_ne!(e.cpu, 0);
    }

    /// Posts a receive of `buf` from world rank `source` in context 7,
    /// of `tag` (`None`: any).
    ///
    /// # Safety
    /// `buf` must outlive the request: until it completes, or the engine
    /// is dropped.
    unsafe fn post_recv(e: &mut Engine, source: usize, tag: Option<i32>, buf: &mut [u8]) -> ReqId {
        let m = Match {
            source: Some(source),
            ctx: 7,
            tag,
        };
        // SAFETY: the caller keeps `buf` alive as long as the request.
        e.irecv(m, unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) })
            .unwrap()
    }

    /// An offer to read in place marks its receiver (`WORK`) until the
    /// receiver reads it; meanwhile a rank on the receiver's CPU sees that
    /// its core mate has a copy to make, and waits on such a message are
    /// `Awaited::Copying` (where ranks outnumber cores). The reader's `Done`
    /// marks the sender in turn. Fails if a mark is not set, not cleared,
    /// or not looked for on the right CPU.
    #[test]
    fn offers_to_read_mark_their_receiver_until_read() {
        let seg = Arc::new(Segment::anonymous(3, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(0, seg.clone());
        let mut rx = Engine::over_shm(1, seg.clone());
        let mut mate = Engine::over_shm(2, seg.clone());
        let len = 64 * 1024;
        let data: Vec<u8> = (0..len).map(|j| (j * 5 + 3) as u8).collect();
        // Where the kernel (or an emulator such as qemu-user) refuses
        // cross-memory attach, the engines find it at their first read;
        // found here first, the message goes through the ring, which the
        // loop below then drives from both sides.
        let mut probe = [0u8; 8];
        let reads = cma::read(std::process::id(), data.as_ptr() as u64, &mut probe).is_ok();
        for e in [&mut tx, &mut rx, &mut mate] {
            e.crowded = true;
            e.rndv_min = 32 * 1024;
            e.cma &= reads;
        }
        mate.cpu = mate.cpu.max(1);
        // SAFETY: `data` outlives the send, completed below.
        let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, len) };
        // A root's message: the one kind offered to be read in place.
        let id = tx.isend_as(1, 7, 1, raw, "send", SendKind::Rooted).unwrap();
        let pulled = tx.cma;
        let marked = || seg.on_cpu(1).load(Ordering::Relaxed) & WORK != 0;
        // The receiver paused on the mate's CPU, as `hand_over` says so.
        seg.on_cpu(1).fetch_and(WORK, Ordering::Relaxed);
        seg.on_cpu(1).fetch_or(mate.cpu | PAUSED, Ordering::Relaxed);
        assert_eq!(marked(), pulled, "the offer marks its receiver");
        assert_eq!(mate.mate_has_work(&seg), pulled);
        assert!(matches!(tx.awaited_for(&id), Awaited::Copying(_)));
        // On another CPU the receiver is nobody's mate.
        seg.on_cpu(1).fetch_and(WORK, Ordering::Relaxed);
        seg.on_cpu(1)
            .fetch_or((mate.cpu + 1) | PAUSED, Ordering::Relaxed);
        assert!(!mate.mate_has_work(&seg));
        let mut got = vec![0u8; len];
        // SAFETY: `got` outlives the receive, completed below.
        let r = unsafe { post_recv(&mut rx, 0, Some(1), &mut got) };
        while !rx.is_done(r) {
            rx.progress();
            if !pulled {
                tx.progress();
            }
        }
        assert!(got == data);
        assert!(!marked(), "reading clears the mark");
        // The reader's `Done` marks the sender, whose progress clears it.
        let sender_marked = || seg.on_cpu(0).load(Ordering::Relaxed) & WORK != 0;
        assert_eq!(sender_marked(), pulled, "the Done marks its sender");
        while !tx.is_done(id) {
            tx.progress();
        }
        assert!(!sender_marked(), "progress clears the mark");
        // Small messages leave their waits as they were; large ones too are
        // copies.
        let b = vec![0u8; 4 << 20];
        for (n, copy) in [(8, false), (b.len(), true)] {
            // SAFETY: `b` outlives the engine, which is dropped first.
            let raw = unsafe { RawBuf::new(b.as_ptr() as *mut u8, n) };
            let s = tx.isend(1, 7, 2, raw, "send").unwrap();
            assert_eq!(tx.bulky(s), copy, "{n} bytes");
            assert_eq!(matches!(tx.awaited_for(&s), Awaited::Copying(_)), copy);
        }
        drop(tx);
    }

    /// A read borrows only a CPU whose every rank waits with nothing to do.
    #[test]
    fn only_cpus_whose_ranks_all_wait_idle() {
        let (a, b, c) = (1, 2, 3);
        let words = [a, b | PAUSED, b | PAUSED, c | PAUSED | WORK, a | PAUSED];
        assert_eq!(idle_cpu(&words, a), Some(b));
        assert_eq!(idle_cpu(&words[..1], a), None, "nobody else");
        assert_eq!(idle_cpu(&[a, b, b | PAUSED], a), None, "a rank runs");
        assert_eq!(
            idle_cpu(&[a, c | PAUSED | WORK], a),
            None,
            "a rank has work"
        );
        assert_eq!(idle_cpu(&[a, PAUSED], a), None, "unknown CPU");
        assert_eq!(idle_cpu(&[b | PAUSED, a | PAUSED], b), Some(a));
    }

    /// A wait on several requests watches the peers of those still
    /// pending: it polls only while every one of them runs on another
    /// core, and gives up its spin once one of them is off the cores.
    #[test]
    fn waits_on_requests_watch_their_pending_peers() {
        let seg = Arc::new(Segment::anonymous(3, 16384).unwrap());
        let mut e = Engine::over_shm(0, seg.clone());
        e.set_machine_ranks(usize::MAX);
        let other = e.cpu + 1;
        let mut bufs = [[0u8; 8]; 2];
        let ids: Vec<ReqId> = (1..3)
            .zip(bufs.iter_mut())
            // SAFETY: `bufs` outlives the requests, completed below.
            .map(|(p, b)| unsafe { post_recv(&mut e, p, Some(1), b) })
            .collect();
        let elsewhere = |e: &Engine| {
            e.all_awaited(Awaited::Requests(&ids), |at| {
                runs(at) && cpu_of(at) != e.cpu
            })
        };
        let off_cores = |e: &Engine| {
            e.any_awaited(Awaited::Requests(&ids), |at| {
                cpu_of(at) == e.cpu || at & PAUSED != 0
            })
        };
        seg.on_cpu(1).store(other, Ordering::Relaxed);
        seg.on_cpu(2).store(other | PAUSED, Ordering::Relaxed);
        assert!(!elsewhere(&e) && off_cores(&e));
        seg.on_cpu(2).store(e.cpu, Ordering::Relaxed);
        assert!(!elsewhere(&e) && off_cores(&e));
        seg.on_cpu(2).store(other, Ordering::Relaxed);
        assert!(elsewhere(&e) && !off_cores(&e));
        // Rank 2's message arrives: only rank 1 counts now, paused or not.
        seg.on_cpu(2).store(other | PAUSED, Ordering::Relaxed);
        let mut e2 = Engine::over_shm(2, seg.clone());
        assert!(e2
            .send_now(0, 7, 1, &[5; 8], SendKind::Plain, "test")
            .unwrap());
        e.wait(ids[1], "t").unwrap();
        assert!(elsewhere(&e) && !off_cores(&e));
        assert!(!e.all_awaited(Awaited::Nobody, |_| true));
        let mut e1 = Engine::over_shm(1, seg.clone());
        assert!(e1
            .send_now(0, 7, 1, &[6; 8], SendKind::Plain, "test")
            .unwrap());
        e.wait(ids[0], "t").unwrap();
        assert!(!elsewhere(&e), "no pending peer left to poll for");
        assert_eq!(bufs, [[6; 8], [5; 8]]);
    }

    /// Once another rank of the host recorded a death, every wait fails
    /// naming the dead rank, also one whose requests are all done, and the
    /// engine stays failed.
    #[test]
    fn waits_fail_once_the_host_knows_of_a_death() {
        let seg = Arc::new(Segment::anonymous(3, 16384).unwrap());
        let mut e = Engine::over_shm(0, seg.clone());
        assert!(e.wait_all(&[], "MPI_Test").is_ok());
        seg.set_dead(2);
        match e.wait_all(&[], "MPI_Test") {
            Err(Error::PeerDied { rank: 2, op }) => assert_eq!(op, "MPI_Test"),
            other => panic!("expected the death of rank 2, got {other:?}"),
        }
        assert!(matches!(e.check(), Err(Error::Poisoned(_))));
    }

    /// The id of a process that has exited and been reaped.
    fn gone_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid), "pid {pid} was taken again");
        pid
    }

    /// A rank that only sends to a peer whose process is gone fails long
    /// before the link's ring fills (1 MiB: about 26000 messages of 8
    /// bytes), naming that peer, whether it sends at once (`send_now`, as
    /// `MPI_Send`) or posts the send (`isend`, as a collective); a peer
    /// that is alive but behind is no failure.
    #[test]
    fn sends_fail_once_their_reader_is_gone() {
        for posted in [false, true] {
            let seg = Arc::new(Segment::anonymous(3, 1 << 20).unwrap());
            let mut e = Engine::over_shm(0, seg.clone());
            let data = [7u8; 8];
            let send = |e: &mut Engine, dst: usize| -> Result<()> {
                if posted {
                    // SAFETY: `data` outlives the wait.
                    let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, data.len()) };
                    let id = e.isend(dst, 7, 1, raw, "MPI_Scan")?;
                    e.wait(id, "MPI_Scan").map(|_| ())
                } else {
                    assert!(e.send_now(dst, 7, 1, &data, SendKind::Plain, "MPI_Send")?);
                    Ok(())
                }
            };
            // Rank 1 runs (this process) and reads nothing: no failure.
            for _ in 0..500 {
                send(&mut e, 1).unwrap();
            }
            seg.set_pid(2, gone_pid());
            // The process is looked for at most every `READER_CHECK`.
            let mut sent = 0u32;
            let err = loop {
                match send(&mut e, 2) {
                    Ok(()) => sent += 1,
                    Err(err) => break err,
                }
                if sent.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_millis(2));
                }
                assert!(sent < 5000, "{sent} sends to a dead peer went through");
            };
            match err {
                Error::PeerDied { rank: 2, .. } => {}
                other => panic!("expected the death of rank 2, got {other:?}"),
            }
            assert!(
                sent >= 32,
                "failed after {sent} sends, before the posts filled"
            );
            assert_eq!(seg.dead(), Some(2), "the host's other ranks are told");
            assert!(matches!(e.check(), Err(Error::Poisoned(_))));
        }
    }

    /// A sender whose reader quit after finding another rank dead names
    /// that rank, as the reader did: rank 1 of a chained 3-rank scan
    /// failed over rank 2 and exited, and rank 0, which only sends to rank
    /// 1, named rank 1 (seen once in CI, `robust.faults.flood`).
    #[test]
    fn a_sender_names_the_death_its_reader_quit_over() {
        let seg = Arc::new(Segment::anonymous(3, 1 << 20).unwrap());
        let mut e = Engine::over_shm(0, seg.clone());
        seg.set_pid(1, gone_pid());
        let data = [7u8; 8];
        let mut sent = 0u32;
        let err = loop {
            match e.send_now(1, 7, 1, &data, SendKind::Plain, "MPI_Scan") {
                Ok(true) => sent += 1,
                Ok(false) => panic!("the link filled after {sent} sends"),
                Err(err) => break err,
            }
            if sent == 40 {
                // Rank 1 found rank 2 dead, recorded it and quit.
                seg.set_dead(2);
            }
            if sent.is_multiple_of(64) {
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(sent < 5000, "{sent} sends to a dead peer went through");
        };
        match err {
            Error::PeerDied { rank: 2, op } => assert_eq!(op, "MPI_Scan"),
            other => panic!("expected the death of rank 2, got {other:?}"),
        }
        assert_eq!(seg.dead(), Some(2));
    }

    /// A rank that yields while a process outside the job spins on its CPU
    /// asks for short slices (`comm::slice`): at each of its yields the
    /// spinner holds the core for a slice, and no rank of the host ran
    /// meanwhile. Fails if the watch misses it for 5 s (it takes a few
    /// yields of a few ms each).
    #[test]
    fn yields_beside_a_spinner_ask_for_short_slices() {
        if params().slice != slice::Mode::Auto {
            eprintln!("skipped: FERROCOLL_SLICE is set");
            return;
        }
        let Some(cpu) = bind::allowed_cpus().ok().and_then(|c| c.first().copied()) else {
            eprintln!("skipped: no CPU list");
            return;
        };
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let spin_stop = stop.clone();
        let spinner = std::thread::spawn(move || {
            if bind::pin(cpu) {
                while !spin_stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        });
        let asked = std::thread::spawn(move || {
            if !bind::pin(cpu) {
                return None;
            }
            let mut e = Engine::over_shm(0, seg);
            e.set_machine_ranks(usize::MAX);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                e.yield_core();
                if e.slice.short() {
                    return Some(true);
                }
                if !e.slice.watching() {
                    return None;
                }
            }
            Some(false)
        })
        .join()
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        match asked {
            None => eprintln!("skipped: pinning or sched_setattr refused"),
            Some(asked) => assert!(
                asked,
                "5 s of yields beside a spinner did not count as competition"
            ),
        }
    }

    /// One `drain` takes at most `DRAIN_STEPS` steps, so a wait between
    /// two of them can look at its peers' health however fast its sender
    /// writes; and past what the pool keeps, a small message is buffered
    /// in a buffer of its own size, not of `SMALL_CAP` bytes.
    #[test]
    fn floods_are_drained_in_bounded_steps_and_buffered_tightly() {
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut tx = Engine::over_shm(1, seg.clone());
        let mut rx = Engine::over_shm(0, seg);
        let mut sent = 0;
        while tx
            .send_now(0, 7, 1, &[3u8; 8], SendKind::Plain, "MPI_Send")
            .unwrap()
        {
            sent += 1;
        }
        assert!(sent > DRAIN_STEPS, "only {sent} messages fit the ring");
        assert!(rx.progress());
        let first = rx.unexpected.len();
        assert!(
            (DRAIN_STEPS / 2..=DRAIN_STEPS).contains(&first),
            "one drain buffered {first} of {sent} messages"
        );
        while rx.progress() {}
        assert_eq!(rx.unexpected.len(), sent);
        let caps: Vec<usize> = rx.unexpected.iter().map(|u| u.data.capacity()).collect();
        assert!(caps[..SMALL_COUNT].iter().all(|&c| c == SMALL_CAP));
        assert!(
            caps[SMALL_COUNT..].iter().all(|&c| c < 64),
            "capacities past the pool: {:?}",
            &caps[SMALL_COUNT..SMALL_COUNT + 8]
        );
    }

    /// A peer shares this rank's core when its `on_cpu` word names this
    /// rank's CPU, running (a stale mark: it cannot run now) or paused;
    /// not when it names another CPU or none, nor where ranks do not
    /// outnumber cores.
    #[test]
    fn mates_are_told_by_their_cpu() {
        let seg = Arc::new(Segment::anonymous(2, 16384).unwrap());
        let mut e = Engine::over_shm(0, seg.clone());
        assert!(!e.shares_core(1), "not crowded: no mates");
        e.set_machine_ranks(usize::MAX);
        assert!(e.informed && e.cpu != 0);
        let word = seg.on_cpu(1);
        for (w, mate) in [
            (e.cpu, true),
            (e.cpu | PAUSED, true),
            (e.cpu + 1, false),
            ((e.cpu + 1) | PAUSED, false),
            (0, false),
        ] {
            word.store(w, Ordering::Relaxed);
            assert_eq!(e.shares_core(1), mate, "on_cpu {w:#x}");
        }
        assert!(!e.shares_core(7), "no such rank");
    }

    /// Messages queued in a link behind the one a receive waits for stay
    /// there once it completes: the next receives, posted one at a time,
    /// take them straight from the link, none through an unexpected
    /// buffer. A later wait that needs what lies past an unmatched one
    /// still buffers it.
    #[test]
    fn drains_stop_at_a_completed_receive() {
        const LEN: usize = 32 * 1024;
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let msg = |i: usize| vec![i as u8 + 1; LEN];
        let sender = {
            let seg = seg.clone();
            std::thread::spawn(move || {
                let mut e = Engine::over_shm(1, seg);
                e.rndv_min = usize::MAX;
                // Tags 0..8 in order, then tag 99, all eager into the ring.
                for (i, tag) in (0..8).chain([99]).enumerate() {
                    let data = msg(i);
                    // SAFETY: `data` outlives the wait.
                    let id = e
                        .isend(
                            0,
                            7,
                            tag,
                            unsafe { RawBuf::new(data.as_ptr() as *mut u8, LEN) },
                            "send",
                        )
                        .unwrap();
                    e.wait(id, "send").unwrap();
                }
            })
        };
        sender.join().unwrap();
        let mut e = Engine::over_shm(0, seg);
        // Receives the message of `tag` from rank 1 and returns its bytes.
        let recv = |e: &mut Engine, tag: i32| {
            let mut got = vec![0u8; LEN];
            // SAFETY: `got` outlives the wait.
            let id = unsafe { post_recv(e, 1, Some(tag), &mut got) };
            e.wait(id, "recv").unwrap();
            got
        };
        for tag in 0..4 {
            assert!(recv(&mut e, tag) == msg(tag as usize), "message {tag}");
            assert!(
                e.unexpected.is_empty(),
                "message {tag} left others buffered"
            );
        }
        // Tag 99 lies behind tags 4..8: reaching it buffers those.
        assert!(recv(&mut e, 99) == msg(8));
        assert_eq!(e.unexpected.len(), 4);
        for tag in 4..8 {
            assert!(recv(&mut e, tag) == msg(tag as usize), "message {tag}");
        }
        assert!(e.unexpected.is_empty());
    }

    /// Messages read from the sender's memory (`Pull`, a root's) land
    /// whole, also when the receive comes after the offer or is too short
    /// (truncation); a receiver that cannot read has them sent through the
    /// ring instead, and its sender stops offering.
    #[test]
    fn pulled_messages_land_and_refusals_fall_back_to_the_ring() {
        // The third and fourth pass `BORROW_FROM`.
        let sizes = [8 * 1024, 100_000, 3 << 20, 3 << 20];
        let msg = |i: usize, len: usize| -> Vec<u8> {
            (0..len).map(|j| (j * 7 + i * 13) as u8).collect()
        };
        for can_read in [true, false] {
            let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
            let sender = {
                let seg = seg.clone();
                std::thread::spawn(move || {
                    let mut e = Engine::over_shm(1, seg);
                    let pulls_at_start = e.cma;
                    for (i, &len) in sizes.iter().enumerate() {
                        let data = msg(i, len);
                        // SAFETY: `data` outlives the wait.
                        let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, len) };
                        // A root's message: offered to be read in place.
                        let id = e
                            .isend_as(0, 7, i as i32, raw, "send", SendKind::Rooted)
                            .unwrap();
                        let st = e.wait(id, "send").unwrap();
                        assert_eq!(st.bytes, len);
                    }
                    (pulls_at_start, e.cma)
                })
            };
            let mut e = Engine::over_shm(0, seg);
            e.cma &= can_read;
            // The first offer arrives before its receive is posted.
            while e.unexpected.is_empty() {
                e.progress();
            }
            for (i, &len) in sizes.iter().enumerate() {
                // The last receive is 1000 bytes short.
                let cap = if i == 3 { len - 1000 } else { len };
                let mut got = vec![0u8; cap];
                // SAFETY: `got` outlives the wait.
                let id = unsafe { post_recv(&mut e, 1, Some(i as i32), &mut got) };
                let st = e.wait(id, "recv").unwrap();
                assert!(
                    got[..] == msg(i, len)[..cap],
                    "message {i}, can_read {can_read}"
                );
                assert_eq!(st.bytes, cap);
                assert_eq!(
                    st.error.is_some(),
                    cap < len,
                    "message {i}: truncation is reported"
                );
            }
            let (pulled, still) = sender.join().unwrap();
            if pulled {
                // Offers stop once the receiver said it cannot read (also
                // where the kernel forbids reads).
                let read = can_read && cma::allowed();
                assert_eq!(still, read);
                assert_eq!(e.cma, read, "only a refusal stops the reads");
            }
            assert!(
                e.reqs.iter().all(Option::is_none),
                "a request was left behind"
            );
        }
    }

    /// Sends each (ctx, tag, bytes) from rank 1 to rank 0 of `seg`, each
    /// waited for, on a thread.
    fn send_all(seg: &Arc<Segment>, msgs: Vec<(u32, i32, Vec<u8>)>) -> std::thread::JoinHandle<()> {
        let seg = seg.clone();
        std::thread::spawn(move || {
            let mut e = Engine::over_shm(1, seg);
            // Eager: the receiver may come after the sender has finished.
            e.rndv_min = usize::MAX;
            for (ctx, tag, data) in &msgs {
                // SAFETY: `data` outlives the wait.
                let raw = unsafe { RawBuf::new(data.as_ptr() as *mut u8, data.len()) };
                let id = e.isend(0, *ctx, *tag, raw, "send").unwrap();
                e.wait(id, "send").unwrap();
            }
        })
    }

    /// Message data from 16 KiB on is timed for the far watch, whichever
    /// way it leaves: at once (`send_now`) or through the send queue;
    /// shorter messages are not. (Two timed writes cannot turn the watch
    /// far, so every one here is cached and timed.) Fails if a way into
    /// the ring reports the wrong length or skips the watch.
    #[test]
    fn message_writes_feed_the_far_watch() {
        if params().far != crate::transport::shm::far::Mode::Auto {
            eprintln!("skipped: FERROCOLL_FAR is set");
            return;
        }
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let mut e = Engine::over_shm(0, seg);
        e.rndv_min = usize::MAX;
        let mut data: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        assert!(e
            .send_now(1, 7, 1, &data[..1000], SendKind::Plain, "test")
            .unwrap());
        assert_eq!(e.far.recorded, 0, "short messages are not timed");
        assert!(e
            .send_now(1, 7, 1, &data[..20_000], SendKind::Plain, "test")
            .unwrap());
        assert_eq!(e.far.recorded, FRAME_BYTES + 20_000);
        // SAFETY: `data` outlives the request, completed before it is freed.
        let raw = unsafe { RawBuf::new(data.as_mut_ptr(), 40_000) };
        let id = e.isend(1, 7, 2, raw, "t").unwrap();
        e.wait(id, "t").unwrap();
        assert_eq!(e.far.recorded, 2 * FRAME_BYTES + 60_000);
    }

    /// A receive without a request takes the message at the head of the
    /// link only when it is the one asked for and fits; otherwise it
    /// consumes nothing and the posted receives find every message where
    /// it was.
    #[test]
    fn recv_now_takes_only_the_message_asked_for() {
        let seg = Arc::new(Segment::anonymous(2, 1 << 20).unwrap());
        let bytes = |n: usize, k: u8| {
            (0..n)
                .map(|i| (i as u8).wrapping_mul(k))
                .collect::<Vec<u8>>()
        };
        // In a post, through the ring (over 688 bytes), in a post, and
        // one on another context.
        let msgs = vec![
            (7, 5, bytes(8, 3)),
            (7, 6, bytes(3000, 5)),
            (7, 7, bytes(100, 7)),
            (8, 1, bytes(16, 9)),
        ];
        send_all(&seg, msgs.clone()).join().unwrap();
        let mut e = Engine::over_shm(0, seg);
        let mut buf = vec![0u8; 4096];
        // Not the head's tag; then too small for it.
        assert!(e.recv_now(1, 7, Some(6), &mut buf, "t").unwrap().is_none());
        assert!(e
            .recv_now(1, 7, Some(5), &mut buf[..4], "t")
            .unwrap()
            .is_none());
        assert!(e.unexpected.is_empty() && e.posted.is_empty());
        let st = e.recv_now(1, 7, Some(5), &mut buf, "t").unwrap().unwrap();
        assert_eq!((st.source, st.tag, st.bytes), (1, 5, 8));
        assert_eq!(&buf[..8], &msgs[0].2[..]);
        let st = e.recv_now(1, 7, None, &mut buf, "t").unwrap().unwrap();
        assert_eq!((st.tag, st.bytes), (6, 3000));
        assert_eq!(&buf[..3000], &msgs[1].2[..]);
        // A posted receive comes first: the lane steps aside.
        let mut first = vec![0u8; 100];
        // SAFETY: `first` outlives the wait.
        let id = unsafe { post_recv(&mut e, 1, None, &mut first) };
        assert!(e.recv_now(1, 7, None, &mut buf, "t").unwrap().is_none());
        assert_eq!(e.wait(id, "t").unwrap().tag, 7);
        assert_eq!(first, msgs[2].2);
        // Another context's message is not taken.
        assert!(e.recv_now(1, 7, None, &mut buf, "t").unwrap().is_none());
        let st = e.recv_now(1, 8, Some(1), &mut buf, "t").unwrap().unwrap();
        assert_eq!((st.tag, st.bytes, &buf[..16]), (1, 16, &msgs[3].2[..]));
        // Nothing left: it gives up after its spin.
        assert!(e.recv_now(1, 7, None, &mut buf, "t").unwrap().is_none());
        assert!(e.unexpected.is_empty() && e.posted.is_empty());
    }

    /// A message longer than the ring is still arriving when the receive
    /// without a request finds its header: the rest lands as a posted
    /// receive's would, whole and in order.
    #[test]
    fn recv_now_waits_for_a_body_still_arriving() {
        let seg = Arc::new(Segment::anonymous(2, 16384).unwrap());
        let data: Vec<u8> = (0..60_000).map(|i| (i % 251) as u8).collect();
        let sender = send_all(&seg, vec![(7, 1, data.clone())]);
        let mut e = Engine::over_shm(0, seg);
        let mut buf = vec![0u8; 65536];
        let st = loop {
            if let Some(st) = e.recv_now(1, 7, Some(1), &mut buf, "t").unwrap() {
                break st;
            }
        };
        assert_eq!((st.tag, st.bytes), (1, data.len()));
        assert!(buf[..data.len()] == data[..]);
        assert!(buf[data.len()..].iter().all(|&b| b == 0));
        sender.join().unwrap();
        assert!(
            e.reqs.iter().all(Option::is_none),
            "a request was left behind"
        );
    }
}
