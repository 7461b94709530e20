//! Short scheduler slices while processes outside the job compete for the
//! cores that this host's ranks share.
//!
//! Where ranks outnumber cores, a waiting rank hands its core over with
//! `sched_yield` so that a rank of the same core can run. Linux's EEVDF
//! scheduler (6.6 and later) then picks the runnable task with the
//! earliest virtual deadline; a process outside the job that never yields
//! (a busy loop, an OpenMP thread spinning at a barrier, a compiler) holds
//! one of the core's tasks and, once picked, keeps the core for its whole
//! slice (about 3 ms here). A call that needs every rank of a core to run
//! then waits a slice or more at each hand-over. 4 ranks on 2 cores beside
//! one busy process, 8 B, ms a call: allreduce 1.94, barrier 1.97,
//! sendrecv 1.90 (Open MPI's allreduce 2.77 beside two); 3 ranks beside
//! two, allreduce 1.68-1.82.
//!
//! A thread may ask for a shorter slice (`sched_attr.sched_runtime`, Linux
//! 6.12 and later; 100 us the least, older kernels ignore it). Its
//! deadlines then come sooner, and the scheduler hands it the core back
//! within its short slice instead of the other process's long one: the
//! same runs, 8 B, us a call: 4 ranks beside one, allreduce 60-80, barrier
//! 60-100, sendrecv 29-42; 3 ranks beside two, allreduce 57-60; 8 ranks
//! beside two, allreduce 99-160 (1.2-2.0 ms before). Asked for always, it
//! cost little at 3 and 4 ranks without other processes, but 8 ranks on 2
//! cores lost: sendrecv 8 B 4.81 against 5.67 us, 2 MiB alltoall 2021
//! against 2323, where each core's four ranks cut each other's turns
//! short. So a rank asks only once it has seen the competition: a yield
//! that kept it off its core for `SLOW_YIELD_US` or longer in which no
//! other rank of its CPU ran (`foreign`, from the ranks' turn words,
//! `Segment::turn`), `SLOW_YIELDS` times within `SLOW_WITHIN_US`. It goes
//! back to the kernel's default after `SHORT_FOR_US`, and asks again if
//! the competition is still there. Without other processes no rank asked
//! in runs of every collective from 8 B to 8 MiB at 4 and 8 ranks on 2
//! cores; counting the turns cost 1-3% of the small lockstep calls there
//! (4 ranks, 8 B, alternated, 8 rounds: allreduce 2.78 against 2.86 us,
//! barrier 2.52 / 2.56, sendrecv 2.21 / 2.25; 8 ranks sendrecv 0.99-1.11
//! of it across sets).

use crate::param::{debug_log, DebugLevel};

/// The slice asked for while other processes compete: the least a normal
/// task may ask for.
pub const SHORT_NS: u64 = 100_000;

/// A yield that kept this rank off its core this long, while no other rank
/// of the host ran there, counts as competition. A process outside the job
/// held the core meanwhile; another rank's turn does not count (it is
/// seen, `Engine::yield_core`), however long its copy.
pub const SLOW_YIELD_US: u32 = 500;

/// Clock units (`stamp`) below which a yield cannot reach `SLOW_YIELD_US`
/// on a clock of 1 GHz or more (`SLOW_YIELD_US` x 1000 / 1024): shorter
/// ones are passed over without converting.
pub const SLOW_YIELD_FLOOR: u32 = SLOW_YIELD_US * 1000 / 1024;

/// Slow yields within `SLOW_WITHIN_US` that make a rank ask for short slices:
/// more than a rare short-lived process (a kernel worker, a cron job) makes.
pub const SLOW_YIELDS: u8 = 4;

/// See `SLOW_YIELDS`, microseconds.
pub const SLOW_WITHIN_US: u32 = 200_000;

/// How long a rank keeps its short slices before it goes back to the
/// default and looks again: with the competition still there, four slow
/// yields (a few ms) bring them back, under 1% of the time.
pub const SHORT_FOR_US: u32 = 1_000_000;

/// `FERROCOLL_SLICE`: when a rank asks for short slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Once it has seen other processes compete for its core (where ranks
    /// outnumber cores).
    Auto,
    /// Always where ranks outnumber cores.
    Short,
    /// Never.
    Off,
}

impl Mode {
    /// Parses the variable's value (`auto` for anything unknown).
    pub fn parse(v: Option<&str>) -> Mode {
        match v.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("short" | "on" | "1") => Mode::Short,
            Some("off" | "0") => Mode::Off,
            _ => Mode::Auto,
        }
    }
}

