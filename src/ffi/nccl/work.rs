//! One NCCL operation as data (buffers as addresses, so queued operations
//! can move to a group's worker thread), and how it runs on the core:
//! in-place rules, `ncclAvg` and PreMulSum scaling, point-to-point batches.

use super::comm::Core;
use super::result::{NcclErr, NcclResult};
use crate::coll::check::Signature;
use crate::coll::{self, Ctx, Reducer};
use crate::comm::buffer::RawBuf;
use crate::comm::engine::Match;
use crate::copy::copy;
use crate::dtype::ElemType;
use crate::reduce::{self as kernels, KernelFn, Op};

/// A PreMulSum operation made by `ncclRedOpCreatePreMulSum`.
#[derive(Clone, Debug)]
pub struct PreMul {
    /// The element type it was made for.
    pub ty: ElemType,
    /// Its scalar.
    pub scalar: Scalar,
}

/// Where a PreMulSum scalar comes from.
#[derive(Clone, Debug)]
pub enum Scalar {
    /// Read when the op was made (`ncclScalarHostImmediate`).
    Value(Vec<u8>),
    /// Read when each collective is called (`ncclScalarDevice`; host memory
    /// in host mode).
    At(usize),
}

/// The reduction of one call.
#[derive(Clone, Debug)]
pub enum Red {
    /// Sum, product, maximum, minimum.
    Op(Op),
    /// `ncclAvg`: floats scaled by 1/n then summed; integers summed then divided.
    Avg,
    /// Inputs multiplied by the scalar (its bytes), then summed.
    PreMul(Vec<u8>),
    /// As `PreMul`, with the scalar in device memory at this address
    /// (`ncclScalarDevice` on the device path), read when the stream
    /// reaches the call.
    PreMulAt(usize),
}

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AllReduce,
    /// Root.
    Broadcast(usize),
    /// Root.
    Reduce(usize),
    AllGather,
    ReduceScatter,
    AlltoAll,
    /// Root.
    Gather(usize),
    /// Root.
    Scatter(usize),
    /// Peer.
    Send(usize),
    /// Peer.
    Recv(usize),
}

/// One checked call, ready to run.
#[derive(Clone, Debug)]
pub struct Job {
    /// The export's name, for errors.
    pub name: &'static str,
    /// The operation.
    pub kind: Kind,
    /// Send buffer address (0 when not significant).
    pub send: usize,
    /// Receive buffer address (0 when not significant).
    pub recv: usize,
    /// Elements (per rank, per block, as NCCL counts them for the call).
    pub count: usize,
    /// Element type.
    pub ty: ElemType,
    /// The reduction, for reducing collectives.
    pub red: Option<Red>,
    /// The caller's stream (`cudaStream_t`; 0 is the legacy stream).
    pub stream: usize,
    /// Its buffers are device memory (the device path runs it).
    pub device: bool,
}

impl Job {
    /// What `FERROCOLL_CHECK` compares across ranks: NCCL requires the
    /// same count, type, op and root everywhere.
    pub fn signature(&self) -> Signature {
        let root = match self.kind {
            Kind::Broadcast(r) | Kind::Reduce(r) | Kind::Gather(r) | Kind::Scatter(r) => Some(r),
            _ => None,
        };
        let (op_id, op_name) = match &self.red {
            None => (None, String::new()),
            Some(Red::Op(o)) => {
                let (id, name) = match o {
                    Op::Sum => (0, "ncclSum"),
                    Op::Prod => (1, "ncclProd"),
                    Op::Max => (2, "ncclMax"),
                    Op::Min => (3, "ncclMin"),
                    _ => (99, "another op"),
                };
                (Some(id), format!(", {name}"))
            }
            Some(Red::Avg) => (Some(4), ", ncclAvg".to_string()),
            // Each rank may scale by its own scalar.
            Some(Red::PreMul(_) | Red::PreMulAt(_)) => (Some(5), ", a PreMulSum op".to_string()),
        };
        let at = root.map(|r| format!(", root {r}")).unwrap_or_default();
        let text = format!(
            "{}(count {}, {}{op_name}{at})",
            self.name,
            self.count,
            type_name(self.ty)
        );
        let sig =
            Signature::new(self.name, text).data(self.count * self.ty.extent(), self.ty as u32);
        let sig = match root {
            Some(r) => sig.root(r),
            None => sig,
        };
        match op_id {
            Some(id) => sig.op(id),
            None => sig,
        }
    }

