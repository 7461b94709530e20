//! The kernels that carry most data, compiled a second time for AVX2 and
//! chosen at run time when the CPU has it. The baseline x86-64 build only
//! uses SSE2, which leaves half of each vector register unused; the code is
//! the same generic loop, only the instruction set differs. Only kernels the
//! AVX2 build made faster are listed (criterion, 256 KiB in cache, on this
//! AMD EPYC): sums 18-26 -> 30-35 GiB/s, i32 max/min 17 -> 35; the
//! half-precision ones are written with intrinsics: f16 through the F16C
//! converters 0.9 -> 19-20 GiB/s, bf16 with integer shifts 3-4 -> 7-9 GiB/s.
//! Float max/min and 64-bit integer max/min got slower there
//! (float max 25 -> 4.5 GiB/s) and stay on the baseline build.

use super::{float, half, int, KernelFn, Op};
use crate::dtype::ElemType;
use std::arch::x86_64::{__m128i, __m256, _mm_loadu_si128, _mm_storeu_si128};

macro_rules! wide {
    ($($name:ident = $scalar:expr;)*) => {
        $(
            fn $name(s: &[u8], d: &mut [u8]) {
                /// # Safety
                /// The CPU must support AVX2 (unsafe only for that reason).
                #[target_feature(enable = "avx2")]
                unsafe fn avx2(s: &[u8], d: &mut [u8]) {
                    $scalar(s, d)
                }
                // SAFETY: `kernel` hands this function out only after
                // detecting AVX2 on this CPU at run time.
                unsafe { avx2(s, d) }
            }
        )*
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

/// The AVX2 build of (op, ty), if there is one and this CPU runs it.
pub(super) fn kernel(op: Op, ty: ElemType) -> Option<KernelFn> {
    if !std::arch::is_x86_feature_detected!("avx2")
        || (ty == ElemType::F16 && !std::arch::is_x86_feature_detected!("f16c"))
    {
        return None;
    }
    table(op, ty)
}

/// `dst = op(src, dst)` for 16-bit floats, eight per step: `widen` and
/// `narrow` convert between eight elements and eight f32 lanes; the rest
/// goes through `scalar`, the baseline kernel.
///
/// # Safety
/// Call only from a function compiled for AVX2 (this one is inlined there),
/// on a CPU that has it.
#[inline(always)]
unsafe fn by_eights(
    s: &[u8],
    d: &mut [u8],
    widen: impl Fn(__m128i) -> __m256,
    narrow: impl Fn(__m256) -> __m128i,
    op: impl Fn(__m256, __m256) -> __m256,
    scalar: fn(&[u8], &mut [u8]),
) {
    let whole = s.len().min(d.len()) / 16 * 16;
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 <= whole <= both lengths; unaligned loads and
        // stores of 16 bytes inside the slices.
        unsafe {
            let sp = s.as_ptr().add(i) as *const __m128i;
            let dp = d.as_mut_ptr().add(i) as *mut __m128i;
            let r = op(widen(_mm_loadu_si128(sp)), widen(_mm_loadu_si128(dp)));
            _mm_storeu_si128(dp, narrow(r));
        }
    }
    scalar(&s[whole..], &mut d[whole..]);
}

/// MAX, MIN, SUM and PROD over a module's `apply` and the baseline kernels
/// in `half::$ops`. MPICH's `d > s ? d : s` is maxps(d, s); likewise min.
macro_rules! half_ops {
    ($ops:ident) => {
        half_ops!(@one max, $ops, |s, d| _mm256_max_ps(d, s));
        half_ops!(@one min, $ops, |s, d| _mm256_min_ps(d, s));
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

/// binary16 through the CPU's converters (F16C): widened to f32, combined,
/// rounded back to nearest-even, exactly what the baseline kernel computes
/// one element at a time.
mod f16c {
    use super::{by_eights, half};
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
        let widen = |v: __m128i| _mm256_cvtph_ps(v);
        let narrow = |r: __m256| _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r);
        // SAFETY: this function is compiled for AVX2, which `by_eights` needs.
        unsafe { by_eights(s, d, widen, narrow, op, scalar) }
    }

    half_ops!(f16k);
}

/// bfloat16 with AVX2 integer shifts: widening is a shift by 16, narrowing
/// rounds to nearest-even by adding 0x7fff plus the kept lowest bit, and a
/// NaN keeps its top bits with the quiet bit set, as the baseline kernel.
mod bf16v {
    use super::{by_eights, half};
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
        let widen =
            |v: __m128i| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)));
        let narrow = |r: __m256| {
            let b = _mm256_castps_si256(r);
            let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(1));
            let bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);
            let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(b, bias));
            let nan = _mm256_or_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(0x40));
            let is_nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(r, r));
            let h = _mm256_blendv_epi8(rounded, nan, is_nan);
            // 32 -> 16 bits (values fit), then the two lanes' halves together.
            let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(h, h));
            _mm256_castsi256_si128(packed)
        };
        // SAFETY: this function is compiled for AVX2, which `by_eights` needs.
        unsafe { by_eights(s, d, widen, narrow, op, scalar) }
    }

    half_ops!(bf16k);
}

