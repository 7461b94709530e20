//! Gather and scatter (and their v-variants): the root posts every
//! message at once.

use super::{select, slots, split_blocks, Ctx};
use crate::error::{Error, Result};

/// Gathers each rank's `send` into block `r` of `recv` on the root.
/// On the root `send == None` means in place (its block is already there).
pub fn gatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    root: usize,
) -> Result<()> {
    if select::slots(c, "gather", true, true) {
        return slots::gatherv(c, send, recv, blocks, root);
    }
    let r = c.rank();
    if r != root {
        let s = send.ok_or_else(|| Error::InvalidArg("gather without a send buffer".into()))?;
        return c.send(0, root, s);
    }
    let recv =
        recv.ok_or_else(|| Error::InvalidArg("gather root without a receive buffer".into()))?;
    let mut parts = split_blocks(recv, blocks)?;
    if let Some(s) = send {
        if s.len() != parts[root].len() {
            return Err(Error::InvalidArg(format!(
                "root sends {} bytes to its own {}-byte block",
                s.len(),
                parts[root].len()
            )));
        }
        parts[root].copy_from_slice(s);
    }
    let mut recvs: Vec<(usize, &mut [u8])> = parts
        .into_iter()
        .enumerate()
        .filter(|&(p, _)| p != root)
        .collect();
    c.xfer(0, &[], &mut recvs)
}

/// Scatters block `r` of the root's `send` to rank `r`'s `recv`. On the
/// root `recv == None` means in place (its block stays where it is).
pub fn scatterv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    recv: Option<&mut [u8]>,
    root: usize,
) -> Result<()> {
    if select::slots(c, "scatter", true, true) {
        return slots::scatterv(c, send, blocks, recv, root);
    }
    let r = c.rank();
    if r != root {
        let d = recv.ok_or_else(|| Error::InvalidArg("scatter without a receive buffer".into()))?;
        return c.recv(0, root, d);
    }
    let send =
        send.ok_or_else(|| Error::InvalidArg("scatter root without a send buffer".into()))?;
    let block = |p: usize| -> Result<&[u8]> {
        let (o, l) = blocks[p];
        send.get(o..o + l)
            .ok_or_else(|| Error::InvalidArg(format!("block {p} lies outside the send buffer")))
    };
    if let Some(d) = recv {
        let own = block(root)?;
        if own.len() != d.len() {
            return Err(Error::InvalidArg(format!(
                "root's block has {} bytes, its receive buffer {}",
                own.len(),
                d.len()
            )));
        }
        d.copy_from_slice(own);
    }
    let sends = (0..c.size())
        .filter(|&p| p != root)
        .map(|p| Ok((p, block(p)?)))
        .collect::<Result<Vec<_>>>()?;
    c.xfer(0, &sends, &mut [])
}
