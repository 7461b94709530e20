//! Collective and point-to-point exports: argument checks (handles, types,
//! ops, roots, peers, buffers, in-place layouts, streams), then a `Job` for
//! the group machinery.

#![allow(non_snake_case)]

use super::comm::{shared_of, Shared};
use super::device;
use super::group;
use super::result::{entry, NcclErr, NcclResult};
use super::types::*;
use super::work::{Job, Kind, Red, Scalar};
use crate::dtype::ElemType;
use crate::reduce::Op;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// The element type for an `ncclDataType_t`.
pub fn elem_type(dt: ncclDataTypeArg) -> NcclResult<ElemType> {
    Ok(match dt {
        0 => ElemType::I8,
        1 => ElemType::U8,
        2 => ElemType::I32,
        3 => ElemType::U32,
        4 => ElemType::I64,
        5 => ElemType::U64,
        6 => ElemType::F16,
        7 => ElemType::F32,
        8 => ElemType::F64,
        9 => ElemType::Bf16,
        10 => ElemType::F8E4M3,
        11 => ElemType::F8E5M2,
        _ => return Err(NcclErr::arg(format!("unknown datatype {dt}"))),
    })
}

/// The reduction for an `ncclRedOp_t` on `ty`.
fn reduction(sh: &Shared, op: ncclRedOpArg, ty: ElemType) -> NcclResult<Red> {
    Ok(match op {
        0 => Red::Op(Op::Sum),
        1 => Red::Op(Op::Prod),
        2 => Red::Op(Op::Max),
        3 => Red::Op(Op::Min),
        4 => Red::Avg,
        _ => {
            let ops = sh.redops.lock().unwrap_or_else(|p| p.into_inner());
            let pm = usize::try_from(op - 5)
                .ok()
                .and_then(|i| ops.get(i).cloned().flatten())
                .ok_or_else(|| NcclErr::arg(format!("unknown reduction op {op}")))?;
            if pm.ty != ty {
                return Err(NcclErr::arg(format!(
                    "op {op} was made for {:?} but the call uses {ty:?}",
                    pm.ty
                )));
            }
            Red::PreMul(match pm.scalar {
                Scalar::Value(v) => v,
                // Read on the device path once the stream reaches the call.
                Scalar::At(a) if crate::gpu::is_device_memory(a as *const c_void) => {
                    return Ok(Red::PreMulAt(a))
                }
                // SAFETY: ncclRedOpCreatePreMulSum checked it non-null; the
                // caller keeps it valid while the op exists (NCCL's rule).
                Scalar::At(a) => unsafe {
                    std::slice::from_raw_parts(a as *const u8, ty.size()).to_vec()
                },
            })
        }
    })
}

/// Host mode (host buffers) runs on the calling thread. With a CUDA driver,
/// a call on a stream first waits for the work queued on it (so it sees that
/// work's results; it completes before returning, so later work sees its
/// own). Without one there is no stream to order against, and anything but
/// NULL is refused rather than ignored. Device buffers take the device path.
fn check_stream(stream: cudaStream_t) -> NcclResult<()> {
    if stream.is_null() {
        return Ok(());
    }
    if !crate::gpu::present() {
        return Err(NcclErr::arg(
            "stream must be NULL: no CUDA driver is loaded, and this build runs NCCL \
             calls on host memory, completing them before they return",
        ));
    }
    // SAFETY: NCCL's contract: `stream` is the caller's CUDA stream.
    unsafe { crate::gpu::synchronize(stream.cast()) }.map_err(|e| NcclErr {
        code: ncclResult_t::ncclUnhandledCudaError,
        msg: e,
    })
}

/// Bytes in `count` elements of `ty`, times `blocks`.
fn size(count: usize, ty: ElemType, blocks: usize) -> NcclResult<usize> {
    count
        .checked_mul(ty.extent())
        .and_then(|b| b.checked_mul(blocks))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| NcclErr::arg(format!("count {count} is too large")))
}

/// A significant buffer must be non-null when it holds bytes.
fn need(p: *const c_void, bytes: usize, what: &str) -> NcclResult<usize> {
    if p.is_null() && bytes > 0 {
        return Err(NcclErr::arg(format!("{what} is NULL")));
    }
    Ok(p as usize)
}

/// `a..a+alen` and `b..b+blen` must not overlap unless `b == a + at`
/// (NCCL's in-place layout for this call).
fn apart_or_in_place(a: usize, alen: usize, b: usize, blen: usize, at: usize) -> NcclResult<()> {
    if alen == 0 || blen == 0 || b == a.wrapping_add(at) {
        return Ok(());
    }
    if a < b + blen && b < a + alen {
        return Err(NcclErr::arg(
            "sendbuff and recvbuff overlap without being in place",
        ));
    }
    Ok(())
}

