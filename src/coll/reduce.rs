//! Reduce to a root: binomial tree (rank order kept for non-commutative
//! ops by reducing to rank 0 first), or ring reduce-scatter + gather.

use super::{even_blocks, gather, reduce_scatter, select, slots, Ctx, Reducer};
use crate::error::{Error, Result};
use crate::transport::shm::slots::SLOT_DATA;

/// Reduces every rank's `bytes` into `recv` on `root`. `send` is the
/// contribution; on the root `send == None` means in place (input in `recv`).
pub fn reduce(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    if c.size() > 1 {
        let bytes = send.or(recv.as_deref()).map_or(0, <[u8]>::len);
        let (fits, cheap) = (bytes <= SLOT_DATA, bytes * c.size() <= slots::READ_LIMIT);
        if select::slots(c, "reduce", fits, cheap) {
            return slots::reduce(c, send, recv, root, red);
        }
    }
    let input = match (send, recv.as_deref()) {
        (Some(s), _) => c.copy_of(s),
        (None, Some(r)) => c.copy_of(r),
        (None, None) => return Err(Error::InvalidArg("reduce without a buffer".into())),
    };
    let bytes = input.len();
    if c.size() == 1 {
        if let Some(out) = recv {
            out.copy_from_slice(&input);
        }
        return Ok(());
    }
    match select::reduce(c, bytes, red.extent, red.commutative) {
        select::Reduce::Binomial => {
            if let (Some(out), Some(res)) = (recv, binomial(c, input, root, red)?) {
                out.copy_from_slice(&res);
                c.give_back(res);
            }
            Ok(())
        }
        select::Reduce::Rsag => {
            let mut data = input;
            let blocks = even_blocks(bytes, red.extent, c.size());
            reduce_scatter::ring_in_place(c, &mut data, &blocks, red)?;
            let (o, l) = blocks[c.rank()];
            gather::gatherv(c, Some(&data[o..o + l]), recv, &blocks, root)?;
            c.give_back(data);
            Ok(())
        }
    }
}

/// Binomial-tree reduction of `acc` (this rank's contribution); the root
/// gets `Some(result)`. Non-commutative ops are reduced to rank 0 in rank
/// order, then moved to the root.
pub fn binomial(
    c: &mut Ctx,
    mut acc: Vec<u8>,
    root: usize,
    red: &Reducer,
) -> Result<Option<Vec<u8>>> {
    let (n, r) = (c.size(), c.rank());
    let target = if red.commutative { root } else { 0 };
    let vr = (r + n - target) % n;
    let mut tmp = c.zeroed(acc.len());
    let (mut mask, mut step) = (1, 0);
    while mask < n {
        if vr & mask == 0 {
            let peer = vr | mask;
            if peer < n {
                c.recv(step, (peer + target) % n, &mut tmp)?;
                // acc covers ranks [vr, vr+mask), tmp the ones right after.
                red.fold_right(&mut acc, &mut tmp);
            }
        } else {
            c.send(step, (vr - mask + target) % n, &acc)?;
            break;
        }
        mask <<= 1;
        step += 1;
    }
    c.give_back(tmp);
    if target != root {
        if r == target {
            c.send(31, root, &acc)?;
        } else if r == root {
            c.recv(31, target, &mut acc)?;
        }
    }
    if r == root {
        return Ok(Some(acc));
    }
    c.give_back(acc);
    Ok(None)
}
