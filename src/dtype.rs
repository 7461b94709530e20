//! Element types the core moves and reduces.
//!
//! Sizes and extents follow the C ABI of x86-64 Linux (LP64), which is what
//! MPICH's predefined datatypes describe; the pair types are the C structs
//! `struct { T value; int index; }` used by MINLOC/MAXLOC.

/// Element types the core can move and reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// Opaque byte: only moved and combined bitwise.
    Byte,
    /// C `_Bool` (one byte; any non-zero byte reads as true).
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the upper half of an f32).
    Bf16,
    /// 8-bit float E4M3 (NCCL's `ncclFloat8e4m3`; no infinities, max 448).
    F8E4M3,
    /// 8-bit float E5M2 (NCCL's `ncclFloat8e5m2`; a binary16's top byte).
    F8E5M2,
    F32,
    F64,
    /// x86-64 80-bit extended precision stored in 16 bytes (6 bytes of padding).
    LongDouble,
    /// `struct { float v; int i; }`
    FloatInt,
    /// `struct { double v; int i; }`: 12 data bytes, 16-byte stride.
    DoubleInt,
    /// `struct { long v; int i; }`: 12 data bytes, 16-byte stride.
    LongInt,
    /// `struct { short v; int i; }`: value at 0, index at 4.
    ShortInt,
    /// `struct { int v; int i; }`
    TwoInt,
    /// `struct { long double v; int i; }`: index at 16, 32-byte stride.
    LongDoubleInt,
    /// C `float _Complex` (re, im).
    ComplexFloat,
    /// C `double _Complex` (re, im).
    ComplexDouble,
    /// C `long double _Complex`: two 16-byte long doubles.
    ComplexLongDouble,
}

impl ElemType {
    /// Every element type, for tests and tables.
    pub const ALL: [ElemType; 26] = [
        ElemType::Byte,
        ElemType::Bool,
        ElemType::I8,
        ElemType::U8,
        ElemType::I16,
        ElemType::U16,
        ElemType::I32,
        ElemType::U32,
        ElemType::I64,
        ElemType::U64,
        ElemType::F16,
        ElemType::Bf16,
        ElemType::F8E4M3,
        ElemType::F8E5M2,
        ElemType::F32,
        ElemType::F64,
        ElemType::LongDouble,
        ElemType::FloatInt,
        ElemType::DoubleInt,
        ElemType::LongInt,
        ElemType::ShortInt,
        ElemType::TwoInt,
        ElemType::LongDoubleInt,
        ElemType::ComplexFloat,
        ElemType::ComplexDouble,
        ElemType::ComplexLongDouble,
    ];

    /// Bytes of data in one element, padding excluded (what `MPI_Type_size` reports).
    pub const fn size(self) -> usize {
        match self {
            ElemType::Byte | ElemType::Bool | ElemType::I8 | ElemType::U8 => 1,
            ElemType::F8E4M3 | ElemType::F8E5M2 => 1,
            ElemType::I16 | ElemType::U16 | ElemType::F16 | ElemType::Bf16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
            ElemType::LongDouble => 16,
            ElemType::FloatInt | ElemType::TwoInt => 8,
            ElemType::DoubleInt | ElemType::LongInt => 12,
            ElemType::ShortInt => 6,
            ElemType::LongDoubleInt => 20,
            ElemType::ComplexFloat => 8,
            ElemType::ComplexDouble => 16,
            ElemType::ComplexLongDouble => 32,
        }
    }

    /// Stride between consecutive elements in an array (what `MPI_Type_get_extent` reports).
    pub const fn extent(self) -> usize {
        match self {
            ElemType::DoubleInt | ElemType::LongInt => 16,
            ElemType::ShortInt => 8,
            ElemType::LongDoubleInt => 32,
            other => other.size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ElemType;
    use core::mem::{align_of, size_of};

    #[repr(C)]
    struct Pair<T> {
        v: T,
        i: i32,
    }

    #[test]
    fn extents_match_rust_repr_c_layout() {
        assert_eq!(ElemType::FloatInt.extent(), size_of::<Pair<f32>>());
        assert_eq!(ElemType::DoubleInt.extent(), size_of::<Pair<f64>>());
        assert_eq!(ElemType::LongInt.extent(), size_of::<Pair<i64>>());
        assert_eq!(ElemType::ShortInt.extent(), size_of::<Pair<i16>>());
        assert_eq!(ElemType::TwoInt.extent(), size_of::<Pair<i32>>());
        // long double is 16-byte aligned on x86-64, so the index sits at 16.
        #[repr(C, align(16))]
        struct Ld([u8; 16]);
        assert_eq!(align_of::<Ld>(), 16);
        assert_eq!(ElemType::LongDoubleInt.extent(), size_of::<Pair<Ld>>());
    }

    #[test]
    fn mpich_sizes_and_extents() {
        // (type, MPI_Type_size, extent) as measured with MPICH 4.0.2 (/work/scratch/h1/probe/out-n1.txt).
        let expect = [
            (ElemType::FloatInt, 8, 8),
            (ElemType::DoubleInt, 12, 16),
            (ElemType::LongInt, 12, 16),
            (ElemType::ShortInt, 6, 8),
            (ElemType::TwoInt, 8, 8),
            (ElemType::LongDoubleInt, 20, 32),
            (ElemType::LongDouble, 16, 16),
            (ElemType::ComplexFloat, 8, 8),
            (ElemType::ComplexDouble, 16, 16),
            (ElemType::ComplexLongDouble, 32, 32),
            (ElemType::F16, 2, 2),
            (ElemType::Bool, 1, 1),
        ];
        for (t, size, extent) in expect {
            assert_eq!((t.size(), t.extent()), (size, extent), "{t:?}");
        }
        for t in ElemType::ALL {
            assert!(t.size() <= t.extent() && t.size() > 0, "{t:?}");
        }
    }
}
