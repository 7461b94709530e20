//! Collective exports: argument checks (only the arguments significant on
//! this rank), `MPI_IN_PLACE`, and the call into `coll/`.

use super::consts::*;
use super::errors::{MpiErr, MpiResult};
use super::lane;
use super::ops::{check_op, with_reducer, OpSpec};
use super::ptr::{self, check_buf, check_disjoint, is_in_place};
use super::state::{call, Runtime};
use super::types::{count_of, TypeInfo};
use crate::coll::check::Signature;
use crate::coll::{self, Ctx};
use crate::comm::{engine::Engine, Comm};
use std::os::raw::{c_int, c_void};

/// `root` as a rank of a communicator of `n`, or `MPI_ERR_ROOT`.
pub(super) fn bad_root(root: c_int, n: usize) -> MpiResult<usize> {
    usize::try_from(root)
        .ok()
        .filter(|&r| r < n)
        .ok_or_else(|| {
            MpiErr::new(
                MPI_ERR_ROOT,
                format!("invalid root {root} in a communicator of size {n}"),
            )
        })
}

/// Whether a rooted collective's own buffer is `MPI_IN_PLACE`, which only
/// the root may pass.
fn in_place_at_root(buf: *const c_void, me: usize, root: usize) -> MpiResult<bool> {
    let in_place = is_in_place(buf);
    if in_place && me != root {
        return Err(MpiErr::new(
            MPI_ERR_BUFFER,
            "MPI_IN_PLACE is only allowed at the root",
        ));
    }
    Ok(in_place)
}

/// Bytes of a rank's own `count` elements of `ty` at `buf` (0 in place),
/// with the buffer checked to hold them.
fn own_bytes(
    rt: &Runtime,
    buf: *const c_void,
    count: c_int,
    ty: MPI_Datatype,
    in_place: bool,
    what: &str,
) -> MpiResult<usize> {
    if in_place {
        return Ok(0);
    }
    let bytes = rt.type_info(ty)?.bytes(count)?;
    check_buf(buf, bytes, what)?;
    Ok(bytes)
}

/// Per-rank counts and displacements (in extents) of a collective buffer.
#[derive(Clone, Copy)]
enum Layout<'a> {
    /// `n` blocks of `count` elements, block `p` at `p * count` (the
    /// non-v collectives; computed, never materialised).
    Uniform { n: usize, count: c_int },
    /// The arrays a v-variant was given.
    Listed {
        counts: &'a [c_int],
        displs: &'a [c_int],
    },
}

impl Layout<'_> {
    /// The count of every block, unless counts are per rank.
    fn uniform(&self) -> Option<usize> {
        match *self {
            Layout::Uniform { count, .. } => Some(count as usize),
            Layout::Listed { .. } => None,
        }
    }

    fn len(&self) -> usize {
        match *self {
            Layout::Uniform { n, .. } => n,
            Layout::Listed { counts, displs } => counts.len().min(displs.len()),
        }
    }

    /// (count, displacement) of rank `p`.
    fn at(&self, p: usize) -> (c_int, i64) {
        match *self {
            Layout::Uniform { count, .. } => (count, p as i64 * i64::from(count)),
            Layout::Listed { counts, displs } => (counts[p], i64::from(displs[p])),
        }
    }
}

/// A per-rank list that lives on the stack for communicators of up to
/// `INLINE` ranks: the small collectives build one or two per call, and a
/// heap allocation and free cost about as much as the call itself.
pub(super) struct Scratch<T> {
    inline: [T; INLINE],
    heap: Vec<T>,
}

const INLINE: usize = 16;

impl<T: Copy + Default> Scratch<T> {
    pub(super) fn new() -> Self {
        Scratch {
            inline: [T::default(); INLINE],
            heap: Vec::new(),
        }
    }

    /// `n` entries, each `T::default()`.
    pub(super) fn take(&mut self, n: usize) -> &mut [T] {
        if n <= INLINE {
            &mut self.inline[..n]
        } else {
            self.heap.resize(n, T::default());
            &mut self.heap
        }
    }
}