/// What every call checks first: handle, type (the stream is checked once
/// the buffers say which path runs the call).
fn common(comm: ncclComm_t, datatype: ncclDataTypeArg) -> NcclResult<(Arc<Shared>, ElemType)> {
    // SAFETY: shared_of checks the handle.
    let sh = unsafe { shared_of(comm) }?;
    sh.check_open()?;
    let ty = elem_type(datatype)?;
    Ok((sh, ty))
}

/// Picks the path from the buffers (all device memory, or all host memory)
/// and checks the stream for it.
fn place(sh: &Shared, job: &mut Job) -> NcclResult<()> {
    job.device = device::on_device(job, sh.size, sh.rank)?;
    if job.device {
        device::check_stream(job.stream)
    } else {
        check_stream(job.stream as cudaStream_t)
    }
}

fn check_root(root: c_int, n: usize, what: &str) -> NcclResult<usize> {
    usize::try_from(root)
        .ok()
        .filter(|&r| r < n)
        .ok_or_else(|| NcclErr::arg(format!("{what} {root} is out of range for {n} ranks")))
}

/// Checks and submits; an argument error inside a group is also reported
/// again by its `ncclGroupEnd`.
fn issue(name: &'static str, f: impl FnOnce() -> NcclResult<(Arc<Shared>, Job)>) -> ncclResult_t {
    entry(name, || {
        let r = f().and_then(|(sh, mut job)| {
            place(&sh, &mut job)?;
            group::submit(sh, job)
        });
        if let Err(e) = &r {
            group::note_failure(e);
        }
        r
    })
}

