//! The fast lane of the collective exports and of point-to-point: the
//! common case (predefined datatype and op, positive counts, plain buffers
//! that do not overlap, the same type and count on both sides,
//! `FERROCOLL_CHECK` off) decoded in a few comparisons and handed to the
//! same `coll::` algorithm as the general path in `coll.rs`, or for a send
//! or a receive, written to or taken from the link at once without a
//! request (`Engine::send_now`, `Engine::recv_now`); `MPI_Isend` and
//! `MPI_Irecv` keep their request but skip the general decoding.
//!
//! Anything else declines (`None`) before any state changes, and the export
//! then takes the general path, which handles every other case and reports
//! every error. The general path's decoding (typed handles, signatures for
//! the check mode, `Result` plumbing at each step, two communicator
//! look-ups) cost about 30 ns of a 2-rank 8-byte broadcast of 97 ns.

use super::coll::{bad_root, Scratch};
use super::consts::*;
use super::datatypes::{self, Builtin};
use super::errors::MpiErr;
use super::ops::{builtin_kernel, builtin_op, builtin_reducer};
use super::p2p::{received_status, tag_of};
use super::ptr::{self, is_in_place};
use super::requests::Requests;
use super::state::{call_if, ReqEntry, Runtime, StatusSource};
use super::types::TypeInfo;
use crate::coll::back_to_back;
use crate::coll::{self, Ctx};
use crate::comm::{
    buffer::RawBuf,
    engine::{Engine, Match, SendKind, Status},
    Comm,
};
use crate::error::Result;
use crate::reduce::KernelFn;
use std::os::raw::{c_int, c_void};

/// A call the lane may still decline: the communicator, not yet started.
struct Lane<'a> {
    eng: &'a mut Engine,
    comm: &'a mut Comm,
    /// The request table (`MPI_Isend`, `MPI_Irecv`).
    reqs: &'a mut Requests,
    name: &'static str,
}

impl Lane<'_> {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn size(&self) -> usize {
        self.comm.size()
    }

    /// Takes the call: runs `f` on a started collective.
    #[inline(always)]
    fn run(self, f: impl FnOnce(&mut Ctx) -> Result<()>) -> Option<Result<()>> {
        Some(f(&mut Ctx::new(self.eng, self.comm).named(self.name)))
    }

    /// `run` with one block of `len` bytes per rank, back to back.
    fn run_blocks(
        self,
        len: usize,
        f: impl FnOnce(&mut Ctx, &[(usize, usize)]) -> Result<()>,
    ) -> Option<Result<()>> {
        let mut blocks = Scratch::new();
        let blocks = blocks.take(self.size());
        back_to_back(blocks, len);
        self.run(|c| f(c, blocks))
    }

    /// At the root of a gather or scatter: the span of the all-ranks buffer
    /// `all` (a `len`-byte block per rank), when it is plain, apart from the
    /// root's own `len`-byte buffer `own`, and described `same`ly.
    fn root_span(
        &self,
        own: *const c_void,
        all: *const c_void,
        len: usize,
        same: bool,
    ) -> Option<usize> {
        let total = span(len, self.size())?;
        (same && plain(all) && apart(own, len, all, total)).then_some(total)
    }
}

/// Runs `f` on communicator `comm` when the library runs and the check
/// mode is off; `None` when the lane declines.
#[inline(always)]
fn lane(
    name: &'static str,
    comm: MPI_Comm,
    f: impl FnOnce(Lane) -> Option<Result<()>>,
) -> Option<c_int> {
    call_if(name, comm, |rt| {
        if crate::param::params().check {
            return None;
        }
        let Runtime {
            eng, comms, reqs, ..
        } = rt;
        let comm = &mut comms.get_mut(&comm)?.comm;
        f(Lane {
            eng,
            comm,
            reqs,
            name,
        })
        .map(|r| r.map_err(MpiErr::from))
    })
}

/// Bytes of `count > 0` elements of a predefined datatype, and the type.
fn sized(count: c_int, dt: MPI_Datatype) -> Option<(usize, &'static Builtin)> {
    let b = datatypes::builtin(dt)?;
    let n = usize::try_from(count).ok().filter(|&n| n > 0)?;
    let bytes = n
        .checked_mul(b.elem.extent())
        .filter(|&x| x <= isize::MAX as usize)?;
    Some((bytes, b))
}

