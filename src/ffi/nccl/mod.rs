//! The NCCL face (`include/nccl.h`): NVIDIA's API and ABI over the same
//! core as the MPI face. Host mode: buffers are host memory and every call
//! completes before it returns (with no CUDA driver the stream must be
//! NULL). Device buffers: `device`.

// Exports take C's pointers by value, as NCCL declares them; each one is
// checked before it is dereferenced.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

pub mod coll;
pub mod comm;
pub mod device;
pub mod device_api;
pub mod group;
pub mod init;
pub mod mem;
pub mod redop;
pub mod result;
pub mod stream_barrier;
pub mod types;
pub mod unsupported;
pub mod work;
