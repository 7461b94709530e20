//! binary16 and bfloat16: converted to f32, combined in f32, rounded back to nearest, ties
//! to even. The conversions are written with selects rather than early returns so the
//! kernel loops stay branch-free and vectorise.

use super::{KernelFn, Op};

/// Exact binary16 -> f32 (NaN payloads kept, signalling NaNs stay signalling).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let em = ((h & 0x7fff) as u32) << 13; // exponent and mantissa, aligned to f32's
    let exp = em & 0x0f80_0000;
    let normal = em + ((127 - 15) << 23);
    // Inf/NaN: exponent all ones.
    let special = em + ((255 - 31) << 23);
    // Subnormal m * 2^-24: give it 2^-14 as implicit one, then subtract 2^-14 (exact).
    let sub = (f32::from_bits(em + (113 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let bits = if exp == 0x0f80_0000 {
        special
    } else if exp == 0 {
        sub
    } else {
        normal
    };
    f32::from_bits(sign | bits)
}

/// f32 -> binary16, rounding to nearest, ties to even; overflow gives infinity and a NaN
/// stays a (quiet) NaN with the top of its payload.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    // At or above 65536.0 the result is Inf (or NaN); below 2^-14 it is subnormal.
    const F16_OVERFLOW: u32 = (127 + 16) << 23;
    const F16_MIN_NORMAL: u32 = 113 << 23;
    // Adding 0.5 puts the 2^-24 unit of f16 subnormals at f32's last mantissa bit, so the
    // f32 add does the round-to-nearest-even for us. A denormals-are-zero mode changes only
    // f32 subnormal inputs, which round to zero anyway.
    const DENORM_MAGIC: u32 = 126 << 23;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let f = bits & 0x7fff_ffff;
    let inf_nan = if f > 0x7f80_0000 {
        0x7e00 | ((f >> 13) & 0x3ff) as u16
    } else {
        0x7c00
    };
    let sub = (f32::from_bits(f) + f32::from_bits(DENORM_MAGIC))
        .to_bits()
        .wrapping_sub(DENORM_MAGIC) as u16;
    // Normal: rebias, add half an f16 ulp minus one plus the kept lsb (ties to even).
    let odd = (f >> 13) & 1;
    let normal = (f
        .wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff))
        .wrapping_add(odd)
        >> 13) as u16;
    let h = if f >= F16_OVERFLOW {
        inf_nan
    } else if f < F16_MIN_NORMAL {
        sub
    } else {
        normal
    };
    sign | h
}

/// Exact bfloat16 -> f32.
#[inline(always)]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 -> bfloat16, rounding to nearest, ties to even; a NaN stays a quiet NaN.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    let nan = ((b >> 16) as u16) | 0x0040;
    if x.is_nan() {
        nan
    } else {
        rounded
    }
}

macro_rules! half_kernels {
    ($modname:ident, $to:path, $from:path, $one:expr) => {
        pub(super) mod $modname {
            use super::super::{zip_apply, KernelFn, Op};
            #[inline(always)]
            fn via_f32(s: &[u8], d: &mut [u8], f: impl Fn(f32, f32) -> f32) {
                zip_apply::<u16>(s, d, |s, d| $from(f($to(s), $to(d))))
            }
            #[inline(always)]
            pub(in crate::reduce) fn max(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| if d > s { d } else { s })
            }
            #[inline(always)]
            pub(in crate::reduce) fn min(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| if d < s { d } else { s })
            }
            #[inline(always)]
            pub(in crate::reduce) fn sum(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| s + d)
            }
            #[inline(always)]
            pub(in crate::reduce) fn prod(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| s * d)
            }
            // Logical ops only need "is it zero" (either sign), which the bits tell directly.
            #[inline(always)]
            fn logic(s: &[u8], d: &mut [u8], f: impl Fn(bool, bool) -> bool) {
                zip_apply::<u16>(s, d, |s, d| {
                    if f(s & 0x7fff != 0, d & 0x7fff != 0) {
                        $one
                    } else {
                        0
                    }
                })
            }
            fn land(s: &[u8], d: &mut [u8]) {
                logic(s, d, |a, b| a & b)
            }
            fn lor(s: &[u8], d: &mut [u8]) {
                logic(s, d, |a, b| a | b)
            }
            fn lxor(s: &[u8], d: &mut [u8]) {
                logic(s, d, |a, b| a ^ b)
            }
            pub(crate) fn kernel(op: Op) -> Option<KernelFn> {
                Some(match op {
                    Op::Max => max,
                    Op::Min => min,
                    Op::Sum => sum,
                    Op::Prod => prod,
                    Op::Land => land,
                    Op::Lor => lor,
                    Op::Lxor => lxor,
                    _ => return None,
                })
            }
        }
    };
}

half_kernels!(f16k, super::f16_to_f32, super::f32_to_f16, 0x3c00);
half_kernels!(bf16k, super::bf16_to_f32, super::f32_to_bf16, 0x3f80);

pub(crate) fn f16_kernel(op: Op) -> Option<KernelFn> {
    f16k::kernel(op)
}

pub(crate) fn bf16_kernel(op: Op) -> Option<KernelFn> {
    bf16k::kernel(op)
}
