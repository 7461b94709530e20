//! A single-producer single-consumer byte stream in shared memory: a ring
//! for bytes in bulk and a few posts for small writes.
//!
//! `head` counts ring bytes ever written (only the producer stores it),
//! `tail` ring bytes ever read (only the consumer stores it); each sits on
//! its own cache line so the two sides do not false-share. Each side keeps
//! the other's counter as it last loaded it and loads it again only when
//! that value shows no room (producer) or nothing to read (consumer): every
//! load of a line the other side has just written is a cache-line transfer.
//!
//! A small write that `write_both` takes whole (a header and a message of
//! up to 688 bytes) goes to the next free posts instead, when there are
//! enough: a post's sequence word, length and first bytes share a line, so
//! the consumer, watching that word, gets a small message in one line
//! transfer (through the ring it took three: `head`, then the bytes, and
//! `tail` on the way back). A post carries the ring position its write had
//! (`stamp`): the consumer reads the ring up to that position, then the
//! posts in their order, so the stream keeps the producer's order.
//! Alternated 2-rank runs, medians, us, ring only / with posts (Open MPI):
//! pingpong 8 B 0.299/0.167 (0.129), 64 B 0.402/0.176 (0.141), 128 B
//! 0.271-0.459/0.178 (0.148); at 4 ranks 8 B 0.421/0.215, 128 B
//! 0.793/0.235; collectives unchanged (they use the slots). Writes over
//! several posts, one post / up to five: 256 B 0.615/0.206 (0.142), 512 B
//! 0.300/0.255 (0.229), 1 KiB 0.367/0.270 (0.246).
//!
//! A post may keep an eager message's header in 16 bytes instead of 32
//! (`SHORT`; the consumer reads it back lengthened), so that a message of
//! up to 32 bytes shares the post's first line with it.

use super::demote;
use crate::copy::{copy_message, copy_uncached};
use crate::transport::frame::{lengthen, shorten, FRAME_BYTES, SHORT_BYTES};
use crossbeam::utils::CachePadded;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes of at most this many posts hand each post's lines to the shared
/// cache once written (`demote`), for the consumer to take from there.
/// Alternated 2-rank runs, medians of 6, us, without / with (one post for
/// up to 208 bytes): pingpong 128 B 0.257 / 0.216, 256 B 0.277 / 0.230,
/// 512 B 0.331-0.343 / 0.306-0.311; sendrecv 128 B 0.300 / 0.251, 256 B
/// 0.314 / 0.270, 512 B 0.381-0.402 / 0.350-0.372; halo 128 B 0.408 /
/// 0.340, 256 B 0.537 / 0.416, 512 B 0.639-0.695 / 0.540-0.561; 8-32 B
/// (one line) alike; 4 ranks on 2 cores pingpong 128 B 0.248 / 0.213,
/// sendrecv 8-128 B 0.95-0.98 / 0.90-0.93. Writes of five posts (1 KiB)
/// read alike with it, of nine (2 KiB) slower: pingpong 0.522 / 0.635,
/// halo 1.36 / 1.45. (Measured on an Intel host; `cldemote` does nothing
/// on the AMD one. Writes now take at most three posts, `POSTS_PER_WRITE`,
/// so every one demotes.)
const DEMOTE_POSTS: u64 = 3;

/// Posts per ring, used round-robin: room for ten of the longest writes
/// (`POSTS_PER_WRITE`; sized for three of nine posts), so that a sender
/// that runs ahead finds free posts for several small messages.
const POSTS: usize = 32;

/// Bytes a post holds: its four lines less the sequence word and the
/// stamp (a 32-byte header and 208 bytes of message in one post; the
/// first line holds the header's short form and 32 bytes of message, see
/// `SHORT`). Posts of two lines (messages up to 80 bytes in one) left
/// 128-byte pingpong on the ring at 0.44 us.
pub const POST_BYTES: usize = 256 - 16;

/// In a post's word: the post starts with a header in its short form
/// (`frame::shorten`), which stands for the first `FRAME_BYTES` of its
/// length. A post is written so only where that takes it one line less
/// (`saves_line`): a message of 17-32 bytes then arrives in one line
/// instead of two, one of 81-96 bytes in two instead of three. Alternated
/// 2-rank runs, medians of 6-10, us, before / after (Open MPI in the last
/// comparison): pingpong 24 B 0.234 / 0.175, 32 B 0.233-0.256 / 0.174-0.179
/// (0.281), 96 B 0.277 / 0.242, 160 B 0.293 / 0.268; sendrecv 32 B 0.282 /
/// 0.211; halo 24 B 0.460 / 0.317, 32 B 0.512 / 0.311 (0.392), 96 B 0.588 /
/// 0.464, 160 B 0.579 / 0.514. Sizes whose line count stays read alike
/// (8, 16, 48, 64, 80, 192 B). Short posts of every size lost where the
/// line count stayed: the message then starts 16 bytes earlier, and
/// pingpong 112-192 B read 0.32-0.34 against 0.29-0.30 us.
const SHORT: u64 = 1 << 15;

/// The length bits of a post's word.
const LEN_BITS: u64 = SHORT - 1;

