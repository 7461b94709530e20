//! Algorithm choice per call, from message size, rank count and whether the
//! operation commutes; `FERROCOLL_ALGO=coll=name,...` forces a choice where
//! it is valid (an invalid one falls back to the automatic choice).
//!
//! | collective | algorithms | automatic choice |
//! |---|---|---|
//! | allreduce | `recursive_doubling`, `ring`, `reduce_bcast`, `slots`, `stream`, `slices`, `flat`, `pull` | pull from 128 KiB (8 MiB where ranks outnumber cores; there on Intel CPUs, `FERROCOLL_CMA_BUSY`, untimed from 1 MiB while all inputs together stay within 32 MiB, and never beyond, `crowded_pulls`; on Intel CPUs at 2 ranks on cores of their own untimed from 1 MiB, `paired_pulls`), else slots while all parts together fit 64 KiB (32 KiB at 2 ranks on cores of their own, `read_limit`), stream above; without a slot area: ring from 64 KiB when the op commutes, else recursive doubling; across hosts with several ranks on some (commutative ops): host-aware, in slices from 64 KiB where every host has as many ranks (`coll::hier`); `flat` turns host-aware off |
//! | bcast | `binomial`, `chain`, `slots`, `stream`, `pull` | pull (shared: the root writes part) from 2 MiB where ranks do not outnumber cores, shared as well from 8 MiB where they do (untimed on Intel CPUs, `FERROCOLL_CMA_BUSY`, `reads_untimed`), else slots up to 64 KiB (32 KiB at 2 ranks on cores of their own), stream above; without a slot area: chain (pipelined in 128 KiB pieces) from 256 KiB with more than 2 ranks, else binomial |
//! | reduce | `binomial`, `rsag`, `slots`, `stream`, `pull` | slots while all parts together fit 64 KiB (16 KiB where ranks outnumber cores; while each part fits a slot at 2 ranks on cores of their own), then stream, pulled from 8 MiB (on Intel CPUs, `FERROCOLL_CMA_BUSY`, untimed: at 2 ranks on cores of their own from 2 MiB while both inputs stay within 32 MiB, `paired_pulls`; where ranks outnumber cores from 1 MiB, `crowded_pulls`, elsewhere never there); without a slot area: reduce-scatter + gather from 512 KiB with more than 4 ranks when the op commutes, else binomial |
//! | allgather | `direct`, `ring`, `slots`, `stream`, `pull` | pull from 32 KiB in total (8 MiB where ranks outnumber cores; never at 2 ranks on cores of their own), else slots up to 64 KiB in total (16 KiB at 2 ranks on cores of their own), stream above (2 ranks on their own cores: direct from 1 MiB, timed against the stream, or read in place untimed where busy senders' messages are, `reads_untimed`); without a slot area: direct below 64 KiB or at 2 ranks, ring above |
//! | reduce_scatter | `ring`, `reduce_scatterv`, `slots`, `stream`, `pull` | pull from 1 MiB in total (untimed from 2 MiB on Intel CPUs, `FERROCOLL_CMA_BUSY`, `reads_untimed`), else slots up to 64 KiB in total, stream above; without a slot area: ring when the op commutes |
//! | alltoall | `direct`, `pairwise`, `slots`, `stream`, `pull` | with one block length everywhere, pull from 2 MiB sent per rank (1 MiB where ranks outnumber cores; 2 ranks on cores of their own: direct from 2 MiB instead, timed against the stream, or read in place untimed where busy senders' messages are, `reads_untimed`); else slots while all blocks together (with 16-byte headers) fit 32 KiB; above that, when every block has one length (`MPI_Alltoall`), stream; otherwise slots, where a rank whose blocks do not fit its slot sends them as messages (direct: all posted at once) |
//! | scan | `chain` | chain (rank order, any op) |
//! | barrier | `dissemination`, `slots` | slots |
//! | gather, scatter | `direct`, `slots`, `stream`, `pull` | gather (one length everywhere): from 32 KiB per rank, stream where ranks outnumber cores or below 128 KiB per rank, else pull (every rank writes its block into the root's buffer), timed against the stream (`gather_stream`); where ranks outnumber cores on Intel CPUs (`FERROCOLL_CMA_BUSY`) pull untimed from 64 KiB per rank (`crowded_pulls`); else slots (a part too large for a slot goes as a message; a scatter root announces its parts, each read in place by its receiver, except a lone receiver's at 2 ranks on cores of their own, sent eagerly below 768 KiB, `SendKind::Lone`, and through the ring's rendezvous above); scatter and the v-variants pull only when forced; `MPI_Scatter` (one length everywhere) where ranks outnumber cores streams while the others' blocks together pass a slot and stay within 3 MiB (1 MiB on Intel CPUs, `FERROCOLL_CMA_BUSY`; `scatter_stream`) |
//!
//! `pull` (`coll::pull`): each rank reads what it needs straight from
//! its peers' buffers (cross-memory attach), where the kernel allows it
//! (`FERROCOLL_CMA`); the figures behind each choice are at `pull_allgather`,
//! `allgather_pulls`, `pull_alltoall`, `pull_bcast`, `pull_reduce`,
//! `pull_allreduce`, `pull_reduce_scatter` and `pull_gather`. A pull those
//! give from `tune::TUNED_FROM` bytes is only proposed: timings decide
//! between it and the other way (`coll::tune`; not for a gather or reduce
//! where ranks outnumber cores).
//!
//! `slots` (collective slots in shared memory, see `coll::slots`): each
//! rank's part fits a slot (64 KiB) and, where every rank reads every part,
//! all parts together stay within 64 KiB (less for some collectives and
//! placements, `read_limit`; all-to-all, `ALLTOALL_SLOTS`). `stream`
//! (`coll::stream`) runs larger calls through the same slots in 64 KiB
//! chunks, so each byte of a
//! user buffer is read or written from memory once; measured against the
//! ring and tree algorithms at 2 and 4 ranks (2 cores) it wins at every
//! size above the slot limit (2-rank allreduce 256 KiB: ring 108-121 us,
//! stream 38 us; 2 MiB: 1070-1130 us vs 294-312 us).
//!
//! The thresholds are first guesses for one host; the shared-memory
//! performance work re-tunes them from measurements.

use super::slots::READ_LIMIT;
use super::{tune, Ctx};
use crate::error::Result;
use crate::transport::shm::slots::SLOT_DATA;
use std::time::Instant;

/// The algorithm names `FERROCOLL_ALGO` accepts, per collective (the table
/// above, plus `flat` and `slices` of the host-aware algorithms).
const ALGORITHMS: &[(&str, &[&str])] = &[
    (
        "allreduce",
        &[
            "recursive_doubling",
            "ring",
            "reduce_bcast",
            "slots",
            "stream",
            "slices",
            "flat",
            "pull",
        ],
    ),
    (
        "bcast",
        &["binomial", "chain", "slots", "stream", "flat", "pull"],
    ),
    (
        "reduce",
        &["binomial", "rsag", "slots", "stream", "flat", "pull"],
    ),
    ("allgather", &["direct", "ring", "slots", "stream", "pull"]),
    (
        "reduce_scatter",
        &["ring", "reduce_scatterv", "slots", "stream", "pull"],
    ),
    (
        "alltoall",
        &["direct", "pairwise", "slots", "stream", "pull"],
    ),
    ("scan", &["chain", "slots"]),
    ("barrier", &["dissemination", "slots"]),
    ("gather", &["direct", "slots", "stream", "pull"]),
    ("scatter", &["direct", "slots", "stream", "pull"]),
];

