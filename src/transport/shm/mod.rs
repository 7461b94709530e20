//! Shared-memory transport: the job segment, SPSC byte rings, collective
//! slots and futex doorbells. The only module besides `ffi/` that touches raw memory.

pub mod futex;
pub mod ring;
pub mod segment;
pub mod slots;

pub use segment::Segment;
