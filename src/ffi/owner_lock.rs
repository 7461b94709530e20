//! A lock that costs the thread owning it no locked instruction: the MPI
//! state behind every export. An uncontended `Mutex` is two locked
//! instructions per call, and each waits for the call's stores (the slot
//! flag a peer is reading) to leave the store buffer. Alternated 2-rank
//! runs of 8-byte calls, mutex against this (and `Lane::run` inlined):
//! bcast 58-63 against 42-46 ns, allreduce 131-137 against 119-122 ns,
//! barrier 90-100 against 69-88 ns (Open MPI: 55, 150, 140).
//!
//! The owner (the thread that called `MPI_Init`) enters with a plain store
//! to `busy` and a load of `revoked`. The first other thread to want the
//! state sets `revoked` and calls `membarrier(PRIVATE_EXPEDITED)`, which
//! makes every running thread of the process pass a full barrier, so
//! either the owner sees `revoked` or that thread sees `busy` (the
//! asymmetric form of Dekker's handshake). It then waits for the owner to
//! leave, and from then on every thread, the owner too, takes the mutex.
//! Without `membarrier` (old kernels, some seccomp filters, Miri) no owner
//! is ever set and the mutex is all there is.

use crate::membarrier;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Why the state could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockError {
    /// A call panicked while holding the state, which may be inconsistent.
    Poisoned,
    /// A thread asked again from inside its own access (a callback).
    Reentered,
}

/// Data behind a lock that its owner thread takes without atomics.
pub struct OwnerLock<T> {
    data: UnsafeCell<T>,
    mutex: Mutex<()>,
    /// `pthread_self()` of the owner; 0 while there is none.
    owner: AtomicUsize,
    /// The owner is inside `with` without the mutex (written by the owner
    /// only).
    busy: AtomicBool,
    /// Another thread wanted the state: everyone takes the mutex now.
    revoked: AtomicBool,
    /// `pthread_self()` of the thread holding the mutex, 0 if none: a
    /// nested access is refused instead of deadlocking.
    holder: AtomicUsize,
    poisoned: AtomicBool,
}

// SAFETY: `data` is only reached inside `with`, which
// runs for one thread at a time (the owner's without the mutex while not
// revoked, everyone else's under it), so sharing the lock only moves `T`
// between threads.
unsafe impl<T: Send> Sync for OwnerLock<T> {}

#[inline]
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions and cannot fail.
    unsafe { libc::pthread_self() as usize }
}

/// The owner's unlocked access (`with`): on leaving, poisons the lock if
/// the access panicked and clears `busy`.
struct Leave<'a, T>(&'a OwnerLock<T>);

impl<T> Drop for Leave<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poisoned.store(true, Ordering::Relaxed);
        }
        // Publishes the owner's writes to a revoker waiting for it.
        self.0.busy.store(false, Ordering::Release);
    }
}

/// Access under the mutex to an `OwnerLock`'s data; ends when dropped.
struct Guard<'a, T> {
    lock: &'a OwnerLock<T>,
    _mutex: MutexGuard<'a, ()>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a guard is the one access to the data (see `enter_locked`).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes it unique.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.lock.poisoned.store(true, Ordering::Relaxed);
        }
        self.lock.holder.store(0, Ordering::Relaxed);
    }
}

impl<T> OwnerLock<T> {
    /// A lock with no owner yet.
    pub const fn new(t: T) -> Self {
        OwnerLock {
            data: UnsafeCell::new(t),
            mutex: Mutex::new(()),
            owner: AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            revoked: AtomicBool::new(false),
            holder: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Makes the calling thread the owner, if the kernel offers the barrier
    /// and no other thread has used the lock yet. Call while holding it.
    pub fn claim(&self) {
        if self.owner.load(Ordering::Relaxed) == 0
            && !self.revoked.load(Ordering::Relaxed)
            && membarrier::register_private()
        {
            self.owner.store(this_thread(), Ordering::Relaxed);
        }
    }

    /// Whether the calling thread takes the state without the mutex.
    #[inline]
    pub fn owned_here(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == this_thread() && !self.revoked.load(Ordering::Relaxed)
    }

    /// Runs `f` on the data, alone.
    ///
    /// The owner's path calls `f` in place rather than returning a guard:
    /// a `Result<Guard>` went through the stack, its variant written as one
    /// byte and read back in an 8-byte load, which the store buffer cannot
    /// forward. That load waited for every older store to reach the cache,
    /// among them the previous call's slot flag, whose line a peer was
    /// polling. The same held for closures passed down not inlined (their
    /// captures copied in 16-byte loads), so the export's path down to the
    /// call's body is inlined (`state::run`, `state::call_if`,
    /// `boundary::catch`, `lane::lane`). Alternated 2-rank runs of 8-byte
    /// calls, medians of 15 batches, ns, before / after (Open MPI in the same
    /// session): scatter 73-76 / 67.5-68 (72), bcast 60-63 / 57, gather
    /// 68.5-79 / 64-69.5, reduce 67-72 / 64-68; allreduce and barrier
    /// equal.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, LockError> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(LockError::Poisoned);
        }
        if self.owned_here() {
            if self.busy.load(Ordering::Relaxed) {
                return Err(LockError::Reentered);
            }
            self.busy.store(true, Ordering::Relaxed);
            // A revoker's membarrier turns this into a full barrier: it
            // sees `busy`, or this load sees `revoked`.
            compiler_fence(Ordering::SeqCst);
            if !self.revoked.load(Ordering::Relaxed) {
                // Not revoked after announcing `busy`: any other thread
                // waits for `busy` to clear before it touches the data
                // (see `revoke`), and `busy` was clear, so this is not a
                // nested access on this thread.
                let _leave = Leave(self);
                // SAFETY: as said above, this is the one access to the
                // data until `_leave` drops.
                return Ok(f(unsafe { &mut *self.data.get() }));
            }
            self.busy.store(false, Ordering::Release);
        }
        Ok(f(&mut *self.enter_locked()?))
    }

