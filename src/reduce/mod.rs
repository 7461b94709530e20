//! Reduction kernels: one type-erased function per (op, element type), looked up once per call.
//!
//! Every kernel computes `dst[i] = src[i] (op) dst[i]` over byte slices holding a whole number
//! of elements of `ty.extent()` bytes each, at any alignment. Arithmetic follows MPICH's C
//! code: integers wrap, floats are IEEE (no fused multiply-add), MAX/MIN keep `dst` unless
//! `src` compares greater/smaller, logical ops read non-zero as true and write 0/1 (1.0/0.0
//! for floats), and the pair types follow MPI's MINLOC/MAXLOC rule (ties keep the smaller
//! index). Kernels write only data bytes: the padding of pair and long double elements in
//! `dst` is left as it was (MPICH does the same), except for `Replace`, which copies whole
//! elements.
//!
//! The baseline kernels are plain loops that the compiler vectorises; on x86-64 the CPU's
//! AVX2 and AVX-512 builds (`avx2`, `avx512`) are chosen at run time before them. On aarch64
//! the baseline loops are the kernels, and they compile to NEON (checked in the release
//! build's disassembly: f32 and f64 SUM load, add and store four and two lanes a register,
//! `fadd v.4s` / `fadd v.2d`; MAX and MIN of f32, f64, i32 and i64 and the binary16 and
//! bfloat16 SUM, MAX and MIN loops use vector registers too). `scripts/aarch64.sh` runs
//! their tests there, under qemu-user.

use crate::dtype::ElemType;
use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod complex;
mod float;
mod fp8;
mod half;
mod int;
mod pair;
#[cfg(target_arch = "x86_64")]
mod x87;

pub use fp8::{e4m3_to_f32, e5m2_to_f32, f32_to_e4m3, f32_to_e5m2};
pub use half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

/// 2^k exactly, for `k` in f64's normal range. `f64::powi` would do on
/// today's targets, but Rust leaves its precision unspecified (Miri models
/// that, and caught the conversions relying on it).
pub(crate) const fn pow2(k: i32) -> f64 {
    assert!(k >= -1022 && k <= 1023, "2^k outside f64's normal range");
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Predefined reduction operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
    MinLoc,
    MaxLoc,
    Replace,
    NoOp,
}

impl Op {
    /// Every predefined op, in MPICH's handle order (`MPI_MAX` = 0x58000001 ... `MPI_NO_OP`).
    pub const ALL: [Op; 14] = [
        Op::Max,
        Op::Min,
        Op::Sum,
        Op::Prod,
        Op::Land,
        Op::Band,
        Op::Lor,
        Op::Bor,
        Op::Lxor,
        Op::Bxor,
        Op::MinLoc,
        Op::MaxLoc,
        Op::Replace,
        Op::NoOp,
    ];
}

/// `dst[i] = src[i] (op) dst[i]` for every element; `src` and `dst` hold the same whole number
/// of elements of `ty.extent()` bytes. `src` is the LEFT operand (MPI user-function
/// convention: inoutvec = invec op inoutvec), which matters for Replace (result = src) and
/// NoOp (dst unchanged). Trailing bytes that do not fill an element are ignored.
pub type KernelFn = fn(src: &[u8], dst: &mut [u8]);

/// The kernel for (op, ty), or None when the op is not defined for that element type.
///
/// Defined: Replace and NoOp on every type; on integers every op but MINLOC/MAXLOC; on
/// floats (f16, bf16, f32, f64, long double) MAX MIN SUM PROD LAND LOR LXOR; on Byte the
/// bitwise ops; on Bool the logical ops; on complex types SUM and PROD; on pair types
/// MINLOC and MAXLOC. Long double, its pair and complex types exist only on x86-64.
pub fn kernel(op: Op, ty: ElemType) -> Option<KernelFn> {
    // Chosen once per process: choosing reads CPU features and walks nested
    // matches, about 80 instructions that every small reduction paid twice.
    type Table = [[Option<KernelFn>; ElemType::ALL.len()]; Op::ALL.len()];
    static CHOSEN: OnceLock<Table> = OnceLock::new();
    CHOSEN.get_or_init(|| Op::ALL.map(|o| ElemType::ALL.map(|t| choose(o, t))))[op as usize]
        [ty as usize]
}

/// The fastest kernel this CPU runs for (op, ty).
fn choose(op: Op, ty: ElemType) -> Option<KernelFn> {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx512::kernel(op, ty).or_else(|| avx2::kernel(op, ty)) {
        return Some(k);
    }
    baseline(op, ty)
}

