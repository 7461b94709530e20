//! Large collectives streamed through the slot area in slot-sized chunks.
//!
//! Each rank copies a chunk of its input once into its own slot; peers
//! read it there while it is still in cache and write their results
//! straight into their own buffers. Every byte of a user buffer is thus
//! read or written from memory once, with no message, ring or temporary
//! vector in between (the rings cost a copy in and a copy out per hop,
//! and ring reduce-scatter + allgather takes 2(n-1) hops).
//!
//! Each chunk and phase is one call of the slot protocol (`coll::slots`),
//! so reuse of a slot waits for its readers as for any call. A rank
//! publishes its input up to `AHEAD` chunks before it needs them, so ranks
//! that share a core do a stretch of work per wake-up instead of switching
//! at every chunk.

// Chunks are published `Place::Near` (right after the flag), so every `part`
// read here passes `far` false.
use super::fill::Fill;
use super::slots::{self, mark_done, part, publish, publish_quiet, wait_flag, Call, Place, WINDOW};
use super::{
    check_recv_blocks, check_send_blocks, even_blocks, put_out, split_blocks, Ctx, Reducer,
};
use crate::copy::{coll_uncached_from, copy, copy_uncached, llc_bytes, p2p_uncached_from};
use crate::error::{Error, Result};
use crate::transport::shm::slots::SLOT_DATA;

/// Chunks whose input a rank publishes before it folds the first of them
/// (256 KiB: further ahead, the published chunks leave the 512 KiB L2
/// before they are read). Allreduce uses two calls per chunk; with at most
/// `WINDOW / 4` chunks ahead a slot is rewritten only once every peer has
/// moved past it (no wait in the steady state).
const AHEAD: usize = 4;
const _: () = assert!(AHEAD as u64 <= WINDOW / 4);

/// Bytes `copy_twice` copies to both destinations at a time.
const TWICE_PIECE: usize = 16 * 1024;

/// Copies `src` into the slot `slot` (as `fill` says) and into the result
/// `out` (uncached as `put_out` says), a piece at a time, so that `src` is
/// read from memory once: the second copy of each piece reads it from L1. An
/// allgather's own block took two whole-chunk copies before; alternated
/// 2-rank runs, us, before / after: 2 MiB 75-77 / 71-72, 8 MiB 496-518 /
/// 474-487 (Open MPI 527-841), 32 MiB alike.
fn copy_twice(slot: &mut [u8], out: &mut [u8], src: &[u8], fill: &mut Fill, uncached: bool) {
    for ((s, d), o) in src
        .chunks(TWICE_PIECE)
        .zip(slot.chunks_mut(TWICE_PIECE))
        .zip(out.chunks_mut(TWICE_PIECE))
    {
        fill.copy(d, s);
        put_out(o, s, uncached);
    }
}

/// Bytes per chunk: a whole number of elements that fits a slot.
fn chunk_bytes(extent: usize) -> Result<usize> {
    match SLOT_DATA / extent.max(1) * extent.max(1) {
        0 => Err(Error::Unsupported(format!(
            "streaming a {extent}-byte element through {SLOT_DATA}-byte slots"
        ))),
        n => Ok(n),
    }
}

/// Bytes folded at a time by `fold_ordered` (a whole number of elements
/// of any type): the partial result stays in L1 between the copy and the
/// folds instead of going out to L2 and back once per part.
const FOLD_PIECE: usize = 4096;

/// Folds `parts` (rank order) into `out`: `out = p0 op (p1 op (...))`.
fn fold_ordered(parts: &[&[u8]], out: &mut [u8], red: &Reducer) {
    let Some((last, rest)) = parts.split_last() else {
        return;
    };
    let piece = (FOLD_PIECE / red.extent.max(1)).max(1) * red.extent.max(1);
    let mut at = 0;
    while at < out.len() {
        let end = out.len().min(at + piece);
        let acc = &mut out[at..end];
        copy(acc, &last[at..end]);
        for p in rest.iter().rev() {
            red.fold_left(&p[at..end], acc);
        }
        at = end;
    }
}

/// `fold_ordered` into a slot written past the cache (see `Fill`): each
/// piece is folded on the stack, then stored uncached. An element longer
/// than a piece is folded in place.
fn fold_uncached(parts: &[&[u8]], out: &mut [u8], red: &Reducer) {
    let piece = FOLD_PIECE / red.extent.max(1) * red.extent.max(1);
    let Some((last, rest)) = parts.split_last().filter(|_| piece > 0) else {
        return fold_ordered(parts, out, red);
    };
    let mut stack = [0u8; FOLD_PIECE];
    let mut at = 0;
    while at < out.len() {
        let end = out.len().min(at + piece);
        let acc = &mut stack[..end - at];
        copy(acc, &last[at..end]);
        for p in rest.iter().rev() {
            red.fold_left(&p[at..end], acc);
        }
        copy_uncached(&mut out[at..end], acc);
        at = end;
    }
}

