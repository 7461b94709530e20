//! Collective slots: per rank, a few areas (one per communicator that uses
//! them), each with `DEPTH` slots used in turn that the rank writes and its
//! peers read in place, plus a counter of the calls it has finished reading.
//!
//! A small collective then costs one write and one flag per rank instead
//! of a message per pair through the rings. The protocol lives in
//! `coll::slots`; this module only lays the memory out.

use super::demote;
use std::sync::atomic::AtomicU64;

/// Areas per rank: at most this many multi-rank communicators that share a
/// rank use slots at the same time; further ones use the rings.
pub const AREAS: usize = 16;
/// Bytes one slot carries (one rank's contribution to one call). Up to here
/// slots beat the rings at 2 ranks (bcast 32 KiB 3.2 -> 1.8 us, 64 KiB
/// 7.2 -> 3.3 us); pages are only touched as far as calls fill them.
pub const SLOT_DATA: usize = 64 * 1024;
/// Slots per area: how many calls a rank may run ahead of its slowest
/// reader. Deep enough that ranks sharing a core run many calls per time
/// slice instead of switching at every call: a switch costs 1.3-2.4 us
/// here. At 4 ranks on 2 cores, 8-byte calls went from 16 to 64 deep as
/// bcast 1.13 -> 0.55 us, reduce 1.12 -> 0.68, gather 1.56 -> 0.54,
/// scatter 0.98 -> 0.72; once a call itself took ~0.1 us, from 64 to 256
/// deep as bcast 109 -> 68 ns, reduce 135 -> 93, gather 147 -> 100,
/// scatter 131 -> 89 (128 deep: 83, 106, 114, 104; Open MPI 156, 172,
/// 143, 168), and at 8 ranks bcast 236-243 -> 151-155, gather 359-371 ->
/// 257-287. 2-rank and lockstep calls (allreduce, barrier) were equal.
/// The cost is a larger cycle through slot memory for calls near the
/// 64 KiB slot size: 4 ranks, 64 KiB, bcast 2.0 -> 2.5-3.1 us, gather
/// 1.3 -> 1.8-2.1 (Open MPI at 32 KiB: 10.9 and 8.2). Streamed calls use
/// only a window of 16 or 32 (`coll::slots::WINDOW`), and calls whose parts
/// pass 8 KiB one that narrows as they grow (`coll::slots::begin_sized`);
/// `coll::slots::populate` maps ahead as much of each slot as they fill.
pub const DEPTH: usize = 256;
/// Where a contribution starts when it leads with a table its readers
/// need first, or fits next to the flag: right after the flag, so readers
/// get that much with the flag's cache line.
const NEAR_OFFSET: usize = 8;
/// Bytes after the flag on its line.
pub const NEAR_BYTES: usize = 64 - NEAR_OFFSET;
/// Where any other contribution starts (a `far` one): on the line after
/// the flag's, so the writer's data stores leave alone the line that a
/// waiting reader polls (see `coll::slots::write`).
const FAR_OFFSET: usize = 64;
/// Most lines of a slot `Area::prefetch_write` asks for.
const PREFETCH_LINES: usize = 4;
/// Lines of a slot (the flag's among them) for which a `Push::Bulk` part
/// is demoted whole: parts of 4-8 KiB. Alternated 2-rank runs, medians of
/// 4-6 runs of 15 batches, us, without / with: allgather 8 KiB (4 KiB a
/// rank) 1.200-1.218 / 1.044-1.060, 16 KiB 1.792-1.802 / 1.611-1.644;
/// alltoall 8 KiB 1.185 / 1.056-1.080, 16 KiB 1.80-1.83 / 1.72-1.74. With
/// 16 KiB parts (257 lines, through the slots where reads are off): allgather
/// 32 KiB 3.00 / 3.31, alltoall 32 KiB 3.31 / 3.75; with 17-33 lines:
/// allgather 2 KiB 0.540 / 0.671, 4 KiB 0.714 / 0.830; an allreduce's
/// part, folded rather than copied, lost from 129 lines (8 KiB 1.62 / 1.71
/// with reads off, 16 KiB 2.54 / 3.03). Where ranks outnumber cores every
/// bulk push lost (4 ranks, allgather 64 KiB 8.4 / 12.5, allreduce 16 KiB
/// 8.8 / 12.2); there `coll::slots::write` demotes nothing at all.
const BULK_LINES: std::ops::RangeInclusive<usize> = 65..=129;

/// Which of a freshly written slot's lines `Area::demote` hands to the
/// shared cache.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// The flag's line and the data's, when they are at most
    /// `PREFETCH_LINES`.
    Whole,
    /// The data's lines after the flag's, when all are at most
    /// `PREFETCH_LINES`.
    Data,
    /// As `Data`, and also when they are `BULK_LINES`: for a part written
    /// whole, which its readers copy out.
    Bulk,
}

/// A flag line, then room for `SLOT_DATA` bytes from `FAR_OFFSET`.
const SLOT_BYTES: usize = FAR_OFFSET + SLOT_DATA;
/// The `done` line, then the slots.
pub const AREA_BYTES: usize = 64 + DEPTH * SLOT_BYTES;

/// One rank's area for one communicator.
#[derive(Clone, Copy)]
pub struct Area {
    base: *mut u8,
}

impl Area {
    /// # Safety
    /// `base` must point to `AREA_BYTES` of zero-initialised shared memory,
    /// 64-byte aligned, that outlives every use of the area.
    pub unsafe fn from_raw(base: *mut u8) -> Area {
        Area { base }
    }

    /// The last call (communicator slot sequence) whose peers' slots this
    /// rank has finished reading.
    pub fn done(&self) -> &AtomicU64 {
        // SAFETY: the first 8 bytes of the area are an aligned u64 only
        // accessed atomically (see `from_raw`).
        unsafe { &*(self.base as *const AtomicU64) }
    }