    /// Access for every thread but an unrevoked owner (see `with`).
    #[cold]
    #[inline(never)]
    fn enter_locked(&self) -> Result<Guard<'_, T>, LockError> {
        // Only this thread stores its own id here, so a match means it
        // holds the mutex already.
        let me = this_thread();
        if self.holder.load(Ordering::Relaxed) == me {
            return Err(LockError::Reentered);
        }
        let mutex = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        if self.owner.load(Ordering::Relaxed) != 0 && !self.revoked.load(Ordering::Relaxed) {
            self.revoke();
        }
        self.holder.store(me, Ordering::Relaxed);
        // Revoked (or never owned): every thread reaches the data under the
        // mutex, which this guard holds; the owner's last unlocked access
        // ended before `revoke` returned.
        Ok(Guard {
            lock: self,
            _mutex: mutex,
        })
    }

    /// Takes the state from its owner for good; waits for it to leave.
    fn revoke(&self) {
        self.revoked.store(true, Ordering::SeqCst);
        if !membarrier::private() {
            // Cannot happen once registered (`claim`). Should it, an owner
            // that missed `revoked` made its `busy` store before its load,
            // and a store leaves the store buffer within microseconds.
            std::thread::sleep(Duration::from_millis(1));
        }
        // The owner may be inside a blocking call; do not hold a core.
        let mut spins = 0u32;
        while self.busy.load(Ordering::Acquire) {
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A read-modify-write with a gap in which a racing thread would be
    /// seen (and its update lost).
    fn bump(v: &mut u64) {
        let x = *v;
        std::hint::black_box(&*v);
        for _ in 0..20 {
            std::hint::spin_loop();
        }
        *v = x + 1;
    }

    #[test]
    fn owner_and_others_exclude_each_other() {
        let lock = Arc::new(OwnerLock::new(0u64));
        lock.with(|_| lock.claim()).unwrap();
        let per = 20_000;
        let others: Vec<_> = (0..2)
            .map(|_| {
                let l = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..per {
                        l.with(bump).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..per {
            lock.with(bump).unwrap();
        }
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(lock.with(|v| *v).unwrap(), 3 * per);
        assert!(!lock.owned_here(), "another thread's use revokes the owner");
    }

    #[test]
    fn nested_owner_access_is_refused() {
        let lock = OwnerLock::new(1u32);
        lock.with(|_| lock.claim()).unwrap();
        if !lock.owned_here() {
            eprintln!("skipped: membarrier unavailable, the lock is a mutex only");
            return;
        }
        assert_eq!(
            lock.with(|_| lock.with(|_| ())),
            Ok(Err(LockError::Reentered))
        );
        assert_eq!(lock.with(|v| *v), Ok(1));
    }

    #[test]
    fn nested_access_under_the_mutex_is_refused() {
        // Never owned: every access takes the mutex.
        let lock = OwnerLock::new(2u32);
        assert_eq!(
            lock.with(|_| lock.with(|_| ())),
            Ok(Err(LockError::Reentered))
        );
        assert_eq!(lock.with(|v| *v), Ok(2));
    }

    #[test]
    fn a_panic_poisons() {
        let lock = OwnerLock::new(0u8);
        lock.with(|_| lock.claim()).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock.with(|_| panic!("inside")).unwrap()
        }));
        assert!(r.is_err());
        assert_eq!(lock.with(|_| ()), Err(LockError::Poisoned));
    }
}