/// One rank's watch: its slow yields and whether it has short slices.
#[derive(Debug)]
pub struct Watch {
    mode: Mode,
    /// Whether this rank watches at all (ranks outnumber cores).
    on: bool,
    /// The thread given short slices, and since when (`stamp`).
    short: Option<(libc::pid_t, u32)>,
    /// Slow yields seen since `first_slow` (`stamp`).
    slow: u8,
    first_slow: Option<u32>,
    /// `stamp` units a microsecond, as last measured (`Rate`).
    per_us: f64,
    rate: Rate,
}

impl Watch {
    /// A watch under `mode`, idle until `crowded`.
    pub fn new(mode: Mode) -> Watch {
        Watch {
            mode,
            on: false,
            short: None,
            slow: 0,
            first_slow: None,
            per_us: 1.0,
            rate: Rate::start(),
        }
    }

    /// Whether yields are to be timed for `yielded`.
    #[inline]
    pub fn watching(&self) -> bool {
        self.on && self.mode == Mode::Auto
    }

    /// Ranks outnumber cores (or no longer do): `Mode::Short` asks for
    /// short slices at once, `Mode::Auto` starts watching.
    pub fn crowded(&mut self, crowded: bool) {
        self.on = crowded;
        match (crowded, self.mode, self.short) {
            (true, Mode::Short, None) => self.ask(stamp()),
            (false, _, Some(_)) => self.give_back(),
            _ => {}
        }
    }

    /// After a yield that ended at `now` (`stamp`) and in which no rank
    /// of this CPU ran for `foreign` clock units (`foreign`).
    pub fn yielded(&mut self, now: u32, foreign: u32) {
        if let Some((_, since)) = self.short {
            if f64::from(elapsed(since, now)) >= f64::from(SHORT_FOR_US) * self.per_us {
                self.give_back();
            }
            return;
        }
        if foreign < SLOW_YIELD_FLOOR {
            return;
        }
        self.per_us = self.rate.per_us();
        if f64::from(foreign) < f64::from(SLOW_YIELD_US) * self.per_us {
            return;
        }
        let within = f64::from(SLOW_WITHIN_US) * self.per_us;
        match self.first_slow {
            Some(t) if f64::from(elapsed(t, now)) <= within => self.slow += 1,
            _ => {
                self.first_slow = Some(now);
                self.slow = 1;
            }
        }
        if self.slow >= SLOW_YIELDS {
            self.ask(now);
        }
    }

    /// Asks for short slices for the calling thread; where the kernel
    /// refuses (or the thread runs under a real-time or idle policy, which
    /// is left alone), stops watching.
    fn ask(&mut self, now: u32) {
        self.per_us = self.rate.per_us();
        let tid = current_tid();
        if set_slice(tid, SHORT_NS) {
            debug_log(DebugLevel::Info, || {
                "other processes compete for this rank's core: asking for 100 us slices".into()
            });
            self.short = Some((tid, now));
        } else {
            self.mode = Mode::Off;
        }
        self.slow = 0;
        self.first_slow = None;
    }

    /// Back to the kernel's default slice.
    fn give_back(&mut self) {
        if let Some((tid, _)) = self.short.take() {
            set_slice(tid, 0);
        }
    }

    /// Whether this rank has short slices now.
    pub fn short(&self) -> bool {
        self.short.is_some()
    }
}

/// The clock turns are counted on, in units of 1024 ticks (wrapping): the
/// time-stamp counter on x86-64 where the kernel keeps time with it (then
/// one counter for every core of the host, read in about 12 ns against
/// 29 for `clock_gettime`; two clock reads around every yield cost 3-5%
/// of a 4-rank allreduce of 8 B with `clock_gettime`, about 1% without
/// them), else `CLOCK_MONOTONIC` nanoseconds.
#[inline]
pub fn stamp() -> u32 {
    (ticks() >> 10) as u32
}

#[inline]
fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if tsc_clock() {
        // SAFETY: `rdtsc` has no preconditions and changes nothing.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    mono_ns()
}

/// Whether the kernel keeps time with the time-stamp counter (so that it
/// runs at one rate, alike on every core). Read once.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn tsc_clock() -> bool {
    static TSC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TSC.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    })
}

/// `CLOCK_MONOTONIC` in nanoseconds.
fn mono_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a writable `timespec`; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The rate of `stamp`, measured against `CLOCK_MONOTONIC` from the
/// moment a watch starts.
#[derive(Clone, Copy, Debug)]
struct Rate {
    ns: u64,
    ticks: u64,
    /// A rate set by a test.
    fixed: Option<f64>,
}