    /// Whether this is a point-to-point operation.
    pub fn is_p2p(&self) -> bool {
        matches!(self.kind, Kind::Send(_) | Kind::Recv(_))
    }
}

/// NCCL's name of an element type, for messages.
fn type_name(ty: ElemType) -> &'static str {
    match ty {
        ElemType::I8 => "ncclInt8",
        ElemType::U8 => "ncclUint8",
        ElemType::I32 => "ncclInt32",
        ElemType::U32 => "ncclUint32",
        ElemType::I64 => "ncclInt64",
        ElemType::U64 => "ncclUint64",
        ElemType::F16 => "ncclFloat16",
        ElemType::F32 => "ncclFloat32",
        ElemType::F64 => "ncclFloat64",
        ElemType::Bf16 => "ncclBfloat16",
        ElemType::F8E4M3 => "ncclFloat8e4m3",
        ElemType::F8E5M2 => "ncclFloat8e5m2",
        _ => "a type NCCL lacks",
    }
}

/// # Safety
/// `addr` is valid for reads of `len` bytes (or `len == 0`), and nothing
/// writes it while the slice lives.
unsafe fn bytes<'a>(addr: usize, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: per the contract above.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
}

/// # Safety
/// `addr` is valid for reads and writes of `len` bytes (or `len == 0`), and
/// nothing else reads or writes it while the slice lives.
unsafe fn bytes_mut<'a>(addr: usize, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: per the contract above.
    unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }
}

/// A multiplier for prescaling: float types use `F`, integer types `I`.
pub(super) enum Factor {
    F(f64),
    I(i128),
}

