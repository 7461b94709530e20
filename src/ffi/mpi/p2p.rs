//! Point-to-point exports: blocking and non-blocking send/receive, request
//! completion, probing, counts.

use super::coll::Scratch;
use super::consts::*;
use super::errors::{MpiErr, MpiResult};
use super::ptr;
use super::state::{call, ReqEntry, Runtime, StatusSource};
use crate::comm::buffer::RawBuf;
use crate::comm::engine::{Match, ReqId, SendKind, Status};
use std::os::raw::{c_int, c_void};

/// A peer argument after checking.
enum Peer {
    Null,
    Any,
    Rank(usize),
}

fn peer(rank: c_int, size: usize, any_ok: bool) -> MpiResult<Peer> {
    match rank {
        MPI_PROC_NULL => Ok(Peer::Null),
        MPI_ANY_SOURCE if any_ok => Ok(Peer::Any),
        r if r >= 0 && (r as usize) < size => Ok(Peer::Rank(r as usize)),
        r => Err(MpiErr::new(
            MPI_ERR_RANK,
            format!("invalid rank {r} in a communicator of size {size}"),
        )),
    }
}

pub(super) fn tag_of(tag: c_int, any_ok: bool) -> MpiResult<Option<i32>> {
    match tag {
        MPI_ANY_TAG if any_ok => Ok(None),
        t if t >= 0 => Ok(Some(t)),
        t => Err(MpiErr::new(MPI_ERR_TAG, format!("invalid tag {t}"))),
    }
}

fn empty_status(source: c_int) -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: source,
        MPI_TAG: MPI_ANY_TAG,
        ..Default::default()
    }
}

/// The status of a message received from `source` (its rank in the
/// communicator) carrying `data` data bytes.
pub(super) fn received_status(source: c_int, st: &Status, data: usize) -> MPI_Status {
    MPI_Status {
        count_lo: data as u32 as c_int,
        count_hi_and_cancelled: (((data as u64) >> 32) << 1) as c_int,
        MPI_SOURCE: source,
        MPI_TAG: st.tag,
        MPI_ERROR: error_class(st),
    }
}

fn error_class(st: &Status) -> c_int {
    st.error
        .clone()
        .map_or(MPI_SUCCESS, |e| MpiErr::from(*e).class)
}

/// A checked send, ready to post.
struct SendPlan {
    to: Option<(usize, u32, i32)>,
    raw: RawBuf,
    comm: MPI_Comm,
}

impl Runtime {
    /// Checks a send's arguments; the plan posts it without further errors
    /// (so `MPI_Sendrecv` can check both halves before posting either).
    fn plan_send(
        &mut self,
        buf: *const c_void,
        count: c_int,
        dt: MPI_Datatype,
        dest: c_int,
        tag: c_int,
        comm: MPI_Comm,
    ) -> MpiResult<SendPlan> {
        let t = self.type_info(dt)?;
        let bytes = t.bytes(count)?;
        let c = &self.comm(comm)?.comm;
        let dst = peer(dest, c.size(), false)?;
        let tag = tag_of(tag, false)?.expect("MPI_ANY_TAG refused");
        ptr::check_buf(buf, bytes, "send buffer")?;
        let to = match dst {
            Peer::Rank(d) => Some((c.world_rank(d), c.p2p_ctx(), tag)),
            _ => None,
        };
        // SAFETY: MPI requires the buffer to stay valid and unmodified until
        // the request completes; `bytes` is what count and datatype cover.
        let raw = unsafe { RawBuf::new(buf as *mut u8, bytes) };
        Ok(SendPlan { to, raw, comm })
    }

    /// Posts planned send `p`, a send of `kind`.
    fn start_send(&mut self, p: SendPlan, op: &'static str, kind: SendKind) -> MpiResult<ReqEntry> {
        let id = match p.to {
            Some((dst, ctx, tag)) => Some(self.eng.isend_as(dst, ctx, tag, p.raw, op, kind)?),
            None => None,
        };
        Ok(ReqEntry {
            id,
            source: StatusSource::Unnamed,
            recv_type: None,
            comm: p.comm,
        })
    }

