//! Reduce-scatter: a ring for commutative ops, else an ordered reduce to
//! rank 0 followed by a scatter.

use super::{gather, pull, reduce, select, slots, split_blocks, stream, Ctx, Reducer};
use crate::copy::copy;
use crate::error::{Error, Result};
use crate::transport::shm::slots::SLOT_DATA;

/// Bytes folded at a time as they arrive: the incoming piece is still in
/// cache when it is reduced.
pub const PIECE: usize = 128 * 1024;

/// Ring reduce-scatter: afterwards block `r` of `data` holds the full
/// reduction on rank `r` (the blocks it folded on the way hold partial
/// sums). With `input`, this rank's contribution is read from there and
/// every block of `data` it folds is overwritten (`data` needs no copy of
/// the input first); without, `data` holds the contribution. Each step
/// sends one whole block and folds the incoming one piece by piece while
/// the rest of it is still on its way.
pub fn ring(
    c: &mut Ctx,
    input: Option<&[u8]>,
    data: &mut [u8],
    blocks: &[(usize, usize)],
    red: &Reducer,
) -> Result<()> {
    ring_into(c, input, data, blocks, red, None)
}

/// `ring`, with `input`, leaving this rank's block in `dest` instead of
/// `data` when `dest` is given (one copy of the block fewer).
fn ring_into(
    c: &mut Ctx,
    input: Option<&[u8]>,
    data: &mut [u8],
    blocks: &[(usize, usize)],
    red: &Reducer,
    mut dest: Option<&mut [u8]>,
) -> Result<()> {
    // Without `input`, `data` holds the contribution and the result.
    debug_assert!(dest.is_none() || input.is_some(), "dest needs input");
    let (n, r) = (c.size(), c.rank());
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let piece = (PIECE / red.extent).max(1) * red.extent;
    let longest = blocks.iter().map(|b| b.1).max().unwrap_or(0);
    if let Some(inp) = input {
        if inp.len() < data.len() {
            return Err(Error::InvalidArg(
                "reduce-scatter input shorter than its output".into(),
            ));
        }
    }
    if n == 1 {
        // No steps: the result is this rank's own part.
        if let Some(inp) = input {
            let (o, l) = blocks[0];
            let dst = match dest {
                Some(d) => d,
                None => &mut data[o..o + l],
            };
            copy(dst, &inp[o..o + l]);
        }
        return Ok(());
    }
    let mut tmp = match input {
        Some(_) => Vec::new(),
        None => c.scratch(longest),
    };
    for s in 0..n.saturating_sub(1) {
        let sb = blocks[(r + 2 * n - s - 1) % n];
        let rb = blocks[(r + 2 * n - s - 2) % n];
        let mut parts = split_blocks(data, &[sb, rb])?;
        let (sp, rp) = parts.split_at_mut(1);
        let acc = &mut *rp[0];
        match input {
            Some(inp) => {
                // The incoming partial sum lands in the block itself, and
                // this rank's part is folded into it (the op commutes).
                let out = if s == 0 {
                    &inp[sb.0..sb.0 + sb.1]
                } else {
                    &*sp[0]
                };
                let mine = &inp[rb.0..rb.0 + rb.1];
                // The last step receives this rank's own block.
                let acc = match dest.as_deref_mut() {
                    Some(o) if s + 2 == n => o,
                    _ => acc,
                };
                c.sendrecv_folding(
                    s as u32,
                    Some((next, out)),
                    (prev, acc),
                    piece,
                    |off, got| red.fold_left(&mine[off..off + got.len()], got),
                )?;
            }
            None => {
                c.sendrecv_folding(
                    s as u32,
                    Some((next, &*sp[0])),
                    (prev, &mut tmp[..rb.1]),
                    piece,
                    |off, got| red.fold_left(got, &mut acc[off..off + got.len()]),
                )?;
            }
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
    if c.size() > 1
        && select::pull(c, "reduce_scatter", total, select::pull_reduce_scatter)?
        && pull::reduce_scatter(c, send, recv, &blocks, red)?
    {
        return Ok(());
    }
    if c.size() > 1 && select::slots(c, "reduce_scatter", total <= SLOT_DATA, true) {
        return slots::reduce_scatter(c, send, recv, &blocks, total, red);
    }
    let choice = select::reduce_scatter(c, total, red.extent, red.commutative);
    if choice == select::ReduceScatter::Stream {
        return stream::reduce_scatter(c, send, recv, &blocks, red);
    }
    let (bo, bl) = blocks[r];
    match choice {
        select::ReduceScatter::Ring | select::ReduceScatter::Stream => {
            let mut data = c.scratch(total);
            let res = match send {
                Some(s) => ring_into(c, Some(s), &mut data, &blocks, red, Some(&mut recv[..bl])),
                // In place the block is still input until the last step.
                None => ring(c, Some(&recv[..total]), &mut data, &blocks, red).map(|()| {
                    copy(&mut recv[..bl], &data[bo..bo + bl]);
                }),
            };
            c.give_back(data);
            res?;
        }
        select::ReduceScatter::ReduceScatterv => {
            let data = match send {
                Some(s) => c.copy_of(&s[..total]),
                None => c.copy_of(&recv[..total]),
            };
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
