//! The kernels that carry most data, compiled a second time for AVX2 and
//! chosen at run time when the CPU has it. The baseline x86-64 build only
//! uses SSE2, which leaves half of each vector register unused; the code is
//! the same generic loop, only the instruction set differs. Only kernels the
//! AVX2 build made faster are listed (criterion, 256 KiB in cache, on this
//! AMD EPYC): sums 18-26 -> 30-35 GiB/s, i32 max/min 17 -> 35. Written with
//! intrinsics: float and 64-bit integer max/min (`lanes`; the generic loop
//! compiled badly for them: f32 max 25 -> 4.5 GiB/s, so they had stayed on
//! the baseline at 33-40 and 11-15 GiB/s, now 43-50 against memcpy's 49),
//! f16 SUM and PROD through the F16C converters (0.9 -> 19-23 GiB/s, bound
//! by the converters: two steps per loop gained nothing; `avx512` runs the
//! same converters 16 wide where the CPU has AVX-512), f16 MAX and MIN
//! on the bits as integers, with no converter (`lanes::f16_pick`: 27 ->
//! 39-40 GiB/s against memcpy's 49), bf16 SUM and PROD with
//! integer shifts and masks (3-4 -> 14-17 GiB/s, `bf16v`; most of the
//! work is the rounding; `avx512` does them faster where the CPU has
//! AVX-512 BF16) and bf16 MAX and MIN
//! without rounding (`lanes::bf16_pick`: 14 -> 36-40, 43 with aligned
//! stores).

use super::{float, half, in_steps, int, KernelFn, Op};
use crate::dtype::ElemType;
use std::arch::x86_64::{
    __m256, __m256i, _mm256_and_si256, _mm256_blend_epi16, _mm256_castps_si256,
    _mm256_castsi256_ps, _mm256_loadu_si256, _mm256_set1_epi32, _mm256_slli_epi32,
    _mm256_srli_epi32, _mm256_storeu_si256,
};

/// `$name`, a kernel whose body (over `$s`, `$d`) is compiled for AVX2.
macro_rules! avx2_fn {
    ($vis:vis $name:ident, |$s:ident, $d:ident| $body:expr) => {
        $vis fn $name(s: &[u8], d: &mut [u8]) {
            /// # Safety
            /// The CPU must support AVX2 (unsafe only for that reason).
            #[target_feature(enable = "avx2")]
            unsafe fn avx2($s: &[u8], $d: &mut [u8]) {
                $body
            }
            // SAFETY: `kernel` hands this function out only after
            // detecting AVX2 on this CPU at run time.
            unsafe { avx2(s, d) }
        }
    };
}

/// The generic loop of each baseline kernel, built again for AVX2.
macro_rules! wide {
    ($($name:ident = $scalar:expr;)*) => {
        $( avx2_fn!($name, |s, d| $scalar(s, d)); )*
    };
}

wide! {
    f32_sum = float::sum::<f32>;
    f32_prod = float::prod::<f32>;
    f64_sum = float::sum::<f64>;
    f64_prod = float::prod::<f64>;
    i32_max = int::max::<i32>;
    i32_min = int::min::<i32>;
    i32_sum = int::sum::<i32>;
    i32_prod = int::prod::<i32>;
    u32_max = int::max::<u32>;
    u32_min = int::min::<u32>;
    u32_sum = int::sum::<u32>;
    i64_sum = int::sum::<i64>;
    u64_sum = int::sum::<u64>;
}

