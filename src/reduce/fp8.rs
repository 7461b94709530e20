//! 8-bit floats as NCCL and CUDA's `__nv_fp8_*` define them: E4M3 (bias 7, no
//! infinities, one NaN pattern per sign, largest 448) and E5M2 (the top byte
//! of a binary16: bias 15, infinities, largest finite 57344). Operands are
//! widened to f32 exactly, combined in f32, and rounded back once to nearest,
//! ties to even, saturating to the largest finite value (CUDA's
//! `__NV_SATFINITE`); a NaN stays a NaN.

use super::{zip_apply, KernelFn, Op};

/// Decoded E4M3 values as f32 bit patterns, built at compile time.
const E4M3_BITS: [u32; 256] = e4m3_table();

const fn e4m3_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let sign = ((b as u32) & 0x80) << 24;
        let e = ((b >> 3) & 0xf) as u32;
        let m = (b & 7) as u32;
        let mag = if e == 15 && m == 7 {
            0x7fc0_0000
        } else if e == 0 {
            if m == 0 {
                0
            } else {
                // m * 2^-9: leading bit p of m gives exponent p - 9.
                let p = 31 - m.leading_zeros();
                let exp = (p as i32 - 9 + 127) as u32;
                (exp << 23) | ((m - (1 << p)) << (23 - p))
            }
        } else {
            ((e + 127 - 7) << 23) | (m << 20)
        };
        t[b] = sign | mag;
        b += 1;
    }
    t
}

/// Exact E4M3 -> f32.
#[inline(always)]
pub fn e4m3_to_f32(b: u8) -> f32 {
    f32::from_bits(E4M3_BITS[b as usize])
}

/// Exact E5M2 -> f32 (E5M2 is binary16 without its low byte).
#[inline(always)]
pub fn e5m2_to_f32(b: u8) -> f32 {
    super::f16_to_f32((b as u16) << 8)
}

/// An 8-bit float format: mantissa bits, exponent bias, largest finite value.
struct Format {
    man: i32,
    bias: i32,
    max: f64,
    nan: u8,
}

const E4M3: Format = Format {
    man: 3,
    bias: 7,
    max: 448.0,
    nan: 0x7f,
};

const E5M2: Format = Format {
    man: 2,
    bias: 15,
    max: 57344.0,
    nan: 0x7f,
};

/// Rounds `x` to the format, ties to even, saturating at its largest
/// finite value (infinities included); NaN gives the format's NaN.
fn encode(x: f32, f: &Format) -> u8 {
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    if x.is_nan() {
        return sign | f.nan;
    }
    let a = (x as f64).abs();
    if a == 0.0 {
        return sign;
    }
    let min_exp = 1 - f.bias;
    let exp_of = |v: f64| ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    // Exact: scaling by powers of two and rounding an f64 holding an f32.
    let spacing = super::pow2(exp_of(a).max(min_exp) - f.man);
    let v = ((a / spacing).round_ties_even() * spacing).min(f.max);
    let bits = if v < super::pow2(min_exp) {
        (v / super::pow2(min_exp - f.man)) as u8
    } else {
        let e = exp_of(v);
        let m = ((v / super::pow2(e) - 1.0) * super::pow2(f.man)) as u8;
        (((e + f.bias) as u8) << f.man) | m
    };
    sign | bits
}

/// f32 -> E4M3, nearest even, saturating (CUDA `__NV_SATFINITE`).
pub fn f32_to_e4m3(x: f32) -> u8 {
    encode(x, &E4M3)
}

/// f32 -> E5M2, nearest even, saturating (CUDA `__NV_SATFINITE`).
pub fn f32_to_e5m2(x: f32) -> u8 {
    encode(x, &E5M2)
}

