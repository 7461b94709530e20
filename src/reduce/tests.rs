//! Kernel tests: every (op, type) that `kernel` returns, against naive references written
//! independently of the kernels (wider integers, f64, exact fixed point for long double),
//! on unaligned slices; plus conversion edge cases and results recorded from MPICH.

use super::*;
use crate::dtype::ElemType::{self, *};

use crate::testrng::Rng;

// ---------- reference helpers ----------

fn int_info(ty: ElemType) -> Option<(usize, bool)> {
    Some(match ty {
        I8 => (1, true),
        U8 => (1, false),
        I16 => (2, true),
        U16 => (2, false),
        I32 => (4, true),
        U32 => (4, false),
        I64 => (8, true),
        U64 => (8, false),
        _ => return None,
    })
}

/// Little-endian bytes (x86-64 and the other targets we build for are little-endian).
fn read_int(b: &[u8], n: usize, signed: bool) -> i128 {
    let mut v: u128 = 0;
    for (i, &x) in b[..n].iter().enumerate() {
        v |= (x as u128) << (8 * i);
    }
    let bits = 8 * n as u32;
    if signed && v >> (bits - 1) & 1 == 1 {
        (v as i128) - (1i128 << bits)
    } else {
        v as i128
    }
}

fn write_int(v: i128, n: usize) -> Vec<u8> {
    v.to_le_bytes()[..n].to_vec()
}

fn truth(b: bool) -> i128 {
    b as i128
}

/// Decodes binary16 slowly: sign * m * 2^(e-25), or subnormal m * 2^-24.
fn ref_f16_decode(h: u16) -> f64 {
    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    assert!(e != 31, "no Inf/NaN in generated data");
    if e == 0 {
        s * m * pow2(-24)
    } else {
        s * (1024.0 + m) * pow2(e - 25)
    }
}

/// MPICH's MAX of `src` and `dst` (`dst > src ? dst : src`): a tie (+0 and
/// -0) takes `src`. Not `f64::max`, which may return either zero.
fn mpich_max(src: f64, dst: f64) -> f64 {
    if dst > src {
        dst
    } else {
        src
    }
}

/// MPICH's MIN, likewise.
fn mpich_min(src: f64, dst: f64) -> f64 {
    if dst < src {
        dst
    } else {
        src
    }
}

fn f64_exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// Rounds |x| to a multiple of `spacing` (a power of two), ties to even multiple.
fn round_to_spacing(x: f64, spacing: f64) -> f64 {
    let q = x / spacing;
    let mut n = q.floor();
    let frac = q - n;
    if frac > 0.5 || (frac == 0.5 && n % 2.0 == 1.0) {
        n += 1.0;
    }
    n * spacing
}

/// Nearest binary16 to x (an exact f64), ties to even, by counting grid steps.
fn ref_f16_round(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return sign;
    }
    let e = f64_exponent(a).max(-14);
    let v = round_to_spacing(a, pow2(e - 10));
    if v >= 65536.0 {
        return sign | 0x7c00;
    }
    if v < pow2(-14) {
        return sign | (v / pow2(-24)) as u16;
    }
    let e = f64_exponent(v);
    let m = (v / pow2(e) - 1.0) * 1024.0;
    sign | (((e + 15) as u16) << 10) | m as u16
}

/// Nearest bfloat16 to x (an f32 value held in f64), ties to even.
fn ref_bf16_round(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return sign;
    }
    let e = f64_exponent(a).max(-126);
    let v = round_to_spacing(a, pow2(e - 7));
    if v >= pow2(128) {
        return sign | 0x7f80;
    }
    sign | ((v as f32).to_bits() >> 16) as u16
}

/// Decodes a finite 8-bit float slowly (generated data has no NaN or Inf).
fn ref_fp8_decode(b: u8, bias: i32, man: i32) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b & 0x7f) >> man) as i32;
    let m = (b & ((1 << man) - 1)) as f64;
    if e == 0 {
        s * m * pow2(1 - bias - man)
    } else {
        s * (pow2(man) + m) * pow2(e - bias - man)
    }
}

/// Nearest 8-bit float to x, ties to even, saturating, by counting grid steps.
fn ref_fp8_round(x: f64, bias: i32, man: i32, max: f64) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return sign;
    }
    let e = f64_exponent(a).max(1 - bias);
    let v = round_to_spacing(a, pow2(e - man)).min(max);
    // The code is the position of v on the grid of positive values.
    (0..0x80u8)
        .find(|&c| ref_fp8_decode(c, bias, man) == v)
        .expect("v is on the grid")
        | sign
}

// x87 extended: value = m * 2^(e - 16383 - 63), explicit integer bit.
fn f80_parts(b: &[u8]) -> (bool, u64, i32) {
    let m = u64::from_le_bytes(b[..8].try_into().unwrap());
    let se = u16::from_le_bytes([b[8], b[9]]);
    (se & 0x8000 != 0, m, (se & 0x7fff) as i32)
}

/// Exact f80 value as a fixed-point i128 with 64 fraction bits (generated values fit).
fn f80_fixed(b: &[u8]) -> i128 {
    let (neg, m, e) = f80_parts(b);
    if m == 0 {
        return 0;
    }
    let shift = e - 16382;
    let mag = if shift >= 0 {
        assert!(shift <= 62 && (m as u128) << shift < 1u128 << 126);
        (m as i128) << shift
    } else {
        assert_eq!(m & ((1u64 << -shift) - 1), 0, "value below 2^-64");
        (m >> -shift) as i128
    };
    if neg {
        -mag
    } else {
        mag
    }
}

/// mag * 2^exp2 rounded to a 64-bit significand, ties to even (normal range only).
fn f80_encode(neg: bool, mag: u128, exp2: i32) -> [u8; 10] {
    let mut out = [0u8; 10];
    if mag != 0 {
        let msb = 127 - mag.leading_zeros() as i32;
        let (mut q, mut e) = if msb > 63 {
            let sh = msb - 63;
            let q = mag >> sh;
            let rem = mag & ((1u128 << sh) - 1);
            let half = 1u128 << (sh - 1);
            let up = rem > half || (rem == half && q & 1 == 1);
            (q + up as u128, exp2 + sh)
        } else {
            (mag << (63 - msb), exp2 - (63 - msb))
        };
        if q == 1u128 << 64 {
            q >>= 1;
            e += 1;
        }
        out[..8].copy_from_slice(&(q as u64).to_le_bytes());
        let be = (e + 63 + 16383) as u16;
        out[8..].copy_from_slice(&be.to_le_bytes());
    }
    if neg {
        out[9] |= 0x80;
    }
    out
}

fn f80_from_fixed(v: i128) -> [u8; 10] {
    f80_encode(v < 0, v.unsigned_abs(), -64)
}

fn f80_from_int(v: i128) -> [u8; 10] {
    f80_encode(v < 0, v.unsigned_abs(), 0)
}

