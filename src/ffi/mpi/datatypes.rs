//! MPICH's predefined C datatypes: handle values, the names `MPI_Type_get_name` returns, the
//! element type each maps to, and which predefined ops MPICH accepts on each in
//! `MPI_Reduce`/`MPI_Allreduce`.
//!
//! Everything here was measured against MPICH 4.0.2 (Debian) with the probe in
//! `/work/scratch/h1/probe/` (`probe.c`, `run.sh`, outputs `out-n1.txt`, `out-n2.txt`, `matrix.txt`).
//! Values are for x86-64 Linux (LP64: `long` and `MPI_Aint` are 64-bit).
//! Fortran datatypes (`MPI_INTEGER`, `MPI_REAL`, ...) and the deprecated `MPI_LB`/`MPI_UB`
//! markers are not in the table.

use crate::dtype::ElemType;
use crate::reduce::Op;

use super::consts::*;

/// Which predefined ops MPICH accepts on a datatype (its op "type groups").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// C integers, including `char`: MAX MIN SUM PROD LAND BAND LOR BOR LXOR BXOR.
    Integer,
    /// Floating point: MAX MIN SUM PROD LAND LOR LXOR.
    Floating,
    /// C/C++ bool: LAND LOR LXOR.
    Logical,
    /// `MPI_BYTE`: BAND BOR BXOR.
    Byte,
    /// Complex: SUM PROD.
    Complex,
    /// Value-index pairs: MINLOC MAXLOC.
    Pair,
    /// No predefined op (`MPI_WCHAR`, `MPI_PACKED`).
    NoOps,
}

/// One predefined MPI datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    pub handle: i32,
    /// Exactly what MPICH's `MPI_Type_get_name` returns (empty for `MPIX_C_FLOAT16`).
    pub name: &'static str,
    /// The `mpi.h` macro that names the handle (differs from `name` for
    /// `MPI_C_FLOAT_COMPLEX` and `MPIX_C_FLOAT16`); for messages and headers.
    pub macro_name: &'static str,
    /// What the data is: `size()`/`extent()` equal MPICH's `MPI_Type_size`/extent.
    pub elem: ElemType,
    /// The ops MPICH accepts in reductions.
    pub class: OpClass,
}

/// C `char` is signed on x86-64 (MPICH reduces it as `char`, so MAX of -3 and 5 is 5).
const CHAR: ElemType = if core::ffi::c_char::MIN == 0 {
    ElemType::U8
} else {
    ElemType::I8
};

macro_rules! b {
    ($h:ident, $name:expr, $elem:ident, $class:ident) => {
        Builtin {
            handle: $h,
            name: $name,
            macro_name: stringify!($h),
            elem: ElemType::$elem,
            class: OpClass::$class,
        }
    };
    ($h:ident, $elem:ident, $class:ident) => {
        b!($h, stringify!($h), $elem, $class)
    };
}