/// Writes the byte blocks of a layout into `out` (one per rank), relative
/// to the lowest displacement (which may be negative); returns (start
/// offset from the buffer pointer, span).
fn v_blocks(layout: Layout, t: &TypeInfo, out: &mut [(usize, usize)]) -> MpiResult<(isize, usize)> {
    if let Layout::Uniform { count, .. } = layout {
        // Back to back from the pointer: no displacement to check.
        let len = t.bytes(count)?;
        let span = len
            .checked_mul(out.len())
            .filter(|&s| isize::try_from(s).is_ok())
            .ok_or_else(|| {
                MpiErr::new(
                    MPI_ERR_COUNT,
                    format!(
                        "{} blocks of count {count} overflow the address space",
                        out.len()
                    ),
                )
            })?;
        coll::back_to_back(out, len);
        return Ok((0, span));
    }
    let mut offs = Scratch::<isize>::new();
    let offs = offs.take(out.len());
    let (mut base, mut end) = (0isize, 0isize);
    for (p, (o, b)) in offs.iter_mut().zip(out.iter_mut()).enumerate() {
        let (c, d) = layout.at(p);
        let len = t.bytes(c)?;
        let overflow = || MpiErr::new(MPI_ERR_ARG, format!("displacement {d} overflows"));
        *o = isize::try_from(d)
            .ok()
            .and_then(|d| d.checked_mul(t.extent as isize))
            .ok_or_else(overflow)?;
        *b = (0, len);
        if len > 0 {
            base = base.min(*o);
            end = end.max(o.checked_add(len as isize).ok_or_else(overflow)?);
        }
    }
    for (o, b) in offs.iter().zip(out.iter_mut()) {
        if b.1 > 0 {
            b.0 = (o - base) as usize;
        }
    }
    Ok((base, (end - base) as usize))
}

/// A view of `len` bytes starting `base` bytes from `p`.
fn at(p: *const c_void, base: isize) -> *mut c_void {
    (p as *mut u8).wrapping_offset(base) as *mut c_void
}

struct Red {
    op: OpSpec,
    dt: MPI_Datatype,
    t: TypeInfo,
}

impl Runtime {
    fn red(&self, op: MPI_Op, dt: MPI_Datatype) -> MpiResult<Red> {
        let t = self.type_info(dt)?;
        let op = self.op_spec(op)?;
        check_op(op, t)?;
        Ok(Red { op, dt, t })
    }

    fn size_of(&mut self, comm: MPI_Comm) -> MpiResult<(usize, usize)> {
        let c = &self.comm(comm)?.comm;
        Ok((c.rank(), c.size()))
    }
}

/// Starts a collective call; with `FERROCOLL_CHECK` on, the ranks first
/// compare their calls (`sig` is only built then).
fn begin<'a>(
    eng: &'a mut Engine,
    c: &'a mut Comm,
    name: &'static str,
    sig: impl FnOnce() -> Signature,
) -> crate::error::Result<Ctx<'a>> {
    if crate::param::params().check {
        coll::check::agree(&mut Ctx::new(eng, c).named(name), &sig())?;
    }
    Ok(Ctx::new(eng, c).named(name))
}

macro_rules! ctx {
    ($eng:expr, $c:expr, $name:expr, $sig:expr) => {
        &mut begin($eng, $c, $name, || $sig)?
    };
}

/// `count` elements of `t` as a message names them.
fn type_text(count: usize, t: &TypeInfo) -> String {
    if t.derived {
        format!(
            "{count} x derived type ({} bytes of {})",
            t.size, t.base.macro_name
        )
    } else {
        format!("{count} x {}", t.base.macro_name)
    }
}

/// `sig` with each rank's part being `count` elements of `t`: the type
/// signature (data bytes and element type) must agree, as MPI requires.
/// `MPI_BYTE` and `MPI_PACKED` match any element type.
fn typed(sig: Signature, count: usize, t: &TypeInfo) -> Signature {
    let bytes = count * t.size;
    match t.base.handle {
        MPI_BYTE | MPI_PACKED => sig.bytes(bytes),
        h => sig.data(bytes, h as u32),
    }
}

/// An op as a message names it, and its id.
fn op_text(op: OpSpec, handle: MPI_Op) -> String {
    match op {
        OpSpec::Builtin(_, name) => name.to_string(),
        OpSpec::User(_) => format!("user op {handle:#x}"),
    }
}

