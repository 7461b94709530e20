//! Whether a large call reads its peers' buffers in place (`coll::pull`)
//! or goes the other way (`coll::stream`, the slots or messages): found by
//! timing both, not fixed.
//!
//! Which way wins depends on how the host runs the cores at the moment:
//! on the 2-vCPU guests this was built on, a cache line's round trip
//! between the cores takes 100-130 ns for minutes, then about 500 ns
//! (`transport::shm::far`); on an Intel guest earlier, 318-335 ns always.
//! A stream hands each byte from one core's cache to the other's twice
//! (into a slot, out of it), cheap while the cores are near; a pull copies
//! once in the kernel, which pins the pages first. 2 ranks, `-t`, 3
//! alternated runs each, us, streamed / pulled: near (105 ns) allreduce
//! 128 KiB 7.0 / 14.8, 512 KiB 29.6 / 48.1, 2 MiB 138 / 184, 8 MiB 898 /
//! 1010; far (530 ns) allreduce 128 KiB 27.6 / 24.7, 2 MiB 419 / 350, 32
//! MiB 8574 / 6310, bcast 2 MiB 296 / 218, gather 512 KiB 62.3 / 19.4,
//! reduce 2 MiB 297 / 336, reduce_scatter 32 MiB 5781 / 4056. No fixed
//! threshold serves both states, and the far watch (which times a rank's
//! own cached writes) did not see this far state from a streamed
//! allreduce.
//!
//! So where the size says to pull (`select::pull`), each collective at
//! each size (by powers of two) runs in rounds (`round`): the first
//! `trials` calls pull, the next `trials` do not, and rank 0 notes when
//! each of them begins (and so when the one before ended); in the next
//! call, rank 0 tells the others (a one-byte broadcast through the slots)
//! whether not pulling had the shorter time from one call's start to the
//! next's (`Gaps`) by `MARGIN`; the rest of the round goes the way it
//! said. Every member counts calls alike, so all take the same way in
//! every call, and only one call in a round asks anything. A call's own
//! length on one rank would not do: it holds whatever the rank waited for
//! its peers to arrive, which depends on how the call before it ended for
//! each of them (trials timed so, alternating the two ways, chose the
//! slower way in cells of alltoall, gather and reduce).
//!
//! Where ranks outnumber cores too, 4 ranks on 2 cores, `-t`, 3
//! alternated runs, paired, timed / by size alone: far, allgather 16 MiB
//! 0.51, bcast 16 MiB 0.77, allreduce 1 MiB 0.87, alltoall 1 MiB 0.87,
//! reduce_scatter 1-4 MiB 0.87-0.91, the other cells from 256 KiB
//! 0.93-1.05; near, allreduce 1, 4, 16 MiB 0.57, 0.61, 0.72,
//! reduce_scatter 1-16 MiB 0.65-0.82, alltoall 1-16 MiB 0.69-0.88, bcast
//! and allgather 16 MiB 0.71 and 0.62, the other cells 0.98-1.02. Not the
//! rooted gather and reduce there, whose rank 0 misread the ways: gather
//! far 4 and 16 MiB 1.19 and 1.39; reduce near 256 KiB 1.26 (rank 0 timed
//! the pull at 83-115 us, 64 us alone), 1-16 MiB 1.06-1.08.

use std::time::{Duration, Instant};

/// Calls of each way that open a round of calls of `size` bytes (a power
/// of two), one way's in a row, each timed to the next call's start: from
/// 32 at 256 KiB and below to 4 from 2 MiB, so that the trials of large
/// calls end soon. The first quarter of each way's calls are not counted
/// (`WARMING`): after the other way's calls, a way's first few ran slow. 2
/// ranks near, allreduce 128 KiB: counting 7 of 8 trials, the stream's
/// mean was 15 us; counting 31 of 32, 8.2-8.4 us (8.5 us streamed alone).
pub fn trials(size: usize) -> u32 {
    ((8 << 20) / size.max(1)).clamp(4, 32) as u32
}

