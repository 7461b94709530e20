//! Handing freshly written lines to the shared cache (`cldemote`), so a
//! reader on another core takes them from there instead of snooping them
//! out of the writer's core.
//!
//! A line this core has just written sits modified in its own L1; another
//! core's load of it goes to the line's home in the shared cache, which
//! then asks this core for it: on this host (a 2-core guest of an Intel
//! Xeon with a 480 MiB shared cache) that transfer took about 130 ns each
//! way. Demoted right after the write, the line waits in the shared cache
//! for the reader. Mostly small writes gain: demoting more than a few lines
//! slowed the writer more than it saved the reader (2 ranks, bcast 512 B
//! 0.115 -> 0.168 us, gather 1 KiB 0.139 -> 0.220, demoting up to 17 lines
//! instead of 4), except an allgather's or all-to-all's parts of 4-8 KiB
//! (`slots::BULK_LINES`) and the input a pulled allreduce's peers read in
//! place (`coll::pull::DEMOTE_INPUT`, up to 512 KiB). A line demoted and
//! then read by its own core comes back from the shared cache as well, so
//! a writer must not read its own part again (see
//! `coll::slots::allreduce`). The figures are at the callers:
//! `ring::DEMOTE_POSTS`, `slots::BULK_LINES`, `coll::slots::write` and
//! `coll::pull::DEMOTE_INPUT`.

/// Demotes `n` lines from `at` (64-byte aligned) to the shared cache: x86-64
/// `cldemote`, which runs as a no-op on processors without it (it is
/// encoded in the reserved no-op space); nothing elsewhere.
#[inline(always)]
pub fn lines(at: *const u8, n: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    for i in 0..n {
        // SAFETY: `cldemote` is a hint: it never faults, changes no
        // memory's value, and executes as a no-op where unsupported.
        unsafe {
            std::arch::asm!("cldemote [{0}]", in(reg) at.wrapping_add(64 * i),
                options(nostack, preserves_flags, readonly));
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (at, n);
}

/// Demotes every line that `bytes` touches (`lines`).
#[inline]
pub fn range(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let skew = bytes.as_ptr() as usize & 63;
    lines(
        bytes.as_ptr().wrapping_sub(skew),
        (skew + bytes.len()).div_ceil(64),
    );
}
