//! The MPI face with MPICH's ABI. Every function is exported as `MPI_X`
//! and as `PMPI_X` (profiling tools intercept the first and call the
//! second).
#![allow(non_snake_case)]
// The exports take C pointers by design: MPI's contract on each argument is
// the precondition, and every dereference sits in a `// SAFETY:` block.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
// MPI's signatures are fixed by the standard.
#![allow(clippy::too_many_arguments)]

pub mod coll;
pub mod comm;
pub mod consts;
pub mod datatypes;
pub mod env;
pub mod errors;
mod lane;
pub mod ops;
pub mod p2p;
pub mod ptr;
pub mod requests;
pub mod state;
pub mod types;
