//! Broadcast: binomial tree, or a chain pipelined in pieces for large data.

use super::{hier, pull, select, slots, stream, Ctx};
use crate::error::Result;
use crate::transport::shm::slots::SLOT_DATA;

const PIECE: usize = 128 * 1024;

/// Copies `buf` from `root` to every rank.
pub fn bcast(c: &mut Ctx, buf: &mut [u8], root: usize) -> Result<()> {
    if c.size() == 1 || buf.is_empty() {
        return Ok(());
    }
    if select::pull(c, "bcast", buf.len(), select::pull_bcast)?
        && pull::bcast(c, buf, root, select::share_bcast(c, buf.len()))?
    {
        return Ok(());
    }
    // Slots first: a communicator with slots is never split by host.
    if select::slots(
        c,
        "bcast",
        buf.len() <= SLOT_DATA,
        buf.len() <= select::read_limit(c, "bcast"),
    ) {
        return slots::bcast(c, buf, root);
    }
    if let Some(l) = hier::Layout::of(c, "bcast") {
        return hier::bcast(c, &l, buf, root);
    }
    match select::bcast(c, buf.len()) {
        select::Bcast::Binomial => binomial(c, buf, root),
        select::Bcast::Chain => chain(c, buf, root),
        select::Bcast::Stream => stream::bcast(c, buf, root),
    }
}

fn binomial(c: &mut Ctx, buf: &mut [u8], root: usize) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let vr = (r + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            c.recv(0, (vr - mask + root) % n, buf)?;
            break;
        }
        mask <<= 1;
    }
    // Children: vr + m for every power of two m below this rank's low bit.
    let children: Vec<(usize, &[u8])> = std::iter::successors(Some(mask >> 1), |m| Some(m >> 1))
        .take_while(|&m| m > 0)
        .filter(|&m| vr + m < n)
        .map(|m| ((vr + m + root) % n, &*buf))
        .collect();
    c.xfer(0, &children, &mut [])
}

fn chain(c: &mut Ctx, buf: &mut [u8], root: usize) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let vr = (r + n - root) % n;
    let prev = (vr > 0).then(|| (r + n - 1) % n);
    let next = (vr + 1 < n).then(|| (r + 1) % n);
    let pieces = buf.len().div_ceil(PIECE);
    // Every piece travels with the same tag: per-sender order keeps them
    // apart. Step i receives piece i while forwarding piece i-1.
    for i in 0..=pieces {
        let (before, after) = buf.split_at_mut((i * PIECE).min(buf.len()));
        let len = PIECE.min(after.len());
        match prev {
            None => {
                if let (Some(to), true) = (next, i < pieces) {
                    c.send(0, to, &after[..len])?;
                }
            }
            Some(from) => {
                let sends: Vec<(usize, &[u8])> = match (next, i.checked_sub(1)) {
                    (Some(to), Some(p)) => vec![(to, &before[p * PIECE..])],
                    _ => Vec::new(),
                };
                let mut recvs: Vec<(usize, &mut [u8])> = if i < pieces {
                    vec![(from, &mut after[..len])]
                } else {
                    Vec::new()
                };
                c.xfer(0, &sends, &mut recvs)?;
            }
        }
    }
    Ok(())
}
