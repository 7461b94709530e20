//! Exports that make, query and end communicators, plus version, unique
//! id, error texts and groups.

#![allow(non_snake_case)]

use super::comm::{new_handle, retire, settings, shared_of, Settings, Shared};
use super::group::{self, Setup};
use super::result::{describe, entry, last, set_last, NcclErr, NcclResult};
use super::types::*;
use crate::bootstrap::unique_id::{self, UniqueId, ID_BYTES};
use crate::coll::{self, Ctx};
use std::os::raw::{c_char, c_int};
use std::sync::Arc;

fn id_bytes(id: &ncclUniqueId) -> [u8; ID_BYTES] {
    let mut b = [0u8; ID_BYTES];
    for (o, &c) in b.iter_mut().zip(id.internal.iter()) {
        // `c_char` is i8 on x86-64 and u8 on aarch64.
        *o = c.to_ne_bytes()[0];
    }
    b
}

fn decode_id(id: &ncclUniqueId) -> NcclResult<UniqueId> {
    UniqueId::from_bytes(&id_bytes(id)).map_err(NcclErr::from)
}

/// Starts setting up `shared` with `id`: queued inside a group, inline when
/// blocking, on a thread otherwise (`ncclInProgress`).
fn start_set_up(shared: Arc<Shared>, id: UniqueId) -> NcclResult<()> {
    if group::in_group() {
        group::defer_setup(Setup { shared, id });
        return Ok(());
    }
    if shared.settings.blocking {
        return shared.set_up(&id);
    }
    group::set_up_in_background(vec![Setup { shared, id }])
}

fn check_rank(nranks: c_int, rank: c_int) -> NcclResult<(usize, usize)> {
    if nranks < 1 {
        return Err(NcclErr::arg(format!("nranks {nranks} must be at least 1")));
    }
    if rank < 0 || rank >= nranks {
        return Err(NcclErr::arg(format!(
            "rank {rank} is out of range for {nranks} ranks"
        )));
    }
    Ok((rank as usize, nranks as usize))
}

fn init_rank(
    out: *mut ncclComm_t,
    nranks: c_int,
    id: &ncclUniqueId,
    rank: c_int,
    cfg: *const ncclConfig_t,
) -> NcclResult<()> {
    if out.is_null() {
        return Err(NcclErr::arg("comm (the output pointer) is NULL"));
    }
    let (rank, size) = check_rank(nranks, rank)?;
    // SAFETY: NCCL's contract: a config from NCCL_CONFIG_INITIALIZER or NULL.
    let s = unsafe { settings(cfg) }?;
    let uid = decode_id(id)?;
    let shared = Shared::pending(rank, size, crate::gpu::current_device().unwrap_or(0), s);
    // SAFETY: checked non-null; the caller passes room for one handle.
    unsafe { *out = new_handle(shared.clone()) };
    start_set_up(shared, uid)
}

/// Exports `ncclGetVersion`.
#[no_mangle]
pub extern "C" fn ncclGetVersion(version: *mut c_int) -> ncclResult_t {
    pncclGetVersion(version)
}

/// Profiling twin of `ncclGetVersion`.
#[no_mangle]
pub extern "C" fn pncclGetVersion(version: *mut c_int) -> ncclResult_t {
    entry("ncclGetVersion", || {
        if version.is_null() {
            return Err(NcclErr::arg("version is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *version = NCCL_VERSION_CODE };
        Ok(())
    })
}

/// Exports `ncclGetUniqueId`.
#[no_mangle]
pub extern "C" fn ncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t {
    pncclGetUniqueId(uniqueId)
}

/// Profiling twin of `ncclGetUniqueId`.
#[no_mangle]
pub extern "C" fn pncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t {
    entry("ncclGetUniqueId", || {
        if uniqueId.is_null() {
            return Err(NcclErr::arg("uniqueId is NULL"));
        }
        let b = unique_id::make()?.to_bytes();
        let mut id = ncclUniqueId {
            internal: [0; NCCL_UNIQUE_ID_BYTES],
        };
        for (o, &x) in id.internal.iter_mut().zip(b.iter()) {
            *o = x as c_char;
        }
        // SAFETY: checked non-null; may be unaligned inside a caller's buffer.
        unsafe { std::ptr::write_unaligned(uniqueId, id) };
        Ok(())
    })
}

/// Exports `ncclCommInitRank`.
#[no_mangle]
pub extern "C" fn ncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    pncclCommInitRank(comm, nranks, commId, rank)
}

/// Profiling twin of `ncclCommInitRank`.
#[no_mangle]
pub extern "C" fn pncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    entry("ncclCommInitRank", || {
        init_rank(comm, nranks, &commId, rank, std::ptr::null())
    })
}

/// Exports `ncclCommInitRankConfig`.
#[no_mangle]
pub extern "C" fn ncclCommInitRankConfig(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    pncclCommInitRankConfig(comm, nranks, commId, rank, config)
}

/// Profiling twin of `ncclCommInitRankConfig`.
#[no_mangle]
pub extern "C" fn pncclCommInitRankConfig(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    entry("ncclCommInitRankConfig", || {
        init_rank(comm, nranks, &commId, rank, config)
    })
}

/// Exports `ncclCommInitRankScalable`.
#[no_mangle]
pub extern "C" fn ncclCommInitRankScalable(
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    myrank: c_int,
    nId: c_int,
    commIds: *mut ncclUniqueId,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    pncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config)
}

