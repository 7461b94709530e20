//! Kernels for CPUs with AVX-512 (F, BW, VL, DQ), chosen at run time before
//! the AVX2 ones. Each gives bit for bit what the baseline kernel gives (a
//! NaN stays a NaN). Figures: criterion (`benches/reduce.rs`), GiB/s, 256
//! KiB in cache, on an Intel Xeon with AVX-512 FP16 (memcpy 45.8-47.0)
//! unless said otherwise; before is the AVX2 build.
//!
//! - binary16 SUM, PROD, MAX and MIN, where the CPU has AVX-512 FP16, in
//!   the CPU's own binary16 arithmetic (`vaddph`, `vmulph`, `vmaxph`,
//!   `vminph`), 32 per instruction: SUM 34.1 -> 46.0, MAX 25.6 -> 46.3, MIN
//!   26.2 -> 45.9. A binary16 sum or product rounded once equals the
//!   baseline's f32 result rounded back: f32 carries 24 bits, at least
//!   twice binary16's 11 plus two, so the double rounding is innocuous.
//!   These instructions ignore MXCSR's DAZ and FTZ, as the baseline's exact
//!   widening does.
//! - bfloat16 MAX and MIN widen each element to f32 (a shift for the even,
//!   a mask for the odd) and compare there (`vmaxps` keeps `d` only where
//!   `d > s`, as MPICH does); the result is one of the inputs, so nothing
//!   rounds, and a word blend puts the picks back: MAX 31.2 -> 38.7, MIN
//!   32.6 -> 38.4.
//! - binary16 SUM and PROD where the CPU lacks AVX-512 FP16 (AMD Zen 4,
//!   Intel before Sapphire Rapids): the F16C converters at 512 bits, 16 per
//!   instruction (`f16_widened`; on an AMD EPYC 29 -> 44-45 against
//!   memcpy's 56-57, and 48.5-49.7 against 60.0-61.7 since it widens
//!   without `{sae}`).
//! - binary16 MAX and MIN where the CPU lacks FP16: compared as integers
//!   (`f16_keyed`), 32 per step against the AVX2 build's 16. On an AMD
//!   EPYC (Zen 5), criterion, 256 KiB, alternated with the AVX2 build:
//!   MAX 46.5 -> 52.7-55.1, MIN 48.5 -> 51.2-56.1 GiB/s.
//! - 64-bit integer MAX and MIN (`vpmaxsq` and the like): 41.2 -> 48-50.
//! - bfloat16 SUM and PROD round back with `vcvtne2ps2bf16` (AVX-512 BF16):
//!   one instruction for 32 results instead of the AVX2 build's integer
//!   rounding (about 30 instructions per 32 bytes). On an AMD EPYC (Zen 4):
//!   13.7 -> 29 GiB/s against memcpy's 48-49; widening by a shift and a
//!   mask instead of four unpacks, with one word permutation after the
//!   converter, 29 -> 31-33 against memcpy's 49-52 (a qword permutation and
//!   a byte shuffle, a byte permutation, or rounding with integer operations
//!   instead of the converter were slower or no faster). The instruction
//!   treats a subnormal f32 as zero, which the baseline does not, so a step
//!   whose f32 results hold a subnormal goes through the baseline kernel
//!   instead; only steps with a zero among their results are looked at
//!   closer (on this Xeon 26.4 -> 27.5-30.2; without any check it would run
//!   at 32.6, so the rest is the widening, converting and permuting).
//!
//! Out of cache (64 MiB) the kernels with more than one instruction per
//! vector ask for their lines ahead (`ahead`).

use super::{half, in_steps, int, KernelFn, Op};
use crate::dtype::ElemType;
use std::arch::x86_64::*;

/// What this CPU has of the AVX-512 families the kernels here need.
#[derive(Clone, Copy)]
struct Has {
    /// F, BW, VL and DQ: every kernel here needs them.
    base: bool,
    /// BF16's converters.
    bf16: bool,
    /// FP16's binary16 arithmetic.
    fp16: bool,
}

fn has() -> Has {
    use std::arch::is_x86_feature_detected as on;
    let base = on!("avx512f") && on!("avx512bw") && on!("avx512vl") && on!("avx512dq");
    Has {
        base,
        bf16: base && on!("avx512bf16"),
        fp16: base && on!("avx512fp16"),
    }
}