/// Neither null nor `MPI_IN_PLACE`.
fn plain(p: *const c_void) -> bool {
    !p.is_null() && !is_in_place(p)
}

/// Whether `[a, a + alen)` and `[b, b + blen)` do not overlap.
fn apart(a: *const c_void, alen: usize, b: *const c_void, blen: usize) -> bool {
    ptr::check_disjoint(a, alen, b, blen).is_ok()
}

/// The kernel of a predefined op on a predefined type MPICH allows it on.
fn kernel(op: MPI_Op, b: &Builtin) -> Option<KernelFn> {
    builtin_kernel(builtin_op(op)?.0, b)
}

/// `len * n`, if a buffer can span it.
fn span(len: usize, n: usize) -> Option<usize> {
    len.checked_mul(n).filter(|&s| s <= isize::MAX as usize)
}

/// `MPI_Barrier`.
pub fn barrier(comm: MPI_Comm) -> Option<c_int> {
    lane("MPI_Barrier", comm, |l| l.run(coll::barrier::barrier))
}

/// `MPI_Bcast`.
pub fn bcast(
    buffer: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Bcast", comm, |l| {
        let (len, _) = sized(count, dt)?;
        let root = bad_root(root, l.size()).ok()?;
        if !plain(buffer) {
            return None;
        }
        // SAFETY: non-null; holds count elements of dt (MPI contract).
        let buf = unsafe { ptr::bytes_mut(buffer, len) };
        l.run(|c| coll::bcast::bcast(c, buf, root))
    })
}

/// `MPI_Reduce`.
pub fn reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Reduce", comm, |l| {
        let (len, b) = sized(count, dt)?;
        let k = kernel(op, b)?;
        let root = bad_root(root, l.size()).ok()?;
        let at_root = l.rank() == root;
        if !plain(send) || (at_root && (!plain(recv) || !apart(send, len, recv, len))) {
            return None;
        }
        // SAFETY: non-null, count elements of dt (MPI contract).
        let s = unsafe { ptr::bytes(send, len) };
        // SAFETY: as above, and apart from `s`; only the root's counts.
        let r = at_root.then(|| unsafe { ptr::bytes_mut(recv, len) });
        l.run(|c| coll::reduce::reduce(c, Some(s), r, root, &builtin_reducer(b, &k)))
    })
}

/// The buffers of a reduction into every rank's `recv` (allreduce, scan)
/// of `count` elements of predefined type `dt` by predefined `op`, plain
/// and apart, with the type and the op's kernel.
fn reduction<'b>(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Option<(&'b [u8], &'b mut [u8], &'static Builtin, KernelFn)> {
    let (len, b) = sized(count, dt)?;
    let k = kernel(op, b)?;
    if !plain(send) || !plain(recv) || !apart(send, len, recv, len) {
        return None;
    }
    // SAFETY: non-null, count elements of dt (MPI contract), apart.
    let (s, r) = unsafe { (ptr::bytes(send, len), ptr::bytes_mut(recv, len)) };
    Some((s, r, b, k))
}

/// `MPI_Allreduce`.
pub fn allreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Allreduce", comm, |l| {
        let (s, r, b, k) = reduction(send, recv, count, dt, op)?;
        l.run(|c| coll::allreduce::allreduce(c, Some(s), r, &builtin_reducer(b, &k)))
    })
}

/// `MPI_Scan`, or where `exclusive`, `MPI_Exscan`.
pub fn scan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    exclusive: bool,
) -> Option<c_int> {
    let name = if exclusive { "MPI_Exscan" } else { "MPI_Scan" };
    lane(name, comm, |l| {
        let (s, r, b, k) = reduction(send, recv, count, dt, op)?;
        let red = builtin_reducer(b, &k);
        l.run(|c| match exclusive {
            true => coll::scan::exscan(c, Some(s), r, &red),
            false => coll::scan::scan(c, Some(s), r, &red),
        })
    })
}

/// The side of a rooted call that every rank has (a gather's send, a
/// scatter's receive): `count` elements of predefined type `ty` in a
/// plain `buf`; its bytes, the type and the root (checked).
fn rooted_side(
    l: &Lane,
    buf: *const c_void,
    count: c_int,
    ty: MPI_Datatype,
    root: c_int,
) -> Option<(usize, &'static Builtin, usize)> {
    let (len, b) = sized(count, ty)?;
    let root = bad_root(root, l.size()).ok()?;
    plain(buf).then_some((len, b, root))
}

