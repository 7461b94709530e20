//! MINLOC/MAXLOC on `struct { V value; int index; }` with the index at byte `IDX` and a
//! stride of `EXT` bytes. Only the value and index bytes are written; padding is left alone.

use super::{KernelFn, Op, Pod};

#[inline(always)]
fn index(e: &[u8], idx: usize) -> i32 {
    i32::load(&e[idx..])
}

/// MPI's rule with MPICH's comparisons: take src when it is strictly better, keep the
/// smaller index on a tie, otherwise keep dst (so a NaN on either side keeps dst).
#[inline(always)]
fn loc<V: Pod + PartialOrd, const IDX: usize, const EXT: usize>(
    src: &[u8],
    dst: &mut [u8],
    better: impl Fn(V, V) -> bool,
) {
    for (s, d) in src.chunks_exact(EXT).zip(dst.chunks_exact_mut(EXT)) {
        let (sv, dv) = (V::load(s), V::load(d));
        let (si, di) = (index(s, IDX), index(d, IDX));
        if better(sv, dv) {
            sv.store(d);
            si.store(&mut d[IDX..]);
        } else if sv == dv && si < di {
            si.store(&mut d[IDX..]);
        }
    }
}

fn minloc<V: Pod + PartialOrd, const IDX: usize, const EXT: usize>(s: &[u8], d: &mut [u8]) {
    loc::<V, IDX, EXT>(s, d, |s, d| d > s)
}
fn maxloc<V: Pod + PartialOrd, const IDX: usize, const EXT: usize>(s: &[u8], d: &mut [u8]) {
    loc::<V, IDX, EXT>(s, d, |s, d| d < s)
}

pub(crate) fn kernel<V: Pod + PartialOrd, const IDX: usize, const EXT: usize>(
    op: Op,
) -> Option<KernelFn> {
    match op {
        Op::MinLoc => Some(minloc::<V, IDX, EXT>),
        Op::MaxLoc => Some(maxloc::<V, IDX, EXT>),
        _ => None,
    }
}