/// The AVX-512 build of (op, ty), if there is one and this CPU runs it.
pub(super) fn kernel(op: Op, ty: ElemType) -> Option<KernelFn> {
    table(op, ty)
}

fn table(op: Op, ty: ElemType) -> Option<KernelFn> {
    use ElemType as T;
    let has = has();
    Some(match (ty, op) {
        (T::F16, Op::Sum) if has.fp16 => f16_sum,
        (T::F16, Op::Prod) if has.fp16 => f16_prod,
        (T::F16, Op::Max) if has.fp16 => f16_max,
        (T::F16, Op::Min) if has.fp16 => f16_min,
        (T::F16, Op::Max) if has.base => f16_max_keyed,
        (T::F16, Op::Min) if has.base => f16_min_keyed,
        (T::F16, Op::Sum) if has.base => f16_sum_widened,
        (T::F16, Op::Prod) if has.base => f16_prod_widened,
        (T::Bf16, Op::Sum) if has.bf16 => bf16_sum,
        (T::Bf16, Op::Prod) if has.bf16 => bf16_prod,
        (T::Bf16, Op::Max) if has.base => bf16_max,
        (T::Bf16, Op::Min) if has.base => bf16_min,
        (T::I64, Op::Max) if has.base => i64_max,
        (T::I64, Op::Min) if has.base => i64_min,
        (T::U64, Op::Max) if has.base => u64_max,
        (T::U64, Op::Min) if has.base => u64_min,
        _ => return None,
    })
}

/// The loop of every kernel here: each 64 bytes of `s` and `d` loaded
/// whole, `step` makes the 64 bytes of results, stored aligned
/// (`split_head`); a step for which `step` has none (`None`), the head and
/// the tail go through `scalar`, the baseline kernel. `AHEAD`: ask for the
/// lines ahead (`ahead`).
///
/// # Safety
/// Call only from a function compiled for AVX-512 F (this one is inlined
/// there), on a CPU that has it.
#[inline(always)]
unsafe fn by_zmm<const AHEAD: bool>(
    s: &[u8],
    d: &mut [u8],
    ext: usize,
    scalar: KernelFn,
    step: impl Fn(__m512i, __m512i) -> Option<__m512i>,
) {
    in_steps::<64>(s, d, ext, 64, scalar, |s, d| {
        // SAFETY: `in_steps` hands over 64 bytes of each: unaligned loads
        // and a store of 64 bytes inside them, compiled for AVX-512 F (the
        // caller's promise).
        unsafe {
            let sv = _mm512_loadu_si512(s.as_ptr() as *const __m512i);
            let dv = _mm512_loadu_si512(d.as_ptr() as *const __m512i);
            if AHEAD {
                ahead(s, d);
            }
            match step(sv, dv) {
                Some(r) => _mm512_storeu_si512(d.as_mut_ptr() as *mut __m512i, r),
                None => scalar(s, d),
            }
        }
    });
}

/// The binary16 instructions `f16_apply` runs, by name.
const VADDPH: u8 = 0;
const VMULPH: u8 = 1;
const VMAXPH: u8 = 2;
const VMINPH: u8 = 3;

/// `dst = op(src, dst)` on binary16, 32 elements per instruction, stored
/// aligned (`split_head`); the head and the tail go through `scalar`.
/// Inline assembly, since Rust's binary16 intrinsics are newer than this
/// crate's oldest supported compiler.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and FP16.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn f16_apply<const OP: u8>(s: &[u8], d: &mut [u8], scalar: KernelFn) {
    let step = |sv: __m512i, dv: __m512i| {
        let r: __m512i;
        // SAFETY: register-only arithmetic, on a CPU with AVX-512 FP16
        // (the caller's promise). MAX and MIN keep their first operand
        // where it compares greater (smaller), else take the second,
        // NaNs included: `d > s ? d : s`, as the baseline.
        unsafe {
            match OP {
                VADDPH => std::arch::asm!("vaddph {r}, {a}, {b}", r = lateout(zmm_reg) r,
                    a = in(zmm_reg) sv, b = in(zmm_reg) dv, options(pure, nomem, nostack)),
                VMULPH => std::arch::asm!("vmulph {r}, {a}, {b}", r = lateout(zmm_reg) r,
                    a = in(zmm_reg) sv, b = in(zmm_reg) dv, options(pure, nomem, nostack)),
                VMAXPH => std::arch::asm!("vmaxph {r}, {a}, {b}", r = lateout(zmm_reg) r,
                    a = in(zmm_reg) dv, b = in(zmm_reg) sv, options(pure, nomem, nostack)),
                _ => std::arch::asm!("vminph {r}, {a}, {b}", r = lateout(zmm_reg) r,
                    a = in(zmm_reg) dv, b = in(zmm_reg) sv, options(pure, nomem, nostack)),
            }
        }
        Some(r)
    };
    // SAFETY: compiled for AVX-512 F, which `by_zmm` needs.
    unsafe { by_zmm::<false>(s, d, 2, scalar, step) }
}

