//! Collective algorithms, written once over bytes: a byte count, an element
//! extent and a type-erased reduce function. `select` picks per call.

pub mod allgather;
pub mod allreduce;
pub mod alltoall;
pub mod barrier;
pub mod bcast;
pub mod check;
mod fill;
pub mod gather;
pub mod hier;
mod pull;
pub mod reduce;
pub mod reduce_scatter;
pub mod scan;
pub mod select;
pub mod slots;
pub mod stream;
pub mod tune;

use crate::comm::engine::{Engine, SendKind};
use crate::comm::Comm;
use crate::copy::{copy, copy_uncached, p2p_uncached_from};
use crate::error::{Error, Result};

/// A reduction as algorithms see it.
pub struct Reducer<'a> {
    /// Bytes per element; blocks are split on element boundaries.
    pub extent: usize,
    /// Whether operands may be combined in any order.
    pub commutative: bool,
    /// `dst = src (op) dst`, element-wise; `src` is the left operand.
    pub apply: &'a dyn Fn(&[u8], &mut [u8]),
}

impl Reducer<'_> {
    /// `acc = left (op) acc`.
    pub fn fold_left(&self, left: &[u8], acc: &mut [u8]) {
        if !acc.is_empty() {
            (self.apply)(left, acc);
        }
    }

    /// `acc = acc (op) right`, using `right` as scratch.
    pub fn fold_right(&self, acc: &mut [u8], right: &mut [u8]) {
        if !acc.is_empty() {
            (self.apply)(acc, right);
            copy(acc, right);
        }
    }
}

/// One collective call on one communicator: tags carry the call's sequence
/// number and step, on the communicator's collective context.
pub struct Ctx<'a> {
    eng: &'a mut Engine,
    comm: &'a mut Comm,
    seq: u32,
    /// Added to every step number: the phases of a host-aware call each
    /// have their own range of steps within the call's tags.
    base: u32,
    /// Name used in error messages (e.g. `MPI_Allreduce`).
    pub op: &'static str,
}