/// Whether `name` is one of `coll`'s algorithms; any other forced name
/// leaves the choice automatic.
pub fn known(coll: &str, name: &str) -> bool {
    ALGORITHMS
        .iter()
        .any(|(c, names)| *c == coll && names.contains(&name))
}

/// Whether `coll` goes through the communicator's collective slots: forced
/// with `FERROCOLL_ALGO=coll=slots` (where `fits`), or chosen automatically
/// when it `fits` and is `cheap` (also when the forced name is not one of
/// `coll`'s algorithms). Every member must decide alike, so both may only
/// depend on arguments every member knows.
pub fn slots(c: &Ctx, coll: &str, fits: bool, cheap: bool) -> bool {
    if !fits || !c.has_slots() {
        return false;
    }
    match c.forced(coll) {
        Some("slots") => true,
        Some(name) if known(coll, name) => false,
        _ => cheap,
    }
}

/// Whether `coll` reads its peers' buffers in place (`coll::pull`):
/// forced with `pull`, or chosen automatically where `auto` says (from
/// `bytes` as every member counts it, and whether ranks outnumber cores)
/// and, where it says to pull from `tune::TUNED_FROM` bytes, the latest
/// timings agree (`tuned`; where ranks outnumber cores, a gather or
/// reduce, and on Intel CPUs an allreduce, by `crowded_pulls` instead,
/// and on Intel CPUs at 2 ranks an allreduce or reduce by `paired_pulls`;
/// untimed where `reads_untimed` says). Never where pulls are off. Where
/// `auto` says not to pull, the other way won in both of the host's
/// states, or nearly, and trials would only cost.
pub fn pull(
    c: &mut Ctx,
    coll: &'static str,
    bytes: usize,
    auto: fn(usize, bool) -> bool,
) -> Result<bool> {
    if !c.pulls() {
        return Ok(false);
    }
    match c.forced(coll) {
        Some("pull") => Ok(true),
        Some(name) if known(coll, name) => Ok(false),
        _ => {
            let untimed = crowded_pulls(c, coll, bytes).or_else(|| paired_pulls(c, coll, bytes));
            if let Some(pulls) = untimed {
                return Ok(pulls);
            }
            let fixed = auto(bytes, c.eng.crowded());
            let timed = TUNED.contains(&coll) && !reads_untimed(c, coll, bytes);
            if !fixed || bytes < tune::TUNED_FROM || !timed {
                return Ok(fixed);
            }
            tuned(c, coll, bytes)
        }
    }
}

/// The collectives whose pulls are timed against the other way
/// (`coll::tune`); scatter and the v-variants never pull by themselves.
const TUNED: [&str; 7] = [
    "allreduce",
    "bcast",
    "reduce",
    "reduce_scatter",
    "alltoall",
    "allgather",
    "gather",
];

/// Whether this call pulls by `coll::tune`, where the size says to: a
/// trial (timed on rank 0), the way rank 0 tells the others, or the
/// round's verdict. For a 2-rank allgather the pull is its messages, read
/// in place by each receiver (`allgather`).
fn tuned(c: &mut Ctx, coll: &'static str, bytes: usize) -> Result<bool> {
    let first = c.rank() == 0;
    let Some(s) = c.comm.slots.as_mut() else {
        return Ok(true);
    };
    let (entry, step) = s.tune.next(coll, bytes, first.then(Instant::now));
    match step {
        tune::Step::Try(pull) | tune::Step::Keep(pull) => Ok(pull),
        tune::Step::Ask => {
            let mut v = [u8::from(s.tune.verdict(entry, true))];
            if first {
                let [other, pulled] = s.tune.timings(entry);
                crate::param::debug_log(crate::param::DebugLevel::Info, || {
                    format!(
                        "{coll} of {bytes} bytes: {} (a call's mean time, the longest \
                         left out: pulled {pulled:?}, not pulled {other:?})",
                        if v[0] != 0 { "pulls" } else { "does not pull" }
                    )
                });
            }
            super::slots::bcast(c, &mut v, 0)?;
            let pull = v[0] != 0;
            if let Some(s) = c.comm.slots.as_mut() {
                s.tune.settle(entry, pull);
            }
            Ok(pull)
        }
    }
}

// When collectives pull, from alternated runs of `bench/mpibench.c -t`
// (every call's input written first, as a program writes what it sends:
// a read in place then fetches each line from the writer's core) on this
// 2-core host, us, medians of 3-7, streamed or slots / pulled (Open MPI,
// MPICH). Scatter never pulls by itself: its parts too large for a slot
// go as messages, which the receiver reads in the sender's memory anyway
// (or, where the two have cores of their own, takes through the ring,
// `comm::engine`'s `reads_in_place`, which was faster still).
// Nor do the v-variants, whose sizes only the root knows. Figures from
// inputs that never changed, where the reader's core kept their lines
// from the last call and reads in place won from 16-32 KiB, are in the
// history of this file.

/// Allgather, `bytes` gathered: 2 ranks 8 KiB 1.13 / 1.16 / 1.83, 32 KiB
/// 3.12 / 1.85 / 2.44, 512 KiB 30.3 / 14.6 / 15.1, 8 MiB 780 / 679 / 684,
/// 32 MiB 3796-4752 / 2948 / 2979; 4 ranks on 2 cores 128 KiB 14.7 / 19.9
/// / 29.2, 512 KiB 61.7 / 55.1 / 84.4, 2 MiB 348 / 285 / 439, 32 MiB
/// 10325 / 8415 / 10009. Those inputs never changed, and the reader's core
/// kept their lines from the last call; written before each call
/// (`bench/mpibench.c -t`), 4 ranks on 2 cores, alternated, medians of 3,
/// us, pulled / streamed (Open MPI): 512 KiB 163 / 124 (170), 2 MiB 652 /
/// 496 (646), 8 MiB 2121-2192 / 2052-2202 (2509), 32 MiB 14819 / 19424.
pub fn pull_allgather(bytes: usize, crowded: bool) -> bool {
    bytes >= if crowded { 8 << 20 } else { 32 << 10 }
}

