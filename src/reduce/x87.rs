//! x86-64 `long double` (80-bit extended, stored in 16 bytes) with x87 instructions, so
//! results are bit-identical to what C computes. The x87 control word is left as the OS set
//! it (Linux: 64-bit precision, round to nearest).
//!
//! Each asm block declares all eight x87 registers clobbered, which Rust guarantees means
//! the x87 stack is empty on entry, and pops everything it pushes, as Rust requires on exit.

use super::{KernelFn, Op};
use core::arch::asm;
use core::cmp::Ordering;

/// The 10 data bytes of one long double.
type F80 = [u8; 10];

const ONE: F80 = [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f];
const ZERO: F80 = [0; 10];

/// `d = s + d`, rounded as the x87 control word says.
#[inline(always)]
fn add(s: &F80, d: &mut F80) {
    // SAFETY: `s` and `d` point to 10 readable (and for `d`, writable) bytes, exactly what a
    // tbyte load/store touches, and x87 memory operands need no alignment. The x87 stack is
    // empty on entry (all st registers clobbered) and empty again at the end.
    unsafe {
        asm!(
            "fld tbyte ptr [{s}]",
            "fld tbyte ptr [{d}]",
            "faddp st(1), st",
            "fstp tbyte ptr [{d}]",
            s = in(reg) s.as_ptr(),
            d = in(reg) d.as_mut_ptr(),
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            options(nostack),
        );
    }
}

/// `d = s * d`.
#[inline(always)]
fn mul(s: &F80, d: &mut F80) {
    // SAFETY: as in `add`: two valid 10-byte operands, no alignment needed, x87 stack empty
    // on entry and on exit.
    unsafe {
        asm!(
            "fld tbyte ptr [{s}]",
            "fld tbyte ptr [{d}]",
            "fmulp st(1), st",
            "fstp tbyte ptr [{d}]",
            s = in(reg) s.as_ptr(),
            d = in(reg) d.as_mut_ptr(),
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            options(nostack),
        );
    }
}

/// How `s` compares with `d`; None when either is a NaN.
#[inline(always)]
fn cmp(s: &F80, d: &F80) -> Option<Ordering> {
    let (above, below, unordered): (u8, u8, u8);
    // SAFETY: two valid 10-byte operands, read only; the x87 stack is empty on entry and the
    // block pops both values it loads. fucomip (not fcomip) so quiet NaNs raise nothing.
    unsafe {
        asm!(
            "fld tbyte ptr [{d}]",
            "fld tbyte ptr [{s}]",
            "fucomip st, st(1)",
            "fstp st(0)",
            "seta {above}",
            "setb {below}",
            "setp {unordered}",
            s = in(reg) s.as_ptr(),
            d = in(reg) d.as_ptr(),
            above = out(reg_byte) above,
            below = out(reg_byte) below,
            unordered = out(reg_byte) unordered,
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            options(nostack, readonly),
        );
    }
    match (unordered != 0, above != 0, below != 0) {
        (true, _, _) => None,
        (false, true, _) => Some(Ordering::Greater),
        (false, false, true) => Some(Ordering::Less),
        (false, false, false) => Some(Ordering::Equal),
    }
}

/// Complex `d = d * s` in extended precision: re = dr*sr - di*si, im = dr*si + di*sr, each
/// product and sum rounded once, as gcc's `__mulxc3` does for finite values.
#[inline(always)]
fn complex_mul(s: &[u8; 32], d: &mut [u8; 32]) {
    // SAFETY: `s` and `d` are 32 valid bytes each; the tbyte accesses at offsets 0 and 16
    // stay inside them (16 + 10 <= 32) and need no alignment. Both results are stored only
    // after every load. Every push is matched by a pop, so the x87 stack (empty on entry
    // because all st registers are clobbered) is empty at the end.
    unsafe {
        asm!(
            "fld tbyte ptr [{s}]",
            "fld tbyte ptr [{d}]",
            "fmulp st(1), st",          // sr*dr
            "fld tbyte ptr [{s} + 16]",
            "fld tbyte ptr [{d} + 16]",
            "fmulp st(1), st",          // si*di, sr*dr
            "fchs",                     // x - y is exactly x + (-y)
            "faddp st(1), st",          // re
            "fld tbyte ptr [{s}]",
            "fld tbyte ptr [{d} + 16]",
            "fmulp st(1), st",          // sr*di, re
            "fld tbyte ptr [{s} + 16]",
            "fld tbyte ptr [{d}]",
            "fmulp st(1), st",          // si*dr, sr*di, re
            "faddp st(1), st",          // im, re
            "fstp tbyte ptr [{d} + 16]",
            "fstp tbyte ptr [{d}]",
            s = in(reg) s.as_ptr(),
            d = in(reg) d.as_mut_ptr(),
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            options(nostack),
        );
    }
}

