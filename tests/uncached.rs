//! The uncached store paths (`copy::copy_uncached`) end to end, in a test
//! binary of its own: it sets `FERROCOLL_CACHE_BYTES` before the library
//! reads its knobs, so the thresholds are small enough to test quickly.

mod common;

use common::{data, sum_ref, world, SUM};
use ferrocoll::coll::{self, Ctx};

/// Large messages and collective results are stored past the cache
/// (`copy_uncached`), in pieces that start anywhere in a cache line; with
/// the cache size set to 2 MiB that happens from 1 MiB (messages) and
/// 8 MiB (streamed results). A posted receive
/// into a misaligned buffer keeps every byte and touches nothing around
/// it, and streamed allreduce and reduce of that size (in place too) are
/// exact.
#[test]
fn uncached_sizes_keep_every_byte() {
    use ferrocoll::comm::buffer::RawBuf;
    use ferrocoll::comm::engine::Match;
    // Before anything reads the knobs: this binary holds this one test.
    std::env::set_var("FERROCOLL_CACHE_BYTES", (2 << 20).to_string());
    assert_eq!(ferrocoll::copy::llc_bytes(), 2 << 20);
    assert!(ferrocoll::copy::p2p_uncached_from() <= ferrocoll::copy::coll_uncached_from());
    let count = (ferrocoll::copy::coll_uncached_from() + 4099) / 4;
    let len = count * 4;
    for n in [2, 3] {
        let want = sum_ref(n, count);
        world(n, &[], |r, eng, comm| {
            if r < 2 {
                // Receive first, so the message lands in the posted buffer.
                let mut got = vec![0xA5u8; len + 8];
                let m = Match {
                    source: Some(1 - r),
                    ctx: 1001,
                    tag: Some(7),
                };
                // SAFETY: `got` outlives the wait; the range starts 3 bytes in.
                let q = eng
                    .irecv(m, unsafe { RawBuf::new(got.as_mut_ptr().add(3), len) })
                    .unwrap();
                let mine = data(r, count);
                // SAFETY: `mine` outlives the wait.
                let s = eng
                    .isend(
                        1 - r,
                        1001,
                        7,
                        unsafe { RawBuf::new(mine.as_ptr() as *mut u8, len) },
                        "send",
                    )
                    .unwrap();
                eng.wait(s, "send").unwrap();
                assert_eq!(eng.wait(q, "recv").unwrap().bytes, len);
                assert!(got[3..3 + len] == data(1 - r, count)[..], "message n={n}");
                assert!(got[..3].iter().chain(&got[3 + len..]).all(|&b| b == 0xA5));
            }
            let mut out = vec![0u8; len];
            let ctx = &mut Ctx::new(eng, comm);
            coll::allreduce::allreduce(ctx, Some(&data(r, count)), &mut out, &SUM).unwrap();
            assert!(out == want, "allreduce n={n} rank {r}");
            let mut inplace = data(r, count);
            coll::allreduce::allreduce(ctx, None, &mut inplace, &SUM).unwrap();
            assert!(inplace == want, "in-place allreduce n={n} rank {r}");
            // Reduce stores its result uncached once the inputs and the
            // result outgrow the cache; the root's buffer starts 5 bytes
            // into a line and nothing around it is touched.
            let root = n - 1;
            let mut got = vec![0x5Au8; len + 8];
            let out = (r == root).then(|| &mut got[5..5 + len]);
            coll::reduce::reduce(ctx, Some(&data(r, count)), out, root, &SUM).unwrap();
            if r == root {
                assert!(got[5..5 + len] == want[..], "reduce n={n}");
                assert!(got[..5].iter().chain(&got[5 + len..]).all(|&b| b == 0x5A));
            }
            let mut inplace = data(r, count);
            let out = (r == root).then_some(&mut inplace[..]);
            let send = (r != root).then(|| data(r, count));
            coll::reduce::reduce(ctx, send.as_deref(), out, root, &SUM).unwrap();
            if r == root {
                assert!(inplace == want, "in-place reduce n={n}");
            }
        });
    }
}