/// `dst = op(src, dst)` on 32-byte vectors of `ext`-byte elements, two
/// per step, stored aligned (`split_head`); the head and the tail go
/// through `scalar`, the baseline kernel.
///
/// # Safety
/// Call only from a function compiled for AVX2 (this one is inlined there),
/// on a CPU that has it.
#[inline(always)]
unsafe fn by_vectors(
    s: &[u8],
    d: &mut [u8],
    ext: usize,
    op: impl Fn(__m256i, __m256i) -> __m256i,
    scalar: fn(&[u8], &mut [u8]),
) {
    in_steps::<64>(s, d, ext, 32, scalar, |s, d| {
        // SAFETY: `in_steps` hands over 64 bytes of each; unaligned loads
        // and stores of 2 x 32 bytes inside them.
        unsafe {
            let sp = s.as_ptr() as *const __m256i;
            let dp = d.as_mut_ptr() as *mut __m256i;
            let (s0, s1) = (_mm256_loadu_si256(sp), _mm256_loadu_si256(sp.add(1)));
            let (d0, d1) = (_mm256_loadu_si256(dp), _mm256_loadu_si256(dp.add(1)));
            _mm256_storeu_si256(dp, op(s0, d0));
            _mm256_storeu_si256(dp.add(1), op(s1, d1));
        }
    });
}

/// bfloat16 in pairs, without shuffles: each 32-bit lane's low element of
/// `s` and `d` widens exactly to f32 by a shift, its high one by a mask,
/// and `f(s, d)` combines each; the results' f32 bits, (lows, highs).
///
/// # Safety
/// Call only from a function compiled for AVX2 (this one is inlined there).
#[inline(always)]
unsafe fn bf16_halves(
    s: __m256i,
    d: __m256i,
    f: impl Fn(__m256, __m256) -> __m256,
) -> (__m256i, __m256i) {
    // SAFETY: inlined into AVX2-compiled kernels only.
    unsafe {
        let high_half = _mm256_set1_epi32(0xffff_0000_u32 as i32);
        let low = |v| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
        let high = |v| _mm256_castsi256_ps(_mm256_and_si256(v, high_half));
        (
            _mm256_castps_si256(f(low(s), low(d))),
            _mm256_castps_si256(f(high(s), high(d))),
        )
    }
}

/// `bf16_halves`' two results back in one vector of bfloat16: the top 16
/// bits of each lane of `lows` as its low element, of `highs` as its high.
///
/// # Safety
/// Call only from a function compiled for AVX2 (this one is inlined there).
#[inline(always)]
unsafe fn bf16_join(lows: __m256i, highs: __m256i) -> __m256i {
    // SAFETY: inlined into AVX2-compiled kernels only.
    unsafe { _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(lows), highs) }
}

/// Max and min written with intrinsics where the compiler's build of the
/// generic loop was slow: floats (the NaN-aware comparison did not map onto
/// maxps: f32 max 25 -> 4.5 GiB/s) and 64-bit integers (AVX2 has no 64-bit
/// max; the generic loop stayed scalar, 11-15 GiB/s). MPICH's `d > s ? d :
/// s` is exactly maxps(d, s), NaN and signed zeros included; likewise min.
/// 64-bit integers compare with `pcmpgtq` and blend; unsigned ones first
/// flip their sign bits so the signed comparison orders them.
mod lanes {
    use super::{bf16_halves, bf16_join, by_vectors, float, half, int};
    use std::arch::x86_64::*;

    macro_rules! lane_ops {
        ($($name:ident = $scalar:expr, $ext:expr, |$s:ident, $d:ident| $body:expr;)*) => {
            $(
                avx2_fn!(pub(in super::super) $name, |s, d| {
                    // SAFETY: compiled for AVX2, which `by_vectors` needs.
                    unsafe { by_vectors(s, d, $ext, |$s, $d| $body, $scalar) }
                });
            )*
        };
    }

    /// Each 64-bit lane of `d` where `keep_d` is all ones, else of `s`.
    #[inline(always)]
    unsafe fn pick64(keep_d: __m256i, s: __m256i, d: __m256i) -> __m256i {
        // SAFETY: inlined into AVX2-compiled kernels only.
        unsafe { _mm256_blendv_epi8(s, d, keep_d) }
    }