fn f80_is_zero(b: &[u8]) -> bool {
    f80_parts(b).1 == 0
}

/// Offset of the index in a pair type, and the value's comparison key.
fn pair_layout(ty: ElemType) -> Option<(usize, usize)> {
    // (value bytes, index offset)
    Some(match ty {
        FloatInt => (4, 4),
        DoubleInt => (8, 8),
        LongInt => (8, 8),
        ShortInt => (2, 4),
        TwoInt => (4, 4),
        LongDoubleInt => (10, 16),
        _ => return None,
    })
}

#[derive(PartialEq, PartialOrd)]
enum Key {
    I(i128),
    F(f64),
}

fn pair_key(ty: ElemType, b: &[u8]) -> Key {
    match ty {
        FloatInt => Key::F(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
        DoubleInt => Key::F(f64::from_le_bytes(b[..8].try_into().unwrap())),
        LongInt => Key::I(read_int(b, 8, true)),
        ShortInt => Key::I(read_int(b, 2, true)),
        TwoInt => Key::I(read_int(b, 4, true)),
        LongDoubleInt => Key::I(f80_fixed(b)),
        _ => unreachable!(),
    }
}

/// Bytes of an element a kernel may write (everything but padding).
fn data_mask(ty: ElemType) -> Vec<bool> {
    let mut m = vec![false; ty.extent()];
    let mut set = |lo: usize, hi: usize| m[lo..hi].iter_mut().for_each(|x| *x = true);
    match ty {
        LongDouble => set(0, 10),
        ComplexLongDouble => {
            set(0, 10);
            set(16, 26)
        }
        _ => match pair_layout(ty) {
            Some((vb, idx)) => {
                set(0, vb);
                set(idx, idx + 4)
            }
            None => set(0, ty.extent()),
        },
    }
    m
}

fn float_parts(ty: ElemType) -> usize {
    match ty {
        F32 | ComplexFloat => 4,
        _ => 8,
    }
}

fn read_f(b: &[u8], w: usize) -> f64 {
    if w == 4 {
        f32::from_le_bytes(b[..4].try_into().unwrap()) as f64
    } else {
        f64::from_le_bytes(b[..8].try_into().unwrap())
    }
}

fn write_f(v: f64, w: usize) -> Vec<u8> {
    if w == 4 {
        (v as f32).to_le_bytes().to_vec()
    } else {
        v.to_le_bytes().to_vec()
    }
}

/// The expected dst element after `dst = src (op) dst`, computed the slow way.
fn reference(op: Op, ty: ElemType, s: &[u8], d: &[u8]) -> Vec<u8> {
    let mut out = d.to_vec();
    match op {
        Op::Replace => return s.to_vec(),
        Op::NoOp => return out,
        _ => {}
    }
    if let Some((n, signed)) = int_info(ty) {
        let (a, b) = (read_int(s, n, signed), read_int(d, n, signed));
        let r = match op {
            Op::Max => a.max(b),
            Op::Min => a.min(b),
            Op::Sum => a + b,
            Op::Prod => a.wrapping_mul(b), // |a*b| < 2^128; truncation keeps the low bits
            Op::Land => truth(a != 0 && b != 0),
            Op::Lor => truth(a != 0 || b != 0),
            Op::Lxor => truth((a != 0) != (b != 0)),
            Op::Band => a & b,
            Op::Bor => a | b,
            Op::Bxor => a ^ b,
            _ => unreachable!(),
        };
        return write_int(r, n);
    }
    let logic = |a: bool, b: bool| match op {
        Op::Land => a && b,
        Op::Lor => a || b,
        Op::Lxor => a != b,
        _ => unreachable!(),
    };
    match ty {
        Byte => {
            out[0] = match op {
                Op::Band => s[0] & d[0],
                Op::Bor => s[0] | d[0],
                Op::Bxor => s[0] ^ d[0],
                _ => unreachable!(),
            }
        }
        Bool => out[0] = logic(s[0] != 0, d[0] != 0) as u8,
        F32 | F64 => {
            let w = float_parts(ty);
            let (a, b) = (read_f(s, w), read_f(d, w));
            // f64 holds f32 sums/products exactly enough: rounding once to f32 is exact
            // rounding (53 >= 2*24+2).
            let r = match op {
                Op::Max => mpich_max(a, b),
                Op::Min => mpich_min(a, b),
                Op::Sum => a + b,
                Op::Prod => a * b,
                _ => logic(a != 0.0, b != 0.0) as u8 as f64,
            };
            out = write_f(r, w);
        }
        F16 | Bf16 => {
            let dec = |b: &[u8]| {
                let h = u16::from_le_bytes([b[0], b[1]]);
                if ty == F16 {
                    ref_f16_decode(h)
                } else {
                    f32::from_bits((h as u32) << 16) as f64
                }
            };
            let (a, b) = (dec(s), dec(d));
            let r = match op {
                Op::Max => mpich_max(a, b),
                Op::Min => mpich_min(a, b),
                // Compute in f32 (one rounding), then round to the half type.
                Op::Sum => (a + b) as f32 as f64,
                Op::Prod => (a * b) as f32 as f64,
                _ => logic(a != 0.0, b != 0.0) as u8 as f64,
            };
            let h = if ty == F16 {
                ref_f16_round(r)
            } else {
                ref_bf16_round(r)
            };
            out = h.to_le_bytes().to_vec();
        }
        F8E4M3 | F8E5M2 => {
            let (bias, man, max) = if ty == F8E4M3 {
                (7, 3, 448.0)
            } else {
                (15, 2, 57344.0)
            };
            let (a, b) = (
                ref_fp8_decode(s[0], bias, man),
                ref_fp8_decode(d[0], bias, man),
            );
            let r = match op {
                Op::Max => mpich_max(a, b),
                Op::Min => mpich_min(a, b),
                Op::Sum => (a + b) as f32 as f64,
                Op::Prod => (a * b) as f32 as f64,
                _ => unreachable!(),
            };
            out[0] = ref_fp8_round(r, bias, man, max);
        }
        LongDouble => {
            let (a, b) = (f80_fixed(s), f80_fixed(d));
            let r = match op {
                Op::Max => f80_from_fixed(a.max(b)),
                Op::Min => f80_from_fixed(a.min(b)),
                Op::Sum => f80_from_fixed(a + b),
                Op::Prod => {
                    let ((na, ma, ea), (nb, mb, eb)) = (f80_parts(s), f80_parts(d));
                    let exp = (ea - 16383 - 63) + (eb - 16383 - 63);
                    f80_encode(na != nb, ma as u128 * mb as u128, exp)
                }
                _ => {
                    if logic(!f80_is_zero(s), !f80_is_zero(d)) {
                        f80_from_int(1)
                    } else {
                        [0; 10]
                    }
                }
            };
            out[..10].copy_from_slice(&r);
        }
        ComplexFloat | ComplexDouble | ComplexLongDouble => {
            // Generated components are small integers: f64 computes every product and sum
            // exactly, signed zeros included.
            let (w, stride) = match ty {
                ComplexFloat => (4, 4),
                ComplexDouble => (8, 8),
                _ => (10, 16),
            };
            let get = |b: &[u8], k: usize| -> f64 {
                let p = &b[k * stride..];
                if w == 10 {
                    let v = (f80_fixed(p) >> 64) as f64;
                    if v == 0.0 && f80_parts(p).0 {
                        -0.0
                    } else {
                        v
                    }
                } else {
                    read_f(p, w)
                }
            };
            let (sr, si, dr, di) = (get(s, 0), get(s, 1), get(d, 0), get(d, 1));
            let (re, im) = match op {
                Op::Sum => (sr + dr, si + di),
                Op::Prod => (dr * sr - di * si, dr * si + di * sr),
                _ => unreachable!(),
            };
            for (k, v) in [(0, re), (1, im)] {
                let bytes = if w == 10 {
                    f80_encode(v.is_sign_negative(), v.abs() as u128, 0).to_vec()
                } else {
                    write_f(v, w)
                };
                out[k * stride..k * stride + bytes.len()].copy_from_slice(&bytes);
            }
        }
        _ => {
            let (vb, idx) = pair_layout(ty).expect("pair type");
            let (ks, kd) = (pair_key(ty, s), pair_key(ty, d));
            let (is, id) = (read_int(&s[idx..], 4, true), read_int(&d[idx..], 4, true));
            let take_src = match op {
                Op::MinLoc => ks < kd,
                Op::MaxLoc => ks > kd,
                _ => unreachable!(),
            };
            if take_src {
                out[..vb].copy_from_slice(&s[..vb]);
            }
            if take_src || (ks == kd && is < id) {
                out[idx..idx + 4].copy_from_slice(&s[idx..idx + 4]);
            }
        }
    }
    out
}

// ---------- generators ----------

fn gen_f80(r: &mut Rng) -> [u8; 10] {
    // A * 2^-k with |A| < 2^62: up to 62 significant bits, mostly not representable in f64.
    let a = (r.next() >> 2) as i128 >> r.below(40);
    let a = if r.below(2) == 0 { -a } else { a };
    f80_encode(a < 0, a.unsigned_abs(), -(r.below(25) as i32))
}

fn gen_finite_f64(r: &mut Rng, w: usize) -> f64 {
    match r.below(6) {
        0 => 0.0,
        1 => r.range(-5, 5) as f64,
        _ => {
            let m = 1.0 + (r.next() >> 11) as f64 / (1u64 << 53) as f64;
            let v = m * pow2(r.range(-30, 30) as i32);
            let v = if r.below(2) == 0 { -v } else { v };
            if w == 4 {
                v as f32 as f64
            } else {
                v
            }
        }
    }
}

/// One random element of `ty` (extent bytes, padding random).
fn gen_elem(ty: ElemType, r: &mut Rng) -> Vec<u8> {
    let mut e: Vec<u8> = (0..ty.extent()).map(|_| r.next() as u8).collect();
    let small = r.below(4) == 0;
    match ty {
        Byte => {}
        Bool => e[0] = [0, 1, 1, 0, 2, 0xff][r.below(6)],
        I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64 => match r.below(4) {
            0 => e.fill(0),
            1 => {
                let n = e.len();
                e = write_int(r.range(-3, 3) as i128, n)
            }
            _ => {}
        },
        F32 | F64 => {
            let w = float_parts(ty);
            e = write_f(gen_finite_f64(r, w), w)
        }
        F16 => {
            let mut h = r.next() as u16;
            if (h >> 10) & 0x1f == 0x1f {
                h &= !0x4000; // no Inf/NaN
            }
            if small {
                h &= 0x8000
            }
            e = h.to_le_bytes().to_vec()
        }
        F8E4M3 | F8E5M2 => {
            let nan_inf = if ty == F8E4M3 { 0x7f } else { 0x7c };
            if e[0] & 0x7f >= nan_inf {
                e[0] &= 0xbf;
            }
            if small {
                e[0] &= 0x80
            }
        }
        Bf16 => {
            let mut h = r.next() as u16;
            if (h >> 7) & 0xff == 0xff {
                h &= !0x4000;
            }
            if small {
                h &= 0x8000
            }
            e = h.to_le_bytes().to_vec()
        }
        LongDouble => {
            let v = if small { [0; 10] } else { gen_f80(r) };
            e[..10].copy_from_slice(&v)
        }
        ComplexFloat | ComplexDouble => {
            let w = float_parts(ty);
            for k in 0..2 {
                let v = r.range(-1000, 1000) as f64;
                e[k * w..(k + 1) * w].copy_from_slice(&write_f(v, w));
            }
        }
        ComplexLongDouble => {
            for k in 0..2 {
                let v = f80_from_int(r.range(-1000, 1000) as i128);
                e[k * 16..k * 16 + 10].copy_from_slice(&v);
            }
        }
        _ => {
            let (vb, idx) = pair_layout(ty).unwrap();
            let v: Vec<u8> = match ty {
                FloatInt => (r.range(-2, 2) as f32 * 0.5).to_le_bytes().to_vec(),
                DoubleInt => (r.range(-2, 2) as f64 * 0.25).to_le_bytes().to_vec(),
                LongDoubleInt if !small => gen_f80(r).to_vec(),
                LongDoubleInt => f80_from_int(r.range(-2, 2) as i128).to_vec(),
                _ if small => r.next().to_le_bytes()[..vb].to_vec(),
                _ => write_int(r.range(-2, 2) as i128, vb),
            };
            e[..vb].copy_from_slice(&v);
            e[idx..idx + 4].copy_from_slice(&(r.range(-3, 3) as i32).to_le_bytes());
        }
    }
    e.resize(ty.extent(), 0xa5);
    e
}

// ---------- the matrix ----------

fn expected_ops(ty: ElemType) -> Vec<Op> {
    use Op::*;
    let mut v = match ty {
        Byte => vec![Band, Bor, Bxor],
        Bool => vec![Land, Lor, Lxor],
        I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64 => {
            vec![Max, Min, Sum, Prod, Land, Band, Lor, Bor, Lxor, Bxor]
        }
        F16 | Bf16 | F32 | F64 | LongDouble => vec![Max, Min, Sum, Prod, Land, Lor, Lxor],
        F8E4M3 | F8E5M2 => vec![Max, Min, Sum, Prod],
        ComplexFloat | ComplexDouble | ComplexLongDouble => vec![Sum, Prod],
        FloatInt | DoubleInt | LongInt | ShortInt | TwoInt | LongDoubleInt => vec![MinLoc, MaxLoc],
    };
    v.extend([Replace, NoOp]);
    let x87 = matches!(ty, LongDouble | LongDoubleInt | ComplexLongDouble);
    if x87 && !cfg!(target_arch = "x86_64") {
        v.clear();
    }
    v
}

#[test]
fn kernel_table_is_exactly_the_defined_set() {
    for ty in ElemType::ALL {
        let want = expected_ops(ty);
        for op in Op::ALL {
            assert_eq!(
                kernel(op, ty).is_some(),
                want.contains(&op),
                "{op:?} {ty:?}"
            );
        }
    }
}

/// Runs `k` on `n` random elements with src/dst at byte offsets `so`/`do_` and checks each.
fn check_case(op: Op, ty: ElemType, k: KernelFn, r: &mut Rng, n: usize, so: usize, do_: usize) {
    let ext = ty.extent();
    let mut sbuf = vec![0u8; n * ext + so];
    let mut dbuf = vec![0u8; n * ext + do_];
    for i in 0..n {
        let s = gen_elem(ty, r);
        // Ties matter for MAX/MIN/MINLOC/MAXLOC: one dst in four repeats src's value.
        let mut d = gen_elem(ty, r);
        if r.below(4) == 0 {
            let mask = data_mask(ty);
            let keep_idx = pair_layout(ty).map(|(_, idx)| idx);
            for j in 0..ext {
                let in_value = match keep_idx {
                    Some(idx) => j < idx,
                    None => true,
                };
                if mask[j] && in_value {
                    d[j] = s[j];
                }
            }
        }
        sbuf[so + i * ext..so + (i + 1) * ext].copy_from_slice(&s);
        dbuf[do_ + i * ext..do_ + (i + 1) * ext].copy_from_slice(&d);
    }
    let before = dbuf.clone();
    k(&sbuf[so..], &mut dbuf[do_..]);
    assert_eq!(&dbuf[..do_], &before[..do_], "wrote before dst");
    for i in 0..n {
        let s = &sbuf[so + i * ext..so + (i + 1) * ext];
        let d0 = &before[do_ + i * ext..do_ + (i + 1) * ext];
        let got = &dbuf[do_ + i * ext..do_ + (i + 1) * ext];
        let want = reference(op, ty, s, d0);
        assert_eq!(
            got,
            &want[..],
            "{op:?} {ty:?} element {i}: src {s:02x?} dst {d0:02x?}"
        );
    }
}

/// Miri interprets every instruction: the same tests on fewer cases there.
const SIZES: &[usize] = if cfg!(miri) {
    &[0, 1, 19]
} else {
    &[0, 1, 3, 64, 257]
};
/// (source, destination) offsets from an aligned address.
const OFFSETS: &[(usize, usize)] = if cfg!(miri) {
    &[(0, 0), (5, 2)]
} else {
    &[(0, 0), (1, 0), (0, 3), (5, 2), (7, 7)]
};
/// Types whose kernels are x87 inline assembly, which Miri cannot run.
fn x87_only(ty: ElemType) -> bool {
    matches!(ty, LongDouble | LongDoubleInt | ComplexLongDouble)
}
const HALF_STEP: usize = if cfg!(miri) { 127 } else { 1 };
const ROUNDING_CASES: usize = if cfg!(miri) { 500 } else { 200_000 };

#[test]
fn every_kernel_matches_the_reference_at_any_alignment() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for ty in ElemType::ALL {
        if cfg!(miri) && x87_only(ty) {
            continue;
        }
        for op in Op::ALL {
            let Some(k) = kernel(op, ty) else { continue };
            for &n in SIZES {
                for &(so, do_) in OFFSETS {
                    check_case(op, ty, k, &mut r, n, so, do_);
                }
            }
        }
    }
}

