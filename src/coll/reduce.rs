//! Reduce to a root: binomial tree (rank order kept for non-commutative
//! ops by reducing to rank 0 first), or ring reduce-scatter + gather.

use super::reduce_scatter::PIECE;
use super::{even_blocks, gather, hier, pull, reduce_scatter, select, slots, stream, Ctx, Reducer};
use crate::copy::copy;
use crate::error::{Error, Result};
use crate::transport::shm::slots::SLOT_DATA;

/// Reduces every rank's `bytes` into `recv` on `root`. `send` is the
/// contribution; on the root `send == None` means in place (input in `recv`).
pub fn reduce(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    // Slots first: a communicator with slots is never split by host.
    if c.size() > 1 {
        let bytes = send.or(recv.as_deref()).map_or(0, <[u8]>::len);
        if select::pull(c, "reduce", bytes, select::pull_reduce)?
            && pull::reduce(c, send, recv.as_deref_mut(), root, red)?
        {
            return Ok(());
        }
        let (fits, cheap) = (
            bytes <= SLOT_DATA,
            bytes * c.size() <= select::read_limit(c, "reduce"),
        );
        if select::slots(c, "reduce", fits, cheap) {
            return slots::reduce(c, send, recv, root, red);
        }
    }
    if red.commutative {
        if let Some(l) = hier::Layout::of(c, "reduce") {
            return hier::reduce(c, &l, send, recv, root, red);
        }
    }
    let bytes = match (send, recv.as_deref()) {
        (Some(s), _) => s.len(),
        (None, Some(r)) => r.len(),
        (None, None) => return Err(Error::InvalidArg("reduce without a buffer".into())),
    };
    if c.size() == 1 {
        if let (Some(out), Some(s)) = (recv, send) {
            copy(out, s);
        }
        return Ok(());
    }
    match select::reduce(c, bytes, red.extent, red.commutative) {
        select::Reduce::Stream => stream::reduce(c, send, recv, root, red),
        select::Reduce::Binomial => match send {
            Some(s) => binomial(c, s, recv, root, red),
            None => {
                // In place at the root: the input is what `recv` holds now.
                let out = recv.expect("checked above");
                let input = c.copy_of(out);
                let r = binomial(c, &input, Some(out), root, red);
                c.give_back(input);
                r
            }
        },
        select::Reduce::Rsag => {
            let mut data = c.scratch(bytes);
            let blocks = even_blocks(bytes, red.extent, c.size());
            let input = send.unwrap_or_else(|| recv.as_deref().expect("checked above"));
            let mut res = reduce_scatter::ring(c, Some(input), &mut data, &blocks, red);
            if res.is_ok() {
                let (o, l) = blocks[c.rank()];
                res = gather::gatherv(c, Some(&data[o..o + l]), recv, &blocks, root);
            }
            c.give_back(data);
            res
        }
    }
}

/// Binomial-tree reduction of every rank's `input` into `out` on the root
/// (`out` is only used there). Non-commutative ops are reduced to rank 0 in
/// rank order, then moved to the root. Leaves send their input as it is;
/// only inner ranks copy it.
pub fn binomial(
    c: &mut Ctx,
    input: &[u8],
    mut out: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let target = if red.commutative { root } else { 0 };
    let vr = (r + n - target) % n;
    // A rank receives partial results iff its lowest bit is clear and it
    // has a right neighbour; others send their own input once.
    let receives = vr % 2 == 0 && vr + 1 < n;
    if !receives && vr != 0 {
        let mask = vr & vr.wrapping_neg();
        let parent = (vr - mask + target) % n;
        c.send(mask.trailing_zeros(), parent, input)?;
        // A root that is not the target gets the result from it.
        if let (true, Some(o)) = (r == root && target != root, out) {
            c.recv(31, target, o)?;
        }
        return Ok(());
    }
    // With a commutative op, the first partial result lands straight in
    // the accumulator and this rank's input is folded into it as it
    // arrives; otherwise the accumulator starts as a copy of the input.
    let fold_input = red.commutative;
    let mut own = Vec::new();
    let acc: &mut [u8] = match out.as_deref_mut() {
        Some(o) if r == root && target == root => {
            if !fold_input {
                copy(o, input);
            }
            o
        }
        _ => {
            own = if fold_input {
                c.scratch(input.len())
            } else {
                c.copy_of(input)
            };
            &mut own
        }
    };
    let piece = (PIECE / red.extent).max(1) * red.extent;
    let mut has_input = !fold_input;
    let mut tmp = Vec::new();
    let (mut mask, mut step) = (1, 0);
    while mask < n {
        if vr & mask == 0 {
            let peer = vr | mask;
            if peer < n {
                let from = (peer + target) % n;
                if has_input {
                    if tmp.is_empty() {
                        tmp = c.scratch(input.len());
                    }
                    // acc covers ranks [vr, vr+mask), tmp the ones right after.
                    c.sendrecv_folding(step, None, (from, &mut tmp), piece, |off, got| {
                        let a = &mut acc[off..off + got.len()];
                        if red.commutative {
                            red.fold_left(got, a);
                        } else {
                            red.fold_right(a, got);
                        }
                    })?;
                } else {
                    c.sendrecv_folding(step, None, (from, &mut *acc), piece, |off, got| {
                        red.fold_left(&input[off..off + got.len()], got)
                    })?;
                    has_input = true;
                }
            }
        } else {
            c.send(step, (vr - mask + target) % n, acc)?;
            break;
        }
        mask <<= 1;
        step += 1;
    }
    if !has_input {
        // Nothing arrived (a single rank): the result is the input.
        copy(acc, input);
    }
    c.give_back(tmp);
    if target != root {
        if r == target {
            c.send(31, root, &own)?;
        } else if let (true, Some(o)) = (r == root, out) {
            c.recv(31, target, o)?;
        }
    }
    c.give_back(own);
    Ok(())
}
