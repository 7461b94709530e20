//! Whether this host's cores currently sit far apart, as a rank's own
//! writes into its collective slots show, and how it writes them then.
//!
//! A streamed collective hands each chunk from a writer's cache to its
//! readers' (`coll::stream`). On the 2-vCPU machines this was built on, the
//! host at times runs the two vCPUs far apart, for seconds at a time: the
//! round trip of one cache line goes from 100-130 ns to about 500 ns. The
//! readers' copies hardly slow down then, but the writer's do: each line
//! of a slot it rewrites was last read by a peer, and taking it back
//! crosses the far link. Stores that bypass the cache (non-temporal) do
//! not read the line and do not slow down. Two pinned processes streaming
//! 8 MiB through 16 shared 64 KiB slots, runs of 5 over 10 minutes:
//!
//! | state (line round trip) | cached writes: stream | writer's 64 KiB copy p10 / p50 / p90 | uncached writes: stream |
//! |---|---|---|---|
//! | usual (100-130 ns) | 280-770 us | 2.0-5.8 / 2.4-7.6 / 6.0-17 us | 430-860 us |
//! | far (500 ns) | 1730-4540 us | 8.3-24 / 15-27 / 28 us | 360-650 us |
//!
//! Software prefetch by the reader and `clwb` after cached writes did not
//! help in the far state. So a rank times its cached chunk writes, and three
//! slow ones in a row (that met no page fault and kept their core) make it
//! write uncached; while it does, one chunk every `PROBE_EVERY` goes cached
//! and timed, and a fast one turns it back.
//! Each rank decides for itself: no rank waits for another's verdict.
//! Messages through the rings (from `TIMED_FROM` bytes) follow the same
//! watch (`comm::engine::write_watched`): their writer rewrites ring lines
//! the receiver has read, and slowed down even more (pingpong 1 MiB 35 us
//! in the usual state, 420-470 us far, 66-73 us far and uncached).
//! So do small collectives' writes into their slots from `TELLS_FROM`
//! bytes (`coll::fill`), one in `SAMPLE_EVERY` timed while near.

use crate::param::{debug_log, DebugLevel};
use std::time::{Duration, Instant};

/// Messages through the rings are timed from this many bytes (each one,
/// so a clock read pair costs under 5% of the write).
pub const TIMED_FROM: usize = 16 * 1024;

/// Writes shorter than this are not timed: too short to tell the two
/// states apart from a clock read. Even at 4 KiB it is close: far, 4 KiB
/// took 1.05-1.73 us, slow from 1.02, so a probe there may read fast and
/// cost a few cached writes. Small collectives' slot writes are sampled
/// from here all the same: in the far state a rank that writes 4-8 KiB
/// into its slot also waits for lines its peers hold (2 ranks, far, us,
/// cached / following the watch: gather 8 KiB (4 KiB each) 1.39 / 0.73,
/// bcast 8 KiB 3.71 / 1.11, scatter 16 KiB 3.31 / 1.24, allgather 16 KiB
/// 4.42 / 2.30, alltoall 16 KiB 4.29 / 3.02, reduce_scatter 16 KiB 4.45 /
/// 2.44).
pub const TELLS_FROM: usize = 4 * 1024;

/// Write rate, bytes per second, below which a chunk counts as slow (a
/// 64 KiB chunk that takes longer than 16.4 us). Collectives read their
/// source from memory, which the probe above did not: there, in the usual
/// state, the slowest chunks took 11-11.3 us (and a rare one 72), in the
/// far state 16-64 us.
const SLOW_BELOW: u128 = 4_000_000_000;

/// Slow chunks in a row that turn uncached writes on: one alone may be a
/// writer that lost its core or met a page fault in the middle of a copy.
/// Only chunks that met neither count (`interruptions`): a rank's first
/// writes into pages it has not touched yet (a new ring lap, slots a size
/// has not used) take a page fault each, 16 KiB in 13-20 us, and a run of
/// them alone had turned ranks far in the usual state.
const SLOW_IN_ROW: u8 = 3;

/// While writing uncached, a rank writes one chunk cached this often.
/// In the far state that chunk costs about 20 us more, 1% of the
/// interval; a passing far state is noticed within it.
pub const PROBE_EVERY: Duration = Duration::from_millis(2);

