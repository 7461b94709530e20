//! All-to-all(v): streamed through the slots, every message posted at
//! once, or n-1 paired steps.

use super::{copy_own, pull, select, send_blocks, slots, split_blocks, stream, Ctx};
use crate::error::Result;

/// All-to-all whose blocks have one length, the same on every rank (the
/// contract of `MPI_Alltoall` and `ncclAllToAll`, which every rank can
/// rely on to choose alike): large calls stream through the slots
/// (`coll::stream::alltoall`), or with 2 ranks on cores of their own go as
/// messages (`select::alltoall_direct`); the rest go as `alltoallv`.
pub fn alltoall(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
) -> Result<()> {
    let len = rblocks.first().map_or(0, |b| b.1);
    let uniform = sblocks == rblocks && rblocks.iter().all(|b| b.1 == len);
    let total = len * c.size();
    if uniform && select::alltoall_pulls(c, total)? && pull::alltoall(c, send, recv, rblocks)? {
        return Ok(());
    }
    if uniform && select::alltoall_direct(c, total)? {
        return messages(c, send, sblocks, recv, rblocks);
    }
    if uniform && select::alltoall_stream(c, len) {
        return stream::alltoall(c, send, recv, rblocks);
    }
    through_slots(c, send, sblocks, recv, rblocks, Some(len))
}

/// Sends block `p` of `send` to rank `p` and receives rank `p`'s block into
/// block `p` of `recv`.
pub fn alltoallv(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
) -> Result<()> {
    through_slots(c, send, sblocks, recv, rblocks, None)
}

/// `alltoallv` through the slots where they serve, else as messages;
/// `known` as `slots::alltoallv` says.
fn through_slots(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
    known: Option<usize>,
) -> Result<()> {
    if select::slots(c, "alltoall", true, true) {
        return slots::alltoallv(c, send, sblocks, recv, rblocks, known);
    }
    messages(c, send, sblocks, recv, rblocks)
}

/// `alltoallv` as messages, all at once or in paired steps
/// (`select::alltoall`).
fn messages(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let outs = send_blocks(send, sblocks)?;
    let mut parts = split_blocks(recv, rblocks)?;
    copy_own(parts[r], outs[r])?;
    match select::alltoall(c) {
        select::Alltoall::Direct => {
            let sends = (1..n)
                .map(|k| (r + k) % n)
                .map(|p| (p, outs[p]))
                .collect::<Vec<_>>();
            let mut recvs: Vec<(usize, &mut [u8])> = parts
                .into_iter()
                .enumerate()
                .filter(|&(p, _)| p != r)
                .collect();
            c.xfer(0, &sends, &mut recvs)
        }
        select::Alltoall::Pairwise => {
            let mut parts: Vec<Option<&mut [u8]>> = parts.into_iter().map(Some).collect();
            for k in 1..n {
                let (to, from) = ((r + k) % n, (r + n - k) % n);
                let dst = parts[from].take().expect("each block received once");
                c.sendrecv(k as u32, to, outs[to], from, dst)?;
            }
            Ok(())
        }
    }
}
