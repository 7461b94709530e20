//! Fuzzing entry points (feature `fuzzing`): each takes arbitrary bytes and
//! feeds them to one decoder the way a peer, a launcher or a caller could.
//! They must never panic, hang or allocate without bound, whatever the
//! bytes. `tests/fuzz.rs` runs them for a bounded time in CI (mutating the
//! corpus in `fuzz/corpus/<target>/`); `fuzz/` runs them under cargo fuzz
//! for longer, by hand.

use crate::comm::buffer::RawBuf;
use crate::comm::engine::{Engine, Match, ReqId};
use crate::ffi::mpi::consts::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

/// A fuzz target: a name (also its corpus folder) and its entry point.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("tcp_stream", tcp_stream),
    ("handshake", handshake),
    ("store_server", crate::bootstrap::store::fuzz::server),
    ("store_replies", crate::bootstrap::store::fuzz::replies),
    ("pmi", crate::bootstrap::pmi::fuzz),
    ("handles", handles),
];

/// Longest input a target looks at (longer inputs are cut).
pub const MAX_INPUT: usize = 64 << 10;

/// A byte stream that reads (a copy of) the fuzz input and swallows what
/// is written.
pub struct Pipe {
    input: std::io::Cursor<Vec<u8>>,
}

impl Pipe {
    /// A stream that yields `input`, then end of file.
    pub fn new(input: &[u8]) -> Pipe {
        Pipe {
            input: std::io::Cursor::new(input.to_vec()),
        }
    }
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Takes the next byte of a script, 0 once it runs out.
fn byte(data: &mut &[u8]) -> u8 {
    let (b, rest) = data.split_first().unwrap_or((&0, &[]));
    *data = rest;
    *b
}

/// Takes the next four bytes as an `i32`.
fn word(data: &mut &[u8]) -> i32 {
    i32::from_le_bytes([byte(data), byte(data), byte(data), byte(data)])
}

/// The TCP frame decoder: an engine of two ranks receives `data` from rank
/// 1 over a loop-back connection. The first byte says how many receives
/// rank 0 posts (0-3) and the next three bytes of each say its size, tag
/// and whether it takes any source; the rest is rank 1's byte stream.
/// Messages for no receive are buffered, announced ones asked for.
pub fn tcp_stream(data: &[u8]) {
    let mut data = &data[..data.len().min(MAX_INPUT)];
    let nrecv = byte(&mut data) % 4;
    let mut specs = Vec::new();
    for _ in 0..nrecv {
        let size = [0usize, 1, 16, 4096, 100_000][byte(&mut data) as usize % 5];
        let tag = (byte(&mut data) % 4) as i32;
        let any = byte(&mut data).is_multiple_of(2);
        specs.push((size, tag, any));
    }
    // Buffers outlive the engine that holds pointers into them.
    let mut bufs: Vec<Vec<u8>> = specs.iter().map(|s| vec![0u8; s.0]).collect();
    let Ok((ours, mut theirs)) = loopback_pair() else {
        return;
    };
    let Ok(mut eng) = Engine::fuzz_over_tcp(ours) else {
        return;
    };
    let mut ids: Vec<ReqId> = Vec::new();
    for (b, &(_, tag, any)) in bufs.iter_mut().zip(&specs) {
        let m = Match {
            source: (!any).then_some(1),
            ctx: 0,
            tag: Some(tag),
        };
        // SAFETY: `b` outlives `eng` (declared before it) and is not
        // touched until the engine is dropped.
        let raw = unsafe { RawBuf::new(b.as_mut_ptr(), b.len()) };
        match eng.irecv(m, raw) {
            Ok(id) => ids.push(id),
            Err(_) => return,
        }
    }
    // Loop-back sockets take 64 KiB without a reader; then end of file.
    if theirs.write_all(data).is_err() || theirs.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(2);
    let mut idle = 0u32;
    while !eng.fuzz_finished() && Instant::now() < until {
        if eng.progress() {
            idle = 0;
        } else {
            idle += 1;
            if idle.is_multiple_of(64) && !eng.fuzz_idle() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
    assert!(
        eng.fuzz_finished(),
        "the engine did not finish reading {} bytes within 2 s",
        data.len()
    );
    for id in ids {
        if eng.is_done(id) {
            let _ = eng.take(id);
        }
    }
}

fn loopback_pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let theirs = TcpStream::connect(l.local_addr()?)?;
    let (ours, _) = l.accept()?;
    Ok((ours, theirs))
}

/// The handshake a stranger meets first: `data` is what the connecting
/// side sends to a listener.
pub fn handshake(data: &[u8]) {
    use crate::transport::tcp::auth::{handshake, Role, Secret};
    let secret = Secret::from_bytes([7; 32]);
    let r = handshake(&mut Pipe::new(data), &secret, Role::Acceptor, 0);
    // Without the secret nothing can pass.
    assert!(r.is_err(), "a fuzz input passed the handshake");
}

/// The handle decoders: MPI calls on arbitrary handles (a singleton
/// `MPI_Init` first, errors returned), NCCL's datatype, op, result, unique
/// id and config decoders, and the mismatch check's wire form.
///
/// Each 9-byte record is a call number and two words; a word is taken as
/// a handle as is, or (low bit of the call byte) picks one of the
/// predefined and live user handles.
pub fn handles(data: &[u8]) {
    let mut data = &data[..data.len().min(MAX_INPUT)];
    mpi_once();
    let user = user_objects();
    let table: Vec<c_int> = [
        MPI_COMM_WORLD,
        MPI_COMM_SELF,
        MPI_COMM_NULL,
        MPI_INT,
        MPI_DOUBLE,
        MPI_BYTE,
        MPI_LONG_DOUBLE,
        MPI_C_LONG_DOUBLE_COMPLEX,
        MPI_FLOAT_INT,
        MPI_PACKED,
        MPI_DATATYPE_NULL,
        MPI_SUM,
        MPI_MAX,
        MPI_MAXLOC,
        MPI_REPLACE,
        MPI_NO_OP,
        MPI_OP_NULL,
        MPI_REQUEST_NULL,
        MPI_ERRORS_RETURN,
        MPI_ERRHANDLER_NULL,
    ]
    .into_iter()
    .chain(user)
    .collect();
    while !data.is_empty() {
        let call = byte(&mut data);
        let (a, b) = (word(&mut data), word(&mut data));
        let pick = |w: c_int| {
            if call & 1 == 1 {
                table[w.unsigned_abs() as usize % table.len()]
            } else {
                w
            }
        };
        mpi_call(call >> 1, pick(a), pick(b), a);
        nccl_decoders(call, a, b, data);
    }
    for h in user {
        free_any(h);
    }
}

fn mpi_once() {
    use crate::ffi::mpi::env;
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let rc = env::PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(rc, MPI_SUCCESS, "singleton MPI_Init");
        for c in [MPI_COMM_WORLD, MPI_COMM_SELF] {
            env::PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        }
    });
}