/// Whether an allgather of `total` bytes pulls. Not with 2 ranks on cores
/// of their own: those figures came from buffers that never changed, whose
/// lines the reader's core kept from the last call. Where each call's
/// input is written first (`bench/mpibench.c -t`), 2 ranks, alternated,
/// medians of 3, us, pulled / streamed / as messages (`Direct`) (Open MPI,
/// MPICH): 32 KiB 7.37 / 4.20 / 4.56 (8.07, 7.19), 128 KiB 22.5 / 16.0 /
/// 16.6 (30.4, 18.9), 512 KiB 79.9 / 57.9 / 68.4 (108, 61.9), 2 MiB 336 /
/// 310 / 230 (336, 258), 8 MiB 1029 / 1237 / 994 (1019, 1061), 32 MiB 6207
/// / 11101 / 5610 (6523, 6292): streamed below `ALLGATHER_DIRECT`, as
/// messages from it (`allgather`).
pub fn allgather_pulls(c: &mut Ctx, total: usize) -> Result<bool> {
    if two_on_own_cores(c) && c.forced("allgather").is_none() {
        return Ok(false);
    }
    pull(c, "allgather", total, pull_allgather)
}

/// Bytes gathered from which a 2-rank allgather whose ranks have cores of
/// their own goes as messages (`allgather_pulls`).
const ALLGATHER_DIRECT: usize = 1 << 20;

/// Whether an all-to-all of `total` bytes received pulls. Not with 2 ranks
/// on cores of their own, whose messages are timed against the stream
/// instead (`alltoall_direct`): pulled, the 2-rank calls took 1.25-1.57
/// times as long as streamed from 1 to 32 MiB (`-t`, alternated, 4 rounds
/// near).
pub fn alltoall_pulls(c: &mut Ctx, total: usize) -> Result<bool> {
    if two_on_own_cores(c) && c.forced("alltoall").is_none() {
        return Ok(false);
    }
    pull(c, "alltoall", total, pull_alltoall)
}

/// Whether a 2-rank all-to-all whose ranks have cores of their own goes as
/// messages (`alltoall::messages`, each block through the ring's
/// rendezvous) rather than streamed: from `ALLTOALL_DIRECT` bytes received,
/// timed against the stream (`tuned`) where the rank could pull. 2 ranks,
/// `-t`, alternated, near (6 rounds), medians, us, streamed / as messages:
/// 1 MiB 37.1 / 37.0, 2 MiB 78.0 / 69.8, 4 MiB 164 / 145, 8 MiB 600 / 507,
/// 16 MiB 1872 / 2026, 32 MiB 4878 / 4661 (a message's 8 MiB land in the
/// cache, the stream's past it). Where busy senders' messages are read in
/// place (`Engine::reads_busy`: Intel CPUs), so are these
/// (`SendKind::Swap`), and they win untimed (`reads_untimed`): an Intel
/// Xeon guest, `-t`, alternated, medians of 4, us, streamed / read in
/// place (Open MPI): 2 MiB 283 / 240 (243), 4 MiB 617 / 501 (502), 8 MiB
/// 1253 / 1008 (1011), 16 MiB 2591 / 2021 (2028), 32 MiB 7141 / 5598
/// (5658); timed, the stream's trials cost the short runs of
/// `bench/mpibench.c` up to 1.2x (32 MiB 5676-6238).
pub fn alltoall_direct(c: &mut Ctx, total: usize) -> Result<bool> {
    let forced = matches!(c.forced("alltoall"), Some(name) if known("alltoall", name));
    if forced || !two_on_own_cores(c) || total < ALLTOALL_DIRECT {
        return Ok(false);
    }
    Ok(!c.pulls() || reads_untimed(c, "alltoall", total) || tuned(c, "alltoall", total)?)
}

/// Whether `coll`'s reads in place of `bytes` (its pull, or at 2 ranks its
/// messages: `alltoall_direct`, `allgather`) go untimed against the stream:
/// an all-to-all's or allgather's, where busy senders' messages are read in
/// place (`Engine::reads_busy`: Intel CPUs). There the stream lost at
/// nearly every size, and its trials cost the short runs of
/// `bench/mpibench.c` up to 1.2x. An Intel Xeon guest, `-t`, alternated,
/// medians of 3-4, us, timed / read in place / streamed (Open MPI):
/// all-to-all, 4 ranks on 2 cores, 1 MiB 284 / 280 / 319 (407), 4 MiB 1108
/// / 1038 / 1396 (1017), 16 MiB 5878 / 5849 / 7775 (5986), 32 MiB 18863 /
/// 16049 / - (15454); allgather, 4 ranks (pulled from 8 MiB there), 8 MiB
/// 1626 / 1634 / 1649 (1858), 32 MiB 11529 / 9785 / 12284 (13960); 2 ranks,
/// as messages, 1 MiB 87.2 / 81.3 / 94.7 (119), 2 MiB 224 / 182 / 212
/// (247), 4 MiB 416 / 412 / 474 (425), 32 MiB 4720 / 4058 / 6495 (4157). So
/// are a broadcast's, and a reduce-scatter's of
/// `READS_UNTIMED_REDUCE_SCATTER` or more in total, where the pull won from
/// the sizes that propose it (`pull_bcast`, `pull_reduce_scatter`): 4 ranks
/// on 2 cores, bcast 8 MiB 2042 / 1962 / 2054 (2150), 16 MiB 4054 / 3849 /
/// 4272 (4718), 32 MiB 13251 / 12236 / 12486 (18043); reduce-scatter 1 MiB
/// 325 / 319 / 322 (465), 2 MiB 612 / 583 / 696 (1036), 8 MiB 2438 / 2245 /
/// 2980 (13120), 32 MiB 17475 / 15701 / 16939 (70948); 2 ranks, bcast 2 MiB
/// 201 / 195 / 199 (284), 32 MiB 2923 / 2786 / 3862 (4555); reduce-scatter
/// 1 MiB 109 / 125 / 112 (266), 2 MiB 224 / 225 / 286 (983), 32 MiB 5206 /
/// 4469 / 5907 (24782).
fn reads_untimed(c: &Ctx, coll: &str, bytes: usize) -> bool {
    let untimed = match coll {
        "alltoall" | "allgather" | "bcast" => true,
        "reduce_scatter" => bytes >= READS_UNTIMED_REDUCE_SCATTER,
        _ => false,
    };
    untimed && c.eng.reads_busy()
}

/// Bytes in total from which a pulled reduce-scatter goes untimed where
/// busy senders' messages are read in place (`reads_untimed`).
const READS_UNTIMED_REDUCE_SCATTER: usize = 2 << 20;

/// Bytes received from which a 2-rank all-to-all whose ranks have cores of
/// their own goes as messages (`alltoall_direct`).
const ALLTOALL_DIRECT: usize = 2 << 20;

/// Whether the communicator has 2 ranks and ranks do not outnumber cores.
fn two_on_own_cores(c: &Ctx) -> bool {
    c.size() == 2 && !c.eng.crowded()
}

/// All-to-all, `bytes` sent by each rank: 2 ranks 32 KiB 4.36 / 7.84
/// (8.72, 12.6), 1 MiB 174 / 196 (193, 178), 2 MiB 348 / 306 (298, 304),
/// 8 MiB 1381 / 1188, 32 MiB 11063 / 8928; 4 ranks on 2 cores, messages
/// read in place / streamed / pulled: 128 KiB 65.0 / 51.0 / 67.4, 512 KiB
/// 231 / 212 / 225, 1 MiB 383 / 468 / 374, 4 MiB - / 1725 / 1235 (1312).
/// (2 ranks on cores of their own no longer pull, `alltoall_pulls`.)
pub fn pull_alltoall(bytes: usize, crowded: bool) -> bool {
    bytes >= if crowded { 1 << 20 } else { 2 << 20 }
}

