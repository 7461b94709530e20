//! Bulk byte copies that avoid a slow case of the C library's `memcpy`.
//!
//! From a few KiB on, glibc copies with `rep movsb`, which some x86 CPUs
//! (AMD EPYC here) run about 15 times slower when the destination lies 1 to
//! 31 bytes past the source modulo 4 KiB (measured: 2-3 GB/s instead of
//! 45 GB/s for a 64 KiB copy in cache). Message data often lands at such
//! offsets (frame headers shift it), so such copies go in pieces below
//! glibc's `rep movsb` threshold, which keeps its vector loop. So do all
//! copies of a shared-memory chunk's size (`SHARED_MAX`), except on CPUs
//! where `rep movsb` measured faster there (`whole_from`, and for messages'
//! copies through the rings `message_whole_from`).

use std::path::Path;
use std::sync::OnceLock;

/// Bytes per piece in the slow case (glibc's threshold here is 2 KiB and up).
const PIECE: usize = 2048;

/// Copies up to this many bytes always go in pieces: the chunks written
/// into collective slots and rings, whose lines the peer that read them
/// last still holds. `rep movsb` wrote those slowly here: a 2-rank bcast
/// root spent 45% of its time in it. Alternated 2-rank runs, medians, us,
/// one `memcpy` / pieces: bcast 64 KiB 5.2 / 2.2, 512 KiB 33 / 18, 4 MiB
/// 253 / 138 (Open MPI 6.4, 41, 332); allgather 1 MiB 44 / 38; pingpong,
/// allreduce, gather and 4-rank calls equal within noise. Larger copies
/// (own blocks, unexpected messages) keep glibc's choice.
const SHARED_MAX: usize = 256 * 1024;

/// Where `rep movsb` writes shared lines fast, copies from this many bytes
/// go whole. On an AMD EPYC of family 1Ah (Zen 5, 2 vCPUs, 2026-11-29) it
/// was the other way round from `SHARED_MAX`'s machine from 32 KiB on, the
/// more while the host ran the two vCPUs far apart (`transport::shm::far`).
/// Alternated 2-rank runs, paired ratios whole / pieces (3-5 rounds), near:
/// pingpong 32-64 KiB 0.67-0.69, sendrecv 32-512 KiB 0.73-0.89, halo 32-512
/// KiB 0.72-0.80, scatter 32-512 KiB 0.73-0.77, allgather and alltoall 32
/// KiB 0.65-0.69, 512 KiB 0.84-0.88, bcast 32 KiB-2 MiB 0.87-0.91; far, 32
/// KiB: pingpong 0.41, bcast 0.44, allreduce 0.50, reduce 0.55 (4 rounds).
/// 4 ranks, near: sendrecv 32-128 KiB 0.79-0.83, bcast 32-512 KiB
/// 0.81-0.85, alltoall and allreduce 128 KiB-2 MiB 0.82-0.93. 8 MiB alike.
/// Below 32 KiB whole copies won for messages (near pingpong 8 KiB 0.80, 16
/// KiB 0.72; far bcast 8 KiB 0.34), but a 2-rank bcast of 8-16 KiB ran slow
/// in some runs by the sizes run before it (us, near, runs from 4 bytes
/// up, pieces / whole: 8 KiB 0.17-0.21 / 0.30-0.50, 16 KiB 0.32-0.40 /
/// 0.85-0.98, and 32 KiB 1.73 once where 8-16 KiB writes went whole); with
/// whole copies from 32 KiB, bcast 32 KiB took 0.61-0.67 in eight such runs
/// against 0.71-1.0.
const WHOLE_FROM_AMD_1AH: usize = 32 * 1024;

/// From how many bytes a copy goes in one `memcpy` (unless its skew is the
/// slow one above): `FERROCOLL_COPY_WHOLE_BYTES`, else `WHOLE_FROM_AMD_1AH`
/// on an AMD CPU of family 1Ah, else past `SHARED_MAX`. Read once.
pub fn whole_from() -> usize {
    static WHOLE: OnceLock<usize> = OnceLock::new();
    *WHOLE.get_or_init(|| by_cpu(WHOLE_FROM_AMD_1AH))
}