/// A gather's send buffer, `scount` elements of predefined type `stype`,
/// plain, with the type and the root (checked).
fn gather_send<'b>(
    l: &Lane,
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    root: c_int,
) -> Option<(&'b [u8], &'static Builtin, usize)> {
    let (len, b, root) = rooted_side(l, send, scount, stype, root)?;
    // SAFETY: non-null, scount elements of stype (MPI contract).
    Some((unsafe { ptr::bytes(send, len) }, b, root))
}

/// `MPI_Gather` (the send side alone counts away from the root).
pub fn gather(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Gather", comm, |l| {
        let (s, _, root) = gather_send(&l, send, scount, stype, root)?;
        let len = s.len();
        if l.rank() != root {
            // As the root (`gather` chooses by `len`, known everywhere).
            return l.run(|c| coll::gather::gather(c, Some(s), None, len, root));
        }
        let total = l.root_span(send, recv, len, (rcount, rtype) == (scount, stype))?;
        // SAFETY: non-null, a block per rank (MPI contract), apart from `s`.
        let r = unsafe { ptr::bytes_mut(recv, total) };
        l.run(|c| coll::gather::gather(c, Some(s), Some(r), len, root))
    })
}

/// `MPI_Gatherv` (the send side alone counts away from the root): at the
/// root, blocks of the send's predefined type at displacements of at
/// least 0; any other layout declines.
#[allow(clippy::too_many_arguments)]
pub fn gatherv(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Gatherv", comm, |l| {
        let (s, b, root) = gather_send(&l, send, scount, stype, root)?;
        let len = s.len();
        if l.rank() != root {
            return l.run(|c| coll::gather::gatherv(c, Some(s), None, &[], root));
        }
        let mut blocks = Scratch::new();
        let blocks = blocks.take(l.size());
        let (all, span) = v_layout(recv, rcounts, displs, (b, rtype == stype), blocks)?;
        let all = all as *mut c_void;
        if !apart(send, len, all, span) {
            return None;
        }
        // SAFETY: non-null, covers every non-empty block (MPI contract),
        // apart from `s`.
        let r = unsafe { ptr::bytes_mut(all, span) };
        l.run(|c| coll::gather::gatherv(c, Some(s), Some(r), blocks, root))
    })
}

/// The root's blocks of a v-variant in `buf` (`counts` and `displs` of
/// `blocks.len()` entries each), of predefined type `b` on both sides
/// (`same`), as the general path lays them out (`v_blocks`): from the
/// first non-empty block's start, empty ones at 0; the start of the first
/// block in `buf` and the span of them all. `None` for another type, a
/// null or `MPI_IN_PLACE` buffer, null arrays, a negative count or
/// displacement, or no non-empty block.
fn v_layout(
    buf: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    (b, same): (&Builtin, bool),
    blocks: &mut [(usize, usize)],
) -> Option<(*const c_void, usize)> {
    if !same || !plain(buf) || counts.is_null() || displs.is_null() {
        return None;
    }
    // SAFETY: non-null, one entry per rank (MPI contract).
    let (counts, displs) = unsafe {
        (
            std::slice::from_raw_parts(counts, blocks.len()),
            std::slice::from_raw_parts(displs, blocks.len()),
        )
    };
    let extent = b.elem.extent();
    let (mut base, mut end) = (usize::MAX, 0);
    for (blk, (&k, &d)) in blocks.iter_mut().zip(counts.iter().zip(displs)) {
        let bytes = usize::try_from(k).ok()?.checked_mul(extent)?;
        let off = usize::try_from(d).ok()?.checked_mul(extent)?;
        *blk = (off, bytes);
        if bytes > 0 {
            base = base.min(off);
            end = end.max(off.checked_add(bytes)?);
        }
    }
    if end == 0 || end > isize::MAX as usize {
        return None;
    }
    for blk in blocks.iter_mut() {
        blk.0 = if blk.1 > 0 { blk.0 - base } else { 0 };
    }
    let start = (buf as *const u8).wrapping_add(base) as *const c_void;
    Some((start, end - base))
}