unsafe extern "C" fn user_op(_: *mut c_void, _: *mut c_void, _: *mut c_int, _: *mut MPI_Datatype) {}

/// A derived type, a communicator and an op, made afresh for each input
/// (an input may free them; their numbers then stand for freed handles).
fn user_objects() -> [c_int; 3] {
    use crate::ffi::mpi::{comm, ops, types};
    let (mut t, mut c, mut o) = (MPI_DATATYPE_NULL, MPI_COMM_NULL, MPI_OP_NULL);
    types::PMPI_Type_contiguous(3, MPI_INT, &mut t);
    types::PMPI_Type_commit(&mut t);
    comm::PMPI_Comm_dup(MPI_COMM_SELF, &mut c);
    ops::PMPI_Op_create(Some(user_op), 1, &mut o);
    [t, c, o]
}

fn free_any(h: c_int) {
    use crate::ffi::mpi::{comm, ops, types};
    let mut h2 = h;
    types::PMPI_Type_free(&mut h2);
    let mut h2 = h;
    comm::PMPI_Comm_free(&mut h2);
    let mut h2 = h;
    ops::PMPI_Op_free(&mut h2);
}

/// One MPI call on handles `a` and `b` (`n`: a count), which must return
/// success or an error class, never crash.
fn mpi_call(call: u8, a: c_int, b: c_int, n: c_int) {
    use crate::ffi::mpi::{coll, comm, p2p, types};
    let mut v: c_int = 0;
    let (mut lb, mut extent): (MPI_Aint, MPI_Aint) = (0, 0);
    let mut h = a;
    let mut name = [0 as std::os::raw::c_char; MPI_MAX_OBJECT_NAME as usize];
    // Room for two elements of the widest predefined type, or of the
    // user type (3 ints).
    let (src, mut dst) = ([0u8; 64], [0u8; 64]);
    let count = n.rem_euclid(3);
    let rc = match call % 15 {
        0 => comm::PMPI_Comm_size(a, &mut v),
        1 => comm::PMPI_Comm_rank(a, &mut v),
        2 => comm::PMPI_Comm_compare(a, b, &mut v),
        3 => types::PMPI_Type_size(a, &mut v),
        4 => types::PMPI_Type_get_extent(a, &mut lb, &mut extent),
        5 => types::PMPI_Type_commit(&mut h),
        6 => comm::PMPI_Comm_get_name(a, name.as_mut_ptr(), &mut v),
        7 => {
            let mut st = MPI_Status::default();
            p2p::PMPI_Test(&mut h, &mut v, &mut st)
        }
        8 => p2p::PMPI_Request_free(&mut h),
        9 => coll::PMPI_Allreduce(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            count,
            a,
            b,
            MPI_COMM_SELF,
        ),
        10 => coll::PMPI_Bcast(dst.as_mut_ptr().cast(), count, a, 0, b),
        11 => p2p::PMPI_Get_count(&MPI_Status::default(), a, &mut v),
        12 => crate::ffi::mpi::env::PMPI_Comm_get_errhandler(a, &mut h),
        13 => types::PMPI_Type_get_name(a, name.as_mut_ptr(), &mut v),
        _ => {
            // Only handles that are no predefined object may be freed.
            free_any(a);
            MPI_SUCCESS
        }
    };
    let mut class = -1;
    crate::ffi::mpi::env::PMPI_Error_class(rc, &mut class);
    assert!(class >= 0, "call {call} returned {rc}, no MPI error code");
}

