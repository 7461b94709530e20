//! Integer, byte and bool kernels. Arithmetic wraps (two's complement), as MPICH's C does.

use super::{zip_apply, KernelFn, Op, Pod};

pub(crate) trait Int: Pod + Ord {
    const ZERO: Self;
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    /// MPICH's MAX: `d > s ? d : s`.
    #[inline(always)]
    fn max_of(s: Self, d: Self) -> Self {
        if d > s {
            d
        } else {
            s
        }
    }
    /// MPICH's MIN: `d < s ? d : s`.
    #[inline(always)]
    fn min_of(s: Self, d: Self) -> Self {
        if d < s {
            d
        } else {
            s
        }
    }
}

macro_rules! impl_int {
    ($t:ty $(, $extra:item)*) => {
        impl Int for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn or(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            $($extra)*
        }
    };
}
impl_int!(i8);
impl_int!(u8);
impl_int!(i16);
impl_int!(u16);
impl_int!(i32);
impl_int!(u32);

// Baseline x86-64 (SSE2) has no 64-bit compare, so LLVM leaves `if d > s` on 64-bit lanes
// scalar. Computing the comparison as a sign bit with 64-bit sub/and/or/shift (Hacker's
// Delight 2-12) vectorises and gives the same value (on a tie both candidates are equal).
macro_rules! impl_int64 {
    ($t:ty, $lt:expr) => {
        impl_int!(
            $t,
            #[inline(always)]
            fn max_of(s: Self, d: Self) -> Self {
                select(s as u64, d as u64, ($lt)(s as u64, d as u64)) as $t
            },
            #[inline(always)]
            fn min_of(s: Self, d: Self) -> Self {
                select(s as u64, d as u64, ($lt)(d as u64, s as u64)) as $t
            }
        );
    };
}

/// `d` where the sign bit of `keep_d` is set, else `s`.
#[inline(always)]
fn select(s: u64, d: u64, keep_d: u64) -> u64 {
    let mask = 0u64.wrapping_sub(keep_d >> 63);
    s ^ ((s ^ d) & mask)
}

// Sign bit of the result = (x < y). Signed: differing signs decide, else x - y cannot overflow.
impl_int64!(i64, |x: u64, y: u64| (x & !y)
    | (!(x ^ y) & x.wrapping_sub(y)));
// Unsigned: differing top bits decide, else the borrow of x - y does.
impl_int64!(u64, |x: u64, y: u64| (!x & y)
    | (!(x ^ y) & x.wrapping_sub(y)));

#[inline(always)]
fn truth<T: Int>(b: bool) -> T {
    if b {
        T::ONE
    } else {
        T::ZERO
    }
}

#[inline(always)]
pub(super) fn max<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, T::max_of)
}
#[inline(always)]
pub(super) fn min<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, T::min_of)
}
#[inline(always)]
pub(super) fn sum<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s.wadd(d))
}
#[inline(always)]
pub(super) fn prod<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s.wmul(d))
}
fn land<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) & (d != T::ZERO)))
}
fn lor<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) | (d != T::ZERO)))
}
fn lxor<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| truth((s != T::ZERO) ^ (d != T::ZERO)))
}
fn band<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s.and(d))
}
fn bor<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s.or(d))
}
fn bxor<T: Int>(s: &[u8], d: &mut [u8]) {
    zip_apply::<T>(s, d, |s, d| s.xor(d))
}

/// Every op except MINLOC/MAXLOC (and Replace/NoOp, handled by the caller).
pub(crate) fn kernel<T: Int>(op: Op) -> Option<KernelFn> {
    Some(match op {
        Op::Max => max::<T>,
        Op::Min => min::<T>,
        Op::Sum => sum::<T>,
        Op::Prod => prod::<T>,
        Op::Land => land::<T>,
        Op::Lor => lor::<T>,
        Op::Lxor => lxor::<T>,
        Op::Band => band::<T>,
        Op::Bor => bor::<T>,
        Op::Bxor => bxor::<T>,
        Op::MinLoc | Op::MaxLoc | Op::Replace | Op::NoOp => return None,
    })
}

/// Opaque bytes combine only bitwise.
pub(crate) fn byte_kernel(op: Op) -> Option<KernelFn> {
    match op {
        Op::Band | Op::Bor | Op::Bxor => kernel::<u8>(op),
        _ => None,
    }
}

/// C `_Bool` combines only logically; any non-zero byte is true and results are 0/1.
pub(crate) fn bool_kernel(op: Op) -> Option<KernelFn> {
    match op {
        Op::Land | Op::Lor | Op::Lxor => kernel::<u8>(op),
        _ => None,
    }
}
