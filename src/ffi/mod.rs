//! The C faces. Thin: check arguments, decode handles, call the core, map
//! errors. All `unsafe` for C pointers lives under here.

pub mod boundary;
pub mod mpi;
pub mod nccl;
pub mod owner_lock;