/// Whether a post of `len` stream bytes (after the word and the stamp)
/// takes fewer lines with a short header.
fn saves_line(len: usize) -> bool {
    let at = std::mem::offset_of!(Post, bytes);
    (at + len).div_ceil(64) > (at + len - SAVED).div_ceil(64)
}

/// Bytes a short post saves.
const SAVED: usize = FRAME_BYTES - SHORT_BYTES;

/// Most posts one write may take: messages up to 688 bytes. Each post
/// costs the consumer a look at its word, but the consumer copies one
/// post while the producer writes the next, where through the ring it
/// waits for the whole message, and the producer takes the posts' lines
/// ahead (`Ring::take_ahead`). On an Intel host whose line round trip
/// took 267-288 ns, nine posts (2 KiB messages) won: five of 16 / nine of
/// 32, alternated, medians of 6-8, us: 2 ranks pingpong 2 KiB 0.862 /
/// 0.536 (MPICH 0.787), sendrecv 2 KiB 0.943 / 0.777 (0.859), halo 2 KiB
/// 1.413 / 1.366, 1 KiB alike; 4 ranks on 2 cores pingpong 2 KiB 0.917 /
/// 0.569, halo 2 KiB 5.41 / 4.94, sendrecv 1 KiB 1.69 / 1.46, 2 KiB 2.27
/// / 2.38 (on one whose round trip took half as long, eight did no better
/// at 1-2 KiB). On an AMD EPYC (Zen 4) host the ring won from 1 KiB,
/// whether its two vCPUs ran near (round trip 110-130 ns) or far (over
/// 500 ns): nine / three posts, alternated, paired, us, near (2 rounds;
/// 9 before at 2 KiB): pingpong 1 KiB 0.201 / 0.180, 2 KiB 0.293 / 0.213
/// (MPICH 0.203-0.210), sendrecv 1 KiB 0.271 / 0.220, 2 KiB 0.321 / 0.255,
/// halo 1 KiB 0.522 / 0.382, 2 KiB 0.671 / 0.457 (MPICH 0.406-0.410); far
/// (6 rounds): pingpong 1 KiB 0.784 / 0.841, 2 KiB 1.200 / 0.898,
/// sendrecv 1 KiB 1.043 / 0.889, 2 KiB 1.374 / 0.952, halo 1 KiB 1.477 /
/// 1.258, 2 KiB 2.094 / 1.546; 4 ranks on 2 cores, near, 9 rounds,
/// paired: 2 KiB 0.60-0.94, 1 KiB 0.97-1.06, 256-512 B alike. Two posts
/// (448 bytes) lost at 512 B (pingpong 0.186 against 0.149).
const POSTS_PER_WRITE: usize = 3;

/// Copies bytes `from..from + dst.len()` of `a` followed by `b` to `dst`.
fn copy_joined(dst: &mut [u8], a: &[u8], b: &[u8], from: usize) {
    let n = dst.len();
    let in_a = a.len().saturating_sub(from).min(n);
    let (to_a, to_b) = dst.split_at_mut(in_a);
    to_a.copy_from_slice(&a[from.min(a.len())..][..in_a]);
    let at_b = (from + in_a).saturating_sub(a.len());
    to_b.copy_from_slice(&b[at_b..at_b + to_b.len()]);
}

/// A small write, or one part of it: written by the producer while the
/// post is free, read by the consumer once `word` shows this round's
/// number.
#[repr(C, align(128))]
struct Post {
    /// `(number + 1) << 16 | length`, with `SHORT` where the header is
    /// short (the length counts it lengthened): the post holds write
    /// `number` (counted over all posts) once this shows it; stored last,
    /// with Release.
    word: AtomicU64,
    /// The ring's `head` when the write was made.
    stamp: AtomicU64,
    bytes: UnsafeCell<[u8; POST_BYTES]>,
}

impl Post {
    /// Hands the lines that its word, stamp and first `len` bytes take to
    /// the shared cache (`demote`), once written.
    fn demote(&self, len: usize) {
        let lines = (std::mem::offset_of!(Post, bytes) + len).div_ceil(64);
        demote::lines(self as *const Post as *const u8, lines);
    }
}

