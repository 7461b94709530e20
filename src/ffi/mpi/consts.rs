//! The MPI constants and types of the C header, with MPICH's values and
//! layouts (`include/mpi.h` is generated from this file by cbindgen).
#![allow(non_camel_case_types, non_upper_case_globals)]

use std::os::raw::c_int;

/// Communicator handle.
pub type MPI_Comm = c_int;
/// Datatype handle (declared in the header's verbatim block, before
/// `MPI_User_function` needs it).
pub type MPI_Datatype = c_int;
/// Reduction operation handle.
pub type MPI_Op = c_int;
/// Request handle.
pub type MPI_Request = c_int;
/// Error handler handle.
pub type MPI_Errhandler = c_int;
/// Address-sized integer.
pub type MPI_Aint = std::os::raw::c_long;
/// File offset.
pub type MPI_Offset = std::os::raw::c_long;
/// Large count.
pub type MPI_Count = std::os::raw::c_long;
/// Fortran integer.
pub type MPI_Fint = c_int;

/// User reduction function: `inoutvec[i] = invec[i] op inoutvec[i]`
/// (declared as a function type in the header's verbatim block).
pub type MPI_User_function = unsafe extern "C" fn(
    invec: *mut std::os::raw::c_void,
    inoutvec: *mut std::os::raw::c_void,
    len: *mut c_int,
    datatype: *mut MPI_Datatype,
);

/// A nullable pointer to a user function (`MPI_User_function *` in C).
pub type MPI_User_function_ptr = Option<MPI_User_function>;

/// Completion information of a receive: MPICH's 20-byte layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MPI_Status {
    /// Low 32 bits of the received byte count.
    pub count_lo: c_int,
    /// High bits of the byte count (shifted left by one) and the
    /// cancelled flag in bit 0.
    pub count_hi_and_cancelled: c_int,
    /// Sender rank.
    pub MPI_SOURCE: c_int,
    /// Message tag.
    pub MPI_TAG: c_int,
    /// Error class of this request (multiple-completion calls).
    pub MPI_ERROR: c_int,
}

/// MPI standard version implemented (as MPICH 4.0 reports).
pub const MPI_VERSION: c_int = 4;
/// MPI standard subversion.
pub const MPI_SUBVERSION: c_int = 0;

/// The communicator of all ranks.
pub const MPI_COMM_WORLD: MPI_Comm = 0x44000000;
/// The communicator of this rank alone.
pub const MPI_COMM_SELF: MPI_Comm = 0x44000001;
/// The null communicator.
pub const MPI_COMM_NULL: MPI_Comm = 0x04000000;
/// The null datatype.
pub const MPI_DATATYPE_NULL: MPI_Datatype = 0x0c000000;
/// The null operation.
pub const MPI_OP_NULL: MPI_Op = 0x18000000;
/// The null request.
pub const MPI_REQUEST_NULL: MPI_Request = 0x2c000000;
/// The null error handler.
pub const MPI_ERRHANDLER_NULL: MPI_Errhandler = 0x14000000;
/// Errors abort the job (the default).
pub const MPI_ERRORS_ARE_FATAL: MPI_Errhandler = 0x54000000;
/// Errors are returned to the caller.
pub const MPI_ERRORS_RETURN: MPI_Errhandler = 0x54000001;
/// Errors abort the processes of the communicator.
pub const MPI_ERRORS_ABORT: MPI_Errhandler = 0x54000003;

