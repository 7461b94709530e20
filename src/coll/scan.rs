//! Inclusive and exclusive prefix reductions: a chain in rank order, so
//! non-commutative ops are correct.

use super::{Ctx, Reducer};
use crate::copy::copy;
use crate::error::Result;

/// `recv` on rank r = x0 (op) ... (op) xr; `send == None` means in place.
pub fn scan(c: &mut Ctx, send: Option<&[u8]>, recv: &mut [u8], red: &Reducer) -> Result<()> {
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