/// `dst = op(src, dst)` on binary16 where the CPU lacks AVX-512 FP16: 16
/// elements per step widened exactly to f32 by the converter
/// (`vcvtph2ps`), combined there and rounded back to nearest-even
/// (`vcvtps2ph`), what the AVX2 build's F16C kernel computes 8 at a time;
/// stored aligned (`split_head`), the head and the tail through `scalar`.
/// The AVX2 build is bound by its converters, which on an AMD EPYC (Zen 4)
/// take about as long for 16 elements as for 8 (0.19-0.21 ns each, either
/// width): SUM 29 -> 44-45 GiB/s in cache against memcpy's 56-57, out of
/// cache 16.1 -> 17.8-18.3 against 17.7-19.2. Loads of 32 bytes, each
/// widened by one instruction, beat loads of 64 split in halves (48
/// against 38 GB/s in a C test of both); two such steps per loop, or the
/// converter's result stored by a move of its own (not by the converter),
/// ran alike.
///
/// # Safety
/// The CPU must support AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn f16_widened(
    s: &[u8],
    d: &mut [u8],
    op: impl Fn(__m512, __m512) -> __m512,
    scalar: KernelFn,
) {
    // `_mm512_cvtph_ps` is the form that suppresses exceptions (`{sae}`),
    // which cannot take its source from memory; the plain form can, and
    // gives the same values (it may set MXCSR's exception flags, as the AVX2
    // build's converter and the add do). On the AMD EPYC, 256 KiB, criterion,
    // alternated (3 rounds each): SUM 47.2-48.1 -> 48.5-49.7 GiB/s against
    // memcpy's 60.0-61.7.
    let widen = |v| _mm512_cvt_roundph_ps::<_MM_FROUND_CUR_DIRECTION>(v);
    in_steps::<32>(s, d, 2, 32, scalar, |s, d| {
        // SAFETY: `in_steps` hands over 32 bytes of each: unaligned loads
        // and a store of 32 bytes inside them, compiled for AVX-512 F (the
        // caller's promise).
        unsafe {
            let sv = _mm256_loadu_si256(s.as_ptr() as *const __m256i);
            let dv = _mm256_loadu_si256(d.as_ptr() as *const __m256i);
            let r = op(widen(sv), widen(dv));
            let h = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r);
            _mm256_storeu_si256(d.as_mut_ptr() as *mut __m256i, h);
        }
    });
}

/// The 64-bit integer comparisons `int64_pick` runs, by name.
const MAXSQ: u8 = 0;
const MINSQ: u8 = 1;
const MAXUQ: u8 = 2;
const MINUQ: u8 = 3;

/// MAX or MIN of 64-bit integers, signed or not, eight per instruction
/// (`vpmaxsq` and the like; AVX2 has no such comparison and blends instead:
/// 41 GiB/s in cache against memcpy's 46.6, 7.6-8.0 out of it against
/// 10.0-10.4).
///
/// # Safety
/// The CPU must support AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn int64_pick<const OP: u8>(s: &[u8], d: &mut [u8], scalar: KernelFn) {
    // SAFETY: compiled for AVX-512 F, which `by_zmm` needs.
    unsafe {
        by_zmm::<true>(s, d, 8, scalar, |sv, dv| {
            Some(match OP {
                MAXSQ => _mm512_max_epi64(dv, sv),
                MINSQ => _mm512_min_epi64(dv, sv),
                MAXUQ => _mm512_max_epu64(dv, sv),
                _ => _mm512_min_epu64(dv, sv),
            })
        })
    }
}

