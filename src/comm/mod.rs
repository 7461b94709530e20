//! Communicators: a group of world ranks with a context id, over the
//! process's engine. Sub-communicators share the engine's links; their
//! messages are kept apart by context ids agreed collectively.

pub mod buffer;
pub mod engine;
pub mod slice;

use crate::coll::{self, Ctx, Reducer};
use crate::error::{Error, Result};
use engine::Engine;
use std::sync::Arc;

/// A communicator as the core sees it.
#[derive(Clone, Debug)]
pub struct Comm {
    rank: usize,
    members: Arc<[usize]>,
    id: u32,
    seq: u32,
    /// Collective slot state, when the communicator holds a slot area.
    pub slots: Option<SlotState>,
}

/// A communicator's use of its slot area (same area index on every member).
#[derive(Clone, Debug)]
pub struct SlotState {
    /// The area index.
    pub area: usize,
    /// Number before this communicator's first call: above every number any
    /// member used before on any area, so stale flags and `done` words left
    /// by an earlier owner of the area never match.
    pub base: u64,
    /// The last call's number (`base` + calls made through the slots).
    pub calls: u64,
    /// Every peer was seen done with this call: writers need not look again
    /// until they reuse a slot of a later call.
    pub safe: u64,
    /// Whether this rank read every peer's slot in the last call: then every
    /// peer has finished the call before it, and the slot about to be
    /// rewritten is no longer read.
    pub read_all: bool,
    /// Whether collectives may read members' buffers in place
    /// (`coll::pull`); off once a read was refused.
    pub pulls: bool,
    /// The members on this rank's core, as `coll::slots` last found them
    /// (a mask of ranks below 64), and the call it looked at.
    pub mates: (u64, u64),
    /// Timings and verdicts of pull or not (`coll::tune`).
    pub tune: crate::coll::tune::Tuner,
}

impl SlotState {
    fn new(area: usize, base: u64) -> SlotState {
        SlotState {
            area,
            base,
            calls: base,
            safe: base,
            read_all: true,
            pulls: crate::param::params().cma,
            mates: (0, 0),
            tune: Default::default(),
        }
    }
}

impl Comm {
    /// All ranks of the engine's world.
    pub fn world(eng: &Engine) -> Comm {
        Comm {
            rank: eng.rank(),
            members: (0..eng.size()).collect(),
            id: 0,
            seq: 0,
            slots: (eng.segment().is_some() && eng.size() > 1).then(|| SlotState::new(0, 0)),
        }
    }

    /// This rank alone.
    pub fn self_comm(eng: &Engine) -> Comm {
        Comm {
            rank: 0,
            members: Arc::from([eng.rank()]),
            id: 1,
            seq: 0,
            slots: None,
        }
    }

    /// This rank's index in the communicator.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// World rank of communicator rank `r`.
    pub fn world_rank(&self, r: usize) -> usize {
        self.members[r]
    }

    /// Communicator rank of world rank `w`, if it is a member.
    pub fn rank_of_world(&self, w: usize) -> Option<usize> {
        self.members.iter().position(|&m| m == w)
    }

    /// The members at communicator ranks `ranks` (which must include this
    /// rank) as a communicator on the same contexts, without slots: for the
    /// phases of one collective call that run on part of the members.
    pub fn view(&self, ranks: &[usize]) -> Option<Comm> {
        let rank = ranks.iter().position(|&r| r == self.rank)?;
        Some(Comm {
            rank,
            members: ranks.iter().map(|&r| self.members[r]).collect(),
            id: self.id,
            seq: self.seq,
            slots: None,
        })
    }

    /// World ranks in communicator order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// The members, shared without copying (a request keeps them to name
    /// its source in its status).
    pub fn members_shared(&self) -> Arc<[usize]> {
        self.members.clone()
    }

    /// Context of point-to-point messages.
    pub fn p2p_ctx(&self) -> u32 {
        self.id * 2
    }

    /// Context of collective messages (never matched by user receives).
    pub fn coll_ctx(&self) -> u32 {
        self.id * 2 + 1
    }

