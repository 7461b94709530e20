//! Allgather(v): every block sent to every rank at once (small), or passed
//! around a ring (large).

use super::{copy_own, pull, select, slots, split_blocks, stream, Ctx};
use crate::error::{Error, Result};
use crate::transport::shm::slots::SLOT_DATA;

/// Fills every block of `recv` with that rank's data; `send == None` means
/// this rank's block is already in place.
pub fn allgatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<()> {
    let r = c.rank();
    let total: usize = blocks.iter().map(|b| b.1).sum();
    let fits = blocks.iter().all(|b| b.1 <= SLOT_DATA);
    if select::allgather_pulls(c, total)? && pull::allgatherv(c, send, recv, blocks)? {
        return Ok(());
    }
    if select::slots(
        c,
        "allgather",
        fits,
        total <= select::read_limit(c, "allgather"),
    ) {
        return slots::allgatherv(c, send, recv, blocks);
    }
    match select::allgather(c, total)? {
        select::Allgather::Direct => {
            let mut parts = split_blocks(recv, blocks)?;
            if let Some(s) = send {
                copy_own(parts[r], s)?;
            }
            let own = std::mem::take(&mut parts[r]);
            let sends: Vec<(usize, &[u8])> = (0..c.size())
                .filter(|&p| p != r)
                .map(|p| (p, &*own))
                .collect();
            let mut recvs: Vec<(usize, &mut [u8])> = parts
                .into_iter()
                .enumerate()
                .filter(|&(p, _)| p != r)
                .collect();
            let kind = c.exchange_kind();
            c.xfer_as(0, &sends, &mut recvs, kind)
        }
        select::Allgather::Stream => stream::allgatherv(c, send, recv, blocks),
        select::Allgather::Ring => {
            if let Some(s) = send {
                let (o, l) = blocks[r];
                copy_own(recv.get_mut(o..o + l).ok_or_else(outside)?, s)?;
            }
            ring_in_place(c, recv, blocks)
        }
    }
}

fn outside() -> Error {
    Error::InvalidArg("a block lies outside the receive buffer".into())
}

/// Ring allgather where block `r` of `data` already holds rank `r`'s part.
pub fn ring_in_place(c: &mut Ctx, data: &mut [u8], blocks: &[(usize, usize)]) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let sb = (r + n - s) % n;
        let rb = (r + 2 * n - s - 1) % n;
        let mut parts = split_blocks(data, &[blocks[sb], blocks[rb]])?;
        let (sp, rp) = parts.split_at_mut(1);
        c.xfer(s as u32, &[(next, &*sp[0])], &mut [(prev, &mut *rp[0])])?;
    }
    Ok(())
}
