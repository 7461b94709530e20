//! The table of outstanding `MPI_Request`s: a slab whose handles carry the
//! slot's index and a generation, so a lookup is an index, not a hash, and
//! a stale handle (of a request completed or freed since) is refused until
//! its slot has been reused `GENERATIONS` times.
//!
//! A hash map keyed by handle cost an insert and a remove per request: in a
//! 2-rank `MPI_Irecv` + `MPI_Isend` + `MPI_Waitall` of 8 bytes they took 11%
//! of the time, much of it an entry moved in 16-byte loads from narrower
//! stores, which the store buffer cannot forward. Alternated 2-rank runs,
//! 8 bytes, us, map / slab (Open MPI): Irecv + Isend + Waitall
//! 0.384-0.387 / 0.335-0.346 (0.164), two of each 0.707-0.715 /
//! 0.626-0.632 (0.257), Isend + Recv + Wait 0.246-0.264 / 0.230-0.233
//! (0.147).

use super::consts::{MPI_Comm, MPI_Request, MPI_ERR_INTERN};
use super::errors::MpiErr;
use super::state::ReqEntry;
use crate::comm::engine::ReqId;

/// MPICH's "direct" handle kind bits for requests.
const KIND: u32 = 0xac00_0000;
/// Handle values below this are MPICH's predefined objects.
const FIRST: u32 = 0x100;
/// Bits of the index within a handle: at most 2^20 requests outstanding.
const INDEX_BITS: u32 = 20;
/// Generations a slot cycles through; `FIRST` plus the largest
/// (generation, index) still fits the 26 bits below the kind.
const GENERATIONS: u32 = 63;

struct Slot {
    generation: u32,
    entry: Option<ReqEntry>,
}

/// Outstanding requests by handle.
#[derive(Default)]
pub struct Requests {
    slots: Vec<Slot>,
    /// Indices of empty slots, the latest freed last.
    free: Vec<u32>,
}

impl Requests {
    /// Fails when no further request fits: check before starting one.
    pub fn room(&self) -> Result<(), MpiErr> {
        if self.free.is_empty() && self.slots.len() >= 1 << INDEX_BITS {
            return Err(MpiErr::new(
                MPI_ERR_INTERN,
                format!(
                    "more than {} requests outstanding at once",
                    1u32 << INDEX_BITS
                ),
            ));
        }
        Ok(())
    }

    /// Stores `e` and returns its handle (fails only where `room` does).
    /// Inlined, so the caller builds the entry in its slot: copied in, it
    /// was read in 16-byte loads just after the caller wrote it in narrower
    /// stores, which the store buffer cannot forward (2 ranks, Irecv +
    /// Isend + Waitall 8 B, alternated, us: 0.246-0.258 / 0.238-0.241).
    #[inline(always)]
    pub fn insert(&mut self, e: ReqEntry) -> Result<MPI_Request, MpiErr> {
        self.room()?;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.entry = Some(e);
        Ok((KIND | (FIRST + (slot.generation << INDEX_BITS | index))) as MPI_Request)
    }

    /// The slot index of handle `h`, if it names a live request.
    fn find(&self, h: MPI_Request) -> Option<usize> {
        let h = h as u32;
        if h & !0x03ff_ffff != KIND {
            return None;
        }
        let v = (h & 0x03ff_ffff).checked_sub(FIRST)?;
        let (generation, index) = (v >> INDEX_BITS, (v & ((1 << INDEX_BITS) - 1)) as usize);
        let slot = self.slots.get(index)?;
        (slot.generation == generation && slot.entry.is_some()).then_some(index)
    }

    /// The request behind `h`.
    pub fn get(&self, h: MPI_Request) -> Option<&ReqEntry> {
        self.find(h).and_then(|i| self.slots[i].entry.as_ref())
    }

    /// `remove` for a caller that needs only the engine request and the
    /// communicator: the entry is dropped where it lies, not moved out.
    #[inline(always)]
    pub fn remove_id(&mut self, h: MPI_Request) -> Option<(Option<ReqId>, MPI_Comm)> {
        let entry = self.vacate(h)?;
        let kept = entry.as_ref().map(|e| (e.id, e.comm));
        *entry = None;
        kept
    }

    /// Takes the request behind `h` out; its handle is stale from now on.
    #[inline(always)]
    pub fn remove(&mut self, h: MPI_Request) -> Option<ReqEntry> {
        self.vacate(h)?.take()
    }

    /// Frees the slot of `h` (its handle goes stale) and returns its entry,
    /// still in place, for the caller to empty.
    #[inline(always)]
    fn vacate(&mut self, h: MPI_Request) -> Option<&mut Option<ReqEntry>> {
        let i = self.find(h)?;
        self.free.push(i as u32);
        let slot = &mut self.slots[i];
        // A compare, not `%`: a remainder by 63 is a multiply and shifts
        // (about 10 instructions) on every completion.
        slot.generation = match slot.generation + 1 {
            GENERATIONS => 0,
            g => g,
        };
        Some(&mut slot.entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::mpi::consts::{MPI_COMM_WORLD, MPI_REQUEST_NULL};
    use crate::ffi::mpi::state::StatusSource;

    fn entry(comm: i32) -> ReqEntry {
        ReqEntry {
            id: None,
            source: StatusSource::Unnamed,
            recv_type: None,
            comm,
        }
    }

    #[test]
    fn handles_find_their_requests_and_go_stale() {
        let mut t = Requests::default();
        let a = t.insert(entry(MPI_COMM_WORLD)).unwrap();
        let b = t.insert(entry(7)).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, MPI_REQUEST_NULL);
        assert_eq!(a as u32 & 0xfc00_0000, KIND);
        assert_eq!(t.get(b).map(|e| e.comm), Some(7));
        assert_eq!(t.remove(a).map(|e| e.comm), Some(MPI_COMM_WORLD));
        // Completed: stale, also once its slot holds a new request.
        assert!(t.get(a).is_none() && t.remove(a).is_none());
        let c = t.insert(entry(9)).unwrap();
        assert_ne!(c, a);
        assert!(t.get(a).is_none());
        assert_eq!(t.get(c).map(|e| e.comm), Some(9));
        // Not ours at all.
        for h in [
            MPI_REQUEST_NULL,
            0,
            -1,
            (KIND | 0x05) as i32,
            (KIND | 0x3ff_ffff) as i32,
        ] {
            assert!(t.get(h).is_none(), "{h:#x}");
        }
    }

    #[test]
    fn a_slot_cycles_through_every_generation() {
        let mut t = Requests::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..GENERATIONS {
            let h = t.insert(entry(1)).unwrap();
            assert!(seen.insert(h), "handle {h:#x} came back too soon");
            assert!(t.remove(h).is_some());
        }
        // The largest generation and index still make a valid handle.
        let top = KIND | (FIRST + ((GENERATIONS - 1) << INDEX_BITS | ((1 << INDEX_BITS) - 1)));
        assert_eq!(top & 0xfc00_0000, KIND);
    }
}
