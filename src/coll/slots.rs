//! Small collectives through the communicator's slot area: each rank
//! writes its part once into its own slot and raises the slot's flag; the
//! others read it in place. No message, no copy through a ring.
//!
//! Protocol, per call number `f` (counted per communicator, equal on every
//! member): the slot used is `f % DEPTH`; its flag is `f << 1 | big`. A
//! writer may reuse a slot only when every reader of that slot's previous
//! call (`f - DEPTH`) has finished, which each rank announces by storing
//! `f` in its `done` word. If this rank read every peer's slot in call
//! `f - 1`, every peer had already finished a call less than `DEPTH`
//! before it (`f - 2` for a small call; a streamed call lags by at most
//! eight chunks and one jump between windows of slots, see `reserve`), so
//! no check is needed. Call numbers only grow, also across the
//! communicators that use an area in turn (see `SlotState::base`), so
//! nothing is ever reset; a streamed call may skip numbers, which nobody
//! publishes or waits for.
//! `big` says the part did not fit and travels as a message instead
//! (only where the receiver cannot know the size in advance).

use super::fill::Fill;
use super::{
    block, block_mut, check_recv_blocks, check_send_blocks, copy_own, split_blocks, Ctx, OwnCopy,
    Reducer,
};
use crate::comm::engine::{Engine, SendKind};
use crate::copy::copy;
use crate::error::{Error, Result};
use crate::transport::shm::slots::{Area, Push, DEPTH, NEAR_BYTES, SLOT_DATA};
use crate::transport::shm::Segment;
use std::sync::atomic::{
    fence, Ordering::Acquire, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst,
};
use std::sync::Arc;

/// Most bytes one rank reads from all slots together in an automatically
/// chosen call; above it the bandwidth algorithms win.
pub const READ_LIMIT: usize = 64 * 1024;

/// One call's view of the slots.
pub(super) struct Call {
    /// The engine's segment, not an `Arc` clone: a clone and its drop are
    /// two locked instructions on every small call.
    seg: *const Segment,
    area: usize,
    f: u64,
    /// The window a streamed call's numbers lie in (`reserve`).
    window: u64,
    /// `CHECK`, `SINGLE` and `WIDE`, in one word: as three `bool`s they
    /// were written in 1-byte stores and the `Call` moved (out of
    /// `begin`'s `Result`) in 8-byte loads, which the store buffer cannot
    /// forward from them, so each move waited for every older store to
    /// reach the cache, among them the previous call's flag, whose line a
    /// peer polls. 2 ranks, 8 B, the root's samples in that move: bcast
    /// 10%, scatter 7%.
    flags: u64,
}

/// `Call::flags`: readers of this slot's previous call must be waited for.
const CHECK: u64 = 1;

/// `Call::flags`: a single call, not one of a streamed collective's: a
/// writer that must wait lets its readers drain `SLACK` more calls first (a
/// streamed call keeps its readers close), and a wait for a peer's part
/// polls while that peer runs (`Engine::wait_for_running`).
const SINGLE: u64 = 2;

/// `Call::flags`: a single call numbered in `window`s (`begin_sized`):
/// how far back a writer's `lead` reaches counts in window numbers
/// (`Call::back`).
const WIDE: u64 = 4;

impl Call {
    fn seg(&self) -> &Segment {
        // SAFETY: `seg` points into the engine's `Arc<Segment>`, which lives
        // as long as the engine; a `Call` lives within one collective call,
        // whose `Ctx` borrows that engine throughout.
        unsafe { &*self.seg }
    }

    fn check(&self) -> bool {
        self.flags & CHECK != 0
    }

    fn single(&self) -> bool {
        self.flags & SINGLE != 0
    }

    fn wide(&self) -> bool {
        self.flags & WIDE != 0
    }

    fn index(&self) -> usize {
        (self.f % DEPTH as u64) as usize
    }

    fn area(&self, c: &Ctx, p: usize) -> Area {
        self.seg().area(c.comm.world_rank(p), self.area)
    }
}

/// Starts a call; every member must then finish it through the slots.
///
/// Inlined so that the `Call` stays in registers. Returned through memory,
/// it was written in 8-byte and 1-byte stores and read back in 16-byte
/// loads, which the store buffer cannot forward: each load waited for all
/// older stores to reach the cache, among them the previous call's flag or
/// `done`, whose line a peer holds. Alternated 2-rank runs of 8-byte calls,
/// ns, before/after (Open MPI): bcast 48-50/27-31 (51-54), reduce 58-59/34-35
/// (73-74), scatter 58-61/38-41 (64-82), gather 57-60/42-45 (57-61),
/// allreduce 118-119/109-112 (149-167); 4 ranks bcast 151/115, reduce
/// 178-182/142-144, scatter 158-163/136-138.
#[inline(always)]
pub(super) fn begin(c: &mut Ctx) -> Result<Call> {
    let seg =
        c.eng.segment().map(Arc::as_ptr).ok_or_else(|| {
            Error::Unsupported("collective slots without a shared segment".into())
        })?;
    let s = c.comm.slots.as_mut().ok_or_else(|| {
        Error::Unsupported("collective slots on a communicator without a slot area".into())
    })?;
    s.calls += 1;
    let call = Call {
        seg,
        area: s.area,
        f: s.calls,
        window: WINDOW,
        flags: if s.read_all { SINGLE } else { CHECK | SINGLE },
    };
    c.eng.slot_epoch = c.eng.slot_epoch.max(call.f);
    Ok(call)
}

/// `begin` for a call whose every part, as every member counts it, is at
/// most `part` bytes: past 8 KiB, the call is numbered in windows of
/// slots (`window_for`), as a streamed call is (`reserve`), so that such
/// calls cycle through the slot memory that `populate` maps ahead (2 MiB
/// of each area for any one size) instead of all `DEPTH` slots (up to
/// 16 MiB), whose first use cost page faults for `DEPTH` calls. Benchmarks
/// that run each size for 110 calls (OSU's defaults: 10 warm-up and 100
/// timed calls from 16 KiB, a barrier after each), one process for all
/// sizes, us a call, before / after (Open MPI): 4 ranks on 2 cores, bcast
/// 16 KiB 10.5 / 2.09 (4.65), 64 KiB 34.7 / 3.16 (9.81); gather 16 KiB
/// 13.2 / 1.84 (10.7); scatter 16 KiB 26.3 / 2.29 (11.2); allreduce 16
/// KiB 27.5 / 4.84 (32.9); 2 ranks, bcast 32 KiB 19.9 / 0.68 (4.32),
/// reduce 64 KiB 35.0 / 2.04 (6.35), scatter 32 KiB 23.9 / 1.03 (4.93).
/// A writer then runs at most a window ahead of its readers, and rewrites
/// a slot sooner: in long runs of back-to-back calls (`-t`, alternated, 3
/// rounds, us, before / after), 2 ranks bcast 16 KiB 0.323 / 0.495, 32
/// KiB 0.628 / 0.794, reduce 16 KiB 0.458 / 0.543,
/// scatter 16 KiB 0.266 / 0.340, the rest of 4-64 KiB within 0.92-1.13;
/// 4 ranks bcast 32 KiB 1.37 / 1.83, 64 KiB 2.78 / 3.40, allreduce 16 KiB
/// 6.89 / 5.30, allgather 64 KiB 6.33 / 4.78, gather 64 KiB 3.19 / 2.59.
/// Windows twice as long (4 MiB, 8 MiB mapped a rank) lost less at 2
/// ranks (bcast 16 KiB 0.385, 32 KiB 0.766) for 4 ms more `MPI_Init`.
/// Inlined, as `begin` is, so that the `Call` stays in registers.
#[inline(always)]
pub(super) fn begin_sized(c: &mut Ctx, part: usize) -> Result<Call> {
    // Small calls, the most, pass by one comparison instead of a division.
    if part <= WINDOW_BYTES / DEPTH {
        return begin(c);
    }
    let w = window_for(part);
    if let Some(s) = c.comm.slots.as_mut() {
        let j = window_index_from(w, s.calls + 1);
        s.calls = window_number(w, j) - 1;
    }
    Ok(Call {
        window: w,
        flags: CHECK | SINGLE | WIDE,
        ..begin(c)?
    })
}

/// Slot memory, from each slot's start, that a single call's window
/// spans at most (`window_for`).
const WINDOW_BYTES: usize = 2 << 20;

/// The window of slots of a single call whose parts reach `part` bytes
/// (`begin_sized`): as many as `WINDOW_BYTES` holds of such parts, in
/// powers of two from `WIDE_WINDOW` to `DEPTH` (all of them for parts of
/// up to 8 KiB). Counting each part's flag line as well put parts of
/// exactly 8 KiB in windows of 128: 2 ranks, bcast of 8 KiB 0.178 against
/// 0.255 us in `bench/compare.sh`.
fn window_for(part: usize) -> u64 {
    let w = (WINDOW_BYTES / part.max(1)).clamp(WIDE_WINDOW as usize, DEPTH);
    1 << w.ilog2()
}