// ---------- conversions ----------

#[test]
fn f16_round_trips_and_rounds_to_nearest_even() {
    for h in (0..=u16::MAX).step_by(HALF_STEP) {
        let x = f16_to_f32(h);
        if (h >> 10) & 0x1f == 0x1f && h & 0x3ff != 0 {
            assert!(x.is_nan(), "{h:#06x}");
            // Quiet NaNs survive unchanged; signalling ones come back quiet.
            assert_eq!(f32_to_f16(x), h | 0x0200, "{h:#06x}");
        } else {
            if (h >> 10) & 0x1f != 0x1f {
                assert_eq!(x as f64, ref_f16_decode(h), "{h:#06x}");
            }
            assert_eq!(f32_to_f16(x), h, "{h:#06x}");
        }
    }
    let cases: [(f32, u16); 14] = [
        (1.0, 0x3c00),
        (1.0 + (pow2(-11) as f32), 0x3c00), // tie, even stays down
        (1.0 + 3.0 * (pow2(-11) as f32), 0x3c02), // tie, odd rounds up
        (1.0 + (pow2(-11) as f32) + (pow2(-20) as f32), 0x3c01),
        (65504.0, 0x7bff),
        (65519.0, 0x7bff),
        (65520.0, 0x7c00), // tie between max and 2^16 -> infinity
        (1e10, 0x7c00),
        (-1e10, 0xfc00),
        ((pow2(-24) as f32), 0x0001),
        ((pow2(-25) as f32), 0x0000),       // tie to even (zero)
        (3.0 * (pow2(-25) as f32), 0x0002), // 1.5 units -> 2
        ((pow2(-14) as f32) - (pow2(-25) as f32), 0x0400), // rounds up into the normals
        (-0.0, 0x8000),
    ];
    for (x, h) in cases {
        assert_eq!(f32_to_f16(x), h, "{x:e}");
    }
    assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
    assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
}