    /// Unsigned order as signed order: the sign bit of each lane flipped.
    #[inline(always)]
    unsafe fn flip(v: __m256i) -> __m256i {
        // SAFETY: inlined into AVX2-compiled kernels only.
        unsafe { _mm256_xor_si256(v, _mm256_set1_epi64x(i64::MIN)) }
    }

    lane_ops! {
        f32_max = float::max::<f32>, 4, |s, d| _mm256_castps_si256(
            _mm256_max_ps(_mm256_castsi256_ps(d), _mm256_castsi256_ps(s)));
        f32_min = float::min::<f32>, 4, |s, d| _mm256_castps_si256(
            _mm256_min_ps(_mm256_castsi256_ps(d), _mm256_castsi256_ps(s)));
        f64_max = float::max::<f64>, 8, |s, d| _mm256_castpd_si256(
            _mm256_max_pd(_mm256_castsi256_pd(d), _mm256_castsi256_pd(s)));
        f64_min = float::min::<f64>, 8, |s, d| _mm256_castpd_si256(
            _mm256_min_pd(_mm256_castsi256_pd(d), _mm256_castsi256_pd(s)));
        i64_max = int::max::<i64>, 8, |s, d| pick64(_mm256_cmpgt_epi64(d, s), s, d);
        i64_min = int::min::<i64>, 8, |s, d| pick64(_mm256_cmpgt_epi64(s, d), s, d);
        u64_max = int::max::<u64>, 8, |s, d| pick64(_mm256_cmpgt_epi64(flip(d), flip(s)), s, d);
        u64_min = int::min::<u64>, 8, |s, d| pick64(_mm256_cmpgt_epi64(flip(s), flip(d)), s, d);
        f16_max = half::f16k::max, 2, |s, d| f16_pick(s, d, |ks, kd| _mm256_cmpgt_epi16(kd, ks));
        f16_min = half::f16k::min, 2, |s, d| f16_pick(s, d, |ks, kd| _mm256_cmpgt_epi16(ks, kd));
        bf16_max = half::bf16k::max, 2, |s, d| bf16_pick(s, d, |d, s| _mm256_max_ps(d, s));
        bf16_min = half::bf16k::min, 2, |s, d| bf16_pick(s, d, |d, s| _mm256_min_ps(d, s));
    }

    /// binary16 max and min without converting: a float's bits, read as
    /// sign and magnitude, order like the float once the magnitude takes the
    /// sign (`psignw`; -0 and +0 both become 0, so they compare equal, as
    /// floats). `keep_d` (given both keys) picks per element; a NaN on
    /// either side (magnitude above infinity's) picks `s`, as MPICH's
    /// `d > s ? d : s` does. The converters bound the widening kernel at
    /// 27 GiB/s in cache (memcpy 49-52). bfloat16 compared so ran as fast
    /// as `bf16_pick` (38.4 GiB/s both), which stays.
    #[inline(always)]
    unsafe fn f16_pick(
        s: __m256i,
        d: __m256i,
        keep_d: impl Fn(__m256i, __m256i) -> __m256i,
    ) -> __m256i {
        // SAFETY: inlined into AVX2-compiled kernels only.
        unsafe {
            let magnitude = _mm256_set1_epi16(0x7fff);
            let (ms, md) = (
                _mm256_and_si256(s, magnitude),
                _mm256_and_si256(d, magnitude),
            );
            let nan = _mm256_cmpgt_epi16(_mm256_max_epu16(ms, md), _mm256_set1_epi16(0x7c00));
            let keep = keep_d(_mm256_sign_epi16(ms, s), _mm256_sign_epi16(md, d));
            _mm256_blendv_epi8(s, d, _mm256_andnot_si256(nan, keep))
        }
    }