/// Bytes from the start of slot `i` that the parts of calls whose window
/// (`window_for`) reaches it can fill, with the flag's line before them:
/// all of the first `WIDE_WINDOW` slots, then less the further on (at
/// least a page).
fn populated_len(i: usize) -> usize {
    match i {
        _ if i < WIDE_WINDOW as usize => usize::MAX,
        _ => (WINDOW_BYTES / (i + 1).next_power_of_two() + 64).max(4096),
    }
}

/// Most bytes of its peers' slot areas that a rank maps ahead
/// (`populate`), beyond its own.
const POPULATE_PEERS: usize = 32 << 20;

/// Maps slot area `area` of the world ranks `members` into this rank
/// (`me`, among them) ahead of use: its own writable, its peers' (as far
/// as `POPULATE_PEERS` goes) for reading; in each, as much of every slot
/// as the calls whose windows reach it fill (`populated_len`, 5 MiB in
/// all). Each slot's first call had cost its writer a page fault that
/// allocates (2.4-2.6 us here) and each reader one more (0.5-1.2 us),
/// for the first `DEPTH` calls: 4 ranks on 2 cores, allreduce of 1 KiB,
/// us per call in calls 10-50 / 100-300 / 300-1000, 21.2 / 16.3 / 3.1
/// before, 3.3 / 3.2 / 3.2 after (alltoallv 1 KiB 23.8 / 19.9 / 4.7
/// against 4.2 / 4.4 / 4.0); at 2 ranks allreduce 1 KiB 6.4 / 5.1 / 0.3
/// against 0.3 / 0.3 / 0.2. It costs `MPI_Init` about 13 ms there (2
/// ranks 6 ms; Open MPI's took 265 ms); with the mapping alone (all
/// slots in use), long runs of calls read alike (`-t`, alternated, 4
/// rounds, 4 ranks, 4 and 16 KiB: paired 0.98-1.08).
pub fn populate(seg: &Segment, area: usize, me: usize, members: &[usize]) {
    seg.area(me, area).populate(populated_len, true);
    let at = members.iter().position(|&w| w == me).unwrap_or(0);
    let peers = members.len().saturating_sub(1);
    let fit = POPULATE_PEERS / Area::populated_bytes(populated_len).max(1);
    for k in 1..=peers.min(fit) {
        let w = members[(at + k) % members.len()];
        seg.area(w, area).populate(populated_len, false);
    }
}

/// Calls a writer that found its readers `DEPTH` calls behind lets them
/// drain before it goes on (see `write`).
const SLACK: u64 = DEPTH as u64 / 4;

/// Slots a streamed collective cycles through: slots `0..WINDOW`. Small
/// calls use all `DEPTH` slots, so that ranks sharing a core run far ahead
/// of each other; streamed calls stay within the window, one after the
/// other as if the area were `WINDOW` deep, so the slot memory they cycle
/// through (1 MiB per rank) stays in cache. Spread over the whole depth,
/// 2-rank calls of 8 MiB took 10-40% longer (allreduce 1.93 against
/// 1.73 ms, bcast 546 against 455 us).
pub(super) const WINDOW: u64 = 16;

/// The window of a streamed collective of at most `WIDE_UP_TO` bytes
/// (`reserve`): twice as many slots between two uses of one, so
/// back-to-back calls rarely find a slot's last readers still on it or
/// still holding its lines. Alternated 2-rank runs, medians of 5, us,
/// window 16 / 32 for every size: allreduce 128 KiB 16.6 / 10.9, 2 MiB
/// 213 / 191; bcast 128 KiB 8.8 / 3.5, 512 KiB 18.4 / 13.3; reduce_scatter
/// 128 KiB 10.5 / 6.9; allgather and alltoall 128 KiB 6.4 / 4.9 and
/// 6.0 / 4.9; but at 2 MiB allgather 74 / 78 and alltoall 83 / 86, at
/// 8 MiB allgather 501 / 591 and reduce 658 / 797, and 4 ranks lost 5-12%
/// from 4 MiB: larger calls keep `WINDOW`.
const WIDE_WINDOW: u64 = 32;

/// Largest collective (its whole vector or result, as every member
/// counts it; a 2-rank allreduce counts half, see `stream::allreduce`)
/// that streams in `WIDE_WINDOW`.
const WIDE_UP_TO: usize = 1 << 20;

/// Most slot memory that the writers of a streamed collective cycle
/// through together in `WIDE_WINDOW` (2 MiB each): up to 4 writers. With 8
/// ranks on 2 cores (16 MiB) the wide window lost, `-t`, alternated, 3
/// rounds, medians, us, wide / narrow: reduce 64 KiB 16.4 / 13.3, 256 KiB
/// 84.1 / 55.8, 1 MiB 550 / 280; allreduce 512 KiB 215 / 190, 1 MiB 595 /
/// 507; allgather 1 MiB 138 / 123; a broadcast's one writer kept it (512
/// KiB 50.0 / 57.0). With 4 ranks the two were within 3-7% either way.
const WIDE_SLOT_BYTES: usize = 8 << 20;

/// Call number of the `j`-th number in windows of `w` slots.
fn window_number(w: u64, j: u64) -> u64 {
    j / w * DEPTH as u64 + j % w
}

/// The first index in windows of `w` slots whose call number is at
/// least `f`.
fn window_index_from(w: u64, f: u64) -> u64 {
    let (q, r) = (f / DEPTH as u64, f % DEPTH as u64);
    if r < w {
        q * w + r
    } else {
        (q + 1) * w
    }
}

/// Reserves window numbers for a streamed collective of `count` calls
/// over `bytes` whose slots `writers` ranks fill (`coll::stream`);
/// `Call::nth` gives each. Every member must reserve alike. Numbers outside the windows that a streamed call passes over
/// are never used: nobody publishes or waits for them. Reuse of a slot is
/// still checked against the call one `DEPTH` before, which is a window
/// number at most the last call before this one (so every peer reaches
/// it) or an earlier chunk of this call: numbers passed over lie in the
/// current row of `DEPTH` at or past the window's width, which no chunk's
/// number minus `DEPTH` reaches, whatever the width of earlier calls.
pub(super) fn reserve(c: &mut Ctx, count: u64, bytes: usize, writers: usize) -> Result<Call> {
    let w = if bytes <= WIDE_UP_TO && writers * WIDE_WINDOW as usize * SLOT_DATA <= WIDE_SLOT_BYTES
    {
        WIDE_WINDOW
    } else {
        WINDOW
    };
    let j = match c.comm.slots.as_mut() {
        Some(s) => {
            let j = window_index_from(w, s.calls + 1);
            s.calls = window_number(w, j) - 1;
            j
        }
        None => 0,
    };
    let b = begin(c)?;
    let first = Call {
        window: w,
        flags: b.flags & !SINGLE,
        ..b
    };
    if let Some(s) = c.comm.slots.as_mut() {
        s.calls = window_number(w, j + count.saturating_sub(1));
        c.eng.slot_epoch = c.eng.slot_epoch.max(s.calls);
    }
    Ok(first)
}

impl Call {
    /// The `i`-th call of a reservation starting at `self` (a window
    /// number, see `reserve`); a streamed collective always checks reuse
    /// (cheap while `safe` is recent).
    pub(super) fn nth(&self, i: u64) -> Call {
        Call {
            seg: self.seg,
            area: self.area,
            f: window_number(self.window, window_index_from(self.window, self.f) + i),
            window: self.window,
            flags: CHECK,
        }
    }

    /// The call `lead` calls before this one (at most `DEPTH`, the previous
    /// call of this slot), whose readers must have finished before this
    /// rank writes: in window numbers for a `wide` call, where a lead below
    /// the window counts calls, not numbers (a number `lead` below might
    /// be one that nobody uses, past the last call every peer reaches).
    fn back(&self, lead: u64) -> u64 {
        if self.wide() {
            let (w, j) = (self.window, window_index_from(self.window, self.f));
            window_number(w, j.saturating_sub(lead.min(w)))
        } else {
            self.f.saturating_sub(lead)
        }
    }
}

/// Reports every call up to `call` read; `read_all`: this rank read every
/// peer's slot in it.
pub(super) fn mark_done(c: &mut Ctx, call: &Call, read_all: bool) {
    call.area(c, c.rank()).done().store(call.f, Release);
    if let Some(s) = c.comm.slots.as_mut() {
        s.read_all = read_all;
    }
    ring_peers(c, call, false);
}