/// Calls in round `k` (from 0) of `trials` trials of each way: the
/// trials, the verdict's call, and the calls that follow it. The first
/// rounds are short, since their trials may meet pages the program has
/// not touched yet; from the fifth on, a trial of the slower way, at up
/// to 2.1 times the faster one's call (above), costs under 2% of a round.
pub fn round(trials: u32, k: u32) -> u32 {
    (4 * trials) << k.min(4)
}

/// Whether the trial at `at` in its way's run of `trials` counts.
fn counts(at: u32, trials: u32) -> bool {
    at > trials / WARMING
}

/// One in this many of a way's trials warm it up uncounted (`trials`).
const WARMING: u32 = 4;

/// How much faster than the choice by size the other way must be to be
/// taken instead: where both ways take about as long, noise would
/// otherwise pick either from round to round.
const MARGIN: f64 = 0.95;

/// A way's trials' times in one round, each from its start to the next
/// call's.
#[derive(Clone, Copy, Debug, Default)]
struct Gaps {
    n: u32,
    sum: Duration,
    max: Duration,
}

impl Gaps {
    fn add(&mut self, d: Duration) {
        self.n += 1;
        self.sum += d;
        self.max = self.max.max(d);
    }

    /// The mean without the longest (a lost core or a page fault in one
    /// trial says nothing of the way): the mean matters to a program, and
    /// the shortest alone favoured the way whose calls spread more (the
    /// stream while the cores were far apart: 18 us at its shortest,
    /// 27.6 us on average, against the pull's 24 us at both).
    fn estimate(&self) -> Option<Duration> {
        match self.n {
            0 => None,
            1 => Some(self.sum),
            n => Some((self.sum - self.max) / (n - 1)),
        }
    }
}

/// Smallest byte count (as `select::pull` counts it) that is timed; below
/// it the fixed choice stands (`select`), and pulls lost in both states.
pub const TUNED_FROM: usize = 128 << 10;

/// What one call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A trial of one way (true: pull); rank 0 times it.
    Try(bool),
    /// Rank 0 tells the others which way wins, and the call takes it.
    Ask,
    /// The way the round's verdict chose (true: pull).
    Keep(bool),
}

/// One collective at one size: calls so far, the last verdict, and rank
/// 0's timings in the current round.
#[derive(Clone, Debug)]
struct Size {
    coll: &'static str,
    log2: u32,
    calls: u32,
    /// Rounds begun, and the next call's place in the current one.
    rounds: u32,
    phase: u32,
    pull: bool,
    /// Trials' times, from each one's start to the next call's: `[not
    /// pulled, pulled]`.
    gaps: [Gaps; 2],
    /// The last call rank 0 timed: its number and when it began.
    began: Option<(u32, Instant)>,
}

/// A communicator's timings and verdicts, alike on every member but for
/// the timings (rank 0's alone count).
#[derive(Clone, Debug, Default)]
pub struct Tuner {
    sizes: Vec<Size>,
}

/// A handle to one collective and size in a `Tuner` (`next`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry(usize);

impl Tuner {
    /// The step for the next call of `coll` with `bytes`, counting it.
    /// `now` (rank 0 only) is when the call began, which is when the call
    /// before it of this collective and size ended, if it came right
    /// before: a trial's time is from its start to the next one's.
    pub fn next(
        &mut self,
        coll: &'static str,
        bytes: usize,
        now: Option<Instant>,
    ) -> (Entry, Step) {
        let log2 = bytes.max(1).next_power_of_two().trailing_zeros();
        let i = match self
            .sizes
            .iter()
            .position(|s| s.coll == coll && s.log2 == log2)
        {
            Some(i) => i,
            None => {
                self.sizes.push(Size {
                    coll,
                    log2,
                    calls: 0,
                    rounds: 0,
                    phase: 0,
                    pull: true,
                    gaps: Default::default(),
                    began: None,
                });
                self.sizes.len() - 1
            }
        };
        let s = &mut self.sizes[i];
        let n = trials(1 << log2);
        if let (Some(now), Some((call, then)), Some(last)) = (now, s.began, s.phase.checked_sub(1))
        {
            if call.wrapping_add(1) == s.calls && last < 2 * n && counts(last % n, n) {
                s.gaps[usize::from(last < n)].add(now.saturating_duration_since(then));
            }
        }
        if s.phase == round(n, s.rounds) {
            s.phase = 0;
            s.rounds = s.rounds.saturating_add(1);
        }
        let phase = s.phase;
        if phase == 0 {
            s.gaps = Default::default();
        }
        s.began = now.map(|t| (s.calls, t));
        s.phase += 1;
        s.calls = s.calls.wrapping_add(1);
        let step = match phase {
            p if p < 2 * n => Step::Try(p < n),
            p if p == 2 * n => Step::Ask,
            _ => Step::Keep(s.pull),
        };
        (Entry(i), step)
    }