#[test]
fn f32_to_half_matches_nearest_search() {
    let mut r = Rng(12345);
    for i in 0..ROUNDING_CASES {
        // Spread over every exponent, with extra weight near halfway points.
        let mut b = r.next() as u32;
        if i % 3 == 0 {
            b = (b & !0x1fff) | 0x1000; // exact f16 tie
        }
        let x = f32::from_bits(b);
        if x.is_nan() || x.is_infinite() {
            continue;
        }
        assert_eq!(f32_to_f16(x), ref_f16_round(x as f64), "{x:e} {b:#x}");
        let mut c = r.next() as u32;
        if i % 3 == 0 {
            c = (c & !0xffff) | 0x8000; // exact bf16 tie
        }
        let y = f32::from_bits(c);
        if y.is_nan() || y.is_infinite() {
            continue;
        }
        assert_eq!(f32_to_bf16(y), ref_bf16_round(y as f64), "{y:e} {c:#x}");
    }
}

#[test]
fn bf16_cases() {
    assert_eq!(f32_to_bf16(1.0), 0x3f80);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // tie, even
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82); // tie, odd
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
    assert_eq!(f32_to_bf16(f32::MAX), 0x7f80); // rounds past the largest bf16
    assert_eq!(f32_to_bf16(f32::from_bits(1)), 0x0000); // smallest subnormal
    assert_eq!(f32_to_bf16(-0.0), 0x8000);
    let nan = f32_to_bf16(f32::from_bits(0x7f80_0001)); // signalling, payload in low bits
    assert!(bf16_to_f32(nan).is_nan());
    for h in (0..=u16::MAX).step_by(HALF_STEP) {
        let x = bf16_to_f32(h);
        if !x.is_nan() {
            assert_eq!(f32_to_bf16(x), h);
        }
    }
}