/// Asks for the lines `AHEAD` bytes past this step of `s` and `d`. The
/// kernels that do more than one instruction of work per vector issue their
/// loads too slowly to keep enough lines coming from memory by themselves:
/// bfloat16 MAX, 64 MiB, GiB/s against memcpy's 9-10: 7.6 without, 9.1 at
/// 512 bytes ahead, 9.4-10.5 at 2048, 8.2 at 4096.
#[inline(always)]
fn ahead(s: &[u8], d: &[u8]) {
    const AHEAD: usize = 2048;
    // SAFETY: a prefetch is only a hint; it never faults, so an address past
    // the slices' ends (computed with wrapping arithmetic, never read) is
    // harmless.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(s.as_ptr().wrapping_add(AHEAD) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(d.as_ptr().wrapping_add(AHEAD) as *const i8);
    }
}

/// bfloat16 MAX (`MAX`) or MIN: each element widened exactly to f32 and
/// compared there, `vmaxps(d, s)` keeping `d` only where `d > s` as the
/// baseline does (a NaN on either side gives `s`); the pick is one of the
/// inputs, so its bits go back unrounded.
///
/// # Safety
/// The CPU must support AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn bf16_pick<const MAX: bool>(s: &[u8], d: &mut [u8], scalar: KernelFn) {
    let high = _mm512_set1_epi32(0xffff_0000u32 as i32);
    let widen = |v: __m512i| {
        (
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v)),
            _mm512_castsi512_ps(_mm512_and_si512(v, high)),
        )
    };
    // SAFETY: compiled for AVX-512 F, which `by_zmm` needs.
    unsafe {
        by_zmm::<true>(s, d, 2, scalar, |sv, dv| {
            let ((s0, s1), (d0, d1)) = (widen(sv), widen(dv));
            let (r0, r1) = if MAX {
                (_mm512_max_ps(d0, s0), _mm512_max_ps(d1, s1))
            } else {
                (_mm512_min_ps(d0, s0), _mm512_min_ps(d1, s1))
            };
            // Odd words from the odd picks as they stand, even words from
            // the even picks shifted back down.
            Some(_mm512_mask_blend_epi16(
                0xaaaa_aaaa,
                _mm512_srli_epi32::<16>(_mm512_castps_si512(r0)),
                _mm512_castps_si512(r1),
            ))
        })
    }
}

/// binary16 MAX (`MAX`) or MIN where the CPU lacks FP16, without
/// converting, as the AVX2 build's `f16_pick` does 16 at a time: each
/// element's bits, read as sign and magnitude, become a key that orders like
/// the float (the magnitude, negated where the sign is set, so -0 and +0
/// are equal); `d` is kept where its key is larger (smaller for MIN) and
/// neither side is a NaN, as MPICH's `d > s ? d : s` does. Nothing rounds.
/// AVX-512 has no `psignw`, so a masked subtraction negates.
///
/// # Safety
/// The CPU must support AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn f16_keyed<const MAX: bool>(s: &[u8], d: &mut [u8], scalar: KernelFn) {
    let magnitude = _mm512_set1_epi16(0x7fff);
    let infinity = _mm512_set1_epi16(0x7c00);
    let key = |v: __m512i, m: __m512i| {
        _mm512_mask_sub_epi16(m, _mm512_movepi16_mask(v), _mm512_setzero_si512(), m)
    };
    // SAFETY: compiled for AVX-512 F, which `by_zmm` needs.
    unsafe {
        by_zmm::<true>(s, d, 2, scalar, |sv, dv| {
            let (ms, md) = (
                _mm512_and_si512(sv, magnitude),
                _mm512_and_si512(dv, magnitude),
            );
            let nan = _mm512_cmpgt_epu16_mask(_mm512_max_epu16(ms, md), infinity);
            let (ks, kd) = (key(sv, ms), key(dv, md));
            let keep = if MAX {
                _mm512_cmpgt_epi16_mask(kd, ks)
            } else {
                _mm512_cmpgt_epi16_mask(ks, kd)
            };
            Some(_mm512_mask_blend_epi16(keep & !nan, sv, dv))
        })
    }
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
    let magnitude = _mm512_set1_epi16(0x7fff);
    let step = |sv: __m512i, dv: __m512i| {
        let ((s0, s1), (d0, d1)) = (widen(sv), widen(dv));
        let (r0, r1) = (op(s0, d0), op(s1, d1));
        // SAFETY: both are 64 bytes of plain vector data.
        let packed: __m512i = unsafe { std::mem::transmute(_mm512_cvtne2ps_pbh(r1, r0)) };
        let ordered = _mm512_permutexvar_epi16(order, packed);
        // A flushed subnormal comes out as a zero, so only a step with
        // a zero result needs the closer look. (Tested after the
        // permutation: LLVM turns a test of the converter's own result
        // into 32 scalar bfloat16 compares, 1.2 GiB/s.)
        let zero = _mm512_test_epi16_mask(ordered, magnitude) != u32::MAX;
        let subnormal = || {
            _mm512_fpclass_ps_mask::<SUBNORMAL>(r0) | _mm512_fpclass_ps_mask::<SUBNORMAL>(r1) != 0
        };
        (!(zero && subnormal())).then_some(ordered)
    };
    // SAFETY: compiled for AVX-512 F, which `by_zmm` needs.
    unsafe { by_zmm::<true>(s, d, 2, scalar, step) }
}