fn all_reduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue("ncclAllReduce", || {
        let (sh, ty) = common(comm, datatype)?;
        let b = size(count, ty, 1)?;
        let red = reduction(&sh, op, ty)?;
        let (s, r) = (
            need(sendbuff, b, "sendbuff")?,
            need(recvbuff, b, "recvbuff")?,
        );
        apart_or_in_place(s, b, r, b, 0)?;
        let job = Job {
            name: "ncclAllReduce",
            kind: Kind::AllReduce,
            send: s,
            recv: r,
            count,
            ty,
            red: Some(red),
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

fn reduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue("ncclReduce", || {
        let (sh, ty) = common(comm, datatype)?;
        let b = size(count, ty, 1)?;
        let root = check_root(root, sh.size, "root")?;
        let red = reduction(&sh, op, ty)?;
        let s = need(sendbuff, b, "sendbuff")?;
        let r = if sh.rank == root {
            let r = need(recvbuff, b, "recvbuff")?;
            apart_or_in_place(s, b, r, b, 0)?;
            r
        } else {
            0
        };
        let job = Job {
            name: "ncclReduce",
            kind: Kind::Reduce(root),
            send: s,
            recv: r,
            count,
            ty,
            red: Some(red),
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

fn broadcast(
    name: &'static str,
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue(name, || {
        let (sh, ty) = common(comm, datatype)?;
        let b = size(count, ty, 1)?;
        let root = check_root(root, sh.size, "root")?;
        let r = need(recvbuff, b, "recvbuff")?;
        let s = if sh.rank == root {
            let s = need(sendbuff, b, "sendbuff")?;
            apart_or_in_place(s, b, r, b, 0)?;
            s
        } else {
            r
        };
        let job = Job {
            name,
            kind: Kind::Broadcast(root),
            send: s,
            recv: r,
            count,
            ty,
            red: None,
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

fn reduce_scatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue("ncclReduceScatter", || {
        let (sh, ty) = common(comm, datatype)?;
        let b = size(recvcount, ty, 1)?;
        let total = size(recvcount, ty, sh.size)?;
        let red = reduction(&sh, op, ty)?;
        let (s, r) = (
            need(sendbuff, total, "sendbuff")?,
            need(recvbuff, b, "recvbuff")?,
        );
        apart_or_in_place(s, total, r, b, sh.rank * b)?;
        let job = Job {
            name: "ncclReduceScatter",
            kind: Kind::ReduceScatter,
            send: s,
            recv: r,
            count: recvcount,
            ty,
            red: Some(red),
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

/// AllGather, AlltoAll, Gather and Scatter: `count` elements per block.
fn blocks(
    name: &'static str,
    kind: fn(usize) -> Kind,
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: Option<c_int>,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue(name, || {
        let (sh, ty) = common(comm, datatype)?;
        let (n, me) = (sh.size, sh.rank);
        let b = size(count, ty, 1)?;
        let total = size(count, ty, n)?;
        let root = root.map(|r| check_root(r, n, "root")).transpose()?;
        let k = kind(root.unwrap_or(0));
        let (slen, rlen) = match k {
            Kind::AllGather => (b, total),
            Kind::AlltoAll => (total, total),
            Kind::Gather(r) => (b, if me == r { total } else { 0 }),
            Kind::Scatter(r) => (if me == r { total } else { 0 }, b),
            _ => unreachable!("block collectives only"),
        };
        let (s, r) = (
            need(sendbuff, slen, "sendbuff")?,
            need(recvbuff, rlen, "recvbuff")?,
        );
        match k {
            Kind::AllGather => apart_or_in_place(r, rlen, s, slen, me * b)?,
            Kind::AlltoAll => apart_or_in_place(s, slen, r, rlen, 0)?,
            Kind::Gather(root) => apart_or_in_place(r, rlen, s, slen, root * b)?,
            Kind::Scatter(root) => apart_or_in_place(s, slen, r, rlen, root * b)?,
            _ => {}
        }
        let job = Job {
            name,
            kind: k,
            send: s,
            recv: r,
            count,
            ty,
            red: None,
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

fn p2p(
    name: &'static str,
    buff: *const c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    issue(name, || {
        let (sh, ty) = common(comm, datatype)?;
        let b = size(count, ty, 1)?;
        let peer = check_root(peer, sh.size, "peer")?;
        let p = need(
            buff,
            b,
            if name == "ncclSend" {
                "sendbuff"
            } else {
                "recvbuff"
            },
        )?;
        let (kind, send, recv) = if name == "ncclSend" {
            (Kind::Send(peer), p, 0)
        } else {
            (Kind::Recv(peer), 0, p)
        };
        let job = Job {
            name,
            kind,
            send,
            recv,
            count,
            ty,
            red: None,
            stream: stream as usize,
            device: false,
        };
        Ok((sh, job))
    })
}

/// Exports `ncclAllReduce`.
#[no_mangle]
pub extern "C" fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream)
}

/// Profiling twin of `ncclAllReduce`.
#[no_mangle]
pub extern "C" fn pncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream)
}

/// Exports `ncclAllReduceConfig`.
#[no_mangle]
pub extern "C" fn ncclAllReduceConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclAllReduceConfig(
        sendbuff, recvbuff, count, datatype, op, comm, stream, config,
    )
}

/// Profiling twin of `ncclAllReduceConfig` (the per-call config holds
/// tuning hints for GPU kernels, which host mode has none of).
#[no_mangle]
pub extern "C" fn pncclAllReduceConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream)
}

/// Exports `ncclReduce`.
#[no_mangle]
pub extern "C" fn ncclReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream)
}

/// Profiling twin of `ncclReduce`.
#[no_mangle]
pub extern "C" fn pncclReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream)
}

/// Exports `ncclReduceConfig`.
#[no_mangle]
pub extern "C" fn ncclReduceConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclReduceConfig(
        sendbuff, recvbuff, count, datatype, op, root, comm, stream, config,
    )
}

/// Profiling twin of `ncclReduceConfig`.
#[no_mangle]
pub extern "C" fn pncclReduceConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream)
}

/// Exports `ncclBcast` (in place at every rank).
#[no_mangle]
pub extern "C" fn ncclBcast(
    buff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclBcast(buff, count, datatype, root, comm, stream)
}

/// Profiling twin of `ncclBcast`.
#[no_mangle]
pub extern "C" fn pncclBcast(
    buff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    broadcast("ncclBcast", buff, buff, count, datatype, root, comm, stream)
}

/// Exports `ncclBroadcast`.
#[no_mangle]
pub extern "C" fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream)
}

/// Profiling twin of `ncclBroadcast`.
#[no_mangle]
pub extern "C" fn pncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    broadcast(
        "ncclBroadcast",
        sendbuff,
        recvbuff,
        count,
        datatype,
        root,
        comm,
        stream,
    )
}

/// Exports `ncclBroadcastConfig`.
#[no_mangle]
pub extern "C" fn ncclBroadcastConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclBroadcastConfig(
        sendbuff, recvbuff, count, datatype, root, comm, stream, config,
    )
}

/// Profiling twin of `ncclBroadcastConfig`.
#[no_mangle]
pub extern "C" fn pncclBroadcastConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    broadcast(
        "ncclBroadcast",
        sendbuff,
        recvbuff,
        count,
        datatype,
        root,
        comm,
        stream,
    )
}

/// Exports `ncclReduceScatter`.
#[no_mangle]
pub extern "C" fn ncclReduceScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
}

