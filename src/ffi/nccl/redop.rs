//! `ncclRedOpCreatePreMulSum` / `ncclRedOpDestroy`: per-communicator
//! handles from `ncclNumOps` up.

#![allow(non_snake_case)]

use super::coll::elem_type;
use super::comm::shared_of;
use super::result::{entry, NcclErr};
use super::types::*;
use super::work::{PreMul, Scalar};
use std::os::raw::c_void;

/// Exports `ncclRedOpCreatePreMulSum`.
#[no_mangle]
pub extern "C" fn ncclRedOpCreatePreMulSum(
    op: *mut ncclRedOpArg,
    scalar: *mut c_void,
    datatype: ncclDataTypeArg,
    residence: ncclScalarResidenceArg,
    comm: ncclComm_t,
) -> ncclResult_t {
    pncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm)
}

/// Profiling twin of `ncclRedOpCreatePreMulSum`.
#[no_mangle]
pub extern "C" fn pncclRedOpCreatePreMulSum(
    op: *mut ncclRedOpArg,
    scalar: *mut c_void,
    datatype: ncclDataTypeArg,
    residence: ncclScalarResidenceArg,
    comm: ncclComm_t,
) -> ncclResult_t {
    entry("ncclRedOpCreatePreMulSum", || {
        // SAFETY: shared_of checks the handle.
        let sh = unsafe { shared_of(comm) }?;
        let ty = elem_type(datatype)?;
        if op.is_null() || scalar.is_null() {
            return Err(NcclErr::arg("op and scalar must not be NULL"));
        }
        let scalar = match residence {
            0 => Scalar::At(scalar as usize),
            // SAFETY: checked non-null; it holds one element of `datatype`.
            1 => Scalar::Value(
                unsafe { std::slice::from_raw_parts(scalar as *const u8, ty.size()) }.to_vec(),
            ),
            r => return Err(NcclErr::arg(format!("unknown scalar residence {r}"))),
        };
        let mut ops = sh.redops.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match ops.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                ops.push(None);
                ops.len() - 1
            }
        };
        let handle = ncclRedOpArg::try_from(slot + ncclRedOp_t::ncclNumOps as usize)
            .map_err(|_| NcclErr::usage("too many reduction ops"))?;
        ops[slot] = Some(PreMul { ty, scalar });
        // SAFETY: checked non-null.
        unsafe { *op = handle };
        Ok(())
    })
}

/// Exports `ncclRedOpDestroy`.
#[no_mangle]
pub extern "C" fn ncclRedOpDestroy(op: ncclRedOpArg, comm: ncclComm_t) -> ncclResult_t {
    pncclRedOpDestroy(op, comm)
}

/// Profiling twin of `ncclRedOpDestroy`.
#[no_mangle]
pub extern "C" fn pncclRedOpDestroy(op: ncclRedOpArg, comm: ncclComm_t) -> ncclResult_t {
    entry("ncclRedOpDestroy", || {
        // SAFETY: shared_of checks the handle.
        let sh = unsafe { shared_of(comm) }?;
        let mut ops = sh.redops.lock().unwrap_or_else(|p| p.into_inner());
        let slot = usize::try_from(op - ncclRedOp_t::ncclNumOps as ncclRedOpArg)
            .ok()
            .filter(|&i| ops.get(i).is_some_and(Option::is_some))
            .ok_or_else(|| {
                NcclErr::arg(format!(
                    "op {op} is not a reduction op created on this communicator"
                ))
            })?;
        ops[slot] = None;
        Ok(())
    })
}