/// The kernels `table` hands out: each calls its `_apply` function
/// with the operation and the baseline kernel for the steps it leaves.
macro_rules! kernels {
    ($($name:ident = $apply:ident($scalar:path, |$s:ident, $d:ident| $body:expr);)*) => {$(
        fn $name(s: &[u8], d: &mut [u8]) {
            // SAFETY: `table` hands this out only after `has` found every
            // feature `$apply` is compiled for.
            unsafe { $apply(s, d, |$s, $d| $body, $scalar) }
        }
    )*};
}

kernels! {
    bf16_sum = bf16_apply(half::bf16k::sum, |s, d| _mm512_add_ps(s, d));
    bf16_prod = bf16_apply(half::bf16k::prod, |s, d| _mm512_mul_ps(s, d));
    f16_sum_widened = f16_widened(half::f16k::sum, |s, d| _mm512_add_ps(s, d));
    f16_prod_widened = f16_widened(half::f16k::prod, |s, d| _mm512_mul_ps(s, d));
}

/// Kernels whose operation is a constant parameter of their function.
macro_rules! const_kernels {
    ($($name:ident = $apply:ident::<$op:tt>($scalar:path);)*) => {$(
        fn $name(s: &[u8], d: &mut [u8]) {
            // SAFETY: `table` hands this out only after `has` found every
            // feature `$apply` needs.
            unsafe { $apply::<$op>(s, d, $scalar) }
        }
    )*};
}