/// While near, a small collective's slot writes (4-64 KiB) are timed one
/// in this many: two clock reads on a copy of well under a microsecond
/// would cost several percent. In the far state they are slow too; 2
/// ranks, far, us, always cached (as before) / following the
/// watch: bcast 16 KiB 5.0-6.5 / 1.8, 64 KiB 10.9-11.4 / 6.1; reduce 16
/// KiB 5.7-7.8 / 2.2-2.3; allgather 32 KiB 8.1-8.2 / 3.0-3.2; alltoall 32
/// KiB 8.5-9.1 / 3.6-4.4; gather 32 KiB 6.7-6.8 / 2.2, 64 KiB 11-12 / 4.0;
/// scatter 32 KiB 5.3-6.8 / 1.8-2.0; reduce_scatter 32 KiB 8.3-8.4 /
/// 2.9-3.2.
pub const SAMPLE_EVERY: u8 = 8;

/// `FERROCOLL_FAR`: whether writers follow the far word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Follow it (reads are timed).
    Auto,
    /// Always write uncached (no reads are timed).
    On,
    /// Always write cached (no reads are timed).
    Off,
}

impl Mode {
    /// Parses the variable's value (`auto` for anything unknown).
    pub fn parse(v: Option<&str>) -> Mode {
        match v.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("on" | "1" | "yes") => Mode::On,
            Some("off" | "0" | "no") => Mode::Off,
            _ => Mode::Auto,
        }
    }
}

/// How one write into shared memory goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Past the cache.
    pub uncached: bool,
    /// Cached and timed, for `Watch::record`.
    pub timed: bool,
}

/// One rank's view: whether it writes uncached, its run of slow cached
/// writes, and its last probe.
#[derive(Debug, Default)]
pub struct Watch {
    far: bool,
    slow_in_row: u8,
    /// `interruptions()` at the last slow write seen while near.
    interrupted: Option<u64>,
    /// When this rank last wrote a chunk cached while far.
    probed: Option<Instant>,
    /// Writes `plan_sampled` saw, modulo `SAMPLE_EVERY`.
    sampled: u8,
    /// Bytes of the timed writes `record` took into account.
    #[cfg(test)]
    pub recorded: usize,
}

impl Watch {
    /// Whether this rank sees the cores far apart now (it writes uncached,
    /// probes aside).
    pub fn far(&self) -> bool {
        self.far
    }

    /// Whether writes go uncached under `mode` as this rank last found,
    /// without taking a probe (for writes that are never timed).
    pub fn uncached(&self, mode: Mode) -> bool {
        match mode {
            Mode::On => true,
            Mode::Off => false,
            Mode::Auto => self.far,
        }
    }

    /// How the next write goes under `mode`: in `Auto`, uncached while far
    /// (probes aside), else cached and timed.
    pub fn plan(&mut self, mode: Mode) -> Plan {
        match mode {
            Mode::On => Plan {
                uncached: true,
                timed: false,
            },
            Mode::Off => Plan {
                uncached: false,
                timed: false,
            },
            Mode::Auto => {
                let uncached = self.write_uncached(Instant::now);
                Plan {
                    uncached,
                    timed: !uncached,
                }
            }
        }
    }

    /// `plan` for writes too short to time each one: while near (in
    /// `Auto`), one in `SAMPLE_EVERY` is timed and the others go cached.
    pub fn plan_sampled(&mut self, mode: Mode) -> Plan {
        if mode == Mode::Auto && !self.far {
            self.sampled = (self.sampled + 1) % SAMPLE_EVERY;
            if self.sampled != 0 {
                return Plan {
                    uncached: false,
                    timed: false,
                };
            }
        }
        self.plan(mode)
    }

    /// Records a cached write of `bytes` that took `took` (one shorter
    /// than `TELLS_FROM` tells nothing and is ignored), and logs a change
    /// of state; `what` names the writes.
    pub fn record(&mut self, what: &str, bytes: usize, took: Duration) {
        if bytes < TELLS_FROM {
            return;
        }
        #[cfg(test)]
        {
            self.recorded += bytes;
        }
        if let Some(far) = self.observe(bytes, took, interruptions) {
            debug_log(DebugLevel::Info, || {
                format!(
                    "cached writes of {what} {}: {bytes} bytes in {took:?}; they now go {}",
                    if far { "slow" } else { "fast again" },
                    if far { "uncached" } else { "cached" }
                )
            });
        }
    }

    /// Whether this rank writes its next chunk uncached; `now` is read only
    /// while it sees the cores far apart.
    fn write_uncached(&mut self, now: impl FnOnce() -> Instant) -> bool {
        if !self.far {
            return false;
        }
        let now = now();
        // The first chunk after turning far goes uncached: two cached ones
        // have just been slow.
        let last = *self.probed.get_or_insert(now);
        if now.duration_since(last) < PROBE_EVERY {
            return true;
        }
        self.probed = Some(now);
        false
    }