/// Blocks (offset, length) cut into pieces of `piece` bytes, one per chunk.
struct Pieces<'b> {
    blocks: &'b [(usize, usize)],
    piece: usize,
}

impl Pieces<'_> {
    /// Chunks needed for the longest block.
    fn count(&self) -> usize {
        let p = self.piece;
        self.blocks
            .iter()
            .map(|b| b.1.div_ceil(p))
            .max()
            .unwrap_or(0)
    }

    /// Piece `k` of block `j`: (offset, length), empty past the block's end.
    fn at(&self, j: usize, k: usize) -> (usize, usize) {
        let ((o, l), p) = (self.blocks[j], self.piece);
        (o + (k * p).min(l), p.min(l.saturating_sub(k * p)))
    }
}

/// Waits for every peer's flag of `call`.
fn wait_peers(c: &mut Ctx, call: &Call) -> Result<()> {
    let me = c.rank();
    for p in (0..c.size()).filter(|&p| p != me) {
        wait_flag(c, call, p)?;
    }
    Ok(())
}

/// A rank that only writes in a rooted collective (reduce, gather):
/// publishes `input` in chunks of `chunk` bytes, one call each from
/// `first`, and is done with each call once it is published.
fn publish_chunks(c: &mut Ctx, first: &Call, input: &[u8], chunk: usize) -> Result<()> {
    for (k, piece) in input.chunks(chunk).enumerate() {
        let call = first.nth(k as u64);
        let mut fill = Fill::new(c);
        publish_quiet(c, &call, piece.len(), false, Place::Near, |d| {
            fill.copy(d, piece);
            Ok(())
        })?;
        fill.done(c);
        mark_done(c, &call, false);
    }
    Ok(())
}

/// Runs the chunks of a one-call-per-chunk collective: `put` publishes
/// chunk k (`AHEAD_ONE` chunks before it is needed), then `each` handles
/// it; both get the receive buffer.
fn run_ahead(
    c: &mut Ctx,
    chunks: usize,
    recv: &mut [u8],
    put: impl Fn(&mut Ctx, usize, &mut [u8]) -> Result<()>,
    mut each: impl FnMut(&mut Ctx, usize, &mut [u8]) -> Result<()>,
) -> Result<()> {
    for k in 0..AHEAD_ONE.min(chunks) {
        put(c, k, recv)?;
    }
    for k in 0..chunks {
        if k + AHEAD_ONE < chunks {
            put(c, k + AHEAD_ONE, recv)?;
        }
        each(c, k, recv)?;
    }
    Ok(())
}

