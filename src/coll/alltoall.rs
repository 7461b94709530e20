//! All-to-all(v): every message posted at once, or n-1 paired steps.

use super::{select, slots, split_blocks, Ctx};
use crate::error::{Error, Result};

/// Sends block `p` of `send` to rank `p` and receives rank `p`'s block into
/// block `p` of `recv`.
pub fn alltoallv(
    c: &mut Ctx,
    send: &[u8],
    sblocks: &[(usize, usize)],
    recv: &mut [u8],
    rblocks: &[(usize, usize)],
) -> Result<()> {
    if select::slots(c, "alltoall", true, true) {
        return slots::alltoallv(c, send, sblocks, recv, rblocks);
    }
    let (n, r) = (c.size(), c.rank());
    let sblock = |p: usize| -> Result<&[u8]> {
        let (o, l) = sblocks[p];
        send.get(o..o + l)
            .ok_or_else(|| Error::InvalidArg(format!("send block {p} lies outside the buffer")))
    };
    let mut parts = split_blocks(recv, rblocks)?;
    let own = sblock(r)?;
    if own.len() != parts[r].len() {
        return Err(Error::InvalidArg(format!(
            "rank sends {} bytes to itself into a {}-byte block",
            own.len(),
            parts[r].len()
        )));
    }
    parts[r].copy_from_slice(own);
    match select::alltoall(c) {
        select::Alltoall::Direct => {
            let sends = (1..n)
                .map(|k| (r + k) % n)
                .map(|p| Ok((p, sblock(p)?)))
                .collect::<Result<Vec<_>>>()?;
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
                c.sendrecv(k as u32, to, sblock(to)?, from, dst)?;
            }
            Ok(())
        }
    }
}