/// Reads a scalar of `ty` as a factor.
pub(super) fn factor_of(ty: ElemType, b: &[u8]) -> Factor {
    let f = |x: f32| Factor::F(f64::from(x));
    let u16_at = || u16::from_ne_bytes([b[0], b[1]]);
    let arr = |n: usize| {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    match ty {
        ElemType::F32 => f(f32::from_ne_bytes(b[..4].try_into().expect("4 bytes"))),
        ElemType::F64 => Factor::F(f64::from_ne_bytes(arr(8))),
        ElemType::F16 => f(kernels::f16_to_f32(u16_at())),
        ElemType::Bf16 => f(kernels::bf16_to_f32(u16_at())),
        ElemType::F8E4M3 => f(kernels::e4m3_to_f32(b[0])),
        ElemType::F8E5M2 => f(kernels::e5m2_to_f32(b[0])),
        ElemType::I8 => Factor::I(i128::from(b[0] as i8)),
        ElemType::U8 => Factor::I(i128::from(b[0])),
        ElemType::I32 => Factor::I(i128::from(i32::from_ne_bytes(
            b[..4].try_into().expect("4"),
        ))),
        ElemType::U32 => Factor::I(i128::from(u32::from_ne_bytes(
            b[..4].try_into().expect("4"),
        ))),
        ElemType::I64 => Factor::I(i128::from(i64::from_ne_bytes(arr(8)))),
        _ => Factor::I(i128::from(u64::from_ne_bytes(arr(8)))),
    }
}

/// Multiplies every element of `buf` by `k` in the element type's own
/// arithmetic (half types through f32, rounded once).
pub(super) fn scale(ty: ElemType, buf: &mut [u8], k: &Factor) {
    macro_rules! each {
        ($n:expr, $f:expr) => {
            for e in buf.chunks_exact_mut($n) {
                let v = $f(<[u8; $n]>::try_from(&e[..]).expect("element"));
                e.copy_from_slice(&v);
            }
        };
    }
    match (ty, k) {
        (ElemType::F32, Factor::F(f)) => {
            each!(4, |a| (f32::from_ne_bytes(a) * *f as f32).to_ne_bytes())
        }
        (ElemType::F64, Factor::F(f)) => each!(8, |a| (f64::from_ne_bytes(a) * f).to_ne_bytes()),
        (ElemType::F16, Factor::F(f)) => each!(2, |a| kernels::f32_to_f16(
            kernels::f16_to_f32(u16::from_ne_bytes(a)) * *f as f32
        )
        .to_ne_bytes()),
        (ElemType::Bf16, Factor::F(f)) => each!(2, |a| kernels::f32_to_bf16(
            kernels::bf16_to_f32(u16::from_ne_bytes(a)) * *f as f32
        )
        .to_ne_bytes()),
        (ElemType::F8E4M3, Factor::F(f)) => {
            each!(1, |a: [u8; 1]| [kernels::f32_to_e4m3(
                kernels::e4m3_to_f32(a[0]) * *f as f32
            )])
        }
        (ElemType::F8E5M2, Factor::F(f)) => {
            each!(1, |a: [u8; 1]| [kernels::f32_to_e5m2(
                kernels::e5m2_to_f32(a[0]) * *f as f32
            )])
        }
        (ElemType::I8 | ElemType::U8, Factor::I(k)) => {
            each!(1, |a: [u8; 1]| [a[0].wrapping_mul(*k as u8)])
        }
        (ElemType::I32 | ElemType::U32, Factor::I(k)) => {
            each!(4, |a| u32::from_ne_bytes(a)
                .wrapping_mul(*k as u32)
                .to_ne_bytes())
        }
        (_, Factor::I(k)) => {
            each!(8, |a| u64::from_ne_bytes(a)
                .wrapping_mul(*k as u64)
                .to_ne_bytes())
        }
        (_, Factor::F(_)) => unreachable!("float factors only for float types"),
    }
}

/// Divides every integer element of `buf` by `n` (truncating, as C does).
pub(super) fn divide(ty: ElemType, buf: &mut [u8], n: usize) {
    macro_rules! each {
        ($t:ty) => {
            for e in buf.chunks_exact_mut(std::mem::size_of::<$t>()) {
                let v = <$t>::from_ne_bytes(e.try_into().expect("element"));
                e.copy_from_slice(&(v / n as $t).to_ne_bytes());
            }
        };
    }
    match ty {
        ElemType::I8 => each!(i8),
        ElemType::U8 => each!(u8),
        ElemType::I32 => each!(i32),
        ElemType::U32 => each!(u32),
        ElemType::I64 => each!(i64),
        ElemType::U64 => each!(u64),
        _ => {}
    }
}

/// Whether `ty` is a floating-point type (`ncclAvg` scales those first).
pub(super) fn is_float(ty: ElemType) -> bool {
    matches!(
        ty,
        ElemType::F16
            | ElemType::Bf16
            | ElemType::F32
            | ElemType::F64
            | ElemType::F8E4M3
            | ElemType::F8E5M2
    )
}

/// How a reduction runs: the kernel, a prescale of each input, and whether
/// the result is divided by the rank count afterwards.
struct Plan {
    kernel: KernelFn,
    pre: Option<Factor>,
    divide: bool,
}

fn plan(red: &Red, ty: ElemType, n: usize) -> NcclResult<Plan> {
    let kernel = |op| {
        kernels::kernel(op, ty)
            .ok_or_else(|| NcclErr::arg(format!("no {op:?} reduction for {ty:?}")))
    };
    Ok(match red {
        Red::Op(op) => Plan {
            kernel: kernel(*op)?,
            pre: None,
            divide: false,
        },
        Red::Avg if is_float(ty) => Plan {
            kernel: kernel(Op::Sum)?,
            pre: Some(Factor::F(1.0 / n as f64)),
            divide: false,
        },
        Red::Avg => Plan {
            kernel: kernel(Op::Sum)?,
            pre: None,
            divide: n > 1,
        },
        Red::PreMul(s) => Plan {
            kernel: kernel(Op::Sum)?,
            pre: Some(factor_of(ty, s)),
            divide: false,
        },
        Red::PreMulAt(_) => {
            return Err(NcclErr::usage(
                "the PreMulSum scalar is device memory, but the buffers are host memory",
            ))
        }
    })
}

/// Runs one collective (not point-to-point) on `core`.
pub fn run(job: &Job, core: &mut Core) -> NcclResult<()> {
    let (n, me) = (core.comm.size(), core.comm.rank());
    let ty = job.ty;
    let b = job.count * ty.extent();
    // Before the empty-call shortcut: a rank with count 0 against one with
    // data is a mismatch too.
    if crate::param::params().check {
        let c = &mut Ctx::new(&mut core.eng, &mut core.comm).named(job.name);
        coll::check::agree(c, &job.signature())?;
    }
    if b == 0 {
        return Ok(());
    }
    let plan = job.red.as_ref().map(|r| plan(r, ty, n)).transpose()?;
    let red = plan.as_ref().map(|p| Reducer {
        extent: ty.extent(),
        commutative: true,
        apply: &p.kernel,
    });
    let c = &mut Ctx::new(&mut core.eng, &mut core.comm).named(job.name);
    let (send, recv) = (job.send, job.recv);
    let blocks: Vec<(usize, usize)> = (0..n).map(|p| (p * b, b)).collect();
    // SAFETY (every `bytes`/`bytes_mut` below): the export checked each
    // significant buffer is non-null and holds the bytes NCCL's signature
    // gives it, and that send and receive buffers are either the same
    // region in NCCL's in-place layout (handled without aliasing here) or
    // disjoint.
    match job.kind {
        Kind::AllReduce | Kind::Reduce(_) => {
            let (plan, red) = plan
                .as_ref()
                .zip(red.as_ref())
                .expect("reductions carry a plan");
            let root = match job.kind {
                Kind::Reduce(r) => Some(r),
                _ => None,
            };
            let has_out = root.is_none_or(|r| r == me);
            if has_out {
                let out = unsafe { bytes_mut(recv, b) };
                let mut input = None;
                if send != recv {
                    let s = unsafe { bytes(send, b) };
                    if plan.pre.is_some() {
                        copy(out, s);
                    } else {
                        input = Some(s);
                    }
                }
                if let Some(k) = &plan.pre {
                    scale(ty, out, k);
                }
                match root {
                    None => coll::allreduce::allreduce(c, input, out, red)?,
                    Some(r) => coll::reduce::reduce(c, input, Some(out), r, red)?,
                }
                if plan.divide {
                    divide(ty, out, n);
                }
            } else {
                let s = unsafe { bytes(send, b) };
                let root = root.expect("non-roots only in Reduce");
                match &plan.pre {
                    Some(k) => {
                        let mut tmp = s.to_vec();
                        scale(ty, &mut tmp, k);
                        coll::reduce::reduce(c, Some(&tmp), None, root, red)?
                    }
                    None => coll::reduce::reduce(c, Some(s), None, root, red)?,
                }
            }
        }
        Kind::ReduceScatter => {
            let (plan, red) = plan
                .as_ref()
                .zip(red.as_ref())
                .expect("reductions carry a plan");
            let in_place = recv == send + me * b;
            let counts = vec![b; n];
            if in_place || plan.pre.is_some() {
                let mut tmp = unsafe { bytes(send, n * b) }.to_vec();
                if let Some(k) = &plan.pre {
                    scale(ty, &mut tmp, k);
                }
                let out = unsafe { bytes_mut(recv, b) };
                coll::reduce_scatter::reduce_scatter(c, Some(&tmp), out, &counts, red)?;
            } else {
                let (s, out) = unsafe { (bytes(send, n * b), bytes_mut(recv, b)) };
                coll::reduce_scatter::reduce_scatter(c, Some(s), out, &counts, red)?;
            }
            if plan.divide {
                divide(ty, unsafe { bytes_mut(recv, b) }, n);
            }
        }
        Kind::Broadcast(root) => {
            if me == root && send != recv {
                let (s, out) = unsafe { (bytes(send, b), bytes_mut(recv, b)) };
                copy(out, s);
            }
            coll::bcast::bcast(c, unsafe { bytes_mut(recv, b) }, root)?;
        }
        Kind::AllGather => {
            let input = (send != recv + me * b).then(|| unsafe { bytes(send, b) });
            let out = unsafe { bytes_mut(recv, n * b) };
            coll::allgather::allgatherv(c, input, out, &blocks)?;
        }
        Kind::AlltoAll => {
            let tmp;
            let s = if send == recv {
                tmp = unsafe { bytes(send, n * b) }.to_vec();
                &tmp[..]
            } else {
                unsafe { bytes(send, n * b) }
            };
            let out = unsafe { bytes_mut(recv, n * b) };
            coll::alltoall::alltoall(c, s, &blocks, out, &blocks)?;
        }
        Kind::Gather(root) => {
            if me == root {
                let input = (send != recv + root * b).then(|| unsafe { bytes(send, b) });
                let out = unsafe { bytes_mut(recv, n * b) };
                coll::gather::gatherv(c, input, Some(out), &blocks, root)?;
            } else {
                coll::gather::gatherv(c, Some(unsafe { bytes(send, b) }), None, &blocks, root)?;
            }
        }
        Kind::Scatter(root) => {
            if me == root {
                let out = (recv != send + root * b).then(|| unsafe { bytes_mut(recv, b) });
                let s = unsafe { bytes(send, n * b) };
                coll::gather::scatterv(c, Some(s), &blocks, out, root)?;
            } else {
                let out = unsafe { bytes_mut(recv, b) };
                coll::gather::scatterv(c, None, &blocks, Some(out), root)?;
            }
        }
        Kind::Send(_) | Kind::Recv(_) => unreachable!("point-to-point runs in batches"),
    }
    Ok(())
}

/// Runs a group's operations on one communicator: every send and receive
/// is posted first (so pairs in any order cannot deadlock), then the
/// collectives run in call order, then the point-to-point ones complete.
pub fn run_batch(jobs: &[Job], core: &mut Core) -> NcclResult<()> {
    let posted = post_p2p(jobs, core)?;
    for j in jobs.iter().filter(|j| !j.is_p2p()) {
        run(j, core)?;
    }
    finish_p2p(posted, core)
}

/// Sends and receives of a batch, posted and not yet complete.
pub struct Posted<'a>(Vec<(crate::comm::engine::ReqId, &'a Job)>);