/// Allreduce of `send` (or, in place, `recv`) into `recv`: per chunk, every
/// rank publishes its input (call 2k), folds block `rank` of the chunk over
/// all ranks into its next slot (call 2k+1), and copies the other ranks'
/// folded blocks from theirs. Ranks combine in rank order, so any op works
/// and every rank gets the same bits.
pub fn allreduce(c: &mut Ctx, send: Option<&[u8]>, recv: &mut [u8], red: &Reducer) -> Result<()> {
    let (n, me, len) = (c.size(), c.rank(), recv.len());
    if let Some(s) = send {
        if s.len() != len {
            return Err(Error::InvalidArg("allreduce buffers differ in size".into()));
        }
    }
    let chunk = chunk_bytes(red.extent)?;
    let chunks = len.div_ceil(chunk);
    if chunks == 0 {
        return Ok(());
    }
    // Two ranks whose buffers fit half the cache: each folds whole chunks
    // (`allreduce_whole`). Alternated runs, medians, us, folded blocks /
    // whole chunks (Open MPI): 128 KiB 11.6 / 10.1 (34.7), 512 KiB 46.5 /
    // 39.9 (101), 2 MiB 213 / 167 (259), 4 MiB 550 / 432 (697); but
    // 8 MiB 1669 / 1741 and 16 MiB 3605 / 3982, and 4 ranks on 2 cores
    // 128 KiB 36 / 54.
    if n == 2 && 2 * n * len <= llc_bytes() / 2 {
        return allreduce_whole(c, send, recv, red, chunk, chunks);
    }
    // Two calls per chunk, each filling about half a slot (the peers'
    // blocks, then the own folded one): at 2 ranks the vector counts half
    // toward the wider window of `slots::reserve`. Alternated runs,
    // medians, us, window 16 / 32 (Open MPI): 2 ranks 2 MiB 223 / 194
    // (249), 216 / 191 in another set; 4 ranks on 2 cores 2 MiB 654 / 699
    // and 3 ranks 535 / 528, so only at 2.
    let basis = if n == 2 { len / 2 } else { len };
    let first = slots::reserve(c, 2 * chunks as u64, basis, n)?;
    // Also once the host's buffers (every rank's input and result) fill
    // the cache while one rank's still fit it, unless the far watch has the
    // slot writes go past the cache already: cached stores of the results
    // would push out the inputs the next chunks read. AMD EPYC host (32
    // MiB L3), `-t`, alternated, paired, us, cached / uncached, the two
    // vCPUs near (a line's round trip 110-130 ns; 10 and 6 rounds): 2
    // ranks 8 MiB 947 / 813 (0.87), 16 MiB 2715 / 2562 (0.96), 32 MiB (a
    // rank's buffers twice the cache) 6357 / 6376; 4 ranks 4 MiB 1186 /
    // 945 (0.80), 8 MiB 3079 / 2962, 16 MiB 6834 / 6591 (0.97). Far (over
    // 500 ns) uncached results lost: 2 ranks 8 MiB 1480 / 1797 (this rule
    // without the watch's check, 3 rounds), 32 MiB 6409 / 6881 (uncached
    // wherever the buffers fill the cache, 6 rounds). With the check, far
    // 2 ranks 8 and 16 MiB 0.95-0.96 (6 rounds), near 8 MiB 957 / 865
    // (0.91, 4 rounds).
    let llc = llc_bytes();
    let uncached = len >= coll_uncached_from()
        || (2 * n * len >= llc && 2 * len <= llc && !Fill::fold_uncached(c));
    let span = |k: usize| k * chunk..len.min((k + 1) * chunk);
    let full = even_blocks(chunk, red.extent, n);
    let last = even_blocks(span(chunks - 1).len(), red.extent, n);
    let blocks = |k: usize| if k + 1 == chunks { &last } else { &full };
    // Only the peers' blocks are published: this rank folds its own block
    // straight from its input, which saves 1/n of the copying.
    let put = |c: &mut Ctx, k: usize, recv: &[u8]| {
        let input = &send.unwrap_or(recv)[span(k)];
        let (o, l) = blocks(k)[me];
        let mut fill = Fill::new(c);
        publish(
            c,
            &first.nth(2 * k as u64),
            input.len(),
            false,
            Place::Near,
            |d| {
                fill.copy(&mut d[..o], &input[..o]);
                fill.copy(&mut d[o + l..], &input[o + l..]);
                Ok(())
            },
        )?;
        fill.done(c);
        Ok(())
    };
    for k in 0..AHEAD.min(chunks) {
        put(c, k, recv)?;
    }
    for k in 0..=chunks {
        if k < chunks {
            if k + AHEAD < chunks {
                put(c, k + AHEAD, recv)?;
            }
            let (inputs, folded) = (first.nth(2 * k as u64), first.nth(2 * k as u64 + 1));
            wait_peers(c, &inputs)?;
            let (o, l) = blocks(k)[me];
            // In place, this block of `recv` still holds the input: its
            // result is written below, after the fold.
            let own = &send.unwrap_or(recv)[span(k)][o..o + l];
            let parts: Vec<&[u8]> = (0..n)
                .map(|p| {
                    if p == me {
                        own
                    } else {
                        part(c, &inputs, p, false, o, l)
                    }
                })
                .collect();
            let uncached = Fill::fold_uncached(c);
            publish(c, &folded, o + l, false, Place::Near, |d| {
                if uncached {
                    fold_uncached(&parts, &mut d[o..], red);
                } else {
                    fold_ordered(&parts, &mut d[o..], red);
                }
                Ok(())
            })?;
            put_out(
                &mut recv[span(k)][o..o + l],
                part(c, &folded, me, false, o, l),
                uncached,
            );
        }
        if let Some(j) = k.checked_sub(1) {
            let folded = first.nth(2 * j as u64 + 1);
            let out = &mut recv[span(j)];
            for p in (0..n).filter(|&p| p != me) {
                wait_flag(c, &folded, p)?;
                let (o, l) = blocks(j)[p];
                put_out(
                    &mut out[o..o + l],
                    part(c, &folded, p, false, o, l),
                    uncached,
                );
            }
            mark_done(c, &folded, true);
        }
    }
    Ok(())
}