/// Broadcast, shared (the root writes the back of the vector meanwhile,
/// `share_bcast`): 2 ranks 128 KiB 12.3 / 21.1 (31.5, 30.8), 1 MiB 110 /
/// 155 (247, 249), 2 MiB 306 / 263 (375, 389), 8 MiB 1189 / 982, 32 MiB
/// 5321 / 4248. Where ranks outnumber cores, from 8 MiB, shared too
/// (`CROWDED_SHARE_BCAST`); read whole, as from 16 MiB before, us,
/// streamed / pulled (Open MPI): 4 ranks 512 KiB 128 / 199 (206), 2 MiB
/// 592 / 718 (620), 677 / 731, 8 MiB 2437 / 3101 and 2664 / 2618, 16 MiB 6841 /
/// 6703, 5445 / 5172 (6407) and 5896 / 4841, 32 MiB 22743 / 17681, 22110 /
/// 20299 and 20901 / 20373 (23568), 64 MiB 47557 / 44614 and 45690 /
/// 40658 (48541); 3 ranks 4 MiB 1582 / 1450, 8 MiB 2313 / 2388 and 2989 /
/// 2686, 16 MiB 5040 / 4588 and 7434 / 4601 (5555), 32 MiB 17862 / 9709;
/// 8 ranks 8 MiB 4238 / 4830 and 6036 / 5844, 16 MiB 13727 / 12781 and
/// 20409 / 17338 (13215), 32 MiB 40053 / 32126. There the stream copies
/// each byte twice for every reader (into its ring, out of it), and the
/// data no longer stay in the cache between the two.
pub fn pull_bcast(bytes: usize, crowded: bool) -> bool {
    bytes
        >= if crowded {
            CROWDED_SHARE_BCAST
        } else {
            2 << 20
        }
}

/// From this many bytes a pulled broadcast (where forced below
/// `pull_bcast`'s sizes) is shared where ranks do not outnumber cores:
/// with unchanged inputs, 2 ranks, alternated, us, read whole / shared,
/// 32 KiB 1.83 / 1.58, 512 KiB 16.8 / 9.5, 32 MiB 4969 / 1625.
const SHARE_BCAST: usize = 32 << 10;

/// Where ranks outnumber cores, a pulled broadcast is shared from this
/// many bytes: the root's core then copies as much as each other core
/// (read whole, the cores without the root copy for all their ranks).
/// Alternated runs, `-t`, 2 cores, us, streamed / read whole / shared
/// (Open MPI): 4 ranks 1 MiB 242 / 384 / 390 (423), 2 MiB 568 / - / 726
/// (756), 4 MiB 1305 / 1380 / 1239 (1490), 8 MiB 2499 / - / 2232 (2635),
/// 16 MiB - / 5158 / 4187 (7484), 32 MiB - / 21834 / 16547 (23428); 8
/// ranks 4 MiB 2451 / - / 2652 (3273). Paired, before / after: 4 ranks 8
/// MiB 0.93, 16 MiB 0.81, 32 MiB 0.77; 3 ranks 8-32 MiB 0.84-0.85; 8
/// ranks 8-16 MiB 0.96, 32 MiB 0.91. Below 8 MiB the root's writes wait
/// for the readers' cores about as long as they save.
const CROWDED_SHARE_BCAST: usize = 8 << 20;

/// Whether a pulled broadcast of `bytes` is shared (`pull::bcast`).
pub fn share_bcast(c: &Ctx, bytes: usize) -> bool {
    bytes
        >= if c.eng.crowded() {
            CROWDED_SHARE_BCAST
        } else {
            SHARE_BCAST
        }
}

/// Reduce, `bytes` per rank (every rank folds one block, `pull::reduce`):
/// 2 ranks 128 KiB 18.7 / 30.8 (35.4), 512 KiB 80.7 / 123, 1 MiB 236 /
/// 239, 4 MiB 790 / 854, 8 MiB 1651 / 1649, 32 MiB 13841 / 13945: from 8
/// MiB, where they tie at 2 ranks and more ranks share the folding; 4
/// ranks on 2 cores 64 KiB 42.9 / 49.3, 128 KiB 97.2 / 79.7, 512 KiB 406
/// / 296, 4 MiB 3097 / 1662 (2727). There the stream has since outrun
/// the pull at every size (`reduce`: 4 ranks, pulled / streamed, 512 KiB
/// 118 / 55.8, 2 MiB 421 / 252, 8 MiB 3077 / 1803, 32 MiB 14039 / 8887),
/// so it never pulls by this rule (on Intel CPUs it does by
/// `crowded_pulls`).
pub fn pull_reduce(bytes: usize, crowded: bool) -> bool {
    !crowded && bytes >= 8 << 20
}

/// Allreduce, `bytes` per rank (every rank folds one block and writes it
/// to all, `pull::allreduce`): 2 ranks 16 KiB 4.38 / 6.47 (9.49, 6.99),
/// 64 KiB 14.3 / 16.6 (21.0, 25.9), 128 KiB 29.1 / 29.1 (34.7, 42.9), 512
/// KiB 126 / 108 (136, 157), 4 MiB 1207 / 773, 16 MiB 6514 / 3343. Where
/// ranks outnumber cores, with `pull::REDUCE_PIECE` pieces, `-t`,
/// alternated, medians of 5-7 (Open MPI): 4 ranks on 2 cores 128 KiB 71.6
/// / 86.8 (109), 256 KiB 159 / 161 and 179 / 166, 512 KiB 334 / 295 (424)
/// and 335 / 305 (439), 1 MiB 632 / 530 (861); 3 ranks 256 KiB 137 /
/// 117, 512 KiB 285 / 265; 8 ranks 256 KiB 400 / 448, 512 KiB 798 / 641
/// (1063), 1 MiB 1535 / 1290. Since then the stream has caught up where
/// ranks outnumber cores, and proposing the pull from 512 KiB cost more
/// than it won: the timed rounds (`coll::tune`) went the pull's way or
/// paid its trials. `-t`, alternated, us, proposed from 512 KiB / streamed
/// (Open MPI): 4 ranks on 2 cores, 7 rounds, 512 KiB 174-326 / 162-339
/// (449-954), 2 MiB 743-1364 / 718-1279 (1184-3727), one near round 1364
/// / 735, 8 MiB 4327-7102 / 3988-6686 (7721-10422), streamed faster in 6
/// of 7 rounds at 2 MiB and in all 7 at 8 MiB, 32 MiB 19799-26679 / 20144-25449 (2 of 4);
/// 3 ranks, 2 rounds, 2 MiB 1064 / 1117 and 917 / 709, 8 MiB 5701 / 5042
/// and 4878 / 4338; 8 ranks, 2 rounds, 512 KiB 447 / 371 and 410 / 379,
/// 2 MiB 2170 / 1838 and 1837 / 1788, 8 MiB 9641 / 9866 and 8786 / 9282.
/// So where ranks outnumber cores the pull is proposed from 8 MiB (on
/// Intel CPUs, where the pull won from 1 MiB, `crowded_pulls` decides
/// instead).
pub fn pull_allreduce(bytes: usize, crowded: bool) -> bool {
    bytes >= if crowded { 8 << 20 } else { 128 << 10 }
}

