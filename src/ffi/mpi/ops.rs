//! Reduction operations: predefined ops checked against the datatype the
//! way MPICH does, user functions from `MPI_Op_create`, and the type-erased
//! `Reducer` the algorithms use.

use super::consts::*;
use super::datatypes;
use super::errors::{MpiErr, MpiResult};
use super::ptr;
use super::state::{call, Runtime};
use super::types::TypeInfo;
use crate::coll::Reducer;
use crate::reduce::{self, Op};
use std::os::raw::{c_int, c_void};

/// A user-defined operation.
#[derive(Clone, Copy, Debug)]
pub struct UserOp {
    /// The C function.
    pub f: MPI_User_function,
    /// Whether operands may be reordered.
    pub commute: bool,
}

const BUILTIN_OPS: [(MPI_Op, Op, &str); 14] = [
    (MPI_MAX, Op::Max, "MPI_MAX"),
    (MPI_MIN, Op::Min, "MPI_MIN"),
    (MPI_SUM, Op::Sum, "MPI_SUM"),
    (MPI_PROD, Op::Prod, "MPI_PROD"),
    (MPI_LAND, Op::Land, "MPI_LAND"),
    (MPI_BAND, Op::Band, "MPI_BAND"),
    (MPI_LOR, Op::Lor, "MPI_LOR"),
    (MPI_BOR, Op::Bor, "MPI_BOR"),
    (MPI_LXOR, Op::Lxor, "MPI_LXOR"),
    (MPI_BXOR, Op::Bxor, "MPI_BXOR"),
    (MPI_MINLOC, Op::MinLoc, "MPI_MINLOC"),
    (MPI_MAXLOC, Op::MaxLoc, "MPI_MAXLOC"),
    (MPI_REPLACE, Op::Replace, "MPI_REPLACE"),
    (MPI_NO_OP, Op::NoOp, "MPI_NO_OP"),
];

/// The predefined op behind a handle, and its name.
pub fn builtin_op(op: MPI_Op) -> Option<(Op, &'static str)> {
    BUILTIN_OPS
        .iter()
        .find(|b| b.0 == op)
        .map(|&(_, o, name)| (o, name))
}

/// The kernel of predefined op `o` on predefined type `t`, when MPICH
/// accepts the pair.
pub fn builtin_kernel(o: Op, t: &datatypes::Builtin) -> Option<reduce::KernelFn> {
    reduce::kernel(o, t.elem).filter(|_| datatypes::op_allowed(o, t))
}

/// The reducer of a predefined op's kernel `k` on predefined type `t`
/// (predefined ops all commute).
pub fn builtin_reducer<'k>(t: &datatypes::Builtin, k: &'k reduce::KernelFn) -> Reducer<'k> {
    Reducer {
        extent: t.elem.extent(),
        commutative: true,
        apply: k,
    }
}

/// A decoded operation handle.
#[derive(Clone, Copy, Debug)]
pub enum OpSpec {
    /// A predefined op and its name.
    Builtin(Op, &'static str),
    /// A user function.
    User(UserOp),
}

impl Runtime {
    /// Decodes an operation handle.
    pub fn op_spec(&self, op: MPI_Op) -> MpiResult<OpSpec> {
        if let Some((o, name)) = builtin_op(op) {
            return Ok(OpSpec::Builtin(o, name));
        }
        match self.ops.get(&op) {
            Some(u) => Ok(OpSpec::User(*u)),
            None if op == MPI_OP_NULL => Err(MpiErr::new(
                MPI_ERR_OP,
                "MPI_OP_NULL passed as an operation",
            )),
            None => Err(MpiErr::new(
                MPI_ERR_OP,
                format!("invalid operation handle {op:#x}"),
            )),
        }
    }
}

/// Checks that `op` is defined on the type (`MPI_ERR_OP` otherwise).
pub fn check_op(op: OpSpec, t: TypeInfo) -> MpiResult<()> {
    with_reducer(op, MPI_DATATYPE_NULL, t, |_| Ok(()))
}

/// Runs `f` with the reducer for (`op`, `dt`), or fails with `MPI_ERR_OP`
/// when the op is not defined on the type.
pub fn with_reducer<R>(
    op: OpSpec,
    dt: MPI_Datatype,
    t: TypeInfo,
    f: impl FnOnce(&Reducer) -> MpiResult<R>,
) -> MpiResult<R> {
    {
        match op {
            OpSpec::Builtin(_, name) if t.derived => Err(MpiErr::new(
                MPI_ERR_OP,
                format!("{name} is only defined for predefined datatypes, not derived ones"),
            )),
            OpSpec::Builtin(o, name) => {
                let kernel = builtin_kernel(o, t.base).ok_or_else(|| {
                    MpiErr::new(
                        MPI_ERR_OP,
                        format!("{name} is not defined for datatype {}", t.base.macro_name),
                    )
                })?;
                f(&builtin_reducer(t.base, &kernel))
            }
            OpSpec::User(u) => {
                let apply = move |s: &[u8], d: &mut [u8]| {
                    let mut len = (d.len() / t.extent.max(1)) as c_int;
                    let mut ty = dt;
                    // SAFETY: both buffers hold `len` elements of `dt`, as the
                    // user function's contract requires; `s` is only read.
                    unsafe {
                        (u.f)(
                            s.as_ptr() as *mut c_void,
                            d.as_mut_ptr() as *mut c_void,
                            &mut len,
                            &mut ty,
                        )
                    };
                };
                f(&Reducer {
                    extent: t.extent.max(1),
                    commutative: u.commute,
                    apply: &apply,
                })
            }
        }
    }
}

/// Exports `MPI_Op_create`.
#[no_mangle]
pub extern "C" fn MPI_Op_create(
    user_fn: MPI_User_function_ptr,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    PMPI_Op_create(user_fn, commute, op)
}

/// Profiling twin of `MPI_Op_create`.
#[no_mangle]
pub extern "C" fn PMPI_Op_create(
    user_fn: MPI_User_function_ptr,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    call("MPI_Op_create", MPI_COMM_WORLD, |rt| {
        let f = user_fn.ok_or_else(|| MpiErr::new(MPI_ERR_ARG, "user_fn is NULL"))?;
        if op.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "op is NULL"));
        }
        let h = rt.new_handle(0x9800_0000);
        rt.ops.insert(
            h,
            UserOp {
                f,
                commute: commute != 0,
            },
        );
        ptr::put(op, h, "op")
    })
}

/// Exports `MPI_Op_free`.
#[no_mangle]
pub extern "C" fn MPI_Op_free(op: *mut MPI_Op) -> c_int {
    PMPI_Op_free(op)
}

/// Profiling twin of `MPI_Op_free`.
#[no_mangle]
pub extern "C" fn PMPI_Op_free(op: *mut MPI_Op) -> c_int {
    call("MPI_Op_free", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(op, "op")?;
        if BUILTIN_OPS.iter().any(|b| b.0 == h) {
            return Err(MpiErr::new(
                MPI_ERR_OP,
                "cannot free a predefined operation",
            ));
        }
        rt.ops
            .remove(&h)
            .ok_or_else(|| MpiErr::new(MPI_ERR_OP, format!("invalid operation handle {h:#x}")))?;
        ptr::put(op, MPI_OP_NULL, "op")
    })
}
