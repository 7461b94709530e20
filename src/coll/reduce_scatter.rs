//! Reduce-scatter: a ring for commutative ops, else an ordered reduce to
//! rank 0 followed by a scatter.

use super::{gather, reduce, select, slots, stream, Ctx, Reducer};
use crate::copy::copy;
use crate::error::Result;
use crate::transport::shm::slots::SLOT_DATA;

/// Bytes reduced per exchange: the incoming piece stays in cache until it
/// is folded in.
const PIECE: usize = 128 * 1024;

/// Ring reduce-scatter in place: afterwards block `r` of `data` holds the
/// full reduction on rank `r` (other blocks hold partial sums).
pub fn ring_in_place(
    c: &mut Ctx,
    data: &mut [u8],
    blocks: &[(usize, usize)],
    red: &Reducer,
) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let piece = (PIECE / red.extent).max(1) * red.extent;
    let longest = blocks.iter().map(|b| b.1).max().unwrap_or(0);
    let mut tmp = c.scratch(longest.min(piece));
    for s in 0..n.saturating_sub(1) {
        let (so, sl) = blocks[(r + 2 * n - s - 1) % n];
        let (ro, rl) = blocks[(r + 2 * n - s - 2) % n];
        // A link carries ceil(block / piece) messages; the block this rank
        // sends is the one its successor receives, so both sides agree.
        let (ns, nr) = (sl.div_ceil(piece), rl.div_ceil(piece));
        for k in 0..ns.max(nr) {
            let (a, b) = ((k * piece).min(sl), ((k + 1) * piece).min(sl));
            let (x, y) = ((k * piece).min(rl), ((k + 1) * piece).min(rl));
            let sends: &[(usize, &[u8])] = if k < ns {
                &[(next, &data[so + a..so + b])]
            } else {
                &[]
            };
            let mut recvs: Vec<(usize, &mut [u8])> = if k < nr {
                vec![(prev, &mut tmp[..y - x])]
            } else {
                Vec::new()
            };
            c.xfer(s as u32, sends, &mut recvs)?;
            red.fold_left(&tmp[..y - x], &mut data[ro + x..ro + y]);
        }
    }
    c.give_back(tmp);
    Ok(())
}

/// Reduces the full vector (`send`, or `recv` when in place) and leaves
/// block `r` (`counts[r]` bytes, blocks laid out in rank order) at the start
/// of `recv` on rank `r`.
pub fn reduce_scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    counts: &[usize],
    red: &Reducer,
) -> Result<()> {
    let r = c.rank();
    let mut off = 0;
    let blocks: Vec<(usize, usize)> = counts
        .iter()
        .map(|&len| {
            let b = (off, len);
            off += len;
            b
        })
        .collect();
    let total = off;
    if c.size() > 1 && select::slots(c, "reduce_scatter", total <= SLOT_DATA, true) {
        return slots::reduce_scatter(c, send, recv, &blocks, total, red);
    }
    let choice = select::reduce_scatter(c, total, red.extent, red.commutative);
    if choice == select::ReduceScatter::Stream {
        return stream::reduce_scatter(c, send, recv, &blocks, red);
    }
    let mut data = match send {
        Some(s) => c.copy_of(&s[..total]),
        None => c.copy_of(&recv[..total]),
    };
    let (bo, bl) = blocks[r];
    match choice {
        select::ReduceScatter::Ring | select::ReduceScatter::Stream => {
            ring_in_place(c, &mut data, &blocks, red)?;
            copy(&mut recv[..bl], &data[bo..bo + bl]);
            c.give_back(data);
        }
        select::ReduceScatter::ReduceScatterv => {
            let mut full = (r == 0).then(|| c.scratch(total));
            reduce::binomial(c, &data, full.as_deref_mut(), 0, red)?;
            gather::scatterv(c, full.as_deref(), &blocks, Some(&mut recv[..bl]), 0)?;
            c.give_back(data);
            if let Some(f) = full {
                c.give_back(f);
            }
        }
    }
    Ok(())
}
