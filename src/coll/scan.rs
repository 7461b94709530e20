//! Inclusive and exclusive prefix reductions: small ones through the
//! collective slots, the rest as a chain of messages in rank order; both
//! keep the operands in rank order, so non-commutative ops are correct.

use super::{select, slots, Ctx, Reducer};
use crate::copy::copy;
use crate::error::Result;
use crate::transport::shm::slots::SLOT_DATA;

/// Whether a prefix reduction of `len` bytes goes through the slots
/// (`slots::scan`): wherever it fits a slot, unless another algorithm is
/// forced. Back to back, 20 untimed and then the median of 5 batches of
/// 2000 (200 from 32 KiB), the slowest rank, us a call, chain / slots
/// (Open MPI): 2 ranks 8 B 0.140 / 0.079 (0.059), 2 KiB 0.229 / 0.128
/// (0.260), 32 KiB 1.74 / 1.20 (4.98); 3 ranks 8 B 0.281 / 0.179 (0.126-
/// 0.165), 512 B 0.476 / 0.218 (4.25), 8 KiB 5.58 / 0.702 (5.98); 4 ranks
/// on 2 cores 8 B 0.464 / 0.197 (0.199-0.203), 2 KiB 2.34 / 0.398 (3.59),
/// 32 KiB 8.15 / 6.55 (18.8); 8 ranks 8 B 1.13 / 0.555 (0.424), 8 KiB
/// 13.6 / 3.66 (21.1), 32 KiB 21.5 / 16.3 (32.4). In the chain each rank
/// waited for the one before it, which had waited for its own: a call's
/// latency grew with the rank, where through the slots a rank waits only
/// for the parts below it, written at once.
fn through_slots(c: &Ctx, len: usize) -> bool {
    select::slots(c, "scan", c.size() > 1 && len <= SLOT_DATA, true)
}

/// `recv` on rank r = x0 (op) ... (op) xr; `send == None` means in place.
pub fn scan(c: &mut Ctx, send: Option<&[u8]>, recv: &mut [u8], red: &Reducer) -> Result<()> {
    if through_slots(c, recv.len()) {
        return slots::scan(c, send, recv, red, false);
    }
    let (n, r) = (c.size(), c.rank());
    if let Some(s) = send {
        copy(recv, s);
    }
    if r > 0 {
        let mut prefix = vec![0u8; recv.len()];
        c.recv(0, r - 1, &mut prefix)?;
        red.fold_left(&prefix, recv);
    }
    if r + 1 < n {
        c.send(0, r + 1, recv)?;
    }
    Ok(())
}

/// `recv` on rank r = x0 (op) ... (op) x(r-1); rank 0's `recv` is left
/// unchanged (undefined in MPI). `send == None` means in place.
pub fn exscan(c: &mut Ctx, send: Option<&[u8]>, recv: &mut [u8], red: &Reducer) -> Result<()> {
    if through_slots(c, recv.len()) {
        return slots::scan(c, send, recv, red, true);
    }
    let (n, r) = (c.size(), c.rank());
    let mut mine = send.unwrap_or(recv).to_vec();
    if r > 0 {
        c.recv(0, r - 1, recv)?;
        // What goes on: prefix (op) mine.
        red.fold_left(recv, &mut mine);
    }
    if r + 1 < n {
        c.send(0, r + 1, &mine)?;
    }
    Ok(())
}
