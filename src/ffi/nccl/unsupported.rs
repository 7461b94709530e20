//! Names of NVIDIA's `nccl.h` that ferrocoll exports so programs linked
//! against the full library load, but does not implement: each returns
//! `ncclInvalidUsage`, and `ncclGetLastError` names the feature.

#![allow(non_snake_case, unused_variables)]

use super::result::{entry, NcclErr};
use super::types::*;
use std::os::raw::{c_char, c_int, c_uint, c_void};

fn unsupported(name: &'static str, what: &str) -> ncclResult_t {
    entry(name, || {
        Err(NcclErr::usage(format!(
            "{what} is not supported by ferrocoll"
        )))
    })
}

/// Exports `ncclCommRevoke` (unsupported: revoking a communicator).
#[no_mangle]
pub extern "C" fn ncclCommRevoke(comm: ncclComm_t, revokeFlags: c_int) -> ncclResult_t {
    pncclCommRevoke(comm, revokeFlags)
}

/// Profiling twin of `ncclCommRevoke`.
#[no_mangle]
pub extern "C" fn pncclCommRevoke(comm: ncclComm_t, revokeFlags: c_int) -> ncclResult_t {
    unsupported("ncclCommRevoke", "revoking a communicator")
}

/// Exports `ncclCommShrink` (unsupported: shrinking a communicator).
#[no_mangle]
pub extern "C" fn ncclCommShrink(
    comm: ncclComm_t,
    excludeRanksList: *mut c_int,
    excludeRanksCount: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
    shrinkFlags: c_int,
) -> ncclResult_t {
    pncclCommShrink(
        comm,
        excludeRanksList,
        excludeRanksCount,
        newcomm,
        config,
        shrinkFlags,
    )
}

/// Profiling twin of `ncclCommShrink`.
#[no_mangle]
pub extern "C" fn pncclCommShrink(
    comm: ncclComm_t,
    excludeRanksList: *mut c_int,
    excludeRanksCount: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
    shrinkFlags: c_int,
) -> ncclResult_t {
    unsupported(
        "ncclCommShrink",
        "shrinking a communicator (use ncclCommSplit, or ncclCommInitRank among the survivors)",
    )
}

/// Exports `ncclCommGetUniqueId` (unsupported: unique ids for ncclCommGrow).
#[no_mangle]
pub extern "C" fn ncclCommGetUniqueId(
    comm: ncclComm_t,
    uniqueId: *mut ncclUniqueId,
) -> ncclResult_t {
    pncclCommGetUniqueId(comm, uniqueId)
}

/// Profiling twin of `ncclCommGetUniqueId`.
#[no_mangle]
pub extern "C" fn pncclCommGetUniqueId(
    comm: ncclComm_t,
    uniqueId: *mut ncclUniqueId,
) -> ncclResult_t {
    unsupported("ncclCommGetUniqueId", "unique ids for ncclCommGrow")
}

/// Exports `ncclCommGrow` (unsupported: growing a communicator).
#[no_mangle]
pub extern "C" fn ncclCommGrow(
    comm: ncclComm_t,
    nRanks: c_int,
    uniqueId: *const ncclUniqueId,
    rank: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    pncclCommGrow(comm, nRanks, uniqueId, rank, newcomm, config)
}

/// Profiling twin of `ncclCommGrow`.
#[no_mangle]
pub extern "C" fn pncclCommGrow(
    comm: ncclComm_t,
    nRanks: c_int,
    uniqueId: *const ncclUniqueId,
    rank: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    unsupported("ncclCommGrow", "growing a communicator")
}

/// Exports `ncclCommSuspend` (unsupported: suspending a communicator).
#[no_mangle]
pub extern "C" fn ncclCommSuspend(comm: ncclComm_t, flags: c_int) -> ncclResult_t {
    pncclCommSuspend(comm, flags)
}

/// Profiling twin of `ncclCommSuspend`.
#[no_mangle]
pub extern "C" fn pncclCommSuspend(comm: ncclComm_t, flags: c_int) -> ncclResult_t {
    unsupported("ncclCommSuspend", "suspending a communicator")
}