/// Allreduce where every rank publishes its whole input chunk and folds
/// every rank's chunk into its own result: one call per chunk instead of
/// two, and no rank waits for another's fold, only for inputs published
/// `AHEAD_ONE` chunks early. Each rank folds the whole vector rather than
/// its block, which two ranks with their data in cache afford. Ranks
/// combine in rank order (any op, the same bits everywhere); in place, a
/// rank's own operand is its published copy.
fn allreduce_whole(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    red: &Reducer,
    chunk: usize,
    chunks: usize,
) -> Result<()> {
    let (n, me, len) = (c.size(), c.rank(), recv.len());
    let first = slots::reserve(c, chunks as u64, len, n)?;
    let span = |k: usize| k * chunk..len.min((k + 1) * chunk);
    // Publishes chunk `k` of the input (`recv` in place: the chunks past
    // the one being folded still hold it).
    let put = |c: &mut Ctx, k: usize, recv: &mut [u8]| {
        let input = &send.unwrap_or(recv)[span(k)];
        let mut fill = Fill::new(c);
        publish(
            c,
            &first.nth(k as u64),
            input.len(),
            false,
            Place::Near,
            |d| {
                fill.copy(d, input);
                Ok(())
            },
        )?;
        fill.done(c);
        Ok(())
    };
    run_ahead(c, chunks, recv, put, |c, k, recv| {
        let call = first.nth(k as u64);
        wait_peers(c, &call)?;
        let l = span(k).len();
        let parts: Vec<&[u8]> = (0..n)
            .map(|p| match send {
                Some(s) if p == me => &s[span(k)],
                _ => part(c, &call, p, false, 0, l),
            })
            .collect();
        fold_ordered(&parts, &mut recv[span(k)], red);
        mark_done(c, &call, true);
        Ok(())
    })
}

/// Reduce of `send` (or, on the root in place, `out`) into `out` on the
/// root: every other rank publishes its chunks, the root folds them as
/// they come. Non-commutative ops fold in rank order through a chunk of
/// scratch.
pub fn reduce(
    c: &mut Ctx,
    send: Option<&[u8]>,
    out: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let len = send
        .or(out.as_deref())
        .ok_or_else(|| Error::InvalidArg("reduce without a buffer".into()))?
        .len();
    let chunk = chunk_bytes(red.extent)?;
    let chunks = len.div_ceil(chunk);
    if chunks == 0 {
        return Ok(());
    }
    let first = slots::reserve(c, chunks as u64, len, n - 1)?;
    let span = |k: usize| k * chunk..len.min((k + 1) * chunk);
    if me != root {
        let input = send.ok_or_else(|| Error::InvalidArg("reduce without a buffer".into()))?;
        return publish_chunks(c, &first, input, chunk);
    }
    let out =
        out.ok_or_else(|| Error::InvalidArg("reduce root without a receive buffer".into()))?;
    if out.len() != len {
        return Err(Error::InvalidArg(format!(
            "reduce root's buffer holds {} bytes, the contribution {len}",
            out.len()
        )));
    }
    // Fold straight into `out`, or (in rank order, or to store the result
    // uncached) into a chunk of scratch that stays in cache. Uncached also
    // once every rank's input and the result fill three quarters of the
    // cache together: nobody reads the result in this call. Alternated
    // runs, medians, us, cached / uncached (Open MPI): 2 ranks 8 MiB (24 MiB
    // of buffers) 1061 / 859 (1812) and 917 / 743, 16 MiB 3785 / 2333
    // (4812), 32 MiB 7683 / 4591 (9473), in another set 3751 / 2734 and
    // 7999 / 5453; 4 ranks 8 MiB 2394 / 2413, 16 MiB 5572 / 3774, 32 MiB
    // 11823 / 8157 (33927). Reduce-scatter gained less than the noise.
    let uncached = len >= coll_uncached_from() || 4 * (n + 1) * len >= 3 * llc_bytes();
    let mut acc = (!red.commutative || uncached).then(|| c.scratch(chunk));
    for k in 0..chunks {
        let call = first.nth(k as u64);
        let dst = &mut out[span(k)];
        let l = dst.len();
        if let (Some(s), None) = (send, &acc) {
            copy(dst, &s[span(k)]);
        }
        wait_peers(c, &call)?;
        match acc.as_deref_mut() {
            None => {
                for p in (0..n).filter(|&p| p != me) {
                    red.fold_left(part(c, &call, p, false, 0, l), dst);
                }
            }
            Some(acc) => {
                let own: &[u8] = send.map_or(dst, |s| &s[span(k)]);
                let parts: Vec<&[u8]> = (0..n)
                    .map(|p| {
                        if p == me {
                            own
                        } else {
                            part(c, &call, p, false, 0, l)
                        }
                    })
                    .collect();
                fold_ordered(&parts, &mut acc[..l], red);
                put_out(dst, &acc[..l], uncached);
            }
        }
        mark_done(c, &call, true);
    }
    if let Some(a) = acc {
        c.give_back(a);
    }
    Ok(())
}

