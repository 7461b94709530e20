//! Allreduce: recursive doubling (any op; operands combined in rank order
//! so every rank computes the same expression), ring reduce-scatter +
//! allgather for large commutative reductions, or reduce + broadcast.

use super::{
    allgather, bcast, even_blocks, hier, pull, reduce, reduce_scatter, select, slots, stream, Ctx,
    Reducer,
};
use crate::copy::copy;
use crate::error::Result;
use crate::transport::shm::slots::SLOT_DATA;

/// Reduces every rank's data into `recv` on all ranks; `send == None` means
/// in place (input in `recv`).
pub fn allreduce(c: &mut Ctx, send: Option<&[u8]>, recv: &mut [u8], red: &Reducer) -> Result<()> {
    if c.size() == 1 || recv.is_empty() {
        if let Some(s) = send {
            copy(recv, s);
        }
        return Ok(());
    }
    if select::pull(c, "allreduce", recv.len(), select::pull_allreduce)?
        && pull::allreduce(c, send, recv, red)?
    {
        return Ok(());
    }
    let (fits, cheap) = (
        recv.len() <= SLOT_DATA,
        recv.len() * c.size() <= select::read_limit(c, "allreduce"),
    );
    // Decided first: the small calls that take the slots then skip the
    // algorithm choice (a forced algorithm turns the slots off), and a
    // communicator with slots is never split by host.
    if select::slots(c, "allreduce", fits, cheap) {
        return slots::allreduce(c, send, recv, red);
    }
    let choice = select::allreduce(c, recv.len(), red.extent, red.commutative);
    if red.commutative {
        if let Some(l) = hier::Layout::of(c, "allreduce") {
            // Small vectors on aligned blocks of hosts: recursive doubling
            // takes fewer steps. 2 namespace hosts x 2 ranks over veth,
            // 8 B - 8 KiB: 18-20 us against 21-24 us host-aware.
            let doubling = choice == select::Allreduce::RecursiveDoubling
                && c.forced("allreduce").is_none()
                && l.aligned_blocks();
            if !doubling {
                return hier::allreduce(c, &l, send, recv, red);
            }
        }
    }
    if choice == select::Allreduce::Stream {
        return stream::allreduce(c, send, recv, red);
    }
    // The ring reads this rank's part straight from `send`; the others
    // work in `recv`.
    if choice != select::Allreduce::Ring {
        if let Some(s) = send {
            copy(recv, s);
        }
    }
    match choice {
        select::Allreduce::RecursiveDoubling | select::Allreduce::Stream => {
            recursive_doubling(c, recv, red)
        }
        select::Allreduce::Ring => {
            let blocks = even_blocks(recv.len(), red.extent, c.size());
            reduce_scatter::ring(c, send, recv, &blocks, red)?;
            allgather::ring_in_place(c, recv, &blocks)
        }
        select::Allreduce::ReduceBcast => {
            let input = c.copy_of(recv);
            let r = reduce::binomial(c, &input, Some(recv), 0, red);
            c.give_back(input);
            r?;
            bcast::bcast(c, recv, 0)
        }
    }
}

fn recursive_doubling(c: &mut Ctx, buf: &mut [u8], red: &Reducer) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p2;
    let mut tmp = c.scratch(buf.len());
    // Fold the first 2*rem ranks pairwise so a power of two remains; each
    // survivor stands for a contiguous run of ranks, keeping rank order.
    let nr = if r < 2 * rem {
        if r % 2 == 0 {
            c.send(0, r + 1, buf)?;
            None
        } else {
            c.recv(0, r - 1, &mut tmp)?;
            red.fold_left(&tmp, buf);
            Some(r / 2)
        }
    } else {
        Some(r - rem)
    };
    if let Some(nr) = nr {
        let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
        let (mut mask, mut step) = (1, 1);
        while mask < p2 {
            let pv = nr ^ mask;
            let peer = real(pv);
            c.sendrecv(step, peer, buf, peer, &mut tmp)?;
            if pv < nr {
                red.fold_left(&tmp, buf);
            } else {
                red.fold_right(buf, &mut tmp);
            }
            mask <<= 1;
            step += 1;
        }
    }
    if r < 2 * rem {
        if r % 2 == 0 {
            c.recv(30, r + 1, buf)?;
        } else {
            c.send(30, r - 1, buf)?;
        }
    }
    c.give_back(tmp);
    Ok(())
}