/// A scatter's receive buffer, `rcount` elements of predefined type
/// `rtype`, plain, with the type and the root (checked).
fn scatter_recv<'b>(
    l: &Lane,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
) -> Option<(&'b mut [u8], &'static Builtin, usize)> {
    let (len, b, root) = rooted_side(l, recv, rcount, rtype, root)?;
    // SAFETY: non-null, rcount elements of rtype (MPI contract).
    Some((unsafe { ptr::bytes_mut(recv, len) }, b, root))
}

/// `MPI_Scatterv` (the receive side alone counts away from the root): at
/// the root, blocks of the receive's predefined type at displacements of
/// at least 0; any other layout declines.
#[allow(clippy::too_many_arguments)]
pub fn scatterv(
    send: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Scatterv", comm, |l| {
        let (r, b, root) = scatter_recv(&l, recv, rcount, rtype, root)?;
        let len = r.len();
        if l.rank() != root {
            return l.run(|c| coll::gather::scatterv(c, None, &[], Some(r), root));
        }
        let mut blocks = Scratch::new();
        let blocks = blocks.take(l.size());
        let (all, span) = v_layout(send, scounts, displs, (b, stype == rtype), blocks)?;
        if !apart(all, span, recv, len) {
            return None;
        }
        // SAFETY: non-null, covers every non-empty block (MPI contract),
        // apart from `r`.
        let s = unsafe { ptr::bytes(all, span) };
        l.run(|c| coll::gather::scatterv(c, Some(s), blocks, Some(r), root))
    })
}

/// `MPI_Scatter` (the receive side alone counts away from the root).
pub fn scatter(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Scatter", comm, |l| {
        let (r, _, root) = scatter_recv(&l, recv, rcount, rtype, root)?;
        let len = r.len();
        if l.rank() != root {
            return l.run(|c| coll::gather::scatter(c, None, len, Some(r), root));
        }
        let total = l.root_span(recv, send, len, (rcount, rtype) == (scount, stype))?;
        // SAFETY: non-null, a block per rank (MPI contract), apart from `r`.
        let s = unsafe { ptr::bytes(send, total) };
        l.run(|c| coll::gather::scatter(c, Some(s), len, Some(r), root))
    })
}

/// The buffers of an allgather or alltoall: `send` holds `per_rank`
/// blocks of `count` elements, `recv` one per rank, of the same type.
fn both(
    l: &Lane,
    send: *const c_void,
    (scount, stype): (c_int, MPI_Datatype),
    recv: *mut c_void,
    (rcount, rtype): (c_int, MPI_Datatype),
    per_rank: bool,
) -> Option<(usize, usize, usize)> {
    let (len, _) = sized(rcount, rtype)?;
    let total = span(len, l.size())?;
    let slen = if per_rank { total } else { len };
    if (scount, stype) != (rcount, rtype)
        || !plain(send)
        || !plain(recv)
        || !apart(send, slen, recv, total)
    {
        return None;
    }
    Some((len, slen, total))
}

/// `MPI_Allgather`.
pub fn allgather(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Allgather", comm, |l| {
        let (len, slen, total) = both(&l, send, (scount, stype), recv, (rcount, rtype), false)?;
        // SAFETY: non-null, sized by counts and type (MPI contract), apart.
        let (s, r) = unsafe { (ptr::bytes(send, slen), ptr::bytes_mut(recv, total)) };
        l.run_blocks(len, |c, b| coll::allgather::allgatherv(c, Some(s), r, b))
    })
}

/// `MPI_Allgatherv` of one predefined type on both sides, from a plain
/// send buffer of `scount > 0` elements that fills this rank's block, to
/// plain receive blocks at displacements of at least 0 apart from it: the
/// two arrays decoded onto the stack (`v_layout`), where the general path
/// copied each to the heap first. Any other call declines.
#[allow(clippy::too_many_arguments)] // MPI_Allgatherv's own arguments
pub fn allgatherv(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let (slen, b) = sized(scount, stype)?;
    lane("MPI_Allgatherv", comm, |l| {
        let mut blocks = Scratch::new();
        let blocks = blocks.take(l.size());
        let (r, rspan) = v_layout(recv, rcounts, displs, (b, rtype == stype), blocks)?;
        // A block that the send does not fill is the general path's error.
        if !plain(send) || blocks[l.rank()].1 != slen || !apart(send, slen, r, rspan) {
            return None;
        }
        // SAFETY: non-null, sized by count and type, and covering every
        // non-empty block (MPI contract), apart.
        let (s, r) = unsafe {
            (
                ptr::bytes(send, slen),
                ptr::bytes_mut(r as *mut c_void, rspan),
            )
        };
        l.run(|c| coll::allgather::allgatherv(c, Some(s), r, blocks))
    })
}