// Predefined datatypes.
/// Predefined datatype `MPI_CHAR`.
pub const MPI_CHAR: MPI_Datatype = 0x4c000101;
/// Predefined datatype `MPI_SIGNED_CHAR`.
pub const MPI_SIGNED_CHAR: MPI_Datatype = 0x4c000118;
/// Predefined datatype `MPI_UNSIGNED_CHAR`.
pub const MPI_UNSIGNED_CHAR: MPI_Datatype = 0x4c000102;
/// Predefined datatype `MPI_BYTE`.
pub const MPI_BYTE: MPI_Datatype = 0x4c00010d;
/// Predefined datatype `MPI_WCHAR`.
pub const MPI_WCHAR: MPI_Datatype = 0x4c00040e;
/// Predefined datatype `MPI_SHORT`.
pub const MPI_SHORT: MPI_Datatype = 0x4c000203;
/// Predefined datatype `MPI_UNSIGNED_SHORT`.
pub const MPI_UNSIGNED_SHORT: MPI_Datatype = 0x4c000204;
/// Predefined datatype `MPI_INT`.
pub const MPI_INT: MPI_Datatype = 0x4c000405;
/// Predefined datatype `MPI_UNSIGNED`.
pub const MPI_UNSIGNED: MPI_Datatype = 0x4c000406;
/// Predefined datatype `MPI_LONG`.
pub const MPI_LONG: MPI_Datatype = 0x4c000807;
/// Predefined datatype `MPI_UNSIGNED_LONG`.
pub const MPI_UNSIGNED_LONG: MPI_Datatype = 0x4c000808;
/// Predefined datatype `MPI_FLOAT`.
pub const MPI_FLOAT: MPI_Datatype = 0x4c00040a;
/// Predefined datatype `MPI_DOUBLE`.
pub const MPI_DOUBLE: MPI_Datatype = 0x4c00080b;
/// Predefined datatype `MPI_LONG_DOUBLE`.
pub const MPI_LONG_DOUBLE: MPI_Datatype = 0x4c00100c;
/// Predefined datatype `MPI_LONG_LONG_INT`.
pub const MPI_LONG_LONG_INT: MPI_Datatype = 0x4c000809;
/// Predefined datatype `MPI_UNSIGNED_LONG_LONG`.
pub const MPI_UNSIGNED_LONG_LONG: MPI_Datatype = 0x4c000819;
/// Predefined datatype `MPI_PACKED`.
pub const MPI_PACKED: MPI_Datatype = 0x4c00010f;
/// Predefined datatype `MPI_FLOAT_INT`.
pub const MPI_FLOAT_INT: MPI_Datatype = 0x8c000000_u32 as c_int;
/// Predefined datatype `MPI_DOUBLE_INT`.
pub const MPI_DOUBLE_INT: MPI_Datatype = 0x8c000001_u32 as c_int;
/// Predefined datatype `MPI_LONG_INT`.
pub const MPI_LONG_INT: MPI_Datatype = 0x8c000002_u32 as c_int;
/// Predefined datatype `MPI_SHORT_INT`.
pub const MPI_SHORT_INT: MPI_Datatype = 0x8c000003_u32 as c_int;
/// Predefined datatype `MPI_2INT`.
pub const MPI_2INT: MPI_Datatype = 0x4c000816;
/// Predefined datatype `MPI_LONG_DOUBLE_INT`.
pub const MPI_LONG_DOUBLE_INT: MPI_Datatype = 0x8c000004_u32 as c_int;
/// Predefined datatype `MPI_INT8_T`.
pub const MPI_INT8_T: MPI_Datatype = 0x4c000137;
/// Predefined datatype `MPI_INT16_T`.
pub const MPI_INT16_T: MPI_Datatype = 0x4c000238;
/// Predefined datatype `MPI_INT32_T`.
pub const MPI_INT32_T: MPI_Datatype = 0x4c000439;
/// Predefined datatype `MPI_INT64_T`.
pub const MPI_INT64_T: MPI_Datatype = 0x4c00083a;
/// Predefined datatype `MPI_UINT8_T`.
pub const MPI_UINT8_T: MPI_Datatype = 0x4c00013b;
/// Predefined datatype `MPI_UINT16_T`.
pub const MPI_UINT16_T: MPI_Datatype = 0x4c00023c;
/// Predefined datatype `MPI_UINT32_T`.
pub const MPI_UINT32_T: MPI_Datatype = 0x4c00043d;
/// Predefined datatype `MPI_UINT64_T`.
pub const MPI_UINT64_T: MPI_Datatype = 0x4c00083e;
/// Predefined datatype `MPI_C_BOOL`.
pub const MPI_C_BOOL: MPI_Datatype = 0x4c00013f;
/// Predefined datatype `MPI_C_FLOAT_COMPLEX`.
pub const MPI_C_FLOAT_COMPLEX: MPI_Datatype = 0x4c000840;
/// Predefined datatype `MPI_C_DOUBLE_COMPLEX`.
pub const MPI_C_DOUBLE_COMPLEX: MPI_Datatype = 0x4c001041;
/// Predefined datatype `MPI_C_LONG_DOUBLE_COMPLEX`.
pub const MPI_C_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x4c002042;
/// Predefined datatype `MPI_AINT`.
pub const MPI_AINT: MPI_Datatype = 0x4c000843;
/// Predefined datatype `MPI_OFFSET`.
pub const MPI_OFFSET: MPI_Datatype = 0x4c000844;
/// Predefined datatype `MPI_COUNT`.
pub const MPI_COUNT: MPI_Datatype = 0x4c000845;
/// Predefined datatype `MPIX_C_FLOAT16` (IEEE half precision).
pub const MPIX_C_FLOAT16: MPI_Datatype = 0x4c000246;
/// Predefined datatype `MPI_CXX_BOOL`.
pub const MPI_CXX_BOOL: MPI_Datatype = 0x4c000133;
/// Predefined datatype `MPI_CXX_FLOAT_COMPLEX`.
pub const MPI_CXX_FLOAT_COMPLEX: MPI_Datatype = 0x4c000834;
/// Predefined datatype `MPI_CXX_DOUBLE_COMPLEX`.
pub const MPI_CXX_DOUBLE_COMPLEX: MPI_Datatype = 0x4c001035;
/// Predefined datatype `MPI_CXX_LONG_DOUBLE_COMPLEX`.
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x4c002036;
/// Alias of `MPI_C_FLOAT_COMPLEX`.
pub const MPI_C_COMPLEX: MPI_Datatype = MPI_C_FLOAT_COMPLEX;
/// Alias of `MPI_LONG_LONG_INT`.
pub const MPI_LONG_LONG: MPI_Datatype = MPI_LONG_LONG_INT;