/// Chunks a rank publishes ahead in the one-call-per-chunk collectives
/// (448 KiB, within L2): a rank that folds chunk k has seen every peer's
/// chunk k - 1, published after they finished chunk k - 2 - ahead, so with
/// at most `WINDOW / 2 - 1` a slot is rewritten only once its readers are
/// done.
const AHEAD_ONE: usize = 7;
const _: () = assert!((AHEAD_ONE as u64) < WINDOW / 2);

/// Reduce-scatter of `send` (or, in place, `recv`; the vector is
/// `blocks` laid out in rank order) leaving block `rank` at the start of
/// `recv`: chunk k holds piece k of every block, and each rank folds its
/// own piece over all ranks, in rank order.
pub fn reduce_scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
    red: &Reducer,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let piece = chunk_bytes(red.extent)? / n / red.extent.max(1) * red.extent.max(1);
    if piece == 0 {
        return Err(Error::Unsupported(format!(
            "streaming {n} pieces of {}-byte elements through one slot",
            red.extent
        )));
    }
    let cut = Pieces { blocks, piece };
    let chunks = cut.count();
    if chunks == 0 {
        return Ok(());
    }
    let total: usize = blocks.iter().map(|b| b.1).sum();
    let first = slots::reserve(c, chunks as u64, total, n)?;
    let at = |j: usize, k: usize| cut.at(j, k);
    let put = |c: &mut Ctx, k: usize, recv: &mut [u8]| {
        let input = send.unwrap_or(recv);
        let mut fill = Fill::new(c);
        publish(
            c,
            &first.nth(k as u64),
            n * piece,
            false,
            Place::Near,
            |d| {
                // This rank's own piece is folded straight from its input.
                for j in (0..n).filter(|&j| j != me) {
                    let (o, l) = at(j, k);
                    fill.copy(&mut d[j * piece..j * piece + l], &input[o..o + l]);
                }
                Ok(())
            },
        )?;
        fill.done(c);
        Ok(())
    };
    let uncached = blocks[me].1 >= coll_uncached_from();
    let mut acc = c.scratch(piece);
    let done = run_ahead(c, chunks, recv, put, |c, k, recv| {
        let call = first.nth(k as u64);
        wait_peers(c, &call)?;
        let (mo, l) = at(me, k);
        // In place, piece k of the input is overwritten only below.
        let own = &send.unwrap_or(recv)[mo..mo + l];
        let parts: Vec<&[u8]> = (0..n)
            .map(|p| {
                if p == me {
                    own
                } else {
                    part(c, &call, p, false, me * piece, l)
                }
            })
            .collect();
        fold_ordered(&parts, &mut acc[..l], red);
        // In place, piece k of the result overwrites input that every
        // rank has already published (pieces up to k).
        let o = (k * piece).min(blocks[me].1);
        put_out(&mut recv[o..o + l], &acc[..l], uncached);
        mark_done(c, &call, true);
        Ok(())
    });
    c.give_back(acc);
    done
}

/// Broadcast of the root's `buf` in slot-sized chunks: the root writes
/// each once, every other rank copies it out.
pub fn bcast(c: &mut Ctx, buf: &mut [u8], root: usize) -> Result<()> {
    let chunks = buf.len().div_ceil(SLOT_DATA);
    if chunks == 0 {
        return Ok(());
    }
    let first = slots::reserve(c, chunks as u64, buf.len(), 1)?;
    let len = buf.len();
    let span = |k: usize| k * SLOT_DATA..len.min((k + 1) * SLOT_DATA);
    // A receiver only writes its buffer, so from where the root's buffer
    // and its own no longer fit the cache together it stores past the
    // cache, as for a message (no folding reads the result back, unlike
    // allreduce). 2 ranks, us, cached against uncached: 16 MiB 974-991
    // against 409-423, 32 MiB 1130-2630 against 1020-1180; 4 ranks 16 MiB
    // 1360-1800 against 1280-1320, 32 MiB 3230-3330 against 2940-3060.
    let uncached = len >= p2p_uncached_from();
    for k in 0..chunks {
        let call = first.nth(k as u64);
        if c.rank() == root {
            let piece = &buf[span(k)];
            let mut fill = Fill::new(c);
            publish(c, &call, piece.len(), false, Place::Near, |d| {
                fill.copy(d, piece);
                Ok(())
            })?;
            fill.done(c);
        } else {
            wait_flag(c, &call, root)?;
            let dst = &mut buf[span(k)];
            let l = dst.len();
            put_out(dst, part(c, &call, root, false, 0, l), uncached);
            mark_done(c, &call, false);
        }
    }
    if c.rank() == root {
        mark_done(c, &first.nth(chunks as u64 - 1), false);
    }
    Ok(())
}