/// `FERROCOLL_COPY_WHOLE_BYTES`, else `amd_1ah` on an AMD CPU of family
/// 1Ah, else past `SHARED_MAX`.
fn by_cpu(amd_1ah: usize) -> usize {
    crate::param::params().copy_whole_bytes.unwrap_or(
        if crate::cpu::vendor() == crate::cpu::Vendor::Amd(0x1a) {
            amd_1ah
        } else {
            SHARED_MAX + 1
        },
    )
}

/// Messages' copies into and out of the shared-memory rings go whole from
/// this many bytes on an AMD CPU of family 1Ah (`message_whole_from`):
/// the slow mode of `WHOLE_FROM_AMD_1AH` came from collectives' slot
/// reads. Alternated 2-rank runs, `-t`, near (10 rounds), medians, us,
/// from 32 KiB / from 8 KiB: pingpong 8 KiB 0.484 / 0.400, 16 KiB 0.883 /
/// 0.627; sendrecv 8 KiB 0.569 / 0.479, 16 KiB 1.022 / 0.774; halo 8 KiB
/// 1.031 / 0.869, 16 KiB 1.805 / 1.396; bcast, gather, scatter,
/// allgather and alltoall 2-64 KiB alike (paired 0.98-1.06); far (4
/// rounds): pingpong 8 KiB 2.14 / 1.43, 16 KiB 3.95 / 1.87; sendrecv 8
/// KiB 2.30 / 1.47, 16 KiB 4.19 / 1.98; halo 8 KiB 4.18 / 2.15, 16 KiB
/// 7.58 / 3.03; the collectives 0.96-1.10 (their slot copies unchanged).
/// 4 ranks on 2 cores (6 rounds): pingpong 8 KiB 0.510 / 0.420, 16 KiB
/// 0.919 / 0.679, sendrecv 16 KiB 3.05 / 2.77; the rest alike.
const MESSAGE_WHOLE_FROM_AMD_1AH: usize = 8 * 1024;

/// `whole_from` for messages' copies into and out of the rings:
/// `FERROCOLL_COPY_WHOLE_BYTES`, else `MESSAGE_WHOLE_FROM_AMD_1AH` on an
/// AMD CPU of family 1Ah, else as `whole_from`. Read once.
pub fn message_whole_from() -> usize {
    static WHOLE: OnceLock<usize> = OnceLock::new();
    *WHOLE.get_or_init(|| by_cpu(MESSAGE_WHOLE_FROM_AMD_1AH))
}

/// Copies of at most this many bytes go as a few moves of fixed width
/// (`copy_tiny`) instead of a call into the C library's `memcpy`.
const TINY: usize = 32;

/// Copies `src` (at most `TINY` bytes) into `dst` of the same length: two
/// fixed-width moves that overlap in the middle, as `memcpy` does for
/// short lengths, but inline, where the call and its dispatch on length
/// cost more than the bytes (an 8-byte `MPI_Scatter` makes three such
/// copies).
#[inline(always)]
fn copy_tiny(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    match n {
        16..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        8..=15 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        4..=7 => {
            dst[..4].copy_from_slice(&src[..4]);
            dst[n - 4..].copy_from_slice(&src[n - 4..]);
        }
        2..=3 => {
            dst[..2].copy_from_slice(&src[..2]);
            dst[n - 2..].copy_from_slice(&src[n - 2..]);
        }
        1 => dst[0] = src[0],
        _ => {}
    }
}

/// Copies `src` into `dst` (equal lengths).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    copy_whole_from(dst, src, whole_from);
}

/// `copy` of a message's bytes into or out of a shared-memory ring
/// (`message_whole_from`).
pub fn copy_message(dst: &mut [u8], src: &[u8]) {
    copy_whole_from(dst, src, message_whole_from);
}

/// `copy`, whole from `whole()` bytes; at most `PIECE` bytes go in one
/// `memcpy` whatever the skew, without reading the threshold.
#[inline(always)]
fn copy_whole_from(dst: &mut [u8], src: &[u8], whole: fn() -> usize) {
    if src.len() <= TINY && dst.len() == src.len() {
        copy_tiny(dst, src);
        return;
    }
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    assert_eq!(
        dst.len(),
        src.len(),
        "copy between slices of unequal length"
    );
    let skew = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) & 4095;
    if !(1..32).contains(&skew) && src.len() >= whole() {
        dst.copy_from_slice(src);
        return;
    }
    for (d, s) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        d.copy_from_slice(s);
    }
}