// Predefined operations.
/// Predefined operation `MPI_MAX`.
pub const MPI_MAX: MPI_Op = 0x58000001;
/// Predefined operation `MPI_MIN`.
pub const MPI_MIN: MPI_Op = 0x58000002;
/// Predefined operation `MPI_SUM`.
pub const MPI_SUM: MPI_Op = 0x58000003;
/// Predefined operation `MPI_PROD`.
pub const MPI_PROD: MPI_Op = 0x58000004;
/// Predefined operation `MPI_LAND`.
pub const MPI_LAND: MPI_Op = 0x58000005;
/// Predefined operation `MPI_BAND`.
pub const MPI_BAND: MPI_Op = 0x58000006;
/// Predefined operation `MPI_LOR`.
pub const MPI_LOR: MPI_Op = 0x58000007;
/// Predefined operation `MPI_BOR`.
pub const MPI_BOR: MPI_Op = 0x58000008;
/// Predefined operation `MPI_LXOR`.
pub const MPI_LXOR: MPI_Op = 0x58000009;
/// Predefined operation `MPI_BXOR`.
pub const MPI_BXOR: MPI_Op = 0x5800000a;
/// Predefined operation `MPI_MINLOC`.
pub const MPI_MINLOC: MPI_Op = 0x5800000b;
/// Predefined operation `MPI_MAXLOC`.
pub const MPI_MAXLOC: MPI_Op = 0x5800000c;
/// Predefined operation `MPI_REPLACE`.
pub const MPI_REPLACE: MPI_Op = 0x5800000d;
/// Predefined operation `MPI_NO_OP`.
pub const MPI_NO_OP: MPI_Op = 0x5800000e;