impl<'a> Ctx<'a> {
    /// Starts a collective call on `comm`.
    pub fn new(eng: &'a mut Engine, comm: &'a mut Comm) -> Ctx<'a> {
        let seq = comm.next_seq();
        Ctx {
            eng,
            comm,
            seq,
            base: 0,
            op: "collective",
        }
    }

    /// A phase of this call that runs on `view` (part of the members, from
    /// `view_of`), with its steps offset by `base`.
    pub fn sub<'b>(&'b mut self, view: &'b mut Comm, base: u32) -> Ctx<'b> {
        Ctx {
            eng: &mut *self.eng,
            comm: view,
            seq: self.seq,
            base: self.base + base,
            op: self.op,
        }
    }

    /// The members at ranks `ranks` of this call's communicator (this rank
    /// among them) as a communicator for `sub`.
    pub fn view_of(&self, ranks: &[usize]) -> Result<Comm> {
        self.comm.view(ranks).ok_or_else(|| {
            Error::InvalidArg(format!(
                "rank {} is not among {ranks:?} of its own communicator",
                self.comm.rank()
            ))
        })
    }

    /// The communicator's ranks grouped by host (hosts in order of their
    /// first rank, ranks ascending), or `None` when all share one host.
    pub fn host_groups(&self) -> Option<Vec<Vec<usize>>> {
        if !self.eng.multi_host() {
            return None;
        }
        let mut hosts: Vec<u32> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for r in 0..self.size() {
            let h = self.eng.host_of(self.comm.world_rank(r));
            match hosts.iter().position(|&x| x == h) {
                Some(i) => groups[i].push(r),
                None => {
                    hosts.push(h);
                    groups.push(vec![r]);
                }
            }
        }
        (groups.len() > 1).then_some(groups)
    }

    /// Sets the operation name for error messages.
    pub fn named(mut self, op: &'static str) -> Self {
        self.op = op;
        self
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// Scratch space of `len` bytes from the engine's buffer pool; its
    /// contents are left over from earlier use (only filling is paid for).
    pub fn scratch(&mut self, len: usize) -> Vec<u8> {
        self.eng.scratch_for(len)
    }

    /// A copy of `src` in a buffer from the engine's pool.
    pub fn copy_of(&mut self, src: &[u8]) -> Vec<u8> {
        let mut v = self.eng.scratch_for(src.len());
        copy(&mut v, src);
        v
    }

    /// Returns scratch space to the engine's pool.
    pub fn give_back(&mut self, v: Vec<u8>) {
        self.eng.recycle(v);
    }

    /// Whether this call may use the communicator's collective slots.
    pub fn has_slots(&self) -> bool {
        self.comm.slots.is_some() && self.eng.slots_usable()
    }

    /// Whether this call may read its peers' buffers in place
    /// (`coll::pull`): the communicator has slots and has not found the
    /// kernel refusing.
    pub fn pulls(&self) -> bool {
        self.has_slots() && self.comm.slots.as_ref().is_some_and(|s| s.pulls)
    }

    /// Turns pulls off for this communicator (every member does so in the
    /// same call, see `coll::pull`).
    pub fn stop_pulls(&mut self) {
        if let Some(s) = self.comm.slots.as_mut() {
            s.pulls = false;
        }
    }

    /// The process id of member `p`, where this rank may read its memory
    /// (on this host, and no read was refused here before).
    pub fn pid_of(&self, p: usize) -> Option<u32> {
        self.eng
            .pulls()
            .then(|| self.eng.pid_of(self.comm.world_rank(p)))
            .flatten()
    }

    /// Turns reading peers' memory off for this rank, after a refusal.
    pub fn refused(&mut self) {
        self.eng.stop_pulls();
    }

    /// The algorithm forced by `FERROCOLL_ALGO` for `coll`, if any.
    pub fn forced(&self, coll: &str) -> Option<&str> {
        self.eng
            .algo
            .iter()
            .find(|(k, _)| k == coll)
            .map(|(_, v)| v.as_str())
    }

    fn tag(&self, step: u32) -> i32 {
        (((self.seq & 0x3fff) << 16) | ((step + self.base) & 0xffff)) as i32
    }

    /// Sends and receives (communicator ranks) in one step.
    pub fn xfer(
        &mut self,
        step: u32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
    ) -> Result<()> {
        self.xfer_as(step, sends, recvs, SendKind::Plain)
    }

    /// How a collective's messages go where each rank sends to and receives
    /// from its peer as much at once and copies its own block besides (an
    /// all-to-all's, an allgather's): `SendKind::Swap` at 2 ranks, else
    /// `SendKind::Plain`.
    pub fn exchange_kind(&self) -> SendKind {
        if self.size() == 2 {
            SendKind::Swap
        } else {
            SendKind::Plain
        }
    }

    /// `xfer` with sends of `kind` (see `SendKind`).
    pub fn xfer_as(
        &mut self,
        step: u32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
        kind: SendKind,
    ) -> Result<()> {
        self.exchange(step, sends, recvs, kind, || false)
    }

    /// Sends each `(rank, bytes)` of `sends`, announced whatever its size,
    /// so that its bytes cross only once the receiver has posted its
    /// buffer. For a root that sends to several ranks and then goes on:
    /// small messages sent at once mostly arrive before their receive,
    /// are buffered and copied again, and the receivers sharing the root's
    /// core wait behind it. 4 ranks on 2 cores, scatter of 32 KiB per
    /// rank: 16.8 us sent at once, 11.2 announced (Open MPI 13.6).
    pub fn send_announced(&mut self, step: u32, sends: &[(usize, &[u8])]) -> Result<()> {
        self.exchange(step, sends, &mut [], SendKind::Rooted, || false)
    }

    /// Sends of `kind` (`SendKind::Rooted`: as `send_announced`), running
    /// `meanwhile` a piece at a time while the receivers take their
    /// messages (see `Engine::exchange_then`).
    pub fn send_then(
        &mut self,
        step: u32,
        sends: &[(usize, &[u8])],
        kind: SendKind,
        meanwhile: impl FnMut() -> bool,
    ) -> Result<()> {
        self.exchange(step, sends, &mut [], kind, meanwhile)
    }

    fn exchange(
        &mut self,
        step: u32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
        kind: SendKind,
        meanwhile: impl FnMut() -> bool,
    ) -> Result<()> {
        let (ctx, tag, op) = (self.comm.coll_ctx(), self.tag(step), self.op);
        let comm: &Comm = self.comm;
        self.eng.exchange_then(
            ctx,
            tag,
            sends,
            recvs,
            |r| comm.world_rank(r),
            op,
            kind,
            meanwhile,
        )
    }

    /// Sends `sbuf` to `to` while receiving `rbuf` from `from`, handing
    /// each `piece` bytes of `rbuf` to `fold(offset, bytes)` as soon as they
    /// have landed (see `Engine::exchange_folding`).
    pub fn sendrecv_folding(
        &mut self,
        step: u32,
        send: Option<(usize, &[u8])>,
        (from, rbuf): (usize, &mut [u8]),
        piece: usize,
        fold: impl FnMut(usize, &mut [u8]),
    ) -> Result<()> {
        let (ctx, tag, op) = (self.comm.coll_ctx(), self.tag(step), self.op);
        let send = send.map(|(to, b)| (self.comm.world_rank(to), b));
        let from = self.comm.world_rank(from);
        self.eng
            .exchange_folding(ctx, tag, send, (from, rbuf), piece, fold, op)
    }

    /// Sends `buf` to `to`.
    pub fn send(&mut self, step: u32, to: usize, buf: &[u8]) -> Result<()> {
        self.xfer(step, &[(to, buf)], &mut [])
    }

    /// Receives exactly `buf.len()` bytes from `from`.
    pub fn recv(&mut self, step: u32, from: usize, buf: &mut [u8]) -> Result<()> {
        self.xfer(step, &[], &mut [(from, buf)])
    }

    /// Sends to one rank while receiving from another.
    pub fn sendrecv(
        &mut self,
        step: u32,
        to: usize,
        sbuf: &[u8],
        from: usize,
        rbuf: &mut [u8],
    ) -> Result<()> {
        self.xfer(step, &[(to, sbuf)], &mut [(from, rbuf)])
    }
}