/// Exports `ncclCommResume` (unsupported: resuming a communicator).
#[no_mangle]
pub extern "C" fn ncclCommResume(comm: ncclComm_t) -> ncclResult_t {
    pncclCommResume(comm)
}

/// Profiling twin of `ncclCommResume`.
#[no_mangle]
pub extern "C" fn pncclCommResume(comm: ncclComm_t) -> ncclResult_t {
    unsupported("ncclCommResume", "resuming a communicator")
}

/// Exports `ncclCommWindowRegister` (unsupported: symmetric memory windows).
#[no_mangle]
pub extern "C" fn ncclCommWindowRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    win: *mut ncclWindow_t,
    winFlags: c_int,
) -> ncclResult_t {
    pncclCommWindowRegister(comm, buff, size, win, winFlags)
}

/// Profiling twin of `ncclCommWindowRegister`.
#[no_mangle]
pub extern "C" fn pncclCommWindowRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    win: *mut ncclWindow_t,
    winFlags: c_int,
) -> ncclResult_t {
    unsupported("ncclCommWindowRegister", "symmetric memory windows")
}

/// Exports `ncclCommWindowDeregister` (unsupported: symmetric memory windows).
#[no_mangle]
pub extern "C" fn ncclCommWindowDeregister(comm: ncclComm_t, win: ncclWindow_t) -> ncclResult_t {
    pncclCommWindowDeregister(comm, win)
}

/// Profiling twin of `ncclCommWindowDeregister`.
#[no_mangle]
pub extern "C" fn pncclCommWindowDeregister(comm: ncclComm_t, win: ncclWindow_t) -> ncclResult_t {
    unsupported("ncclCommWindowDeregister", "symmetric memory windows")
}

/// Exports `ncclWinGetUserPtr` (unsupported: symmetric memory windows).
#[no_mangle]
pub extern "C" fn ncclWinGetUserPtr(
    comm: ncclComm_t,
    win: ncclWindow_t,
    outUserPtr: *mut *mut c_void,
) -> ncclResult_t {
    pncclWinGetUserPtr(comm, win, outUserPtr)
}

/// Profiling twin of `ncclWinGetUserPtr`.
#[no_mangle]
pub extern "C" fn pncclWinGetUserPtr(
    comm: ncclComm_t,
    win: ncclWindow_t,
    outUserPtr: *mut *mut c_void,
) -> ncclResult_t {
    unsupported("ncclWinGetUserPtr", "symmetric memory windows")
}

/// Exports `ncclPutSignal` (unsupported: one-sided put with signal).
#[no_mangle]
pub extern "C" fn ncclPutSignal(
    localbuff: *const c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    peerWin: ncclWindow_t,
    peerWinOffset: usize,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclPutSignal(
        localbuff,
        count,
        datatype,
        peer,
        peerWin,
        peerWinOffset,
        sigIdx,
        ctx,
        flags,
        comm,
        stream,
    )
}

/// Profiling twin of `ncclPutSignal`.
#[no_mangle]
pub extern "C" fn pncclPutSignal(
    localbuff: *const c_void,
    count: usize,
    datatype: ncclDataTypeArg,
    peer: c_int,
    peerWin: ncclWindow_t,
    peerWinOffset: usize,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    unsupported("ncclPutSignal", "one-sided put with signal")
}

/// Exports `ncclSignal` (unsupported: one-sided signals).
#[no_mangle]
pub extern "C" fn ncclSignal(
    peer: c_int,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclSignal(peer, sigIdx, ctx, flags, comm, stream)
}

/// Profiling twin of `ncclSignal`.
#[no_mangle]
pub extern "C" fn pncclSignal(
    peer: c_int,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    unsupported("ncclSignal", "one-sided signals")
}

/// Exports `ncclWaitSignal` (unsupported: one-sided signals).
#[no_mangle]
pub extern "C" fn ncclWaitSignal(
    nDesc: c_int,
    signalDescs: *mut ncclWaitSignalDesc_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    pncclWaitSignal(nDesc, signalDescs, comm, stream)
}

/// Profiling twin of `ncclWaitSignal`.
#[no_mangle]
pub extern "C" fn pncclWaitSignal(
    nDesc: c_int,
    signalDescs: *mut ncclWaitSignalDesc_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    unsupported("ncclWaitSignal", "one-sided signals")
}