/// Bytes of the last-level CPU cache: `FERROCOLL_CACHE_BYTES`, else the
/// largest cache sysfs lists, else 32 MiB. Read once.
pub fn llc_bytes() -> usize {
    static LLC: OnceLock<usize> = OnceLock::new();
    *LLC.get_or_init(|| {
        crate::param::params().cache_bytes.unwrap_or_else(|| {
            largest_cache(Path::new("/sys/devices/system/cpu/cpu0/cache")).unwrap_or(32 << 20)
        })
    })
}

/// The largest `indexN/size` under `dir` ("32768K"), in bytes.
fn largest_cache(dir: &Path) -> Option<usize> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("size")).ok()?;
            let text = text.trim();
            let (digits, unit) = if let Some(d) = text.strip_suffix('K') {
                (d, 1 << 10)
            } else if let Some(d) = text.strip_suffix('M') {
                (d, 1 << 20)
            } else {
                (text, 1)
            };
            digits.parse::<usize>().ok().map(|n| n * unit)
        })
        .max()
        .filter(|&b| b > 0)
}

/// From this many bytes a received message, or a rank's own block copied
/// in place, lands with uncached stores (`copy_uncached`): with the send
/// buffer beside it, it no longer fits the last-level cache. Measured at 2
/// ranks on an EPYC with a 32 MiB L3: pingpong 32 MiB 2.2 ms uncached
/// against 2.6 ms, alltoall 32 MiB (16 MiB blocks) 2.0 against 2.4-3.0 ms;
/// at 8 MiB uncached cost 10% (pingpong 507 against 456 us).
pub fn p2p_uncached_from() -> usize {
    llc_bytes() / 2
}

/// Most bytes from which a message streamed through a shared-memory ring
/// lands with uncached stores (`message_uncached_from`).
const MESSAGE_UNCACHED_MAX: usize = 16 << 20;

/// From this many bytes a message streamed through a shared-memory ring
/// lands with uncached stores: `p2p_uncached_from`, but from 16 MiB at
/// most. A last-level cache of hundreds of MiB is a whole socket's, shared
/// with every other core on it (an Intel Xeon guest's sysfs said 480 MiB),
/// and does not keep a rank's large message for it. There, pingpong, `-t`,
/// alternated, medians of 3, us, cached / uncached from 16 MiB (Open MPI):
/// 2 ranks 16 MiB 1616 / 1647 (1820), 32 MiB 5171 / 3457 (5862), 64 MiB
/// 11605 / 9687 (13542); 4 ranks on 2 cores 16 MiB 2139 / 1974 (2439), 32
/// MiB 6479 / 4743 (7414), 64 MiB 14086 / 11954 (17473); messages read in
/// place, and collectives, alike. (Collectives' own rules, tied to the
/// cache size, are left as they are: there a 2-rank broadcast of 32 MiB
/// took 2956 us cached and 3987 uncached.)
pub fn message_uncached_from() -> usize {
    p2p_uncached_from().min(MESSAGE_UNCACHED_MAX)
}

/// From this many bytes a streamed collective stores its result uncached
/// whatever its other buffers. Its chunks pass through the cache one at a
/// time, so the cached store's extra read costs less than for a message:
/// on the machine above allreduce's cached stores won at every size up to
/// 64 MiB (64 MiB 10.2 ms against 10.7; again at 16 and 32 MiB later),
/// hence 4x the cache. Collectives whose buffers together outgrow the
/// cache switch earlier, each by its own measured rule (`coll::stream`).
pub fn coll_uncached_from() -> usize {
    4 * llc_bytes()
}