/// Profiling twin of `ncclCommInitRankScalable`. Every rank meets at the
/// first id's store; the others are accepted and not needed.
#[no_mangle]
pub extern "C" fn pncclCommInitRankScalable(
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    myrank: c_int,
    nId: c_int,
    commIds: *mut ncclUniqueId,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    entry("ncclCommInitRankScalable", || {
        if nId < 1 || commIds.is_null() {
            return Err(NcclErr::arg("commIds must hold at least one id (nId >= 1)"));
        }
        // SAFETY: checked non-null; the caller passes nId >= 1 ids.
        let first = unsafe { std::ptr::read_unaligned(commIds) };
        init_rank(newcomm, nranks, &first, myrank, config)
    })
}

/// Exports `ncclCommInitAll`.
#[no_mangle]
pub extern "C" fn ncclCommInitAll(
    comm: *mut ncclComm_t,
    ndev: c_int,
    devlist: *const c_int,
) -> ncclResult_t {
    pncclCommInitAll(comm, ndev, devlist)
}

/// Profiling twin of `ncclCommInitAll`: `ndev` ranks in this process, set
/// up together (one thread each while they meet).
#[no_mangle]
pub extern "C" fn pncclCommInitAll(
    comm: *mut ncclComm_t,
    ndev: c_int,
    devlist: *const c_int,
) -> ncclResult_t {
    entry("ncclCommInitAll", || {
        if comm.is_null() {
            return Err(NcclErr::arg("comm (the output array) is NULL"));
        }
        if ndev < 1 {
            return Err(NcclErr::arg(format!("ndev {ndev} must be at least 1")));
        }
        let n = ndev as usize;
        let devs: Vec<c_int> = if devlist.is_null() {
            (0..ndev).collect()
        } else {
            // SAFETY: a non-null devlist holds ndev entries (NCCL's contract).
            unsafe { std::slice::from_raw_parts(devlist, n) }.to_vec()
        };
        // Host mode has no device count to check against; a negative
        // index is no device anywhere.
        if let Some(d) = devs.iter().find(|&&d| d < 0) {
            return Err(NcclErr::arg(format!("devlist names device {d}")));
        }
        let id = unique_id::make()?;
        let all: Vec<Arc<Shared>> = devs
            .iter()
            .enumerate()
            .map(|(i, &dev)| Shared::pending(i, n, dev, Settings::default()))
            .collect();
        let setups: Vec<Setup> = all
            .iter()
            .map(|sh| Setup {
                shared: sh.clone(),
                id: id.clone(),
            })
            .collect();
        if let Err(e) = group::set_up_all(&setups) {
            for sh in &all {
                sh.destroy();
            }
            return Err(e);
        }
        for (i, sh) in all.into_iter().enumerate() {
            // SAFETY: checked non-null; the caller passes room for ndev handles.
            unsafe { *comm.add(i) = new_handle(sh) };
        }
        Ok(())
    })
}