/// No peer: sends and receives complete at once.
pub const MPI_PROC_NULL: c_int = -1;
/// Receive from any sender.
pub const MPI_ANY_SOURCE: c_int = -2;
/// Root marker of intercommunicator collectives.
pub const MPI_ROOT: c_int = -3;
/// Receive any tag.
pub const MPI_ANY_TAG: c_int = -1;
/// Undefined value (e.g. the colour that opts out of `MPI_Comm_split`).
pub const MPI_UNDEFINED: c_int = -32766;
/// Only one thread.
pub const MPI_THREAD_SINGLE: c_int = 0;
/// Only the main thread calls MPI.
pub const MPI_THREAD_FUNNELED: c_int = 1;
/// Any thread, one at a time.
pub const MPI_THREAD_SERIALIZED: c_int = 2;
/// Any thread, concurrently.
pub const MPI_THREAD_MULTIPLE: c_int = 3;
/// Same communicator.
pub const MPI_IDENT: c_int = 0;
/// Same group, different context.
pub const MPI_CONGRUENT: c_int = 1;
/// Same members, different order.
pub const MPI_SIMILAR: c_int = 2;
/// Different members.
pub const MPI_UNEQUAL: c_int = 3;
/// Longest processor name, including the terminating NUL.
pub const MPI_MAX_PROCESSOR_NAME: c_int = 128;
/// Longest error string.
pub const MPI_MAX_ERROR_STRING: c_int = 512;
/// Longest object name.
pub const MPI_MAX_OBJECT_NAME: c_int = 128;
/// Longest library version string.
pub const MPI_MAX_LIBRARY_VERSION_STRING: c_int = 8192;
/// Success.
pub const MPI_SUCCESS: c_int = 0;