/// `MPI_Alltoall`.
pub fn alltoall(
    send: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Alltoall", comm, |l| {
        let (len, slen, total) = both(&l, send, (scount, stype), recv, (rcount, rtype), true)?;
        // SAFETY: non-null, sized by counts and type (MPI contract), apart.
        let (s, r) = unsafe { (ptr::bytes(send, slen), ptr::bytes_mut(recv, total)) };
        l.run_blocks(len, |c, b| coll::alltoall::alltoall(c, s, b, r, b))
    })
}

/// `MPI_Alltoallv` of one predefined type on both sides, between plain
/// buffers whose blocks lie apart, each side with a non-empty block: the
/// four arrays decoded onto the stack (`v_layout`), where the general path
/// copied each to the heap first (allocation and freeing took about a
/// tenth of a 2-rank call of 8-byte blocks, perf). Any other call declines.
#[allow(clippy::too_many_arguments)] // MPI_Alltoallv's own arguments
pub fn alltoallv(
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stype: MPI_Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let (_, b) = sized(1, rtype)?;
    lane("MPI_Alltoallv", comm, |l| {
        let n = l.size();
        let (mut sblocks, mut rblocks) = (Scratch::new(), Scratch::new());
        let (sblocks, rblocks) = (sblocks.take(n), rblocks.take(n));
        let (s, sspan) = v_layout(send, scounts, sdispls, (b, stype == rtype), sblocks)?;
        let (r, rspan) = v_layout(recv, rcounts, rdispls, (b, true), rblocks)?;
        if !apart(s, sspan, r, rspan) {
            return None;
        }
        // SAFETY: non-null, covering every non-empty block of each side
        // (MPI contract), apart.
        let (s, r) = unsafe {
            (
                ptr::bytes(s, sspan),
                ptr::bytes_mut(r as *mut c_void, rspan),
            )
        };
        l.run(|c| coll::alltoall::alltoallv(c, s, sblocks, r, rblocks))
    })
}

