//! The C types of `nccl.h`, with NVIDIA's values and layouts (NCCL 2.32.3):
//! enums, the unique id, versioned config structs, opaque handles.
//!
//! Enum-typed parameters are taken as `c_int` aliases (`*Arg`, renamed to
//! the enum's name in the header) so that an out-of-range value from C is a
//! checked error, not undefined behaviour in Rust.

#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// Major version of the NCCL API this library implements.
pub const NCCL_MAJOR: c_int = 2;
/// Minor version of the NCCL API.
pub const NCCL_MINOR: c_int = 32;
/// Patch level of the NCCL API.
pub const NCCL_PATCH: c_int = 3;
/// `NCCL_VERSION(2, 32, 3)`: what `ncclGetVersion` reports.
pub const NCCL_VERSION_CODE: c_int = 23203;
/// Bytes in an `ncclUniqueId`.
pub const NCCL_UNIQUE_ID_BYTES: usize = 128;
/// A config field the caller left unset.
pub const NCCL_CONFIG_UNDEF_INT: c_int = i32::MIN;
/// `ncclCommSplit` colour meaning "no communicator for this rank".
pub const NCCL_SPLIT_NOCOLOR: c_int = -1;
/// An unset float in versioned structs.
pub const NCCL_UNDEF_FLOAT: f32 = -1.0;
/// Magic number of versioned config structs.
pub const NCCL_API_MAGIC: c_uint = 0xcafe_beef;
/// Window registration: default.
pub const NCCL_WIN_DEFAULT: c_int = 0x00;
/// Window registration: symmetric collective buffers.
pub const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;
/// Window registration: strict ordering.
pub const NCCL_WIN_STRICT_ORDERING: c_int = 0x02;
/// Window registration: GIN only.
pub const NCCL_WIN_GIN_ONLY: c_int = 0x04;
/// Window registration: CFT counted only.
pub const NCCL_WIN_CFT_COUNTED: c_int = 0x08;
/// Alignment required of registered windows.
pub const NCCL_WIN_REQUIRED_ALIGNMENT: c_int = 4096;
/// CTA policy: default.
pub const NCCL_CTA_POLICY_DEFAULT: c_int = 0x00;
/// CTA policy: efficiency.
pub const NCCL_CTA_POLICY_EFFICIENCY: c_int = 0x01;
/// CTA policy: zero.
pub const NCCL_CTA_POLICY_ZERO: c_int = 0x02;
/// `ncclCommShrink`: shrink the parent.
pub const NCCL_SHRINK_DEFAULT: c_int = 0x00;
/// `ncclCommShrink`: abort the parent's operations first.
pub const NCCL_SHRINK_ABORT: c_int = 0x01;
/// `ncclCommRevoke` flags (must be 0).
pub const NCCL_REVOKE_DEFAULT: c_int = 0x00;
/// `ncclCommSuspend`: release dynamic allocations.
pub const NCCL_SUSPEND_MEM: c_int = 0x01;

/// Result of every NCCL call.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclResult_t {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclTimeout = 8,
    ncclNumResults = 9,
}

/// Reduction operations; values from `ncclNumOps` up are `ncclRedOpCreatePreMulSum` handles.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclRedOp_t {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fff_ffff,
}

/// Element types (`ncclChar`, `ncclInt`, `ncclHalf`, `ncclFloat` and
/// `ncclDouble` are defined as aliases after it).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclDataType_t {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12,
}

/// Where a PreMulSum scalar lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclScalarResidence_t {
    /// Read while the collective runs (host mode: at the call).
    ncclScalarDevice = 0,
    /// Read before the creating call returns.
    ncclScalarHostImmediate = 1,
}

/// `ncclCommMemStats` statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclCommMemStat_t {
    ncclStatGpuMemSuspend = 0,
    ncclStatGpuMemSuspended = 1,
    ncclStatGpuMemPersist = 2,
    ncclStatGpuMemTotal = 3,
}

/// Host CFT modes (`ncclConfig_t::hostCftMode`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclHostCftMode_t {
    ncclHostCftDefault = i32::MIN as isize,
    ncclHostCftEnable = 1,
    ncclHostCftDisable = 2,
    ncclHostCftFallback = 3,
}

/// Host NVLS modes (`ncclConfig_t::nvlsHostMode`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclNvlsHostMode_t {
    ncclNvlsHostModeDefault = i32::MIN as isize,
    ncclNvlsHostModeEnable = 0,
    ncclNvlsHostModeDisableTransport = 1,
    ncclNvlsHostModeDisableSymmetricMultimem = 2,
    ncclNvlsHostModeDisable = i32::MAX as isize,
}

/// `ncclEncryptionConfig_t::mode`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ncclEncryptionMode_t {
    NCCL_ENCRYPTION_MODE_NONE = 0,
    NCCL_ENCRYPTION_MODE_PSK = 1,
}

/// An `ncclDataType_t` as received from C (checked before use).
pub type ncclDataTypeArg = c_int;
/// An `ncclRedOp_t` as received from C (checked before use).
pub type ncclRedOpArg = c_int;
/// An `ncclResult_t` as received from C.
pub type ncclResultArg = c_int;
/// An `ncclScalarResidence_t` as received from C.
pub type ncclScalarResidenceArg = c_int;
/// An `ncclCommMemStat_t` as received from C.
pub type ncclCommMemStatArg = c_int;