    /// Rank 0's verdict for `entry`: whether to pull, where `fixed` is the
    /// choice by size: the other way where it was faster by `MARGIN`, else
    /// `fixed` (also where a way has no time yet).
    pub fn verdict(&self, entry: Entry, fixed: bool) -> bool {
        match self.timings(entry) {
            [Some(other), Some(pulled)] => {
                let (kept, rival) = if fixed {
                    (pulled, other)
                } else {
                    (other, pulled)
                };
                let switch = rival.as_secs_f64() < kept.as_secs_f64() * MARGIN;
                fixed != switch
            }
            _ => fixed,
        }
    }

    /// Rank 0's estimates for `entry` this round (`Gaps::estimate`): `[not
    /// pulled, pulled]`.
    pub fn timings(&self, entry: Entry) -> [Option<Duration>; 2] {
        self.sizes
            .get(entry.0)
            .map_or([None; 2], |s| s.gaps.map(|g| g.estimate()))
    }

    /// Takes `pull` as `entry`'s verdict until the next round.
    pub fn settle(&mut self, entry: Entry, pull: bool) {
        if let Some(s) = self.sizes.get_mut(entry.0) {
            s.pull = pull;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Runs `calls` calls of allreduce of 1 MiB on rank 0, the call `i`
    /// lasting `took(i)` ms, and returns their steps; `ask` answers the
    /// verdict's call.
    fn run(t: &mut Tuner, clock: &mut Instant, calls: u32, took: impl Fn(u32) -> u64) -> Vec<Step> {
        let mut steps = Vec::new();
        for i in 0..calls {
            let (entry, step) = t.next("allreduce", MB, Some(*clock));
            if step == Step::Ask {
                let v = t.verdict(entry, true);
                t.settle(entry, v);
            }
            *clock += ms(took(i));
            steps.push(step);
        }
        steps
    }

    #[test]
    fn a_round_tries_each_way_in_a_row_asks_once_then_keeps_the_verdict() {
        let (mut t, mut clock) = (Tuner::default(), Instant::now());
        let n = trials(MB);
        let steps = run(
            &mut t,
            &mut clock,
            round(n, 0),
            |i| if i < n { 5 } else { 3 },
        );
        let n = n as usize;
        assert!(steps[..n].iter().all(|s| *s == Step::Try(true)));
        assert!(steps[n..2 * n].iter().all(|s| *s == Step::Try(false)));
        assert_eq!(steps[2 * n], Step::Ask);
        assert!(
            steps[2 * n + 1..].iter().all(|s| *s == Step::Keep(false)),
            "not pulling was faster"
        );
        // The next round starts over with fresh timings, and is longer.
        let n = n as u32;
        let steps = run(
            &mut t,
            &mut clock,
            round(n, 1),
            |i| if i < n { 1 } else { 2 },
        );
        assert_eq!(steps[2 * n as usize], Step::Ask);
        assert!(steps[2 * n as usize + 1..]
            .iter()
            .all(|s| *s == Step::Keep(true)));
        assert_eq!(run(&mut t, &mut clock, 1, |_| 1), [Step::Try(true)]);
    }

    #[test]
    fn each_way_warms_up_uncounted() {
        let (mut t, mut clock) = (Tuner::default(), Instant::now());
        let n = trials(MB);
        // Each way's first quarter of calls long (they met the other
        // way's last), the rest short: only the short ones count.
        run(&mut t, &mut clock, 2 * n, |i| match i % n {
            at if !counts(at, n) => 100,
            _ if i < n => 4,
            _ => 3,
        });
        let (entry, step) = t.next("allreduce", MB, Some(clock));
        assert_eq!(step, Step::Ask);
        assert_eq!(t.timings(entry), [Some(ms(3)), Some(ms(4))]);
        assert!(!t.verdict(entry, true), "3 ms a call beats 4");
    }

    #[test]
    fn trials_shrink_as_calls_grow_and_rounds_lengthen() {
        assert_eq!(round(8, 0), 32);
        assert_eq!(round(8, 1), 64);
        assert_eq!(round(8, 4), 512);
        assert_eq!(round(8, 9), 512);
        assert_eq!(trials(128 << 10), 32);
        assert_eq!(trials(MB), 8);
        assert_eq!(trials(32 * MB), 4);
        assert!((0..4).all(|at| !counts(at, 16)) && counts(5, 16));
    }

    #[test]
    fn sizes_and_collectives_count_apart() {
        let mut t = Tuner::default();
        let (a, _) = t.next("allreduce", MB, None);
        let (b, _) = t.next("allreduce", MB - 8, None);
        let (c, _) = t.next("allreduce", MB + 8, None);
        let (d, sd) = t.next("bcast", MB, None);
        assert_eq!(a, b, "one power of two");
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert_eq!(sd, Step::Try(true), "bcast's own first call");
    }

    #[test]
    fn untimed_ranks_and_untimed_ways_leave_the_fixed_choice() {
        let mut t = Tuner::default();
        for _ in 0..2 * trials(MB) {
            t.next("reduce", MB, None);
        }
        let (entry, step) = t.next("reduce", MB, None);
        assert_eq!(step, Step::Ask);
        assert_eq!(t.timings(entry), [None, None]);
        assert!(t.verdict(entry, true));
        assert!(!t.verdict(entry, false));
    }

    #[test]
    fn a_call_not_timed_breaks_the_clock() {
        let (mut t, now) = (Tuner::default(), Instant::now());
        let n = trials(MB);
        for i in 0..2 * n {
            // The pulls' last call went untimed (not rank 0's clock, say):
            // neither its time nor the one before it counts.
            let at = (i != n - 1).then(|| now + ms(u64::from(i) * if i < n { 9 } else { 5 }));
            t.next("reduce", MB, at);
        }
        let (entry, _) = t.next("reduce", MB, Some(now + ms(u64::from(2 * n) * 5)));
        let [other, pulled] = t.timings(entry);
        assert_eq!(pulled, Some(ms(9)));
        assert!(other.is_some());
    }

    #[test]
    fn the_other_way_must_win_by_the_margin() {
        let mut t = Tuner::default();
        let (entry, _) = t.next("bcast", MB, None);
        t.sizes[entry.0].gaps[1].add(Duration::from_micros(100));
        t.sizes[entry.0].gaps[0].add(Duration::from_micros(97));
        assert!(t.verdict(entry, true), "3% faster: the pull stays");
        assert!(!t.verdict(entry, false), "3% slower: the stream stays");
        t.sizes[entry.0].gaps[0] = Gaps::default();
        t.sizes[entry.0].gaps[0].add(Duration::from_micros(90));
        assert!(!t.verdict(entry, true), "10% faster: taken");
    }

    #[test]
    fn the_estimate_leaves_out_the_longest_gap() {
        let mut g = Gaps::default();
        assert_eq!(g.estimate(), None);
        g.add(Duration::from_micros(10));
        assert_eq!(g.estimate(), Some(Duration::from_micros(10)));
        g.add(Duration::from_micros(500));
        g.add(Duration::from_micros(20));
        assert_eq!(g.estimate(), Some(Duration::from_micros(15)));
    }
}