/// Copies `src` into `dst` (equal lengths) with stores that bypass the
/// cache where the CPU has them (x86-64), for a destination that is not
/// read again soon: a cached store first reads the line it overwrites, so
/// streaming a large result to memory this way saves a third of the
/// traffic. Elsewhere, or for short copies, the same as `copy`.
pub fn copy_uncached(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy between slices of unequal length"
    );
    #[cfg(target_arch = "x86_64")]
    if dst.len() >= 4096 {
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        copy(&mut dst[..head], &src[..head]);
        let (d, s) = (&mut dst[head..], &src[head..]);
        let body = d.len() / 64 * 64;
        // SAFETY: SSE2 is part of x86-64; `d` is 16-byte aligned after the
        // head, every access lies inside the first `body` bytes of `d` and
        // `s`, and the fence orders the streaming stores before later ones.
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
            let (dp, sp) = (d.as_mut_ptr() as *mut __m128i, s.as_ptr() as *const __m128i);
            for i in (0..body / 16).step_by(4) {
                let v = [0, 1, 2, 3].map(|j| _mm_loadu_si128(sp.add(i + j)));
                for (j, x) in v.into_iter().enumerate() {
                    _mm_stream_si128(dp.add(i + j), x);
                }
            }
            _mm_sfence();
        }
        copy(&mut d[body..], &s[body..]);
        return;
    }
    copy(dst, src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_cache_reads_sysfs_sizes() {
        let dir = std::env::temp_dir().join(format!("ferrocoll-cache-{}", std::process::id()));
        for (i, size) in ["48K", "1024K", "32768K", "garbage"].iter().enumerate() {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        assert_eq!(largest_cache(&dir), Some(32 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(largest_cache(&dir), None);
        assert!(llc_bytes() > 0);
        // Messages through the rings go past the cache from half of it, but
        // from `MESSAGE_UNCACHED_MAX` at most.
        let m = message_uncached_from();
        assert!(m > 0 && m <= MESSAGE_UNCACHED_MAX && m <= p2p_uncached_from());
    }

    #[test]
    fn copies_go_whole_past_a_piece() {
        assert!(whole_from() > PIECE);
        assert!(message_whole_from() > PIECE && message_whole_from() <= whole_from());
    }

    /// Every length up to past `TINY` lands whole and alone, at every
    /// skew: the two moves of `copy_tiny` overlap in the middle and must
    /// cover both ends. Fails if a length is cut short, a byte is moved
    /// twice from the wrong place, or a byte beside the target changes.
    #[test]
    fn tiny_copies_cover_every_length() {
        let src: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        let mut dst = [0u8; 112];
        for skew in 0..8 {
            for len in 0..=TINY + 8 {
                dst.fill(0xee);
                copy(&mut dst[16 + skew..16 + skew + len], &src[skew..skew + len]);
                assert_eq!(
                    &dst[16 + skew..16 + skew + len],
                    &src[skew..skew + len],
                    "{len}"
                );
                assert!(dst[..16 + skew].iter().all(|&b| b == 0xee), "{len}");
                assert!(dst[16 + skew + len..].iter().all(|&b| b == 0xee), "{len}");
            }
        }
    }

    #[test]
    fn copies_at_every_skew() {
        // Lengths on both sides of `whole_from` and `message_whole_from` on
        // any CPU (32 KiB and 8 KiB on AMD family 1Ah, else past 256 KiB).
        let src: Vec<u8> = (0..300_100u32).map(|i| (i * 31 + 7) as u8).collect();
        let mut dst = vec![0u8; 300_100];
        for skew in [0usize, 1, 8, 16, 31, 32, 64] {
            for len in [0usize, 1, 2048, 2049, 9999, 19_999, 40_000, 299_999] {
                dst.fill(0);
                copy(&mut dst[skew..skew + len], &src[..len]);
                assert_eq!(&dst[skew..skew + len], &src[..len]);
                assert!(dst[skew + len..].iter().all(|&b| b == 0));
                dst.fill(0);
                copy_message(&mut dst[skew..skew + len], &src[..len]);
                assert_eq!(&dst[skew..skew + len], &src[..len]);
                assert!(dst[skew + len..].iter().all(|&b| b == 0));
                dst.fill(0);
                copy_uncached(&mut dst[skew..skew + len], &src[skew / 2..skew / 2 + len]);
                assert_eq!(&dst[skew..skew + len], &src[skew / 2..skew / 2 + len]);
                assert!(dst[skew + len..].iter().all(|&b| b == 0));
                assert!(dst[..skew].iter().all(|&b| b == 0));
            }
        }
    }
}
