//! Gather and scatter (and their v-variants): the root posts every
//! message at once.

use super::{back_to_back, copy_own, pull, select, send_blocks, slots, split_blocks, stream, Ctx};
use crate::copy::copy;
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
    gatherv_known(c, send, recv, blocks, root, None)
}

/// `gatherv` where every block is `known` bytes (`MPI_Gather`), which
/// every rank knows, and may number a call through the slots by
/// (`slots::gatherv`), as the ranks that take `gather` do.
fn gatherv_known(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    // Only forced (`pull_never`): members other than the root know their
    // own block alone, so no size is known alike to choose by.
    if select::pull(c, "gather", 0, select::pull_never)?
        && pull::fits(c.size())
        && pull::gatherv(c, send, recv.as_deref_mut(), blocks, root)?
    {
        return Ok(());
    }
    if select::slots(c, "gather", true, true) {
        return slots::gatherv(c, send, recv, blocks, root, known);
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
        copy(parts[root], s);
    }
    let mut recvs: Vec<(usize, &mut [u8])> = parts
        .into_iter()
        .enumerate()
        .filter(|&(p, _)| p != root)
        .collect();
    c.xfer(0, &[], &mut recvs)
}

/// `gatherv` of `MPI_Gather`: every block is `len` bytes, which every
/// rank knows, so every rank may choose alike to pull by it
/// (`select::pull_gather`). `blocks` is the root's layout (empty
/// elsewhere).
pub fn gatherv_uniform(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    len: usize,
    root: usize,
) -> Result<()> {
    if large(c, send, recv.as_deref_mut(), blocks, len, root)? {
        return Ok(());
    }
    gatherv_known(c, send, recv, blocks, root, Some(len))
}

/// The ways of a large `MPI_Gather`, chosen by `len` alike on every rank
/// (`select::gather_stream`): streamed where the pull would go untimed
/// (ranks outnumbering cores, or below `tune::TUNED_FROM`), else pulled
/// where `select::pull` says, else streamed.
/// Whether one of them took the call. `blocks`: the root's layout.
fn large(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    len: usize,
    root: usize,
) -> Result<bool> {
    if select::gather_stream(c, len, true) {
        stream::gather(c, send, len, recv, blocks, root)?;
        return Ok(true);
    }
    if select::pull(c, "gather", len, select::pull_gather)?
        && pull::fits(c.size())
        && pull::gatherv(c, send, recv.as_deref_mut(), blocks, root)?
    {
        return Ok(true);
    }
    if select::gather_stream(c, len, false) {
        stream::gather(c, send, len, recv, blocks, root)?;
        return Ok(true);
    }
    Ok(false)
}

/// `gatherv` with `len` bytes per rank, back to back in the root's `recv`
/// (`MPI_Gather`): the slots take it without a block list.
pub fn gather(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    len: usize,
    root: usize,
) -> Result<()> {
    if select::gather_large(c, len)
        && large(
            c,
            send,
            recv.as_deref_mut(),
            &blocks_of(c.size(), len),
            len,
            root,
        )?
    {
        return Ok(());
    }
    if select::slots(c, "gather", true, true) {
        return slots::gather(c, send, recv, len, root);
    }
    gatherv_known(c, send, recv, &blocks_of(c.size(), len), root, Some(len))
}

/// `scatterv` with `len` bytes per rank, back to back in the root's `send`
/// (`MPI_Scatter`): the slots take it without a block list.
pub fn scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    len: usize,
    mut recv: Option<&mut [u8]>,
    root: usize,
) -> Result<()> {
    if select::pull(c, "scatter", len, select::pull_never)?
        && pull::fits(c.size())
        && pull::scatterv(
            c,
            send,
            &blocks_of(c.size(), len),
            recv.as_deref_mut(),
            root,
        )?
    {
        return Ok(());
    }
    if select::scatter_stream(c, len) {
        let blocks = if send.is_some() {
            blocks_of(c.size(), len)
        } else {
            Vec::new()
        };
        return stream::scatter(c, send, &blocks, len, recv, root);
    }
    if select::slots(c, "scatter", true, true) {
        return slots::scatter(c, send, len, recv, root);
    }
    scatterv_known(c, send, &blocks_of(c.size(), len), recv, root, Some(len))
}

/// `MPI_Scatter` where the root's blocks of `len` bytes lie anywhere in
/// `send` (`blocks`, the root's layout; empty elsewhere): every rank
/// chooses by `len` alike (`select::scatter_stream`), else as `scatterv`.
pub fn scatter_uniform(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    len: usize,
    recv: Option<&mut [u8]>,
    root: usize,
) -> Result<()> {
    if select::scatter_stream(c, len) {
        return stream::scatter(c, send, blocks, len, recv, root);
    }
    scatterv_known(c, send, blocks, recv, root, Some(len))
}

/// `n` blocks of `len` bytes, back to back from 0, for the message paths.
fn blocks_of(n: usize, len: usize) -> Vec<(usize, usize)> {
    let mut v = vec![(0, 0); n];
    back_to_back(&mut v, len);
    v
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
    scatterv_known(c, send, blocks, recv, root, None)
}

/// `scatterv` where every block is `known` bytes (`MPI_Scatter`), as
/// `gatherv_known`.
fn scatterv_known(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    mut recv: Option<&mut [u8]>,
    root: usize,
    known: Option<usize>,
) -> Result<()> {
    // Only forced, as for `gatherv`.
    if select::pull(c, "scatter", 0, select::pull_never)?
        && pull::fits(c.size())
        && pull::scatterv(c, send, blocks, recv.as_deref_mut(), root)?
    {
        return Ok(());
    }
    if select::slots(c, "scatter", true, true) {
        return slots::scatterv(c, send, blocks, recv, root, known);
    }
    let r = c.rank();
    if r != root {
        let d = recv.ok_or_else(|| Error::InvalidArg("scatter without a receive buffer".into()))?;
        return c.recv(0, root, d);
    }
    let send =
        send.ok_or_else(|| Error::InvalidArg("scatter root without a send buffer".into()))?;
    let parts = send_blocks(send, blocks)?;
    if let Some(d) = recv {
        copy_own(d, parts[root])?;
    }
    let sends: Vec<(usize, &[u8])> = (0..c.size())
        .filter(|&p| p != root)
        .map(|p| (p, parts[p]))
        .collect();
    c.xfer(0, &sends, &mut [])
}