    fn slot(&self, index: usize) -> *mut u8 {
        // SAFETY: index % DEPTH < DEPTH, so the slot lies inside the area.
        unsafe { self.base.add(64 + (index % DEPTH) * SLOT_BYTES) }
    }

    /// The flag of slot `index % DEPTH`: which call its data belongs to.
    pub fn flag(&self, index: usize) -> &AtomicU64 {
        // SAFETY: each slot starts with an aligned u64 used only atomically.
        unsafe { &*(self.slot(index) as *const AtomicU64) }
    }

    /// Maps this area's slot memory into this process ahead of use
    /// (`populate::populate`), writable for its owner (`write`): of slot
    /// `i`, its first `len(i)` bytes (at most the slot).
    pub fn populate(&self, len: impl Fn(usize) -> usize, write: bool) {
        for i in 0..DEPTH {
            super::populate::populate(self.slot(i), len(i).min(SLOT_BYTES), write);
        }
    }

    /// Bytes that `populate(len, _)` maps, at most (whole pages).
    pub fn populated_bytes(len: impl Fn(usize) -> usize) -> usize {
        (0..DEPTH).map(|i| len(i).min(SLOT_BYTES) + 2 * 4096).sum()
    }

    /// Asks for slot `index % DEPTH`'s first line (the flag and a small
    /// part) in a writable state, ahead of the owner's write to it, and for
    /// the further lines that `len` bytes of data (`far` or not) reach when
    /// they are at most `PREFETCH_LINES` in all; a hint only (x86-64
    /// `prefetchw`; nothing elsewhere).
    pub fn prefetch_write(&self, index: usize, far: bool, len: usize) {
        self.prefetch(index, start(far) + len, true);
    }

    /// Asks for slot `index % DEPTH`'s lines, to read soon: those that
    /// `len` bytes of data reach however placed, when they are at most
    /// `PREFETCH_LINES` in all, else the first (the flag's); a hint only
    /// (x86-64 `prefetcht0`; nothing elsewhere).
    pub fn prefetch_read(&self, index: usize, len: usize) {
        self.prefetch(index, FAR_OFFSET + len, false);
    }

    /// `prefetch_read` for a reader that holds the flag's line already:
    /// only where `len` bytes of data reach past it and the lines are at
    /// most `PREFETCH_LINES` in all; nothing otherwise.
    pub fn prefetch_rest(&self, index: usize, len: usize) {
        if (2..=PREFETCH_LINES).contains(&(FAR_OFFSET + len).div_ceil(64)) {
            self.prefetch(index, FAR_OFFSET + len, false);
        }
    }

    /// Hands slot `index % DEPTH`'s lines that `len` bytes of data (`far`
    /// or not) reach to the shared cache (`demote::lines`), as `push`
    /// says.
    pub fn demote(&self, index: usize, far: bool, len: usize, push: Push) {
        let lines = (start(far) + len).div_ceil(64);
        let skip = match push {
            Push::Whole if lines <= PREFETCH_LINES => 0,
            Push::Data if lines <= PREFETCH_LINES => 1,
            Push::Bulk if lines <= PREFETCH_LINES || BULK_LINES.contains(&lines) => 1,
            _ => return,
        };
        demote::lines(
            self.slot(index).wrapping_add(64 * skip),
            lines.saturating_sub(skip),
        );
    }

    /// Prefetches the lines of slot `index % DEPTH` that its first `bytes`
    /// reach when they are at most `PREFETCH_LINES`, else its first line;
    /// for writing (`prefetchw`) or reading (`prefetcht0`).
    fn prefetch(&self, index: usize, bytes: usize, write: bool) {
        let lines = match bytes.div_ceil(64) {
            n if n <= PREFETCH_LINES => n,
            _ => 1,
        };
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        for line in 0..lines {
            let at = self.slot(index).wrapping_add(64 * line);
            // SAFETY: a prefetch never faults and changes no memory; the
            // line lies inside the slot.
            unsafe {
                if write {
                    std::arch::asm!("prefetchw [{0}]", in(reg) at,
                        options(nostack, preserves_flags, readonly));
                } else {
                    std::arch::asm!("prefetcht0 [{0}]", in(reg) at,
                        options(nostack, preserves_flags, readonly));
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (index, lines, write);
    }

    /// The data of slot `index % DEPTH`, for reading; `far` as the writer
    /// placed it.
    ///
    /// # Safety
    /// The owner must not write the slot while the slice lives (the caller
    /// saw the flag of the call it reads and has not yet reported `done`),
    /// and the slice must not outlive the mapping; the caller picks `'a`.
    pub unsafe fn data<'a>(&self, index: usize, far: bool, len: usize) -> &'a [u8] {
        assert!(len <= SLOT_DATA);
        std::slice::from_raw_parts(self.slot(index).add(start(far)), len)
    }

    /// The data of slot `index % DEPTH`, for the owner to fill: from
    /// right after the flag, or `far` from the next line.
    ///
    /// # Safety
    /// Only the owning rank may call this, and only once every reader of
    /// this slot's previous call has reported `done`.
    #[allow(clippy::mut_from_ref)] // the memory is shared, not owned by `self`
    pub unsafe fn data_mut(&self, index: usize, far: bool, len: usize) -> &mut [u8] {
        assert!(len <= SLOT_DATA);
        std::slice::from_raw_parts_mut(self.slot(index).add(start(far)), len)
    }
}

/// Offset of a slot's data from the slot's start.
fn start(far: bool) -> usize {
    if far {
        FAR_OFFSET
    } else {
        NEAR_OFFSET
    }
}