/// Reduce-scatter, `bytes` in total (each rank folds its own block,
/// `pull::reduce_scatter`): 2 ranks 64 KiB 10.0 / 13.5, 512 KiB 81.4 /
/// 97.1, 1 MiB 199 / 198, 2 MiB 428 / 314 (1524, 491), 8 MiB 1723 / 1169;
/// 4 ranks on 2 cores 512 KiB 218 / 254, 1 MiB 471 / 430, 2 MiB 988 / 773
/// (3946), 8 MiB 4060 / 2971.
pub fn pull_reduce_scatter(bytes: usize, _crowded: bool) -> bool {
    bytes >= 1 << 20
}

/// Gather (`MPI_Gather`), `bytes` per rank, where every rank writes its
/// block into the root's buffer (`pull::gatherv`; where ranks outnumber
/// cores the root reads the blocks of the ranks on its own core), against
/// the slots and messages, which the root reads, by bytes per rank
/// (`bench/mpibench.c` prints n times as many): 2 ranks 16 KiB 2.41 /
/// 3.02, 32 KiB 5.86 / 4.62, 64 KiB 10.2 / 7.44 (18.8, 22.2), 512 KiB 176
/// / 45.7 (167, 156); 4 ranks on 2 cores 16 KiB 6.72 / 9.75, 32 KiB 13.9
/// / 12.0 (20.5), 256 KiB 146 / 44.9 (159).
pub fn pull_gather(bytes: usize, _crowded: bool) -> bool {
    bytes >= 32 << 10
}

/// Where ranks outnumber cores, whether a gather, reduce or allreduce of
/// `bytes` per rank pulls untimed (rank 0 misread the ways of the rooted
/// two there, `coll::tune`); `None` where the choice is left to `pull`'s
/// size and timings: other collectives, an allreduce where busy senders'
/// messages are not read in place, or ranks with cores of their own. A
/// gather or reduce pulls where busy senders' messages are read in place
/// (`Engine::reads_busy`: Intel CPUs), from `CROWDED_PULL_GATHER` or
/// `CROWDED_PULL_REDUCE`; elsewhere never (on the AMD EPYC of
/// `gather_stream` and `pull_reduce` the stream won); an allreduce there by
/// `CROWDED_PULL_ALLREDUCE`. Pulled, the ranks on the root's core leave
/// their blocks to it to read while the others write theirs (or fold) on
/// the other cores, so every core copies; streamed, the root copies or
/// folds every block out of the slots after its sender copied it in. An
/// Intel Xeon guest, 2 cores, `-t`, alternated, medians of 3, us, by bytes
/// in total (gather) or per rank (reduce), streamed / pulled (Open MPI):
/// gather 4 ranks 128 KiB 6.63 / 6.45 (14.4), 256 KiB 19.3 / 9.33 (26.6), 1
/// MiB 84.3 / 27.5 (102), 8 MiB 1027 / 499 (955), 32 MiB 4245 / 2098
/// (3773); 3 ranks 512 KiB 38.4 / 17.8 (35.7), 8 MiB 1061 / 677 (879), 32
/// MiB 4416 / 2625 (3612); 8 ranks 128 KiB 9.36 / 15.8 (23.4), 512 KiB 51.7
/// / 26.4 (58.9), 8 MiB 1165 / 562 (965), 32 MiB 5643 / 2431 (8110); reduce
/// 4 ranks 256 KiB 81.1 / 85.9, 512 KiB 176 / 183, 1 MiB 416 / 313, 4 MiB
/// 1754 / 1194 (2265), 16 MiB 7890 / 6456 (9449); 3 ranks 256 KiB 61.5 /
/// 69.1 (56.4), 1 MiB 342 / 306 (540), 16 MiB 6215 / 5328 (11311); 8 ranks
/// 512 KiB 476 / 368, 1 MiB 1024 / 722, 16 MiB 23383 / 15847 (31909).
fn crowded_pulls(c: &Ctx, coll: &str, bytes: usize) -> Option<bool> {
    if !c.eng.crowded() {
        return None;
    }
    let busy = c.eng.reads_busy();
    match coll {
        "gather" => Some(busy && bytes >= CROWDED_PULL_GATHER),
        "reduce" => Some(busy && bytes >= CROWDED_PULL_REDUCE),
        "allreduce" if busy => Some(
            bytes >= CROWDED_PULL_ALLREDUCE
                && bytes.saturating_mul(c.size()) <= CROWDED_ALLREDUCE_INPUTS,
        ),
        _ => None,
    }
}

/// Bytes per rank from which a gather pulls where ranks outnumber cores
/// (`crowded_pulls`).
const CROWDED_PULL_GATHER: usize = 64 << 10;
/// Bytes per rank from which a reduce pulls where ranks outnumber cores
/// (`crowded_pulls`).
const CROWDED_PULL_REDUCE: usize = 1 << 20;
/// Bytes per rank from which an allreduce pulls untimed where ranks
/// outnumber cores and busy senders' messages are read in place
/// (`crowded_pulls`), while all ranks' inputs together stay within
/// `CROWDED_ALLREDUCE_INPUTS`; it streams, untimed, outside that range.
/// An Intel Xeon guest, 2 cores, `-t`, alternated, medians of 3-4, us,
/// streamed / pulled: 4 ranks 512 KiB 215 / 216, 1 MiB 457 / 416, 2 MiB
/// 919 / 777, 4 MiB 1876 / 1462, 8 MiB 4463 / 3675, 16 MiB 12166 /
/// 12777, 32 MiB 26058 / 28211; 3 ranks 512 KiB 190 / 181, 1 MiB 413 /
/// 373, 4 MiB 1767 / 1373, 8 MiB 3650 / 2798, 16 MiB 10353 / 11165; 8
/// ranks 512 KiB 471 / 452, 1 MiB 990 / 818, 4 MiB 4655 / 3780, 8 MiB
/// 12133 / 13076, 32 MiB 46658 / 57942. At the bound the two ways come
/// close: later rounds, 4 ranks 8 MiB 4020 / 3927 and 3990 / 3350, 8
/// ranks 4 MiB 5104 / 6104, 4642 / 4810 and 4426 / 4357. Timed from 8 MiB
/// (as on other CPUs) the calls took 4152 (4 ranks, 8 MiB) and 56612 (8
/// ranks, 32 MiB): the trials of the slower way cost the short runs.
const CROWDED_PULL_ALLREDUCE: usize = 1 << 20;
/// Most bytes of all ranks' inputs together with which an allreduce pulls
/// where ranks outnumber cores on Intel CPUs (`CROWDED_PULL_ALLREDUCE`).
const CROWDED_ALLREDUCE_INPUTS: usize = 32 << 20;

