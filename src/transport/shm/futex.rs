//! Futex wait/wake on words in shared memory, and the per-rank doorbell
//! that a waiting rank sleeps on.

use std::sync::atomic::{fence, AtomicU32, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout`.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; the
    // futex is shared (no FUTEX_PRIVATE_FLAG) because other processes map it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every sleeper on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: as in `wait`; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// A rank's doorbell (an eventcount): peers ring it after giving the rank
/// data or ring space, and pay for more than a shared load (and a fence,
/// see `Segment::fence_for_wake`) only when the rank has announced that it
/// is about to sleep.
#[repr(C, align(64))]
pub struct Doorbell {
    seq: AtomicU32,
    waiters: AtomicU32,
}

impl Doorbell {
    /// Announces a change to the owner. Call after publishing the change.
    pub fn ring(&self) {
        // Pairs with the fence in `prepare`: either the owner sees our data
        // in its last check, or we see it registered and wake it.
        fence(SeqCst);
        if self.waiters.load(Relaxed) > 0 {
            self.seq.fetch_add(1, SeqCst);
            wake_all(&self.seq);
        }
    }

    /// `ring` for a caller that has already ordered what it published
    /// before this load: a SeqCst fence, or `Segment::fence_for_wake`
    /// where sleepers run the barrier instead (also for ringing several
    /// doorbells after one fence).
    pub fn ring_fenced(&self) {
        if self.waiters.load(Relaxed) > 0 {
            self.seq.fetch_add(1, SeqCst);
            wake_all(&self.seq);
        }
    }

    /// Owner: registers as a sleeper (through `Segment::prepare_sleep`,
    /// which counts the segment's sleepers as well). Re-check for work
    /// after this, then either `sleep` or `cancel` (through the segment's
    /// `sleep` and `cancel_sleep`).
    pub(super) fn prepare(&self) -> u32 {
        let seen = self.seq.load(SeqCst);
        self.waiters.fetch_add(1, SeqCst);
        fence(SeqCst);
        seen
    }

    /// Owner: found work after `prepare`; does not sleep.
    pub(super) fn cancel(&self) {
        self.waiters.fetch_sub(1, SeqCst);
    }

    /// Owner: sleeps until rung after `prepare` returned `seen`, or `timeout`.
    /// Returns whether it was rung since `prepare` (false: the timeout
    /// passed, or the futex returned early, with no ring).
    pub(super) fn sleep(&self, seen: u32, timeout: Duration) -> bool {
        if self.seq.load(SeqCst) == seen {
            wait(&self.seq, seen, timeout);
        }
        let rung = self.seq.load(SeqCst) != seen;
        self.waiters.fetch_sub(1, SeqCst);
        rung
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn ring_wakes_sleeper() {
        let bell = Arc::new(Doorbell {
            seq: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
        });
        let b2 = bell.clone();
        let t = std::thread::spawn(move || {
            // A ring before the owner registers is (correctly) not a wake-up.
            while b2.waiters.load(SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(20));
            b2.ring();
        });
        let start = Instant::now();
        let seen = bell.prepare();
        assert!(
            bell.sleep(seen, Duration::from_secs(10)),
            "woken by the ring"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
    }

    #[test]
    fn sleep_times_out() {
        let bell = Doorbell {
            seq: AtomicU32::new(7),
            waiters: AtomicU32::new(0),
        };
        let start = Instant::now();
        let seen = bell.prepare();
        assert_eq!(seen, 7);
        assert!(!bell.sleep(seen, Duration::from_millis(20)), "nobody rang");
        assert!(start.elapsed() >= Duration::from_millis(15));
    }
}