/// Wakes peers that may be asleep waiting for this rank's flag or `done`.
/// `drain`: a full fence first even where wakes need none
/// (`Segment::fence_for_wake`), after a rank published its part of a call
/// in which every rank writes and then reads the others. There the fence
/// costs nothing, since the rank waits for its peers next, and leaving it
/// out was slower: alternated 2-rank runs of 8-byte calls, ns, with and
/// without it (one build): allreduce 119-126 against 127-132, barrier
/// 77-87 against 91-92. After a rooted call's writer publishes or any
/// rank reports `done`, the fence would wait for a line a peer holds:
/// gather 51-54 against 57-62, reduce 56-68 against 72-75 (Open MPI 56,
/// 74).
///
/// Only where some rank sleeps (`Segment::wake_fenced`) does it look at
/// each peer's doorbell: a 4-rank `mark_done` took 102 instructions
/// with the looks, 41 without (callgrind; see `wait_exchange`).
fn ring_peers(c: &Ctx, call: &Call, drain: bool) {
    let seg = call.seg();
    if drain {
        fence(SeqCst);
    } else {
        seg.fence_for_wake();
    }
    seg.wake_fenced(
        (0..c.size())
            .filter(|&p| p != c.rank())
            .map(|p| c.comm.world_rank(p)),
    );
}

/// Bytes from which a `Place::Shared` part starts on the line after the
/// flag's. Below it, the early store to the flag's line took that line
/// before the flag's own store, and starting on the next line was slower
/// (alternated 2-rank runs, ns, next to the flag / next line: allreduce
/// 64 B 106 / 115, 256 B 123 / 134, 1 KiB 174 / 175; reduce_scatter 64 B
/// 113 / 118, 1 KiB 156 / 151; allgather 1 KiB 125 / 128, 4 KiB 204 /
/// 198).
const SHARED_FAR_FROM: usize = 2048;

/// Where a part starts in its slot: right after the flag, or `far` on the
/// next line. Writer and readers derive it alike from the kind of call and
/// the part's length, which both know.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Right after the flag: a part that leads with a table or header its
    /// readers need first (and whose length they may not know), and the
    /// streamed calls' chunks.
    Near,
    /// A rooted writer's part (bcast, reduce): on the next line once it
    /// does not fit next to the flag.
    Rooted,
    /// A part every rank publishes before reading the others': on the next
    /// line from `SHARED_FAR_FROM`.
    Shared,
}

impl Place {
    /// Whether a part of `len` bytes starts on the line after the flag's.
    pub(super) fn far(self, len: usize) -> bool {
        match self {
            Place::Near => false,
            Place::Rooted => len > NEAR_BYTES,
            Place::Shared => len >= SHARED_FAR_FROM,
        }
    }
}

/// Writes `len` bytes through `fill` into this rank's slot, raises its flag
/// (`big`: nothing written, the part follows as a message) and wakes peers.
/// For calls in which every rank writes and then reads the others.
pub(super) fn publish(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    big: bool,
    place: Place,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    publish_pushed(c, call, len, big, place, Push::Data, fill)
}

/// `publish` of a part that `fill` writes whole and that readers copy out
/// (allgather, all-to-all), which is then demoted in bulk too (`Push::Bulk`,
/// see `write`).
pub(super) fn publish_whole(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    place: Place,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    publish_pushed(c, call, len, false, place, Push::Bulk, fill)
}

/// `publish`, demoting the slot's lines as `push` says.
fn publish_pushed(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    big: bool,
    place: Place,
    push: Push,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    write(
        c,
        call,
        len,
        big,
        place.far(len),
        1,
        push,
        DEPTH as u64,
        fill,
    )?;
    ring_peers(c, call, true);
    Ok(())
}

/// `publish` without waking peers, for a writer that calls `finish` next
/// (which wakes them): the writers of rooted calls, which run ahead of
/// their readers.
pub(super) fn publish_quiet(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    big: bool,
    place: Place,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    write(
        c,
        call,
        len,
        big,
        place.far(len),
        2,
        Push::Whole,
        DEPTH as u64,
        fill,
    )
}

/// Calls a gather's writer runs ahead of the root at most where ranks
/// outnumber cores, once its part (with its length word) reaches
/// `PACED_FROM` bytes; other writers may run `DEPTH` calls ahead. Calls
/// cycle through all `DEPTH` slots, so a writer far ahead spreads its
/// parts over up to `DEPTH` x 64 KiB, past the caches, and the root reads
/// them back from memory. Alternated runs, medians, us, 4 ranks on 2
/// cores, total gathered 64 KiB / 128 KiB: `DEPTH` ahead 4.95 / 18.0
/// (Open MPI 16-17 at 128 KiB), 16 ahead 2.97 / 10.6, 8 ahead 3.55 / 9.2,
/// 4 ahead 3.99 / 7.7; 16 KiB and 32 KiB totals equal. At 2 ranks pacing
/// lost a little (32 KiB total 0.87 against 0.73 us, 64 KiB 1.62 against
/// 1.54), and the root there keeps up with its one writer.
const PACED_LEAD: u64 = 4;

/// Part bytes from which a gather's writer is paced (`PACED_LEAD`).
const PACED_FROM: usize = 16 * 1024;

/// `publish_quiet` (`Place::Near`) for a gather's writer, paced as
/// `PACED_LEAD` says.
fn publish_paced(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    let lead = if len >= PACED_FROM && c.eng.crowded() {
        PACED_LEAD
    } else {
        DEPTH as u64
    };
    write(
        c,
        call,
        len,
        false,
        Place::Near.far(len),
        2,
        Push::Whole,
        lead,
        fill,
    )
}