    fn post_send(
        &mut self,
        buf: *const c_void,
        count: c_int,
        dt: MPI_Datatype,
        dest: c_int,
        tag: c_int,
        comm: MPI_Comm,
        op: &'static str,
    ) -> MpiResult<ReqEntry> {
        let plan = self.plan_send(buf, count, dt, dest, tag, comm)?;
        self.start_send(plan, op, SendKind::Program)
    }

    fn post_recv(
        &mut self,
        buf: *mut c_void,
        count: c_int,
        dt: MPI_Datatype,
        source: c_int,
        tag: c_int,
        comm: MPI_Comm,
    ) -> MpiResult<ReqEntry> {
        let t = self.type_info(dt)?;
        let bytes = t.bytes(count)?;
        let c = &self.comm(comm)?.comm;
        let src = peer(source, c.size(), true)?;
        let tag = tag_of(tag, true)?;
        ptr::check_buf(buf, bytes, "receive buffer")?;
        let recv_type = Some(t);
        let (source, names) = match src {
            Peer::Null => {
                return Ok(ReqEntry {
                    id: None,
                    source: StatusSource::Unnamed,
                    recv_type,
                    comm,
                })
            }
            Peer::Any => (None, StatusSource::Any(c.members_shared())),
            Peer::Rank(r) => (Some(c.world_rank(r)), StatusSource::Rank(r as c_int)),
        };
        let m = Match {
            source,
            ctx: c.p2p_ctx(),
            tag,
        };
        // SAFETY: MPI requires the buffer to stay valid and untouched until
        // the request completes; `bytes` is what count and datatype cover.
        let raw = unsafe { RawBuf::new(buf as *mut u8, bytes) };
        let id = self.eng.irecv(m, raw)?;
        Ok(ReqEntry {
            id: Some(id),
            source: names,
            recv_type,
            comm,
        })
    }

    /// `take_req` for a caller that ignores the status (then
    /// `finish_ignored`): the entry is dropped where it lies. Moving it
    /// out and making a status cost more than the rest of completing an
    /// 8-byte receive (2 ranks, alternated, us, before / after: Irecv +
    /// Isend + Waitall 0.219-0.221 / 0.187-0.193, with two MPI_Wait
    /// 0.243-0.259 / 0.200-0.202).
    #[inline(always)]
    fn take_ignored(&mut self, h: MPI_Request) -> MpiResult<Option<ReqId>> {
        let (id, comm) = self.reqs.remove_id(h).ok_or_else(|| bad_request(h))?;
        self.err_comm.get_or_insert(comm);
        Ok(id)
    }

    /// `finish` without a status: the error class one would carry (only a
    /// truncation; other failures fail the call).
    #[inline(always)]
    fn finish_ignored(&mut self, id: Option<ReqId>, op: &'static str) -> MpiResult<Option<c_int>> {
        let Some(id) = id else {
            return Ok(None);
        };
        Ok(self.eng.wait(id, op)?.error.map(|e| MpiErr::from(*e).class))
    }

    /// Completes request `h` (not `MPI_REQUEST_NULL`, known to the table)
    /// for `MPI_Wait`, `MPI_Test` and `MPI_Waitany`: takes it out, lets
    /// `clear` null the caller's handle, waits for it and fills `status`;
    /// for `MPI_STATUS_IGNORE` no status is made (`take_ignored`), only a
    /// truncation still fails the call.
    #[inline(always)]
    fn complete_one(
        &mut self,
        h: MPI_Request,
        status: *mut MPI_Status,
        op: &'static str,
        clear: impl FnOnce() -> MpiResult<()>,
    ) -> MpiResult<()> {
        if status == ptr::STATUS_IGNORE {
            let id = self.take_ignored(h)?;
            clear()?;
            return match self.finish_ignored(id, op)? {
                None => Ok(()),
                Some(class) => Err(truncated(class)),
            };
        }
        let e = self.take_req(h)?;
        clear()?;
        let st = self.finish(e, op)?;
        ptr::put_status(status, st)?;
        single(&st)
    }