/// Control words at the start of each ring, then the posts.
#[repr(C)]
pub struct RingCtrl {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
    /// Posts the consumer has emptied (only it stores).
    freed: CachePadded<AtomicU64>,
    posts: [Post; POSTS],
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

/// One direction of a shared-memory link. The `Cell`s are this side's own
/// view (the ring is `Send`, not `Sync`: one thread drives a side).
pub struct Ring {
    ctrl: *const RingCtrl,
    data: *mut u8,
    cap: usize,
    /// The other side's ring counter as this side last loaded it: `tail`
    /// on the producer, `head` on the consumer (each only grows).
    seen: Cell<u64>,
    /// Producer: posts ever written; consumer: posts ever emptied.
    posts: Cell<u64>,
    /// Producer: `freed` as last loaded.
    freed_seen: Cell<u64>,
    /// Consumer: bytes of the current post already read.
    post_read: Cell<usize>,
}

// SAFETY: the ring only touches shared memory through atomics and through
// byte ranges (ring bytes, post bytes) that the head/tail and post protocols
// give exclusively to one side at a time.
unsafe impl Send for Ring {}

/// Where the consumer's next bytes come from.
enum Next {
    /// `n` ring bytes (before the next post, if one is waiting).
    Ring(usize),
    /// The rest of the post now due.
    Post(PostDue),
}

/// The post the consumer reads next.
#[derive(Clone, Copy)]
struct PostDue {
    /// Its bytes as they lie.
    bytes: *const u8,
    /// Its length in the stream (a short header counted lengthened).
    len: usize,
    /// Stream bytes of it already read.
    at: usize,
    /// Whether it starts with a short header (`SHORT`).
    short: bool,
}

impl PostDue {
    /// Hands stream bytes `at..at + n` of the post to `f`, in one piece or,
    /// across a short header's end, two (the header lengthened first).
    ///
    /// # Safety
    /// The post must be written (its word seen with Acquire) and not freed
    /// while `f` runs; `at + n <= self.len`.
    unsafe fn range(&self, at: usize, n: usize, mut f: impl FnMut(&[u8])) {
        let (mut at, end) = (at, at + n);
        let mut shift = 0;
        if self.short {
            if at < FRAME_BYTES {
                // SAFETY: a short post starts with the header's short form.
                let head = lengthen(unsafe { &*(self.bytes as *const [u8; SHORT_BYTES]) });
                let to = end.min(FRAME_BYTES);
                f(&head[at..to]);
                at = to;
            }
            shift = SAVED;
        }
        if at < end {
            // SAFETY: stream bytes from `FRAME_BYTES` on lie `shift` bytes
            // earlier in the post, inside its written bytes (the caller's
            // promise).
            f(unsafe { std::slice::from_raw_parts(self.bytes.add(at - shift), end - at) });
        }
    }
}

impl Ring {
    /// Wraps the ring whose control block starts at `base`.
    ///
    /// # Safety
    /// `base` must be 128-byte aligned and point to `CTRL_BYTES + cap`
    /// bytes that stay mapped while the ring lives: zero-initialised, or a
    /// ring whose earlier views are gone with every byte read. One producer
    /// and one consumer `Ring` at a time.
    pub unsafe fn from_raw(base: *mut u8, cap: usize) -> Ring {
        debug_assert_eq!(base as usize % 128, 0);
        let ctrl = base as *const RingCtrl;
        // SAFETY: the caller guarantees an aligned control block at base.
        let freed = unsafe { (*ctrl).freed.load(Ordering::Acquire) };
        Ring {
            ctrl,
            // SAFETY: the caller guarantees `CTRL_BYTES + cap` bytes at base.
            data: unsafe { base.add(CTRL_BYTES) },
            cap,
            seen: Cell::new(0),
            // Every post written so far was read: the next is `freed`.
            posts: Cell::new(freed),
            freed_seen: Cell::new(freed),
            post_read: Cell::new(0),
        }
    }

    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: `ctrl` points into a mapping that outlives `self`.
        unsafe { &*self.ctrl }
    }

    /// Consumer: where the next bytes come from. Ring bytes are read up to
    /// the stamp of the next post only; a post not yet visible was written
    /// after every ring byte that `head` showed before it was looked at, so
    /// `head` is loaded first.
    fn next(&self) -> Next {
        let c = self.ctrl();
        let tail = c.tail.load(Ordering::Relaxed);
        if self.seen.get() <= tail {
            self.seen.set(c.head.load(Ordering::Acquire));
        }
        let k = self.posts.get();
        let post = &c.posts[k as usize % POSTS];
        let word = post.word.load(Ordering::Acquire);
        if word >> 16 != k + 1 {
            return Next::Ring((self.seen.get() - tail) as usize);
        }
        let stamp = post.stamp.load(Ordering::Relaxed);
        if stamp == tail {
            if self.post_read.get() == 0 {
                self.ask_ahead(k, word);
            }
            return Next::Post(PostDue {
                bytes: post.bytes.get() as *const u8,
                len: (word & LEN_BITS) as usize,
                at: self.post_read.get(),
                short: word & SHORT != 0,
            });
        }
        // The ring bytes before the post were published before it.
        if self.seen.get() < stamp {
            self.seen.set(c.head.load(Ordering::Acquire));
        }
        Next::Ring((self.seen.get().min(stamp) - tail) as usize)
    }