/// NCCL's decoders of caller-supplied values.
fn nccl_decoders(call: u8, a: c_int, b: c_int, rest: &[u8]) {
    use crate::ffi::nccl::{coll, comm, init, types::ncclConfig_t};
    let _ = coll::elem_type(a);
    // Any value, known or not, has a string.
    let s = init::ncclGetErrorString(b);
    assert!(!s.is_null());
    let mut id = [0u8; crate::bootstrap::unique_id::ID_BYTES];
    let k = rest.len().min(id.len());
    id[..k].copy_from_slice(&rest[..k]);
    let _ = crate::bootstrap::unique_id::UniqueId::from_bytes(&id);
    let _ = crate::coll::check::Signature::decode(&id);
    // A config whose declared size stays inside the bytes behind it.
    let mut cfg = [0u8; 512];
    cfg[..k].copy_from_slice(&rest[..k]);
    let size = usize::from_le_bytes(cfg[..8].try_into().expect("8 bytes")) % (cfg.len() + 1);
    cfg[..8].copy_from_slice(&size.to_le_bytes());
    if call & 2 == 2 {
        cfg[8..12].copy_from_slice(&crate::ffi::nccl::types::NCCL_API_MAGIC.to_le_bytes());
    }
    // SAFETY: `cfg` holds `size` bytes (at most its length), and the decoder
    // reads only inside them.
    let _ = unsafe { comm::settings(cfg.as_ptr() as *const ncclConfig_t) };
}