/// Where 2 ranks have cores of their own and busy senders' messages are
/// read in place (`Engine::reads_busy`: Intel CPUs), whether an allreduce
/// or reduce of `bytes` per rank pulls untimed: `Some(true)` for an
/// allreduce from `PAIRED_PULL_ALLREDUCE`, or a reduce from
/// `PAIRED_PULL_REDUCE` while both inputs together stay within
/// `PAIRED_REDUCE_INPUTS`; `None` (`pull`'s size and timings decide)
/// elsewhere. There a core's lines are always far from the other's
/// (`coll::tune`), the pull won at those sizes in every round, and the
/// trials of the stream cost the short runs of `bench/mpibench.c`. An Intel
/// Xeon guest, `-t`, alternated, medians of 3-5, us, timed / pulled /
/// streamed (Open MPI): allreduce 256 KiB 34.0 / 35.8 / 33.6, 512 KiB 70.1
/// / 69.7 / 69.1, 1 MiB 157 / 156 / 178, 2 MiB 292 / 286 / 440 (507), 8 MiB
/// 1171 / 1123 / 1870 (2027), 16 MiB 2582 / 2342 / 3982, 32 MiB 7942 / 7753
/// / 10852 and 8611 / 7388 / 10824 (18591); reduce (not proposed below 8
/// MiB, `pull_reduce`) 2 MiB 345 / 298 / 341 (439), 4 MiB 662 / 560 / 670
/// (866), 8 MiB 1156 / 1140 / 1334 (1691), 16 MiB 2307 / 2328 / 2750
/// (3410), 32 MiB 7002 / 7611 / 7101 (8330). A gather stays timed (its
/// timed calls came within 2% of the pulled ones); broadcasts and
/// reduce-scatters go untimed by `reads_untimed`.
fn paired_pulls(c: &Ctx, coll: &str, bytes: usize) -> Option<bool> {
    if !two_on_own_cores(c) || !c.eng.reads_busy() {
        return None;
    }
    match coll {
        "allreduce" => (bytes >= PAIRED_PULL_ALLREDUCE).then_some(true),
        "reduce" => (bytes >= PAIRED_PULL_REDUCE
            && bytes.saturating_mul(2) <= PAIRED_REDUCE_INPUTS)
            .then_some(true),
        _ => None,
    }
}

/// Bytes per rank from which a 2-rank allreduce pulls untimed
/// (`paired_pulls`).
const PAIRED_PULL_ALLREDUCE: usize = 1 << 20;
/// Bytes per rank from which a 2-rank reduce pulls untimed
/// (`paired_pulls`) ...
const PAIRED_PULL_REDUCE: usize = 2 << 20;
/// ... while both inputs together stay within this many bytes.
const PAIRED_REDUCE_INPUTS: usize = 32 << 20;

/// Most bytes one rank reads from all slots together in an automatically
/// chosen `coll` (allgather, allreduce, bcast or reduce; above it they
/// stream).
/// `bench/mpibench.c -t`, alternated, medians of 5-7, us, slots /
/// streamed: 2 ranks on cores of their own, allgather (in total) 16 KiB
/// 2.57 / 2.53, 32 KiB 4.54 / 4.03; allreduce (per rank) 16 KiB 4.64 /
/// 4.53, 32 KiB 9.87 / 8.20; reduce (per rank) 32 KiB 3.80 / 4.37, 64 KiB
/// 8.0 / 8.8. 4 ranks on 2 cores, allgather 64 KiB 13.1 / 14.5;
/// allreduce 16 KiB 12.8 / 14.0, 32 KiB 27.2 / 21.1; reduce 4 KiB 1.49 /
/// 1.62, 8 KiB 3.44 / 2.55, 16 KiB 7.49 / 4.82. Bcast, 2 ranks on cores of
/// their own, 32 KiB 3.59 / 3.42, 64 KiB 8.41 / 6.09 (4 ranks on 2 cores,
/// 64 KiB 12.4 / 14.9).
pub fn read_limit(c: &Ctx, coll: &str) -> usize {
    let pair = two_on_own_cores(c);
    match coll {
        "bcast" if pair => 32 << 10,
        "allgather" if pair => 16 << 10,
        "allreduce" if pair => 32 << 10,
        "reduce" if pair => 2 * SLOT_DATA,
        "reduce" if c.eng.crowded() => 16 << 10,
        _ => READ_LIMIT,
    }
}

/// For scatter and the v-variants (see above).
pub fn pull_never(_: usize, _: bool) -> bool {
    false
}

/// Allreduce algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allreduce {
    /// log2(n) exchanges of the whole vector; keeps rank order.
    RecursiveDoubling,
    /// Reduce-scatter then allgather around a ring; commutative ops only.
    Ring,
    /// Binomial reduce to rank 0, then broadcast.
    ReduceBcast,
    /// Streamed through the slot area in chunks (`coll::stream`); any op.
    Stream,
}

/// Broadcast algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bcast {
    /// Binomial tree.
    Binomial,
    /// Pipelined chain.
    Chain,
    /// Streamed through the root's slots (`coll::stream`).
    Stream,
}

/// Reduce algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// Streamed through the slot area in chunks (`coll::stream`); any op.
    Stream,
    /// Binomial tree (to rank 0 first when the op does not commute).
    Binomial,
    /// Ring reduce-scatter then gather to the root; commutative ops only.
    Rsag,
}

/// Allgather algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allgather {
    /// Every rank sends its block to every other at once.
    Direct,
    /// n-1 steps around a ring.
    Ring,
    /// Streamed through every rank's slots (`coll::stream`).
    Stream,
}

/// Reduce-scatter algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceScatter {
    /// Ring; commutative ops only.
    Ring,
    /// Ordered reduce to rank 0, then scatter.
    ReduceScatterv,
    /// Streamed through the slots (`coll::stream`); any op.
    Stream,
}

/// All-to-all algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alltoall {
    /// All messages posted at once.
    Direct,
    /// n-1 steps of paired exchanges.
    Pairwise,
}

/// Allreduce choice for `bytes` of `extent`-byte elements.
pub fn allreduce(c: &Ctx, bytes: usize, extent: usize, commutative: bool) -> Allreduce {
    let ring_ok = commutative && bytes / extent.max(1) >= c.size();
    let stream_ok = c.has_slots() && extent <= SLOT_DATA;
    match c.forced("allreduce") {
        Some("stream") if stream_ok => Allreduce::Stream,
        Some("ring") if ring_ok => Allreduce::Ring,
        Some("recursive_doubling") => Allreduce::RecursiveDoubling,
        Some("reduce_bcast") => Allreduce::ReduceBcast,
        _ if stream_ok && bytes * c.size() > read_limit(c, "allreduce") => Allreduce::Stream,
        _ if ring_ok && bytes >= 64 * 1024 => Allreduce::Ring,
        _ => Allreduce::RecursiveDoubling,
    }
}