/// Fills this rank's slot for `call` and raises its flag, then takes the
/// line of the slot `ahead` calls on for writing (`Area::prefetch_write`):
/// its readers still hold it from `DEPTH` calls ago, and a store to it
/// would otherwise wait, at the next fence or lock, for their copies to be
/// invalidated. A reader waiting for the next call spins on the slot just
/// after the last one written; a writer that runs ahead (rooted calls)
/// would only take that line away from it to have it come back at the
/// write, so it takes the one after. Alternated 2-rank runs of 8-byte
/// calls, ns, none / one ahead / two ahead: bcast 185 / 95 / 66, gather
/// 193 / 100 / 70, scatter 196 / 102 / 72, allgather 328 / 260 / 287,
/// alltoall 340 / 280-293 / 303-316 (Open MPI: 97, 90, 105, 400, 400).
///
/// It also takes the slot's further lines that a call of the same size
/// fills, when they are few (also `Area::prefetch_write`): the flag's
/// store leaves the store buffer only after the data's, and each of those
/// waited for its line. One build, 2 ranks, 128 B, ns, with and without:
/// scatter 53-55 against 67-68, gather 57-58 against 64, allgather 128-133
/// against 131-133, allreduce 131-134 against 133-136; other sizes from 8 B
/// to 512 B equal.
///
/// `far`: the part starts on the line after the flag's. A reader waiting
/// for this call polls the flag's line, and data stores to that line had
/// to take it back first whenever the reader kept up with the writer: a
/// 2-rank bcast of 8 KiB settled there at times, the writer at 0.40 us a
/// call instead of 0.15, readers waiting at nearly every call. Alternated
/// 2-rank runs, us, next to the flag / next line: bcast 1 KiB 0.054-0.059 /
/// 0.044-0.054, 64 KiB 0.94-1.10 / 0.78-0.92; reduce 16 KiB 0.39-0.42 /
/// 0.36-0.39; allgather 64 KiB 1.51-1.77 / 1.20-1.38 (reduce_scatter
/// 64 KiB faster in 3 runs of 4). A part read through a
/// table stays next to the flag (`Place::Near`): on the next line, each
/// reader fetched the table's line before its block (alltoall 1 KiB
/// 0.136 / 0.165).
///
/// `push`: which of the slot's lines go to the shared cache once the flag
/// is up (`Area::demote`, at most `PREFETCH_LINES` of them), where readers
/// on other cores take them without snooping this core. A rooted writer
/// pushes them all: alternated 2-rank runs, medians of 6, us, without /
/// with: bcast 8 B 0.053-0.054 / 0.033-0.034, 128 B 0.056-0.057 /
/// 0.037-0.038; gather 8 B 0.067 / 0.039-0.041, 128 B 0.067-0.069 /
/// 0.040-0.041; reduce 8 B 0.063 / 0.040; scatter 8 B 0.054 / 0.045
/// (Open MPI in the last comparison 0.070, 0.067, 0.085, 0.068); 4 ranks
/// on 2 cores gather 16 B 0.110 / 0.101, reduce 8 B 0.107 / 0.095; from 512
/// B (more lines) alike. A rank that publishes and then reads the others'
/// parts pushes only the lines after the flag's: 2 ranks, allgather 128 B
/// 0.279 / 0.175, 256 B 0.280 / 0.184, alltoall 64 B 0.266 / 0.180, 256 B
/// 0.299 / 0.208, allreduce 128 B 0.279 / 0.190; pushing the flag's line
/// too, allreduce 128 B took 0.222. 4 ranks on 2 cores, where a reader may
/// share the writer's core, medians of 6 runs of 15 batches: allreduce 128
/// B 1.673 / 1.636, allgather 512 B (128 B a rank) 1.517 / 1.583, alltoall
/// 512 B 1.847 / 1.769; the other sizes push nothing (one line, or more
/// than `PREFETCH_LINES`). Measured again there with 10 runs in
/// alternated order, medians, us, pushed / not: allreduce 64 B 1.41 /
/// 1.29, 128 B 1.52 / 1.37; allgather 256 B 1.41 / 1.28; alltoall 128 B
/// 1.51 / 1.36, 256 B 1.64 / 1.51; reduce_scatter 64 B 1.45 / 1.36, 128 B
/// 1.56 / 1.48 (sizes that push nothing within 0.04 either way); rooted
/// calls alike (bcast, reduce, gather, scatter 8-128 B within 0.01), so
/// nothing is pushed where ranks outnumber cores. An allgather's or
/// all-to-all's part of 4-8 KiB, copied out whole by its readers, is
/// pushed whole too (`Push::Bulk`, `publish_whole`).
///
/// `lead`: the most calls this writer may run ahead of its readers
/// (`DEPTH`, or fewer for a paced writer, see `PACED_LEAD`).
#[allow(clippy::too_many_arguments)]
fn write(
    c: &mut Ctx,
    call: &Call,
    len: usize,
    big: bool,
    far: bool,
    ahead: usize,
    push: Push,
    lead: u64,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<()> {
    let safe = c.comm.slots.as_ref().map_or(0, |s| s.safe);
    let need = call.back(lead);
    if call.check() && need > safe {
        // A writer that outruns its readers would otherwise check at every
        // call, each time taking the line of a `done` word that a reader
        // stores to at every call: instead it lets them drain `SLACK` calls
        // more (up to this rank's previous call, which every peer reaches),
        // and builds its peer lists only when it must wait.
        let want = if call.single() && lead == DEPTH as u64 {
            let mine = call.area(c, c.rank()).done().load(Relaxed);
            need.max(mine.min(need + SLACK))
        } else {
            need
        };
        let least = |c: &Ctx| {
            (0..c.size())
                .filter(|&p| p != c.rank())
                .map(|p| call.area(c, p).done().load(Acquire))
                .min()
                .unwrap_or(want)
        };
        if least(c) < want {
            let peers: Vec<usize> = (0..c.size())
                .filter(|&p| p != c.rank())
                .map(|p| c.comm.world_rank(p))
                .collect();
            let areas: Vec<Area> = peers
                .iter()
                .map(|&w| call.seg().area(w, call.area))
                .collect();
            let ready = |_: &_| areas.iter().all(|a| a.done().load(Acquire) >= want);
            c.eng.wait_for(c.op, &peers, ready)?;
        }
        // Remember how far everyone is, to skip the next few checks.
        let seen = least(c);
        if let Some(s) = c.comm.slots.as_mut() {
            s.safe = s.safe.max(seen);
        }
    }
    let mine = call.area(c, c.rank());
    if len > 0 {
        // SAFETY: this rank owns the slot, and every reader of its previous
        // call has finished (checked above or implied by `prev_read_all`).
        fill(unsafe { mine.data_mut(call.index(), far, len) })?;
    }
    mine.flag(call.index())
        .store(call.f << 1 | u64::from(big), Release);
    if !c.eng.crowded() {
        mine.demote(call.index(), far, len, push);
    }
    mine.prefetch_write(call.index() + ahead, far, len);
    Ok(())
}

/// Waits for rank `p`'s part of this call; returns whether it is `big`
/// (`wait_exchanged` with no peer taken for one on this core).
#[inline]
pub(super) fn wait_flag(c: &mut Ctx, call: &Call, p: usize) -> Result<bool> {
    wait_exchanged(c, call, p, 0)
}

/// `wait_flag` in a rooted call (bcast, reduce, gather, scatter), where
/// the ranks that only write run ahead of those that read: once rank `p`'s
/// part is here, this rank asks for the lines of `p`'s next slot that a
/// part of `len` bytes reaches, which `p` has most likely written already,
/// so that the next call finds them here instead of waiting a line
/// crossing for them. Alternated runs in both
/// orders, medians of 4, ns, before / after (Open MPI in the last
/// comparison): 2 ranks, 8 B: gather 111 / 70 (64), scatter 104 / 51 (68),
/// bcast 89 / 53 (67), reduce 108 / 63 (82); 128 B: gather 116 / 76,
/// scatter 120 / 58, bcast 89 / 57, reduce 112 / 65; 4 ranks: gather 16 B
/// 166 / 111, scatter 16 B 144 / 101, 128 B 203 / 103, bcast 8 B 123 / 85,
/// reduce 8 B 152 / 105. From 512 B (more lines than `PREFETCH_LINES`)
/// calls read alike. Calls in which every rank reads every other
/// (allreduce, barrier, allgather, alltoall) lost with it (2 ranks
/// allreduce 8 B 214-218 / 231-234, 4 ranks 1.10-1.13 / 1.24-1.30 us):
/// there the peer writes its next slot only after this rank's part reached
/// it, and the early copy of its line costs it one more crossing.
fn wait_rooted(c: &mut Ctx, call: &Call, p: usize, len: usize) -> Result<bool> {
    let big = wait_flag(c, call, p)?;
    if call.single() {
        call.area(c, p).prefetch_read(call.index() + 1, len);
    }
    Ok(big)
}

/// Waits for every peer's part of `len` bytes (a reduce's root,
/// `wait_rooted`).
fn wait_all(c: &mut Ctx, call: &Call, len: usize) -> Result<()> {
    let me = c.rank();
    for p in (0..c.size()).filter(|&p| p != me) {
        wait_rooted(c, call, p, len)?;
    }
    Ok(())
}

/// `wait_all` in a call where every rank publishes and then reads every
/// other part (barrier, allreduce, reduce-scatter). Where ranks outnumber
/// cores, each call needs every rank of a core to run once, so this rank
/// waits first for the peers on its own core, handing the core straight
/// over to them (`Engine::wait_for_mate`). Before, it polled its peers in
/// rank order, and one on its own core cost six polls of every link, then
/// a yield that marked it paused: 0.8 us a call above a bare protocol of
/// flags and yields (1.53 us). 4 ranks on 2 cores, alternated runs, us,
/// before / after: allreduce 8 B (200000 calls) 2.28-2.82 / 1.94-2.30,
/// and in a slower hour 2.80-3.32 / 2.33-2.47; barrier 2.84-3.08 /
/// 1.87-2.57; reduce_scatter 16 B 2.66-3.41 / 2.02-2.96; allgather 16 B
/// 2.30-3.76 / 2.06-2.14 (Open MPI 3.9-5.4 for allreduce). 2 and 8 ranks
/// read alike. Rooted calls (reduce, bcast) lost with it and keep
/// `wait_all`.
///
/// Where a call spends its instructions there counts twice over, since
/// the two ranks of a core run one after the other: on this host 800
/// more instructions of a plain loop in each 8-byte allreduce cost 0.14
/// us at 4 ranks. With `mates` kept over calls, one look at each part's
/// flag before any wait, and doorbells looked at only where some rank
/// sleeps (`ring_peers`), instructions a call (callgrind, 4 ranks, with
/// the polling, which varies), before / after: barrier 1316 / 861-954,
/// allreduce 8 B 1948 / 1583-1607; alternated runs on 2 cores, medians
/// of 20-30, paired ratios after / before: allreduce 8 B 0.92-0.95,
/// barrier 0.92-0.98; 2 ranks alike (barrier 1.006, medians of 40; with
/// the flag's first look inlined and the wait out of line, 1.017-1.03).
fn wait_exchange(c: &mut Ctx, call: &Call) -> Result<()> {
    let mates = mates(c);
    for p in wait_order(c, mates) {
        wait_exchanged(c, call, p, mates)?;
    }
    Ok(())
}

/// Rank `p`'s part of this call: whether it is `big`, once it is there.
/// Where it is not there yet, a peer on this core (in `mates`, see
/// `wait_exchange`) gets the core at once (`Engine::wait_for_mate`), one
/// on another core is polled while it runs (`Engine::wait_for_running`),
/// and a streamed call's peer is waited for as bandwidth-bound waits are
/// (`Engine::wait_for`).
fn wait_exchanged(c: &mut Ctx, call: &Call, p: usize, mates: u64) -> Result<bool> {
    let area = call.area(c, p);
    let flag = area.flag(call.index());
    let ready = |_: &Engine| flag.load(Acquire) >> 1 == call.f;
    if !ready(c.eng) {
        let w = c.comm.world_rank(p);
        if !call.single() {
            c.eng.wait_for(c.op, &[w], ready)?;
        } else if is_mate(mates, p) {
            c.eng.wait_for_mate(c.op, w, ready)?;
        } else {
            c.eng.wait_for_running(c.op, w, ready)?;
        }
    }
    Ok(flag.load(Acquire) & 1 != 0)
}

/// The peers that share this rank's core (`Engine::shares_core`, only
/// where ranks outnumber cores), as a mask of communicator ranks below
/// 64. The peers to wait for first: a peer on this core can only publish
/// once this rank yields, and the call needs it anyway; polling first for
/// a peer on another core only put that yield off. Then the others by
/// rank.
///
/// A mask with some rank in it serves `MATES_AGE` calls of the
/// communicator before it is looked up again (a look at every peer's
/// `on_cpu` word, see `wait_exchange`): ranks bound to their cores stay
/// there but for short moves (`Engine::borrow_idle_core`), and a stale
/// mask only orders the waits and picks between handing the core over
/// and polling. An empty one (before this rank knows its CPU, or alone on
/// its core) is looked up at every call, as before.
fn mates(c: &mut Ctx) -> u64 {
    let (n, me) = (c.size(), c.rank());
    if !c.eng.informed() || n > 64 {
        return 0;
    }
    let calls = match c.comm.slots.as_ref() {
        Some(s) if s.mates.0 != 0 && s.calls.wrapping_sub(s.mates.1) < MATES_AGE => {
            return s.mates.0
        }
        Some(s) => s.calls,
        None => return 0,
    };
    let mut mates = 0u64;
    for p in (0..n).filter(|&p| p != me) {
        if c.eng.shares_core(c.comm.world_rank(p)) {
            mates |= 1 << p;
        }
    }
    if let Some(s) = c.comm.slots.as_mut() {
        s.mates = (mates, calls);
    }
    mates
}

/// Calls for which `mates` keeps what it found.
const MATES_AGE: u64 = 64;

/// This rank's peers in the order to wait for them: its `mates` first,
/// then the others by rank (see `mates`).
fn wait_order(c: &Ctx, mates: u64) -> impl Iterator<Item = usize> {
    let (n, me) = (c.size(), c.rank());
    let first = (0..n).filter(move |&p| is_mate(mates, p));
    let rest = (0..n).filter(move |&p| p != me && !is_mate(mates, p));
    first.chain(rest)
}

/// Whether rank `p` is in `mates`.
fn is_mate(mates: u64, p: usize) -> bool {
    p < 64 && mates >> p & 1 == 1
}

/// `len` bytes of rank `p`'s slot, at `off`; `far`: where `p` placed its
/// part (`Place::far`).
pub(super) fn part<'s>(
    c: &Ctx,
    call: &'s Call,
    p: usize,
    far: bool,
    off: usize,
    len: usize,
) -> &'s [u8] {
    let a = call.area(c, p);
    // SAFETY: the caller saw `p`'s flag for this call, and `p` rewrites the
    // slot only after this rank reports `done` for it (in `finish`). The
    // slice borrows `call`, which `finish` consumes.
    unsafe { &a.data(call.index(), far, off + len)[off..] }
}