fn table(op: Op, ty: ElemType) -> Option<KernelFn> {
    use ElemType as T;
    Some(match (ty, op) {
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
        (T::F16, Op::Max) => f16c::max,
        (T::F16, Op::Min) => f16c::min,
        (T::F16, Op::Sum) => f16c::sum,
        (T::F16, Op::Prod) => f16c::prod,
        (T::Bf16, Op::Max) => bf16v::max,
        (T::Bf16, Op::Min) => bf16v::min,
        (T::Bf16, Op::Sum) => bf16v::sum,
        (T::Bf16, Op::Prod) => bf16v::prod,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an element is a NaN (which NaN an operation returns when both
    /// operands are NaN depends on operand order, which the compiler may
    /// swap for a commutative op; MPI leaves NaN payloads unspecified).
    fn is_nan(ty: ElemType, e: &[u8]) -> bool {
        let u16_at = |e: &[u8]| u16::from_ne_bytes([e[0], e[1]]);
        match ty {
            ElemType::F32 => f32::from_ne_bytes(e.try_into().expect("4 bytes")).is_nan(),
            ElemType::F64 => f64::from_ne_bytes(e.try_into().expect("8 bytes")).is_nan(),
            ElemType::F16 => u16_at(e) & 0x7c00 == 0x7c00 && u16_at(e) & 0x3ff != 0,
            ElemType::Bf16 => u16_at(e) & 0x7f80 == 0x7f80 && u16_at(e) & 0x7f != 0,
            _ => false,
        }
    }

    /// Every AVX2 kernel gives bit for bit what the baseline one gives, on
    /// arbitrary bytes (infinities, subnormals, overflow included; NaNs only
    /// need to stay NaNs). The f16 ones need F16C too (Miri has no F16C:
    /// `tests/robustness/sanitizers.sh` runs this without it).
    #[test]
    fn avx2_matches_baseline() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let f16c = std::arch::is_x86_feature_detected!("f16c");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        let mut tried = 0;
        let types = [
            ElemType::F32,
            ElemType::F64,
            ElemType::I32,
            ElemType::U32,
            ElemType::I64,
            ElemType::U64,
            ElemType::F16,
            ElemType::Bf16,
        ];
        let lens: &[usize] = if cfg!(miri) {
            &[0, 1, 7, 64]
        } else {
            &[0, 1, 7, 64, 1001, 4099]
        };
        for ty in types.into_iter().filter(|&t| f16c || t != ElemType::F16) {
            for op in [Op::Max, Op::Min, Op::Sum, Op::Prod] {
                let Some(wide) = table(op, ty) else { continue };
                let base = super::super::baseline(op, ty).expect("baseline kernel");
                for &len in lens {
                    let n = len * ty.extent();
                    let (s, d) = (bytes(n), bytes(n));
                    let (mut a, mut b) = (d.clone(), d);
                    base(&s, &mut a);
                    wide(&s, &mut b);
                    let same = a
                        .chunks(ty.extent())
                        .zip(b.chunks(ty.extent()))
                        .all(|(x, y)| x == y || (is_nan(ty, x) && is_nan(ty, y)));
                    assert!(same, "{op:?} on {ty:?}, {len} elements");
                }
                tried += 1;
            }
        }
        assert_eq!(tried, if f16c { 21 } else { 17 });
    }
}