/// The kernel built for the baseline instruction set (SSE2 on x86-64).
pub(super) fn baseline(op: Op, ty: ElemType) -> Option<KernelFn> {
    if !cfg!(target_arch = "x86_64")
        && matches!(
            ty,
            ElemType::LongDouble | ElemType::LongDoubleInt | ElemType::ComplexLongDouble
        )
    {
        return None;
    }
    match op {
        Op::Replace => return Some(replace),
        Op::NoOp => return Some(no_op),
        _ => {}
    }
    match ty {
        ElemType::Byte => int::byte_kernel(op),
        ElemType::Bool => int::bool_kernel(op),
        ElemType::I8 => int::kernel::<i8>(op),
        ElemType::U8 => int::kernel::<u8>(op),
        ElemType::I16 => int::kernel::<i16>(op),
        ElemType::U16 => int::kernel::<u16>(op),
        ElemType::I32 => int::kernel::<i32>(op),
        ElemType::U32 => int::kernel::<u32>(op),
        ElemType::I64 => int::kernel::<i64>(op),
        ElemType::U64 => int::kernel::<u64>(op),
        ElemType::F16 => half::f16_kernel(op),
        ElemType::Bf16 => half::bf16_kernel(op),
        ElemType::F8E4M3 => fp8::e4m3_kernel(op),
        ElemType::F8E5M2 => fp8::e5m2_kernel(op),
        ElemType::F32 => float::kernel::<f32>(op),
        ElemType::F64 => float::kernel::<f64>(op),
        ElemType::FloatInt => pair::kernel::<f32, 4, 8>(op),
        ElemType::DoubleInt => pair::kernel::<f64, 8, 16>(op),
        ElemType::LongInt => pair::kernel::<i64, 8, 16>(op),
        ElemType::ShortInt => pair::kernel::<i16, 4, 8>(op),
        ElemType::TwoInt => pair::kernel::<i32, 4, 8>(op),
        ElemType::ComplexFloat => complex::kernel::<f32>(op),
        ElemType::ComplexDouble => complex::kernel::<f64>(op),
        #[cfg(target_arch = "x86_64")]
        ElemType::LongDouble => x87::long_double_kernel(op),
        #[cfg(target_arch = "x86_64")]
        ElemType::LongDoubleInt => x87::long_double_int_kernel(op),
        #[cfg(target_arch = "x86_64")]
        ElemType::ComplexLongDouble => x87::complex_kernel(op),
        #[cfg(not(target_arch = "x86_64"))]
        ElemType::LongDouble | ElemType::LongDoubleInt | ElemType::ComplexLongDouble => None,
    }
}

fn replace(src: &[u8], dst: &mut [u8]) {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
}

fn no_op(_src: &[u8], _dst: &mut [u8]) {}

/// Runs `scalar` on the elements of `ext` bytes before `d`'s first
/// `align`-byte boundary and returns the rest of both slices, so that a
/// vector loop over the rest stores whole aligned vectors: an unaligned
/// 32-byte store crosses a cache line every other time. 256 KiB in cache,
/// destination 16 bytes past a line, GiB/s, unaligned / aligned: bf16 max
/// 36.1-36.6 / 41.0-42.8, f64 min 50.0-51.9 / 49.2-53.6. Nothing is split
/// off where `d` does not start on an element boundary.
#[cfg(target_arch = "x86_64")]
fn split_head<'s, 'd>(
    s: &'s [u8],
    d: &'d mut [u8],
    ext: usize,
    align: usize,
    scalar: KernelFn,
) -> (&'s [u8], &'d mut [u8]) {
    let head = d.as_ptr().align_offset(align);
    let head = if head.is_multiple_of(ext) && head <= s.len().min(d.len()) {
        head
    } else {
        0
    };
    let (sh, st) = s.split_at(head);
    let (dh, dt) = d.split_at_mut(head);
    scalar(sh, dh);
    (st, dt)
}

/// The loop of every hand-written vector kernel: `split_head` aligns the
/// destination to `align`, `step` combines each whole `STEP` bytes of the
/// source into the destination, and the rest goes through `scalar`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn in_steps<const STEP: usize>(
    s: &[u8],
    d: &mut [u8],
    ext: usize,
    align: usize,
    scalar: KernelFn,
    mut step: impl FnMut(&[u8], &mut [u8]),
) {
    let (s, d) = split_head(s, d, ext, align, scalar);
    let whole = s.len().min(d.len()) / STEP * STEP;
    let (body, tail) = d.split_at_mut(whole);
    for (sc, dc) in s.chunks_exact(STEP).zip(body.chunks_exact_mut(STEP)) {
        step(sc, dc);
    }
    scalar(&s[whole..], tail);
}

/// A plain value stored in native byte order, readable from any alignment.
pub(crate) trait Pod: Copy {
    const SIZE: usize;
    /// Reads from the first `SIZE` bytes of `b`.
    fn load(b: &[u8]) -> Self;
    /// Writes to the first `SIZE` bytes of `b`.
    fn store(self, b: &mut [u8]);
}

macro_rules! impl_pod {
    ($($t:ty),*) => {$(
        impl Pod for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_ne_bytes(a)
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
impl_pod!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

/// The element loop every scalar kernel shares: `dst = f(src, dst)` per `T`.
///
/// `chunks_exact` on both sides lets LLVM see a counted loop of fixed-size unaligned loads
/// and stores, which it vectorises.
#[inline(always)]
pub(crate) fn zip_apply<T: Pod>(src: &[u8], dst: &mut [u8], f: impl Fn(T, T) -> T) {
    debug_assert_eq!(src.len(), dst.len());
    for (s, d) in src.chunks_exact(T::SIZE).zip(dst.chunks_exact_mut(T::SIZE)) {
        f(T::load(s), T::load(d)).store(d);
    }
}

#[cfg(test)]
mod tests;