/// A reduction's signature: `count` elements of `red`'s type, its op.
fn red_sig(
    name: &'static str,
    count: usize,
    red: &Red,
    root: Option<usize>,
    op: MPI_Op,
) -> Signature {
    let at = root.map(|r| format!(", root {r}")).unwrap_or_default();
    let text = format!(
        "{name}({}, {}{at})",
        type_text(count, &red.t),
        op_text(red.op, op)
    );
    let sig = typed(Signature::new(name, text), count, &red.t).op(op as u32);
    match root {
        Some(r) => sig.root(r),
        None => sig,
    }
}

/// The signature of a gather, scatter, allgather or alltoall whose parts
/// are `count` elements of `t` each (`None`: per-rank counts, a v-variant,
/// where only the element type is compared).
fn parts_sig(
    name: &'static str,
    count: Option<usize>,
    t: &TypeInfo,
    root: Option<usize>,
) -> Signature {
    let at = root.map(|r| format!(", root {r}")).unwrap_or_default();
    let sig = match count {
        Some(k) => typed(
            Signature::new(name, format!("{name}({} per rank{at})", type_text(k, t))),
            k,
            t,
        ),
        None => {
            let text = format!("{name}(counts per rank of {}{at})", t.base.macro_name);
            match t.base.handle {
                MPI_BYTE | MPI_PACKED => Signature::new(name, text),
                h => Signature::new(name, text).elem(h as u32),
            }
        }
    };
    match root {
        Some(r) => sig.root(r),
        None => sig,
    }
}

/// Exports `MPI_Barrier`.
#[no_mangle]
pub extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    PMPI_Barrier(comm)
}

/// Profiling twin of `MPI_Barrier`.
#[no_mangle]
pub extern "C" fn PMPI_Barrier(comm: MPI_Comm) -> c_int {
    if let Some(rc) = lane::barrier(comm) {
        return rc;
    }
    call("MPI_Barrier", comm, |rt| {
        rt.with_comm(comm, |eng, c| {
            Ok(coll::barrier::barrier(ctx!(
                eng,
                c,
                "MPI_Barrier",
                Signature::new("MPI_Barrier", "MPI_Barrier()".into())
            ))?)
        })
    })
}

/// Exports `MPI_Bcast`.
#[no_mangle]
pub extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Bcast(buffer, count, datatype, root, comm)
}

/// Profiling twin of `MPI_Bcast`.
#[no_mangle]
pub extern "C" fn PMPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::bcast(buffer, count, datatype, root, comm) {
        return rc;
    }
    call("MPI_Bcast", comm, |rt| {
        let (_, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        let t = rt.type_info(datatype)?;
        let bytes = t.bytes(count)?;
        check_buf(buffer, bytes, "buffer")?;
        // SAFETY: the buffer holds count elements of datatype (checked non-null).
        let buf = unsafe { ptr::bytes_mut(buffer, bytes) };
        rt.with_comm(comm, |eng, c| {
            Ok(coll::bcast::bcast(
                ctx!(eng, c, "MPI_Bcast", {
                    let k = count as usize;
                    let text = format!("MPI_Bcast({}, root {root})", type_text(k, &t));
                    typed(Signature::new("MPI_Bcast", text), k, &t).root(root)
                }),
                buf,
                root,
            )?)
        })
    })
}

/// Exports `MPI_Reduce`.
#[no_mangle]
pub extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm)
}

/// Profiling twin of `MPI_Reduce`.
#[no_mangle]
pub extern "C" fn PMPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::reduce(sendbuf, recvbuf, count, datatype, op, root, comm) {
        return rc;
    }
    call("MPI_Reduce", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        let red = rt.red(op, datatype)?;
        let bytes = red.t.bytes(count)?;
        let in_place = in_place_at_root(sendbuf, me, root)?;
        if !in_place {
            check_buf(sendbuf, bytes, "sendbuf")?;
        }
        if me == root {
            check_buf(recvbuf, bytes, "recvbuf")?;
            if !in_place {
                check_disjoint(sendbuf, bytes, recvbuf, bytes)?;
            }
        }
        // SAFETY: buffers hold count elements (checked non-null) and do not
        // overlap (checked above).
        let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, bytes) });
        // SAFETY: as above; only the root's receive buffer is significant.
        let recv = (me == root).then(|| unsafe { ptr::bytes_mut(recvbuf, bytes) });
        with_reducer(red.op, red.dt, red.t, |r| {
            rt.with_comm(comm, |eng, c| {
                Ok(coll::reduce::reduce(
                    ctx!(
                        eng,
                        c,
                        "MPI_Reduce",
                        red_sig("MPI_Reduce", count as usize, &red, Some(root), op)
                    ),
                    send,
                    recv,
                    root,
                    r,
                )?)
            })
        })
    })
}