macro_rules! fp8_kernels {
    ($modname:ident, $to:path, $from:path) => {
        mod $modname {
            use super::{zip_apply, KernelFn, Op};
            #[inline(always)]
            fn via_f32(s: &[u8], d: &mut [u8], f: impl Fn(f32, f32) -> f32) {
                zip_apply::<u8>(s, d, |s, d| $from(f($to(s), $to(d))))
            }
            fn max(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| if d > s { d } else { s })
            }
            fn min(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| if d < s { d } else { s })
            }
            fn sum(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| s + d)
            }
            fn prod(s: &[u8], d: &mut [u8]) {
                via_f32(s, d, |s, d| s * d)
            }
            pub(super) fn kernel(op: Op) -> Option<KernelFn> {
                Some(match op {
                    Op::Max => max,
                    Op::Min => min,
                    Op::Sum => sum,
                    Op::Prod => prod,
                    _ => return None,
                })
            }
        }
    };
}

fp8_kernels!(e4m3k, super::e4m3_to_f32, super::f32_to_e4m3);
fp8_kernels!(e5m2k, super::e5m2_to_f32, super::f32_to_e5m2);

/// Kernels on E4M3 (NCCL's arithmetic ops only).
pub(crate) fn e4m3_kernel(op: Op) -> Option<KernelFn> {
    e4m3k::kernel(op)
}

/// Kernels on E5M2 (NCCL's arithmetic ops only).
pub(crate) fn e5m2_kernel(op: Op) -> Option<KernelFn> {
    e5m2k::kernel(op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::pow2;

    #[test]
    fn e4m3_decodes_known_values() {
        assert_eq!(e4m3_to_f32(0x00), 0.0);
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0xfe), -448.0);
        assert_eq!(e4m3_to_f32(0x01), (pow2(-9) as f32));
        assert_eq!(e4m3_to_f32(0x07), 7.0 * (pow2(-9) as f32));
        assert_eq!(e4m3_to_f32(0x08), (pow2(-6) as f32));
        assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
    }

    #[test]
    fn every_code_round_trips() {
        for b in 0..=255u8 {
            let x = e4m3_to_f32(b);
            if x.is_nan() {
                assert_eq!(f32_to_e4m3(x) & 0x7f, 0x7f);
            } else {
                assert_eq!(f32_to_e4m3(x), b, "e4m3 {b:#04x}");
            }
            let y = e5m2_to_f32(b);
            if y.is_nan() {
                assert!(e5m2_to_f32(f32_to_e5m2(y)).is_nan());
            } else if y.is_infinite() {
                assert_eq!(e5m2_to_f32(f32_to_e5m2(y)), 57344f32.copysign(y));
            } else {
                assert_eq!(f32_to_e5m2(y), b, "e5m2 {b:#04x}");
            }
        }
    }

    #[test]
    fn rounds_to_nearest_even_and_saturates() {
        // Between 1.0 (0x38) and 1.125 (0x39): the tie goes to the even code.
        assert_eq!(f32_to_e4m3(1.0625), 0x38);
        assert_eq!(f32_to_e4m3(1.0626), 0x39);
        // Between 1.125 and 1.25 (0x3a): tie to even 0x3a.
        assert_eq!(f32_to_e4m3(1.1875), 0x3a);
        assert_eq!(f32_to_e4m3(1000.0), 0x7e);
        assert_eq!(f32_to_e4m3(f32::NEG_INFINITY), 0xfe);
        // Half the smallest subnormal ties to zero; a bit more goes up.
        assert_eq!(f32_to_e4m3(pow2(-10) as f32), 0x00);
        assert_eq!(f32_to_e4m3((pow2(-10) as f32) * 1.01), 0x01);
        assert_eq!(f32_to_e5m2(1e9), 0x7b);
        assert_eq!(f32_to_e5m2(1.0), 0x3c);
        assert_eq!(f32_to_e5m2(1.125), 0x3c);
        assert_eq!(f32_to_e5m2(1.375), 0x3e);
    }

    #[test]
    fn sums_round_once() {
        let k = e4m3_kernel(Op::Sum).expect("sum");
        // 448 + 16 = 464 is a tie between 448 and (missing) 480: saturates to 448.
        let mut d = [f32_to_e4m3(16.0), f32_to_e4m3(1.0)];
        k(&[0x7e, f32_to_e4m3(0.125)], &mut d);
        assert_eq!(e4m3_to_f32(d[0]), 448.0);
        assert_eq!(e4m3_to_f32(d[1]), 1.125);
        assert!(e4m3_kernel(Op::Band).is_none());
    }
}