#[test]
fn half_sums_round_once_in_f32_then_to_half() {
    let k = kernel(Op::Sum, F16).unwrap();
    // 2048 + 1 is a tie in f16 (spacing 2 above 2048): even -> 2048.
    let (a, b) = (f32_to_f16(2048.0), f32_to_f16(1.0));
    let mut d = b.to_ne_bytes();
    k(&a.to_ne_bytes(), &mut d);
    assert_eq!(f16_to_f32(u16::from_ne_bytes(d)), 2048.0);
    let k = kernel(Op::Prod, Bf16).unwrap();
    let mut d = f32_to_bf16(3.0).to_ne_bytes();
    k(&f32_to_bf16(1.0078125).to_ne_bytes(), &mut d); // 3.0234375 -> 3.015625 / 3.03125 tie
    assert_eq!(bf16_to_f32(u16::from_ne_bytes(d)), 3.03125);
}

// ---------- long double ----------

#[cfg(target_arch = "x86_64")]
#[test]
#[cfg_attr(miri, ignore = "x87 inline assembly")]
fn long_double_keeps_bits_f64_cannot() {
    let one_plus = |k: i32| f80_encode(false, (1u128 << 70) + (1u128 << (70 - k)), -70);
    let ld = |v: [u8; 10]| {
        let mut e = [0x5au8; 16];
        e[..10].copy_from_slice(&v);
        e
    };
    // (1 + 2^-60) + 2^-60 = 1 + 2^-59: both inputs and the result are beyond f64.
    let mut d = ld(one_plus(60));
    kernel(Op::Sum, LongDouble).unwrap()(&ld(f80_encode(false, 1, -60)), &mut d);
    assert_eq!(&d[..10], &one_plus(59));
    assert_eq!(&d[10..], &[0x5a; 6], "padding untouched");
    // (1 + 2^-32)^2 = 1 + 2^-31 + 2^-64: the last term is half an ulp -> ties to even.
    let mut d = ld(one_plus(32));
    kernel(Op::Prod, LongDouble).unwrap()(&ld(one_plus(32)), &mut d);
    assert_eq!(&d[..10], &one_plus(31));
    // (1 + 2^-32)(1 + 2^-31) = 1 + 2^-31 + 2^-32 + 2^-63 is exact in 64 bits.
    let mut d = ld(one_plus(31));
    kernel(Op::Prod, LongDouble).unwrap()(&ld(one_plus(32)), &mut d);
    let exact = f80_encode(false, (1u128 << 63) + (1 << 32) + (1 << 31) + 1, -63);
    assert_eq!(&d[..10], &exact);
    // MAX sees a difference of 2^-63 that a double would round away.
    let big = f80_encode(false, (1u128 << 63) + 1, -63);
    let mut d = ld(f80_from_int(1));
    kernel(Op::Max, LongDouble).unwrap()(&ld(big), &mut d);
    assert_eq!(&d[..10], &big);
}

// ---------- pair types ----------

#[test]
fn pair_ties_take_the_smaller_index() {
    let two_int = |v: i32, i: i32| [v.to_ne_bytes(), i.to_ne_bytes()].concat();
    let minloc = kernel(Op::MinLoc, TwoInt).unwrap();
    let maxloc = kernel(Op::MaxLoc, TwoInt).unwrap();
    let run = |k: KernelFn, s: Vec<u8>, d: Vec<u8>| {
        let mut d = d;
        k(&s, &mut d);
        d
    };
    assert_eq!(run(minloc, two_int(5, 3), two_int(5, 7)), two_int(5, 3));
    assert_eq!(run(minloc, two_int(5, 7), two_int(5, 3)), two_int(5, 3));
    assert_eq!(run(maxloc, two_int(5, -1), two_int(5, 0)), two_int(5, -1));
    assert_eq!(run(minloc, two_int(4, 9), two_int(5, 0)), two_int(4, 9));
    assert_eq!(run(maxloc, two_int(4, 0), two_int(5, 9)), two_int(5, 9));
    // short_int: value at 0, index at 4, padding 2..4 untouched.
    let si = |v: i16, pad: u8, i: i32| {
        let mut e = [pad; 8];
        e[..2].copy_from_slice(&v.to_ne_bytes());
        e[4..].copy_from_slice(&i.to_ne_bytes());
        e
    };
    let mut d = si(2, 0xee, 1);
    kernel(Op::MinLoc, ShortInt).unwrap()(&si(-2, 0x11, 8), &mut d);
    assert_eq!(d, si(-2, 0xee, 8));
}

#[cfg(target_arch = "x86_64")]
#[test]
#[cfg_attr(miri, ignore = "x87 inline assembly")]
fn long_double_int_ties_and_order() {
    let e = |v: [u8; 10], i: i32| {
        let mut x = [0u8; 32];
        x[..10].copy_from_slice(&v);
        x[16..20].copy_from_slice(&i.to_ne_bytes());
        x
    };
    // 2^63 and 2^63 + 1 are one double apart only after rounding; here they differ.
    let (a, b) = (f80_from_int(1 << 63), f80_from_int((1 << 63) + 1));
    let mut d = e(b, 1);
    kernel(Op::MinLoc, LongDoubleInt).unwrap()(&e(a, 9), &mut d);
    assert_eq!(d, e(a, 9));
    let mut d = e(a, 4);
    kernel(Op::MaxLoc, LongDoubleInt).unwrap()(&e(a, 2), &mut d);
    assert_eq!(d, e(a, 2));
}

// ---------- MPICH results ----------