/// Posts the batch's sends and receives.
pub fn post_p2p<'a>(jobs: &'a [Job], core: &mut Core) -> NcclResult<Posted<'a>> {
    let ctx = core.comm.p2p_ctx();
    let mut posted = Vec::new();
    for j in jobs.iter().filter(|j| j.is_p2p()) {
        let b = j.count * j.ty.extent();
        let id = match j.kind {
            Kind::Send(p) => {
                let to = core.comm.world_rank(p);
                // SAFETY: the export checked the buffer holds `b` bytes; the
                // caller keeps it until the group completes, as NCCL requires.
                let buf = unsafe { RawBuf::new(j.send as *mut u8, b) };
                core.eng.isend(to, ctx, 0, buf, j.name)?
            }
            Kind::Recv(p) => {
                let m = Match {
                    source: Some(core.comm.world_rank(p)),
                    ctx,
                    tag: Some(0),
                };
                // SAFETY: as above, for writing.
                let buf = unsafe { RawBuf::new(j.recv as *mut u8, b) };
                core.eng.irecv(m, buf)?
            }
            _ => unreachable!("filtered"),
        };
        posted.push((id, j));
    }
    Ok(Posted(posted))
}

/// Waits for posted sends and receives; a receive must get the size it asked for.
pub fn finish_p2p(posted: Posted<'_>, core: &mut Core) -> NcclResult<()> {
    for (id, j) in posted.0 {
        let st = core.eng.wait(id, j.name)?;
        if let Some(e) = st.error {
            return Err((*e).into());
        }
        let want = j.count * j.ty.extent();
        if let (Kind::Recv(p), true) = (j.kind, st.bytes != want) {
            return Err(NcclErr::usage(format!(
                "ncclRecv from rank {p} expected {want} bytes but {} arrived (counts must match)",
                st.bytes
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_and_division() {
        let mut f = [2.0f32, -3.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect::<Vec<_>>();
        scale(ElemType::F32, &mut f, &Factor::F(0.5));
        assert_eq!(f32::from_ne_bytes(f[..4].try_into().unwrap()), 1.0);
        assert_eq!(f32::from_ne_bytes(f[4..].try_into().unwrap()), -1.5);
        let mut i = (-7i32).to_ne_bytes().to_vec();
        divide(ElemType::I32, &mut i, 2);
        assert_eq!(i32::from_ne_bytes(i[..].try_into().unwrap()), -3);
        let mut u = [200u8];
        scale(ElemType::U8, &mut u, &factor_of(ElemType::U8, &[3]));
        assert_eq!(u[0], 200u8.wrapping_mul(3));
    }
}