/// Scatter of `len` bytes per rank (`MPI_Scatter`, whose one block length
/// every rank knows) from the root's `send`, block `p` at `blocks[p]` (the
/// root's layout; empty elsewhere): per chunk the root publishes a piece of
/// every other rank's block (`SLOT_DATA / (n - 1)` bytes each, whole
/// lines), and each receiver copies its own piece out; the root copies its
/// own block's piece meanwhile, while it is in cache. `recv == None` at the
/// root means in place.
pub fn scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    len: usize,
    recv: Option<&mut [u8]>,
    root: usize,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    if n < 2 {
        return Err(Error::InvalidArg(
            "streamed scatter needs two ranks or more".into(),
        ));
    }
    let piece = SLOT_DATA / (n - 1) / 64 * 64;
    let chunks = len.div_ceil(piece);
    // Where receiver `p`'s piece lies in the root's slot.
    let pos = |p: usize| (p + n - root - 1) % n * piece;
    let span = |k: usize| (k * piece).min(len)..((k + 1) * piece).min(len);
    let uncached = len >= p2p_uncached_from();
    if me != root {
        let out =
            recv.ok_or_else(|| Error::InvalidArg("scatter without a receive buffer".into()))?;
        super::check_len(out.len(), len)?;
        if chunks == 0 {
            return Ok(());
        }
        let first = slots::reserve(c, chunks as u64, n * len, 1)?;
        for k in 0..chunks {
            let call = first.nth(k as u64);
            wait_flag(c, &call, root)?;
            let dst = &mut out[span(k)];
            let l = dst.len();
            put_out(dst, part(c, &call, root, false, pos(me), l), uncached);
            mark_done(c, &call, false);
        }
        return Ok(());
    }
    let send =
        send.ok_or_else(|| Error::InvalidArg("scatter root without a send buffer".into()))?;
    check_send_blocks(send.len(), blocks)?;
    if blocks.len() != n || blocks.iter().any(|b| b.1 != len) {
        return Err(Error::InvalidArg(
            "streamed scatter needs a block of one length per rank".into(),
        ));
    }
    let mut own = recv;
    if let Some(d) = &own {
        super::check_len(d.len(), len)?;
    }
    if chunks == 0 {
        return Ok(());
    }
    let first = slots::reserve(c, chunks as u64, n * len, 1)?;
    for k in 0..chunks {
        let call = first.nth(k as u64);
        let s = span(k);
        let at = |p: usize| blocks[p].0 + s.start..blocks[p].0 + s.end;
        let mut fill = Fill::new(c);
        publish(
            c,
            &call,
            (n - 2) * piece + s.len(),
            false,
            Place::Near,
            |d| {
                for p in (0..n).filter(|&p| p != root) {
                    let q = pos(p);
                    fill.copy(&mut d[q..q + s.len()], &send[at(p)]);
                }
                Ok(())
            },
        )?;
        fill.done(c);
        if let Some(d) = own.as_deref_mut() {
            put_out(&mut d[s.clone()], &send[at(root)], uncached);
        }
    }
    mark_done(c, &first.nth(chunks as u64 - 1), false);
    Ok(())
}

/// Gather of `len` bytes per rank (`MPI_Gather`, whose one block length
/// every rank knows) into the root's `recv`, block `p` at `blocks[p]` (the
/// root's layout; empty elsewhere): every other rank publishes its block
/// in slot-sized chunks, and the root copies chunk k of each into place,
/// and its own piece from `send` (`None`: in place).
pub fn gather(
    c: &mut Ctx,
    send: Option<&[u8]>,
    len: usize,
    recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    root: usize,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let chunks = len.div_ceil(SLOT_DATA);
    let span = |k: usize| k * SLOT_DATA..len.min((k + 1) * SLOT_DATA);
    if me != root {
        let input = send.ok_or_else(|| Error::InvalidArg("gather without a send buffer".into()))?;
        super::check_len(input.len(), len)?;
        if chunks == 0 {
            return Ok(());
        }
        let first = slots::reserve(c, chunks as u64, n * len, n - 1)?;
        return publish_chunks(c, &first, input, SLOT_DATA);
    }
    let out =
        recv.ok_or_else(|| Error::InvalidArg("gather root without a receive buffer".into()))?;
    check_recv_blocks(out.len(), blocks)?;
    if blocks.len() != n || blocks.iter().any(|b| b.1 != len) {
        return Err(Error::InvalidArg(
            "streamed gather needs a block of one length per rank".into(),
        ));
    }
    if let Some(s) = send {
        super::check_len(s.len(), len)?;
    }
    if chunks == 0 {
        return Ok(());
    }
    let first = slots::reserve(c, chunks as u64, n * len, n - 1)?;
    let uncached = len >= p2p_uncached_from();
    for k in 0..chunks {
        let call = first.nth(k as u64);
        let sp = span(k);
        let at = |p: usize| blocks[p].0 + sp.start..blocks[p].0 + sp.end;
        for p in (0..n).filter(|&p| p != root) {
            wait_flag(c, &call, p)?;
            put_out(
                &mut out[at(p)],
                part(c, &call, p, false, 0, sp.len()),
                uncached,
            );
        }
        if let Some(s) = send {
            put_out(&mut out[at(root)], &s[sp.clone()], uncached);
        }
        mark_done(c, &call, true);
    }
    Ok(())
}

