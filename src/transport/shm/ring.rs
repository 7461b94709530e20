//! A single-producer single-consumer byte ring in shared memory.
//!
//! `head` counts bytes ever written (only the producer stores it), `tail`
//! bytes ever read (only the consumer stores it); each sits on its own cache
//! line so the two sides do not false-share.

use crate::copy::copy;
use crossbeam::utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

/// Control words at the start of each ring.
#[repr(C)]
pub struct RingCtrl {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
}

/// Bytes a side copies before it publishes them (producer: `head`;
/// consumer: `tail`), so that the other side works on one chunk while this
/// side works on the next. Publishing only once per call, a message larger
/// than the ring crossed it in turns: the producer filled all the free
/// space, then the consumer emptied it while the producer waited. Alternated
/// 2-rank runs with 1 MiB rings, medians, us, one publication per call /
/// 256 KiB / 128 KiB / 64 KiB chunks (Open MPI): pingpong 4 MiB 395 / 170 /
/// 157 / 148 (348), 16 MiB 2409 / 1609 / 1507 / 1377 (2907); gather 16 MiB
/// 1679 / 1052 / 1015 / 948 (1545).
pub const CHUNK: usize = 64 * 1024;

/// Bytes the control block occupies before the data area.
pub const CTRL_BYTES: usize = std::mem::size_of::<RingCtrl>();

/// One direction of a shared-memory link.
pub struct Ring {
    ctrl: *const RingCtrl,
    data: *mut u8,
    cap: usize,
}

// SAFETY: the ring only touches shared memory through atomics and through
// byte ranges that the head/tail protocol gives exclusively to one side.
unsafe impl Send for Ring {}

