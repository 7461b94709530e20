//! ferrocoll: collective communication for C programs. An MPI (MPICH ABI)
//! face over a Rust core of communicators, collective algorithms and
//! per-peer transports. See DESIGN.md in the project's shared notes.

pub mod bootstrap;
pub mod coll;
pub mod comm;
pub mod copy;
pub mod cpu;
pub mod dtype;
pub mod error;
pub mod ffi;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod gpu;
pub mod membarrier;
pub mod param;
pub mod reduce;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod testrng;
pub mod transport;
