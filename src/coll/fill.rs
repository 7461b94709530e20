//! How a rank writes its data into its collective slot: past the cache
//! while its writes into shared memory run slow (the host's cores far
//! apart, `transport::shm::far`), else cached and, where long enough to
//! tell, timed for the watch.

use super::Ctx;
use crate::copy::{copy, copy_uncached};
use crate::param::params;
use crate::transport::shm::far::{Plan, TELLS_FROM};
use std::time::{Duration, Instant};

/// One write into the slot (of one or more copies), and its timing.
pub(super) struct Fill {
    plan: Plan,
    /// Bytes copied cached and timed, and how long they took.
    pub(super) bytes: usize,
    took: Duration,
}

impl Fill {
    /// A chunk of a streamed collective: as the watch plans it.
    pub(super) fn new(c: &mut Ctx) -> Fill {
        Fill::with_plan(c.eng.far.plan(params().far))
    }

    /// The `len` bytes of data a small collective copies into its slot:
    /// none of this below `TELLS_FROM`, and while near, only one write in
    /// `far::SAMPLE_EVERY` is timed (two clock reads on a copy of well
    /// under a microsecond would cost several percent).
    pub(super) fn sampled(c: &mut Ctx, len: usize) -> Fill {
        if len < TELLS_FROM {
            return Fill::with_plan(Plan {
                uncached: false,
                timed: false,
            });
        }
        Fill::with_plan(c.eng.far.plan_sampled(params().far))
    }

    /// A write that goes as `plan` says.
    pub(super) fn with_plan(plan: Plan) -> Fill {
        Fill {
            plan,
            bytes: 0,
            took: Duration::ZERO,
        }
    }

    /// Copies `src` into the slot's `d`.
    pub(super) fn copy(&mut self, d: &mut [u8], src: &[u8]) {
        if self.plan.uncached {
            copy_uncached(d, src);
        } else if self.plan.timed {
            let t = Instant::now();
            copy(d, src);
            self.took += t.elapsed();
            self.bytes += src.len();
        } else {
            copy(d, src);
        }
    }

    /// Whether a fold goes into the slot uncached: as the copies last
    /// found, without taking a probe (a fold is not timed, since a slow op
    /// would read as a far host).
    pub(super) fn fold_uncached(c: &Ctx) -> bool {
        c.eng.far.uncached(params().far)
    }

    /// Records the write's timing once it is published.
    pub(super) fn done(self, c: &mut Ctx) {
        if self.plan.timed {
            c.eng.far.record("slot writes", self.bytes, self.took);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{slots, Ctx, Reducer};
    use crate::comm::engine::Engine;
    use crate::comm::Comm;
    use crate::param::params;
    use crate::transport::shm::far::{Mode, SAMPLE_EVERY, TELLS_FROM};
    use crate::transport::shm::Segment;
    use std::sync::Arc;

    /// Every small collective that copies data into its slot times one
    /// such copy in `SAMPLE_EVERY` on each rank that copies `TELLS_FROM`
    /// bytes or more (bcast: the root; reduce, gather: the others;
    /// scatter: the root; the rest: every rank), and none shorter.
    /// (Timed writes one call in 8 cannot turn the watch far, so each of
    /// them is cached and timed.) Fails if a collective's writes skip the
    /// watch or announce other bytes than they copy.
    #[test]
    fn slot_writes_feed_the_far_watch() {
        if params().far != Mode::Auto {
            eprintln!("skipped: FERROCOLL_FAR is set");
            return;
        }
        let (n, len) = (2, TELLS_FROM);
        let seg = Arc::new(Segment::anonymous(n, 64 * 1024).unwrap());
        std::thread::scope(|s| {
            for r in 0..n {
                let seg = seg.clone();
                s.spawn(move || {
                    let mut eng = Engine::over_shm(r, seg);
                    let mut comm = Comm::world(&eng);
                    let c = &mut Ctx::new(&mut eng, &mut comm);
                    let add = |src: &[u8], dst: &mut [u8]| {
                        dst.iter_mut()
                            .zip(src)
                            .for_each(|(d, s)| *d = d.wrapping_add(*s))
                    };
                    let red = Reducer {
                        extent: 1,
                        commutative: true,
                        apply: &add,
                    };
                    let data = vec![r as u8 + 1; 2 * len];
                    let mut out = vec![0u8; 2 * len];
                    let halves = [(0, len), (len, len)];
                    let both = |w: bool| if w { len } else { 0 };
                    let mut calls = |what: &str, bytes: usize, call: &mut dyn FnMut(&mut Ctx)| {
                        let before = c.eng.far.recorded;
                        for _ in 0..SAMPLE_EVERY {
                            call(c);
                        }
                        let got = c.eng.far.recorded - before;
                        assert_eq!(got, bytes, "{what}, rank {r}: bytes timed");
                    };
                    calls("bcast", both(r == 0), &mut |c| {
                        slots::bcast(c, &mut out[..len], 0).unwrap()
                    });
                    calls("short bcast", 0, &mut |c| {
                        slots::bcast(c, &mut out[..len - 1], 0).unwrap()
                    });
                    calls("reduce", both(r == 1), &mut |c| {
                        let o = (r == 0).then_some(&mut out[..len]);
                        slots::reduce(c, Some(&data[..len]), o, 0, &red).unwrap()
                    });
                    calls("allreduce", len, &mut |c| {
                        slots::allreduce(c, Some(&data[..len]), &mut out[..len], &red).unwrap()
                    });
                    calls("reduce_scatter", len, &mut |c| {
                        let o = &mut out[..len];
                        slots::reduce_scatter(c, Some(&data), o, &halves, 2 * len, &red).unwrap()
                    });
                    calls("allgather", len, &mut |c| {
                        let s = Some(&data[..len]);
                        slots::allgatherv(c, s, &mut out, &halves).unwrap()
                    });
                    calls("gather", both(r == 1), &mut |c| {
                        let o = (r == 0).then_some(&mut out[..]);
                        slots::gather(c, Some(&data[..len]), o, len, 0).unwrap()
                    });
                    calls("scatter", both(r == 0), &mut |c| {
                        let s = (r == 0).then_some(&data[..]);
                        slots::scatter(c, s, len, Some(&mut out[..len]), 0).unwrap()
                    });
                    calls("alltoall", len, &mut |c| {
                        slots::alltoallv(c, &data, &halves, &mut out, &halves, Some(len)).unwrap()
                    });
                });
            }
        });
    }
}
