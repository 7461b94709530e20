//! Shared-memory transport: the job segment, SPSC byte rings, collective
//! slots, futex doorbells and the far state of the host's cores. The only module besides `ffi/` that touches raw memory.

pub mod cma;
pub mod demote;
pub mod far;
pub mod futex;
pub mod populate;
pub mod ring;
pub mod segment;
pub mod slots;

pub use segment::Segment;