const_kernels! {
    f16_sum = f16_apply::<VADDPH>(half::f16k::sum);
    f16_prod = f16_apply::<VMULPH>(half::f16k::prod);
    f16_max = f16_apply::<VMAXPH>(half::f16k::max);
    f16_min = f16_apply::<VMINPH>(half::f16k::min);
    f16_max_keyed = f16_keyed::<true>(half::f16k::max);
    f16_min_keyed = f16_keyed::<false>(half::f16k::min);
    bf16_max = bf16_pick::<true>(half::bf16k::max);
    bf16_min = bf16_pick::<false>(half::bf16k::min);
    i64_max = int64_pick::<MAXSQ>(int::max::<i64>);
    i64_min = int64_pick::<MINSQ>(int::min::<i64>);
    u64_max = int64_pick::<MAXUQ>(int::max::<u64>);
    u64_min = int64_pick::<MINUQ>(int::min::<u64>);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::tests::{assert_same_as_baseline, first_difference, xorshift_bytes};

    /// Every kernel here gives what the baseline gives, on arbitrary bytes.
    #[test]
    fn avx512_matches_baseline() {
        let has = has();
        if !has.base {
            eprintln!("skipped: this CPU lacks AVX-512 F/BW/VL/DQ");
            return;
        }
        if !has.fp16 || !has.bf16 {
            eprintln!("partly skipped: FP16 {} BF16 {}", has.fp16, has.bf16);
        }
        let want = 10 + 2 * has.bf16 as usize;
        assert_eq!(assert_same_as_baseline(table), want);
    }

    /// Every pair of the edge values (zeros of both signs, subnormals, the
    /// largest finite, infinities, quiet and signalling NaNs, ties that
    /// round to even) through each kernel here, as the baseline gives them;
    /// and binary16 again with MXCSR's DAZ and FTZ set, which the baseline
    /// ignores and so must the kernels.
    #[test]
    fn edge_values_match_baseline() {
        let has = has();
        if !has.base {
            eprintln!("skipped: this CPU lacks AVX-512 F/BW/VL/DQ");
            return;
        }
        let f16_edges: &[u16] = &[
            0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01, 0x7bff, 0xfbff,
            0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x1400, 0x4000,
        ];
        let bf16_edges: &[u16] = &[
            0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x8080, 0x3f80, 0xbf80, 0x3f81, 0x7f7f,
            0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3b80,
        ];
        let pairs = |edges: &[u16]| {
            let mut s = Vec::new();
            let mut d = Vec::new();
            for &x in edges {
                for &y in edges {
                    s.extend_from_slice(&x.to_ne_bytes());
                    d.extend_from_slice(&y.to_ne_bytes());
                }
            }
            (s, d)
        };
        let check = |ty: ElemType, edges: &[u16]| {
            let (s, d) = pairs(edges);
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Min] {
                let Some(k) = table(op, ty) else { continue };
                let base = crate::reduce::baseline(op, ty).expect("baseline kernel");
                let (mut want, mut got) = (d.clone(), d.clone());
                base(&s, &mut want);
                k(&s, &mut got);
                let diff = first_difference(ty, &want, &got);
                assert!(diff.is_none(), "{op:?} {ty:?}: element {diff:?}");
            }
        };
        check(ElemType::Bf16, bf16_edges);
        check(ElemType::F16, f16_edges);
        let _flush = FlushDenormals::set();
        check(ElemType::F16, f16_edges);
    }

    /// binary16 MAX and MIN pick what the baseline picks for every value
    /// against zeros of both signs, subnormals, normals, infinities and
    /// NaNs, on either side (on a CPU with FP16 these are `vmaxph` and
    /// `vminph`).
    #[test]
    fn f16_max_min_agree_for_every_value() {
        if !has().base {
            eprintln!("skipped: this CPU lacks AVX-512 F/BW/VL/DQ");
            return;
        }
        let specials: [u16; 14] = [
            0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
            0x7c01, 0x7e00, 0xffff,
        ];
        let every: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_ne_bytes()).collect();
        for &x in &specials {
            let same: Vec<u8> = std::iter::repeat_n(x.to_ne_bytes(), 1 << 16)
                .flatten()
                .collect();
            for (s, d) in [(&same, &every), (&every, &same)] {
                for op in [Op::Max, Op::Min] {
                    let k = table(op, ElemType::F16).expect("an AVX-512 kernel");
                    let base = crate::reduce::baseline(op, ElemType::F16).expect("baseline");
                    let (mut want, mut got) = (d.clone(), d.clone());
                    base(s, &mut want);
                    k(s, &mut got);
                    let diff = first_difference(ElemType::F16, &want, &got);
                    assert!(diff.is_none(), "{op:?} against {x:#06x}: element {diff:?}");
                }
            }
        }
    }

    /// MXCSR's DAZ and FTZ set on this thread while it lives.
    struct FlushDenormals(u32);

    impl FlushDenormals {
        fn set() -> Self {
            let mut old = 0u32;
            // SAFETY: stores MXCSR into a local; loads it back with DAZ
            // (bit 6) and FTZ (bit 15) set, which changes only how this
            // thread rounds tiny floats.
            unsafe {
                std::arch::asm!("stmxcsr [{0}]", in(reg) &mut old, options(nostack));
                let new = old | 0x8040;
                std::arch::asm!("ldmxcsr [{0}]", in(reg) &new, options(nostack));
            }
            FlushDenormals(old)
        }
    }

    impl Drop for FlushDenormals {
        fn drop(&mut self) {
            // SAFETY: restores the MXCSR this thread had.
            unsafe { std::arch::asm!("ldmxcsr [{0}]", in(reg) &self.0, options(nostack)) };
        }
    }

    /// Sums whose f32 result is subnormal (the converter would flush them to
    /// zero) take the baseline path and keep their bits; steps without one
    /// beside them still round on the CPU. Fails if the check is removed.
    #[test]
    fn bf16_subnormal_results_keep_their_bits() {
        if !has().bf16 {
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