/// The split's outcome for this rank: (rank, size, id) of its new
/// communicator, or `None` for `NCCL_SPLIT_NOCOLOR`.
fn split_plan(
    core: &mut super::comm::Core,
    color: c_int,
    key: c_int,
) -> NcclResult<Option<(usize, usize, UniqueId)>> {
    let (n, me) = (core.comm.size(), core.comm.rank());
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_ne_bytes());
    mine[4..].copy_from_slice(&key.to_ne_bytes());
    let mut all = vec![0u8; 8 * n];
    let blocks: Vec<(usize, usize)> = (0..n).map(|r| (8 * r, 8)).collect();
    fn ctx(core: &mut super::comm::Core) -> Ctx<'_> {
        Ctx::new(&mut core.eng, &mut core.comm).named("ncclCommSplit")
    }
    coll::allgather::allgatherv(&mut ctx(core), Some(&mine), &mut all, &blocks)?;
    let field = |r: usize, i: usize| {
        c_int::from_ne_bytes(all[8 * r + 4 * i..8 * r + 4 * i + 4].try_into().expect("4"))
    };
    let mut part: Vec<(c_int, usize)> = (0..n)
        .filter(|&r| color != NCCL_SPLIT_NOCOLOR && field(r, 0) == color)
        .map(|r| (field(r, 1), r))
        .collect();
    part.sort_unstable();
    let leader = part.first().map(|p| p.1);
    let mut id = [0u8; ID_BYTES];
    if leader == Some(me) {
        id = unique_id::make()?.to_bytes();
    }
    let mut ids = vec![0u8; ID_BYTES * n];
    let blocks: Vec<(usize, usize)> = (0..n).map(|r| (ID_BYTES * r, ID_BYTES)).collect();
    coll::allgather::allgatherv(&mut ctx(core), Some(&id), &mut ids, &blocks)?;
    let Some(leader) = leader else {
        return Ok(None);
    };
    let theirs: [u8; ID_BYTES] = ids[ID_BYTES * leader..ID_BYTES * (leader + 1)]
        .try_into()
        .expect("an id");
    let rank = part.iter().position(|p| p.1 == me).expect("a member");
    Ok(Some((rank, part.len(), UniqueId::from_bytes(&theirs)?)))
}

/// Exports `ncclCommSplit`.
#[no_mangle]
pub extern "C" fn ncclCommSplit(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    pncclCommSplit(comm, color, key, newcomm, config)
}

/// Profiling twin of `ncclCommSplit`: collective over `comm`; ranks of one
/// colour form a communicator ordered by (key, old rank).
#[no_mangle]
pub extern "C" fn pncclCommSplit(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    entry("ncclCommSplit", || {
        // SAFETY: shared_of checks the handle.
        let parent = unsafe { shared_of(comm) }?;
        parent.check_open()?;
        if newcomm.is_null() {
            return Err(NcclErr::arg("newcomm is NULL"));
        }
        if color < 0 && color != NCCL_SPLIT_NOCOLOR {
            return Err(NcclErr::arg(format!(
                "color {color} must be non-negative or NCCL_SPLIT_NOCOLOR"
            )));
        }
        if group::in_group() {
            return Err(NcclErr::usage(
                "ncclCommSplit inside ncclGroupStart/End is not supported by ferrocoll",
            ));
        }
        let s = if config.is_null() {
            parent.settings
        } else {
            // SAFETY: a config from NCCL_CONFIG_INITIALIZER.
            unsafe { settings(config) }?
        };
        let plan = parent.with_core(|core| split_plan(core, color, key))?;
        let Some((rank, size, id)) = plan else {
            // SAFETY: checked non-null.
            unsafe { *newcomm = std::ptr::null_mut() };
            return Ok(());
        };
        let shared = Shared::pending(rank, size, parent.device, s);
        // SAFETY: checked non-null.
        unsafe { *newcomm = new_handle(shared.clone()) };
        start_set_up(shared, id)
    })
}

/// Exports `ncclCommFinalize`.
#[no_mangle]
pub extern "C" fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    pncclCommFinalize(comm)
}

/// Profiling twin of `ncclCommFinalize`: host-mode operations complete
/// before their calls return, so nothing is left to flush.
#[no_mangle]
pub extern "C" fn pncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    entry("ncclCommFinalize", || {
        if comm.is_null() {
            // NVIDIA's library accepts finalizing NULL.
            return Ok(());
        }
        // SAFETY: shared_of checks the handle.
        let sh = unsafe { shared_of(comm) }?;
        if let Err(e) = sh.async_error() {
            if e.code == ncclResult_t::ncclInProgress {
                return Err(e);
            }
        }
        if sh.finalized.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(NcclErr::arg("comm was already finalized"));
        }
        Ok(())
    })
}

/// Retires a handle and ends its communicator with `end` (NULL is
/// accepted, as NCCL does for destroy and abort).
fn end_handle(comm: ncclComm_t, end: fn(&Shared)) -> NcclResult<()> {
    if comm.is_null() {
        return Ok(());
    }
    // SAFETY: shared_of checks the handle; retire follows that live check.
    let sh = unsafe { shared_of(comm) }?;
    unsafe { retire(comm) };
    end(&sh);
    Ok(())
}

/// Exports `ncclCommDestroy`.
#[no_mangle]
pub extern "C" fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    pncclCommDestroy(comm)
}

/// Profiling twin of `ncclCommDestroy`.
#[no_mangle]
pub extern "C" fn pncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    entry("ncclCommDestroy", || end_handle(comm, Shared::destroy))
}

/// Exports `ncclCommAbort`.
#[no_mangle]
pub extern "C" fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    pncclCommAbort(comm)
}

