//! Barrier: flags in the collective slots, or dissemination in
//! ceil(log2 n) rounds of empty messages.

use super::{select, slots, Ctx};
use crate::error::Result;

/// Returns once every rank has entered.
pub fn barrier(c: &mut Ctx) -> Result<()> {
    if select::slots(c, "barrier", c.size() > 1, true) {
        return slots::barrier(c);
    }
    let (n, r) = (c.size(), c.rank());
    let (mut k, mut step) = (1, 0);
    while k < n {
        c.sendrecv(step, (r + k) % n, &[], (r + n - k) % n, &mut [])?;
        k <<= 1;
        step += 1;
    }
    Ok(())
}