impl Rate {
    fn start() -> Rate {
        Rate {
            ns: mono_ns(),
            ticks: ticks(),
            fixed: None,
        }
    }

    /// `stamp` units a microsecond; 1 until a microsecond has passed.
    fn per_us(&self) -> f64 {
        if let Some(r) = self.fixed {
            return r;
        }
        let ns = mono_ns().saturating_sub(self.ns);
        if ns < 1_000 {
            return 1.0;
        }
        ticks().saturating_sub(self.ticks) as f64 / 1024.0 / (ns as f64 / 1_000.0)
    }
}

/// Units from `a` to `b` on the wrapping clock (`stamp`); 0 where `b`
/// comes first.
pub fn elapsed(a: u32, b: u32) -> u32 {
    let d = b.wrapping_sub(a);
    if d > u32::MAX / 2 {
        0
    } else {
        d
    }
}

/// A rank's `Segment::turn` word: `busy` clock units (`stamp`) of past
/// turns, and when its current one began (`None`: it has handed its core
/// over).
pub fn turn_word(busy: u32, back: Option<u32>) -> u64 {
    u64::from(busy) << 32 | u64::from(back.map_or(0, |b| b.max(1)))
}

/// The clock units a `turn_word` says its rank has run by `now`, its
/// current turn included (wrapping).
pub fn ran_by(word: u64, now: u32) -> u32 {
    let (busy, back) = ((word >> 32) as u32, word as u32);
    if back == 0 {
        busy
    } else {
        busy.wrapping_add(elapsed(back, now))
    }
}

/// The clock units of a yield from `start` to `end` in which none of
/// the ranks of this CPU ran, from the sums of their `ran_by` at either
/// end: the time a process outside the job held the core (or it idled,
/// which a yield does not do while another task is runnable).
pub fn foreign(start: u32, end: u32, before: u32, after: u32) -> u32 {
    elapsed(start, end).saturating_sub(elapsed(before, after))
}

impl Drop for Watch {
    /// Leaves the thread with the kernel's default slice (at
    /// `MPI_Finalize`, as the engine goes).
    fn drop(&mut self) {
        self.give_back();
    }
}

/// The calling thread's id.
fn current_tid() -> libc::pid_t {
    // SAFETY: `gettid` takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Asks the kernel for slices of `ns` (0: its default) for thread `tid`
/// of this process, keeping its policy and nice value; false where it
/// refuses, or where the thread's policy is neither `SCHED_OTHER` nor
/// `SCHED_BATCH`.
pub fn set_slice(tid: libc::pid_t, ns: u64) -> bool {
    const RESET_ON_FORK: u64 = 1;
    let Some(mut a) = sched_attr(tid) else {
        return false;
    };
    let fair = [libc::SCHED_OTHER, libc::SCHED_BATCH].map(|p| p as u32);
    if !fair.contains(&a.sched_policy) {
        return false;
    }
    a.sched_runtime = ns;
    a.sched_flags &= RESET_ON_FORK;
    // SAFETY: `a` is a valid `sched_attr` of `a.size` bytes.
    let set = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            &a as *const libc::sched_attr,
            0,
        )
    };
    set == 0
}

/// Thread `tid`'s scheduling attributes (`sched_getattr`), with `size`
/// set to the struct's; None where the kernel refuses.
fn sched_attr(tid: libc::pid_t) -> Option<libc::sched_attr> {
    // SAFETY: all zeroes is a valid `sched_attr`.
    let mut a: libc::sched_attr = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::sched_attr>() as libc::c_uint;
    // SAFETY: `a` is a writable `sched_attr` of `size` bytes.
    let got = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut libc::sched_attr,
            size,
            0,
        )
    };
    a.size = size;
    (got == 0).then_some(a)
}