/// The id every rank of a communicator is created with; passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclUniqueId {
    pub internal: [c_char; NCCL_UNIQUE_ID_BYTES],
}

/// Communicator configuration (`struct ncclConfig_v23100`). Append-only:
/// only the first `size` bytes the caller passed are read.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclConfig_t {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub blocking: c_int,
    pub cgaClusterSize: c_int,
    pub minCTAs: c_int,
    pub maxCTAs: c_int,
    pub netName: *const c_char,
    pub splitShare: c_int,
    pub trafficClass: c_int,
    pub commName: *const c_char,
    pub collnetEnable: c_int,
    pub CTAPolicy: c_int,
    pub shrinkShare: c_int,
    pub nvlsCTAs: c_int,
    pub nChannelsPerNetPeer: c_int,
    pub nvlinkCentricSched: c_int,
    pub graphUsageMode: c_int,
    pub numRmaCtx: c_int,
    pub maxP2pPeers: c_int,
    pub graphStreamOrdering: c_int,
    pub launchOrderImplicit: c_int,
    pub numRmaSig: c_int,
    pub rmaEagerInit: c_int,
    pub hostCftMode: c_int,
    pub nvlsHostMode: c_int,
}

/// Key of a vendor extension option.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclConfigExtKey {
    pub vendorId: c_int,
    pub optionId: c_int,
}

/// Value of a vendor extension option.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ncclConfigExtVal {
    pub i: c_int,
    pub s: *const c_char,
    pub raw: *mut c_void,
}

/// A vendor extension option in a list (ferrocoll ignores every extension, as NCCL does).
#[repr(C)]
pub struct ncclConfigExt_t {
    pub next: *mut ncclConfigExt_t,
    pub key: ncclConfigExtKey,
    pub val: ncclConfigExtVal,
}

/// Per-call configuration of the `*Config` collectives (`struct ncclCollConfig_v23200`).
#[repr(C)]
pub struct ncclCollConfig_t {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub ext: *mut ncclConfigExt_t,
    pub minCTAs: c_int,
    pub maxCTAs: c_int,
    pub nvlsCTAs: c_int,
    pub cgaClusterSize: c_int,
    pub algSelection: *const c_char,
    pub forceAlgSelection: c_int,
    pub CTAPolicy: c_int,
    pub userProfilerTag: u64,
    pub launchCompletionEvent: cudaEvent_t,
}

/// `ncclGroupSimulateEnd`'s result (`struct ncclSimInfo_v22200`).
#[repr(C)]
pub struct ncclSimInfo_t {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub estimatedTime: f32,
}

/// One wait of `ncclWaitSignal`.
#[repr(C)]
pub struct ncclWaitSignalDesc_t {
    pub opCnt: c_int,
    pub peer: c_int,
    pub sigIdx: c_int,
    pub ctx: c_int,
}

/// `ncclSetEncryption`'s argument (`struct ncclEncryptionConfig_v23200`).
#[repr(C)]
pub struct ncclEncryptionConfig_t {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub mode: c_int,
    pub psk: *const c_char,
}

/// A registered window (never created by ferrocoll).
pub struct ncclWindow_vidmem {
    _private: [u8; 0],
}

/// A parameter handle (never created by ferrocoll).
pub struct ncclParamHandle {
    _private: [u8; 0],
}

/// CUDA's stream object (declared, never defined, as in CUDA).
pub struct CUstream_st {
    _private: [u8; 0],
}

/// CUDA's event object.
pub struct CUevent_st {
    _private: [u8; 0],
}

/// Opaque communicator handle.
pub type ncclComm_t = *mut super::comm::ncclComm;
/// Opaque window handle.
pub type ncclWindow_t = *mut ncclWindow_vidmem;
/// Opaque parameter handle.
pub type ncclParamHandle_t = *mut ncclParamHandle;
/// CUDA runtime stream (`cudaStream_t`); NULL in host mode.
pub type cudaStream_t = *mut CUstream_st;
/// CUDA runtime event (`cudaEvent_t`).
pub type cudaEvent_t = *mut CUevent_st;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Offsets as in NVIDIA's header on x86-64 (see the reference notes).
    #[test]
    fn config_layout_matches_nvidia() {
        assert_eq!(size_of::<ncclConfig_t>(), 120);
        assert_eq!(offset_of!(ncclConfig_t, magic), 8);
        assert_eq!(offset_of!(ncclConfig_t, blocking), 16);
        assert_eq!(offset_of!(ncclConfig_t, netName), 32);
        assert_eq!(offset_of!(ncclConfig_t, commName), 48);
        assert_eq!(offset_of!(ncclConfig_t, nvlsCTAs), 68);
        assert_eq!(offset_of!(ncclConfig_t, nvlinkCentricSched), 76);
        assert_eq!(offset_of!(ncclConfig_t, nvlsHostMode), 112);
        assert_eq!(size_of::<ncclUniqueId>(), 128);
        assert_eq!(size_of::<ncclResult_t>(), 4);
        assert_eq!(size_of::<ncclRedOp_t>(), 4);
    }
}