/// `MPI_Reduce_scatter_block`.
pub fn reduce_scatter_block(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Option<c_int> {
    lane("MPI_Reduce_scatter_block", comm, |l| {
        let (len, b) = sized(count, dt)?;
        let k = kernel(op, b)?;
        let total = span(len, l.size())?;
        if !plain(send) || !plain(recv) || !apart(send, total, recv, len) {
            return None;
        }
        // SAFETY: non-null, sized by count and type (MPI contract), apart.
        let (s, r) = unsafe { (ptr::bytes(send, total), ptr::bytes_mut(recv, len)) };
        let mut lens = Scratch::new();
        let lens = lens.take(l.size());
        lens.fill(len);
        l.run(|c| {
            coll::reduce_scatter::reduce_scatter(c, Some(s), r, lens, &builtin_reducer(b, &k))
        })
    })
}

/// `MPI_Reduce_scatter` of a predefined type and op, from a plain send
/// buffer to a plain receive block of this rank apart from it, with no
/// negative count and this rank's count above 0: the counts decoded onto
/// the stack, where the general path copied them to the heap first. Any
/// other call declines.
pub fn reduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    rcounts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Option<c_int> {
    let (_, b) = sized(1, dt)?;
    let k = kernel(op, b)?;
    lane("MPI_Reduce_scatter", comm, |l| {
        if rcounts.is_null() {
            return None;
        }
        // SAFETY: non-null, one entry per rank (MPI contract).
        let counts = unsafe { std::slice::from_raw_parts(rcounts, l.size()) };
        let mut lens = Scratch::new();
        let lens = lens.take(l.size());
        let mut total = 0usize;
        for (len, &c) in lens.iter_mut().zip(counts) {
            *len = usize::try_from(c).ok()?.checked_mul(b.elem.extent())?;
            total = total.checked_add(*len)?;
        }
        let len = lens[l.rank()];
        if len == 0 || total > isize::MAX as usize {
            return None;
        }
        if !plain(send) || !plain(recv) || !apart(send, total, recv, len) {
            return None;
        }
        // SAFETY: non-null, sized by the counts and type (MPI contract), apart.
        let (s, r) = unsafe { (ptr::bytes(send, total), ptr::bytes_mut(recv, len)) };
        l.run(|c| {
            coll::reduce_scatter::reduce_scatter(c, Some(s), r, lens, &builtin_reducer(b, &k))
        })
    })
}

/// `MPI_Send` of a predefined type to another member, when the message can
/// leave at once without a request (see `Engine::send_now`); the general
/// path posts, waits for and frees one (about 1200 instructions a send).
pub fn send(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let (bytes, _) = sized(count, dt)?;
    if !plain(buf) || tag < 0 {
        return None;
    }
    lane("MPI_Send", comm, |l| {
        let (to, ctx) = (member(&l, dest)?, l.comm.p2p_ctx());
        // SAFETY: non-null, count elements of dt (MPI contract).
        let data = unsafe { ptr::bytes(buf, bytes) };
        // Not sent at once: decline, and the general path posts it.
        l.eng
            .send_now(to, ctx, tag, data, SendKind::Program, "MPI_Send")
            .map(|sent| sent.then_some(()))
            .transpose()
    })
}

/// The world rank of member `rank` of the lane's communicator.
fn member(l: &Lane, rank: c_int) -> Option<usize> {
    let r = usize::try_from(rank).ok().filter(|&r| r < l.size())?;
    Some(l.comm.world_rank(r))
}

/// Writes a received message's status (`source` as the caller named it;
/// predefined types, so every byte is data); `status` is non-null.
fn put_recv_status(status: *mut MPI_Status, source: c_int, st: &Status) {
    let st = received_status(source, st, st.bytes);
    ptr::put_status(status, st).expect("status checked non-null");
}

/// `MPI_Recv` of a predefined type from one member, when the message can
/// be taken straight off the link without a request (see
/// `Engine::recv_now`); the general path posts, matches, waits for and
/// frees one. Alternated 2-rank pingpong runs, one-way us, general path /
/// this (Open MPI): 8 B 0.199-0.223 / 0.135-0.159 (0.155-0.180), 128 B
/// 0.229-0.263 / 0.174-0.200 (0.175-0.226), 2 KiB 0.494-0.529 /
/// 0.431-0.486 (0.423-0.501).
pub fn recv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Option<c_int> {
    let (bytes, _) = sized(count, dt)?;
    let tag = tag_of(tag, true).ok()?;
    if !plain(buf) || status.is_null() {
        return None;
    }
    lane("MPI_Recv", comm, |l| {
        let (from, ctx) = (member(&l, source)?, l.comm.p2p_ctx());
        // SAFETY: non-null, count elements of dt (MPI contract).
        let data = unsafe { ptr::bytes_mut(buf, bytes) };
        let st = match l.eng.recv_now(from, ctx, tag, data, "MPI_Recv") {
            Ok(st) => st?,
            Err(e) => return Some(Err(e)),
        };
        put_recv_status(status, source, &st);
        Some(Ok(()))
    })
}

/// `MPI_Sendrecv` of predefined types between members, when the send
/// leaves at once (`Engine::send_now`): the receive then completes here,
/// without a request where `Engine::recv_now` can take it, else as a
/// posted one. Every argument of both halves is checked before anything
/// is sent, so a call the lane declines has changed nothing. 2 ranks
/// exchanging with each other, us per call, alternated runs, general path
/// / this (Open MPI): 8 B 0.310-0.313 / 0.128-0.129 (0.159-0.164), 128 B
/// 0.333-0.335 / 0.157-0.159 (0.186-0.190), 1 KiB 0.462-0.466 /
/// 0.267-0.330 (0.393-0.417).
#[allow(clippy::too_many_arguments)] // MPI_Sendrecv's own arguments
pub fn sendrecv(
    sbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    source: c_int,
    rtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Option<c_int> {
    let (sbytes, _) = sized(scount, stype)?;
    let (rbytes, _) = sized(rcount, rtype)?;
    let rtag = tag_of(rtag, true).ok()?;
    if !plain(sbuf)
        || !plain(rbuf)
        || stag < 0
        || status.is_null()
        || !apart(sbuf, sbytes, rbuf, rbytes)
    {
        return None;
    }
    lane("MPI_Sendrecv", comm, |l| {
        let (to, from, ctx) = (member(&l, dest)?, member(&l, source)?, l.comm.p2p_ctx());
        // SAFETY: non-null, sized by count and type (MPI contract), apart.
        let (out, into) = unsafe { (ptr::bytes(sbuf, sbytes), ptr::bytes_mut(rbuf, rbytes)) };
        match l
            .eng
            .send_now(to, ctx, stag, out, SendKind::Paired, "MPI_Sendrecv")
        {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        // Sent: from here the receive must complete in this call.
        let got = match l.eng.recv_now(from, ctx, rtag, into, "MPI_Sendrecv") {
            Ok(Some(st)) => Ok(st),
            Ok(None) => l.eng.recv_posted(from, ctx, rtag, into, "MPI_Sendrecv"),
            Err(e) => Err(e),
        };
        let st = match got {
            Ok(st) => st,
            Err(e) => return Some(Err(e)),
        };
        put_recv_status(status, source, &st);
        Some(st.error.map_or(Ok(()), |e| Err(*e)))
    })
}

/// Stores a started request and writes its handle to `request` (non-null,
/// checked by the caller); the caller checked `Requests::room` before
/// starting it.
#[inline(always)]
fn store(reqs: &mut Requests, e: ReqEntry, request: *mut MPI_Request) {
    let h = reqs.insert(e).expect("room checked");
    // SAFETY: non-null (the caller checked); MPI makes it writable.
    unsafe { request.write(h) };
}

/// `MPI_Isend` of a predefined type to another member, when the message
/// leaves at once (`Engine::send_now`): the request is stored complete,
/// with no engine request to post, complete, wait for and free. With
/// `irecv`, 2 ranks, 8 B, alternated runs, us, general path / lanes (Open
/// MPI): Irecv + Isend + Waitall 0.336-0.354 / 0.240-0.242 (0.166-0.168),
/// two of each and a Waitall of four 0.627-0.652 / 0.432-0.437
/// (0.268-0.283), Isend + Recv + Wait 0.227-0.229 / 0.153-0.159
/// (0.149-0.151); 4 ranks in pairs 0.80-0.89 / 0.55-0.58 (2.4-2.9).
pub fn isend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Option<c_int> {
    let (bytes, _) = sized(count, dt)?;
    if !plain(buf) || tag < 0 || request.is_null() {
        return None;
    }
    lane("MPI_Isend", comm, |l| {
        l.reqs.room().ok()?;
        let (to, ctx) = (member(&l, dest)?, l.comm.p2p_ctx());
        // SAFETY: non-null, count elements of dt (MPI contract).
        let data = unsafe { ptr::bytes(buf, bytes) };
        match l
            .eng
            .send_now(to, ctx, tag, data, SendKind::Program, "MPI_Isend")
        {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        let e = ReqEntry {
            id: None,
            source: StatusSource::Unnamed,
            recv_type: None,
            comm,
        };
        store(l.reqs, e, request);
        Some(Ok(()))
    })
}

/// `MPI_Irecv` of a predefined type from one member: posted as the
/// general path posts it, without its general decoding.
pub fn irecv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Option<c_int> {
    let (bytes, b) = sized(count, dt)?;
    let tag = tag_of(tag, true).ok()?;
    if !plain(buf) || request.is_null() {
        return None;
    }
    lane("MPI_Irecv", comm, |l| {
        l.reqs.room().ok()?;
        let from = member(&l, source)?;
        let m = Match {
            source: Some(from),
            ctx: l.comm.p2p_ctx(),
            tag,
        };
        // SAFETY: non-null, count elements of dt (MPI contract), left
        // untouched by the caller until the request completes.
        let raw = unsafe { RawBuf::new(buf as *mut u8, bytes) };
        let id = match l.eng.irecv(m, raw) {
            Ok(id) => id,
            Err(e) => return Some(Err(e)),
        };
        let e = ReqEntry {
            id: Some(id),
            source: StatusSource::Rank(source),
            recv_type: Some(TypeInfo::builtin(b)),
            comm,
        };
        store(l.reqs, e, request);
        Some(Ok(()))
    })
}