    /// bfloat16 max and min: the result is one of the operands, so nothing
    /// rounds. Widened in pairs (`bf16_halves`), `f` picks per f32 lane
    /// (maxps/minps, as for f32), and `bf16_join` puts both back: no shuffles and
    /// no rounding, 14 -> 39-40 GiB/s in cache (memcpy 48-49) against the
    /// widen-combine-round path. A NaN result is the NaN operand as it was (as f32 max returns
    /// it), where the baseline also sets its quiet bit.
    #[inline(always)]
    unsafe fn bf16_pick(s: __m256i, d: __m256i, f: impl Fn(__m256, __m256) -> __m256) -> __m256i {
        // SAFETY: inlined into AVX2-compiled kernels only.
        unsafe {
            let (lows, highs) = bf16_halves(s, d, |s, d| f(d, s));
            bf16_join(lows, highs)
        }
    }
}

/// The AVX2 build of (op, ty), if there is one and this CPU runs it.
pub(super) fn kernel(op: Op, ty: ElemType) -> Option<KernelFn> {
    if !std::arch::is_x86_feature_detected!("avx2")
        || (ty == ElemType::F16 && !std::arch::is_x86_feature_detected!("f16c"))
    {
        return None;
    }
    table(op, ty)
}

/// `dst = op(src, dst)` for binary16, sixteen per step: `widen`
/// turns 32 bytes into two vectors of eight f32 lanes and `narrow` turns
/// two back (in whatever lane order, as long as `narrow` undoes `widen`),
/// stored aligned (`split_head`); the rest goes through `scalar`, the
/// baseline kernel.
///
/// # Safety
/// Call only from a function compiled for AVX2 (this one is inlined there),
/// on a CPU that has it.
#[inline(always)]
unsafe fn by_sixteens(
    s: &[u8],
    d: &mut [u8],
    widen: impl Fn(__m256i) -> (__m256, __m256),
    narrow: impl Fn(__m256, __m256) -> __m256i,
    op: impl Fn(__m256, __m256) -> __m256,
    scalar: fn(&[u8], &mut [u8]),
) {
    in_steps::<32>(s, d, 2, 32, scalar, |s, d| {
        // SAFETY: `in_steps` hands over 32 bytes of each; unaligned loads
        // and a store of 32 bytes inside them.
        unsafe {
            let sp = s.as_ptr() as *const __m256i;
            let dp = d.as_mut_ptr() as *mut __m256i;
            let ((s0, s1), (d0, d1)) =
                (widen(_mm256_loadu_si256(sp)), widen(_mm256_loadu_si256(dp)));
            _mm256_storeu_si256(dp, narrow(op(s0, d0), op(s1, d1)));
        }
    });
}

/// SUM and PROD over a module's `apply` and the baseline kernels in
/// `half::$ops` (MAX and MIN need no arithmetic: `lanes`).
macro_rules! half_ops {
    ($ops:ident) => {
        half_ops!(@one sum, $ops, |s, d| _mm256_add_ps(s, d));
        half_ops!(@one prod, $ops, |s, d| _mm256_mul_ps(s, d));
    };
    (@one $name:ident, $ops:ident, |$a:ident, $b:ident| $body:expr) => {
        pub(super) fn $name(s: &[u8], d: &mut [u8]) {
            // SAFETY: `kernel` hands this out only after detecting the CPU
            // features `apply` is compiled for.
            unsafe { apply(s, d, |$a, $b| $body, half::$ops::$name) }
        }
    };
}

/// binary16 SUM and PROD through the CPU's converters (F16C): widened to f32, combined,
/// rounded back to nearest-even, exactly what the baseline kernel computes
/// one element at a time.
mod f16c {
    use super::{by_sixteens, half};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn apply(
        s: &[u8],
        d: &mut [u8],
        op: impl Fn(__m256, __m256) -> __m256,
        scalar: fn(&[u8], &mut [u8]),
    ) {
        let widen = |v: __m256i| {
            (
                _mm256_cvtph_ps(_mm256_castsi256_si128(v)),
                _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(v)),
            )
        };
        let narrow = |a: __m256, b: __m256| {
            let lo = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(a);
            let hi = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(b);
            _mm256_set_m128i(hi, lo)
        };
        // SAFETY: this function is compiled for AVX2, which `by_sixteens` needs.
        unsafe { by_sixteens(s, d, widen, narrow, op, scalar) }
    }

    half_ops!(f16k);
}