/// Splits `total` bytes into `n` blocks on `extent` boundaries, as evenly
/// as possible: (offset, length) per block.
pub fn even_blocks(total: usize, extent: usize, n: usize) -> Vec<(usize, usize)> {
    let elems = total / extent;
    let (q, r) = (elems / n, elems % n);
    let mut off = 0;
    (0..n)
        .map(|i| {
            let len = (q + usize::from(i < r)) * extent;
            let b = (off, len);
            off += len;
            b
        })
        .collect()
}

/// Visits the non-empty `blocks` (offset, length) of a buffer of `len`
/// bytes in offset order, failing if two overlap or one runs past the end.
fn in_offset_order(
    len: usize,
    blocks: &[(usize, usize)],
    mut visit: impl FnMut(usize),
) -> Result<()> {
    // Usually the blocks come in offset order already; sort only if not.
    let in_order = blocks
        .iter()
        .filter(|b| b.1 > 0)
        .try_fold(0usize, |end, b| (b.0 >= end).then_some(b.0 + b.1))
        .is_some();
    let order: Vec<usize> = if in_order {
        Vec::new()
    } else {
        let mut o: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].1 > 0).collect();
        o.sort_by_key(|&i| blocks[i].0);
        o
    };
    let mut pos = 0;
    let sorted = (0..blocks.len()).filter(|&i| in_order && blocks[i].1 > 0);
    for i in sorted.chain(order) {
        let (off, n) = blocks[i];
        if off < pos || off.checked_add(n).is_none_or(|end| end > len) {
            return Err(Error::InvalidArg(format!(
                "block {i} (displacement {off}, {n} bytes) overlaps another block or \
                 lies outside the buffer"
            )));
        }
        visit(i);
        pos = off + n;
    }
    Ok(())
}

/// Checks that the receive `blocks` of a buffer of `len` bytes are
/// disjoint and inside it, so that `block_mut` cannot fail on them.
pub fn check_recv_blocks(len: usize, blocks: &[(usize, usize)]) -> Result<()> {
    // The usual case, non-empty blocks in offset order and inside the
    // buffer, in one pass; anything else is sorted out (or reported) by
    // the general walk.
    let mut end = 0usize;
    for &(off, n) in blocks {
        if n == 0 {
            continue;
        }
        match off.checked_add(n) {
            Some(e) if off >= end && e <= len => end = e,
            _ => return in_offset_order(len, blocks, |_| {}),
        }
    }
    Ok(())
}

/// Disjoint mutable slices of `buf` for `blocks` (offset, length), in the
/// order given. Fails if two non-empty blocks overlap or one runs past the
/// end of `buf`.
pub fn split_blocks<'b>(buf: &'b mut [u8], blocks: &[(usize, usize)]) -> Result<Vec<&'b mut [u8]>> {
    let mut out: Vec<&'b mut [u8]> = (0..blocks.len()).map(|_| Default::default()).collect();
    let (mut rest, mut pos) = (buf, 0);
    in_offset_order(rest.len(), blocks, |i| {
        let (off, len) = blocks[i];
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - pos);
        let (blk, tail) = tail.split_at_mut(len);
        out[i] = blk;
        rest = tail;
        pos = off + len;
    })?;
    Ok(out)
}

