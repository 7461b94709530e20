//! Datatypes: decoding handles (predefined or derived contiguous) and the
//! `MPI_Type_*` exports.

use super::consts::*;
use super::datatypes::{self, Builtin};
use super::errors::{MpiErr, MpiResult};
use super::ptr;
use super::state::{call, Runtime};
use std::os::raw::{c_char, c_int};

/// What the core needs to know about a datatype.
#[derive(Clone, Copy, Debug)]
pub struct TypeInfo {
    /// Data bytes per element (`MPI_Type_size`).
    pub size: usize,
    /// Bytes from one element to the next (`MPI_Type_get_extent`).
    pub extent: usize,
    /// The predefined type it is made of.
    pub base: &'static Builtin,
    /// Built with a type constructor (predefined ops refuse these, as MPICH).
    pub derived: bool,
}

impl TypeInfo {
    /// A predefined type's.
    #[inline]
    pub fn builtin(b: &'static Builtin) -> TypeInfo {
        TypeInfo {
            size: b.elem.size(),
            extent: b.elem.extent(),
            base: b,
            derived: false,
        }
    }

    /// Bytes occupied by `count` elements, or `MPI_ERR_COUNT` when no
    /// buffer can be that large (over `PTRDIFF_MAX`, the most any object
    /// may span).
    pub fn bytes(&self, count: c_int) -> MpiResult<usize> {
        let c = count_of(count)?;
        c.checked_mul(self.extent)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| {
                MpiErr::new(
                    MPI_ERR_COUNT,
                    format!("count {count} overflows the address space"),
                )
            })
    }

    /// Data bytes in a message of `raw` transferred bytes (pair types have
    /// padding that does not count).
    pub fn data_bytes(&self, raw: usize) -> usize {
        if self.extent == 0 {
            return 0;
        }
        (raw / self.extent) * self.size + (raw % self.extent).min(self.size)
    }
}

/// A derived datatype (only contiguous ones are supported).
#[derive(Clone, Debug)]
pub struct Derived {
    /// Its layout.
    pub info: TypeInfo,
    /// `MPI_Type_commit` was called.
    pub committed: bool,
}

/// A non-negative count, or `MPI_ERR_COUNT`.
pub fn count_of(count: c_int) -> MpiResult<usize> {
    usize::try_from(count)
        .map_err(|_| MpiErr::new(MPI_ERR_COUNT, format!("negative count {count}")))
}

impl Runtime {
    /// Decodes a datatype handle; uncommitted derived types are refused.
    pub fn type_info(&self, dt: MPI_Datatype) -> MpiResult<TypeInfo> {
        self.type_info_any(dt, false)
    }

    /// Like `type_info`, also for uncommitted derived types when
    /// `allow_uncommitted` (only communication needs a committed type).
    pub(crate) fn type_info_any(
        &self,
        dt: MPI_Datatype,
        allow_uncommitted: bool,
    ) -> MpiResult<TypeInfo> {
        if let Some(b) = datatypes::builtin(dt) {
            return Ok(TypeInfo::builtin(b));
        }
        match self.types.get(&dt) {
            Some(d) if d.committed || allow_uncommitted => Ok(d.info),
            Some(_) => Err(MpiErr::new(
                MPI_ERR_TYPE,
                format!("datatype {dt:#x} is not committed (call MPI_Type_commit)"),
            )),
            None if dt == MPI_DATATYPE_NULL => Err(MpiErr::new(
                MPI_ERR_TYPE,
                "MPI_DATATYPE_NULL passed as a datatype",
            )),
            None => Err(MpiErr::new(
                MPI_ERR_TYPE,
                format!("invalid datatype handle {dt:#x}"),
            )),
        }
    }
}

/// Exports `MPI_Type_size`.
#[no_mangle]
pub extern "C" fn MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    PMPI_Type_size(datatype, size)
}

