//! The MPI face with MPICH's ABI. Every function is exported as `MPI_X`
//! and as `PMPI_X` (profiling tools intercept the first and call the
//! second).
#![allow(non_snake_case)]

pub mod coll;
pub mod comm;
pub mod consts;
pub mod datatypes;
pub mod env;
pub mod errors;
pub mod ops;
pub mod p2p;
pub mod ptr;
pub mod state;
pub mod types;