/// Profiling twin of `ncclReduceScatter`.
#[no_mangle]
pub extern "C" fn pncclReduceScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
}

/// Exports `ncclReduceScatterConfig`.
#[no_mangle]
pub extern "C" fn ncclReduceScatterConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclReduceScatterConfig(
        sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config,
    )
}

/// Profiling twin of `ncclReduceScatterConfig`.
#[no_mangle]
pub extern "C" fn pncclReduceScatterConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataTypeArg,
    op: ncclRedOpArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
}

/// Exports `ncclAllGather`.
#[no_mangle]
pub extern "C" fn ncclAllGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream)
}

/// Profiling twin of `ncclAllGather`.
#[no_mangle]
pub extern "C" fn pncclAllGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    let k = |_| Kind::AllGather;
    blocks(
        "ncclAllGather",
        k,
        sendbuff,
        recvbuff,
        sendcount,
        datatype,
        None,
        comm,
        stream,
    )
}

/// Exports `ncclAllGatherConfig`.
#[no_mangle]
pub extern "C" fn ncclAllGatherConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclAllGatherConfig(
        sendbuff, recvbuff, sendcount, datatype, comm, stream, config,
    )
}

/// Profiling twin of `ncclAllGatherConfig`.
#[no_mangle]
pub extern "C" fn pncclAllGatherConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream)
}

/// Exports `ncclAlltoAll`.
#[no_mangle]
pub extern "C" fn ncclAlltoAll(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream)
}

/// Profiling twin of `ncclAlltoAll`.
#[no_mangle]
pub extern "C" fn pncclAlltoAll(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    let k = |_| Kind::AlltoAll;
    blocks(
        "ncclAlltoAll",
        k,
        sendbuff,
        recvbuff,
        count,
        datatype,
        None,
        comm,
        stream,
    )
}

/// Exports `ncclAlltoAllConfig`.
#[no_mangle]
pub extern "C" fn ncclAlltoAllConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclAlltoAllConfig(sendbuff, recvbuff, count, datatype, comm, stream, config)
}

/// Profiling twin of `ncclAlltoAllConfig`.
#[no_mangle]
pub extern "C" fn pncclAlltoAllConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream)
}

/// Exports `ncclGather`.
#[no_mangle]
pub extern "C" fn ncclGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream)
}

/// Profiling twin of `ncclGather`.
#[no_mangle]
pub extern "C" fn pncclGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    let (s, r, k) = (sendbuff, recvbuff, Kind::Gather);
    blocks(
        "ncclGather",
        k,
        s,
        r,
        count,
        datatype,
        Some(root),
        comm,
        stream,
    )
}

/// Exports `ncclGatherConfig`.
#[no_mangle]
pub extern "C" fn ncclGatherConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclGatherConfig(
        sendbuff, recvbuff, count, datatype, root, comm, stream, config,
    )
}

/// Profiling twin of `ncclGatherConfig`.
#[no_mangle]
pub extern "C" fn pncclGatherConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream)
}

/// Exports `ncclScatter`.
#[no_mangle]
pub extern "C" fn ncclScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream)
}

/// Profiling twin of `ncclScatter`.
#[no_mangle]
pub extern "C" fn pncclScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    let (s, r, k) = (sendbuff, recvbuff, Kind::Scatter);
    blocks(
        "ncclScatter",
        k,
        s,
        r,
        count,
        datatype,
        Some(root),
        comm,
        stream,
    )
}

/// Exports `ncclScatterConfig`.
#[no_mangle]
pub extern "C" fn ncclScatterConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclScatterConfig(
        sendbuff, recvbuff, count, datatype, root, comm, stream, config,
    )
}

/// Profiling twin of `ncclScatterConfig`.
#[no_mangle]
pub extern "C" fn pncclScatterConfig(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
    _config: *const ncclCollConfig_t,
) -> ncclResult_t {
    pncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream)
}

/// Exports `ncclSend`.
#[no_mangle]
pub extern "C" fn ncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclSend(sendbuff, count, datatype, peer, comm, stream)
}

/// Profiling twin of `ncclSend`.
#[no_mangle]
pub extern "C" fn pncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    p2p("ncclSend", sendbuff, count, datatype, peer, comm, stream)
}

/// Exports `ncclRecv`.
#[no_mangle]
pub extern "C" fn ncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclRecv(recvbuff, count, datatype, peer, comm, stream)
}

/// Profiling twin of `ncclRecv`.
#[no_mangle]
pub extern "C" fn pncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    p2p("ncclRecv", recvbuff, count, datatype, peer, comm, stream)
}