/// Allgather(v): block `blocks[r]` of `recv` (or `send`) from every rank
/// to every rank, each rank publishing its block in slot-sized pieces.
/// With a separate send buffer, a rank publishes from it and copies each
/// piece into its own block right after, while the piece is in cache: the
/// send buffer leaves memory once, and the own block is not read back
/// (2 ranks, 32 MiB: the whole own block copied first, then published
/// from `recv`, read it from memory twice).
pub fn allgatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    // Only to reject overlapping or outlying blocks.
    super::split_blocks(recv, blocks)?;
    let (mo, ml) = blocks[me];
    if let Some(s) = send {
        super::check_len(ml, s.len())?;
    }
    let cut = Pieces {
        blocks,
        piece: SLOT_DATA,
    };
    let chunks = cut.count();
    if chunks == 0 {
        return Ok(());
    }
    let total: usize = blocks.iter().map(|b| b.1).sum();
    let first = slots::reserve(c, chunks as u64, total, n)?;
    let at = |j: usize, k: usize| cut.at(j, k);
    // Also once the host's ranks' own blocks and results together no
    // longer fit the cache: every rank then writes its whole result to
    // memory anyway. Alternated 2-rank runs, medians, us, cached /
    // uncached (Open MPI): 16 MiB 1716 / 1465 (1877), 32 MiB 4129 / 3078
    // (4929); at 8 MiB (24 MiB of buffers) uncached lost, 578 / 711.
    let uncached = total >= coll_uncached_from() || n * (total + ml) >= llc_bytes();
    // From three quarters of the cache, the own block alone goes past it,
    // which leaves the cache to the peers' blocks and the slots.
    // Alternated 2-rank runs at 8 MiB, medians, us, cached / own block
    // uncached / all uncached (Open MPI), in four host states: 665 / 576 /
    // 721 (590), 1034 / 936 / - (970), 1172 / 743 / 813 (1138), 942 / 677;
    // at 4 MiB it lost (173 / 252).
    let own_uncached = uncached || 4 * n * (total + ml) >= 3 * llc_bytes();
    // Publishes piece `k` of the own block, from `send` or in place from
    // `recv`, and copies a sent piece into `recv`.
    let put = |c: &mut Ctx, k: usize, recv: &mut [u8]| -> Result<()> {
        let (o, l) = at(me, k);
        let sent = send.map(|s| &s[o - mo..o - mo + l]);
        let mut fill = Fill::new(c);
        publish(c, &first.nth(k as u64), l, false, Place::Near, |d| {
            match sent {
                Some(s) => copy_twice(d, &mut recv[o..o + l], s, &mut fill, own_uncached),
                None => fill.copy(d, &recv[o..o + l]),
            }
            Ok(())
        })?;
        fill.done(c);
        Ok(())
    };
    run_ahead(c, chunks, recv, put, |c, k, recv| {
        let call = first.nth(k as u64);
        for p in (0..n).filter(|&p| p != me) {
            let (o, l) = at(p, k);
            wait_flag(c, &call, p)?;
            put_out(
                &mut recv[o..o + l],
                part(c, &call, p, false, 0, l),
                uncached,
            );
        }
        mark_done(c, &call, true);
        Ok(())
    })
}