    /// Consumer: asks for the lines of post `k`, whose `word` shows it
    /// written, past the first (which `word` came with), and for the next
    /// post's when `k` is full (most likely a message going on there, whose
    /// producer wrote or writes it now). Fetched by the copy out instead,
    /// each line came only once the message was matched, and the next
    /// post's only once this one was read. Alternated runs, medians of
    /// 6-8, us, before / after: 2 ranks pingpong 128 B 0.297 / 0.268, 512 B
    /// 0.401 / 0.346; sendrecv 128 B 0.390 / 0.331, 512 B 0.643 / 0.599;
    /// halo 128 B 0.593 / 0.498, 512 B 0.865 / 0.776 (Open MPI in the last
    /// comparison: pingpong 0.321 and 0.529, sendrecv 0.171-0.494, halo
    /// 0.525 and 1.175); 4 ranks on 2 cores pingpong 128 B 0.345 / 0.265,
    /// 512 B 0.421 / 0.344, halo 128 B 2.72 / 2.45. Messages in one line,
    /// or through the ring (then from 1169 bytes), read alike.
    fn ask_ahead(&self, k: u64, word: u64) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let posts = &self.ctrl().posts;
            let line = |post: &Post, i: usize| {
                // SAFETY: a prefetch never faults and changes no memory;
                // the line lies inside the post.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (post as *const Post as *const i8).wrapping_add(64 * i),
                    )
                }
            };
            let len = (word & LEN_BITS) as usize;
            let stored = if word & SHORT != 0 { len - SAVED } else { len };
            let this = &posts[k as usize % POSTS];
            for i in 1..(std::mem::offset_of!(Post, bytes) + stored).div_ceil(64) {
                line(this, i);
            }
            if len == POST_BYTES {
                let next = &posts[(k + 1) as usize % POSTS];
                for i in 0..std::mem::size_of::<Post>() / 64 {
                    line(next, i);
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (k, word);
    }

    /// Bytes the consumer may read now (from the ring, or from the post
    /// that comes first).
    pub fn readable(&self) -> usize {
        match self.next() {
            Next::Ring(n) => n,
            Next::Post(p) => p.len - p.at,
        }
    }

    /// Producer: whether the consumer held every post when this side last
    /// looked (`freed` as last loaded): it is at least `POSTS` messages
    /// behind, or gone. Reads no shared line, and may say so for one write
    /// in `POSTS` of a consumer that keeps up.
    pub fn backlogged(&self) -> bool {
        self.posts.get() - self.freed_seen.get() >= POSTS as u64
    }

    /// Bytes the producer may write now.
    pub fn writable(&self) -> usize {
        self.free_for(self.cap)
    }

    /// Producer: the free ring space, loading `tail` again only when the
    /// last value seen leaves less than `want` bytes free.
    fn free_for(&self, want: usize) -> usize {
        let head = self.ctrl().head.load(Ordering::Relaxed);
        let free = |tail: u64| self.cap.saturating_sub((head - tail) as usize);
        if free(self.seen.get()) < want {
            self.seen.set(self.ctrl().tail.load(Ordering::Acquire));
        }
        free(self.seen.get())
    }

    /// Producer: writes `a` then `b` into the next posts, one after the
    /// other, if they fit `POSTS_PER_WRITE` and that many are free.
    fn post(&self, a: &[u8], b: &[u8]) -> bool {
        let len = a.len() + b.len();
        if len <= POST_BYTES {
            return self.post_one(a, b);
        }
        let m = len.div_ceil(POST_BYTES) as u64;
        if m > POSTS_PER_WRITE as u64 {
            return false;
        }
        if !self.posts_free(m) {
            return false;
        }
        let (c, k) = (self.ctrl(), self.posts.get());
        let stamp = c.head.load(Ordering::Relaxed);
        for i in 0..m {
            let post = &c.posts[(k + i) as usize % POSTS];
            let from = i as usize * POST_BYTES;
            let n = POST_BYTES.min(len - from);
            // SAFETY: post `(k + i) % POSTS` is free (the consumer emptied
            // round k + i - POSTS, `freed` says) and only this producer
            // writes it until `word` shows round k + i; `n` fits its bytes.
            let d = unsafe { std::slice::from_raw_parts_mut(post.bytes.get() as *mut u8, n) };
            copy_joined(d, a, b, from);
            post.stamp.store(stamp, Ordering::Relaxed);
            post.word
                .store((k + i + 1) << 16 | n as u64, Ordering::Release);
            if m <= DEMOTE_POSTS {
                post.demote(n);
            }
        }
        self.posts.set(k + m);
        self.take_ahead(k + m, m);
        true
    }

    /// Producer: asks for the lines of the posts its next write takes from
    /// post `k` on, in a writable state (`prefetchw`): lines 1-3 of post
    /// `k` (not its first, where the consumer waits for that write) and
    /// all of those after it, as many posts in all as the write just made
    /// took (`m`; at least three). The consumer read them `POSTS` posts ago
    /// and still holds them, and each store to one waited for its copy to
    /// be taken back, in the write itself, and before the post's word could
    /// follow. Alternated runs, medians of 8, us, before / after: 2 ranks
    /// sendrecv 128 B 0.336 / 0.292, 256 B 0.423 / 0.322, 512 B 0.603-0.622 /
    /// 0.396-0.401, 1 KiB 0.808 / 0.548 (MPICH in the last comparison 0.457,
    /// 0.534 at 128 and 512 B); pingpong 128 B 0.263 / 0.246, 1 KiB 0.430 /
    /// 0.390; halo 128 B 0.518 / 0.455, 1 KiB 1.085 / 0.851; 4 ranks on 2
    /// cores sendrecv 128 B 1.133 / 1.054, 512 B 1.466 / 1.333. Messages in
    /// one line read alike. Doing the same for the ring bytes past `head`
    /// (messages of 2 KiB and more) gained 2-4% on pingpong and halo and
    /// lost as much on sendrecv; not done.
    fn take_ahead(&self, k: u64, m: u64) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let posts = &self.ctrl().posts;
            let own = |j: u64, from: usize| {
                let post = &posts[(k + j) as usize % POSTS] as *const Post as *const u8;
                for i in from..std::mem::size_of::<Post>() / 64 {
                    // SAFETY: a prefetch never faults and changes no
                    // memory; the line lies inside the post.
                    unsafe {
                        std::arch::asm!("prefetchw [{0}]", in(reg) post.wrapping_add(64 * i),
                            options(nostack, preserves_flags, readonly));
                    }
                }
            };
            own(0, 1);
            for j in 1..m.max(3) {
                own(j, 0);
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (k, m);
    }

    /// Producer: whether the next `m` posts are free, loading `freed` again
    /// only when the value last seen says they are not.
    #[inline(always)]
    fn posts_free(&self, m: u64) -> bool {
        let k = self.posts.get();
        if k + m - self.freed_seen.get() > POSTS as u64 {
            self.freed_seen
                .set(self.ctrl().freed.load(Ordering::Acquire));
        }
        k + m - self.freed_seen.get() <= POSTS as u64
    }

    /// `post` for a write that fits one post, the common case (a header
    /// and a message of up to 208 bytes), without the loop and the split
    /// over posts: about 75 instructions less a message. A header `a` with
    /// a short form goes in that (`SHORT`).
    fn post_one(&self, a: &[u8], b: &[u8]) -> bool {
        if !self.posts_free(1) {
            return false;
        }
        let (c, k) = (self.ctrl(), self.posts.get());
        let post = &c.posts[k as usize % POSTS];
        let len = a.len() + b.len();
        let short = if saves_line(len) { shorten(a) } else { None };
        let (a, flag) = match &short {
            Some(s) => (&s[..], SHORT),
            None => (a, 0),
        };
        // SAFETY: as in `post`: post `k % POSTS` is free and only this
        // producer writes it until `word` shows round k; `len` fits it.
        let d = unsafe {
            std::slice::from_raw_parts_mut(post.bytes.get() as *mut u8, a.len() + b.len())
        };
        let (to_a, to_b) = d.split_at_mut(a.len());
        to_a.copy_from_slice(a);
        to_b.copy_from_slice(b);
        post.stamp
            .store(c.head.load(Ordering::Relaxed), Ordering::Relaxed);
        post.word
            .store((k + 1) << 16 | flag | len as u64, Ordering::Release);
        post.demote(d.len());
        self.posts.set(k + 1);
        self.take_ahead(k + 1, 1);
        true
    }

    /// Producer: copies as much of `src` as fits (past the cache if
    /// `uncached`, see `transport::shm::far`); returns the bytes written.
    /// Publishes every `CHUNK` bytes, so the consumer copies out one chunk
    /// while the producer copies in the next.
    pub fn write_some(&self, src: &[u8], uncached: bool) -> usize {
        let mut done = 0;
        loop {
            let want = (src.len() - done).min(CHUNK);
            let n = want.min(self.free_for(want));
            if n == 0 {
                return done;
            }
            let head = self.ctrl().head.load(Ordering::Relaxed);
            self.put(head, &src[done..done + n], uncached);
            self.ctrl().head.store(head + n as u64, Ordering::Release);
            done += n;
        }
    }

    /// Producer: writes `a` then `b` and publishes them together, if both
    /// fit (in a post, else in the ring); the consumer sees a small message
    /// whole at its first look. `uncached` as for `write_some` (posts
    /// are always written cached: the consumer reads them at once).
    pub fn write_both(&self, a: &[u8], b: &[u8], uncached: bool) -> bool {
        if self.post(a, b) {
            return true;
        }
        if a.len() + b.len() > self.free_for(a.len() + b.len()) {
            return false;
        }
        let head = self.ctrl().head.load(Ordering::Relaxed);
        self.put(head, a, false);
        self.put(head + a.len() as u64, b, uncached);
        self.ctrl()
            .head
            .store(head + (a.len() + b.len()) as u64, Ordering::Release);
        true
    }

    /// Copies `src` to stream position `pos` (not yet published; the caller
    /// checked it fits in the free space), past the cache if `uncached`.
    fn put(&self, pos: u64, src: &[u8], uncached: bool) {
        let n = src.len();
        let copy = if uncached {
            copy_uncached
        } else {
            copy_message
        };
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

    /// Consumer: copies the next `dst.len()` bytes without consuming them,
    /// if they can be read now from one place (the post due, or the ring
    /// before it); `false` otherwise. Lets a receiver look at a header
    /// before deciding who takes the message.
    pub fn peek(&self, dst: &mut [u8]) -> bool {
        match self.next() {
            Next::Post(p) if p.len - p.at >= dst.len() => {
                let mut off = 0;
                // SAFETY: as in `read_with`: the post's bytes are written
                // and stay until this side frees the post.
                unsafe {
                    p.range(p.at, dst.len(), |s| {
                        copy_message(&mut dst[off..off + s.len()], s);
                        off += s.len();
                    })
                };
                true
            }
            Next::Ring(n) if n >= dst.len() => {
                let tail = self.ctrl().tail.load(Ordering::Relaxed);
                let at = (tail % self.cap as u64) as usize;
                let first = dst.len().min(self.cap - at);
                let (a, b) = dst.split_at_mut(first);
                // SAFETY: the bytes in [tail, tail + dst.len()) are
                // published (`next` saw `head` past them) and stay until
                // this side moves `tail`.
                unsafe {
                    copy_message(a, std::slice::from_raw_parts(self.data.add(at), first));
                    copy_message(b, std::slice::from_raw_parts(self.data, b.len()));
                }
                true
            }
            _ => false,
        }
    }

    /// Consumer: gives up to `max` readable bytes to `f` as contiguous
    /// slices (in order), releasing each `CHUNK` of the ring (or each post)
    /// as soon as it is read, so the producer refills it meanwhile. Returns
    /// the count.
    pub fn read_with(&self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut done = 0;
        while done < max {
            let n = match self.next() {
                Next::Ring(n) => self.read_ring((max - done).min(n).min(CHUNK), &mut f),
                Next::Post(p) => {
                    let n = (max - done).min(p.len - p.at);
                    // SAFETY: the post shows this round's number (Acquire),
                    // so its bytes are written, and the producer does not
                    // touch them until `freed` passes this round.
                    unsafe { p.range(p.at, n, &mut f) };
                    self.post_read_to(p.at + n, p.len);
                    n
                }
            };
            if n == 0 {
                break;
            }
            done += n;
        }
        done
    }

    /// Consumer: the post due has been read up to `at` of its `len` bytes;
    /// frees it once it is read to the end.
    fn post_read_to(&self, at: usize, len: usize) {
        if at == len {
            self.post_read.set(0);
            self.posts.set(self.posts.get() + 1);
            self.ctrl().freed.store(self.posts.get(), Ordering::Release);
        } else {
            self.post_read.set(at);
        }
    }

    /// Consumer: when the next bytes are a whole post of at least a
    /// header's length, its first `FRAME_BYTES` (lengthened from a short
    /// header) and the rest of it where it lies; `consume_post` then marks
    /// bytes read. One look at the post, where `peek` and `read_with` each
    /// look again (about 30 instructions a look).
    pub fn post_framed(&self) -> Option<([u8; FRAME_BYTES], &[u8])> {
        let Next::Post(p) = self.next() else {
            return None;
        };
        if p.at != 0 || p.len < FRAME_BYTES {
            return None;
        }
        let mut head = [0u8; FRAME_BYTES];
        let mut off = 0;
        // SAFETY: as in `read_with`: the post's bytes are written and the
        // producer does not touch them until this side frees the post,
        // which takes `&mut self` (`consume_post`) and so ends the borrow
        // of the rest first.
        unsafe {
            p.range(0, FRAME_BYTES, |s| {
                head[off..off + s.len()].copy_from_slice(s);
                off += s.len();
            });
            let skip = if p.short { SHORT_BYTES } else { FRAME_BYTES };
            Some((
                head,
                std::slice::from_raw_parts(p.bytes.add(skip), p.len - FRAME_BYTES),
            ))
        }
    }

    /// Consumer: marks the first `n` stream bytes of the post due (as
    /// `post_framed` showed them) as read.
    pub fn consume_post(&mut self, n: usize) {
        let c = self.ctrl();
        let k = self.posts.get();
        // Only the producer stores the word, and not before the post is
        // freed: the value `next` saw.
        let len = (c.posts[k as usize % POSTS].word.load(Ordering::Relaxed) & LEN_BITS) as usize;
        let at = self.post_read.get() + n;
        assert!(at <= len, "consumed past the post");
        self.post_read_to(at, len);
    }

    /// Consumer: gives the next `n` ring bytes (published) to `f` and
    /// releases them.
    fn read_ring(&self, n: usize, f: &mut impl FnMut(&[u8])) -> usize {
        if n == 0 {
            return 0;
        }
        let c = self.ctrl();
        let tail = c.tail.load(Ordering::Relaxed);
        let at = (tail % self.cap as u64) as usize;
        let first = n.min(self.cap - at);
        // SAFETY: the bytes in [tail, tail+n) were published by the
        // producer's Release store of head (observed by `next`'s Acquire
        // load) and the producer does not touch them until tail moves past
        // them.
        unsafe {
            f(std::slice::from_raw_parts(self.data.add(at), first));
            if n > first {
                f(std::slice::from_raw_parts(self.data, n - first));
            }
        }
        c.tail.store(tail + n as u64, Ordering::Release);
        n
    }

    /// Consumer: copies up to `dst.len()` readable bytes; returns the count.
    pub fn read_some(&self, dst: &mut [u8]) -> usize {
        let mut off = 0;
        self.read_with(dst.len(), |s| {
            copy_message(&mut dst[off..off + s.len()], s);
            off += s.len();
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeroed memory for a ring of `cap` bytes, with room to align it.
    fn memory(cap: usize) -> Vec<u64> {
        vec![0u64; (CTRL_BYTES + cap) / 8 + 16]
    }

    /// The producer's and the consumer's view of one ring in `mem`.
    fn pair(mem: &mut [u64], cap: usize) -> (Ring, Ring) {
        let base = mem.as_mut_ptr() as *mut u8;
        let off = base.align_offset(std::mem::align_of::<RingCtrl>());
        assert!(off + CTRL_BYTES + cap <= mem.len() * 8);
        // SAFETY: the memory is zeroed, large enough from the aligned start,
        // and outlives both views (the tests keep it until the end).
        unsafe {
            (
                Ring::from_raw(base.add(off), cap),
                Ring::from_raw(base.add(off), cap),
            )
        }
    }

    #[test]
    fn wraps_and_preserves_order() {
        let cap = 64;
        let mut mem = memory(cap);
        let (tx, rx) = pair(&mut mem, cap);
        let mut next_w = 0u8;
        let mut next_r = 0u8;
        for round in 0..200 {
            let chunk: Vec<u8> = (0..(round % 50) as u8)
                .map(|i| next_w.wrapping_add(i))
                .collect();
            let n = tx.write_some(&chunk, false);
            next_w = next_w.wrapping_add(n as u8);
            let mut out = vec![0u8; (round * 7) % 40];
            let m = rx.read_some(&mut out);
            for b in &out[..m] {
                assert_eq!(*b, next_r);
                next_r = next_r.wrapping_add(1);
            }
        }
        assert!(rx.readable() <= cap);
    }

    /// Small writes (posts) and bulk writes (ring) mixed, with posts
    /// running out and the ring wrapping: the consumer gets every byte in
    /// the producer's order, whatever sizes it reads in, and a look ahead
    /// (`peek`) shows the bytes it reads next.
    #[test]
    fn posts_keep_the_stream_order() {
        let cap = 4096;
        let mut mem = memory(cap);
        let (tx, mut rx) = pair(&mut mem, cap);
        let mut rng = crate::testrng::Rng(7);
        let (mut sent, mut got, mut posted, mut several) = (Vec::new(), Vec::new(), 0, 0);
        let mut shortened = 0;
        let (mut peeked, mut in_place) = (0, 0);
        let rounds: usize = if cfg!(miri) { 400 } else { 4000 };
        for round in 0..rounds {
            let bulk = round % 3 == 0;
            // Writes of one post, of several, and too long for posts.
            let len = rng.below(if bulk {
                900
            } else if round % 2 == 0 {
                POST_BYTES + 1
            } else {
                POSTS_PER_WRITE * POST_BYTES + 64
            });
            let mut bytes: Vec<u8> = (0..len).map(|i| (sent.len() + i) as u8).collect();
            if !bulk && len >= FRAME_BYTES && round % 4 != 1 {
                // A header with a short form, which a post keeps short.
                let h = crate::transport::frame::Frame::eager(round as u32, -7, len - FRAME_BYTES);
                bytes[..FRAME_BYTES].copy_from_slice(&h.encode());
            }
            if bulk {
                let n = tx.write_some(&bytes, false);
                sent.extend_from_slice(&bytes[..n]);
            } else {
                let (a, b) = bytes.split_at(len.min(32));
                let before = tx.posts.get();
                if tx.write_both(a, b, false) {
                    sent.extend_from_slice(&bytes);
                    let word = tx.ctrl().posts[before as usize % POSTS]
                        .word
                        .load(Ordering::Relaxed);
                    let one = tx.posts.get() - before == 1;
                    shortened += usize::from(one && word & SHORT != 0);
                    // Exactly the posts written alone with a header that
                    // shortens, where that saves a line, are short.
                    let shortens = crate::transport::frame::shorten(a).is_some();
                    assert_eq!(one && word & SHORT != 0, one && shortens && saves_line(len));
                }
                posted += tx.posts.get() - before;
                several += usize::from(tx.posts.get() - before > 1);
            }
            if round % 5 != 4 {
                // A look ahead shows the next bytes and consumes nothing.
                let mut ahead = vec![0u8; rng.below(40)];
                if rx.peek(&mut ahead) {
                    assert_eq!(&ahead[..], &sent[got.len()..got.len() + ahead.len()]);
                    peeked += 1;
                }
                // A post read where it lies (its header and part of the
                // rest), or bytes read out (also ending inside a short
                // header, which the next look then starts from).
                match rx.post_framed().filter(|_| round % 2 == 0) {
                    Some((head, rest)) => {
                        let n = rng.below(rest.len() + 1);
                        got.extend_from_slice(&head);
                        got.extend_from_slice(&rest[..n]);
                        rx.consume_post(FRAME_BYTES + n);
                        in_place += 1;
                    }
                    None => {
                        // Every other time up to the end of the post or
                        // of the ring bytes before one, so that the next
                        // post is found whole.
                        let max = if round % 4 == 0 {
                            rx.readable()
                        } else {
                            rng.below(300)
                        };
                        rx.read_with(max, |s| got.extend_from_slice(s));
                    }
                }
            }
            assert_eq!(&got[..], &sent[..got.len()]);
        }
        while rx.read_with(usize::MAX, |s| got.extend_from_slice(s)) > 0 {}
        assert_eq!(got, sent);
        // About 1 in 3 rounds writes a post, 1 in 60 several, 3 in 4 look
        // ahead, 1 in 30 read a post in place, 1 in 18 a short post.
        assert!(posted > rounds as u64 / 80, "only {posted} posts written");
        assert!(
            several > rounds / 400,
            "only {several} writes took several posts"
        );
        assert!(peeked > rounds / 80, "only {peeked} looks ahead");
        assert!(
            in_place > rounds / 100,
            "only {in_place} posts read in place"
        );
        assert!(shortened > rounds / 100, "only {shortened} short posts");
    }

    /// The same with producer and consumer on two threads: what the
    /// consumer reads while the producer writes is still the stream in
    /// order (a post seen before the ring bytes it follows, or a torn post,
    /// would show as a wrong byte).
    #[test]
    fn posts_keep_the_order_across_threads() {
        let cap = 8192;
        let mut mem = memory(cap);
        let (tx, rx) = pair(&mut mem, cap);
        let total = if cfg!(miri) { 20_000 } else { 40_000_000 };
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut rng = crate::testrng::Rng(11);
                let mut sent = 0usize;
                while sent < total {
                    let bulk = rng.below(4) == 0;
                    // Bulk writes long enough to go past the cache
                    // (`copy_uncached` from 4 KiB) when `uncached`.
                    let uncached = rng.below(2) == 0;
                    let len = rng.below(if bulk {
                        9000
                    } else {
                        POSTS_PER_WRITE * POST_BYTES + 1
                    });
                    let bytes: Vec<u8> = (0..len).map(|i| ((sent + i) % 251) as u8).collect();
                    if bulk {
                        sent += tx.write_some(&bytes, uncached);
                    } else if tx.write_both(&bytes[..len.min(32)], &bytes[len.min(32)..], uncached)
                    {
                        sent += len;
                    }
                }
            });
            let mut got = 0usize;
            while got < total {
                rx.read_with(usize::MAX, |s| {
                    for (i, b) in s.iter().enumerate() {
                        assert_eq!(*b, ((got + i) % 251) as u8, "byte {}", got + i);
                    }
                    got += s.len();
                });
            }
        });
    }

    /// Messages as the engine writes them (an eager header, then the
    /// body), small ones in posts, short or not, larger ones through the
    /// ring, with producer and consumer on two threads: the consumer reads
    /// every header back as written and every body after it.
    #[test]
    fn framed_messages_keep_their_bytes_across_threads() {
        use crate::transport::frame::Frame;
        let cap = 8192;
        let mut mem = memory(cap);
        let (tx, rx) = pair(&mut mem, cap);
        let count: u32 = if cfg!(miri) { 300 } else { 300_000 };
        let body = |seq: u32, len: usize| -> Vec<u8> {
            (0..len).map(|i| (seq as usize * 7 + i) as u8).collect()
        };
        let len_of = |seq: u32| match seq % 4 {
            0 => seq as usize % 33,
            1 => seq as usize % 209,
            2 => seq as usize % 1200,
            _ => seq as usize % 5000,
        };
        // Set when the reader stops, failing or not, so that a writer
        // waiting for room gives up instead of hanging the test.
        let stop = std::sync::atomic::AtomicBool::new(false);
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            let stop = &stop;
            s.spawn(move || {
                for seq in 0..count {
                    let len = len_of(seq);
                    let head = Frame::eager(seq, -(seq as i32), len).encode();
                    let b = body(seq, len);
                    while !tx.write_both(&head, &b, seq % 3 == 0) {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
            });
            let _stop = Stop(stop);
            let read_exactly = |n: usize| {
                let mut got = Vec::with_capacity(n);
                while got.len() < n {
                    rx.read_with(n - got.len(), |s| got.extend_from_slice(s));
                }
                got
            };
            for seq in 0..count {
                let head: [u8; FRAME_BYTES] = read_exactly(FRAME_BYTES).try_into().unwrap();
                let f = Frame::decode(&head).expect("a header");
                assert_eq!(
                    (f.ctx, f.tag, f.len),
                    (seq, -(seq as i32), len_of(seq) as u64)
                );
                assert_eq!(
                    read_exactly(len_of(seq)),
                    body(seq, len_of(seq)),
                    "body {seq}"
                );
            }
        });
    }

    /// The consumer releases each chunk as soon as it has read it: the
    /// producer may refill it while the rest is still being read.
    #[test]
    #[cfg_attr(miri, ignore = "copies 192 KiB several times: minutes under Miri")]
    fn reads_release_each_chunk() {
        let cap = 4 * CHUNK;
        let mut mem = memory(cap);
        let (tx, rx) = pair(&mut mem, cap);
        let data: Vec<u8> = (0..3 * CHUNK).map(|i| (i % 251) as u8).collect();
        assert_eq!(tx.write_some(&data, false), data.len());
        let (mut free_seen, mut got) = (Vec::new(), Vec::new());
        let n = rx.read_with(usize::MAX, |s| {
            free_seen.push(tx.writable());
            got.extend_from_slice(s);
        });
        assert_eq!((n, &got), (data.len(), &data));
        assert_eq!(free_seen, [CHUNK, 2 * CHUNK, 3 * CHUNK]);
        assert_eq!(tx.writable(), cap);
    }
}
