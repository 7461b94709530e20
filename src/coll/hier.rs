//! Host-aware collectives, for communicators that span several hosts with
//! several ranks on some of them: the ranks of each host combine over
//! shared memory first, one rank per host (its representative) talks
//! across hosts, and the result spreads inside each host afterwards. Across
//! hosts this moves one copy of the data per host instead of one per rank.
//!
//! The phases run on parts of the communicator within one call, each with
//! its own range of step numbers, so their messages never match each other.

use super::{allgather, allreduce, bcast, even_blocks, reduce, reduce_scatter, Ctx, Reducer};
use crate::copy::copy;
use crate::error::{Error, Result};

/// Step offsets of the phases within a call's tags.
const INWARD: u32 = 0x4000;
const ACROSS: u32 = 0x8000;
const OUTWARD: u32 = 0xC000;

/// How a communicator's ranks sit on hosts.
pub struct Layout {
    /// Ranks per host, hosts in order of their first rank.
    groups: Vec<Vec<usize>>,
    /// The group holding this rank.
    mine: usize,
}

impl Layout {
    /// The host layout when a host-aware algorithm pays for `coll`: the
    /// members span several hosts and some host has more than one of them;
    /// `FERROCOLL_ALGO=<coll>=flat` turns it off.
    pub fn of(c: &Ctx, coll: &str) -> Option<Layout> {
        if c.size() < 3 || c.has_slots() || c.forced(coll) == Some("flat") {
            return None;
        }
        let groups = c.host_groups()?;
        if groups.iter().all(|g| g.len() == 1) {
            return None;
        }
        let mine = groups.iter().position(|g| g.contains(&c.rank()))?;
        Some(Layout { groups, mine })
    }

    /// Each host's representative: `root` on the root's host, else the
    /// host's first rank.
    fn reps(&self, root: Option<usize>) -> Vec<usize> {
        self.groups
            .iter()
            .map(|g| root.filter(|r| g.contains(r)).unwrap_or(g[0]))
            .collect()
    }

    fn group(&self) -> &[usize] {
        &self.groups[self.mine]
    }

    /// Whether the hosts hold aligned blocks of ranks (`0..k`, `k..2k`,
    /// ...) with `k` and the host count powers of two. Recursive doubling
    /// then pairs ranks on one host for its first `log2 k` steps and crosses
    /// hosts only in the last `log2 hosts`, as often as the host-aware
    /// allreduce does, in `log2 k` fewer steps (that one also reduces and
    /// broadcasts inside each host).
    pub fn aligned_blocks(&self) -> bool {
        let k = self.groups[0].len();
        k.is_power_of_two()
            && self.groups.len().is_power_of_two()
            && self
                .groups
                .iter()
                .enumerate()
                .all(|(h, g)| g.len() == k && g.iter().enumerate().all(|(i, &r)| r == h * k + i))
    }
}

fn index_of(v: &[usize], x: usize) -> usize {
    v.iter()
        .position(|&y| y == x)
        .expect("member of its own group")
}

/// Smallest vector that `allreduce` cuts into slices, one per rank of a
/// host, on its own (`FERROCOLL_ALGO=allreduce=slices` forces them).
const SLICES_FROM: usize = 64 * 1024;

/// Allreduce (commutative ops). When every host has the same number of
/// ranks, large vectors go in slices (`slices`); otherwise: reduce to each
/// host's first rank, allreduce among those, broadcast inside each host.
/// `send == None`: in place.
pub fn allreduce(
    c: &mut Ctx,
    l: &Layout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    red: &Reducer,
) -> Result<()> {
    let k = l.group().len();
    let even = l.groups.iter().all(|g| g.len() == k) && recv.len() / red.extent.max(1) >= k;
    let wanted = match c.forced("allreduce") {
        Some("slices") => true,
        Some(_) => false,
        None => recv.len() >= SLICES_FROM,
    };
    if even && wanted {
        return slices(c, l, send, recv, red);
    }
    let reps = l.reps(None);
    let group = l.group();
    let is_rep = reps[l.mine] == c.rank();
    let mut inner = c.view_of(group)?;
    {
        let mut sc = c.sub(&mut inner, INWARD);
        if is_rep {
            reduce::reduce(&mut sc, send, Some(recv), 0, red)?;
        } else {
            let input = match send {
                Some(s) => s,
                None => &*recv,
            };
            reduce::reduce(&mut sc, Some(input), None, 0, red)?;
        }
    }
    if is_rep {
        let mut across = c.view_of(&reps)?;
        allreduce::allreduce(&mut c.sub(&mut across, ACROSS), None, recv, red)?;
    }
    bcast::bcast(&mut c.sub(&mut inner, OUTWARD), recv, 0)
}