/// (type, op, rank 0 input, rank 1 input, MPI_Allreduce result) from MPICH 4.0.2 with two
/// ranks (/work/scratch/h1/probe/out-n2.txt). Padding bytes in MPICH's result are its untouched 0xee fill.
/// Unsigned MAX/MIN rows are left out: MPICH 4.0.2 compares them as signed (MPICH bug 6083).
const MPICH_ROWS: &[(ElemType, Op, &str, &str, &str)] = &[
    (I8, Op::Max, "fd640007", "05640200", "05640207"),
    (I8, Op::Min, "fd640007", "05640200", "fd640000"),
    (I8, Op::Sum, "fd640007", "05640200", "02c80207"),
    (I8, Op::Prod, "fd640007", "05640200", "f1100000"),
    (I8, Op::Land, "fd640007", "05640200", "01010000"),
    (I8, Op::Band, "fd640007", "05640200", "05640000"),
    (I8, Op::Lor, "fd640007", "05640200", "01010101"),
    (I8, Op::Bor, "fd640007", "05640200", "fd640207"),
    (I8, Op::Lxor, "fd640007", "05640200", "00000101"),
    (I8, Op::Bxor, "fd640007", "05640200", "f8000207"),
    (Byte, Op::Band, "fd640007", "05640200", "05640000"),
    (Byte, Op::Bor, "fd640007", "05640200", "fd640207"),
    (Byte, Op::Bxor, "fd640007", "05640200", "f8000207"),
    (I32, Op::Max, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "05000000640000000200000007000000"),
    (I32, Op::Min, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "fdffffff640000000000000000000000"),
    (I32, Op::Sum, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "02000000c80000000200000007000000"),
    (I32, Op::Prod, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "f1ffffff102700000000000000000000"),
    (I32, Op::Land, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "01000000010000000000000000000000"),
    (I32, Op::Band, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "05000000640000000000000000000000"),
    (I32, Op::Lor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "01000000010000000100000001000000"),
    (I32, Op::Bor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "fdffffff640000000200000007000000"),
    (I32, Op::Lxor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "00000000000000000100000001000000"),
    (I32, Op::Bxor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "f8ffffff000000000200000007000000"),
    (U32, Op::Sum, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "02000000c80000000200000007000000"),
    (U32, Op::Prod, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "f1ffffff102700000000000000000000"),
    (U32, Op::Land, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "01000000010000000000000000000000"),
    (U32, Op::Band, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "05000000640000000000000000000000"),
    (U32, Op::Lor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "01000000010000000100000001000000"),
    (U32, Op::Bor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "fdffffff640000000200000007000000"),
    (U32, Op::Lxor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "00000000000000000100000001000000"),
    (U32, Op::Bxor, "fdffffff640000000000000007000000", "05000000640000000200000000000000", "f8ffffff000000000200000007000000"),
    (I64, Op::Max, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0500000000000000640000000000000002000000000000000700000000000000"),
    (I64, Op::Min, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "fdffffffffffffff640000000000000000000000000000000000000000000000"),
    (I64, Op::Sum, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0200000000000000c80000000000000002000000000000000700000000000000"),
    (I64, Op::Prod, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "f1ffffffffffffff102700000000000000000000000000000000000000000000"),
    (I64, Op::Land, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0100000000000000010000000000000000000000000000000000000000000000"),
    (I64, Op::Band, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0500000000000000640000000000000000000000000000000000000000000000"),
    (I64, Op::Lor, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0100000000000000010000000000000001000000000000000100000000000000"),
    (I64, Op::Bor, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "fdffffffffffffff640000000000000002000000000000000700000000000000"),
    (I64, Op::Lxor, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "0000000000000000000000000000000001000000000000000100000000000000"),
    (I64, Op::Bxor, "fdffffffffffffff640000000000000000000000000000000700000000000000", "0500000000000000640000000000000002000000000000000000000000000000", "f8ffffffffffffff000000000000000002000000000000000700000000000000"),
    (F32, Op::Max, "000060c00080c842000000000000e040", "0000a0400080c8420000004000000000", "0000a0400080c842000000400000e040"),
    (F32, Op::Min, "000060c00080c842000000000000e040", "0000a0400080c8420000004000000000", "000060c00080c8420000000000000000"),
    (F32, Op::Sum, "000060c00080c842000000000000e040", "0000a0400080c8420000004000000000", "0000c03f00804843000000400000e040"),
    (F32, Op::Prod, "000060c00080c842000000000000e040", "0000a0400080c8420000004000000000", "00008cc140081d460000000000000000"),
    (F32, Op::Lxor, "000060c00080c842000000000000e040", "0000a0400080c8420000004000000000", "00000000000000000000803f0000803f"),
    (F64, Op::Max, "0000000000000cc0000000000010594000000000000000000000000000001c40", "0000000000001440000000000010594000000000000000400000000000000000", "0000000000001440000000000010594000000000000000400000000000001c40"),
    (F64, Op::Min, "0000000000000cc0000000000010594000000000000000000000000000001c40", "0000000000001440000000000010594000000000000000400000000000000000", "0000000000000cc0000000000010594000000000000000000000000000000000"),
    (F64, Op::Sum, "0000000000000cc0000000000010594000000000000000000000000000001c40", "0000000000001440000000000010594000000000000000400000000000000000", "000000000000f83f000000000010694000000000000000400000000000001c40"),
    (F64, Op::Prod, "0000000000000cc0000000000010594000000000000000000000000000001c40", "0000000000001440000000000010594000000000000000400000000000000000", "00000000008031c00000000008a1c34000000000000000000000000000000000"),
    (F64, Op::Lxor, "0000000000000cc0000000000010594000000000000000000000000000001c40", "0000000000001440000000000010594000000000000000400000000000000000", "00000000000000000000000000000000000000000000f03f000000000000f03f"),
    (LongDouble, Op::Max, "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000e00140000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000000000000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000e00140000000000000"),
    (LongDouble, Op::Min, "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000e00140000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000000000000000000000", "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000000000000000000000"),
    (LongDouble, Op::Sum, "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000e00140000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000000000000000000000", "00000000000000c0ff3f00000000000000000000000080c806400000000000000000000000000080004000000000000000000000000000e00140000000000000"),
    (LongDouble, Op::Prod, "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000e00140000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000000000000000000000", "000000000000008c03c0000000000000000000000040089d0c400000000000000000000000000000000000000000000000000000000000000000000000000000"),
    (LongDouble, Op::Lxor, "00000000000000e000c000000000000000000000000080c805400000000000000000000000000000000000000000000000000000000000e00140000000000000", "00000000000000a0014000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000000000000000000000", "00000000000000000000000000000000000000000000000000000000000000000000000000000080ff3f0000000000000000000000000080ff3f000000000000"),
    (Bool, Op::Land, "fd640007", "05640200", "01010000"),
    (Bool, Op::Lor, "fd640007", "05640200", "01010101"),
    (Bool, Op::Lxor, "fd640007", "05640200", "00000101"),
    (FloatInt, Op::MinLoc, "000060c00a0000000080c84204000000000000000a0000000000e0400a000000", "0000a040140000000080c8420200000000000040140000000000000014000000", "000060c00a0000000080c84202000000000000000a0000000000000014000000"),
    (FloatInt, Op::MaxLoc, "000060c00a0000000080c84204000000000000000a0000000000e0400a000000", "0000a040140000000080c8420200000000000040140000000000000014000000", "0000a040140000000080c8420200000000000040140000000000e0400a000000"),
    (DoubleInt, Op::MinLoc, "0000000000000cc00a000000000000000000000000105940040000000000000000000000000000000a000000000000000000000000001c400a00000000000000", "00000000000014401400000000000000000000000010594002000000000000000000000000000040140000000000000000000000000000001400000000000000", "0000000000000cc00a000000eeeeeeee000000000010594002000000eeeeeeee00000000000000000a000000eeeeeeee000000000000000014000000eeeeeeee"),
    (DoubleInt, Op::MaxLoc, "0000000000000cc00a000000000000000000000000105940040000000000000000000000000000000a000000000000000000000000001c400a00000000000000", "00000000000014401400000000000000000000000010594002000000000000000000000000000040140000000000000000000000000000001400000000000000", "000000000000144014000000eeeeeeee000000000010594002000000eeeeeeee000000000000004014000000eeeeeeee0000000000001c400a000000eeeeeeee"),
    (LongInt, Op::MinLoc, "fdffffffffffffff0a000000000000006400000000000000040000000000000000000000000000000a0000000000000007000000000000000a00000000000000", "05000000000000001400000000000000640000000000000002000000000000000200000000000000140000000000000000000000000000001400000000000000", "fdffffffffffffff0a000000eeeeeeee640000000000000002000000eeeeeeee00000000000000000a000000eeeeeeee000000000000000014000000eeeeeeee"),
    (LongInt, Op::MaxLoc, "fdffffffffffffff0a000000000000006400000000000000040000000000000000000000000000000a0000000000000007000000000000000a00000000000000", "05000000000000001400000000000000640000000000000002000000000000000200000000000000140000000000000000000000000000001400000000000000", "050000000000000014000000eeeeeeee640000000000000002000000eeeeeeee020000000000000014000000eeeeeeee07000000000000000a000000eeeeeeee"),
    (ShortInt, Op::MinLoc, "fdff00000a0000006400000004000000000000000a000000070000000a000000", "0500000014000000640000000200000002000000140000000000000014000000", "fdffeeee0a0000006400eeee020000000000eeee0a0000000000eeee14000000"),
    (ShortInt, Op::MaxLoc, "fdff00000a0000006400000004000000000000000a000000070000000a000000", "0500000014000000640000000200000002000000140000000000000014000000", "0500eeee140000006400eeee020000000200eeee140000000700eeee0a000000"),
    (TwoInt, Op::MinLoc, "fdffffff0a0000006400000004000000000000000a000000070000000a000000", "0500000014000000640000000200000002000000140000000000000014000000", "fdffffff0a0000006400000002000000000000000a0000000000000014000000"),
    (TwoInt, Op::MaxLoc, "fdffffff0a0000006400000004000000000000000a000000070000000a000000", "0500000014000000640000000200000002000000140000000000000014000000", "050000001400000064000000020000000200000014000000070000000a000000"),
    (LongDoubleInt, Op::MinLoc, "00000000000000e000c00000000000000a00000000000000000000000000000000000000000080c8054000000000000004000000000000000000000000000000000000000000000000000000000000000a00000000000000000000000000000000000000000000e001400000000000000a000000000000000000000000000000", "00000000000000a001400000000000001400000000000000000000000000000000000000000080c805400000000000000200000000000000000000000000000000000000000000800040000000000000140000000000000000000000000000000000000000000000000000000000000014000000000000000000000000000000", "00000000000000e000c00000000000000a000000eeeeeeeeeeeeeeeeeeeeeeee00000000000080c8054000000000000002000000eeeeeeeeeeeeeeeeeeeeeeee000000000000000000000000000000000a000000eeeeeeeeeeeeeeeeeeeeeeee0000000000000000000000000000000014000000eeeeeeeeeeeeeeeeeeeeeeee"),
    (LongDoubleInt, Op::MaxLoc, "00000000000000e000c00000000000000a00000000000000000000000000000000000000000080c8054000000000000004000000000000000000000000000000000000000000000000000000000000000a00000000000000000000000000000000000000000000e001400000000000000a000000000000000000000000000000", "00000000000000a001400000000000001400000000000000000000000000000000000000000080c805400000000000000200000000000000000000000000000000000000000000800040000000000000140000000000000000000000000000000000000000000000000000000000000014000000000000000000000000000000", "00000000000000a0014000000000000014000000eeeeeeeeeeeeeeeeeeeeeeee00000000000080c8054000000000000002000000eeeeeeeeeeeeeeeeeeeeeeee0000000000000080004000000000000014000000eeeeeeeeeeeeeeeeeeeeeeee00000000000000e001400000000000000a000000eeeeeeeeeeeeeeeeeeeeeeee"),
    (ComplexFloat, Op::Sum, "000060c00080c8420080c84200000000000000000000e0400000e040000060c0", "0000a0400080c8420080c842000000400000004000000000000000000000a040", "0000c03f008048430080484300000040000000400000e0400000e0400000c03f"),
    (ComplexFloat, Op::Prod, "000060c00080c8420080c84200000000000000000000e0400000e040000060c0", "0000a0400080c8420080c842000000400000004000000000000000000000a040", "404e1dc60060164340081d4600804843000000000000604100008c4100000c42"),
    (ComplexDouble, Op::Sum, "0000000000000cc000000000001059400000000000105940000000000000000000000000000000000000000000001c400000000000001c400000000000000cc0", "00000000000014400000000000105940000000000010594000000000000000400000000000000040000000000000000000000000000000000000000000001440", "000000000000f83f00000000001069400000000000106940000000000000004000000000000000400000000000001c400000000000001c40000000000000f83f"),
    (ComplexDouble, Op::Prod, "0000000000000cc000000000001059400000000000105940000000000000000000000000000000000000000000001c400000000000001c400000000000000cc0", "00000000000014400000000000105940000000000010594000000000000000400000000000000040000000000000000000000000000000000000000000001440", "00000000c8a9c3c00000000000cc62400000000008a1c340000000000010694000000000000000000000000000002c4000000000008031400000000000804140"),
    (ComplexLongDouble, Op::Sum, "00000000000000e000c000000000000000000000000080c8054000000000000000000000000080c80540000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e0014000000000000000000000000000e0014000000000000000000000000000e000c0000000000000", "00000000000000a0014000000000000000000000000080c8054000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000800040000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000a00140000000000000", "00000000000000c0ff3f00000000000000000000000080c8064000000000000000000000000080c80640000000000000000000000000008000400000000000000000000000000080004000000000000000000000000000e0014000000000000000000000000000e0014000000000000000000000000000c0ff3f000000000000"),
    (ComplexLongDouble, Op::Prod, "00000000000000e000c000000000000000000000000080c8054000000000000000000000000080c80540000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e0014000000000000000000000000000e0014000000000000000000000000000e000c0000000000000", "00000000000000a0014000000000000000000000000080c8054000000000000000000000000080c805400000000000000000000000000080004000000000000000000000000000800040000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000a00140000000000000", "0000000000404e9d0cc000000000000000000000000060960640000000000000000000000040089d0c4000000000000000000000000080c806400000000000000000000000000000000000000000000000000000000000e00240000000000000000000000000008c0340000000000000000000000000008c0440000000000000"),
];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn reproduces_mpich_results() {
    for &(ty, op, in0, in1, want) in MPICH_ROWS {
        if cfg!(miri) && x87_only(ty) {
            continue;
        }
        // Only the x87 types may lack a kernel, and only off x86-64.
        let Some(k) = kernel(op, ty) else {
            assert!(expected_ops(ty).is_empty(), "{ty:?} {op:?}");
            continue;
        };
        let (src, mut dst, want) = (unhex(in1), unhex(in0), unhex(want));
        k(&src, &mut dst);
        let mask = data_mask(ty);
        for (i, (g, w)) in dst.iter().zip(&want).enumerate() {
            if mask[i % ty.extent()] {
                assert_eq!(g, w, "{ty:?} {op:?} byte {i}: got {dst:02x?}");
            }
        }
    }
}

/// Bandwidth of the main kernels; run by hand:
/// `cargo test --release throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput() {
    use std::time::Instant;
    for (bytes, label) in [(256 << 10, "256 KiB (L2)"), (64 << 20, "64 MiB (DRAM)")] {
        for (ty, op) in [
            (F32, Op::Sum),
            (F64, Op::Sum),
            (I32, Op::Sum),
            (I64, Op::Sum),
            (F32, Op::Max),
            (F64, Op::Min),
            (I32, Op::Max),
            (I64, Op::Min),
            (U8, Op::Bxor),
            (F16, Op::Sum),
            (Bf16, Op::Sum),
            (FloatInt, Op::MinLoc),
            (LongDouble, Op::Sum),
        ] {
            let Some(k) = kernel(op, ty) else { continue };
            let n = bytes / ty.extent() * ty.extent();
            let src: Vec<u8> = (0..n + 1).map(|i| (i % 61) as u8).collect();
            let mut dst: Vec<u8> = (0..n + 1).map(|i| (i % 59) as u8).collect();
            for (so, tag) in [(0, "aligned"), (1, "src+1")] {
                // Best of many short runs: the build machine is shared.
                let reps = (16usize << 20) / n + 1;
                let mut best = f64::MAX;
                for _ in 0..40 {
                    let t = Instant::now();
                    for _ in 0..reps {
                        k(std::hint::black_box(&src[so..so + n]), &mut dst[..n]);
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let gbs = (reps * n) as f64 / best / 1e9;
                println!("{label:14} {ty:?} {op:?} {tag}: {gbs:.2} GB/s (of dst)");
            }
        }
    }
}

/// Arbitrary bytes (xorshift from `seed`), `n` per call.
#[cfg(target_arch = "x86_64")]
pub(super) fn xorshift_bytes(seed: u64) -> impl FnMut(usize) -> Vec<u8> {
    let mut x = seed;
    move |n| {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

/// Whether an element is a NaN (which NaN an operation returns when both
/// operands are NaN depends on operand order, which the compiler may swap
/// for a commutative op; MPI leaves NaN payloads unspecified).
#[cfg(target_arch = "x86_64")]
fn is_nan(ty: ElemType, e: &[u8]) -> bool {
    let u16_at = |e: &[u8]| u16::from_ne_bytes([e[0], e[1]]);
    match ty {
        F32 => f32::from_ne_bytes(e.try_into().expect("4 bytes")).is_nan(),
        F64 => f64::from_ne_bytes(e.try_into().expect("8 bytes")).is_nan(),
        F16 => u16_at(e) & 0x7c00 == 0x7c00 && u16_at(e) & 0x3ff != 0,
        Bf16 => u16_at(e) & 0x7f80 == 0x7f80 && u16_at(e) & 0x7f != 0,
        _ => false,
    }
}

/// The first element (of `ty`) where `got` differs from `want`, if any; a
/// NaN matches any NaN (kernels may set a NaN's quiet bit or not).
#[cfg(target_arch = "x86_64")]
pub(super) fn first_difference(ty: ElemType, want: &[u8], got: &[u8]) -> Option<usize> {
    let ext = ty.extent();
    want.chunks(ext)
        .zip(got.chunks(ext))
        .position(|(x, y)| x != y && !(is_nan(ty, x) && is_nan(ty, y)))
}

/// Checks that every kernel `table` gives for MAX, MIN, SUM and PROD on the
/// types the vector builds cover gives bit for bit what the baseline kernel
/// gives, on arbitrary bytes (infinities, subnormals, overflow included;
/// NaNs only need to stay NaNs); returns how many (op, type) it checked.
/// f16 is left out where the CPU has no F16C.
#[cfg(target_arch = "x86_64")]
pub(super) fn assert_same_as_baseline(table: fn(Op, ElemType) -> Option<KernelFn>) -> usize {
    let f16c = std::arch::is_x86_feature_detected!("f16c");
    let mut bytes = xorshift_bytes(0x9e37_79b9_7f4a_7c15);
    let mut tried = 0;
    let lens: &[usize] = if cfg!(miri) {
        &[0, 1, 7, 64]
    } else {
        &[0, 1, 7, 64, 1001, 4099]
    };
    let offsets: &[usize] = if cfg!(miri) {
        &[0, 3, 14]
    } else {
        &[0, 1, 2, 4, 8, 14, 16, 24, 40, 62]
    };
    let types = [F32, F64, I32, U32, I64, U64, F16, Bf16];
    for ty in types.into_iter().filter(|&t| f16c || t != F16) {
        for op in [Op::Max, Op::Min, Op::Sum, Op::Prod] {
            let Some(wide) = table(op, ty) else { continue };
            let base = baseline(op, ty).expect("baseline kernel");
            for &len in lens {
                let n = len * ty.extent();
                // The destination at offsets from a 64-byte line, element-
                // aligned or not (the vector loops align their stores);
                // nothing around it may change.
                for &off in offsets {
                    let (s, d) = (bytes(n), bytes(n));
                    let placed = || {
                        let mut buf = vec![0x5a_u8; n + 127];
                        let at = buf.as_ptr().align_offset(64) + off;
                        buf[at..at + n].copy_from_slice(&d);
                        (buf, at)
                    };
                    let ((mut a, i), (mut b, j)) = (placed(), placed());
                    base(&s, &mut a[i..i + n]);
                    wide(&s, &mut b[j..j + n]);
                    let diff = first_difference(ty, &a[i..i + n], &b[j..j + n]);
                    assert!(
                        diff.is_none(),
                        "{op:?} on {ty:?}, {len} elements, {off} past a line: element {diff:?}"
                    );
                    let around =
                        |v: &[u8], k: usize| v[..k].iter().chain(&v[k + n..]).all(|&x| x == 0x5a);
                    assert!(
                        around(&b, j),
                        "{op:?} on {ty:?} wrote outside its destination"
                    );
                }
            }
            tried += 1;
        }
    }
    tried
}

#[test]
fn kernel_table_is_indexed_by_declaration_order() {
    for (i, op) in Op::ALL.iter().enumerate() {
        assert_eq!(*op as usize, i, "{op:?}");
    }
    for (i, ty) in ElemType::ALL.iter().enumerate() {
        assert_eq!(*ty as usize, i, "{ty:?}");
    }
    for op in Op::ALL {
        for ty in ElemType::ALL {
            assert_eq!(
                kernel(op, ty).is_some(),
                choose(op, ty).is_some(),
                "{op:?} {ty:?}"
            );
        }
    }
}