/// Reports the call finished; `read_all`: this rank read every peer's slot.
fn finish(c: &mut Ctx, call: Call, read_all: bool) {
    mark_done(c, &call, read_all);
}

/// Folds every rank's `[off, off + len)` in rank order into `out`:
/// `out = d0 op (d1 op (... op d(n-1)))`; `far` as the parts were placed.
/// This rank's part is taken from `own` where it is given, else from its
/// slot.
fn fold_with_own(
    c: &Ctx,
    call: &Call,
    far: bool,
    off: usize,
    out: &mut [u8],
    red: &Reducer,
    own: Option<&[u8]>,
) {
    let (n, me, len) = (c.size(), c.rank(), out.len());
    let at = |p: usize| match own {
        Some(own) if p == me => own,
        _ => part(c, call, p, far, off, len),
    };
    copy(out, at(n - 1));
    for p in (0..n - 1).rev() {
        red.fold_left(at(p), out);
    }
}

/// Every rank waits for every other.
pub fn barrier(c: &mut Ctx) -> Result<()> {
    let call = begin(c)?;
    publish(c, &call, 0, false, Place::Near, |_| Ok(()))?;
    wait_exchange(c, &call)?;
    finish(c, call, true);
    Ok(())
}

/// The root's `buf` to everyone (`buf.len() <= SLOT_DATA`).
pub fn bcast(c: &mut Ctx, buf: &mut [u8], root: usize) -> Result<()> {
    let call = begin_sized(c, buf.len())?;
    if c.rank() == root {
        let mut fill = Fill::sampled(c, buf.len());
        publish_quiet(c, &call, buf.len(), false, Place::Rooted, |d| {
            fill.copy(d, buf);
            Ok(())
        })?;
        fill.done(c);
    } else {
        wait_rooted(c, &call, root, buf.len())?;
        let len = buf.len();
        copy(buf, part(c, &call, root, Place::Rooted.far(len), 0, len));
    }
    finish(c, call, false);
    Ok(())
}

/// Reduces every rank's `send` (same length, `<= SLOT_DATA`) into `out` on
/// the root; on the root `send == None` means in place (input in `out`).
pub fn reduce(
    c: &mut Ctx,
    send: Option<&[u8]>,
    out: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    let input = send
        .or(out.as_deref())
        .ok_or_else(|| Error::InvalidArg("reduce without a buffer".into()))?;
    let len = input.len();
    let call = begin_sized(c, len)?;
    let me = c.rank();
    // Nobody reads the root's slot: with a separate input the root folds
    // it in place (in place, its input is the output, so it goes through
    // the slot like the others').
    let own = send.filter(|_| me == root);
    if own.is_none() {
        // Only the root waits, for flags that `finish` announces.
        let mut fill = Fill::sampled(c, len);
        publish_quiet(c, &call, len, false, Place::Rooted, |d| {
            fill.copy(d, input);
            Ok(())
        })?;
        fill.done(c);
    }
    if me != root {
        finish(c, call, false);
        return Ok(());
    }
    wait_all(c, &call, len)?;
    if let Some(out) = out {
        if out.len() != len {
            finish(c, call, true);
            return Err(mismatch(root, len, out.len()));
        }
        fold_with_own(c, &call, Place::Rooted.far(len), 0, out, red, own);
    }
    finish(c, call, true);
    Ok(())
}

/// Allreduce of `send` (or, in place, `out`) into `out` (`<= SLOT_DATA`
/// bytes). The input goes to the slot straight from where it is: the fold
/// then writes every byte of `out`. The fold takes this rank's own part
/// from the input (in place, from a copy made before the fold), not back
/// from its slot, whose lines a reading peer seems to take away: reading
/// them back cost about a line crossing. Alternated 2-rank runs, medians
/// of 6, us, from the slot / from the input: 8 B 0.232 / 0.166, 128 B
/// 0.373 / 0.279, 512 B 0.553 / 0.389, 2 KiB 0.873 / 0.692 (before the
/// slots' lines went to the shared cache, see `write`); in place, from the
/// slot / a copy: 8 B 0.223 / 0.178, 128 B 0.395 / 0.227, 8 KiB 2.33 / 1.84.
/// Where ranks outnumber cores it still reads its slot, which there was
/// faster, most likely because the rank sharing its core reads the part
/// next and then finds the lines on this core again: 4 ranks on 2 cores,
/// medians of 8 runs of 15 batches, us, slot / input: 8 B 1.147 / 1.321,
/// 128 B 1.280 / 1.419.
pub fn allreduce(c: &mut Ctx, send: Option<&[u8]>, out: &mut [u8], red: &Reducer) -> Result<()> {
    if send.is_some_and(|s| s.len() != out.len()) {
        return Err(Error::InvalidArg(
            "allreduce send and receive buffers differ in length".into(),
        ));
    }
    let call = begin_sized(c, out.len())?;
    let input = send.unwrap_or(out);
    let mut fill = Fill::sampled(c, input.len());
    publish(c, &call, input.len(), false, Place::Shared, |d| {
        fill.copy(d, input);
        Ok(())
    })?;
    fill.done(c);
    wait_exchange(c, &call)?;
    let far = Place::Shared.far(out.len());
    if !c.eng.crowded() {
        // Every peer's part is there: ask for all their lines at once, so
        // that the fold does not meet them one part at a time (a hint, for
        // parts of two to `PREFETCH_LINES` lines). 2 ranks, alternated,
        // medians of 10, us, without / with: 64 B 0.189 / 0.183, 128 B
        // 0.212 / 0.185; 4 ranks on 2 cores read alike or slower (128 B
        // 1.59 / 1.68), so not there.
        for p in (0..c.size()).filter(|&p| p != c.rank()) {
            call.area(c, p).prefetch_rest(call.index(), input.len());
        }
    }
    match send {
        _ if c.eng.crowded() => fold_with_own(c, &call, far, 0, out, red, None),
        Some(own) => fold_with_own(c, &call, far, 0, out, red, Some(own)),
        None => {
            let own = c.copy_of(out);
            fold_with_own(c, &call, far, 0, out, red, Some(&own));
            c.give_back(own);
        }
    }
    finish(c, call, true);
    Ok(())
}