/// Exports `MPI_Allreduce`.
#[no_mangle]
pub extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm)
}

/// Profiling twin of `MPI_Allreduce`.
#[no_mangle]
pub extern "C" fn PMPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::allreduce(sendbuf, recvbuf, count, datatype, op, comm) {
        return rc;
    }
    call("MPI_Allreduce", comm, |rt| {
        rt.comm(comm)?;
        let red = rt.red(op, datatype)?;
        let bytes = red.t.bytes(count)?;
        let in_place = is_in_place(sendbuf);
        check_buf(recvbuf, bytes, "recvbuf")?;
        if !in_place {
            check_buf(sendbuf, bytes, "sendbuf")?;
            check_disjoint(sendbuf, bytes, recvbuf, bytes)?;
        }
        // SAFETY: checked non-null, sized by count and datatype, disjoint.
        let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, bytes) });
        // SAFETY: as above.
        let recv = unsafe { ptr::bytes_mut(recvbuf, bytes) };
        with_reducer(red.op, red.dt, red.t, |r| {
            rt.with_comm(comm, |eng, c| {
                Ok(coll::allreduce::allreduce(
                    ctx!(
                        eng,
                        c,
                        "MPI_Allreduce",
                        red_sig("MPI_Allreduce", count as usize, &red, None, op)
                    ),
                    send,
                    recv,
                    r,
                )?)
            })
        })
    })
}

/// Shared body of Scan and Exscan.
fn scan_like(
    name: &'static str,
    exclusive: bool,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::scan(sendbuf, recvbuf, count, datatype, op, comm, exclusive) {
        return rc;
    }
    call(name, comm, |rt| {
        rt.comm(comm)?;
        let red = rt.red(op, datatype)?;
        let bytes = red.t.bytes(count)?;
        let in_place = is_in_place(sendbuf);
        check_buf(recvbuf, bytes, "recvbuf")?;
        if !in_place {
            check_buf(sendbuf, bytes, "sendbuf")?;
            check_disjoint(sendbuf, bytes, recvbuf, bytes)?;
        }
        // SAFETY: checked non-null, sized by count and datatype, disjoint.
        let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, bytes) });
        // SAFETY: as above.
        let recv = unsafe { ptr::bytes_mut(recvbuf, bytes) };
        with_reducer(red.op, red.dt, red.t, |r| {
            rt.with_comm(comm, |eng, c| {
                let cx = ctx!(eng, c, name, red_sig(name, count as usize, &red, None, op));
                if exclusive {
                    coll::scan::exscan(cx, send, recv, r)?;
                } else {
                    coll::scan::scan(cx, send, recv, r)?;
                }
                Ok(())
            })
        })
    })
}

/// Exports `MPI_Scan`.
#[no_mangle]
pub extern "C" fn MPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm)
}

/// Profiling twin of `MPI_Scan`.
#[no_mangle]
pub extern "C" fn PMPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_like(
        "MPI_Scan", false, sendbuf, recvbuf, count, datatype, op, comm,
    )
}

/// Exports `MPI_Exscan`.
#[no_mangle]
pub extern "C" fn MPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm)
}

/// Profiling twin of `MPI_Exscan`.
#[no_mangle]
pub extern "C" fn PMPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_like(
        "MPI_Exscan",
        true,
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
    )
}