static TABLE: [Builtin; 43] = [
    Builtin {
        handle: MPI_CHAR,
        name: "MPI_CHAR",
        macro_name: "MPI_CHAR",
        elem: CHAR,
        class: OpClass::Integer,
    },
    b!(MPI_SIGNED_CHAR, I8, Integer),
    b!(MPI_UNSIGNED_CHAR, U8, Integer),
    b!(MPI_BYTE, Byte, Byte),
    // wchar_t is a 32-bit signed int on Linux; MPICH accepts no reduction op on it.
    b!(MPI_WCHAR, I32, NoOps),
    b!(MPI_SHORT, I16, Integer),
    b!(MPI_UNSIGNED_SHORT, U16, Integer),
    b!(MPI_INT, I32, Integer),
    b!(MPI_UNSIGNED, U32, Integer),
    b!(MPI_LONG, I64, Integer),
    b!(MPI_UNSIGNED_LONG, U64, Integer),
    b!(MPI_FLOAT, F32, Floating),
    b!(MPI_DOUBLE, F64, Floating),
    b!(MPI_LONG_DOUBLE, LongDouble, Floating),
    b!(MPI_LONG_LONG_INT, I64, Integer),
    b!(MPI_UNSIGNED_LONG_LONG, U64, Integer),
    b!(MPI_PACKED, Byte, NoOps),
    b!(MPI_FLOAT_INT, FloatInt, Pair),
    b!(MPI_DOUBLE_INT, DoubleInt, Pair),
    b!(MPI_LONG_INT, LongInt, Pair),
    b!(MPI_SHORT_INT, ShortInt, Pair),
    b!(MPI_2INT, TwoInt, Pair),
    b!(MPI_LONG_DOUBLE_INT, LongDoubleInt, Pair),
    b!(MPI_INT8_T, I8, Integer),
    b!(MPI_INT16_T, I16, Integer),
    b!(MPI_INT32_T, I32, Integer),
    b!(MPI_INT64_T, I64, Integer),
    b!(MPI_UINT8_T, U8, Integer),
    b!(MPI_UINT16_T, U16, Integer),
    b!(MPI_UINT32_T, U32, Integer),
    b!(MPI_UINT64_T, U64, Integer),
    b!(MPI_C_BOOL, Bool, Logical),
    b!(MPI_C_FLOAT_COMPLEX, "MPI_C_COMPLEX", ComplexFloat, Complex),
    b!(MPI_C_DOUBLE_COMPLEX, ComplexDouble, Complex),
    b!(MPI_C_LONG_DOUBLE_COMPLEX, ComplexLongDouble, Complex),
    // MPICH 4.0.2 gives this extension type no name; its multi-rank reductions abort
    // inside MPICH (yaksa pack assertion), ours work.
    b!(MPIX_C_FLOAT16, "", F16, Floating),
    // MPI_Aint, MPI_Offset and MPI_Count are all `long` in MPICH's LP64 mpi.h.
    b!(MPI_AINT, I64, Integer),
    b!(MPI_OFFSET, I64, Integer),
    b!(MPI_COUNT, I64, Integer),
    b!(MPI_CXX_BOOL, Bool, Logical),
    b!(MPI_CXX_FLOAT_COMPLEX, ComplexFloat, Complex),
    b!(MPI_CXX_DOUBLE_COMPLEX, ComplexDouble, Complex),
    b!(MPI_CXX_LONG_DOUBLE_COMPLEX, ComplexLongDouble, Complex),
];

/// Where a handle would sit in `BY_KEY`: MPICH's predefined datatype
/// handles differ in their low 7 bits within each of the two kinds
/// (0x4c... and 0x8c..., told apart by bit 31).
const fn key(handle: i32) -> usize {
    ((handle as u32 >> 31) as usize) << 7 | (handle as usize & 0x7f)
}

/// `TABLE` index by `key` (`NONE` where no predefined type sits): every MPI
/// call decodes one or two datatypes, so the lookup is one load, not a scan.
static BY_KEY: [u8; 256] = {
    let mut by = [NONE; 256];
    let mut i = 0;
    while i < TABLE.len() {
        let k = key(TABLE[i].handle);
        assert!(by[k] == NONE, "two predefined datatypes share a key");
        by[k] = i as u8;
        i += 1;
    }
    by
};

const NONE: u8 = u8::MAX;

/// The predefined datatype with this handle, if any.
pub fn builtin(handle: i32) -> Option<&'static Builtin> {
    let i = BY_KEY[key(handle)];
    TABLE.get(usize::from(i)).filter(|b| b.handle == handle)
}

/// Whether MPICH accepts `op` on this type in MPI_Reduce/MPI_Allreduce.
///
/// MPICH rejects MPI_REPLACE and MPI_NO_OP (with MPI_ERR_OP) on every type in both calls.
/// It accepts LAND/LOR/LXOR on floating types, but then aborts on an internal assertion
/// for LAND and LOR once two ranks really combine data; we compute 1.0/0.0 as its LXOR does.
pub fn op_allowed(op: Op, t: &Builtin) -> bool {
    use Op::*;
    match t.class {
        OpClass::Integer => matches!(
            op,
            Max | Min | Sum | Prod | Land | Band | Lor | Bor | Lxor | Bxor
        ),
        OpClass::Floating => matches!(op, Max | Min | Sum | Prod | Land | Lor | Lxor),
        OpClass::Logical => matches!(op, Land | Lor | Lxor),
        OpClass::Byte => matches!(op, Band | Bor | Bxor),
        OpClass::Complex => matches!(op, Sum | Prod),
        OpClass::Pair => matches!(op, MinLoc | MaxLoc),
        OpClass::NoOps => false,
    }
}