/// Prefix reduction (`MPI_Scan`, or where `exclusive`, `MPI_Exscan`) of
/// `recv.len() <= SLOT_DATA` bytes: every rank but the last publishes its
/// input (`send`, or in place `recv`), and rank r folds the parts of the
/// ranks below it (and, inclusive, its own) in rank order, `x0 op (x1 op
/// (... op xr))` as `fold_with_own` does, so that the last rank's
/// inclusive result is an allreduce's. No rank waits for one above it.
/// Rank 0's exclusive result is left as it is (undefined in MPI).
pub fn scan(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    red: &Reducer,
    exclusive: bool,
) -> Result<()> {
    let (n, me, len) = (c.size(), c.rank(), recv.len());
    if send.is_some_and(|s| s.len() != len) {
        return Err(Error::InvalidArg(
            "scan send and receive buffers differ in length".into(),
        ));
    }
    let call = begin_sized(c, len)?;
    if me + 1 < n {
        let input = send.unwrap_or(recv);
        publish_quiet(c, &call, len, false, Place::Rooted, |d| {
            copy(d, input);
            Ok(())
        })?;
    }
    for p in 0..me {
        wait_rooted(c, &call, p, len)?;
    }
    let far = Place::Rooted.far(len);
    // The rightmost operand into `recv`, then the others from its left.
    let top = match (exclusive, send) {
        (false, Some(own)) => {
            copy(recv, own);
            me
        }
        (false, None) => me,
        (true, _) if me > 0 => {
            copy(recv, part(c, &call, me - 1, far, 0, len));
            me - 1
        }
        (true, _) => 0,
    };
    for p in (0..top).rev() {
        red.fold_left(part(c, &call, p, far, 0, len), recv);
    }
    finish(c, call, false);
    Ok(())
}

/// Reduce-scatter: every rank gives the whole vector of `total <=
/// SLOT_DATA` bytes in `send` (or, in place, in `out`), and rank `r` gets
/// block `blocks[r]` reduced into the start of `out`.
pub fn reduce_scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    out: &mut [u8],
    blocks: &[(usize, usize)],
    total: usize,
    red: &Reducer,
) -> Result<()> {
    let call = begin_sized(c, total)?;
    let (o, l) = blocks[c.rank()];
    // Nobody reads this rank's own block from its slot: with a separate
    // send buffer it is folded straight from there, and the slot gets only
    // the peers' blocks (2 ranks, 512 B: half the lines to take back from
    // the peer). In place, the result overwrites the input's first block,
    // so the whole input goes through the slot.
    let mut fill = Fill::sampled(c, send.map_or(total, |_| total - l));
    publish(c, &call, total, false, Place::Shared, |d| {
        match send {
            Some(data) => {
                fill.copy(&mut d[..o], &data[..o]);
                fill.copy(&mut d[o + l..total], &data[o + l..total]);
            }
            None => fill.copy(d, &out[..total]),
        }
        Ok(())
    })?;
    fill.done(c);
    wait_exchange(c, &call)?;
    let own = send.map(|data| &data[o..o + l]);
    fold_with_own(
        c,
        &call,
        Place::Shared.far(total),
        o,
        &mut out[..l],
        red,
        own,
    );
    finish(c, call, true);
    Ok(())
}

/// Allgather(v): each rank's block `blocks[r]` of `recv` (or `send`) to all.
pub fn allgatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<()> {
    check_recv_blocks(recv.len(), blocks)?;
    let me = c.rank();
    if let Some(s) = send {
        copy_own(block_mut(recv, blocks[me]), s)?;
    }
    let widest = blocks.iter().map(|b| b.1).max().unwrap_or(0);
    let call = begin_sized(c, widest)?;
    let own = block(recv, blocks[me]);
    let mut fill = Fill::sampled(c, own.len());
    publish_whole(c, &call, own.len(), Place::Shared, |d| {
        fill.copy(d, own);
        Ok(())
    })?;
    fill.done(c);
    let mates = mates(c);
    for p in wait_order(c, mates) {
        wait_exchanged(c, &call, p, mates)?;
        let dst = block_mut(recv, blocks[p]);
        let len = dst.len();
        copy(dst, part(c, &call, p, Place::Shared.far(len), 0, len));
    }
    finish(c, call, true);
    Ok(())
}

fn put_u64(d: &mut [u8], at: usize, v: usize) {
    d[at..at + 8].copy_from_slice(&(v as u64).to_ne_bytes());
}

fn get_u64(s: &[u8], at: usize) -> usize {
    u64::from_ne_bytes(s[at..at + 8].try_into().expect("8 bytes")) as usize
}

/// Bytes of a slot holding a table of (offset, length) per rank, then the
/// blocks of every rank but `skip` (the writer's own, which nobody reads).
fn table_bytes(blocks: Blocks, skip: usize) -> usize {
    let data: usize = match blocks {
        Blocks::Listed(b) => b.iter().map(|b| b.1).sum(),
        Blocks::Uniform { len, n } => len * n,
    };
    16 * blocks.count() + data - blocks.get(skip).1
}

/// In the first word of an all-to-all's or a scatter's part: its blocks
/// all have the length in the other bits and follow that word in rank
/// order, the writer's own left out (`write_uniform`). Else the word is
/// the table's first offset (at least the table's length, so never this
/// bit) or, where the writer is rank 0, zero.
const UNIFORM: usize = 1 << 63;

/// Bytes before the blocks of a part written by `write_uniform`.
const UNIFORM_HEAD: usize = 8;

/// Writes an all-to-all's or a scatter's part whose `blocks` (checked) all
/// have one length: that length tagged `UNIFORM`, then the blocks of
/// `send` but `skip`'s, in `uniform_bytes(blocks)`. Readers find their
/// block from the length alone (`block_of`): for a 4-rank `MPI_Alltoall`
/// of 16 bytes the part fits the flag's line, where a table took a second
/// line.
///
/// The length goes in after the blocks, as a gather's writer stores its
/// length word after its block (`gather_blocks`): the word next to the
/// flag, in the line a waiting reader polls, is then stored just before
/// the flag instead of ahead of every data store. (Readers look at either
/// only once the flag is up, so the order is free.) 2 ranks, `mpibench
/// -t`, 6 alternated rounds, medians, us, length first / last: scatter 128
/// B 0.178 / 0.114, 512 B 0.172 / 0.142, 2 KiB 0.254 / 0.211; alltoall 128
/// B 0.278 / 0.226, 512 B 0.369 / 0.253, 2 KiB 0.493 / 0.384; gather 128 B
/// 0.140 / 0.107, 512 B 0.189 / 0.122, 2 KiB 0.190 / 0.166; 8-32 B alike.
/// 4 ranks on 2 cores, 5 rounds: alltoall 2 KiB 6.29 / 5.25, scatter 512
/// B 0.424 / 0.368, the rest alike. Copying also the bytes of each block
/// that share the flag's line after the rest lost in the same run
/// (scatter 512 B 0.239 against 0.209 with the length alone moved, gather
/// 2 KiB 0.257 against 0.212 before any change).
fn write_uniform(d: &mut [u8], send: &[u8], blocks: Blocks, skip: usize, fill: &mut Fill) {
    copy_blocks(d, send, blocks, skip, UNIFORM_HEAD, fill);
    put_u64(d, 0, blocks.get(0).1 | UNIFORM);
}

/// Where this rank's block lies in writer `p`'s part of an all-to-all or
/// scatter, and its length: from the part's length word (`UNIFORM`) or
/// its table.
fn block_of(c: &Ctx, call: &Call, p: usize) -> (usize, usize) {
    let me = c.rank();
    match get_u64(part(c, call, p, false, 0, 8), 0) {
        word if word & UNIFORM != 0 => {
            let len = word & !UNIFORM;
            (UNIFORM_HEAD + (me - usize::from(me > p)) * len, len)
        }
        _ => {
            let entry = part(c, call, p, false, 16 * me, 16);
            (get_u64(entry, 0), get_u64(entry, 8))
        }
    }
}

/// Bytes of a part that `write_uniform` writes for `blocks` (all of one
/// length) but `skip`'s.
fn uniform_bytes(blocks: Blocks) -> usize {
    UNIFORM_HEAD + (blocks.count() - 1) * blocks.get(0).1
}

/// Whether `blocks` all have one length (and `write_uniform` may write
/// them).
fn one_length(blocks: Blocks) -> bool {
    match blocks {
        Blocks::Uniform { n, .. } => n > 0,
        Blocks::Listed(b) => b.first().is_some_and(|f| b.iter().all(|x| x.1 == f.1)),
    }
}

