//! Complex float/double kernels (C `_Complex`: re then im). SUM and PROD only, as in MPI.

use super::float::Float;
use super::{KernelFn, Op};
use core::ops::Sub;

#[inline(always)]
fn zip_complex<T: Float>(src: &[u8], dst: &mut [u8], f: impl Fn([T; 2], [T; 2]) -> [T; 2]) {
    let n = 2 * T::SIZE;
    for (s, d) in src.chunks_exact(n).zip(dst.chunks_exact_mut(n)) {
        let sv = [T::load(s), T::load(&s[T::SIZE..])];
        let dv = [T::load(d), T::load(&d[T::SIZE..])];
        let [re, im] = f(sv, dv);
        re.store(d);
        im.store(&mut d[T::SIZE..]);
    }
}

fn sum<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_complex::<T>(s, d, |s, d| [s[0] + d[0], s[1] + d[1]])
}

// The textbook product, the same as C's `a * b` for finite values (MPICH's a[i] *= b[i]).
fn prod<T: Float + Sub<Output = T>>(s: &[u8], d: &mut [u8]) {
    zip_complex::<T>(s, d, |s, d| {
        [d[0] * s[0] - d[1] * s[1], d[0] * s[1] + d[1] * s[0]]
    })
}

pub(crate) fn kernel<T: Float + Sub<Output = T>>(op: Op) -> Option<KernelFn> {
    match op {
        Op::Sum => Some(sum::<T>),
        Op::Prod => Some(prod::<T>),
        _ => None,
    }
}