    /// Records that a cached write of `bytes` took `took`; returns the new
    /// state (true: far) where it changes. A slow write while near counts
    /// only if `interrupts` (read then) says the thread met no page fault
    /// and lost no core since the last slow write; one that did restarts
    /// the run.
    fn observe(
        &mut self,
        bytes: usize,
        took: Duration,
        interrupts: impl FnOnce() -> u64,
    ) -> Option<bool> {
        let slow = (bytes as u128) * 1_000_000_000 < SLOW_BELOW * took.as_nanos();
        let far = if self.far {
            slow
        } else if slow {
            let now = interrupts();
            let clean = self.interrupted.replace(now) == Some(now);
            self.slow_in_row = if clean {
                self.slow_in_row.saturating_add(1)
            } else {
                0
            };
            self.slow_in_row >= SLOW_IN_ROW
        } else {
            self.slow_in_row = 0;
            false
        };
        if far == self.far {
            return None;
        }
        self.far = far;
        self.probed = None;
        self.slow_in_row = 0;
        Some(far)
    }
}

/// Page faults and involuntary context switches of the calling thread so
/// far (0 where the kernel cannot say: every slow write then counts).
fn interruptions() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the one rusage that `ru` holds.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: zeroed, then filled by the kernel: every field is plain data.
    let ru = unsafe { ru.assume_init() };
    [ru.ru_minflt, ru.ru_majflt, ru.ru_nivcsw]
        .iter()
        .map(|&n| n as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_parses() {
        assert_eq!(Mode::parse(None), Mode::Auto);
        assert_eq!(Mode::parse(Some(" ON ")), Mode::On);
        assert_eq!(Mode::parse(Some("0")), Mode::Off);
        assert_eq!(Mode::parse(Some("sometimes")), Mode::Auto);
    }

    const CHUNK: usize = 64 * 1024;
    const FAST: Duration = Duration::from_micros(4);
    const SLOW: Duration = Duration::from_micros(25);
    /// A thread that meets no page fault and keeps its core.
    const QUIET: fn() -> u64 = || 0;

    /// Turns `w` far with uninterrupted slow chunks (a first one to read
    /// the thread's interruptions, then three in a row).
    fn turn_far(w: &mut Watch) {
        assert!((0..4).any(|_| w.observe(CHUNK, SLOW, QUIET) == Some(true)));
        assert!(w.far());
    }

    #[test]
    fn three_slow_writes_in_a_row_turn_far_and_one_fast_turns_back() {
        let mut w = Watch::default();
        assert_eq!(w.observe(CHUNK, FAST, QUIET), None);
        // The first slow write only reads the thread's interruptions.
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, FAST, QUIET), None, "the run starts over");
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), Some(true));
        // A slow probe keeps it far; a fast one turns it back at once.
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, FAST, QUIET), Some(false));
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None);
        assert_eq!(w.observe(CHUNK, FAST, QUIET), None);
    }

    #[test]
    fn the_threshold_lies_between_the_two_states() {
        let mut w = Watch::default();
        // 4 GB/s is 16.38 us for 64 KiB.
        let at = Duration::from_nanos;
        for _ in 0..4 {
            assert_eq!(w.observe(CHUNK, at(16_300), QUIET), None);
        }
        for _ in 0..3 {
            assert_eq!(w.observe(CHUNK, at(16_500), QUIET), None);
        }
        assert_eq!(w.observe(CHUNK, at(16_500), QUIET), Some(true));
        assert_eq!(w.observe(CHUNK, at(16_300), QUIET), Some(false));
        // Shorter chunks by their rate: 16 KiB in 4.5 us is 3.6 GB/s.
        w.observe(CHUNK / 4, at(4_500), QUIET);
        w.observe(CHUNK / 4, at(4_500), QUIET);
        assert_eq!(w.observe(CHUNK / 4, at(4_500), QUIET), Some(true));
    }

    /// Slow writes during which the thread met a page fault or lost its
    /// core (the count `interrupts` reads went up since the last slow
    /// write) do not count, and restart the run; interruptions between
    /// slow writes, fast ones or none in between, count against the next.
    #[test]
    fn interrupted_slow_writes_do_not_count() {
        let mut w = Watch::default();
        let count = std::cell::Cell::new(0u64);
        let faulting = || {
            count.set(count.get() + 4);
            count.get()
        };
        for _ in 0..100 {
            assert_eq!(w.observe(TIMED_FROM, SLOW, faulting), None, "fresh pages");
        }
        let still = || count.get();
        assert_eq!(w.observe(CHUNK, SLOW, still), None);
        assert_eq!(w.observe(CHUNK, SLOW, still), None);
        assert_eq!(w.observe(CHUNK, SLOW, faulting), None, "restarts");
        assert_eq!(w.observe(CHUNK, SLOW, still), None);
        assert_eq!(w.observe(CHUNK, FAST, still), None);
        count.set(count.get() + 1);
        assert_eq!(
            w.observe(CHUNK, FAST, || unreachable!("fast: not read")),
            None
        );
        assert_eq!(w.observe(CHUNK, SLOW, still), None, "interrupted since");
        assert_eq!(w.observe(CHUNK, SLOW, still), None);
        assert_eq!(w.observe(CHUNK, SLOW, still), None);
        assert_eq!(w.observe(CHUNK, SLOW, still), Some(true));
        // While far, slow writes keep it far whatever the thread met.
        assert_eq!(
            w.observe(CHUNK, SLOW, || unreachable!("far: not read")),
            None
        );
    }

    /// The counts are the thread's own and only grow.
    #[test]
    fn interruptions_count_up() {
        // A fresh mapping: pages an allocator handed out before may be
        // mapped already.
        let mut v = memmap2::MmapMut::map_anon(1 << 22).unwrap();
        let a = interruptions();
        v.iter_mut().step_by(4096).for_each(|b| *b = 1);
        assert!(interruptions() > a, "touching 1024 fresh pages faults");
        assert_eq!(v.iter().filter(|&&b| b == 1).count(), 1024);
    }

    /// `plan` follows the mode; `record` ignores writes too short to tell.
    #[test]
    fn plans_follow_the_mode_and_short_writes_are_ignored() {
        let mut w = Watch::default();
        let (cached, uncached, timed) = (
            Plan {
                uncached: false,
                timed: false,
            },
            Plan {
                uncached: true,
                timed: false,
            },
            Plan {
                uncached: false,
                timed: true,
            },
        );
        assert_eq!(w.plan(Mode::On), uncached);
        assert_eq!(w.plan(Mode::Off), cached);
        assert_eq!(w.plan(Mode::Auto), timed);
        for _ in 0..10 {
            w.record("test", TELLS_FROM - 1, SLOW);
        }
        assert!(!w.far(), "short writes tell nothing");
        assert_eq!(w.recorded, 0);
        w.record("test", TELLS_FROM, FAST);
        assert_eq!(w.recorded, TELLS_FROM);
        turn_far(&mut w);
        assert_eq!(w.plan(Mode::Auto), uncached, "far: uncached");
        assert_eq!(w.plan(Mode::Off), cached, "the mode wins");
    }

    /// While near, one sampled plan in `SAMPLE_EVERY` is timed; while far
    /// they go as `plan` says (uncached, probes aside); other modes as
    /// `plan`.
    #[test]
    fn sampled_plans_time_one_in_so_many_while_near() {
        let mut w = Watch::default();
        let timed = (0..4 * SAMPLE_EVERY)
            .filter(|_| w.plan_sampled(Mode::Auto).timed)
            .count();
        assert_eq!(timed, 4);
        assert!(w.plan_sampled(Mode::On).uncached);
        assert!(!w.plan_sampled(Mode::Off).timed);
        turn_far(&mut w);
        assert!(w.plan_sampled(Mode::Auto).uncached, "far: uncached at once");
        assert!(w.plan_sampled(Mode::Auto).uncached);
    }

    #[test]
    fn writes_go_uncached_while_far_but_probe_now_and_then() {
        let mut w = Watch::default();
        assert!(!w.write_uncached(|| unreachable!("no clock while near")));
        turn_far(&mut w);
        let t0 = Instant::now();
        assert!(w.write_uncached(|| t0));
        assert!(w.write_uncached(|| t0 + PROBE_EVERY / 2));
        assert!(!w.write_uncached(|| t0 + PROBE_EVERY), "a probe");
        assert_eq!(w.observe(CHUNK, SLOW, QUIET), None, "still far");
        assert!(w.write_uncached(|| t0 + PROBE_EVERY + PROBE_EVERY / 2));
        assert!(!w.write_uncached(|| t0 + 2 * PROBE_EVERY + PROBE_EVERY / 2));
        assert!(w.far(), "probes leave it far");
        assert_eq!(w.observe(CHUNK, FAST, QUIET), Some(false));
        assert!(!w.far());
        assert!(!w.write_uncached(|| unreachable!("near again")));
        // Far again later: the interval starts over.
        turn_far(&mut w);
        let t1 = t0 + 10 * PROBE_EVERY;
        assert!(w.write_uncached(|| t1));
        assert!(!w.write_uncached(|| t1 + PROBE_EVERY));
    }
}
