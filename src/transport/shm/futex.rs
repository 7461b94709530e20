//! Futex wait/wake on words in shared memory, and the per-rank doorbell
//! that a waiting rank sleeps on.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
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

/// A rank's doorbell: peers bump `seq` after giving it data or ring space,
/// and only pay for a wake-up syscall when the rank is actually asleep.
#[repr(C, align(64))]
pub struct Doorbell {
    seq: AtomicU32,
    waiters: AtomicU32,
}

impl Doorbell {
    /// Announces a change to the owner of this doorbell.
    pub fn ring(&self) {
        self.seq.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) > 0 {
            wake_all(&self.seq);
        }
    }

    /// The current sequence; pass it to `sleep` after finding nothing to do.
    pub fn seq(&self) -> u32 {
        self.seq.load(SeqCst)
    }

    /// Sleeps until the doorbell rings after `seen` was read, or `timeout`.
    /// The caller must have re-checked its work after reading `seen`.
    pub fn sleep(&self, seen: u32, timeout: Duration) {
        self.waiters.fetch_add(1, SeqCst);
        if self.seq.load(SeqCst) == seen {
            wait(&self.seq, seen, timeout);
        }
        self.waiters.fetch_sub(1, SeqCst);
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
            std::thread::sleep(Duration::from_millis(50));
            b2.ring();
        });
        let start = Instant::now();
        let seen = bell.seq();
        while bell.seq() == seen {
            bell.sleep(seen, Duration::from_secs(10));
        }
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
        bell.sleep(7, Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(15));
    }
}