/// Profiling twin of `MPI_Type_size`.
#[no_mangle]
pub extern "C" fn PMPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    call("MPI_Type_size", MPI_COMM_WORLD, |rt| {
        let t = rt.type_info_any(datatype, true)?;
        // A size an int cannot hold is MPI_UNDEFINED (MPI-4.0 5.1.5).
        ptr::put(
            size,
            c_int::try_from(t.size).unwrap_or(MPI_UNDEFINED),
            "size",
        )
    })
}

/// Exports `MPI_Type_get_extent`.
#[no_mangle]
pub extern "C" fn MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    PMPI_Type_get_extent(datatype, lb, extent)
}

/// Profiling twin of `MPI_Type_get_extent`.
#[no_mangle]
pub extern "C" fn PMPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    call("MPI_Type_get_extent", MPI_COMM_WORLD, |rt| {
        let t = rt.type_info_any(datatype, true)?;
        ptr::put(lb, 0, "lb")?;
        ptr::put(extent, t.extent as MPI_Aint, "extent")
    })
}

/// Exports `MPI_Type_get_name`.
#[no_mangle]
pub extern "C" fn MPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    PMPI_Type_get_name(datatype, type_name, resultlen)
}

/// Profiling twin of `MPI_Type_get_name`.
#[no_mangle]
pub extern "C" fn PMPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Type_get_name", MPI_COMM_WORLD, |rt| {
        rt.type_info_any(datatype, true)?;
        let name = datatypes::builtin(datatype).map_or("", |b| b.name);
        ptr::put_str(type_name, MPI_MAX_OBJECT_NAME as usize, name, resultlen)
    })
}

/// Exports `MPI_Type_contiguous`.
#[no_mangle]
pub extern "C" fn MPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    PMPI_Type_contiguous(count, oldtype, newtype)
}

/// Profiling twin of `MPI_Type_contiguous`.
#[no_mangle]
pub extern "C" fn PMPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call("MPI_Type_contiguous", MPI_COMM_WORLD, |rt| {
        let n = count_of(count)?;
        let old = rt.type_info_any(oldtype, true)?;
        let overflow = || MpiErr::new(MPI_ERR_COUNT, "type size overflows");
        let info = TypeInfo {
            size: old.size.checked_mul(n).ok_or_else(overflow)?,
            extent: old.extent.checked_mul(n).ok_or_else(overflow)?,
            base: old.base,
            derived: true,
        };
        if newtype.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "newtype is NULL"));
        }
        let h = rt.new_handle(0x8c00_0000);
        rt.types.insert(
            h,
            Derived {
                info,
                committed: false,
            },
        );
        ptr::put(newtype, h, "newtype")
    })
}

/// Exports `MPI_Type_commit`.
#[no_mangle]
pub extern "C" fn MPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    PMPI_Type_commit(datatype)
}

/// Profiling twin of `MPI_Type_commit`.
#[no_mangle]
pub extern "C" fn PMPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    call("MPI_Type_commit", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(datatype, "datatype")?;
        if datatypes::builtin(h).is_some() {
            return Ok(()); // committing a predefined type is a no-op in MPICH
        }
        match rt.types.get_mut(&h) {
            Some(d) => {
                d.committed = true;
                Ok(())
            }
            None => Err(MpiErr::new(
                MPI_ERR_TYPE,
                format!("invalid datatype handle {h:#x}"),
            )),
        }
    })
}

/// Exports `MPI_Type_free`.
#[no_mangle]
pub extern "C" fn MPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    PMPI_Type_free(datatype)
}

/// Profiling twin of `MPI_Type_free`.
#[no_mangle]
pub extern "C" fn PMPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    call("MPI_Type_free", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(datatype, "datatype")?;
        if datatypes::builtin(h).is_some() {
            return Err(MpiErr::new(
                MPI_ERR_TYPE,
                "cannot free a predefined datatype",
            ));
        }
        rt.types
            .remove(&h)
            .ok_or_else(|| MpiErr::new(MPI_ERR_TYPE, format!("invalid datatype handle {h:#x}")))?;
        ptr::put(datatype, MPI_DATATYPE_NULL, "datatype")
    })
}