/// Shared body of Reduce_scatter and Reduce_scatter_block.
fn reduce_scatter_body(
    rt: &mut Runtime,
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[c_int],
    datatype: MPI_Datatype,
    op: MPI_Op,
    me: usize,
    comm: MPI_Comm,
) -> MpiResult<()> {
    let red = rt.red(op, datatype)?;
    let mut lens = Scratch::new();
    let lens = lens.take(counts.len());
    for (l, &c) in lens.iter_mut().zip(counts) {
        *l = red.t.bytes(c)?;
    }
    let total: usize = lens.iter().sum();
    let in_place = is_in_place(sendbuf);
    let rlen = if in_place { total } else { lens[me] };
    check_buf(recvbuf, rlen, "recvbuf")?;
    if !in_place {
        check_buf(sendbuf, total, "sendbuf")?;
        check_disjoint(sendbuf, total, recvbuf, rlen)?;
    }
    // SAFETY: checked non-null, sized by the counts and datatype, disjoint.
    let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, total) });
    // SAFETY: as above (in place, the receive buffer holds the whole input).
    let recv = unsafe { ptr::bytes_mut(recvbuf, rlen) };
    with_reducer(red.op, red.dt, red.t, |r| {
        rt.with_comm(comm, |eng, c| {
            Ok(coll::reduce_scatter::reduce_scatter(
                ctx!(eng, c, name, {
                    // The counts must be the same list everywhere; their
                    // total stands for it.
                    let k: usize = counts.iter().map(|&k| k as usize).sum();
                    red_sig(name, k, &red, None, op)
                }),
                send,
                recv,
                lens,
                r,
            )?)
        })
    })
}

/// Exports `MPI_Reduce_scatter_block`.
#[no_mangle]
pub extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm)
}

/// Profiling twin of `MPI_Reduce_scatter_block`.
#[no_mangle]
pub extern "C" fn PMPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm) {
        return rc;
    }
    call("MPI_Reduce_scatter_block", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        count_of(recvcount)?;
        let mut counts = Scratch::new();
        let counts = counts.take(n);
        counts.fill(recvcount);
        reduce_scatter_body(
            rt,
            "MPI_Reduce_scatter_block",
            sendbuf,
            recvbuf,
            counts,
            datatype,
            op,
            me,
            comm,
        )
    })
}

/// Exports `MPI_Reduce_scatter`.
#[no_mangle]
pub extern "C" fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm)
}

/// Profiling twin of `MPI_Reduce_scatter`.
#[no_mangle]
pub extern "C" fn PMPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm) {
        return rc;
    }
    call("MPI_Reduce_scatter", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let counts = ptr::array(recvcounts, n, "recvcounts")?.to_vec();
        reduce_scatter_body(
            rt,
            "MPI_Reduce_scatter",
            sendbuf,
            recvbuf,
            &counts,
            datatype,
            op,
            me,
            comm,
        )
    })
}

/// Gathers: `recv` (root only) is (pointer, counts, displacements, type).
#[allow(clippy::too_many_arguments)]
fn gather_body(
    rt: &mut Runtime,
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    layout: Layout,
    recvtype: MPI_Datatype,
    (me, root): (usize, usize),
    comm: MPI_Comm,
) -> MpiResult<()> {
    let in_place = in_place_at_root(sendbuf, me, root)?;
    let sbytes = own_bytes(rt, sendbuf, sendcount, sendtype, in_place, "sendbuf")?;
    // SAFETY: checked non-null and sized by count and datatype.
    let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, sbytes) });
    let v = matches!(layout, Layout::Listed { .. });
    if me != root {
        let st = rt.type_info(sendtype)?;
        let k = (!v).then_some(sendcount.max(0) as usize);
        return rt.with_comm(comm, |eng, c| {
            let c = ctx!(eng, c, name, parts_sig(name, k, &st, Some(root)));
            // `MPI_Gather`: every rank knows the block length, and may
            // choose by it as the root does.
            match k {
                Some(_) => coll::gather::gatherv_uniform(c, send, None, &[], sbytes, root)?,
                None => coll::gather::gatherv(c, send, None, &[], root)?,
            }
            Ok(())
        });
    }
    let rt_info = rt.type_info(recvtype)?;
    let mut blocks = Scratch::new();
    let blocks = blocks.take(layout.len());
    let (base, span) = v_blocks(layout, &rt_info, blocks)?;
    check_buf(recvbuf, span, "recvbuf")?;
    if !in_place {
        check_disjoint(sendbuf, sbytes, at(recvbuf, base), span)?;
    }
    // SAFETY: the receive buffer covers every block (MPI contract), checked
    // non-null, and does not overlap the send buffer.
    let recv = unsafe { ptr::bytes_mut(at(recvbuf, base), span) };
    let k = layout.uniform();
    rt.with_comm(comm, |eng, c| {
        let c = ctx!(eng, c, name, parts_sig(name, k, &rt_info, Some(root)));
        match k {
            Some(_) => {
                let len = blocks.first().map_or(0, |b| b.1);
                coll::gather::gatherv_uniform(c, send, Some(recv), blocks, len, root)?
            }
            None => coll::gather::gatherv(c, send, Some(recv), blocks, root)?,
        }
        Ok(())
    })
}