    /// The MPI status of a completed request.
    fn mpi_status(e: &ReqEntry, st: Option<Status>) -> MPI_Status {
        let Some(st) = st else {
            // MPI_PROC_NULL: an empty status from MPI_PROC_NULL.
            return empty_status(if e.recv_type.is_some() {
                MPI_PROC_NULL
            } else {
                MPI_ANY_SOURCE
            });
        };
        let Some(t) = e.recv_type else {
            return empty_status(MPI_ANY_SOURCE);
        };
        let data = t.data_bytes(st.bytes);
        let source = match &e.source {
            StatusSource::Rank(r) => *r,
            StatusSource::Any(members) => members
                .iter()
                .position(|&w| w == st.source)
                .map_or(MPI_ANY_SOURCE, |r| r as c_int),
            StatusSource::Unnamed => MPI_ANY_SOURCE,
        };
        received_status(source, &st, data)
    }

    /// Removes a request from the table; its communicator's error handler
    /// now applies to this call.
    fn take_req(&mut self, h: MPI_Request) -> MpiResult<ReqEntry> {
        let e = self.reqs.remove(h).ok_or_else(|| bad_request(h))?;
        self.err_comm.get_or_insert(e.comm);
        Ok(e)
    }

    fn check_req(&self, h: MPI_Request) -> MpiResult<()> {
        self.entry(h).map(|_| ())
    }

    /// The request behind `h`: `None` for `MPI_REQUEST_NULL`, an error for
    /// a handle that names no outstanding request.
    fn entry(&self, h: MPI_Request) -> MpiResult<Option<&ReqEntry>> {
        match self.reqs.get(h) {
            Some(e) => Ok(Some(e)),
            None if h == MPI_REQUEST_NULL => Ok(None),
            None => Err(bad_request(h)),
        }
    }

    /// Waits for a request (not yet in the table) and returns its status.
    fn finish(&mut self, e: ReqEntry, op: &'static str) -> MpiResult<MPI_Status> {
        let st = match e.id {
            Some(id) => Some(self.eng.wait(id, op)?),
            None => None,
        };
        Ok(Self::mpi_status(&e, st))
    }

    fn is_done(&self, h: MPI_Request) -> bool {
        match self.reqs.get(h) {
            None => true,
            Some(e) => e.id.is_none_or(|id| self.eng.is_done(id)),
        }
    }

    fn store(&mut self, e: ReqEntry) -> MpiResult<MPI_Request> {
        self.reqs.insert(e)
    }
}

/// The error for a handle that names no outstanding request.
#[cold]
fn bad_request(h: MPI_Request) -> MpiErr {
    MpiErr::new(MPI_ERR_REQUEST, format!("invalid request handle {h:#x}"))
}

/// Returns `MPI_ERR_TRUNCATE` when a single completion truncated.
fn single(st: &MPI_Status) -> MpiResult<()> {
    match st.MPI_ERROR {
        MPI_SUCCESS => Ok(()),
        c => Err(truncated(c)),
    }
}

/// The error of a single completion whose status carries class `c` (only
/// a truncation stays in a status).
fn truncated(c: c_int) -> MpiErr {
    MpiErr::new(
        c,
        "message truncated: the receive buffer is smaller than the message",
    )
}

/// Exports `MPI_Send`.
#[no_mangle]
pub extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    PMPI_Send(buf, count, datatype, dest, tag, comm)
}

/// Profiling twin of `MPI_Send`.
#[no_mangle]
pub extern "C" fn PMPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some(rc) = super::lane::send(buf, count, datatype, dest, tag, comm) {
        return rc;
    }
    call("MPI_Send", comm, |rt| {
        let e = rt.post_send(buf, count, datatype, dest, tag, comm, "MPI_Send")?;
        rt.finish(e, "MPI_Send").map(|_| ())
    })
}