/// Broadcast choice.
pub fn bcast(c: &Ctx, bytes: usize) -> Bcast {
    match c.forced("bcast") {
        Some("stream") if c.has_slots() => Bcast::Stream,
        Some("binomial") => Bcast::Binomial,
        Some("chain") => Bcast::Chain,
        _ if c.has_slots() && bytes > read_limit(c, "bcast") => Bcast::Stream,
        _ if bytes >= 256 * 1024 && c.size() > 2 => Bcast::Chain,
        _ => Bcast::Binomial,
    }
}

/// Reduce choice. Streamed where ranks outnumber cores too, at every
/// size: there messages up a binomial tree won from 64 KiB when the
/// stream was slower, and now take 2-4 times as long. Alternated runs,
/// `-t`, medians, us, binomial (pulled from 256 KiB) / streamed: 4 ranks
/// on 2 cores (3 rounds) 64 KiB 25.2 / 6.31, 128 KiB 42.3 / 12.6, 256 KiB
/// 65.5 / 25.8, 512 KiB 117 / 55.8, 1 MiB 216 / 122, 4 MiB 1087 / 659, 16
/// MiB 7051 / 4209, 32 MiB 13931 / 8887 (Open MPI in a run the same hour:
/// 128 KiB 33-96, 2 MiB 600, 8 MiB 4312); 3 ranks (2 rounds) 64 KiB 17.9
/// / 5.21, 1 MiB 190 / 98.5, 4 MiB 799 / 438; 8 ranks (3 rounds, in a
/// narrow window there, `slots::WIDE_SLOT_BYTES`) 64 KiB 70.8 / 18.5, 256
/// KiB 250 / 73.6, 1 MiB 800 / 340, 4 MiB 3563 / 2351.
pub fn reduce(c: &Ctx, bytes: usize, extent: usize, commutative: bool) -> Reduce {
    let rsag_ok = commutative && bytes / extent.max(1) >= c.size();
    let stream_ok = c.has_slots() && extent <= SLOT_DATA;
    match c.forced("reduce") {
        Some("stream") if stream_ok => Reduce::Stream,
        Some("binomial") => Reduce::Binomial,
        Some("rsag") if rsag_ok => Reduce::Rsag,
        _ if stream_ok && bytes * c.size() > read_limit(c, "reduce") => Reduce::Stream,
        // Binomial receives fold each piece as it lands, which beat rsag
        // over TCP at 2 and 4 ranks at every size (2 ranks, 2 MiB: 481 us
        // against 908 us; 32 MiB: 14.5 ms against 21.5 ms). Past 4 ranks
        // the root's links carry the whole vector log2(n) times, so rsag
        // takes over there (not measured on this 2-core machine).
        _ if rsag_ok && bytes >= 512 * 1024 && c.size() > 4 => Reduce::Rsag,
        _ => Reduce::Binomial,
    }
}

/// Allgather choice for `total` bytes gathered. With 2 ranks on cores of
/// their own from `ALLGATHER_DIRECT`, the messages are timed against the
/// stream (`tuned`, where the size proposes the messages): 2 ranks, `-t`,
/// us, messages read in place / through the rings / streamed: far 2 MiB
/// 177 / 196 / 211, 8 MiB 681 / 1053 / 902, 32 MiB 3927 / 5592 / 4287;
/// near, through the rings 0.62 and 0.83 of read in place at 2 and 8 MiB.
/// The messages now go through the rings (`comm::engine`'s `reads_in_place`),
/// which since won far too: 4 MiB 352 / 191 read in place / through them
/// (on AMD EPYC; on Intel CPUs they are read in place again from 2 MiB,
/// where each rank also receives, `comm::engine`'s `busy_sender_reads`).
pub fn allgather(c: &mut Ctx, total: usize) -> Result<Allgather> {
    Ok(match c.forced("allgather") {
        Some("stream") if c.has_slots() => Allgather::Stream,
        Some("direct") => Allgather::Direct,
        Some("ring") => Allgather::Ring,
        _ if two_on_own_cores(c) && total >= ALLGATHER_DIRECT => {
            if !c.pulls() || reads_untimed(c, "allgather", total) || tuned(c, "allgather", total)? {
                Allgather::Direct
            } else {
                Allgather::Stream
            }
        }
        _ if c.has_slots() && total > read_limit(c, "allgather") => Allgather::Stream,
        _ if total < 64 * 1024 || c.size() <= 2 => Allgather::Direct,
        _ => Allgather::Ring,
    })
}

/// Reduce-scatter choice.
pub fn reduce_scatter(c: &Ctx, total: usize, extent: usize, commutative: bool) -> ReduceScatter {
    let stream_ok = c.has_slots() && extent * c.size() <= SLOT_DATA;
    match c.forced("reduce_scatter") {
        Some("stream") if stream_ok => ReduceScatter::Stream,
        Some("reduce_scatterv") => ReduceScatter::ReduceScatterv,
        _ if stream_ok && total > SLOT_DATA => ReduceScatter::Stream,
        _ if commutative => ReduceScatter::Ring,
        _ => ReduceScatter::ReduceScatterv,
    }
}

/// Whether an all-to-all whose blocks are all `block` bytes on every rank
/// streams through the slots (`coll::stream::alltoall`): forced with
/// `stream`, or automatically once the blocks with their headers pass
/// `ALLTOALL_SLOTS` together (below, they go through the slots). Measured
/// on 2 cores, alternated runs, us, stream against messages: 2 ranks 64
/// KiB 2.6 / 3.4, 1 MiB 37 / 40, 16 MiB 787-824 / 1029-1092; 4 ranks 128
/// KiB 16-17 / 20-21. From 2 MiB at 4 ranks the
/// messages won on an earlier host (8 MiB 1280-1420 / 1160-1380), so
/// streaming stopped at 512 KiB per rank; since the rings publish every
/// 64 KiB and copies of chunks avoid `rep movsb` the stream wins there
/// too, medians (Open MPI): 4 ranks 2 MiB 299 / 356 (368), 8 MiB 1966 /
/// 2266 (2312), 32 MiB 8726 / 10532 (10540); 8 ranks 1 MiB 491 / 754
/// (422), 4 MiB 2614 / 3932 (2639); 3 ranks 16 MiB 3845 / 4700 (5812),
/// 4 MiB 991 / 828 (1062).
pub fn alltoall_stream(c: &Ctx, block: usize) -> bool {
    let n = c.size();
    if !c.has_slots() || n < 2 {
        return false;
    }
    match c.forced("alltoall") {
        Some("stream") => true,
        Some(name) if known("alltoall", name) => false,
        // Unset, or a name that is not an alltoall algorithm: automatic.
        _ => n * (16 + block) > ALLTOALL_SLOTS,
    }
}

/// Most bytes of blocks (with 16-byte headers) one all-to-all sends
/// through the slots by itself. Inputs written before each call
/// (`bench/mpibench.c -t`), alternated, medians of 5, us, slots /
/// streamed, by bytes sent per rank: 2 ranks 16 KiB 3.04 / 3.03, 32 KiB
/// 6.39 / 4.96, 64 KiB 11.8 / 9.85; 4 ranks on 2 cores 16 KiB 9.19 / 8.44,
/// 32 KiB 17.3 / 13.4.
const ALLTOALL_SLOTS: usize = 32 << 10;

