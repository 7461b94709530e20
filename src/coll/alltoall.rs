//! All-to-all(v): streamed through the slots, every message posted at
//! once, or n-1 paired steps.

use super::{copy_own, pull, select, send_blocks, slots, split_blocks, stream, Ctx};
use crate::comm::engine::SendKind;
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
        let kind = c.exchange_kind();
        return messages(c, send, sblocks, recv, rblocks, kind);
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
    // A 2-rank call's blocks (forced as messages too) swap.
    let kind = if known.is_some() {
        c.exchange_kind()
    } else {
        SendKind::Plain
    };
    messages(c, send, sblocks, recv, rblocks, kind)
}

/// `alltoallv` as messages of `kind`, all at once or in paired steps
/// (`select::alltoall`). All at once, the rank's own block is copied
/// last: 2 ranks, `-t`, alternated, medians of 4, us, own block first /
/// last, streamed: 2 MiB 287 / 276, 32 MiB 5771 / 5477; read in place
/// (`SendKind::Swap`), of 6-8: 2 MiB 249 / 239, 32 MiB 5070 / 5000.
fn messages(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
    kind: SendKind,
) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let outs = send_blocks(send, sblocks)?;
    let mut parts = split_blocks(recv, rblocks)?;
    match select::alltoall(c) {
        select::Alltoall::Direct => {
            let own = std::mem::take(&mut parts[r]);
            let sends = (1..n)
                .map(|k| (r + k) % n)
                .map(|p| (p, outs[p]))
                .collect::<Vec<_>>();
            let mut recvs: Vec<(usize, &mut [u8])> = parts
                .into_iter()
                .enumerate()
                .filter(|&(p, _)| p != r)
                .collect();
            c.xfer_as(0, &sends, &mut recvs, kind)?;
            copy_own(own, outs[r])
        }
        select::Alltoall::Pairwise => {
            copy_own(parts[r], outs[r])?;
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