/// Exports `MPI_Recv`.
#[no_mangle]
pub extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Recv(buf, count, datatype, source, tag, comm, status)
}

/// Profiling twin of `MPI_Recv`.
#[no_mangle]
pub extern "C" fn PMPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    if let Some(rc) = super::lane::recv(buf, count, datatype, source, tag, comm, status) {
        return rc;
    }
    call("MPI_Recv", comm, |rt| {
        if status.is_null() {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                "status is NULL (use MPI_STATUS_IGNORE)",
            ));
        }
        let e = rt.post_recv(buf, count, datatype, source, tag, comm)?;
        let st = rt.finish(e, "MPI_Recv")?;
        ptr::put_status(status, st)?;
        single(&st)
    })
}

/// Exports `MPI_Sendrecv`.
#[no_mangle]
pub extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Sendrecv(
        sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
        comm, status,
    )
}

/// Profiling twin of `MPI_Sendrecv`.
#[no_mangle]
pub extern "C" fn PMPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    if let Some(rc) = super::lane::sendrecv(
        sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
        comm, status,
    ) {
        return rc;
    }
    call("MPI_Sendrecv", comm, |rt| {
        if status.is_null() {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                "status is NULL (use MPI_STATUS_IGNORE)",
            ));
        }
        let plan = rt.plan_send(sendbuf, sendcount, sendtype, dest, sendtag, comm)?;
        // "The send buffer and receive buffer must be disjoint": checked
        // before the receive is posted, so a refused call leaves nothing.
        let rbytes = rt.type_info(recvtype)?.bytes(recvcount)?;
        ptr::check_disjoint(sendbuf, plan.raw.len(), recvbuf, rbytes)?;
        let r = rt.post_recv(recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let s = rt.start_send(plan, "MPI_Sendrecv", SendKind::Paired)?;
        let st = rt.finish(r, "MPI_Sendrecv")?;
        rt.finish(s, "MPI_Sendrecv")?;
        ptr::put_status(status, st)?;
        single(&st)
    })
}

/// Exports `MPI_Isend`.
#[no_mangle]
pub extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    PMPI_Isend(buf, count, datatype, dest, tag, comm, request)
}

/// Profiling twin of `MPI_Isend`.
#[no_mangle]
pub extern "C" fn PMPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if let Some(rc) = super::lane::isend(buf, count, datatype, dest, tag, comm, request) {
        return rc;
    }
    call("MPI_Isend", comm, |rt| {
        if request.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "request is NULL"));
        }
        rt.reqs.room()?;
        let e = rt.post_send(buf, count, datatype, dest, tag, comm, "MPI_Isend")?;
        let h = rt.store(e)?;
        ptr::put(request, h, "request")
    })
}

/// Exports `MPI_Irecv`.
#[no_mangle]
pub extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    PMPI_Irecv(buf, count, datatype, source, tag, comm, request)
}

/// Profiling twin of `MPI_Irecv`.
#[no_mangle]
pub extern "C" fn PMPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if let Some(rc) = super::lane::irecv(buf, count, datatype, source, tag, comm, request) {
        return rc;
    }
    call("MPI_Irecv", comm, |rt| {
        if request.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "request is NULL"));
        }
        rt.reqs.room()?;
        let e = rt.post_recv(buf, count, datatype, source, tag, comm)?;
        let h = rt.store(e)?;
        ptr::put(request, h, "request")
    })
}

/// Exports `MPI_Wait`.
#[no_mangle]
pub extern "C" fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    PMPI_Wait(request, status)
}

/// Profiling twin of `MPI_Wait`.
#[no_mangle]
pub extern "C" fn PMPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    call("MPI_Wait", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(request, "request")?;
        if status.is_null() {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                "status is NULL (use MPI_STATUS_IGNORE)",
            ));
        }
        if h == MPI_REQUEST_NULL {
            return ptr::put_status(status, empty_status(MPI_ANY_SOURCE));
        }
        rt.complete_one(h, status, "MPI_Wait", || {
            ptr::put(request, MPI_REQUEST_NULL, "request")
        })
    })
}