/// Whether an `MPI_Scatter` of `len` bytes per rank streams through the
/// slots (`coll::stream::scatter`): forced, or where ranks outnumber cores
/// and the root's blocks for the others (`(n - 1) * len`) overflow its slot
/// but not `STREAM_SCATTER_UP_TO` (`READS_SCATTER_UP_TO` where busy
/// senders' messages are read in place). There each receiver otherwise
/// reads its block in place (`SendKind::Rooted`), and every read waits for
/// its reader's turn on a core. On an earlier host, `-t`, alternated,
/// medians, us, by bytes in
/// total (`n * len`), in place / streamed: 3 ranks on 2 cores (2 rounds)
/// 256 KiB 18.3 / 10.6, 1 MiB 65.6 / 45.3, 4 MiB 285 / 208, 16 MiB 2311 /
/// 2744; 4 ranks (3 rounds) 64 KiB (slots) 2.04 / 2.65, 256 KiB 20.9 /
/// 10.2, 1 MiB 73.4 / 49.7, 2 MiB 136 / 109, 4 MiB 352 / 301, 8 MiB 1379 /
/// 1427, 16 MiB 3123 / 3274 (Open MPI at 512 KiB 41.0, 2 MiB 149); 8 ranks
/// (3 rounds) 256 KiB 33.5 / 16.1, 1 MiB 108 / 82.9, 2 MiB 253 / 199, 4
/// MiB 937 / 1000, 8 MiB 2773 / 3077 (Open MPI 256 KiB 37.7). 2 ranks on
/// cores of their own (3 rounds) 1-16 MiB 1.05-1.12 times the message.
pub fn scatter_stream(c: &Ctx, len: usize) -> bool {
    let n = c.size();
    if !c.has_slots() || n < 2 {
        return false;
    }
    match c.forced("scatter") {
        Some("stream") => true,
        Some(name) if known("scatter", name) => false,
        _ => {
            let others = (n - 1).saturating_mul(len);
            let up_to = if c.eng.reads_busy() {
                READS_SCATTER_UP_TO
            } else {
                STREAM_SCATTER_UP_TO
            };
            c.eng.crowded() && (SLOT_DATA..=up_to).contains(&others)
        }
    }
}

/// Whether an `MPI_Gather` of `len` bytes per rank may take one of its
/// large ways (streamed or pulled, `coll::gather`): from `pull_gather`'s
/// size, or whenever an algorithm is forced.
pub fn gather_large(c: &Ctx, len: usize) -> bool {
    pull_gather(len, false) || c.forced("gather").is_some()
}

/// Whether an `MPI_Gather` of `len` bytes per rank streams through the
/// slots (`coll::stream::gather`), asked `first` before the pull and again
/// after it declined: first where forced, or from `pull_gather`'s size
/// where the pull would not be timed (`pull`: where ranks outnumber cores,
/// unless they pull untimed there, `crowded_pulls`, and below
/// `tune::TUNED_FROM`); after, where the pull declined (timed against it,
/// or where ranks outnumber cores). On an AMD EPYC guest, 2 ranks below
/// `TUNED_FROM`, pulled / streamed: far (4 rounds)
/// 64 KiB 3.94 / 1.73, 128 KiB 6.17 / 2.98; near 64 KiB 3.80 / 1.13. Each rank
/// publishes its block in slot-sized chunks and the root copies them out;
/// pulled, every rank writes its block into the root's buffer in its turn
/// on a core. `-t`, alternated, near, medians, us, by bytes in total,
/// pulled (slots below 32 KiB per rank) / streamed: 4 ranks on 2 cores (3
/// rounds) 64 KiB 2.93 / 1.88, 256 KiB 18.2 / 6.31, 1 MiB 47.6 / 28.4, 4
/// MiB 177 / 129, 16 MiB 1026 / 834; 3 ranks (2 rounds) 256 KiB 13.6 /
/// 6.79, 1 MiB 43.0 / 30.1, 16 MiB 1126 / 931; 8 ranks (2 rounds) 256 KiB
/// 33.1 / 7.97, 1 MiB 67.7 / 32.4, 16 MiB 1239 / 1155; 2 ranks on cores of
/// their own (3 rounds) 64 KiB 3.80 / 1.13, 1 MiB 23.0 / 23.7, 4 MiB 99.9
/// / 98.0, 16 MiB 1137 / 570.
pub fn gather_stream(c: &Ctx, len: usize, first: bool) -> bool {
    if !c.has_slots() || c.size() < 2 {
        return false;
    }
    match c.forced("gather") {
        Some("stream") => first,
        Some(name) if known("gather", name) => false,
        _ if !pull_gather(len, false) => false,
        _ => {
            // The pull is timed only from `TUNED_FROM` (`pull`), and
            // where ranks outnumber cores taken untimed or not at all.
            let crowded = c.eng.crowded();
            if first {
                (crowded || len < tune::TUNED_FROM)
                    && !(c.pulls() && crowded_pulls(c, "gather", len) == Some(true))
            } else {
                crowded || len >= tune::TUNED_FROM
            }
        }
    }
}

/// Most bytes of the others' blocks that a root streams (`scatter_stream`).
const STREAM_SCATTER_UP_TO: usize = 3 << 20;

/// `STREAM_SCATTER_UP_TO` where busy senders' messages are read in place
/// (`Engine::reads_busy`: Intel CPUs), where the reads won from about 1 MiB
/// of the others' blocks. An Intel Xeon guest, 2 cores, `-t`, alternated,
/// medians of 3, us, by bytes in total, streamed / read in place (Open
/// MPI): 4 ranks 512 KiB 47.1 / 68.4 (82.9), 1 MiB 129 / 127 (152), 2 MiB
/// 328 / 260 (331), 4 MiB 690 / 504 (792); 3 ranks 512 KiB 50.7 / 51.2
/// (64.7), 1 MiB 140 / 126 (172), 2 MiB 382 / 272 (317), 4 MiB 782 / 579
/// (638); 8 ranks 1 MiB 208 / 224 (216), 2 MiB 528 / 427 (452).
const READS_SCATTER_UP_TO: usize = 1 << 20;

/// All-to-all choice (messages).
pub fn alltoall(c: &Ctx) -> Alltoall {
    match c.forced("alltoall") {
        Some("pairwise") => Alltoall::Pairwise,
        _ => Alltoall::Direct,
    }
}

#[cfg(test)]
mod tests {
    use super::known;

    #[test]
    fn forced_names_are_checked_per_collective() {
        assert!(known("bcast", "slots"));
        assert!(known("allreduce", "slices"));
        assert!(known("alltoall", "stream"));
        assert!(known("gather", "stream"));
        assert!(!known("gather", "ring"));
        assert!(!known("barrier", "auto"));
        assert!(!known("allreduce", "Ring"));
        assert!(!known("nonesuch", "slots"));
    }
}