    /// The communicator's context id (equal for all its members).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Starts a collective: advances the sequence number its tags carry.
    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Agrees on a context id unused by every member (MPICH's approach: the
    /// maximum of each member's next free id) and on the slot areas free at
    /// every member (the AND of their free sets), and on the highest slot
    /// call number any member has used.
    fn agree_ctx_id(&mut self, eng: &mut Engine) -> Result<Agreed> {
        coll::slots::reclaim(eng);
        let mut mine = [0u8; 20];
        mine[..4].copy_from_slice(&eng.next_ctx_id.to_ne_bytes());
        mine[4..12].copy_from_slice(&eng.areas_free.to_ne_bytes());
        mine[12..].copy_from_slice(&eng.slot_epoch.to_ne_bytes());
        let mut out = [0u8; 20];
        let combine = |src: &[u8], dst: &mut [u8]| {
            let (a, b) = (u32_at(src, 0), u32_at(dst, 0));
            let (fa, fb) = (u64_at(src, 4), u64_at(dst, 4));
            let (ea, eb) = (u64_at(src, 12), u64_at(dst, 12));
            dst[..4].copy_from_slice(&a.max(b).to_ne_bytes());
            dst[4..12].copy_from_slice(&(fa & fb).to_ne_bytes());
            dst[12..].copy_from_slice(&ea.max(eb).to_ne_bytes());
        };
        let red = Reducer {
            extent: 20,
            commutative: true,
            apply: &combine,
        };
        coll::allreduce::allreduce(&mut Ctx::new(eng, self), Some(&mine), &mut out, &red)?;
        let id = u32_at(&out, 0);
        if id >= u32::MAX / 2 - 1 {
            return Err(Error::Unsupported("more than 2^31 communicators".into()));
        }
        eng.next_ctx_id = id + 1;
        Ok(Agreed {
            id,
            free: u64_at(&out, 4),
            epoch: u64_at(&out, 12),
        })
    }

    /// Slot state for a new communicator of the world ranks `members`,
    /// taking the lowest area free at every member of the parent, mapped
    /// ahead of use (`Engine::populate_slots`).
    fn take_area(eng: &mut Engine, a: &Agreed, members: &[usize]) -> Option<SlotState> {
        if members.len() < 2 || a.free == 0 || eng.segment().is_none() {
            return None;
        }
        let area = a.free.trailing_zeros() as usize;
        eng.areas_free &= !(1u64 << area);
        eng.populate_slots(area, members);
        Some(SlotState::new(area, a.epoch))
    }

    /// Gives the communicator up (`MPI_Comm_free`): its slot area becomes
    /// free once every member has finished reading it.
    pub fn release(self, eng: &mut Engine) {
        if let Some(s) = self.slots {
            eng.draining.push((s.area, self.members, s.calls));
        }
    }

    /// A new communicator with the same members (`MPI_Comm_dup`).
    pub fn dup(&mut self, eng: &mut Engine) -> Result<Comm> {
        let a = self.agree_ctx_id(eng)?;
        Ok(Comm {
            rank: self.rank,
            members: self.members.clone(),
            id: a.id,
            seq: 0,
            slots: Comm::take_area(eng, &a, &self.members),
        })
    }

    /// Splits by colour, ordering each part by (key, old rank)
    /// (`MPI_Comm_split`); `None` colour gets no communicator.
    pub fn split(
        &mut self,
        eng: &mut Engine,
        color: Option<u32>,
        key: i32,
    ) -> Result<Option<Comm>> {
        let n = self.size();
        // Everyone's (colour or -1, key), gathered in rank order.
        let c = color.map_or(-1i64, i64::from);
        let mut mine = [0u8; 16];
        mine[..8].copy_from_slice(&c.to_ne_bytes());
        mine[8..].copy_from_slice(&i64::from(key).to_ne_bytes());
        let mut all = vec![0u8; 16 * n];
        let blocks: Vec<(usize, usize)> = (0..n).map(|r| (16 * r, 16)).collect();
        coll::allgather::allgatherv(&mut Ctx::new(eng, self), Some(&mine), &mut all, &blocks)?;
        let a = self.agree_ctx_id(eng)?;
        let Some(color) = color else {
            return Ok(None);
        };
        let field = |r: usize, i: usize| {
            i64::from_ne_bytes(
                all[16 * r + 8 * i..16 * r + 8 * i + 8]
                    .try_into()
                    .expect("8 bytes"),
            )
        };
        let mut part: Vec<(i64, usize)> = (0..n)
            .filter(|&r| field(r, 0) == i64::from(color))
            .map(|r| (field(r, 1), r))
            .collect();
        part.sort_unstable();
        let members: Arc<[usize]> = part.iter().map(|&(_, r)| self.members[r]).collect();
        let rank = part
            .iter()
            .position(|&(_, r)| r == self.rank)
            .expect("this rank has the colour");
        let slots = Comm::take_area(eng, &a, &members);
        Ok(Some(Comm {
            rank,
            members,
            id: a.id,
            seq: 0,
            slots,
        }))
    }
}

/// What the members of a parent agree on when making a communicator.
struct Agreed {
    id: u32,
    free: u64,
    epoch: u64,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