/// Exports `MPI_Test`.
#[no_mangle]
pub extern "C" fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Test(request, flag, status)
}

/// Profiling twin of `MPI_Test`.
#[no_mangle]
pub extern "C" fn PMPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Test", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(request, "request")?;
        if flag.is_null() || status.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "flag or status is NULL"));
        }
        rt.check_req(h)?;
        rt.eng.check()?;
        rt.eng.progress();
        if !rt.is_done(h) {
            return ptr::put(flag, 0, "flag");
        }
        ptr::put(flag, 1, "flag")?;
        if h == MPI_REQUEST_NULL {
            return ptr::put_status(status, empty_status(MPI_ANY_SOURCE));
        }
        rt.complete_one(h, status, "MPI_Test", || {
            ptr::put(request, MPI_REQUEST_NULL, "request")
        })
    })
}

/// Completes the requests at `idx` of `reqs` (all done), filling statuses;
/// returns whether any status carries an error.
fn complete_all(
    rt: &mut Runtime,
    reqs: &mut [MPI_Request],
    idx: impl Iterator<Item = usize>,
    sts: &mut Option<&mut [MPI_Status]>,
    op: &'static str,
) -> MpiResult<bool> {
    let mut any_err = false;
    let Some(sts) = sts.as_deref_mut() else {
        return complete_ignored(rt, reqs, idx, op);
    };
    for i in idx {
        let st = if reqs[i] == MPI_REQUEST_NULL {
            empty_status(MPI_ANY_SOURCE)
        } else {
            let e = rt.take_req(reqs[i])?;
            reqs[i] = MPI_REQUEST_NULL;
            rt.finish(e, op)?
        };
        any_err |= st.MPI_ERROR != MPI_SUCCESS;
        sts[i] = st;
    }
    Ok(any_err)
}

/// `complete_all` for `MPI_STATUSES_IGNORE`: no status is made, only
/// whether one would carry an error (a halo exchange's Waitall usually
/// ignores them; making each took about 100 instructions).
fn complete_ignored(
    rt: &mut Runtime,
    reqs: &mut [MPI_Request],
    idx: impl Iterator<Item = usize>,
    op: &'static str,
) -> MpiResult<bool> {
    let mut any_err = false;
    for i in idx {
        if reqs[i] == MPI_REQUEST_NULL {
            continue;
        }
        let id = rt.take_ignored(reqs[i])?;
        reqs[i] = MPI_REQUEST_NULL;
        any_err |= rt.finish_ignored(id, op)?.is_some();
    }
    Ok(any_err)
}

fn in_status() -> MpiErr {
    MpiErr::new(
        MPI_ERR_IN_STATUS,
        "a request failed; see the MPI_ERROR field of its status",
    )
}

/// Exports `MPI_Waitall`.
#[no_mangle]
pub extern "C" fn MPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    PMPI_Waitall(count, array_of_requests, array_of_statuses)
}

/// Profiling twin of `MPI_Waitall`.
#[no_mangle]
pub extern "C" fn PMPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Waitall", MPI_COMM_WORLD, |rt| {
        let n = super::types::count_of(count)?;
        let reqs = ptr::array_mut(array_of_requests, n, "array_of_requests")?;
        let mut sts = ptr::statuses(array_of_statuses, n)?;
        // The engine's ids, without a heap allocation for a few (a halo
        // exchange's Waitall is on the critical path of its step).
        let mut few = [0 as crate::comm::engine::ReqId; 16];
        let mut many = Vec::new();
        let mut k = 0;
        for &h in reqs.iter() {
            if let Some(id) = rt.entry(h)?.and_then(|e| e.id) {
                if k < few.len() {
                    few[k] = id;
                } else {
                    if many.is_empty() {
                        many.extend_from_slice(&few);
                    }
                    many.push(id);
                }
                k += 1;
            }
        }
        let ids = if k <= few.len() { &few[..k] } else { &many[..] };
        rt.eng.wait_all(ids, "MPI_Waitall")?;
        if complete_all(rt, reqs, 0..n, &mut sts, "MPI_Waitall")? {
            return Err(in_status());
        }
        Ok(())
    })
}

