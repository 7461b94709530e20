//! Communicator exports: rank, size, dup, split, free, compare, names.

use super::consts::*;
use super::errors::{MpiErr, MpiResult};
use super::ptr;
use super::state::{bad_comm, call, CommEntry, Runtime};
use crate::comm::Comm;
use std::os::raw::{c_char, c_int};

impl Runtime {
    /// Registers a new communicator handle inheriting `parent`'s handler.
    fn add_comm(&mut self, comm: Comm, parent: MPI_Comm) -> MPI_Comm {
        let errhandler = self
            .comms
            .get(&parent)
            .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errhandler);
        let h = self.new_handle(0x8400_0000);
        self.comms.insert(
            h,
            CommEntry {
                comm,
                name: String::new(),
                errhandler,
            },
        );
        h
    }

    /// Runs `f` on a communicator and the engine together.
    pub fn with_comm<R>(
        &mut self,
        h: MPI_Comm,
        f: impl FnOnce(&mut crate::comm::engine::Engine, &mut Comm) -> MpiResult<R>,
    ) -> MpiResult<R> {
        let Runtime { eng, comms, .. } = self;
        let entry = comms.get_mut(&h).ok_or_else(|| bad_comm(h))?;
        f(eng, &mut entry.comm)
    }
}

/// Exports `MPI_Comm_rank`.
#[no_mangle]
pub extern "C" fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    PMPI_Comm_rank(comm, rank)
}

/// Profiling twin of `MPI_Comm_rank`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    call("MPI_Comm_rank", comm, |rt| {
        let r = rt.comm(comm)?.comm.rank();
        ptr::put(rank, r as c_int, "rank")
    })
}

/// Exports `MPI_Comm_size`.
#[no_mangle]
pub extern "C" fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    PMPI_Comm_size(comm, size)
}

/// Profiling twin of `MPI_Comm_size`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    call("MPI_Comm_size", comm, |rt| {
        let n = rt.comm(comm)?.comm.size();
        ptr::put(size, n as c_int, "size")
    })
}

/// Exports `MPI_Comm_dup`.
#[no_mangle]
pub extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    PMPI_Comm_dup(comm, newcomm)
}

/// Profiling twin of `MPI_Comm_dup`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_dup", comm, |rt| {
        if newcomm.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "newcomm is NULL"));
        }
        let c = rt.with_comm(comm, |eng, c| c.dup(eng).map_err(MpiErr::from))?;
        let h = rt.add_comm(c, comm);
        ptr::put(newcomm, h, "newcomm")
    })
}

/// Exports `MPI_Comm_split`.
#[no_mangle]
pub extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    PMPI_Comm_split(comm, color, key, newcomm)
}

/// Profiling twin of `MPI_Comm_split`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_split", comm, |rt| {
        if newcomm.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "newcomm is NULL"));
        }
        let color = match color {
            MPI_UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => return Err(MpiErr::new(MPI_ERR_ARG, format!("invalid colour {c}"))),
        };
        let part = rt.with_comm(comm, |eng, c| {
            c.split(eng, color, key).map_err(MpiErr::from)
        })?;
        let h = match part {
            Some(c) => rt.add_comm(c, comm),
            None => MPI_COMM_NULL,
        };
        ptr::put(newcomm, h, "newcomm")
    })
}

/// Exports `MPI_Comm_free`.
#[no_mangle]
pub extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    PMPI_Comm_free(comm)
}

/// Profiling twin of `MPI_Comm_free`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_free", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(comm, "comm")?;
        rt.comm(h)?;
        if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
            return Err(MpiErr::new(
                MPI_ERR_COMM,
                "cannot free MPI_COMM_WORLD or MPI_COMM_SELF",
            ));
        }
        if let Some(entry) = rt.comms.remove(&h) {
            entry.comm.release(&mut rt.eng);
        }
        ptr::put(comm, MPI_COMM_NULL, "comm")
    })
}

/// Exports `MPI_Comm_compare`.
#[no_mangle]
pub extern "C" fn MPI_Comm_compare(comm1: MPI_Comm, comm2: MPI_Comm, result: *mut c_int) -> c_int {
    PMPI_Comm_compare(comm1, comm2, result)
}

/// Profiling twin of `MPI_Comm_compare`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_compare(comm1: MPI_Comm, comm2: MPI_Comm, result: *mut c_int) -> c_int {
    call("MPI_Comm_compare", comm1, |rt| {
        let a = rt.comm(comm1)?.comm.members().to_vec();
        let b = rt.comm(comm2)?.comm.members().to_vec();
        let r = if comm1 == comm2 {
            MPI_IDENT
        } else if a == b {
            MPI_CONGRUENT
        } else {
            let (mut sa, mut sb) = (a, b);
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb {
                MPI_SIMILAR
            } else {
                MPI_UNEQUAL
            }
        };
        ptr::put(result, r, "result")
    })
}

/// Exports `MPI_Comm_set_name`.
#[no_mangle]
pub extern "C" fn MPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    PMPI_Comm_set_name(comm, comm_name)
}

/// Profiling twin of `MPI_Comm_set_name`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    call("MPI_Comm_set_name", comm, |rt| {
        let mut name = ptr::read_str(comm_name)?;
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        if name.len() > max {
            let mut cut = max;
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            name.truncate(cut);
        }
        rt.comm(comm)?.name = name;
        Ok(())
    })
}

/// Exports `MPI_Comm_get_name`.
#[no_mangle]
pub extern "C" fn MPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    PMPI_Comm_get_name(comm, comm_name, resultlen)
}

/// Profiling twin of `MPI_Comm_get_name`.
#[no_mangle]
pub extern "C" fn PMPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Comm_get_name", comm, |rt| {
        let name = rt.comm(comm)?.name.clone();
        ptr::put_str(comm_name, MPI_MAX_OBJECT_NAME as usize, &name, resultlen)
    })
}
