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
//! slow ones in a row make it write uncached; while it does, one chunk
//! every `PROBE_EVERY` goes cached and timed, and a fast one turns it back.
//! Each rank decides for itself: no rank waits for another's verdict.
//! Messages through the rings (from `TIMED_FROM` bytes) follow the same
//! watch (`comm::engine::write_watched`): their writer rewrites ring lines
//! the receiver has read, and slowed down even more (pingpong 1 MiB 35 us
//! in the usual state, 420-470 us far, 66-73 us far and uncached).

use crate::param::{debug_log, DebugLevel};
use std::time::{Duration, Instant};

/// Chunks shorter than this are not timed: their copy is too short to
/// tell the two states apart from a clock read.
pub const TIMED_FROM: usize = 16 * 1024;

/// Write rate, bytes per second, below which a chunk counts as slow (a
/// 64 KiB chunk that takes longer than 16.4 us). Collectives read their
/// source from memory, which the probe above did not: there, in the usual
/// state, the slowest chunks took 11-11.3 us (and a rare one 72), in the
/// far state 16-64 us.
const SLOW_BELOW: u128 = 4_000_000_000;

/// Slow chunks in a row that turn uncached writes on: one alone may be a
/// writer that lost its core or met a page fault in the middle of a copy.
const SLOW_IN_ROW: u8 = 3;

/// While writing uncached, a rank writes one chunk cached this often.
/// In the far state that chunk costs about 20 us more, 1% of the
/// interval; a passing far state is noticed within it.
pub const PROBE_EVERY: Duration = Duration::from_millis(2);

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
    /// When this rank last wrote a chunk cached while far.
    probed: Option<Instant>,
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

    /// Records a cached write of `bytes` that took `took` (one shorter
    /// than `TIMED_FROM` tells nothing and is ignored), and logs a change
    /// of state; `what` names the writes.
    pub fn record(&mut self, what: &str, bytes: usize, took: Duration) {
        if bytes < TIMED_FROM {
            return;
        }
        #[cfg(test)]
        {
            self.recorded += bytes;
        }
        if let Some(far) = self.observe(bytes, took) {
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
    /// state (true: far) where it changes.
    fn observe(&mut self, bytes: usize, took: Duration) -> Option<bool> {
        let slow = (bytes as u128) * 1_000_000_000 < SLOW_BELOW * took.as_nanos();
        self.slow_in_row = if slow {
            self.slow_in_row.saturating_add(1)
        } else {
            0
        };
        let far = if self.far {
            slow
        } else {
            self.slow_in_row >= SLOW_IN_ROW
        };
        if far == self.far {
            return None;
        }
        self.far = far;
        self.probed = None;
        Some(far)
    }
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

    #[test]
    fn two_slow_writes_in_a_row_turn_far_and_one_fast_turns_back() {
        let mut w = Watch::default();
        assert_eq!(w.observe(CHUNK, FAST), None);
        assert_eq!(w.observe(CHUNK, SLOW), None);
        assert_eq!(w.observe(CHUNK, FAST), None, "the run starts over");
        assert_eq!(w.observe(CHUNK, SLOW), None);
        assert_eq!(w.observe(CHUNK, SLOW), None);
        assert_eq!(w.observe(CHUNK, SLOW), Some(true));
        // A slow probe keeps it far; a fast one turns it back at once.
        assert_eq!(w.observe(CHUNK, SLOW), None);
        assert_eq!(w.observe(CHUNK, FAST), Some(false));
        assert_eq!(w.observe(CHUNK, SLOW), None);
        assert_eq!(w.observe(CHUNK, FAST), None);
    }

    #[test]
    fn the_threshold_lies_between_the_two_states() {
        let mut w = Watch::default();
        // 4 GB/s is 16.38 us for 64 KiB.
        let at = Duration::from_nanos;
        for _ in 0..4 {
            assert_eq!(w.observe(CHUNK, at(16_300)), None);
        }
        assert_eq!(w.observe(CHUNK, at(16_500)), None);
        assert_eq!(w.observe(CHUNK, at(16_500)), None);
        assert_eq!(w.observe(CHUNK, at(16_500)), Some(true));
        assert_eq!(w.observe(CHUNK, at(16_300)), Some(false));
        // Shorter chunks by their rate: 16 KiB in 4.5 us is 3.6 GB/s.
        w.observe(CHUNK / 4, at(4_500));
        w.observe(CHUNK / 4, at(4_500));
        assert_eq!(w.observe(CHUNK / 4, at(4_500)), Some(true));
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
            w.record("test", TIMED_FROM - 1, SLOW);
        }
        assert!(!w.far(), "short writes tell nothing");
        for _ in 0..3 {
            w.record("test", TIMED_FROM, SLOW * 16);
        }
        assert!(w.far());
        assert_eq!(w.plan(Mode::Auto), uncached, "far: uncached");
        assert_eq!(w.plan(Mode::Off), cached, "the mode wins");
    }

    #[test]
    fn writes_go_uncached_while_far_but_probe_now_and_then() {
        let mut w = Watch::default();
        assert!(!w.write_uncached(|| unreachable!("no clock while near")));
        for _ in 0..3 {
            w.observe(CHUNK, SLOW);
        }
        let t0 = Instant::now();
        assert!(w.write_uncached(|| t0));
        assert!(w.write_uncached(|| t0 + PROBE_EVERY / 2));
        assert!(!w.write_uncached(|| t0 + PROBE_EVERY), "a probe");
        assert_eq!(w.observe(CHUNK, SLOW), None, "still far");
        assert!(w.write_uncached(|| t0 + PROBE_EVERY + PROBE_EVERY / 2));
        assert!(!w.write_uncached(|| t0 + 2 * PROBE_EVERY + PROBE_EVERY / 2));
        assert!(w.far(), "probes leave it far");
        assert_eq!(w.observe(CHUNK, FAST), Some(false));
        assert!(!w.far());
        assert!(!w.write_uncached(|| unreachable!("near again")));
        // Far again later: the interval starts over.
        for _ in 0..3 {
            w.observe(CHUNK, SLOW);
        }
        let t1 = t0 + 10 * PROBE_EVERY;
        assert!(w.write_uncached(|| t1));
        assert!(!w.write_uncached(|| t1 + PROBE_EVERY));
    }
}
