//! f32/f64 kernels: plain IEEE arithmetic, no fused multiply-add (matches C without -ffast-math).

use super::{zip_apply, KernelFn, Op, Pod};
use core::ops::{Add, Mul};

pub(crate) trait Float: Pod + PartialOrd + Add<Output = Self> + Mul<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
}
impl Float for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}
impl Float for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

#[inline(always)]
fn truth<T: Float>(b: bool) -> T {
    if b {
        T::ONE
    } else {
        T::ZERO
    }
}

// `d > s ? d : s` is MPICH's MPL_MAX(inout, in): dst is kept on ties and when either is NaN
// takes src; it also maps onto maxps/maxpd.
#[inline(always)]
pub(super) fn max<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| if d > s { d } else { s })
}
#[inline(always)]
pub(super) fn min<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| if d < s { d } else { s })
}
#[inline(always)]
pub(super) fn sum<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s + d)
}
#[inline(always)]
pub(super) fn prod<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s * d)
}
// Logical ops on floats: C's `x != 0` (NaN is true, -0.0 is false); result 1.0 or 0.0.
fn land<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) & (d != T::ZERO)))
}
fn lor<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) | (d != T::ZERO)))
}
fn lxor<T: Float>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) ^ (d != T::ZERO)))
}

pub(crate) fn kernel<T: Float>(op: Op) -> Option<KernelFn> {
    Some(match op {
        Op::Max => max::<T>,
        Op::Min => min::<T>,
        Op::Sum => sum::<T>,
        Op::Prod => prod::<T>,
        Op::Land => land::<T>,
        Op::Lor => lor::<T>,
        Op::Lxor => lxor::<T>,
        _ => return None,
    })
}