/// Exports `ncclGroupSimulateEnd` (unsupported: group simulation).
#[no_mangle]
pub extern "C" fn ncclGroupSimulateEnd(simInfo: *mut ncclSimInfo_t) -> ncclResult_t {
    pncclGroupSimulateEnd(simInfo)
}

/// Profiling twin of `ncclGroupSimulateEnd`.
#[no_mangle]
pub extern "C" fn pncclGroupSimulateEnd(simInfo: *mut ncclSimInfo_t) -> ncclResult_t {
    unsupported("ncclGroupSimulateEnd", "group simulation")
}

/// Exports `ncclSetEncryption` (unsupported: NCCL's encryption settings).
#[no_mangle]
pub extern "C" fn ncclSetEncryption(config: *const ncclEncryptionConfig_t) -> ncclResult_t {
    pncclSetEncryption(config)
}

/// Profiling twin of `ncclSetEncryption`.
#[no_mangle]
pub extern "C" fn pncclSetEncryption(config: *const ncclEncryptionConfig_t) -> ncclResult_t {
    unsupported("ncclSetEncryption", "NCCL's encryption settings (ferrocoll authenticates every connection with the job secret instead)")
}

/// Exports `ncclParamBind` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamBind(out: *mut ncclParamHandle_t, key: *const c_char) -> ncclResult_t {
    pncclParamBind(out, key)
}

/// Profiling twin of `ncclParamBind`.
#[no_mangle]
pub extern "C" fn pncclParamBind(out: *mut ncclParamHandle_t, key: *const c_char) -> ncclResult_t {
    unsupported("ncclParamBind", "the parameter API")
}

/// Exports `ncclParamGetI8` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetI8(h: ncclParamHandle_t, out: *mut i8) -> ncclResult_t {
    pncclParamGetI8(h, out)
}

/// Profiling twin of `ncclParamGetI8`.
#[no_mangle]
pub extern "C" fn pncclParamGetI8(h: ncclParamHandle_t, out: *mut i8) -> ncclResult_t {
    unsupported("ncclParamGetI8", "the parameter API")
}

/// Exports `ncclParamGetI16` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetI16(h: ncclParamHandle_t, out: *mut i16) -> ncclResult_t {
    pncclParamGetI16(h, out)
}

/// Profiling twin of `ncclParamGetI16`.
#[no_mangle]
pub extern "C" fn pncclParamGetI16(h: ncclParamHandle_t, out: *mut i16) -> ncclResult_t {
    unsupported("ncclParamGetI16", "the parameter API")
}

/// Exports `ncclParamGetI32` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetI32(h: ncclParamHandle_t, out: *mut i32) -> ncclResult_t {
    pncclParamGetI32(h, out)
}

/// Profiling twin of `ncclParamGetI32`.
#[no_mangle]
pub extern "C" fn pncclParamGetI32(h: ncclParamHandle_t, out: *mut i32) -> ncclResult_t {
    unsupported("ncclParamGetI32", "the parameter API")
}

/// Exports `ncclParamGetI64` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetI64(h: ncclParamHandle_t, out: *mut i64) -> ncclResult_t {
    pncclParamGetI64(h, out)
}

/// Profiling twin of `ncclParamGetI64`.
#[no_mangle]
pub extern "C" fn pncclParamGetI64(h: ncclParamHandle_t, out: *mut i64) -> ncclResult_t {
    unsupported("ncclParamGetI64", "the parameter API")
}

/// Exports `ncclParamGetU8` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetU8(h: ncclParamHandle_t, out: *mut u8) -> ncclResult_t {
    pncclParamGetU8(h, out)
}

/// Profiling twin of `ncclParamGetU8`.
#[no_mangle]
pub extern "C" fn pncclParamGetU8(h: ncclParamHandle_t, out: *mut u8) -> ncclResult_t {
    unsupported("ncclParamGetU8", "the parameter API")
}

/// Exports `ncclParamGetU16` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetU16(h: ncclParamHandle_t, out: *mut u16) -> ncclResult_t {
    pncclParamGetU16(h, out)
}

/// Profiling twin of `ncclParamGetU16`.
#[no_mangle]
pub extern "C" fn pncclParamGetU16(h: ncclParamHandle_t, out: *mut u16) -> ncclResult_t {
    unsupported("ncclParamGetU16", "the parameter API")
}