/// Allreduce in slices, for hosts with `k` ranks each: reduce-scatter
/// inside each host (slice `j` to its `j`-th rank), allreduce of slice `j`
/// among the hosts' `j`-th ranks, allgather inside each host. Every rank
/// carries `1/k` of the traffic across hosts, so a host's ranks drive `k`
/// connections at once instead of one, and none of them waits idle while
/// its representative talks.
fn slices(
    c: &mut Ctx,
    l: &Layout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    red: &Reducer,
) -> Result<()> {
    let group = l.group();
    let j = index_of(group, c.rank());
    let blocks = even_blocks(recv.len(), red.extent, group.len());
    let counts: Vec<usize> = blocks.iter().map(|b| b.1).collect();
    let (o, len) = blocks[j];
    let mut inner = c.view_of(group)?;
    let peers: Vec<usize> = l.groups.iter().map(|g| g[j]).collect();
    let across = |c: &mut Ctx, slice: &mut [u8]| {
        let mut view = c.view_of(&peers)?;
        allreduce::allreduce(&mut c.sub(&mut view, ACROSS), None, slice, red)
    };
    match send {
        // The slice lands straight in its place in `recv`.
        Some(s) => {
            let slice = &mut recv[o..o + len];
            reduce_scatter::reduce_scatter(
                &mut c.sub(&mut inner, INWARD),
                Some(s),
                slice,
                &counts,
                red,
            )?;
            across(c, slice)?;
        }
        // In place the input is still needed until the reduce-scatter ends.
        None => {
            let mut part = c.scratch(len);
            let mut r = reduce_scatter::reduce_scatter(
                &mut c.sub(&mut inner, INWARD),
                Some(recv),
                &mut part,
                &counts,
                red,
            );
            if r.is_ok() {
                r = across(c, &mut part);
            }
            if r.is_ok() {
                copy(&mut recv[o..o + len], &part);
            }
            c.give_back(part);
            r?;
        }
    }
    allgather::allgatherv(&mut c.sub(&mut inner, OUTWARD), None, recv, &blocks)
}

/// Broadcast: from the root to the other hosts' representatives, then
/// inside each host.
pub fn bcast(c: &mut Ctx, l: &Layout, buf: &mut [u8], root: usize) -> Result<()> {
    let reps = l.reps(Some(root));
    let my_rep = reps[l.mine];
    if c.rank() == my_rep {
        let mut across = c.view_of(&reps)?;
        let from = index_of(&reps, root);
        bcast::bcast(&mut c.sub(&mut across, ACROSS), buf, from)?;
    }
    let group = l.group();
    let mut inner = c.view_of(group)?;
    let from = index_of(group, my_rep);
    bcast::bcast(&mut c.sub(&mut inner, OUTWARD), buf, from)
}

/// Reduce (commutative ops): inside each host to its representative, then
/// among the representatives to the root. On the root `send == None`
/// means in place.
pub fn reduce(
    c: &mut Ctx,
    l: &Layout,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    let reps = l.reps(Some(root));
    let my_rep = reps[l.mine];
    let group = l.group();
    let mut inner = c.view_of(group)?;
    let to = index_of(group, my_rep);
    let me = c.rank();
    if me == root {
        let out =
            recv.ok_or_else(|| Error::InvalidArg("reduce: no receive buffer at the root".into()))?;
        reduce::reduce(
            &mut c.sub(&mut inner, INWARD),
            send,
            Some(&mut *out),
            to,
            red,
        )?;
        let mut across = c.view_of(&reps)?;
        let at = index_of(&reps, root);
        return reduce::reduce(&mut c.sub(&mut across, ACROSS), None, Some(out), at, red);
    }
    let input = send.ok_or_else(|| Error::InvalidArg("reduce: no send buffer".into()))?;
    if me != my_rep {
        return reduce::reduce(&mut c.sub(&mut inner, INWARD), Some(input), None, to, red);
    }
    let mut part = c.scratch(input.len());
    let mut r = reduce::reduce(
        &mut c.sub(&mut inner, INWARD),
        Some(input),
        Some(&mut part),
        to,
        red,
    );
    if r.is_ok() {
        let mut across = c.view_of(&reps)?;
        let at = index_of(&reps, root);
        r = reduce::reduce(&mut c.sub(&mut across, ACROSS), Some(&part), None, at, red);
    }
    c.give_back(part);
    r
}

#[cfg(test)]
mod tests {
    use super::Layout;

    fn layout(groups: &[&[usize]]) -> Layout {
        Layout {
            groups: groups.iter().map(|g| g.to_vec()).collect(),
            mine: 0,
        }
    }

    #[test]
    fn aligned_blocks_need_equal_power_of_two_blocks_in_rank_order() {
        assert!(layout(&[&[0, 1], &[2, 3]]).aligned_blocks());
        assert!(layout(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]).aligned_blocks());
        assert!(layout(&[&[0], &[1], &[2], &[3]]).aligned_blocks());
        // Interleaved, uneven, three hosts, three ranks a host.
        assert!(!layout(&[&[0, 2], &[1, 3]]).aligned_blocks());
        assert!(!layout(&[&[0, 1], &[2]]).aligned_blocks());
        assert!(!layout(&[&[0, 1], &[2, 3], &[4, 5]]).aligned_blocks());
        assert!(!layout(&[&[0, 1, 2], &[3, 4, 5]]).aligned_blocks());
    }
}