/// All-to-all with every block `blocks[j].1` bytes long, the same length
/// for every `j` and on every rank (the layout of `MPI_Alltoall`): chunk
/// k of a rank's slot holds piece k of its block for each peer, in the
/// order of the peers after it (so at two ranks one piece fills the
/// slot), and each peer copies its piece straight into its receive block.
/// The rank's own block is copied piece by piece in between, while the
/// send buffer's lines are in cache. Needs two ranks or more (chosen by
/// `select::alltoall_stream`).
pub fn alltoall(
    c: &mut Ctx,
    send: &[u8],
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    check_send_blocks(send.len(), blocks)?;
    // Only to reject overlapping or outlying blocks.
    split_blocks(recv, blocks)?;
    let len = blocks.first().map_or(0, |b| b.1);
    if n < 2 || blocks.iter().any(|b| b.1 != len) {
        return Err(Error::InvalidArg(
            "streamed all-to-all needs two ranks or more and blocks of one length".into(),
        ));
    }
    // Whole cache lines per piece, so no two peers read the same line.
    let piece = SLOT_DATA / (n - 1) / 64 * 64;
    let chunks = len.div_ceil(piece);
    if chunks == 0 {
        return Ok(());
    }
    let first = slots::reserve(c, chunks as u64, n * len, n)?;
    // Where the piece for rank `to` lies in rank `from`'s slot.
    let pos = |from: usize, to: usize| (to + n - from - 1) % n * piece;
    let at = |j: usize, k: usize| {
        let start = (k * piece).min(len);
        (blocks[j].0 + start, piece.min(len - start))
    };
    let put = |c: &mut Ctx, k: usize, _: &mut [u8]| {
        let mut fill = Fill::new(c);
        publish(
            c,
            &first.nth(k as u64),
            (n - 1) * piece,
            false,
            Place::Near,
            |d| {
                for j in (0..n).filter(|&j| j != me) {
                    let ((o, l), q) = (at(j, k), pos(me, j));
                    fill.copy(&mut d[q..q + l], &send[o..o + l]);
                }
                Ok(())
            },
        )?;
        fill.done(c);
        Ok(())
    };
    // Past the cache once the host's ranks' send and receive buffers
    // together no longer fit it (or, as a message of this size would be):
    // every rank then writes its whole receive buffer to memory anyway.
    // Alternated 2-rank runs, medians, us, cached / uncached: 8 MiB 838 /
    // 686-705 and 863 / 730, 16 MiB 2526 / 1543-1626 and 2536 / 1642 (Open
    // MPI 791, 2217); uncached at 4 MiB (16 MiB of buffers) 186 / 334.
    let uncached = len >= p2p_uncached_from() || n * 2 * (n * len) >= llc_bytes();
    run_ahead(c, chunks, recv, put, |c, k, recv| {
        let (o, l) = at(me, k);
        put_out(&mut recv[o..o + l], &send[o..o + l], uncached);
        let call = first.nth(k as u64);
        for p in (1..n).map(|i| (me + i) % n) {
            let (o, l) = at(p, k);
            wait_flag(c, &call, p)?;
            put_out(
                &mut recv[o..o + l],
                part(c, &call, p, false, pos(p, me), l),
                uncached,
            );
        }
        mark_done(c, &call, true);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_twice_fills_both() {
        let src: Vec<u8> = (0..100_003u32).map(|i| (i * 7 + 3) as u8).collect();
        for (slot_uncached, uncached) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            for len in [
                0,
                1,
                TWICE_PIECE - 1,
                TWICE_PIECE,
                3 * TWICE_PIECE + 5,
                src.len(),
            ] {
                let (mut slot, mut out) = (vec![0u8; len], vec![0u8; len]);
                let mut fill = Fill::with_plan(crate::transport::shm::far::Plan {
                    uncached: slot_uncached,
                    timed: !slot_uncached,
                });
                copy_twice(&mut slot, &mut out, &src[..len], &mut fill, uncached);
                assert_eq!(fill.bytes, if slot_uncached { 0 } else { len });
                assert_eq!(slot, src[..len]);
                assert_eq!(out, src[..len]);
            }
        }
    }

    /// Folds through the stack and stored uncached (a far host's slot, see
    /// `Fill`) give the bits of folds in place, for elements that divide a
    /// piece, that do not, and that are longer than one.
    #[test]
    fn fold_uncached_as_fold_ordered() {
        // Not commutative, so the order shows: acc = left * 3 + acc, per byte.
        let apply = |l: &[u8], a: &mut [u8]| {
            for (a, l) in a.iter_mut().zip(l) {
                *a = l.wrapping_mul(3).wrapping_add(*a);
            }
        };
        let parts: Vec<Vec<u8>> = (0..3u32)
            .map(|p| (0..20_000u32).map(|i| (i * 13 + p * 101) as u8).collect())
            .collect();
        for extent in [1, 4, 12, FOLD_PIECE + 8] {
            let red = Reducer {
                extent,
                commutative: false,
                apply: &apply,
            };
            let len = 20_000 / extent * extent;
            let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..len]).collect();
            let mut want = vec![0u8; len];
            fold_ordered(&refs, &mut want, &red);
            // Checks the order too: p0 op (p1 op p2).
            let mut by_hand = parts[2][..len].to_vec();
            apply(&parts[1][..len], &mut by_hand);
            apply(&parts[0][..len], &mut by_hand);
            assert_eq!(want, by_hand, "extent {extent}");
            // Odd offsets, so the stores start unaligned.
            for skew in [0, 1, 8] {
                let mut got = vec![0u8; len + skew];
                fold_uncached(&refs, &mut got[skew..], &red);
                assert_eq!(got[skew..], want[..], "extent {extent}, skew {skew}");
            }
        }
    }
}
