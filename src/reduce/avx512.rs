//! Half-precision kernels for CPUs with AVX-512 (F, BW, VL, DQ) and its
//! bfloat16 extension, chosen at run time before the AVX2 ones. Each gives
//! bit for bit what the baseline kernel gives (a NaN stays a NaN).
//!
//! - bfloat16 SUM and PROD round back with `vcvtne2ps2bf16`: one instruction
//!   for 32 results instead of the AVX2 build's integer rounding (about 30
//!   instructions per 32 bytes). Criterion, 256 KiB in cache, on this AMD
//!   EPYC (Zen 4): 13.7 -> 29 GiB/s against memcpy's 48-49; widening by a
//!   shift and a mask instead of four unpacks, with one word permutation
//!   after the converter, 29 -> 31-33 against memcpy's 49-52 (the
//!   permutation costs 1.2 of the 7.7 us per 256 KiB; a qword permutation
//!   and a byte shuffle, a byte permutation, or rounding with integer
//!   operations instead of the converter were slower or no faster). The
//!   instruction treats a subnormal f32 as zero, which the baseline does not,
//!   so a step whose f32 results hold a subnormal goes through the baseline
//!   kernel instead (`vfpclassps` tells, one instruction per 16 results).
//! - binary16 MAX and MIN were here (widened to f32 by F16C's 16-wide
//!   converters, 21-24 -> 27 GiB/s); the AVX2 build now compares their
//!   bits as integers, with no converter (`avx2::lanes::f16_pick`, 39-40).
//!   binary16 SUM and PROD stay on the AVX2 build, bound by the converters
//!   (its 8-wide converters ran as fast as the 16-wide ones here).

use super::{half, in_steps, KernelFn, Op};
use crate::dtype::ElemType;
use std::arch::x86_64::*;

/// Whether this CPU runs the kernels here.
fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// The AVX-512 build of (op, ty), if there is one and this CPU runs it.
pub(super) fn kernel(op: Op, ty: ElemType) -> Option<KernelFn> {
    if !detected() {
        return None;
    }
    table(op, ty)
}

fn table(op: Op, ty: ElemType) -> Option<KernelFn> {
    use ElemType as T;
    Some(match (ty, op) {
        (T::Bf16, Op::Sum) => bf16_sum,
        (T::Bf16, Op::Prod) => bf16_prod,
        _ => return None,
    })
}

/// `dst = op(src, dst)` on bfloat16, 32 elements per step, rounded back to
/// nearest-even by the CPU and stored aligned (`split_head`); steps with a
/// subnormal f32 result, the head and the tail go through `scalar`, the
/// baseline kernel.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, DQ and BF16.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512bf16")]
unsafe fn bf16_apply(
    s: &[u8],
    d: &mut [u8],
    op: impl Fn(__m512, __m512) -> __m512,
    scalar: KernelFn,
) {
    // A shift widens each even element exactly into its 32-bit lane, a mask
    // each odd one; the converter returns the even results in its low half
    // and the odd ones in its high half, which this permutation interleaves.
    let order = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    let high = _mm512_set1_epi32(0xffff_0000u32 as i32);
    let widen = |v: __m512i| {
        (
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v)),
            _mm512_castsi512_ps(_mm512_and_si512(v, high)),
        )
    };
    const SUBNORMAL: i32 = 0x20;
    in_steps::<64>(s, d, 2, 64, scalar, |s, d| {
        let (sv, dv);
        // SAFETY: `in_steps` hands over 64 bytes of each; unaligned loads
        // of 64 bytes inside them.
        unsafe {
            sv = _mm512_loadu_si512(s.as_ptr() as *const __m512i);
            dv = _mm512_loadu_si512(d.as_ptr() as *const __m512i);
        }
        let ((s0, s1), (d0, d1)) = (widen(sv), widen(dv));
        let (r0, r1) = (op(s0, d0), op(s1, d1));
        if _mm512_fpclass_ps_mask::<SUBNORMAL>(r0) | _mm512_fpclass_ps_mask::<SUBNORMAL>(r1) != 0 {
            return scalar(s, d);
        }
        // SAFETY: both are 64 bytes of plain vector data.
        let packed: __m512i = unsafe { std::mem::transmute(_mm512_cvtne2ps_pbh(r1, r0)) };
        // SAFETY: as the loads: 64 bytes inside `d`.
        unsafe {
            _mm512_storeu_si512(
                d.as_mut_ptr() as *mut __m512i,
                _mm512_permutexvar_epi16(order, packed),
            )
        };
    });
}

/// The kernels `table` hands out: each calls its `_apply` function
/// with the operation and the baseline kernel for the steps it leaves.
macro_rules! kernels {
    ($($name:ident = $apply:ident($scalar:path, |$s:ident, $d:ident| $body:expr);)*) => {$(
        fn $name(s: &[u8], d: &mut [u8]) {
            // SAFETY: `kernel` hands this out only after `detected` found
            // every feature `$apply` is compiled for.
            unsafe { $apply(s, d, |$s, $d| $body, $scalar) }
        }
    )*};
}

kernels! {
    bf16_sum = bf16_apply(half::bf16k::sum, |s, d| _mm512_add_ps(s, d));
    bf16_prod = bf16_apply(half::bf16k::prod, |s, d| _mm512_mul_ps(s, d));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::tests::{assert_same_as_baseline, first_difference, xorshift_bytes};

    /// Every kernel here gives what the baseline gives, on arbitrary bytes.
    #[test]
    fn avx512_matches_baseline() {
        if !detected() {
            eprintln!("skipped: this CPU lacks AVX-512 BW/VL/DQ/BF16");
            return;
        }
        assert_eq!(assert_same_as_baseline(table), 2);
    }

    /// Sums whose f32 result is subnormal (the converter would flush them to
    /// zero) take the baseline path and keep their bits; steps without one
    /// beside them still round on the CPU. Fails if the check is removed.
    #[test]
    fn bf16_subnormal_results_keep_their_bits() {
        if !detected() {
            eprintln!("skipped: this CPU lacks AVX-512 BW/VL/DQ/BF16");
            return;
        }
        let elems = 32 * 8 + 5;
        let mut bytes = xorshift_bytes(7);
        let mut s = bytes(elems * 2);
        let d = bytes(elems * 2);
        // Every third step: smallest normal (0x0080) plus a negative
        // subnormal, whose sum is subnormal in f32.
        for step in (0..elems / 32).step_by(3) {
            let e = step * 32 + 7;
            s[e * 2..e * 2 + 2].copy_from_slice(&0x0080u16.to_ne_bytes());
        }
        let mut d = d;
        for step in (0..elems / 32).step_by(3) {
            let e = step * 32 + 7;
            d[e * 2..e * 2 + 2].copy_from_slice(&0x8011u16.to_ne_bytes());
        }
        for (k, base) in [
            (bf16_sum as KernelFn, half::bf16k::sum as KernelFn),
            (bf16_prod, half::bf16k::prod),
        ] {
            let (mut a, mut b) = (d.clone(), d.clone());
            base(&s, &mut a);
            k(&s, &mut b);
            let diff = first_difference(ElemType::Bf16, &a, &b);
            assert!(diff.is_none(), "element {diff:?} differs");
        }
        let sub = f32::from_bits(0x0080 << 16) + f32::from_bits(0x8011 << 16);
        assert!(sub.is_subnormal(), "the case must produce a subnormal");
    }
}
