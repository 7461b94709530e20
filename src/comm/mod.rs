//! Communicators: a group of world ranks with a context id, over the
//! process's engine. Sub-communicators share the engine's links; their
//! messages are kept apart by context ids agreed collectively.

pub mod buffer;
pub mod engine;

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
}

impl Comm {
    /// All ranks of the engine's world.
    pub fn world(eng: &Engine) -> Comm {
        Comm {
            rank: eng.rank(),
            members: (0..eng.size()).collect(),
            id: 0,
            seq: 0,
        }
    }

    /// This rank alone.
    pub fn self_comm(eng: &Engine) -> Comm {
        Comm {
            rank: 0,
            members: Arc::from([eng.rank()]),
            id: 1,
            seq: 0,
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

    /// World ranks in communicator order.
    pub fn members(&self) -> &[usize] {
        &self.members
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
    /// maximum of each member's next free id).
    fn agree_ctx_id(&mut self, eng: &mut Engine) -> Result<u32> {
        let mine = eng.next_ctx_id.to_ne_bytes();
        let mut out = [0u8; 4];
        let max = |src: &[u8], dst: &mut [u8]| {
            let a = u32::from_ne_bytes(src.try_into().expect("4 bytes"));
            let b = u32::from_ne_bytes((&*dst).try_into().expect("4 bytes"));
            dst.copy_from_slice(&a.max(b).to_ne_bytes());
        };
        let red = Reducer {
            extent: 4,
            commutative: true,
            apply: &max,
        };
        coll::allreduce::allreduce(&mut Ctx::new(eng, self), Some(&mine), &mut out, &red)?;
        let id = u32::from_ne_bytes(out);
        if id >= u32::MAX / 2 - 1 {
            return Err(Error::Unsupported("more than 2^31 communicators".into()));
        }
        eng.next_ctx_id = id + 1;
        Ok(id)
    }

    /// A new communicator with the same members (`MPI_Comm_dup`).
    pub fn dup(&mut self, eng: &mut Engine) -> Result<Comm> {
        let id = self.agree_ctx_id(eng)?;
        Ok(Comm {
            rank: self.rank,
            members: self.members.clone(),
            id,
            seq: 0,
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
        let id = self.agree_ctx_id(eng)?;
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
        Ok(Some(Comm {
            rank,
            members,
            id,
            seq: 0,
        }))
    }
}