/// Profiling twin of `ncclCommAbort`: returns promptly even while a peer
/// hangs; a call blocked on another thread fails within about 50 ms.
#[no_mangle]
pub extern "C" fn pncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    entry("ncclCommAbort", || end_handle(comm, Shared::abort))
}

fn query(
    name: &'static str,
    comm: ncclComm_t,
    out: *mut c_int,
    f: fn(&Shared) -> c_int,
) -> ncclResult_t {
    entry(name, || {
        // SAFETY: shared_of checks the handle.
        let sh = unsafe { shared_of(comm) }?;
        if out.is_null() {
            return Err(NcclErr::arg("the output pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *out = f(&sh) };
        Ok(())
    })
}

/// Exports `ncclCommCount`.
#[no_mangle]
pub extern "C" fn ncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t {
    pncclCommCount(comm, count)
}

/// Profiling twin of `ncclCommCount`.
#[no_mangle]
pub extern "C" fn pncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t {
    query("ncclCommCount", comm, count, |s| s.size as c_int)
}

/// Exports `ncclCommCuDevice`.
#[no_mangle]
pub extern "C" fn ncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t {
    pncclCommCuDevice(comm, device)
}

/// Profiling twin of `ncclCommCuDevice` (host mode: the device index the
/// communicator was made for, 0 unless `ncclCommInitAll` named one).
#[no_mangle]
pub extern "C" fn pncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t {
    query("ncclCommCuDevice", comm, device, |s| s.device)
}

/// Exports `ncclCommUserRank`.
#[no_mangle]
pub extern "C" fn ncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t {
    pncclCommUserRank(comm, rank)
}

/// Profiling twin of `ncclCommUserRank`.
#[no_mangle]
pub extern "C" fn pncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t {
    query("ncclCommUserRank", comm, rank, |s| s.rank as c_int)
}

/// Exports `ncclCommGetAsyncError`.
#[no_mangle]
pub extern "C" fn ncclCommGetAsyncError(
    comm: ncclComm_t,
    asyncError: *mut ncclResult_t,
) -> ncclResult_t {
    pncclCommGetAsyncError(comm, asyncError)
}

/// Profiling twin of `ncclCommGetAsyncError`: `ncclInProgress` while a
/// non-blocking set-up runs, then its outcome or the first failed call's.
#[no_mangle]
pub extern "C" fn pncclCommGetAsyncError(
    comm: ncclComm_t,
    asyncError: *mut ncclResult_t,
) -> ncclResult_t {
    entry("ncclCommGetAsyncError", || {
        // SAFETY: shared_of checks the handle.
        let sh = unsafe { shared_of(comm) }?;
        if asyncError.is_null() {
            return Err(NcclErr::arg("asyncError is NULL"));
        }
        let code = match sh.async_error() {
            Ok(()) => ncclResult_t::ncclSuccess,
            Err(e) => {
                if e.code != ncclResult_t::ncclInProgress {
                    set_last(&e.msg);
                }
                e.code
            }
        };
        // SAFETY: checked non-null.
        unsafe { *asyncError = code };
        Ok(())
    })
}

/// Exports `ncclGetErrorString`.
#[no_mangle]
pub extern "C" fn ncclGetErrorString(result: ncclResultArg) -> *const c_char {
    pncclGetErrorString(result)
}

/// Profiling twin of `ncclGetErrorString`.
#[no_mangle]
pub extern "C" fn pncclGetErrorString(result: ncclResultArg) -> *const c_char {
    describe(result).as_ptr()
}

/// Exports `ncclGetLastError`.
#[no_mangle]
pub extern "C" fn ncclGetLastError(comm: ncclComm_t) -> *const c_char {
    pncclGetLastError(comm)
}

/// Profiling twin of `ncclGetLastError`: the calling thread's last error
/// (`comm` may be NULL and is not used, as in NCCL).
#[no_mangle]
pub extern "C" fn pncclGetLastError(_comm: ncclComm_t) -> *const c_char {
    last()
}

/// Exports `ncclGroupStart`.
#[no_mangle]
pub extern "C" fn ncclGroupStart() -> ncclResult_t {
    pncclGroupStart()
}

/// Profiling twin of `ncclGroupStart`.
#[no_mangle]
pub extern "C" fn pncclGroupStart() -> ncclResult_t {
    entry("ncclGroupStart", || {
        group::start();
        Ok(())
    })
}

/// Exports `ncclGroupEnd`.
#[no_mangle]
pub extern "C" fn ncclGroupEnd() -> ncclResult_t {
    pncclGroupEnd()
}

/// Profiling twin of `ncclGroupEnd`.
#[no_mangle]
pub extern "C" fn pncclGroupEnd() -> ncclResult_t {
    entry("ncclGroupEnd", group::end)
}