// Error classes (MPICH's numbering).
/// Error class `MPI_ERR_BUFFER`.
pub const MPI_ERR_BUFFER: c_int = 1;
/// Error class `MPI_ERR_COUNT`.
pub const MPI_ERR_COUNT: c_int = 2;
/// Error class `MPI_ERR_TYPE`.
pub const MPI_ERR_TYPE: c_int = 3;
/// Error class `MPI_ERR_TAG`.
pub const MPI_ERR_TAG: c_int = 4;
/// Error class `MPI_ERR_COMM`.
pub const MPI_ERR_COMM: c_int = 5;
/// Error class `MPI_ERR_RANK`.
pub const MPI_ERR_RANK: c_int = 6;
/// Error class `MPI_ERR_ROOT`.
pub const MPI_ERR_ROOT: c_int = 7;
/// Error class `MPI_ERR_GROUP`.
pub const MPI_ERR_GROUP: c_int = 8;
/// Error class `MPI_ERR_OP`.
pub const MPI_ERR_OP: c_int = 9;
/// Error class `MPI_ERR_TOPOLOGY`.
pub const MPI_ERR_TOPOLOGY: c_int = 10;
/// Error class `MPI_ERR_DIMS`.
pub const MPI_ERR_DIMS: c_int = 11;
/// Error class `MPI_ERR_ARG`.
pub const MPI_ERR_ARG: c_int = 12;
/// Error class `MPI_ERR_UNKNOWN`.
pub const MPI_ERR_UNKNOWN: c_int = 13;
/// Error class `MPI_ERR_TRUNCATE`.
pub const MPI_ERR_TRUNCATE: c_int = 14;
/// Error class `MPI_ERR_OTHER`.
pub const MPI_ERR_OTHER: c_int = 15;
/// Error class `MPI_ERR_INTERN`.
pub const MPI_ERR_INTERN: c_int = 16;
/// Error class `MPI_ERR_IN_STATUS`.
pub const MPI_ERR_IN_STATUS: c_int = 17;
/// Error class `MPI_ERR_PENDING`.
pub const MPI_ERR_PENDING: c_int = 18;
/// Error class `MPI_ERR_REQUEST`.
pub const MPI_ERR_REQUEST: c_int = 19;
/// Error class `MPI_ERR_ACCESS`.
pub const MPI_ERR_ACCESS: c_int = 20;
/// Error class `MPI_ERR_AMODE`.
pub const MPI_ERR_AMODE: c_int = 21;
/// Error class `MPI_ERR_BAD_FILE`.
pub const MPI_ERR_BAD_FILE: c_int = 22;
/// Error class `MPI_ERR_CONVERSION`.
pub const MPI_ERR_CONVERSION: c_int = 23;
/// Error class `MPI_ERR_DUP_DATAREP`.
pub const MPI_ERR_DUP_DATAREP: c_int = 24;
/// Error class `MPI_ERR_FILE_EXISTS`.
pub const MPI_ERR_FILE_EXISTS: c_int = 25;
/// Error class `MPI_ERR_FILE_IN_USE`.
pub const MPI_ERR_FILE_IN_USE: c_int = 26;
/// Error class `MPI_ERR_FILE`.
pub const MPI_ERR_FILE: c_int = 27;
/// Error class `MPI_ERR_INFO`.
pub const MPI_ERR_INFO: c_int = 28;
/// Error class `MPI_ERR_INFO_KEY`.
pub const MPI_ERR_INFO_KEY: c_int = 29;
/// Error class `MPI_ERR_INFO_VALUE`.
pub const MPI_ERR_INFO_VALUE: c_int = 30;
/// Error class `MPI_ERR_INFO_NOKEY`.
pub const MPI_ERR_INFO_NOKEY: c_int = 31;
/// Error class `MPI_ERR_IO`.
pub const MPI_ERR_IO: c_int = 32;
/// Error class `MPI_ERR_NAME`.
pub const MPI_ERR_NAME: c_int = 33;
/// Error class `MPI_ERR_NO_MEM`.
pub const MPI_ERR_NO_MEM: c_int = 34;
/// Error class `MPI_ERR_NOT_SAME`.
pub const MPI_ERR_NOT_SAME: c_int = 35;
/// Error class `MPI_ERR_NO_SPACE`.
pub const MPI_ERR_NO_SPACE: c_int = 36;
/// Error class `MPI_ERR_NO_SUCH_FILE`.
pub const MPI_ERR_NO_SUCH_FILE: c_int = 37;
/// Error class `MPI_ERR_PORT`.
pub const MPI_ERR_PORT: c_int = 38;
/// Error class `MPI_ERR_QUOTA`.
pub const MPI_ERR_QUOTA: c_int = 39;
/// Error class `MPI_ERR_READ_ONLY`.
pub const MPI_ERR_READ_ONLY: c_int = 40;
/// Error class `MPI_ERR_SERVICE`.
pub const MPI_ERR_SERVICE: c_int = 41;
/// Error class `MPI_ERR_SPAWN`.
pub const MPI_ERR_SPAWN: c_int = 42;
/// Error class `MPI_ERR_UNSUPPORTED_DATAREP`.
pub const MPI_ERR_UNSUPPORTED_DATAREP: c_int = 43;
/// Error class `MPI_ERR_UNSUPPORTED_OPERATION`.
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 44;
/// Error class `MPI_ERR_WIN`.
pub const MPI_ERR_WIN: c_int = 45;
/// Error class `MPI_ERR_BASE`.
pub const MPI_ERR_BASE: c_int = 46;
/// Error class `MPI_ERR_LOCKTYPE`.
pub const MPI_ERR_LOCKTYPE: c_int = 47;
/// Error class `MPI_ERR_KEYVAL`.
pub const MPI_ERR_KEYVAL: c_int = 48;
/// Error class `MPI_ERR_RMA_CONFLICT`.
pub const MPI_ERR_RMA_CONFLICT: c_int = 49;
/// Error class `MPI_ERR_RMA_SYNC`.
pub const MPI_ERR_RMA_SYNC: c_int = 50;
/// Error class `MPI_ERR_SIZE`.
pub const MPI_ERR_SIZE: c_int = 51;
/// Error class `MPI_ERR_DISP`.
pub const MPI_ERR_DISP: c_int = 52;
/// Error class `MPI_ERR_ASSERT`.
pub const MPI_ERR_ASSERT: c_int = 53;
/// Error class `MPI_ERR_RMA_RANGE`.
pub const MPI_ERR_RMA_RANGE: c_int = 55;
/// Error class `MPI_ERR_RMA_ATTACH`.
pub const MPI_ERR_RMA_ATTACH: c_int = 56;
/// Error class `MPI_ERR_RMA_SHARED`.
pub const MPI_ERR_RMA_SHARED: c_int = 57;
/// Error class `MPI_ERR_RMA_FLAVOR`.
pub const MPI_ERR_RMA_FLAVOR: c_int = 58;
/// Error class `MPI_ERR_SESSION`.
pub const MPI_ERR_SESSION: c_int = 75;
/// Error class `MPI_ERR_PROC_ABORTED`.
pub const MPI_ERR_PROC_ABORTED: c_int = 76;
/// Error class `MPI_ERR_VALUE_TOO_LARGE`.
pub const MPI_ERR_VALUE_TOO_LARGE: c_int = 77;
/// Tool-interface error class `MPI_T_ERR_MEMORY`.
pub const MPI_T_ERR_MEMORY: c_int = 59;
/// Tool-interface error class `MPI_T_ERR_NOT_INITIALIZED`.
pub const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
/// Tool-interface error class `MPI_T_ERR_CANNOT_INIT`.
pub const MPI_T_ERR_CANNOT_INIT: c_int = 61;
/// Tool-interface error class `MPI_T_ERR_INVALID_INDEX`.
pub const MPI_T_ERR_INVALID_INDEX: c_int = 62;
/// Tool-interface error class `MPI_T_ERR_INVALID_ITEM`.
pub const MPI_T_ERR_INVALID_ITEM: c_int = 63;
/// Tool-interface error class `MPI_T_ERR_INVALID_HANDLE`.
pub const MPI_T_ERR_INVALID_HANDLE: c_int = 64;
/// Tool-interface error class `MPI_T_ERR_OUT_OF_HANDLES`.
pub const MPI_T_ERR_OUT_OF_HANDLES: c_int = 65;
/// Tool-interface error class `MPI_T_ERR_OUT_OF_SESSIONS`.
pub const MPI_T_ERR_OUT_OF_SESSIONS: c_int = 66;
/// Tool-interface error class `MPI_T_ERR_INVALID_SESSION`.
pub const MPI_T_ERR_INVALID_SESSION: c_int = 67;
/// Tool-interface error class `MPI_T_ERR_CVAR_SET_NOT_NOW`.
pub const MPI_T_ERR_CVAR_SET_NOT_NOW: c_int = 68;
/// Tool-interface error class `MPI_T_ERR_CVAR_SET_NEVER`.
pub const MPI_T_ERR_CVAR_SET_NEVER: c_int = 69;
/// Tool-interface error class `MPI_T_ERR_PVAR_NO_STARTSTOP`.
pub const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 70;
/// Tool-interface error class `MPI_T_ERR_PVAR_NO_WRITE`.
pub const MPI_T_ERR_PVAR_NO_WRITE: c_int = 71;
/// Tool-interface error class `MPI_T_ERR_PVAR_NO_ATOMIC`.
pub const MPI_T_ERR_PVAR_NO_ATOMIC: c_int = 72;
/// Tool-interface error class `MPI_T_ERR_INVALID_NAME`.
pub const MPI_T_ERR_INVALID_NAME: c_int = 73;
/// Tool-interface error class `MPI_T_ERR_INVALID`.
pub const MPI_T_ERR_INVALID: c_int = 74;
/// Tool-interface error class `MPI_T_ERR_NOT_SUPPORTED`.
pub const MPI_T_ERR_NOT_SUPPORTED: c_int = 78;
/// Largest error code.
pub const MPI_ERR_LASTCODE: c_int = 0x3fffffff;