/// Exports `MPI_Testall`.
#[no_mangle]
pub extern "C" fn MPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    PMPI_Testall(count, array_of_requests, flag, array_of_statuses)
}

/// Profiling twin of `MPI_Testall`.
#[no_mangle]
pub extern "C" fn PMPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Testall", MPI_COMM_WORLD, |rt| {
        let n = super::types::count_of(count)?;
        let reqs = ptr::array_mut(array_of_requests, n, "array_of_requests")?;
        let mut sts = ptr::statuses(array_of_statuses, n)?;
        if flag.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "flag is NULL"));
        }
        for &h in reqs.iter() {
            rt.check_req(h)?;
        }
        rt.eng.check()?;
        rt.eng.progress();
        if !reqs.iter().all(|&h| rt.is_done(h)) {
            return ptr::put(flag, 0, "flag");
        }
        ptr::put(flag, 1, "flag")?;
        if complete_all(rt, reqs, 0..n, &mut sts, "MPI_Testall")? {
            return Err(in_status());
        }
        Ok(())
    })
}

/// Exports `MPI_Waitany`.
#[no_mangle]
pub extern "C" fn MPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Waitany(count, array_of_requests, index, status)
}

/// Profiling twin of `MPI_Waitany`.
#[no_mangle]
pub extern "C" fn PMPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Waitany", MPI_COMM_WORLD, |rt| {
        let n = super::types::count_of(count)?;
        let reqs = ptr::array_mut(array_of_requests, n, "array_of_requests")?;
        if index.is_null() || status.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "index or status is NULL"));
        }
        for &h in reqs.iter() {
            rt.check_req(h)?;
        }
        // The pending requests' positions and engine ids, on the stack for
        // a few (a loop of Waitany calls over a halo's receives allocated
        // twice a call); one that is already done (MPI_PROC_NULL, or
        // arrived) wins at once.
        let (mut at, mut ids) = (Scratch::new(), Scratch::new());
        let (at, ids) = (at.take(n), ids.take(n));
        let (mut k, mut ready) = (0, None);
        for (i, &h) in reqs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                continue;
            }
            match rt.reqs.get(h).and_then(|e| e.id) {
                Some(id) if !rt.eng.is_done(id) => {
                    (at[k], ids[k]) = (i, id);
                    k += 1;
                }
                _ => {
                    ready = Some(i);
                    break;
                }
            }
        }
        let i = match ready {
            Some(i) => i,
            None if k == 0 => {
                ptr::put(index, MPI_UNDEFINED, "index")?;
                return ptr::put_status(status, empty_status(MPI_ANY_SOURCE));
            }
            None => at[rt.eng.wait_any(&ids[..k], "MPI_Waitany")?],
        };
        ptr::put(index, i as c_int, "index")?;
        rt.complete_one(reqs[i], status, "MPI_Waitany", || {
            reqs[i] = MPI_REQUEST_NULL;
            Ok(())
        })
    })
}

/// Exports `MPI_Request_free`.
#[no_mangle]
pub extern "C" fn MPI_Request_free(request: *mut MPI_Request) -> c_int {
    PMPI_Request_free(request)
}

/// Profiling twin of `MPI_Request_free`: the operation still completes.
#[no_mangle]
pub extern "C" fn PMPI_Request_free(request: *mut MPI_Request) -> c_int {
    call("MPI_Request_free", MPI_COMM_WORLD, |rt| {
        let h = ptr::get(request, "request")?;
        if h == MPI_REQUEST_NULL {
            return Err(MpiErr::new(
                MPI_ERR_REQUEST,
                "MPI_REQUEST_NULL passed to MPI_Request_free",
            ));
        }
        let e = rt.take_req(h)?;
        if let Some(id) = e.id {
            rt.eng.detach(id);
        }
        ptr::put(request, MPI_REQUEST_NULL, "request")
    })
}