/// bfloat16 SUM and PROD with AVX2 integer operations, 32 per step
/// (`by_vectors`), widened in pairs without shuffles (`bf16_halves`, as
/// `lanes::bf16_pick`); rounding to nearest-even adds 0x7fff plus the kept
/// lowest bit, and `bf16_join` puts both halves back. No NaN needs a path of its own: x86
/// arithmetic returns a quiet NaN (so the baseline's quiet bit is already
/// set) that is an operand's or the default one, whose 16 dropped bits are
/// zero (widened bfloat16), so the rounding adds no carry to it. Against
/// interleaving with zeros, rounding with a NaN blend per vector and
/// packing (criterion, 256 KiB in cache, AVX2 only, three alternated runs):
/// 9.6-10.6 -> 14.0-16.7 GiB/s (memcpy 35-40); truncating instead of
/// rounding would reach 23, so the rounding is what is left.
mod bf16v {
    use super::{bf16_halves, bf16_join, by_vectors, half};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn apply(
        s: &[u8],
        d: &mut [u8],
        op: impl Fn(__m256, __m256) -> __m256,
        scalar: fn(&[u8], &mut [u8]),
    ) {
        let kept_lsb = _mm256_set1_epi32(0x1_0000);
        let below_half = _mm256_set1_epi32(0x7fff);
        // Rounded bits in the top 16 of each 32-bit lane (ties to even).
        let round = |b: __m256i| {
            let odd = _mm256_cmpeq_epi32(_mm256_and_si256(b, kept_lsb), kept_lsb);
            _mm256_sub_epi32(_mm256_add_epi32(b, below_half), odd)
        };
        let step = |s, d| {
            let (lows, highs) = bf16_halves(s, d, &op);
            bf16_join(round(lows), round(highs))
        };
        // SAFETY: this function is compiled for AVX2, which `by_vectors` needs.
        unsafe { by_vectors(s, d, 2, step, scalar) }
    }

    half_ops!(bf16k);
}