impl Ring {
    /// Wraps the ring whose control block starts at `base`.
    ///
    /// # Safety
    /// `base` must point to `CTRL_BYTES + cap` bytes of zero-initialised or
    /// previously used ring memory that stays mapped while the ring lives,
    /// with one producer and one consumer in total.
    pub unsafe fn from_raw(base: *mut u8, cap: usize) -> Ring {
        Ring {
            ctrl: base as *const RingCtrl,
            // SAFETY: the caller guarantees `CTRL_BYTES + cap` bytes at base.
            data: unsafe { base.add(CTRL_BYTES) },
            cap,
        }
    }

    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: `ctrl` points into a mapping that outlives `self`.
        unsafe { &*self.ctrl }
    }

    /// Bytes the consumer may read now.
    pub fn readable(&self) -> usize {
        let c = self.ctrl();
        (c.head.load(Ordering::Acquire) - c.tail.load(Ordering::Relaxed)) as usize
    }

    /// Bytes the producer may write now.
    pub fn writable(&self) -> usize {
        let c = self.ctrl();
        self.cap - (c.head.load(Ordering::Relaxed) - c.tail.load(Ordering::Acquire)) as usize
    }

    /// Producer: copies as much of `src` as fits; returns the bytes written.
    /// Publishes every `CHUNK` bytes, so the consumer copies out one chunk
    /// while the producer copies in the next.
    pub fn write_some(&self, src: &[u8]) -> usize {
        let mut done = 0;
        loop {
            let n = (src.len() - done).min(self.writable()).min(CHUNK);
            if n == 0 {
                return done;
            }
            let head = self.ctrl().head.load(Ordering::Relaxed);
            self.put(head, &src[done..done + n]);
            self.ctrl().head.store(head + n as u64, Ordering::Release);
            done += n;
        }
    }

    /// Producer: writes `a` then `b` and publishes them together, if both
    /// fit; the consumer sees a small message whole at its first look.
    pub fn write_both(&self, a: &[u8], b: &[u8]) -> bool {
        if a.len() + b.len() > self.writable() {
            return false;
        }
        let head = self.ctrl().head.load(Ordering::Relaxed);
        self.put(head, a);
        self.put(head + a.len() as u64, b);
        self.ctrl()
            .head
            .store(head + (a.len() + b.len()) as u64, Ordering::Release);
        true
    }

    /// Copies `src` to stream position `pos` (not yet published; the caller
    /// checked it fits in the free space).
    fn put(&self, pos: u64, src: &[u8]) {
        let n = src.len();
        let at = (pos % self.cap as u64) as usize;
        let first = n.min(self.cap - at);
        // SAFETY: [at, at+first) and [0, n-first) lie inside the data area and
        // are free (the callers checked pos - tail + n <= cap), so the consumer
        // is not reading them.
        unsafe {
            copy(
                std::slice::from_raw_parts_mut(self.data.add(at), first),
                &src[..first],
            );
            copy(
                std::slice::from_raw_parts_mut(self.data, n - first),
                &src[first..n],
            );
        }
    }

    /// Consumer: gives up to `max` readable bytes to `f` as contiguous
    /// slices (in order), releasing each `CHUNK` as soon as it is read, so
    /// the producer refills it meanwhile. Returns the count.
    pub fn read_with(&self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut done = 0;
        loop {
            let n = (max - done).min(self.readable()).min(CHUNK);
            if n == 0 {
                return done;
            }
            let c = self.ctrl();
            let tail = c.tail.load(Ordering::Relaxed);
            let at = (tail % self.cap as u64) as usize;
            let first = n.min(self.cap - at);
            // SAFETY: the bytes in [tail, tail+n) were published by the
            // producer's Release store of head (observed by `readable`'s
            // Acquire load) and the producer does not touch them until tail
            // moves past them.
            unsafe {
                f(std::slice::from_raw_parts(self.data.add(at), first));
                if n > first {
                    f(std::slice::from_raw_parts(self.data, n - first));
                }
            }
            c.tail.store(tail + n as u64, Ordering::Release);
            done += n;
        }
    }

    /// Consumer: copies up to `dst.len()` readable bytes; returns the count.
    pub fn read_some(&self, dst: &mut [u8]) -> usize {
        let mut off = 0;
        self.read_with(dst.len(), |s| {
            copy(&mut dst[off..off + s.len()], s);
            off += s.len();
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_preserves_order() {
        let cap = 64;
        let mut mem = vec![0u64; (CTRL_BYTES + cap) / 8 + 16];
        // Align to the control block's alignment inside the buffer.
        let base = mem.as_mut_ptr() as *mut u8;
        let off = base.align_offset(std::mem::align_of::<RingCtrl>());
        assert!(off + CTRL_BYTES + cap <= mem.len() * 8);
        // SAFETY: the buffer is zeroed, large enough, and outlives the ring.
        let ring = unsafe { Ring::from_raw(base.add(off), cap) };
        let mut next_w = 0u8;
        let mut next_r = 0u8;
        for round in 0..200 {
            let chunk: Vec<u8> = (0..(round % 50) as u8)
                .map(|i| next_w.wrapping_add(i))
                .collect();
            let n = ring.write_some(&chunk);
            next_w = next_w.wrapping_add(n as u8);
            let mut out = vec![0u8; (round * 7) % 40];
            let m = ring.read_some(&mut out);
            for b in &out[..m] {
                assert_eq!(*b, next_r);
                next_r = next_r.wrapping_add(1);
            }
        }
        assert!(ring.readable() <= cap);
    }

    /// The consumer releases each chunk as soon as it has read it: the
    /// producer may refill it while the rest is still being read.
    #[test]
    fn reads_release_each_chunk() {
        let cap = 4 * CHUNK;
        let mut mem = vec![0u64; (CTRL_BYTES + cap) / 8 + 16];
        let base = mem.as_mut_ptr() as *mut u8;
        let off = base.align_offset(std::mem::align_of::<RingCtrl>());
        // SAFETY: the buffer is zeroed, large enough, and outlives the ring.
        let ring = unsafe { Ring::from_raw(base.add(off), cap) };
        let data: Vec<u8> = (0..3 * CHUNK).map(|i| (i % 251) as u8).collect();
        assert_eq!(ring.write_some(&data), data.len());
        let (mut free_seen, mut got) = (Vec::new(), Vec::new());
        let n = ring.read_with(usize::MAX, |s| {
            free_seen.push(ring.writable());
            got.extend_from_slice(s);
        });
        assert_eq!((n, &got), (data.len(), &data));
        assert_eq!(free_seen, [CHUNK, 2 * CHUNK, 3 * CHUNK]);
        assert_eq!(ring.writable(), cap);
    }
}