/// Exports `ncclParamGetU32` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetU32(h: ncclParamHandle_t, out: *mut u32) -> ncclResult_t {
    pncclParamGetU32(h, out)
}

/// Profiling twin of `ncclParamGetU32`.
#[no_mangle]
pub extern "C" fn pncclParamGetU32(h: ncclParamHandle_t, out: *mut u32) -> ncclResult_t {
    unsupported("ncclParamGetU32", "the parameter API")
}

/// Exports `ncclParamGetU64` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetU64(h: ncclParamHandle_t, out: *mut u64) -> ncclResult_t {
    pncclParamGetU64(h, out)
}

/// Profiling twin of `ncclParamGetU64`.
#[no_mangle]
pub extern "C" fn pncclParamGetU64(h: ncclParamHandle_t, out: *mut u64) -> ncclResult_t {
    unsupported("ncclParamGetU64", "the parameter API")
}

/// Exports `ncclParamGetStr` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetStr(h: ncclParamHandle_t, out: *mut *const c_char) -> ncclResult_t {
    pncclParamGetStr(h, out)
}

/// Profiling twin of `ncclParamGetStr`.
#[no_mangle]
pub extern "C" fn pncclParamGetStr(h: ncclParamHandle_t, out: *mut *const c_char) -> ncclResult_t {
    unsupported("ncclParamGetStr", "the parameter API")
}

/// Exports `ncclParamGet` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGet(
    h: ncclParamHandle_t,
    out: *mut c_void,
    maxLen: c_int,
    len: *mut c_int,
) -> ncclResult_t {
    pncclParamGet(h, out, maxLen, len)
}

/// Profiling twin of `ncclParamGet`.
#[no_mangle]
pub extern "C" fn pncclParamGet(
    h: ncclParamHandle_t,
    out: *mut c_void,
    maxLen: c_int,
    len: *mut c_int,
) -> ncclResult_t {
    unsupported("ncclParamGet", "the parameter API")
}

/// Exports `ncclParamGetParameter` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetParameter(
    key: *const c_char,
    value: *mut *const c_char,
    valueLen: *mut c_int,
) -> ncclResult_t {
    pncclParamGetParameter(key, value, valueLen)
}

/// Profiling twin of `ncclParamGetParameter`.
#[no_mangle]
pub extern "C" fn pncclParamGetParameter(
    key: *const c_char,
    value: *mut *const c_char,
    valueLen: *mut c_int,
) -> ncclResult_t {
    unsupported("ncclParamGetParameter", "the parameter API")
}

/// Exports `ncclParamGetAllParameterKeys` (unsupported: the parameter API).
#[no_mangle]
pub extern "C" fn ncclParamGetAllParameterKeys(
    table: *mut *mut *const c_char,
    tableLen: *mut c_int,
) -> ncclResult_t {
    pncclParamGetAllParameterKeys(table, tableLen)
}

/// Profiling twin of `ncclParamGetAllParameterKeys`.
#[no_mangle]
pub extern "C" fn pncclParamGetAllParameterKeys(
    table: *mut *mut *const c_char,
    tableLen: *mut c_int,
) -> ncclResult_t {
    unsupported("ncclParamGetAllParameterKeys", "the parameter API")
}

/// Exports `ncclParamDumpAll` (unsupported: prints one line saying so).
#[no_mangle]
pub extern "C" fn ncclParamDumpAll() {
    pncclParamDumpAll()
}

/// Profiling twin of `ncclParamDumpAll`.
#[no_mangle]
pub extern "C" fn pncclParamDumpAll() {
    crate::param::say(
        "ferrocoll: ncclParamDumpAll is not supported; FERROCOLL_* settings are documented in the README",
    );
}

/// Exports `ncclResetDebugInit` (deprecated in NCCL): ferrocoll reads its
/// debug settings once, so there is nothing to reset.
#[no_mangle]
pub extern "C" fn ncclResetDebugInit() {
    pncclResetDebugInit()
}

/// Profiling twin of `ncclResetDebugInit`.
#[no_mangle]
pub extern "C" fn pncclResetDebugInit() {}