fn table(op: Op, ty: ElemType) -> Option<KernelFn> {
    use ElemType as T;
    Some(match (ty, op) {
        (T::F32, Op::Max) => lanes::f32_max,
        (T::F32, Op::Min) => lanes::f32_min,
        (T::F64, Op::Max) => lanes::f64_max,
        (T::F64, Op::Min) => lanes::f64_min,
        (T::I64, Op::Max) => lanes::i64_max,
        (T::I64, Op::Min) => lanes::i64_min,
        (T::U64, Op::Max) => lanes::u64_max,
        (T::U64, Op::Min) => lanes::u64_min,
        (T::F32, Op::Sum) => f32_sum,
        (T::F32, Op::Prod) => f32_prod,
        (T::F64, Op::Sum) => f64_sum,
        (T::F64, Op::Prod) => f64_prod,
        (T::I32, Op::Max) => i32_max,
        (T::I32, Op::Min) => i32_min,
        (T::I32, Op::Sum) => i32_sum,
        (T::I32, Op::Prod) => i32_prod,
        (T::U32, Op::Max) => u32_max,
        (T::U32, Op::Min) => u32_min,
        (T::U32, Op::Sum) => u32_sum,
        (T::I64, Op::Sum) => i64_sum,
        (T::U64, Op::Sum) => u64_sum,
        (T::F16, Op::Max) => lanes::f16_max,
        (T::F16, Op::Min) => lanes::f16_min,
        (T::F16, Op::Sum) => f16c::sum,
        (T::F16, Op::Prod) => f16c::prod,
        (T::Bf16, Op::Max) => lanes::bf16_max,
        (T::Bf16, Op::Min) => lanes::bf16_min,
        (T::Bf16, Op::Sum) => bf16v::sum,
        (T::Bf16, Op::Prod) => bf16v::prod,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::tests::{assert_same_as_baseline, first_difference};

    /// Every AVX2 kernel gives bit for bit what the baseline one gives, on
    /// arbitrary bytes. The f16 ones need F16C too (Miri has no F16C:
    /// `tests/robustness/sanitizers.sh` runs this without it).
    #[test]
    fn avx2_matches_baseline() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let f16c = std::arch::is_x86_feature_detected!("f16c");
        assert_eq!(assert_same_as_baseline(table), if f16c { 29 } else { 25 });
    }

    /// Each of `kernels` gives what its baseline gives for every 16-bit
    /// value (a spread of them under Miri, where every one would take hours)
    /// against each of `specials`, on either side; a NaN only needs to stay
    /// a NaN (which payload survives is the compiler's choice).
    fn agrees_for_every_value(ty: ElemType, specials: &[u16], kernels: &[(KernelFn, KernelFn)]) {
        let step = if cfg!(miri) { 1021 } else { 1 };
        let every: Vec<u16> = (0..=u16::MAX).step_by(step).collect();
        let bytes = |v: &[u16]| v.iter().flat_map(|h| h.to_ne_bytes()).collect::<Vec<u8>>();
        for &x in specials {
            let same = vec![x; every.len()];
            for (s, d) in [(&same, &every), (&every, &same)] {
                for &(k, base) in kernels {
                    let (sb, mut want) = (bytes(s), bytes(d));
                    let mut got = want.clone();
                    base(&sb, &mut want);
                    k(&sb, &mut got);
                    if let Some(i) = first_difference(ty, &want, &got) {
                        let at = |v: &[u8]| u16::from_ne_bytes([v[2 * i], v[2 * i + 1]]);
                        panic!(
                            "s {:#06x} d {:#06x}: {:#06x}, want {:#06x}",
                            s[i],
                            d[i],
                            at(&got),
                            at(&want)
                        );
                    }
                }
            }
        }
    }

    /// binary16 MAX and MIN compared as integers pick what the baseline
    /// picks against zeros of both signs, subnormals, normals, infinities
    /// and NaNs. Fails if -0 and +0 compare unequal or a NaN is taken for a
    /// number.
    #[test]
    fn f16_pick_agrees_for_every_value() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let specials: [u16; 20] = [
            0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x3c00, 0xbc00, 0x7bff,
            0xfbff, 0x7c00, 0xfc00, 0x7c01, 0xfc01, 0x7e00, 0xfe00, 0x7fff, 0xffff,
        ];
        agrees_for_every_value(
            ElemType::F16,
            &specials,
            &[
                (lanes::f16_max, half::f16k::max),
                (lanes::f16_min, half::f16k::min),
            ],
        );
    }

    /// bfloat16 SUM and PROD, which round without looking for NaNs, give
    /// what the baseline gives against zeros, subnormals, values one unit
    /// apart (ties), the largest finite values (overflow), infinities and
    /// NaNs with every payload edge (the rounding would carry a NaN with
    /// all mantissa bits set into its sign, were its dropped bits not zero).
    #[test]
    fn bf16_sum_and_prod_agree_for_every_value() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let specials: [u16; 22] = [
            0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x3f80, 0xbf80, 0x3f81, 0x4000, 0x3b80, 0x7f7f,
            0xff7f, 0x7f7e, 0x7f80, 0xff80, 0x7f81, 0xff81, 0x7fc0, 0xffc0, 0x7fbf, 0x7fff, 0xffff,
        ];
        agrees_for_every_value(
            ElemType::Bf16,
            &specials,
            &[
                (bf16v::sum, half::bf16k::sum),
                (bf16v::prod, half::bf16k::prod),
            ],
        );
    }
}