/// The part an all-to-all's or a scatter's writer publishes: the `blocks`
/// of its send buffer but `skip`'s, after their length where they all have
/// one (`write_uniform`), else after a table (`write_table`).
#[derive(Clone, Copy)]
struct BlockPart<'a> {
    blocks: Blocks<'a>,
    skip: usize,
    uniform: bool,
}

impl<'a> BlockPart<'a> {
    fn new(blocks: Blocks<'a>, skip: usize) -> Self {
        BlockPart {
            blocks,
            skip,
            uniform: one_length(blocks),
        }
    }

    /// Its bytes in the slot.
    fn bytes(self) -> usize {
        if self.uniform {
            uniform_bytes(self.blocks)
        } else {
            table_bytes(self.blocks, self.skip)
        }
    }

    /// Its bytes before the blocks: the length word or the table.
    fn head(self) -> usize {
        if self.uniform {
            UNIFORM_HEAD
        } else {
            16 * self.blocks.count()
        }
    }

    /// Writes it into `d` from `send` (whose blocks are checked).
    fn write(self, d: &mut [u8], send: &[u8], fill: &mut Fill) {
        if self.uniform {
            write_uniform(d, send, self.blocks, self.skip, fill);
        } else {
            write_table(d, send, self.blocks, self.skip, fill);
        }
    }
}

/// Writes the table and the (checked) `blocks` of `send` but `skip` into a
/// slot of `table_bytes(blocks, skip)`. Blocks that lie back to back in
/// `send` are copied at once: for small blocks each copy costs more than
/// its bytes.
fn write_table(d: &mut [u8], send: &[u8], blocks: Blocks, skip: usize, fill: &mut Fill) {
    if skip == 0 {
        // Rank 0's entry, never read: not `UNIFORM` (left from an earlier call).
        put_u64(d, 0, 0);
    }
    if let Blocks::Uniform { len, n } = blocks {
        let base = 16 * n;
        for p in (0..n).filter(|&p| p != skip) {
            put_u64(d, 16 * p, base + (p - usize::from(p > skip)) * len);
            put_u64(d, 16 * p + 8, len);
        }
        copy_blocks(d, send, blocks, skip, base, fill);
        return;
    }
    let base = 16 * blocks.count();
    let mut off = base;
    for p in (0..blocks.count()).filter(|&p| p != skip) {
        let l = blocks.get(p).1;
        put_u64(d, 16 * p, off);
        put_u64(d, 16 * p + 8, l);
        off += l;
    }
    copy_blocks(d, send, blocks, skip, base, fill);
}

/// Copies the `blocks` of `send` but `skip`'s into `d` from `at`, one after
/// the other in rank order; blocks that lie back to back in `send` go in
/// one copy (for small blocks each copy costs more than its bytes).
/// Inlined, with the walk over listed blocks apart (`copy_listed`), so
/// that a scatter root's two runs cost no call: with both in one function
/// that was not inlined, callgrind counted 960 instructions a 2-rank
/// `MPI_Scatter` root of 8 B against 916.
#[inline(always)]
fn copy_blocks(d: &mut [u8], send: &[u8], blocks: Blocks, skip: usize, at: usize, fill: &mut Fill) {
    if let Blocks::Uniform { len, n } = blocks {
        // Back to back in `send`: the blocks before `skip`'s and those
        // after it are two runs, without a walk over the ranks.
        let after = (skip + 1) * len;
        copy_run(d, send, (0, at, skip * len), fill);
        copy_run(d, send, (after, at + skip * len, n * len - after), fill);
    } else {
        copy_listed(d, send, blocks, skip, at, fill);
    }
}

/// `copy_blocks` of blocks as the caller listed them.
fn copy_listed(d: &mut [u8], send: &[u8], blocks: Blocks, skip: usize, at: usize, fill: &mut Fill) {
    // The run being gathered: (start in `send`, start in `d`, length).
    let mut run = (0, at, 0);
    for p in (0..blocks.count()).filter(|&p| p != skip) {
        let (o, l) = blocks.get(p);
        if run.0 + run.2 != o {
            copy_run(d, send, run, fill);
            run = (o, run.1 + run.2, 0);
        }
        run.2 += l;
    }
    copy_run(d, send, run, fill);
}

/// Copies `len` bytes of `send` at `from` into `d` at `to`.
fn copy_run(d: &mut [u8], send: &[u8], (from, to, len): (usize, usize, usize), fill: &mut Fill) {
    if len > 0 {
        fill.copy(&mut d[to..to + len], &send[from..from + len]);
    }
}

/// The blocks of `buf` listed in `which`, as disjoint slices for messages
/// (the parts too large for a slot).
fn message_parts<'b>(
    buf: &'b mut [u8],
    blocks: &[(usize, usize)],
    which: &[usize],
) -> Result<Vec<(usize, &'b mut [u8])>> {
    Ok(split_blocks(buf, blocks)?
        .into_iter()
        .enumerate()
        .filter(|(p, _)| which.contains(p))
        .collect())
}

fn mismatch(p: usize, got: usize, want: usize) -> Error {
    Error::InvalidArg(format!(
        "rank {p} sent {got} bytes for a {want}-byte block (mismatched counts)"
    ))
}

/// Where each rank's block lies in a root's all-ranks buffer.
#[derive(Clone, Copy)]
enum Blocks<'a> {
    /// (offset, length) per rank, as the caller listed them.
    Listed(&'a [(usize, usize)]),
    /// `len` bytes per rank, back to back from 0 (`MPI_Gather`,
    /// `MPI_Scatter`): no list to build or check at every call.
    Uniform { len: usize, n: usize },
}

impl Blocks<'_> {
    fn get(&self, p: usize) -> (usize, usize) {
        match *self {
            Blocks::Listed(b) => b[p],
            Blocks::Uniform { len, .. } => (p * len, len),
        }
    }

    fn count(&self) -> usize {
        match *self {
            Blocks::Listed(b) => b.len(),
            Blocks::Uniform { n, .. } => n,
        }
    }

    /// The list, for the rare calls whose parts go as messages.
    fn to_vec(self) -> Vec<(usize, usize)> {
        (0..self.count()).map(|p| self.get(p)).collect()
    }

    /// Checks the blocks against a receive buffer of `len` bytes.
    fn check_recv(&self, len: usize) -> Result<()> {
        match *self {
            Blocks::Listed(b) => check_recv_blocks(len, b),
            Blocks::Uniform { len: l, n } => uniform_fits(l, n, len, "receive"),
        }
    }

    /// Checks the blocks against a send buffer of `len` bytes.
    fn check_send(&self, len: usize) -> Result<()> {
        match *self {
            Blocks::Listed(b) => check_send_blocks(len, b),
            Blocks::Uniform { len: l, n } => uniform_fits(l, n, len, "send"),
        }
    }
}

fn uniform_fits(block: usize, n: usize, len: usize, what: &str) -> Result<()> {
    match block.checked_mul(n) {
        Some(total) if total <= len => Ok(()),
        _ => Err(Error::InvalidArg(format!(
            "{n} blocks of {block} bytes do not fit the {len}-byte {what} buffer"
        ))),
    }
}

/// Gather(v) to the root; a part too large for a slot goes as a message.
pub fn gatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    gather_blocks(c, send, recv, Blocks::Listed(blocks), root, known)
}

/// Gather of `len` bytes per rank, back to back in the root's `recv`.
pub fn gather(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    len: usize,
    root: usize,
) -> Result<()> {
    let n = c.size();
    gather_blocks(c, send, recv, Blocks::Uniform { len, n }, root, Some(len))
}

fn gather_blocks(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    blocks: Blocks,
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    let me = c.rank();
    // A part: its length word, then the block.
    let sized = known.map_or(0, |len| 8 + len);
    if me != root {
        let s = send.ok_or_else(|| Error::InvalidArg("gather without a send buffer".into()))?;
        let call = begin_sized(c, sized)?;
        let big = 8 + s.len() > SLOT_DATA;
        if big {
            publish(c, &call, 0, true, Place::Near, |_| Ok(()))?;
            c.send(0, root, s)?;
        } else {
            let mut fill = Fill::sampled(c, s.len());
            publish_paced(c, &call, 8 + s.len(), |d| {
                // The length word last, as `write_uniform` says why.
                fill.copy(&mut d[8..], s);
                put_u64(d, 0, s.len());
                Ok(())
            })?;
            fill.done(c);
        }
        finish(c, call, false);
        return Ok(());
    }
    let recv =
        recv.ok_or_else(|| Error::InvalidArg("gather root without a receive buffer".into()))?;
    blocks.check_recv(recv.len())?;
    if let Some(s) = send {
        copy_own(block_mut(recv, blocks.get(root)), s)?;
    }
    let call = begin_sized(c, sized)?;
    let mut big = Vec::new();
    for p in (0..c.size()).filter(|&p| p != root) {
        if wait_rooted(c, &call, p, 8 + blocks.get(p).1)? {
            big.push(p);
            continue;
        }
        let dst = block_mut(recv, blocks.get(p));
        let len = get_u64(part(c, &call, p, false, 0, 8), 0);
        if len != dst.len() {
            finish(c, call, true);
            return Err(mismatch(p, len, dst.len()));
        }
        copy(dst, part(c, &call, p, false, 8, len));
    }
    finish(c, call, true);
    if !big.is_empty() {
        let list = blocks.to_vec();
        c.xfer(0, &[], &mut message_parts(recv, &list, &big)?)?;
    }
    Ok(())
}