/// Exports `MPI_Get_count`.
#[no_mangle]
pub extern "C" fn MPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    PMPI_Get_count(status, datatype, count)
}

/// Profiling twin of `MPI_Get_count`.
#[no_mangle]
pub extern "C" fn PMPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    call("MPI_Get_count", MPI_COMM_WORLD, |rt| {
        // Only communication needs a committed type (MPI-4.0 5.1.9).
        let t = rt.type_info_any(datatype, true)?;
        if std::ptr::eq(status, ptr::STATUS_IGNORE) {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                "status is MPI_STATUS_IGNORE, which holds nothing to read",
            ));
        }
        let st = ptr::get(status, "status")?;
        let bytes =
            (st.count_lo as u32 as u64) | (((st.count_hi_and_cancelled as u32 as u64) >> 1) << 32);
        let n = match t.size {
            0 => 0,
            s if !bytes.is_multiple_of(s as u64) => MPI_UNDEFINED,
            s => c_int::try_from(bytes / s as u64).unwrap_or(MPI_UNDEFINED),
        };
        ptr::put(count, n, "count")
    })
}

impl Runtime {
    fn probe_match(
        &mut self,
        source: c_int,
        tag: c_int,
        comm: MPI_Comm,
    ) -> MpiResult<Option<(Match, std::sync::Arc<[usize]>)>> {
        let c = &self.comm(comm)?.comm;
        let tag = tag_of(tag, true)?;
        let source = match peer(source, c.size(), true)? {
            Peer::Null => return Ok(None),
            Peer::Any => None,
            Peer::Rank(r) => Some(c.world_rank(r)),
        };
        Ok(Some((
            Match {
                source,
                ctx: c.p2p_ctx(),
                tag,
            },
            c.members_shared(),
        )))
    }
}

fn probe_status(env: crate::comm::engine::Envelope, members: &[usize]) -> MPI_Status {
    MPI_Status {
        count_lo: env.bytes as u32 as c_int,
        count_hi_and_cancelled: (((env.bytes as u64) >> 32) << 1) as c_int,
        MPI_SOURCE: members
            .iter()
            .position(|&w| w == env.source)
            .map_or(MPI_ANY_SOURCE, |r| r as c_int),
        MPI_TAG: env.tag,
        MPI_ERROR: MPI_SUCCESS,
    }
}

/// Exports `MPI_Probe`.
#[no_mangle]
pub extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Probe(source, tag, comm, status)
}

/// Profiling twin of `MPI_Probe`.
#[no_mangle]
pub extern "C" fn PMPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Probe", comm, |rt| {
        if status.is_null() {
            return Err(MpiErr::new(
                MPI_ERR_ARG,
                "status is NULL (use MPI_STATUS_IGNORE)",
            ));
        }
        let Some((m, members)) = rt.probe_match(source, tag, comm)? else {
            return ptr::put_status(status, empty_status(MPI_PROC_NULL));
        };
        let env = rt.eng.probe(m, "MPI_Probe")?;
        ptr::put_status(status, probe_status(env, &members))
    })
}

/// Exports `MPI_Iprobe`.
#[no_mangle]
pub extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    PMPI_Iprobe(source, tag, comm, flag, status)
}

/// Profiling twin of `MPI_Iprobe`.
#[no_mangle]
pub extern "C" fn PMPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Iprobe", comm, |rt| {
        if flag.is_null() || status.is_null() {
            return Err(MpiErr::new(MPI_ERR_ARG, "flag or status is NULL"));
        }
        let Some((m, members)) = rt.probe_match(source, tag, comm)? else {
            ptr::put(flag, 1, "flag")?;
            return ptr::put_status(status, empty_status(MPI_PROC_NULL));
        };
        rt.eng.check()?;
        match rt.eng.iprobe(m) {
            Some(env) => {
                ptr::put(flag, 1, "flag")?;
                ptr::put_status(status, probe_status(env, &members))
            }
            None => ptr::put(flag, 0, "flag"),
        }
    })
}