/// Exports `MPI_Gather`.
#[no_mangle]
pub extern "C" fn MPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Gather(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
    )
}

/// Profiling twin of `MPI_Gather`.
#[no_mangle]
pub extern "C" fn PMPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::gather(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
    ) {
        return rc;
    }
    call("MPI_Gather", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        if me == root {
            count_of(recvcount)?;
        }
        gather_body(
            rt,
            "MPI_Gather",
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            Layout::Uniform {
                n,
                count: recvcount,
            },
            recvtype,
            (me, root),
            comm,
        )
    })
}

/// Exports `MPI_Gatherv`.
#[no_mangle]
pub extern "C" fn MPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Gatherv(
        sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
    )
}

/// Profiling twin of `MPI_Gatherv`.
#[no_mangle]
pub extern "C" fn PMPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::gatherv(
        sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
    ) {
        return rc;
    }
    call("MPI_Gatherv", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        let (counts, displs) = if me == root {
            (
                ptr::array(recvcounts, n, "recvcounts")?.to_vec(),
                ptr::array(displs, n, "displs")?.to_vec(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        gather_body(
            rt,
            "MPI_Gatherv",
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            Layout::Listed {
                counts: &counts,
                displs: &displs,
            },
            recvtype,
            (me, root),
            comm,
        )
    })
}

/// Scatters: `send` (root only) is (pointer, counts, displacements, type).
#[allow(clippy::too_many_arguments)]
fn scatter_body(
    rt: &mut Runtime,
    name: &'static str,
    sendbuf: *const c_void,
    layout: Layout,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    (me, root): (usize, usize),
    comm: MPI_Comm,
) -> MpiResult<()> {
    let in_place = in_place_at_root(recvbuf, me, root)?;
    let rbytes = own_bytes(rt, recvbuf, recvcount, recvtype, in_place, "recvbuf")?;
    let v = matches!(layout, Layout::Listed { .. });
    if me != root {
        let rinfo = rt.type_info(recvtype)?;
        let k = (!v).then_some(recvcount.max(0) as usize);
        // SAFETY: checked non-null and sized by count and datatype.
        let recv = unsafe { ptr::bytes_mut(recvbuf, rbytes) };
        // `MPI_Scatter`'s receivers choose by their block's length, as
        // its root does (`coll::gather::scatter_uniform`).
        return rt.with_comm(comm, |eng, c| {
            let c = ctx!(eng, c, name, parts_sig(name, k, &rinfo, Some(root)));
            Ok(if v {
                coll::gather::scatterv(c, None, &[], Some(recv), root)
            } else {
                coll::gather::scatter_uniform(c, None, &[], rbytes, Some(recv), root)
            }?)
        });
    }
    let st = rt.type_info(sendtype)?;
    let mut blocks = Scratch::new();
    let blocks = blocks.take(layout.len());
    let (base, span) = v_blocks(layout, &st, blocks)?;
    check_buf(sendbuf, span, "sendbuf")?;
    if !in_place {
        check_disjoint(at(sendbuf, base), span, recvbuf, rbytes)?;
    }
    // SAFETY: the send buffer covers every block (MPI contract) and was
    // checked non-null; the receive buffer is checked and disjoint.
    let send = unsafe { ptr::bytes(at(sendbuf, base), span) };
    // SAFETY: as above.
    let recv = (!in_place).then(|| unsafe { ptr::bytes_mut(recvbuf, rbytes) });
    let k = layout.uniform();
    rt.with_comm(comm, |eng, c| {
        let c = ctx!(eng, c, name, parts_sig(name, k, &st, Some(root)));
        Ok(if v {
            coll::gather::scatterv(c, Some(send), blocks, recv, root)
        } else {
            let len = blocks.first().map_or(0, |b| b.1);
            coll::gather::scatter_uniform(c, Some(send), blocks, len, recv, root)
        }?)
    })
}

/// Exports `MPI_Scatter`.
#[no_mangle]
pub extern "C" fn MPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Scatter(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
    )
}