/// Scatter(v) from the root: the blocks, after their length where they all
/// have one (`write_uniform`), else after a table of (offset, length) per
/// rank; all as messages if they do not fit. 4 ranks on 2 cores,
/// alternated, medians of 6, us, table / length: 32 B 0.114 / 0.107, 512
/// B 0.273 / 0.239, 8 KiB 0.787 / 0.747; 2 ranks alike (8 B 0.050 /
/// 0.048).
pub fn scatterv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    recv: Option<&mut [u8]>,
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    scatter_blocks(c, send, Blocks::Listed(blocks), recv, root, known)
}

/// Scatter of `len` bytes per rank, back to back in the root's `send`.
pub fn scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    len: usize,
    recv: Option<&mut [u8]>,
    root: usize,
) -> Result<()> {
    let n = c.size();
    scatter_blocks(c, send, Blocks::Uniform { len, n }, recv, root, Some(len))
}

fn scatter_blocks(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: Blocks,
    recv: Option<&mut [u8]>,
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    // The root's part where its blocks have one length (`write_uniform`).
    let sized = known.map_or(0, |len| UNIFORM_HEAD + (n - 1) * len);
    if me != root {
        let d = recv.ok_or_else(|| Error::InvalidArg("scatter without a receive buffer".into()))?;
        let call = begin_sized(c, sized)?;
        // The root's table, then the blocks: this rank's reaches about
        // its rank's share of the whole.
        if wait_rooted(c, &call, root, 16 * n + d.len() * (me + 1))? {
            finish(c, call, false);
            return c.recv(0, root, d);
        }
        let (off, len) = block_of(c, &call, root);
        let res = if len == d.len() {
            copy(d, part(c, &call, root, false, off, len));
            Ok(())
        } else {
            Err(mismatch(root, len, d.len()))
        };
        finish(c, call, false);
        return res;
    }
    let send =
        send.ok_or_else(|| Error::InvalidArg("scatter root without a send buffer".into()))?;
    blocks.check_send(send.len())?;
    let own = block(send, blocks.get(root));
    let layout = BlockPart::new(blocks, root);
    let total = layout.bytes();
    if total > SLOT_DATA {
        // Checked before anything is sent, as on the slot path.
        let mut mine = recv.map(|d| OwnCopy::new(d, own)).transpose()?;
        let call = begin_sized(c, sized)?;
        publish(c, &call, 0, true, Place::Near, |_| Ok(()))?;
        let sends: Vec<(usize, &[u8])> = (0..n)
            .filter(|&p| p != root)
            .map(|p| (p, block(send, blocks.get(p))))
            .collect();
        finish(c, call, false);
        // The own block is copied while the receivers take theirs: an
        // announced send completes only once its receiver has taken it.
        // 2 ranks, us, copied after / meanwhile (Open MPI): 512 KiB 14.5 /
        // 9.3 (13.5), 2 MiB 80-83 / 50-51 (75), 8 MiB 718 / 359-361 (632).
        // A piece at a time (`OwnCopy`), so that the ring to a lone receiver
        // is refilled in between: 2 ranks, `-t`, alternated, far (8
        // rounds), medians, us, whole / in pieces: 2 MiB 66.5 / 63.0, 4 MiB
        // 127 / 123, 8 MiB 257 / 257, 16 MiB 857 / 682.
        return c.send_then(0, &sends, scatter_kind(c, &sends), || {
            mine.as_mut().is_some_and(OwnCopy::step)
        });
    }
    if let Some(d) = recv {
        copy_own(d, own)?;
    }
    let call = begin_sized(c, sized)?;
    let mut fill = Fill::sampled(c, total - layout.head());
    publish_quiet(c, &call, total, false, Place::Near, |d| {
        layout.write(d, send, &mut fill);
        Ok(())
    })?;
    fill.done(c);
    finish(c, call, false);
    Ok(())
}

/// How a root's scatter sends its messages: announced (each receiver
/// reads its block in place), except to a lone receiver on a core of its
/// own (`SendKind::Lone`), which takes a block below `Engine`'s
/// `LONE_EAGER` faster through the ring, emptying it while the root fills
/// it (announced, it read the root's freshly written lines from the other
/// core), and a larger one through the ring's rendezvous. 2 ranks, `-t`, alternated, medians of 5, us, per-rank block,
/// announced / plain (Open MPI): 64 KiB 19.7 / 11.1 (21.9), 80 KiB 26.3 /
/// 13.7 (26.8), 96 KiB 28.3 / 18.1 (32.0); larger, at `LONE_EAGER`.
/// Several receivers read their blocks in place at once, where the root
/// would copy every block into a ring in turn; where ranks outnumber
/// cores the announcement waits for each receiver's core.
fn scatter_kind(c: &Ctx, sends: &[(usize, &[u8])]) -> SendKind {
    if sends.len() == 1 && !c.eng.crowded() {
        SendKind::Lone
    } else {
        SendKind::Rooted
    }
}

/// All-to-all(v): each rank's slot holds its blocks for the others, after
/// their length where they all have one (`write_uniform`), else after a
/// table of (offset, length) per destination; a rank whose blocks do not
/// fit sends them as messages. Alternated runs, medians of 6-8, us, table
/// for every part / length where one: 4 ranks on 2 cores, 16 B 1.542-1.679
/// / 1.304-1.353, 64 B 1.485 / 1.293, 128 B 1.649 / 1.488, 2 KiB 2.184 /
/// 2.062; 2 ranks 128 B 0.182-0.189 / 0.174-0.181, 512 B 0.388-0.390 /
/// 0.346-0.356; 8-32 KiB alike. `known`: the length of every block, where
/// all have one that every member knows (`MPI_Alltoall`), so that all
/// number the call alike by it (`begin_sized`).
pub fn alltoallv(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
    known: Option<usize>,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    check_send_blocks(send.len(), sblocks)?;
    check_recv_blocks(recv.len(), rblocks)?;
    copy_own(block_mut(recv, rblocks[me]), block(send, sblocks[me]))?;
    let layout = BlockPart::new(Blocks::Listed(sblocks), me);
    let total = layout.bytes();
    let big = total > SLOT_DATA;
    let call = begin_sized(c, known.map_or(0, |len| UNIFORM_HEAD + (n - 1) * len))?;
    let mut fill = Fill::sampled(c, if big { 0 } else { total - layout.head() });
    let table = |d: &mut [u8]| {
        layout.write(d, send, &mut fill);
        Ok(())
    };
    if big {
        publish(c, &call, 0, true, Place::Near, table)?;
    } else {
        publish_whole(c, &call, total, Place::Near, table)?;
    }
    fill.done(c);
    let mut from_msgs = Vec::new();
    let mut bad = None;
    let mates = mates(c);
    for p in wait_order(c, mates) {
        if wait_exchanged(c, &call, p, mates)? {
            from_msgs.push(p);
            continue;
        }
        let dst = block_mut(recv, rblocks[p]);
        let (off, len) = block_of(c, &call, p);
        if len == dst.len() {
            copy(dst, part(c, &call, p, false, off, len));
        } else {
            bad.get_or_insert(mismatch(p, len, dst.len()));
        }
    }
    finish(c, call, true);
    let sends: Vec<(usize, &[u8])> = if big {
        (0..n)
            .filter(|&p| p != me)
            .map(|p| (p, block(send, sblocks[p])))
            .collect()
    } else {
        Vec::new()
    };
    if !sends.is_empty() || !from_msgs.is_empty() {
        let mut msgs = message_parts(recv, rblocks, &from_msgs)?;
        c.xfer(0, &sends, &mut msgs)?;
    }
    bad.map_or(Ok(()), Err)
}

/// Frees the areas of released communicators that every member has
/// finished reading (called before agreeing on a new communicator).
pub fn reclaim(eng: &mut crate::comm::engine::Engine) {
    let Some(seg) = eng.segment().cloned() else {
        return;
    };
    let mut freed = 0u64;
    eng.draining.retain(|(area, members, last)| {
        let finished = members
            .iter()
            .all(|&w| seg.area(w, *area).done().load(Acquire) >= *last);
        if finished {
            freed |= 1 << area;
        }
        !finished
    });
    eng.areas_free |= freed;
}