#[inline(always)]
fn f80(b: &[u8]) -> &F80 {
    b[..10].try_into().expect("10 bytes")
}

#[inline(always)]
fn f80_mut(b: &mut [u8]) -> &mut F80 {
    (&mut b[..10]).try_into().expect("10 bytes")
}

/// Zero of either sign; NaNs and unnormals are non-zero, as C's `x != 0` says.
#[inline(always)]
fn is_zero(v: &F80) -> bool {
    v[..8].iter().all(|&b| b == 0) && v[8] == 0 && v[9] & 0x7f == 0
}

/// Runs `f` on the 10 data bytes of each 16-byte long double.
#[inline(always)]
fn each(src: &[u8], dst: &mut [u8], f: impl Fn(&F80, &mut F80)) {
    for (s, d) in src.chunks_exact(16).zip(dst.chunks_exact_mut(16)) {
        f(f80(s), f80_mut(d));
    }
}

fn ld_max(s: &[u8], d: &mut [u8]) {
    // Keep dst only when dst > src (MPICH's MPL_MAX(inout, in)).
    each(s, d, |s, d| {
        if cmp(s, d) != Some(Ordering::Less) {
            *d = *s
        }
    })
}
fn ld_min(s: &[u8], d: &mut [u8]) {
    each(s, d, |s, d| {
        if cmp(s, d) != Some(Ordering::Greater) {
            *d = *s
        }
    })
}
fn ld_sum(s: &[u8], d: &mut [u8]) {
    each(s, d, add)
}
fn ld_prod(s: &[u8], d: &mut [u8]) {
    each(s, d, mul)
}
#[inline(always)]
fn ld_logic(s: &[u8], d: &mut [u8], f: impl Fn(bool, bool) -> bool) {
    each(s, d, |s, d| {
        *d = if f(!is_zero(s), !is_zero(d)) {
            ONE
        } else {
            ZERO
        }
    })
}
fn ld_land(s: &[u8], d: &mut [u8]) {
    ld_logic(s, d, |a, b| a & b)
}
fn ld_lor(s: &[u8], d: &mut [u8]) {
    ld_logic(s, d, |a, b| a | b)
}
fn ld_lxor(s: &[u8], d: &mut [u8]) {
    ld_logic(s, d, |a, b| a ^ b)
}

pub(crate) fn long_double_kernel(op: Op) -> Option<KernelFn> {
    Some(match op {
        Op::Max => ld_max,
        Op::Min => ld_min,
        Op::Sum => ld_sum,
        Op::Prod => ld_prod,
        Op::Land => ld_land,
        Op::Lor => ld_lor,
        Op::Lxor => ld_lxor,
        _ => return None,
    })
}

/// MINLOC/MAXLOC on `struct { long double v; int i; }` (index at 16, stride 32): take src
/// when it is strictly better, keep the smaller index on a tie, keep dst on NaN.
#[inline(always)]
fn ldi_loc(src: &[u8], dst: &mut [u8], better: Ordering) {
    for (s, d) in src.chunks_exact(32).zip(dst.chunks_exact_mut(32)) {
        let si = i32::from_ne_bytes(s[16..20].try_into().expect("4 bytes"));
        let di = i32::from_ne_bytes(d[16..20].try_into().expect("4 bytes"));
        match cmp(f80(s), f80(d)) {
            Some(o) if o == better => {
                d[..10].copy_from_slice(&s[..10]);
                d[16..20].copy_from_slice(&s[16..20]);
            }
            Some(Ordering::Equal) if si < di => d[16..20].copy_from_slice(&s[16..20]),
            _ => {}
        }
    }
}
fn ldi_minloc(s: &[u8], d: &mut [u8]) {
    ldi_loc(s, d, Ordering::Less)
}
fn ldi_maxloc(s: &[u8], d: &mut [u8]) {
    ldi_loc(s, d, Ordering::Greater)
}

pub(crate) fn long_double_int_kernel(op: Op) -> Option<KernelFn> {
    match op {
        Op::MinLoc => Some(ldi_minloc),
        Op::MaxLoc => Some(ldi_maxloc),
        _ => None,
    }
}

fn cld_sum(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(32).zip(dst.chunks_exact_mut(32)) {
        add(f80(s), f80_mut(d));
        add(f80(&s[16..]), f80_mut(&mut d[16..]));
    }
}
fn cld_prod(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(32).zip(dst.chunks_exact_mut(32)) {
        complex_mul(
            s.try_into().expect("32 bytes"),
            d.try_into().expect("32 bytes"),
        );
    }
}

pub(crate) fn complex_kernel(op: Op) -> Option<KernelFn> {
    match op {
        Op::Sum => Some(cld_sum),
        Op::Prod => Some(cld_prod),
        _ => None,
    }
}