/// The blocks (offset, length) of a send buffer as slices, failing if one
/// lies outside it.
pub fn send_blocks<'b>(buf: &'b [u8], blocks: &[(usize, usize)]) -> Result<Vec<&'b [u8]>> {
    check_send_blocks(buf.len(), blocks)?;
    Ok(blocks.iter().map(|&b| block(buf, b)).collect())
}

/// Checks that every send block lies inside a buffer of `len` bytes, so
/// that `block` cannot fail on them.
pub fn check_send_blocks(len: usize, blocks: &[(usize, usize)]) -> Result<()> {
    match blocks
        .iter()
        .position(|&(o, l)| o.checked_add(l).is_none_or(|end| end > len))
    {
        Some(p) => Err(Error::InvalidArg(format!(
            "send block {p} lies outside the send buffer"
        ))),
        None => Ok(()),
    }
}

/// Block (offset, length) of a buffer whose blocks were checked.
pub fn block(buf: &[u8], (off, len): (usize, usize)) -> &[u8] {
    &buf[off..off + len]
}

/// Block (offset, length) of a buffer whose blocks were checked.
pub fn block_mut(buf: &mut [u8], (off, len): (usize, usize)) -> &mut [u8] {
    &mut buf[off..off + len]
}

/// One block of `len` bytes per entry of `out`, back to back from 0 (the
/// layout of `MPI_Gather`'s and `MPI_Scatter`'s all-ranks buffers).
pub fn back_to_back(out: &mut [(usize, usize)], len: usize) {
    for (p, b) in out.iter_mut().enumerate() {
        *b = (p * len, len);
    }
}

/// Fails unless a rank's `sent` bytes fill its `block` bytes (the ranks
/// called the collective with inconsistent counts).
pub fn check_len(block: usize, sent: usize) -> Result<()> {
    if block != sent {
        return Err(Error::InvalidArg(format!(
            "{sent} bytes sent into a {block}-byte block"
        )));
    }
    Ok(())
}

/// A rank's own part copied into its block a piece at a time (`step`),
/// stored as `copy_own` stores it: work that overlaps a transfer
/// (`Ctx::send_then`), between whose pieces the engine refills the ring its
/// receiver empties.
pub struct OwnCopy<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    at: usize,
    uncached: bool,
}

impl<'a> OwnCopy<'a> {
    /// Bytes of one piece: about 2.5 us of copying, while the receiver
    /// empties a ring of 1 MiB in about 50.
    const PIECE: usize = 128 << 10;

    /// The copy of `src` into `dst`, failing on a size mismatch as
    /// `copy_own` does.
    pub fn new(dst: &'a mut [u8], src: &'a [u8]) -> Result<Self> {
        check_len(dst.len(), src.len())?;
        let uncached = dst.len() >= p2p_uncached_from();
        Ok(OwnCopy {
            dst,
            src,
            at: 0,
            uncached,
        })
    }

    /// Copies the next piece; whether any remain.
    pub fn step(&mut self) -> bool {
        let end = (self.at + Self::PIECE).min(self.dst.len());
        put_out(
            &mut self.dst[self.at..end],
            &self.src[self.at..end],
            self.uncached,
        );
        self.at = end;
        end < self.dst.len()
    }
}

/// Copies a rank's own part into its block, failing on a size mismatch
/// (the ranks called the collective with inconsistent counts). A large
/// block is stored past the cache.
pub fn copy_own(dst: &mut [u8], src: &[u8]) -> Result<()> {
    check_len(dst.len(), src.len())?;
    put_out(dst, src, dst.len() >= p2p_uncached_from());
    Ok(())
}

/// Copies a result into the user's buffer, past the cache where
/// `uncached`.
fn put_out(dst: &mut [u8], src: &[u8], uncached: bool) {
    if uncached {
        copy_uncached(dst, src);
    } else {
        copy(dst, src);
    }
}

#[cfg(test)]
mod tests {
    use super::OwnCopy;

    #[test]
    fn own_copy_goes_piece_by_piece_to_the_end() {
        for len in [
            0,
            1,
            OwnCopy::PIECE - 1,
            OwnCopy::PIECE,
            3 * OwnCopy::PIECE + 17,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            let mut own = OwnCopy::new(&mut dst, &src).unwrap();
            let mut steps = 1;
            while own.step() {
                steps += 1;
            }
            assert_eq!(steps, len.div_ceil(OwnCopy::PIECE).max(1), "len {len}");
            assert!(dst == src, "len {len}");
        }
    }

    #[test]
    fn own_copy_refuses_a_block_of_another_length() {
        let mut dst = [0u8; 8];
        assert!(OwnCopy::new(&mut dst, &[1u8; 9]).is_err());
    }
}