/// The slice the kernel reports for thread `tid` (`sched_runtime`), for
/// tests.
#[cfg(test)]
pub fn slice_of(tid: libc::pid_t) -> Option<u64> {
    sched_attr(tid).map(|a| a.sched_runtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` with the id and the reported slice of a fresh thread (whose
    /// slices it may change), or skips where `sched_getattr` is missing.
    fn on_own_thread(f: impl FnOnce(libc::pid_t, u64) + Send + 'static) {
        std::thread::spawn(|| {
            let tid = current_tid();
            let Some(default) = slice_of(tid) else {
                eprintln!("skipped: no sched_getattr here");
                return;
            };
            f(tid, default);
        })
        .join()
        .unwrap();
    }

    /// `SLOW_YIELDS` slow yields within `SLOW_WITHIN_US` give short slices; fast
    /// ones, or slow ones spread out, do not; after `SHORT_FOR_US` the
    /// default comes back. Fails if any of these is counted otherwise.
    #[test]
    fn short_slices_follow_slow_yields() {
        on_own_thread(|tid, default| {
            let slow = SLOW_YIELD_US;
            let mut w = Watch::new(Mode::Auto);
            w.rate.fixed = Some(1.0); // a unit a microsecond
            w.crowded(true);
            assert!(w.watching());
            let t0 = u32::MAX - 5_000; // the clock wraps meanwhile
            for i in 0..10 {
                w.yielded(t0.wrapping_add(i * 1_000), slow - 1);
                w.yielded(t0.wrapping_add(i * 1_000), SLOW_YIELD_FLOOR - 1);
            }
            assert!(!w.short(), "fast yields counted");
            for i in 1..=5 {
                w.yielded(t0.wrapping_add(i * 2 * SLOW_WITHIN_US), slow);
            }
            assert!(!w.short(), "slow yields far apart counted");
            let t1 = t0.wrapping_add(10_000_000);
            w.yielded(t1, slow);
            w.yielded(t1 + 1_000, slow * 4);
            w.yielded(t1 + 2_000, slow);
            assert!(!w.short());
            w.yielded(t1 + 3_000, slow);
            if !w.short() {
                // A kernel or container that refuses: the watch stops.
                assert!(!w.watching());
                eprintln!("skipped: sched_setattr refused");
                return;
            }
            // Kernels before 6.12 accept the value without keeping it.
            let now = slice_of(tid).unwrap();
            assert!(now == SHORT_NS || now == default, "slice {now}");
            w.yielded(t1 + SHORT_FOR_US / 2, slow * 4);
            assert!(w.short());
            w.yielded(t1 + SHORT_FOR_US * 2, 0);
            assert!(!w.short(), "short slices kept past SHORT_FOR_US");
            assert_eq!(slice_of(tid), Some(default));
        });
    }

    /// `Mode::Short` asks at once where ranks outnumber cores and gives the
    /// slices back when they no longer do; `Mode::Off` never watches.
    #[test]
    fn modes_short_and_off() {
        on_own_thread(|tid, default| {
            let mut w = Watch::new(Mode::Short);
            w.crowded(true);
            assert!(!w.watching());
            if w.short() {
                w.crowded(false);
                assert!(!w.short());
                assert_eq!(slice_of(tid), Some(default));
            }
            let mut off = Watch::new(Mode::Off);
            off.crowded(true);
            assert!(!off.watching() && !off.short());
            assert_eq!(Mode::parse(Some(" SHORT ")), Mode::Short);
            assert_eq!(Mode::parse(Some("off")), Mode::Off);
            assert_eq!(Mode::parse(Some("bogus")), Mode::Auto);
            assert_eq!(Mode::parse(None), Mode::Auto);
        });
    }

    /// A yield counts only the time no rank of its CPU ran: a mate's
    /// closed turns and the part of its open turn inside the yield are
    /// taken off, across the clock's wrap. Fails if `ran_by` or `foreign`
    /// counts a mate's time twice, not at all, or before the yield.
    #[test]
    fn foreign_time_leaves_out_the_mates_turns() {
        let s = u32::MAX - 100; // the yield began 100 us before the wrap
        let e = s.wrapping_add(2_000);
        // A mate with 7 us of turns, off its core at the start; it ran
        // 300 us and is in a turn since 1_500 us into the yield.
        let before = ran_by(turn_word(7, None), s);
        let after = ran_by(turn_word(307, Some(s.wrapping_add(1_500))), e);
        assert_eq!(after.wrapping_sub(before), 800);
        assert_eq!(foreign(s, e, before, after), 1_200);
        // In a turn at the start (begun 50 us before), none since: its
        // time before the yield is not counted.
        let before = ran_by(turn_word(10, Some(s.wrapping_sub(50))), s);
        let after = ran_by(turn_word(60, None), e);
        assert_eq!(foreign(s, e, before, after), 2_000);
        // A mate that ran longer than the yield (clock skew): none foreign.
        assert_eq!(foreign(s, e, 0, 5_000), 0);
        assert_eq!(elapsed(e, s), 0);
        assert_eq!(turn_word(3, Some(0)) as u32, 1);
    }
}