/// Profiling twin of `MPI_Scatter`.
#[no_mangle]
pub extern "C" fn PMPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::scatter(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
    ) {
        return rc;
    }
    call("MPI_Scatter", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        if me == root {
            count_of(sendcount)?;
        }
        scatter_body(
            rt,
            "MPI_Scatter",
            sendbuf,
            Layout::Uniform {
                n,
                count: sendcount,
            },
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            (me, root),
            comm,
        )
    })
}

/// Exports `MPI_Scatterv`.
#[no_mangle]
pub extern "C" fn MPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Scatterv(
        sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
    )
}

/// Profiling twin of `MPI_Scatterv`.
#[no_mangle]
pub extern "C" fn PMPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::scatterv(
        sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
    ) {
        return rc;
    }
    call("MPI_Scatterv", comm, |rt| {
        let (me, n) = rt.size_of(comm)?;
        let root = bad_root(root, n)?;
        let (counts, displs) = if me == root {
            (
                ptr::array(sendcounts, n, "sendcounts")?.to_vec(),
                ptr::array(displs, n, "displs")?.to_vec(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        scatter_body(
            rt,
            "MPI_Scatterv",
            sendbuf,
            Layout::Listed {
                counts: &counts,
                displs: &displs,
            },
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            (me, root),
            comm,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn allgather_body(
    rt: &mut Runtime,
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    layout: Layout,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> MpiResult<()> {
    rt.comm(comm)?;
    let in_place = is_in_place(sendbuf);
    let sbytes = if in_place {
        0
    } else {
        rt.type_info(sendtype)?.bytes(sendcount)?
    };
    let rinfo = rt.type_info(recvtype)?;
    let mut blocks = Scratch::new();
    let blocks = blocks.take(layout.len());
    let (base, span) = v_blocks(layout, &rinfo, blocks)?;
    check_buf(recvbuf, span, "recvbuf")?;
    if !in_place {
        check_buf(sendbuf, sbytes, "sendbuf")?;
        check_disjoint(sendbuf, sbytes, at(recvbuf, base), span)?;
    }
    // SAFETY: checked non-null, sized by counts and datatypes, disjoint.
    let send = (!in_place).then(|| unsafe { ptr::bytes(sendbuf, sbytes) });
    // SAFETY: as above.
    let recv = unsafe { ptr::bytes_mut(at(recvbuf, base), span) };
    rt.with_comm(comm, |eng, c| {
        Ok(coll::allgather::allgatherv(
            ctx!(
                eng,
                c,
                name,
                parts_sig(name, layout.uniform(), &rinfo, None)
            ),
            send,
            recv,
            blocks,
        )?)
    })
}

/// Exports `MPI_Allgather`.
#[no_mangle]
pub extern "C" fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Allgather(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
    )
}

/// Profiling twin of `MPI_Allgather`.
#[no_mangle]
pub extern "C" fn PMPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::allgather(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
    ) {
        return rc;
    }
    call("MPI_Allgather", comm, |rt| {
        let (_, n) = rt.size_of(comm)?;
        count_of(recvcount)?;
        allgather_body(
            rt,
            "MPI_Allgather",
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            Layout::Uniform {
                n,
                count: recvcount,
            },
            recvtype,
            comm,
        )
    })
}

/// Exports `MPI_Allgatherv`.
#[no_mangle]
pub extern "C" fn MPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Allgatherv(
        sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
    )
}

/// Profiling twin of `MPI_Allgatherv`.
#[no_mangle]
pub extern "C" fn PMPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::allgatherv(
        sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
    ) {
        return rc;
    }
    call("MPI_Allgatherv", comm, |rt| {
        let (_, n) = rt.size_of(comm)?;
        let counts = ptr::array(recvcounts, n, "recvcounts")?.to_vec();
        let displs = ptr::array(displs, n, "displs")?.to_vec();
        allgather_body(
            rt,
            "MPI_Allgatherv",
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            Layout::Listed {
                counts: &counts,
                displs: &displs,
            },
            recvtype,
            comm,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn alltoall_body(
    rt: &mut Runtime,
    name: &'static str,
    sendbuf: *const c_void,
    slayout: Layout,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    rlayout: Layout,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> MpiResult<()> {
    rt.comm(comm)?;
    let in_place = is_in_place(sendbuf);
    // `MPI_Alltoall`: one block length on every rank, so every rank may
    // choose the streamed algorithm alike.
    let run = if rlayout.uniform().is_some() {
        coll::alltoall::alltoall
    } else {
        coll::alltoall::alltoallv
    };
    let rinfo = rt.type_info(recvtype)?;
    let mut rblocks = Scratch::new();
    let rblocks = rblocks.take(rlayout.len());
    let (rbase, rspan) = v_blocks(rlayout, &rinfo, rblocks)?;
    check_buf(recvbuf, rspan, "recvbuf")?;
    // SAFETY: the receive buffer covers every block and was checked non-null.
    let recv = unsafe { ptr::bytes_mut(at(recvbuf, rbase), rspan) };
    if in_place {
        // The data to send is what the receive buffer holds now.
        let send = recv.to_vec();
        return rt.with_comm(comm, |eng, c| {
            Ok(run(
                ctx!(
                    eng,
                    c,
                    name,
                    parts_sig(name, rlayout.uniform(), &rinfo, None)
                ),
                &send,
                rblocks,
                recv,
                rblocks,
            )?)
        });
    }
    let sinfo = rt.type_info(sendtype)?;
    let mut sblocks = Scratch::new();
    let sblocks = sblocks.take(slayout.len());
    let (sbase, sspan) = v_blocks(slayout, &sinfo, sblocks)?;
    check_buf(sendbuf, sspan, "sendbuf")?;
    check_disjoint(at(sendbuf, sbase), sspan, at(recvbuf, rbase), rspan)?;
    // SAFETY: the send buffer covers every block, checked non-null, disjoint.
    let send = unsafe { ptr::bytes(at(sendbuf, sbase), sspan) };
    rt.with_comm(comm, |eng, c| {
        Ok(run(
            ctx!(
                eng,
                c,
                name,
                parts_sig(name, rlayout.uniform(), &rinfo, None)
            ),
            send,
            sblocks,
            recv,
            rblocks,
        )?)
    })
}

/// Exports `MPI_Alltoall`.
#[no_mangle]
pub extern "C" fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Alltoall(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
    )
}

/// Profiling twin of `MPI_Alltoall`.
#[no_mangle]
pub extern "C" fn PMPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::alltoall(
        sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
    ) {
        return rc;
    }
    call("MPI_Alltoall", comm, |rt| {
        let (_, n) = rt.size_of(comm)?;
        count_of(recvcount)?;
        if !is_in_place(sendbuf) {
            count_of(sendcount)?;
        }
        alltoall_body(
            rt,
            "MPI_Alltoall",
            sendbuf,
            Layout::Uniform {
                n,
                count: sendcount,
            },
            sendtype,
            recvbuf,
            Layout::Uniform {
                n,
                count: recvcount,
            },
            recvtype,
            comm,
        )
    })
}

/// Exports `MPI_Alltoallv`.
#[no_mangle]
pub extern "C" fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Alltoallv(
        sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
    )
}

/// Profiling twin of `MPI_Alltoallv`.
#[no_mangle]
pub extern "C" fn PMPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = lane::alltoallv(
        sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
    ) {
        return rc;
    }
    call("MPI_Alltoallv", comm, |rt| {
        let (_, n) = rt.size_of(comm)?;
        let rc = ptr::array(recvcounts, n, "recvcounts")?.to_vec();
        let rd = ptr::array(rdispls, n, "rdispls")?.to_vec();
        let (sc, sd) = if is_in_place(sendbuf) {
            (Vec::new(), Vec::new())
        } else {
            (
                ptr::array(sendcounts, n, "sendcounts")?.to_vec(),
                ptr::array(sdispls, n, "sdispls")?.to_vec(),
            )
        };
        alltoall_body(
            rt,
            "MPI_Alltoallv",
            sendbuf,
            Layout::Listed {
                counts: &sc,
                displs: &sd,
            },
            sendtype,
            recvbuf,
            Layout::Listed {
                counts: &rc,
                displs: &rd,
            },
            recvtype,
            comm,
        )
    })
}