/// Every predefined datatype in the table.
pub fn all() -> &'static [Builtin] {
    &TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (handle, MPI_Type_get_name, MPI_Type_size, extent, ops accepted in MPI_Op handle order
    /// MAX MIN SUM PROD LAND BAND LOR BOR LXOR BXOR MINLOC MAXLOC REPLACE NO_OP), copied
    /// from /work/scratch/h1/probe/out-n1.txt (MPICH 4.0.2, -n 1; -n 2 accepts the same set).
    const MPICH: [(i32, &str, usize, usize, &str); 43] = [
        (MPI_CHAR, "MPI_CHAR", 1, 1, "xxxxxxxxxx...."),
        (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, 1, "xxxxxxxxxx...."),
        (
            MPI_UNSIGNED_CHAR,
            "MPI_UNSIGNED_CHAR",
            1,
            1,
            "xxxxxxxxxx....",
        ),
        (MPI_BYTE, "MPI_BYTE", 1, 1, ".....x.x.x...."),
        (MPI_WCHAR, "MPI_WCHAR", 4, 4, ".............."),
        (MPI_SHORT, "MPI_SHORT", 2, 2, "xxxxxxxxxx...."),
        (
            MPI_UNSIGNED_SHORT,
            "MPI_UNSIGNED_SHORT",
            2,
            2,
            "xxxxxxxxxx....",
        ),
        (MPI_INT, "MPI_INT", 4, 4, "xxxxxxxxxx...."),
        (MPI_UNSIGNED, "MPI_UNSIGNED", 4, 4, "xxxxxxxxxx...."),
        (MPI_LONG, "MPI_LONG", 8, 8, "xxxxxxxxxx...."),
        (
            MPI_UNSIGNED_LONG,
            "MPI_UNSIGNED_LONG",
            8,
            8,
            "xxxxxxxxxx....",
        ),
        (
            MPI_LONG_LONG_INT,
            "MPI_LONG_LONG_INT",
            8,
            8,
            "xxxxxxxxxx....",
        ),
        (
            MPI_UNSIGNED_LONG_LONG,
            "MPI_UNSIGNED_LONG_LONG",
            8,
            8,
            "xxxxxxxxxx....",
        ),
        (MPI_FLOAT, "MPI_FLOAT", 4, 4, "xxxxx.x.x....."),
        (MPI_DOUBLE, "MPI_DOUBLE", 8, 8, "xxxxx.x.x....."),
        (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", 16, 16, "xxxxx.x.x....."),
        (MPI_INT8_T, "MPI_INT8_T", 1, 1, "xxxxxxxxxx...."),
        (MPI_INT16_T, "MPI_INT16_T", 2, 2, "xxxxxxxxxx...."),
        (MPI_INT32_T, "MPI_INT32_T", 4, 4, "xxxxxxxxxx...."),
        (MPI_INT64_T, "MPI_INT64_T", 8, 8, "xxxxxxxxxx...."),
        (MPI_UINT8_T, "MPI_UINT8_T", 1, 1, "xxxxxxxxxx...."),
        (MPI_UINT16_T, "MPI_UINT16_T", 2, 2, "xxxxxxxxxx...."),
        (MPI_UINT32_T, "MPI_UINT32_T", 4, 4, "xxxxxxxxxx...."),
        (MPI_UINT64_T, "MPI_UINT64_T", 8, 8, "xxxxxxxxxx...."),
        (MPI_C_BOOL, "MPI_C_BOOL", 1, 1, "....x.x.x....."),
        (MPI_PACKED, "MPI_PACKED", 1, 1, ".............."),
        (MPI_AINT, "MPI_AINT", 8, 8, "xxxxxxxxxx...."),
        (MPI_OFFSET, "MPI_OFFSET", 8, 8, "xxxxxxxxxx...."),
        (MPI_COUNT, "MPI_COUNT", 8, 8, "xxxxxxxxxx...."),
        (MPI_FLOAT_INT, "MPI_FLOAT_INT", 8, 8, "..........xx.."),
        (MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 12, 16, "..........xx.."),
        (MPI_LONG_INT, "MPI_LONG_INT", 12, 16, "..........xx.."),
        (MPI_SHORT_INT, "MPI_SHORT_INT", 6, 8, "..........xx.."),
        (MPI_2INT, "MPI_2INT", 8, 8, "..........xx.."),
        (
            MPI_LONG_DOUBLE_INT,
            "MPI_LONG_DOUBLE_INT",
            20,
            32,
            "..........xx..",
        ),
        (MPI_C_FLOAT_COMPLEX, "MPI_C_COMPLEX", 8, 8, "..xx.........."),
        (
            MPI_C_DOUBLE_COMPLEX,
            "MPI_C_DOUBLE_COMPLEX",
            16,
            16,
            "..xx..........",
        ),
        (
            MPI_C_LONG_DOUBLE_COMPLEX,
            "MPI_C_LONG_DOUBLE_COMPLEX",
            32,
            32,
            "..xx..........",
        ),
        (MPIX_C_FLOAT16, "", 2, 2, "xxxxx.x.x....."),
        (MPI_CXX_BOOL, "MPI_CXX_BOOL", 1, 1, "....x.x.x....."),
        (
            MPI_CXX_FLOAT_COMPLEX,
            "MPI_CXX_FLOAT_COMPLEX",
            8,
            8,
            "..xx..........",
        ),
        (
            MPI_CXX_DOUBLE_COMPLEX,
            "MPI_CXX_DOUBLE_COMPLEX",
            16,
            16,
            "..xx..........",
        ),
        (
            MPI_CXX_LONG_DOUBLE_COMPLEX,
            "MPI_CXX_LONG_DOUBLE_COMPLEX",
            32,
            32,
            "..xx..........",
        ),
    ];

    #[test]
    fn names_sizes_extents_and_acceptance_match_mpich() {
        assert_eq!(all().len(), MPICH.len());
        for (handle, name, size, extent, ops) in MPICH {
            let b = builtin(handle).unwrap_or_else(|| panic!("{handle:#x} missing"));
            assert_eq!(b.name, name);
            assert_eq!((b.elem.size(), b.elem.extent()), (size, extent), "{name}");
            for (op, mark) in Op::ALL.iter().zip(ops.chars()) {
                assert_eq!(op_allowed(*op, b), mark == 'x', "{name} {op:?}");
            }
        }
    }

    #[test]
    fn sample_rows() {
        let int = builtin(MPI_INT).unwrap();
        assert!(op_allowed(Op::Bxor, int) && !op_allowed(Op::MinLoc, int));
        let float = builtin(MPI_FLOAT).unwrap();
        assert!(op_allowed(Op::Lxor, float) && !op_allowed(Op::Band, float));
        let byte = builtin(MPI_BYTE).unwrap();
        assert!(op_allowed(Op::Bor, byte) && !op_allowed(Op::Sum, byte));
        let pair = builtin(MPI_2INT).unwrap();
        assert!(op_allowed(Op::MaxLoc, pair) && !op_allowed(Op::Max, pair));
        let b = builtin(MPI_C_BOOL).unwrap();
        assert!(op_allowed(Op::Land, b) && !op_allowed(Op::Band, b));
        for t in all() {
            assert!(!op_allowed(Op::Replace, t) && !op_allowed(Op::NoOp, t));
        }
        assert!(builtin(0x0c00_0000).is_none()); // MPI_DATATYPE_NULL
        assert!(builtin(0x4c00_0010).is_none()); // MPI_LB
                                                 // Handles that share a predefined type's lookup key but not its value.
        assert!(builtin(MPI_INT ^ 0x100).is_none());
        assert!(builtin(MPI_INT ^ 0x80).is_none());
        assert!(builtin(MPI_FLOAT_INT | 0x100).is_none()); // a derived type
        assert!(builtin(0x0c00_0005).is_none());
        assert_eq!(builtin(0x4c00_0809).unwrap().name, "MPI_LONG_LONG_INT"); // MPI_LONG_LONG
                                                                             // C `char` is signed on x86-64 and unsigned on aarch64 Linux.
        let char = if core::ffi::c_char::MIN == 0 {
            ElemType::U8
        } else {
            ElemType::I8
        };
        assert_eq!(builtin(MPI_CHAR).unwrap().elem, char);
    }

    #[test]
    fn handles_are_unique_and_builtin_sizes_match_the_handle_bits() {
        for (i, a) in all().iter().enumerate() {
            assert!(
                all()[i + 1..].iter().all(|b| b.handle != a.handle),
                "{}",
                a.name
            );
            // Builtin (kind 1) datatype handles carry the size in bits 15-8.
            if (a.handle as u32) >> 30 == 1 {
                assert_eq!(
                    ((a.handle >> 8) & 0xff) as usize,
                    a.elem.size(),
                    "{}",
                    a.name
                );
            }
        }
    }

    #[test]
    fn every_accepted_op_has_a_kernel() {
        for t in all() {
            for op in Op::ALL {
                if op_allowed(op, t) {
                    let k = crate::reduce::kernel(op, t.elem);
                    let has_x87 = cfg!(target_arch = "x86_64");
                    let needs_x87 = matches!(
                        t.elem,
                        ElemType::LongDouble
                            | ElemType::LongDoubleInt
                            | ElemType::ComplexLongDouble
                    );
                    assert_eq!(k.is_some(), has_x87 || !needs_x87, "{} {op:?}", t.name);
                }
            }
        }
    }
}
