//! A barrier among a communicator's ranks that NCCL calls on device
//! buffers queue on their CUDA streams: a host function that the driver
//! runs once the stream reaches it, and that returns once every rank's
//! stream has reached the same barrier. Queued on a stream being captured,
//! it becomes a host node of the graph and meets the peers again at every
//! launch, which is how a captured call keeps its order among the ranks
//! with no host thread of ours involved (`device::ipc`).
//!
//! The host function touches only shared memory (each rank's arrival count
//! in the host's segment) and never calls CUDA: the driver forbids that
//! from a host function, and an earlier design that let one wait for CUDA
//! work of another thread hung on an H100. Ranks of one process cannot use
//! it: the driver may run one process's host functions one at a time, so a
//! rank's barrier could wait forever for its neighbour's.

use super::comm::Shared;
use super::result::NcclErr;
use crate::error::Error;
use crate::gpu::driver::{self, StreamHandle};
use crate::param::{debug_log, params, DebugLevel};
use crate::transport::shm::futex;
use crate::transport::shm::segment::{pid_alive, Segment};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// One communicator's stream barrier. It lives as long as the process
/// (`leak`): a graph holding its host nodes may be launched at any time,
/// also after the communicator is gone.
pub struct StreamBarrier {
    seg: Arc<Segment>,
    me: usize,
    n: usize,
    /// Where a failure is reported (`ncclCommGetAsyncError`).
    comm: Weak<Shared>,
}

/// Spins on a peer's word before sleeping on it.
const SPINS: u32 = 64;
/// How long one sleep lasts at most: between sleeps the barrier looks for
/// an abort, a dead peer and the timeout.
const NAP: Duration = Duration::from_millis(1);
/// How often a peer's process is looked for while waiting on it.
const PROBE: Duration = Duration::from_millis(100);
/// What its errors say was waiting.
const OP: &str = "a call queued on a CUDA stream (or graph)";

impl StreamBarrier {
    /// The barrier of rank `me` of `n`, whose ranks all map `seg` with
    /// segment rank = communicator rank; never freed.
    pub fn leak(seg: Arc<Segment>, me: usize, n: usize, comm: Weak<Shared>) -> &'static Self {
        assert!(me < n && n <= seg.nranks());
        Box::leak(Box::new(StreamBarrier { seg, me, n, comm }))
    }

    /// Queues an arrival at the barrier on `stream`.
    ///
    /// # Safety
    /// `stream` is a stream of this process.
    pub unsafe fn queue(&'static self, stream: StreamHandle) -> driver::Result<()> {
        let data = self as *const StreamBarrier as *mut c_void;
        // SAFETY: `data` is leaked, so valid at every run; `arrive` makes no
        // CUDA call; the stream per the contract above.
        unsafe { driver::launch_host_fn(stream, arrive, data) }
    }

    /// Counts this rank's arrival and waits until every rank has arrived
    /// as often. Fails, as the engine's waits do, when the job is aborted,
    /// a rank of the host was found dead, a peer's process is gone (which
    /// it then tells the others), or `FERROCOLL_TIMEOUT` passes.
    pub fn arrive_and_wait(&self) -> Result<(), Error> {
        let mine = self.seg.barrier_word(self.me);
        let target = mine.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        futex::wake_all(mine);
        let start = Instant::now();
        let mut probed = start;
        for k in 0..self.n {
            let w = self.seg.barrier_word(k);
            let mut spins = 0;
            loop {
                let v = w.load(Ordering::Acquire);
                // Reached `target`, counting across the wrap.
                if v.wrapping_sub(target) as i32 >= 0 {
                    break;
                }
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                    continue;
                }
                if let Some((rank, code)) = self.seg.aborted() {
                    return Err(Error::Aborted { rank, code });
                }
                if let Some(rank) = self.seg.dead() {
                    return Err(Error::PeerDied { rank, op: OP });
                }
                if probed.elapsed() >= PROBE {
                    probed = Instant::now();
                    if !pid_alive(self.seg.pid_of(k)) {
                        let rank = self.seg.set_dead(k);
                        return Err(Error::PeerDied { rank, op: OP });
                    }
                    if let Some(t) = params().timeout {
                        if start.elapsed() >= t {
                            return Err(Error::Timeout {
                                secs: t.as_secs_f64(),
                                op: OP,
                                peers: k.to_string(),
                            });
                        }
                    }
                }
                futex::wait(w, v, NAP);
            }
        }
        Ok(())
    }
}

/// The host function: `data` is a leaked `StreamBarrier`. A failure lets
/// the stream go on (a host function cannot fail it) and is reported by
/// `ncclCommGetAsyncError` with the class the engine's waits give it.
unsafe extern "C" fn arrive(data: *mut c_void) {
    // SAFETY: `queue` passes a leaked StreamBarrier, never freed.
    let b = unsafe { &*(data as *const StreamBarrier) };
    let out = std::panic::catch_unwind(|| b.arrive_and_wait().map_err(NcclErr::from))
        .unwrap_or_else(|_| {
            Err(NcclErr {
                code: super::types::ncclResult_t::ncclInternalError,
                msg: "the stream barrier panicked".into(),
            })
        });
    if let Err(e) = out {
        debug_log(DebugLevel::Warn, || format!("ferrocoll: {}", e.msg));
        if let Some(c) = b.comm.upgrade() {
            c.fail(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_leave_the_barrier_together_and_in_order() {
        let seg = Arc::new(Segment::anonymous(3, 16384).unwrap());
        let bars: Vec<&'static StreamBarrier> = (0..3)
            .map(|r| StreamBarrier::leak(seg.clone(), r, 3, Weak::new()))
            .collect();
        let passed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        std::thread::scope(|s| {
            for (r, b) in bars.iter().enumerate() {
                let passed = passed.clone();
                s.spawn(move || {
                    for round in 0..50 {
                        // The last rank comes late: nobody passes before it.
                        if r == 2 {
                            std::thread::sleep(Duration::from_micros(200));
                            assert_eq!(passed.load(Ordering::SeqCst), 3 * round);
                        }
                        b.arrive_and_wait().unwrap();
                        passed.fetch_add(1, Ordering::SeqCst);
                        // Everyone of this round passes before the next starts.
                        while passed.load(Ordering::SeqCst) < 3 * (round + 1) {
                            std::hint::spin_loop();
                        }
                    }
                });
            }
        });
        assert_eq!(passed.load(Ordering::SeqCst), 150);
    }

    #[test]
    fn an_abort_ends_the_wait() {
        let seg = Arc::new(Segment::anonymous(2, 16384).unwrap());
        let b = StreamBarrier::leak(seg.clone(), 0, 2, Weak::new());
        let t = std::thread::spawn(move || b.arrive_and_wait());
        std::thread::sleep(Duration::from_millis(20));
        seg.set_abort(1, 1);
        let e = t.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("rank 1 aborted"), "{e}");
    }
}
