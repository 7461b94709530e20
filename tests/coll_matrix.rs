//! Thread-per-rank matrix: every collective x every algorithm x ranks
//! {1,2,3,4,7,8} x counts {0, 1, ranks-1, odd, several MB}, over the real
//! shared-memory rings, compared with a naive reference.
#![allow(clippy::needless_range_loop)] // ranks index several parallel tables

mod common;

use common::{data, fold_ref, sum_ref, world, world_on_hosts, SUM};
use ferrocoll::coll::{self, Ctx, Reducer};

const RANKS: [usize; 6] = [1, 2, 3, 4, 7, 8];
/// Several MB of i32 (odd, so blocks are uneven).
const BIG: usize = 3 * 1024 * 1024 / 4 + 3;

fn counts(n: usize, big: bool) -> Vec<usize> {
    // 14/15 and 511/512 four-byte elements: either side of where a slot
    // part moves from next to the flag onto the next line (56 bytes for a
    // rooted writer, 2 KiB for one that every rank publishes).
    let mut v = vec![0, 1, n.saturating_sub(1), 14, 15, 511, 512, 1001];
    if big {
        // 32 KiB per rank: from 3 ranks the parts of a gather or scatter
        // overflow the root's slot but are messages below the rendezvous
        // size (a scatter root still announces them).
        v.extend([8192, BIG]);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Non-commutative: affine maps x -> a*x + b composed left after right,
/// as (a, b) pairs of wrapping u32.
fn compose(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
        let u = |b: &[u8], i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        let (a, b, c, e) = (u(s, 0), u(s, 4), u(d, 0), u(&*d, 4));
        d[..4].copy_from_slice(&a.wrapping_mul(c).to_ne_bytes());
        d[4..].copy_from_slice(&a.wrapping_mul(e).wrapping_add(b).to_ne_bytes());
    }
}

const COMPOSE: Reducer<'static> = Reducer {
    extent: 8,
    commutative: false,
    apply: &compose,
};

fn affine(r: usize, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|i| {
            let a = (r as u32 * 3 + i as u32 * 5) % 7 + 2;
            let b = (r as u32 * 11 + i as u32) % 13;
            [a.to_ne_bytes(), b.to_ne_bytes()].concat()
        })
        .collect()
}

#[test]
fn allreduce_all_algorithms() {
    for algo in [
        "recursive_doubling",
        "ring",
        "reduce_bcast",
        "slots",
        "stream",
        "pull",
        "auto",
    ] {
        for n in RANKS {
            for count in counts(n, true) {
                let want = sum_ref(n, count);
                world(n, &[("allreduce", algo)], |r, eng, comm| {
                    let send = data(r, count);
                    let mut recv = vec![0u8; send.len()];
                    coll::allreduce::allreduce(
                        &mut Ctx::new(eng, comm),
                        Some(&send),
                        &mut recv,
                        &SUM,
                    )
                    .unwrap();
                    assert!(
                        recv == want,
                        "allreduce {algo} n={n} count={count} rank {r}"
                    );
                    // In place, non-commutative (must keep rank order).
                    let mut buf = affine(r, count.min(20_000));
                    let want2 = fold_ref((0..n).map(|q| affine(q, count.min(20_000))), &COMPOSE);
                    coll::allreduce::allreduce(&mut Ctx::new(eng, comm), None, &mut buf, &COMPOSE)
                        .unwrap();
                    assert!(
                        buf == want2,
                        "non-commutative allreduce {algo} n={n} count={count}"
                    );
                    // In place, commutative; non-commutative from `send`.
                    let mut buf3 = data(r, count);
                    coll::allreduce::allreduce(&mut Ctx::new(eng, comm), None, &mut buf3, &SUM)
                        .unwrap();
                    assert!(
                        buf3 == want,
                        "in-place allreduce {algo} n={n} count={count}"
                    );
                    let send4 = affine(r, count.min(20_000));
                    let mut out4 = vec![0u8; send4.len()];
                    let c = &mut Ctx::new(eng, comm);
                    coll::allreduce::allreduce(c, Some(&send4), &mut out4, &COMPOSE).unwrap();
                    assert!(
                        out4 == want2,
                        "non-commutative allreduce {algo} n={n} count={count} from send"
                    );
                });
            }
        }
    }
}

#[test]
fn bcast_all_algorithms() {
    for algo in ["binomial", "chain", "slots", "stream", "pull"] {
        for n in RANKS {
            for count in counts(n, true) {
                for root in [0, n / 2, n - 1] {
                    world(n, &[("bcast", algo)], |r, eng, comm| {
                        let mut buf = if r == root {
                            data(root, count)
                        } else {
                            vec![0u8; count * 4]
                        };
                        coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                        assert!(
                            buf == data(root, count),
                            "bcast {algo} n={n} count={count} root={root}"
                        );
                    });
                }
            }
        }
    }
}

#[test]
fn reduce_all_algorithms() {
    for algo in ["binomial", "rsag", "slots", "stream", "pull"] {
        for n in RANKS {
            for count in counts(n, true) {
                let want = sum_ref(n, count);
                for root in [0, n - 1] {
                    world(n, &[("reduce", algo)], |r, eng, comm| {
                        let send = data(r, count);
                        let mut out = vec![0u8; send.len()];
                        let recv = (r == root).then_some(&mut out[..]);
                        coll::reduce::reduce(
                            &mut Ctx::new(eng, comm),
                            Some(&send),
                            recv,
                            root,
                            &SUM,
                        )
                        .unwrap();
                        if r == root {
                            assert!(out == want, "reduce {algo} n={n} count={count} root={root}");
                        }
                        let c2 = count.min(20_000);
                        let mut mine = affine(r, c2);
                        let want2 = fold_ref((0..n).map(|q| affine(q, c2)), &COMPOSE);
                        let (send2, recv2) = if r == root {
                            (None, Some(&mut mine[..]))
                        } else {
                            (Some(&affine(r, c2)[..]), None)
                        };
                        let send2 = send2.map(|s| s.to_vec());
                        coll::reduce::reduce(
                            &mut Ctx::new(eng, comm),
                            send2.as_deref(),
                            recv2,
                            root,
                            &COMPOSE,
                        )
                        .unwrap();
                        if r == root {
                            assert!(mine == want2, "non-commutative reduce n={n} root={root}");
                        }
                        // Not in place, with the root in the middle: its own
                        // part is folded in rank order too.
                        let mid = n / 2;
                        let mut out2 = vec![0u8; c2 * 8];
                        let recv3 = (r == mid).then_some(&mut out2[..]);
                        let send3 = affine(r, c2);
                        coll::reduce::reduce(
                            &mut Ctx::new(eng, comm),
                            Some(&send3),
                            recv3,
                            mid,
                            &COMPOSE,
                        )
                        .unwrap();
                        if r == mid {
                            assert!(out2 == want2, "non-commutative reduce n={n} root={mid}");
                        }
                    });
                }
            }
        }
    }
}

/// Host-aware allreduce (also in slices, one per rank of a host), bcast and
/// reduce (rings inside a "host", TCP across) against the references, with
/// the flat algorithms beside them.
#[test]
fn host_aware_collectives() {
    let layouts: [&[u32]; 6] = [
        &[0, 0, 1],
        // Aligned blocks: small allreduces take recursive doubling.
        &[0, 0, 1, 1],
        &[0, 1, 0, 1],
        &[0, 0, 1, 1, 1],
        &[0, 0, 0, 1, 2, 2, 1],
        &[2, 0, 1, 0, 1, 2],
    ];
    for hosts in layouts {
        let n = hosts.len();
        // `slices` applies to allreduce where every host has as many ranks.
        for algo in ["auto", "flat", "slices"] {
            let forced = [("allreduce", algo), ("bcast", algo), ("reduce", algo)];
            for count in [0, 1, 1001, BIG] {
                let want = sum_ref(n, count);
                world_on_hosts(n, Some(hosts), &forced, |r, eng, comm| {
                    let what = format!("{algo} hosts={hosts:?} count={count} rank {r}");
                    let send = data(r, count);
                    let mut recv = vec![0u8; send.len()];
                    let mut c = Ctx::new(eng, comm);
                    coll::allreduce::allreduce(&mut c, Some(&send), &mut recv, &SUM).unwrap();
                    assert!(recv == want, "allreduce {what}");
                    let mut buf = data(r, count);
                    coll::allreduce::allreduce(&mut Ctx::new(eng, comm), None, &mut buf, &SUM)
                        .unwrap();
                    assert!(buf == want, "in-place allreduce {what}");
                    // Non-commutative ops keep the flat, rank-ordered path.
                    let c2 = count.min(5000);
                    let mut buf = affine(r, c2);
                    let want2 = fold_ref((0..n).map(|q| affine(q, c2)), &COMPOSE);
                    coll::allreduce::allreduce(&mut Ctx::new(eng, comm), None, &mut buf, &COMPOSE)
                        .unwrap();
                    assert!(buf == want2, "non-commutative allreduce {what}");
                    for root in 0..n {
                        let mut buf = if r == root {
                            data(root, count)
                        } else {
                            vec![0u8; count * 4]
                        };
                        coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                        assert!(buf == data(root, count), "bcast root {root} {what}");
                        let mut out = if r == root {
                            data(r, count)
                        } else {
                            Vec::new()
                        };
                        let (s, o) = if r == root {
                            (None, Some(&mut out[..]))
                        } else {
                            (Some(&send[..]), None)
                        };
                        coll::reduce::reduce(&mut Ctx::new(eng, comm), s, o, root, &SUM).unwrap();
                        if r == root {
                            assert!(out == want, "in-place reduce root {root} {what}");
                        }
                    }
                });
            }
        }
    }
}

fn uneven_blocks(n: usize, count: usize) -> Vec<(usize, usize)> {
    // Rank p gets (count + p) % 5 elements, some zero; laid out in reverse.
    let lens: Vec<usize> = (0..n).map(|p| ((count + p) % 5) * 4).collect();
    let mut off = 0;
    let mut out = vec![(0, 0); n];
    for p in (0..n).rev() {
        out[p] = (off, lens[p]);
        off += lens[p] + 4; // a gap between blocks
    }
    out
}

#[test]
fn allgather_gather_scatter() {
    for (algo, rooted) in [
        ("direct", "direct"),
        ("ring", "slots"),
        ("slots", "slots"),
        ("stream", "slots"),
        ("pull", "pull"),
    ] {
        for n in RANKS {
            for count in counts(n, true) {
                let blocks: Vec<(usize, usize)> =
                    (0..n).map(|p| (p * count * 4, count * 4)).collect();
                let algos = [("allgather", algo), ("gather", rooted), ("scatter", rooted)];
                world(n, &algos, |r, eng, comm| {
                    let mut recv = vec![0u8; n * count * 4];
                    coll::allgather::allgatherv(
                        &mut Ctx::new(eng, comm),
                        Some(&data(r, count)),
                        &mut recv,
                        &blocks,
                    )
                    .unwrap();
                    for p in 0..n {
                        assert!(
                            recv[p * count * 4..(p + 1) * count * 4] == data(p, count)[..],
                            "allgather {algo} n={n}"
                        );
                    }
                    // v-variant with gaps, zero blocks and reversed order.
                    let vb = uneven_blocks(n, count);
                    let total = vb.iter().map(|b| b.0 + b.1).max().unwrap_or(0);
                    let mut recv = vec![0xAAu8; total];
                    let mine = data(r, vb[r].1 / 4);
                    coll::allgather::allgatherv(
                        &mut Ctx::new(eng, comm),
                        Some(&mine),
                        &mut recv,
                        &vb,
                    )
                    .unwrap();
                    // Every rank's block of an allgatherv result.
                    let check = |recv: &[u8], how: &str| {
                        for p in 0..n {
                            let (o, l) = vb[p];
                            assert!(
                                recv[o..o + l] == data(p, l / 4)[..],
                                "allgatherv{how} {algo} n={n}"
                            );
                        }
                    };
                    check(&recv, "");
                    // In place: the own block is already in `recv`.
                    let mut recv = vec![0xAAu8; total];
                    recv[vb[r].0..vb[r].0 + vb[r].1].copy_from_slice(&mine);
                    coll::allgather::allgatherv(&mut Ctx::new(eng, comm), None, &mut recv, &vb)
                        .unwrap();
                    check(&recv, " in place");
                    for root in [0, n - 1] {
                        let mut g = vec![0u8; total];
                        let recv = (r == root).then_some(&mut g[..]);
                        coll::gather::gatherv(
                            &mut Ctx::new(eng, comm),
                            Some(&mine),
                            recv,
                            &vb,
                            root,
                        )
                        .unwrap();
                        if r == root {
                            for p in 0..n {
                                let (o, l) = vb[p];
                                assert!(g[o..o + l] == data(p, l / 4)[..], "gatherv n={n}");
                            }
                        }
                        let src: Vec<u8> = (0..total).map(|i| (i * 7 + root) as u8).collect();
                        let mut out = vec![0u8; vb[r].1];
                        let send = (r == root).then_some(&src[..]);
                        coll::gather::scatterv(
                            &mut Ctx::new(eng, comm),
                            send,
                            &vb,
                            Some(&mut out),
                            root,
                        )
                        .unwrap();
                        assert!(out == src[vb[r].0..vb[r].0 + vb[r].1], "scatterv n={n}");
                    }
                });
            }
        }
    }
}

#[test]
fn large_reduce_scatter() {
    for algo in ["ring", "reduce_scatterv", "stream", "pull", "auto"] {
        for n in RANKS {
            // Uneven blocks of several slot chunks, one of them empty.
            let cnts: Vec<usize> = (0..n)
                .map(|p| if p == 1 { 0 } else { (40_000 + 12_345 * p) * 4 })
                .collect();
            let total: usize = cnts.iter().sum();
            let want = sum_ref(n, total / 4);
            let c8: Vec<usize> = (0..n).map(|p| (9_000 + 1_001 * p) * 8).collect();
            let t8: usize = c8.iter().sum();
            let want8 = fold_ref((0..n).map(|q| affine(q, t8 / 8)), &COMPOSE);
            world(n, &[("reduce_scatter", algo)], |r, eng, comm| {
                let mut out = vec![0u8; cnts[r]];
                coll::reduce_scatter::reduce_scatter(
                    &mut Ctx::new(eng, comm),
                    Some(&data(r, total / 4)),
                    &mut out,
                    &cnts,
                    &SUM,
                )
                .unwrap();
                let off: usize = cnts[..r].iter().sum();
                assert!(
                    out == want[off..off + cnts[r]],
                    "reduce_scatter {algo} n={n}"
                );
                // In place, non-commutative.
                let mut buf = affine(r, t8 / 8);
                coll::reduce_scatter::reduce_scatter(
                    &mut Ctx::new(eng, comm),
                    None,
                    &mut buf,
                    &c8,
                    &COMPOSE,
                )
                .unwrap();
                let off: usize = c8[..r].iter().sum();
                assert!(
                    buf[..c8[r]] == want8[off..off + c8[r]],
                    "in-place non-commutative reduce_scatter {algo} n={n} rank {r}"
                );
            });
        }
    }
}

#[test]
fn alltoall_reduce_scatter_scan_barrier() {
    for (a2a, rs, bar, scan) in [
        ("direct", "ring", "dissemination", "chain"),
        ("pairwise", "reduce_scatterv", "slots", "slots"),
        ("slots", "slots", "slots", "slots"),
        ("stream", "ring", "slots", "chain"),
        ("pull", "pull", "slots", "slots"),
        ("auto", "auto", "auto", "auto"),
    ] {
        for n in RANKS {
            // Streamed: several chunks, the last one short; automatic:
            // 40 KB blocks stream at every rank count here; as messages,
            // announced (and at 2 ranks read in place where busy senders'
            // messages are, `SendKind::Swap`).
            let extra = match a2a {
                "stream" => vec![40_003],
                "direct" => vec![65_537],
                "auto" => vec![10_001],
                _ => vec![],
            };
            for count in counts(n, false).into_iter().chain(extra) {
                world(
                    n,
                    &[
                        ("alltoall", a2a),
                        ("reduce_scatter", rs),
                        ("barrier", bar),
                        ("scan", scan),
                    ],
                    |r, eng, comm| {
                        coll::barrier::barrier(&mut Ctx::new(eng, comm)).unwrap();
                        let b = count * 4;
                        let blocks: Vec<(usize, usize)> = (0..n).map(|p| (p * b, b)).collect();
                        let send: Vec<u8> = (0..n).flat_map(|p| data(r * n + p, count)).collect();
                        let mut recv = vec![0u8; n * b];
                        coll::alltoall::alltoall(
                            &mut Ctx::new(eng, comm),
                            &send,
                            &blocks,
                            &mut recv,
                            &blocks,
                        )
                        .unwrap();
                        for p in 0..n {
                            assert!(
                                recv[p * b..(p + 1) * b] == data(p * n + r, count)[..],
                                "alltoall {a2a} n={n}"
                            );
                        }
                        // Reduce-scatter with uneven counts (some zero).
                        let cnts: Vec<usize> = (0..n).map(|p| ((count + p) % 4) * 4).collect();
                        let total: usize = cnts.iter().sum();
                        let full = data(r, total / 4);
                        let mut out = vec![0u8; cnts[r]];
                        coll::reduce_scatter::reduce_scatter(
                            &mut Ctx::new(eng, comm),
                            Some(&full),
                            &mut out,
                            &cnts,
                            &SUM,
                        )
                        .unwrap();
                        let want = sum_ref(n, total / 4);
                        let off: usize = cnts[..r].iter().sum();
                        assert!(out == want[off..off + cnts[r]], "reduce_scatter {rs} n={n}");
                        // Non-commutative, in place.
                        let c8: Vec<usize> = (0..n).map(|p| ((count + p) % 3) * 8).collect();
                        let t8: usize = c8.iter().sum();
                        let mut buf = affine(r, t8 / 8);
                        coll::reduce_scatter::reduce_scatter(
                            &mut Ctx::new(eng, comm),
                            None,
                            &mut buf,
                            &c8,
                            &COMPOSE,
                        )
                        .unwrap();
                        let want = fold_ref((0..n).map(|q| affine(q, t8 / 8)), &COMPOSE);
                        let off: usize = c8[..r].iter().sum();
                        assert!(
                            buf[..c8[r]] == want[off..off + c8[r]],
                            "nc reduce_scatter n={n}"
                        );
                        // Scan / exscan, non-commutative, from `send` and
                        // in place.
                        let mine = affine(r, count.min(2000));
                        let mut out = vec![0u8; mine.len()];
                        coll::scan::scan(&mut Ctx::new(eng, comm), Some(&mine), &mut out, &COMPOSE)
                            .unwrap();
                        let want = fold_ref((0..=r).map(|q| affine(q, count.min(2000))), &COMPOSE);
                        assert!(out == want, "scan {scan} n={n} count={count}");
                        let mut buf = mine.clone();
                        coll::scan::scan(&mut Ctx::new(eng, comm), None, &mut buf, &COMPOSE)
                            .unwrap();
                        assert!(buf == want, "in-place scan {scan} n={n} count={count}");
                        let mut out = vec![0u8; mine.len()];
                        coll::scan::exscan(
                            &mut Ctx::new(eng, comm),
                            Some(&mine),
                            &mut out,
                            &COMPOSE,
                        )
                        .unwrap();
                        let mut buf = mine.clone();
                        coll::scan::exscan(&mut Ctx::new(eng, comm), None, &mut buf, &COMPOSE)
                            .unwrap();
                        if r > 0 {
                            let want =
                                fold_ref((0..r).map(|q| affine(q, count.min(2000))), &COMPOSE);
                            assert!(out == want, "exscan {scan} n={n} count={count}");
                            assert!(buf == want, "in-place exscan {scan} n={n} count={count}");
                        } else {
                            assert!(out.iter().all(|&b| b == 0), "exscan {scan}: rank 0's out");
                            assert!(buf == mine, "in-place exscan {scan}: rank 0's buffer");
                        }
                    },
                );
            }
        }
    }
}

#[test]
fn split_and_dup_interleaved() {
    for n in [1, 3, 4, 7] {
        world(n, &[], |r, eng, world| {
            let mut dup = world.dup(eng).unwrap();
            let mut half = world
                .split(eng, Some((r % 2) as u32), -(r as i32))
                .unwrap()
                .unwrap();
            let none = world.split(eng, (r != 0).then_some(1), 0).unwrap();
            assert_eq!(none.is_none(), r == 0);
            assert_eq!(half.size(), (0..n).filter(|q| q % 2 == r % 2).count());
            // Keys reverse the order inside each half.
            let members: Vec<usize> = (0..n).rev().filter(|q| q % 2 == r % 2).collect();
            assert_eq!(half.members(), &members[..]);
            for round in 0..20 {
                let mut a = vec![0u8; 4 * 10];
                coll::allreduce::allreduce(
                    &mut Ctx::new(eng, &mut half),
                    Some(&data(r + round, 10)),
                    &mut a,
                    &SUM,
                )
                .unwrap();
                let want = fold_ref(members.iter().map(|&q| data(q + round, 10)), &SUM);
                assert!(a == want);
                let mut b = if r == 0 {
                    data(round, 100)
                } else {
                    vec![0u8; 400]
                };
                coll::bcast::bcast(&mut Ctx::new(eng, &mut dup), &mut b, 0).unwrap();
                assert!(b == data(round, 100));
            }
        });
    }
}

#[test]
fn slot_areas_are_reclaimed_and_run_out_gracefully() {
    for n in [2, 3, 4] {
        world(n, &[], |r, eng, world| {
            // Freed communicators give their areas back.
            for round in 0..40 {
                let mut c = world.dup(eng).unwrap();
                assert!(c.slots.is_some(), "round {round}: no slot area left");
                let mut a = vec![0u8; 4 * 3];
                let mut ctx = Ctx::new(eng, &mut c);
                coll::allreduce::allreduce(&mut ctx, Some(&data(r + round, 3)), &mut a, &SUM)
                    .unwrap();
                assert!(a == fold_ref((0..n).map(|q| data(q + round, 3)), &SUM));
                let mut b = if r == round % n {
                    data(round, 50)
                } else {
                    vec![0u8; 200]
                };
                coll::bcast::bcast(&mut Ctx::new(eng, &mut c), &mut b, round % n).unwrap();
                assert!(b == data(round, 50));
                c.release(eng);
            }
            // More live communicators than areas: the rest use the rings.
            let mut comms: Vec<_> = (0..24).map(|_| world.dup(eng).unwrap()).collect();
            assert!(comms.iter().any(|c| c.slots.is_none()));
            for round in 0..3 {
                for (i, c) in comms.iter_mut().enumerate().rev() {
                    let mut a = vec![0u8; 4 * 5];
                    let mine = data(r + i + round, 5);
                    coll::allreduce::allreduce(&mut Ctx::new(eng, c), Some(&mine), &mut a, &SUM)
                        .unwrap();
                    assert!(a == fold_ref((0..n).map(|q| data(q + i + round, 5)), &SUM));
                }
            }
        });
    }
}

/// Unexpected large messages of changing sizes (their buffers are reused),
/// delivered out of order and truncated.
#[test]
fn unexpected_messages_reuse_buffers() {
    use ferrocoll::comm::buffer::RawBuf;
    use ferrocoll::comm::engine::Match;
    world(2, &[], |r, eng, _| {
        let m = |tag| Match {
            source: Some(1 - r),
            ctx: 1000,
            tag: Some(tag),
        };
        for round in 0..6usize {
            let len = (64 << 10) << (round % 3) | round;
            let (a, b) = (data(round, len / 4 + 1), data(round + 9, len / 4 + 1));
            if r == 0 {
                // SAFETY: the buffers outlive the waits below.
                let ia = eng.isend(
                    1,
                    1000,
                    1,
                    unsafe { RawBuf::new(a.as_ptr() as *mut u8, len) },
                    "send",
                );
                let ib = eng.isend(
                    1,
                    1000,
                    2,
                    unsafe { RawBuf::new(b.as_ptr() as *mut u8, len) },
                    "send",
                );
                eng.wait(ia.unwrap(), "send").unwrap();
                eng.wait(ib.unwrap(), "send").unwrap();
            } else {
                // Let both arrive before any receive is posted.
                while eng.iprobe(m(2)).is_none() {
                    std::thread::yield_now();
                }
                let mut x = vec![0u8; len / 2];
                let mut y = vec![0u8; len];
                // SAFETY: as above.
                let ib = eng.irecv(m(2), unsafe { RawBuf::new(x.as_mut_ptr(), len / 2) });
                let st = eng.wait(ib.unwrap(), "recv").unwrap();
                assert!(st.error.is_some(), "truncated");
                assert!(x[..] == b[..len / 2]);
                // SAFETY: as above.
                let ia = eng.irecv(m(1), unsafe { RawBuf::new(y.as_mut_ptr(), len) });
                let st = eng.wait(ia.unwrap(), "recv").unwrap();
                assert!(st.error.is_none() && st.bytes == len);
                assert!(y[..] == a[..len], "round {round}");
            }
        }
    });
}

/// Two ranks that both send a large message before receiving do not
/// deadlock (announced messages are buffered once a wait runs idle), and
/// large collectives agree with and without announcements.
#[test]
fn head_to_head_large_sends_and_eager_only() {
    use ferrocoll::comm::buffer::RawBuf;
    use ferrocoll::comm::engine::Match;
    world(2, &[], |r, eng, comm| {
        let big = 3 << 20;
        let mine = data(r, big / 4);
        // SAFETY: `mine` outlives the wait.
        let s = eng.isend(
            1 - r,
            1000,
            5,
            unsafe { RawBuf::new(mine.as_ptr() as *mut u8, big) },
            "send",
        );
        eng.wait(s.unwrap(), "send").unwrap();
        let mut got = vec![0u8; big];
        let m = Match {
            source: Some(1 - r),
            ctx: 1000,
            tag: Some(5),
        };
        // SAFETY: `got` outlives the wait.
        let q = eng.irecv(m, unsafe { RawBuf::new(got.as_mut_ptr(), big) });
        let st = eng.wait(q.unwrap(), "recv").unwrap();
        assert!(st.bytes == big && got == data(1 - r, big / 4));
        let default_min = eng.rndv_min;
        for rndv_min in [usize::MAX, default_min, 1] {
            eng.rndv_min = rndv_min;
            let mut out = vec![0u8; BIG * 4];
            let ctx = &mut Ctx::new(eng, comm);
            coll::allreduce::allreduce(ctx, Some(&data(r, BIG)), &mut out, &SUM).unwrap();
            assert!(out == sum_ref(2, BIG), "allreduce, rndv_min {rndv_min}");
            let mut b = if r == 1 {
                data(1, 5000)
            } else {
                vec![0u8; 20000]
            };
            coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut b, 1).unwrap();
            assert!(b == data(1, 5000));
        }
    });
}

/// One communicator runs a long mix of small (slot) and streamed calls of
/// every length, rooted and not, so that streamed calls start after small
/// ones at every offset of the slot area, span several windows of slots,
/// and ranks run ahead of each other across calls.
#[test]
fn slot_calls_mixed_small_and_streamed() {
    // i32 counts: one slot, two chunks, and about 40 chunks (several windows).
    let sizes = [1usize, 9, 5_000, 20_000, 600_001];
    for n in [2, 3, 4] {
        world(n, &[], |r, eng, comm| {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            for step in 0..60 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let count = sizes[(x % sizes.len() as u64) as usize];
                let root = (x >> 8) as usize % n;
                let what = format!("n={n} step={step} count={count} root={root}");
                match (x >> 16) % 3 {
                    0 => {
                        let send = data(r, count);
                        let mut recv = vec![0u8; send.len()];
                        let c = &mut Ctx::new(eng, comm);
                        coll::allreduce::allreduce(c, Some(&send), &mut recv, &SUM).unwrap();
                        assert!(recv == sum_ref(n, count), "allreduce {what}");
                    }
                    1 => {
                        let mut buf = if r == root {
                            data(root, count)
                        } else {
                            vec![0u8; count * 4]
                        };
                        coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                        assert!(buf == data(root, count), "bcast {what}");
                    }
                    _ => {
                        let send = data(r, count);
                        let mut recv = vec![0u8; send.len()];
                        let out = (r == root).then_some(&mut recv[..]);
                        let c = &mut Ctx::new(eng, comm);
                        coll::reduce::reduce(c, Some(&send), out, root, &SUM).unwrap();
                        if r == root {
                            assert!(recv == sum_ref(n, count), "reduce {what}");
                        }
                    }
                }
            }
        });
    }
}

/// Small rooted calls, three times as many as an area has slots, with one
/// root throughout: the writers (the root of a bcast or scatter, the other
/// ranks of a gather) run up to the slot depth ahead of their readers, so
/// every slot is reused while readers lag, and each call's data (which
/// changes with the call) must still arrive intact.
#[test]
fn small_rooted_calls_past_the_slot_depth() {
    let calls = 3 * ferrocoll::transport::shm::slots::DEPTH + 7;
    for n in [2, 3, 4] {
        world(n, &[], |r, eng, comm| {
            let root = n - 1;
            let block = |p: usize, i: usize| data(p + 7 * i, 3);
            for i in 0..calls {
                let mut buf = if r == root {
                    block(root, i)
                } else {
                    vec![0u8; 12]
                };
                coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                assert!(buf == block(root, i), "bcast n={n} call {i}");
            }
            for i in 0..calls {
                let mut all = vec![0u8; 12 * n];
                let out = (r == root).then_some(&mut all[..]);
                let c = &mut Ctx::new(eng, comm);
                coll::gather::gather(c, Some(&block(r, i)), out, 12, root).unwrap();
                if r == root {
                    let want: Vec<u8> = (0..n).flat_map(|p| block(p, i)).collect();
                    assert!(all == want, "gather n={n} call {i}");
                }
            }
            for i in 0..calls {
                let all: Vec<u8> = (0..n).flat_map(|p| block(p, i)).collect();
                let send = (r == root).then_some(&all[..]);
                let mut mine = vec![0u8; 12];
                let c = &mut Ctx::new(eng, comm);
                coll::gather::scatter(c, send, 12, Some(&mut mine), root).unwrap();
                assert!(mine == block(r, i), "scatter n={n} call {i}");
            }
        });
    }
}

/// `MPI_Gather` of `len` bytes a rank through either entry: odd ranks
/// with a block list (as for derived datatypes, `gatherv_uniform`), even
/// ones without (`gather`); both must number the call alike.
fn gather_either(c: &mut Ctx, send: &[u8], out: Option<&mut [u8]>, len: usize, root: usize) {
    let (r, n) = (c.rank(), c.size());
    if r % 2 == 1 {
        let list: Vec<(usize, usize)> = match r == root {
            true => (0..n).map(|q| (q * len, len)).collect(),
            false => Vec::new(),
        };
        coll::gather::gatherv_uniform(c, Some(send), out, &list, len, root).unwrap();
    } else {
        coll::gather::gather(c, Some(send), out, len, root).unwrap();
    }
}

/// `MPI_Scatter` of `len` bytes a rank through either entry, as
/// `gather_either`.
fn scatter_either(c: &mut Ctx, send: Option<&[u8]>, len: usize, mine: &mut [u8], root: usize) {
    let (r, n) = (c.rank(), c.size());
    if r % 2 == 1 {
        let list: Vec<(usize, usize)> = match r == root {
            true => (0..n).map(|q| (q * len, len)).collect(),
            false => Vec::new(),
        };
        coll::gather::scatter_uniform(c, send, &list, len, Some(mine), root).unwrap();
    } else {
        coll::gather::scatter(c, send, len, Some(mine), root).unwrap();
    }
}

/// Calls whose parts pass 8 KiB (numbered in windows of slots whose
/// width depends on the size) mixed with small and streamed ones, rooted
/// and not, over several rows of the slot area: writers run ahead of
/// their readers across the jumps between windows (a gather's paced
/// where ranks outnumber cores), and every call's data, which changes
/// with the call, arrives intact.
#[test]
fn wide_slot_calls_mixed_with_small_and_streamed() {
    let calls = 2 * ferrocoll::transport::shm::slots::DEPTH + 40;
    // i32 counts: small, numbered alike past 4 KiB, in windows of 128, 64
    // and 32 slots, and streamed (the slot data of each call's kind varies).
    let sizes = [3usize, 1_500, 2_500, 5_000, 15_000, 40_000];
    for n in [2, 3, 4] {
        world(n, &[], |r, eng, comm| {
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            for i in 0..calls {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let count = sizes[(x % sizes.len() as u64) as usize];
                let root = (x >> 8) as usize % n;
                let what = format!("n={n} call={i} count={count} root={root}");
                let block = |p: usize| data(p + 7 * i, count);
                match (x >> 16) % 5 {
                    0 => {
                        let mut buf = if r == root {
                            block(root)
                        } else {
                            vec![0u8; 4 * count]
                        };
                        coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                        assert!(buf == block(root), "bcast {what}");
                    }
                    // Ranks take either entry of `MPI_Gather` and `MPI_Scatter`.
                    1 => {
                        let len = 4 * count;
                        let mut all = vec![0u8; len * n];
                        let out = (r == root).then_some(&mut all[..]);
                        gather_either(&mut Ctx::new(eng, comm), &block(r), out, len, root);
                        if r == root {
                            let want: Vec<u8> = (0..n).flat_map(block).collect();
                            assert!(all == want, "gather {what}");
                        }
                    }
                    2 => {
                        let len = 4 * count;
                        let all: Vec<u8> = (0..n).flat_map(block).collect();
                        let send = (r == root).then_some(&all[..]);
                        let mut mine = vec![0u8; len];
                        scatter_either(&mut Ctx::new(eng, comm), send, len, &mut mine, root);
                        assert!(mine == block(r), "scatter {what}");
                    }
                    3 => {
                        let send = data(r + 7 * i, count);
                        let mut recv = vec![0u8; send.len()];
                        let c = &mut Ctx::new(eng, comm);
                        coll::allreduce::allreduce(c, Some(&send), &mut recv, &SUM).unwrap();
                        let want = fold_ref((0..n).map(|p| data(p + 7 * i, count)), &SUM);
                        assert!(recv == want, "allreduce {what}");
                    }
                    _ => {
                        // Rank p's block for rank q: the call's data of p + n * q.
                        let len = 4 * (count / n).max(1);
                        let piece = |p: usize, q: usize| data(p + n * q + 7 * i, len / 4);
                        let send: Vec<u8> = (0..n).flat_map(|q| piece(r, q)).collect();
                        let blocks: Vec<(usize, usize)> = (0..n).map(|q| (q * len, len)).collect();
                        let mut recv = vec![0u8; n * len];
                        let c = &mut Ctx::new(eng, comm);
                        coll::alltoall::alltoall(c, &send, &blocks, &mut recv, &blocks).unwrap();
                        let want: Vec<u8> = (0..n).flat_map(|p| piece(p, r)).collect();
                        assert!(recv == want, "alltoall {what}");
                    }
                }
            }
            // Small calls past a row's window of 64, then gathers in such
            // a window whose writers are paced where ranks outnumber cores:
            // the first jumps to the next row (on every rank, whichever
            // entry it takes), and its pace reaches back into the previous
            // row's numbers past the last one used. Then a bcast in a
            // window of 32.
            for round in 0..3 {
                for k in 0..70 + round {
                    let mut v = if r == 0 { data(k, 3) } else { vec![0u8; 12] };
                    coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut v, 0).unwrap();
                    assert!(v == data(k, 3), "n={n} round {round} bcast {k}");
                }
                for k in 0..2 {
                    let mut all = vec![0u8; 20_000 * n];
                    let out = (r == 0).then_some(&mut all[..]);
                    gather_either(
                        &mut Ctx::new(eng, comm),
                        &data(r + k, 5_000),
                        out,
                        20_000,
                        0,
                    );
                    if r == 0 {
                        let want: Vec<u8> = (0..n).flat_map(|p| data(p + k, 5_000)).collect();
                        assert!(all == want, "n={n} round {round} gather {k}");
                    }
                }
                let mut v = if r == 0 {
                    data(round, 15_000)
                } else {
                    vec![0u8; 60_000]
                };
                coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut v, 0).unwrap();
                assert!(v == data(round, 15_000), "n={n} round {round} wide bcast");
                // Past a window of 128, a scatter from rank 1 whose ranks
                // take either entry, which jumps alike on every rank.
                for k in 0..140 {
                    let mut v = if r == 0 { data(k, 3) } else { vec![0u8; 12] };
                    coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut v, 0).unwrap();
                }
                let (len, root) = (10_000, 1);
                let all: Vec<u8> = (0..n).flat_map(|p| data(p + round, len / 4)).collect();
                let send = (r == root).then_some(&all[..]);
                let mut mine = vec![0u8; len];
                scatter_either(&mut Ctx::new(eng, comm), send, len, &mut mine, root);
                assert!(
                    mine == data(r + round, len / 4),
                    "n={n} round {round} scatter"
                );
            }
        });
    }
}

/// An in-place allreduce or reduce-scatter forced to pull gives the same
/// result once a rank cannot read: nobody wrote a buffer a peer still
/// reads before every rank's first reads had succeeded, so the fallback
/// still finds every input. So does a broadcast whose root cannot write
/// its share (2 ranks) or whose reader cannot read.
#[test]
fn pulled_calls_in_place_fall_back() {
    for n in [2, 3, 4] {
        let count = 20_001;
        for coll in ["allreduce", "reduce_scatter", "bcast"] {
            world(n, &[(coll, "pull")], |r, eng, comm| {
                let could =
                    Ctx::new(eng, comm).pulls() && ferrocoll::transport::shm::cma::allowed();
                for round in 0..2 {
                    if round == 1 && r == n - 1 {
                        eng.stop_pulls();
                    }
                    let mut buf = data(r + round, count);
                    let want = fold_ref((0..n).map(|p| data(p + round, count)), &SUM);
                    let c = &mut Ctx::new(eng, comm);
                    let what = format!("{coll} n={n} round {round} rank {r}");
                    if coll == "bcast" {
                        // The rank that cannot pull is the root at 2 ranks
                        // (its share fails), a reader above.
                        let root = if n == 2 { 1 } else { 0 };
                        let mut b = if r == root {
                            data(77 + round, count)
                        } else {
                            vec![0u8; count * 4]
                        };
                        coll::bcast::bcast(c, &mut b, root).unwrap();
                        assert!(b == data(77 + round, count), "{what}");
                    } else if coll == "allreduce" {
                        coll::allreduce::allreduce(c, None, &mut buf, &SUM).unwrap();
                        assert!(buf == want, "{what}");
                    } else {
                        // Uneven blocks, in rank order.
                        let cnts: Vec<usize> = (0..n).map(|p| (count / n - p) * 4).collect();
                        coll::reduce_scatter::reduce_scatter(c, None, &mut buf, &cnts, &SUM)
                            .unwrap();
                        let off: usize = cnts[..r].iter().sum();
                        assert!(buf[..cnts[r]] == want[off..off + cnts[r]], "{what}");
                    }
                    assert_eq!(Ctx::new(eng, comm).pulls(), could && round == 0, "{what}");
                }
            });
        }
    }
}

/// A pulled gather (or allreduce) whose ranks disagree on a length fails
/// on every rank (not only the one that sees it) and writes nothing out
/// of place; the next call runs as usual.
#[test]
fn pulled_calls_with_mismatched_counts_fail_everywhere() {
    for n in [2, 3] {
        world(
            n,
            &[("gather", "pull"), ("allreduce", "pull")],
            |r, eng, comm| {
                if !(Ctx::new(eng, comm).pulls() && ferrocoll::transport::shm::cma::allowed()) {
                    return;
                }
                let b = 40_000;
                let mut g = vec![7u8; n * b + 64];
                let out = (r == 0).then_some(&mut g[..n * b]);
                // Rank 1 sends 4 bytes more than its block.
                let send = data(r, (b + if r == 1 { 4 } else { 0 }) / 4);
                let res = coll::gather::gather(&mut Ctx::new(eng, comm), Some(&send), out, b, 0);
                assert!(res.is_err(), "n={n} rank {r}: {res:?}");
                assert!(
                    g[n * b..].iter().all(|&x| x == 7),
                    "written past the blocks"
                );
                let out = (r == 0).then_some(&mut g[..n * b]);
                let send = data(r + 3, b / 4);
                coll::gather::gather(&mut Ctx::new(eng, comm), Some(&send), out, b, 0).unwrap();
                if r == 0 {
                    let want: Vec<u8> = (0..n).flat_map(|p| data(p + 3, b / 4)).collect();
                    assert!(g[..n * b] == want[..], "n={n}");
                }
                // Rank 1's vector is an element longer.
                let count = 20_000 + usize::from(r == 1);
                let mut v = vec![7u8; count * 4 + 64];
                let c = &mut Ctx::new(eng, comm);
                let res =
                    coll::allreduce::allreduce(c, Some(&data(r, count)), &mut v[..count * 4], &SUM);
                assert!(res.is_err(), "allreduce n={n} rank {r}: {res:?}");
                assert!(
                    v[count * 4..].iter().all(|&x| x == 7),
                    "written past the vector"
                );
                let mut v = vec![0u8; 80_000];
                let c = &mut Ctx::new(eng, comm);
                coll::allreduce::allreduce(c, Some(&data(r, 20_000)), &mut v, &SUM).unwrap();
                assert!(v == sum_ref(n, 20_000), "allreduce n={n} after");
            },
        );
    }
}

/// Gathers `b` bytes from rank `r` (`data(r + root)`) to `root`, which
/// checks every block and that nothing landed past them.
fn gather_checked(c: &mut Ctx, r: usize, b: usize, root: usize, what: &str) {
    let n = c.size();
    let mut g = vec![7u8; n * b + 64];
    let out = (r == root).then_some(&mut g[..n * b]);
    coll::gather::gather(c, Some(&data(r + root, b / 4)), out, b, root).unwrap();
    if r == root {
        let want: Vec<u8> = (0..n).flat_map(|p| data(p + root, b / 4)).collect();
        assert!(g[..n * b] == want[..], "{what}");
        assert!(
            g[n * b..].iter().all(|&x| x == 7),
            "{what}: past the blocks"
        );
    }
}

/// Where ranks outnumber cores, a pulled gather's ranks that share the
/// root's core offer their blocks and the root reads them, while the
/// others write theirs (`pull::gatherv`). With the 4 ranks pinned two to a
/// CPU (so rank `root + 2` shares the root's), every root gets every block,
/// and a block of the wrong length from the rank the root reads fails the
/// call on every rank and writes nothing out of place.
#[test]
fn crowded_pulled_gather_reads_the_roots_core_mates() {
    let n = 4;
    world(n, &[("gather", "pull")], |r, eng, comm| {
        if !(Ctx::new(eng, comm).pulls() && ferrocoll::transport::shm::cma::allowed()) {
            return;
        }
        // Counted as crowded whatever the host: two ranks per CPU. Where a
        // pin fails (one CPU), ranks decide from where they run; the
        // results must be the same either way.
        ferrocoll::bootstrap::bind::pin(r % 2);
        eng.set_machine_ranks(usize::MAX);
        coll::barrier::barrier(&mut Ctx::new(eng, comm)).unwrap();
        let b = 40_000;
        for root in 0..n {
            let what = format!("root {root} rank {r}");
            gather_checked(&mut Ctx::new(eng, comm), r, b, root, &what);
            // The root's core-mate sends 4 bytes more than its block.
            let long = r == (root + 2) % n;
            let send = data(r, (b + if long { 4 } else { 0 }) / 4);
            let mut g = vec![7u8; n * b + 64];
            let out = (r == root).then_some(&mut g[..n * b]);
            let res = coll::gather::gather(&mut Ctx::new(eng, comm), Some(&send), out, b, root);
            assert!(res.is_err(), "{what}: {res:?}");
            assert!(
                g[n * b..].iter().all(|&x| x == 7),
                "{what}: written past the blocks"
            );
        }
    });
}

/// With two ranks on cores of their own, a pulled gather's other rank
/// writes the front of its block and the root reads the rest itself
/// (`pull::root_share`): either root gets every block whole, at lengths
/// whose share is no page, some pages and a partial one, and past the
/// largest shared block (none); nothing lands past the blocks, and a block
/// of the wrong length fails the call on both ranks.
#[test]
fn two_rank_pulled_gather_shares_the_block_with_the_root() {
    let n = 2;
    world(n, &[("gather", "pull")], |r, eng, comm| {
        if !(Ctx::new(eng, comm).pulls() && ferrocoll::transport::shm::cma::allowed()) {
            return;
        }
        for b in [40_000, 1_048_676, (8 << 20) + 4096] {
            for root in 0..n {
                let what = format!("block {b} root {root} rank {r}");
                gather_checked(&mut Ctx::new(eng, comm), r, b, root, &what);
            }
        }
        let b = 40_000;
        let send = data(r, (b + if r == 1 { 4096 } else { 0 }) / 4);
        let mut g = vec![7u8; n * b + 64];
        let out = (r == 0).then_some(&mut g[..n * b]);
        let res = coll::gather::gather(&mut Ctx::new(eng, comm), Some(&send), out, b, 0);
        assert!(res.is_err(), "rank {r}: {res:?}");
        assert!(
            g[n * b..].iter().all(|&x| x == 7),
            "rank {r}: written past the blocks"
        );
    });
}

/// A 2-rank scatter whose block overflows the root's slot goes as one
/// plain message below `LONE_EAGER` (`slots::scatter_kind`), as does the
/// v-variant's; either root, blocks that are not a whole number of lines,
/// and the receiver's bytes past its block left alone.
#[test]
fn two_rank_scatter_of_mid_blocks_goes_as_a_message() {
    let n = 2;
    world(n, &[], |r, eng, comm| {
        for b in [80_004, 300_004] {
            for root in 0..n {
                let what = format!("block {b} root {root} rank {r}");
                let src: Vec<u8> = (0..n * b).map(|i| (i * 13 + root) as u8).collect();
                let mut out = vec![5u8; b + 64];
                let send = (r == root).then_some(&src[..]);
                let c = &mut Ctx::new(eng, comm);
                coll::gather::scatter(c, send, b, Some(&mut out[..b]), root).unwrap();
                assert!(out[..b] == src[r * b..(r + 1) * b], "scatter {what}");
                assert!(
                    out[b..].iter().all(|&x| x == 5),
                    "scatter {what}: past the block"
                );
                // The v-variant, blocks in reverse order with a gap.
                let vb = [(b + 100, b - 4), (0, b)];
                let src: Vec<u8> = (0..2 * b + 96).map(|i| (i * 7 + root) as u8).collect();
                let send = (r == root).then_some(&src[..]);
                let mut out = vec![5u8; vb[r].1];
                let c = &mut Ctx::new(eng, comm);
                coll::gather::scatterv(c, send, &vb, Some(&mut out), root).unwrap();
                assert!(out == src[vb[r].0..vb[r].0 + vb[r].1], "scatterv {what}");
            }
        }
    });
}

/// Where ranks outnumber cores, a broadcast of 8 MiB or more is pulled and
/// shared (`select::share_bcast`): every rank reads the front of the
/// root's vector while the root writes the back into each. With 3 and 4
/// ranks two to a CPU, every root, a length that is not a whole number of
/// pages, and bytes past the buffer left alone.
#[test]
fn crowded_bcast_of_8_mib_is_shared() {
    for n in [3, 4] {
        world(n, &[], |r, eng, comm| {
            ferrocoll::bootstrap::bind::pin(r % 2);
            eng.set_machine_ranks(usize::MAX);
            let count = (8 << 20) / 4 + 1001;
            for root in 0..n {
                let what = format!("n={n} root {root} rank {r}");
                let mut buf = if r == root {
                    data(root + 40, count)
                } else {
                    vec![7u8; count * 4]
                };
                buf.extend_from_slice(&[9u8; 64]);
                let c = &mut Ctx::new(eng, comm);
                coll::bcast::bcast(c, &mut buf[..count * 4], root).unwrap();
                assert!(buf[..count * 4] == data(root + 40, count), "{what}");
                assert!(
                    buf[count * 4..].iter().all(|&x| x == 9),
                    "{what}: past the end"
                );
            }
        });
    }
}

/// Where ranks outnumber cores, an automatic allreduce of megabytes takes
/// one way on every rank (on Intel CPUs it pulls from 1 MiB while all
/// inputs together stay within 32 MiB, `select::crowded_pulls`; elsewhere
/// it streams): with 3 and 4 ranks two to a CPU, just past 1 MiB, at the
/// bound and past it, from `send` and in place, and a non-commutative op
/// in rank order.
#[test]
fn crowded_allreduce_of_megabytes_agrees_on_its_way() {
    for n in [3, 4] {
        let counts = [
            (1 << 20) / 4 + 3,
            (32 << 20) / 4 / n,
            (32 << 20) / 4 / n + 1,
        ];
        world(n, &[], |r, eng, comm| {
            ferrocoll::bootstrap::bind::pin(r % 2);
            eng.set_machine_ranks(usize::MAX);
            for count in counts {
                let what = format!("n={n} count={count} rank {r}");
                let want = sum_ref(n, count);
                let send = data(r, count);
                let mut recv = vec![0u8; send.len()];
                let c = &mut Ctx::new(eng, comm);
                coll::allreduce::allreduce(c, Some(&send), &mut recv, &SUM).unwrap();
                assert!(recv == want, "{what}");
                let mut buf = send;
                let c = &mut Ctx::new(eng, comm);
                coll::allreduce::allreduce(c, None, &mut buf, &SUM).unwrap();
                assert!(buf == want, "{what} in place");
            }
            // Non-commutative, 2 MiB of (a, b) pairs.
            let pairs = (2 << 20) / 8;
            let want = fold_ref((0..n).map(|q| affine(q, pairs)), &COMPOSE);
            let mut buf = affine(r, pairs);
            let c = &mut Ctx::new(eng, comm);
            coll::allreduce::allreduce(c, None, &mut buf, &COMPOSE).unwrap();
            assert!(buf == want, "n={n} rank {r}: non-commutative in place");
        });
    }
}

/// Collectives forced to read their peers' memory (`pull`) give the same
/// results once a rank cannot (as if its kernel refused): every member
/// then runs that call another way and pulls no more (reduce: in place at
/// the root, whose input the fallback still needs). MPI_Gather and
/// MPI_Scatter (one length everywhere) and MPI_Alltoall take the pulls
/// as well as the v-variants the matrix above runs.
#[test]
fn pulls_fall_back_when_a_rank_cannot_read() {
    let algos = [
        ("allgather", "pull"),
        ("alltoall", "pull"),
        ("bcast", "pull"),
        ("gather", "pull"),
        ("scatter", "pull"),
        ("reduce", "pull"),
    ];
    for n in [2, 3, 4] {
        let count = 20_001;
        let b = count * 4;
        world(n, &algos, |r, eng, comm| {
            // Not over TCP (`FERROCOLL_TRANSPORT=tcp`): no slots there; nor
            // where the kernel forbids reads (they then fail at once).
            let could = Ctx::new(eng, comm).pulls() && ferrocoll::transport::shm::cma::allowed();
            for round in 0..2 {
                let what = format!("n={n} round {round} rank {r}");
                if round == 1 && r == n - 1 {
                    eng.stop_pulls();
                }
                // In place at the root: a refused read must leave its input.
                let root = round % n;
                let mut acc = data(r + 13, count);
                let (send, recv) = if r == root {
                    (None, Some(&mut acc[..]))
                } else {
                    (Some(data(r + 13, count)), None)
                };
                let c = &mut Ctx::new(eng, comm);
                coll::reduce::reduce(c, send.as_deref(), recv, root, &SUM).unwrap();
                if r == root {
                    let want = fold_ref((0..n).map(|p| data(p + 13, count)), &SUM);
                    assert!(acc == want, "reduce {what}");
                }
                // Every rank read in that reduce: a refusal is known.
                assert_eq!(Ctx::new(eng, comm).pulls(), could && round == 0, "{what}");

                let blocks: Vec<(usize, usize)> = (0..n).map(|p| (p * b, b)).collect();
                let mut all = vec![0u8; n * b];
                let c = &mut Ctx::new(eng, comm);
                coll::allgather::allgatherv(c, Some(&data(r + round, count)), &mut all, &blocks)
                    .unwrap();
                let want: Vec<u8> = (0..n).flat_map(|p| data(p + round, count)).collect();
                assert!(all == want, "allgather {what}");

                let send: Vec<u8> = (0..n).flat_map(|p| data(r * n + p, count)).collect();
                let mut recv = vec![0u8; n * b];
                let c = &mut Ctx::new(eng, comm);
                coll::alltoall::alltoall(c, &send, &blocks, &mut recv, &blocks).unwrap();
                let want: Vec<u8> = (0..n).flat_map(|p| data(p * n + r, count)).collect();
                assert!(recv == want, "alltoall {what}");

                let mut buf = if r == root {
                    data(99, count)
                } else {
                    vec![0u8; b]
                };
                coll::bcast::bcast(&mut Ctx::new(eng, comm), &mut buf, root).unwrap();
                assert!(buf == data(99, count), "bcast {what}");

                let mut g = vec![0u8; n * b];
                let out = (r == root).then_some(&mut g[..]);
                let c = &mut Ctx::new(eng, comm);
                coll::gather::gather(c, Some(&data(r + 5, count)), out, b, root).unwrap();
                if r == root {
                    let want: Vec<u8> = (0..n).flat_map(|p| data(p + 5, count)).collect();
                    assert!(g == want, "gather {what}");
                }

                let src: Vec<u8> = (0..n).flat_map(|p| data(p + 9, count)).collect();
                let send = (r == root).then_some(&src[..]);
                let mut mine = vec![0u8; b];
                let c = &mut Ctx::new(eng, comm);
                coll::gather::scatter(c, send, b, Some(&mut mine), root).unwrap();
                assert!(mine == data(r + 9, count), "scatter {what}");
            }
        });
    }
}

/// Slot all-to-alls whose ranks write their parts in both forms in one
/// call: blocks of one length (a tagged length, then the blocks) or of
/// several (a table). Each rank switches form from call to call, and again
/// when the slots come round (256 calls), so a table lands where the same
/// rank's tagged length lay before; blocks are back to back or with gaps.
/// A slot scatter(v) from each root in turn does the same.
#[test]
fn slot_alltoallv_mixes_parts_of_one_length_and_tables() {
    for n in [2, 3, 4] {
        world(
            n,
            &[("alltoall", "slots"), ("scatter", "slots")],
            |r, eng, comm| {
                let one_len = |p: usize, t: usize| (t + p + t / 256).is_multiple_of(2);
                let len = |p: usize, q: usize, t: usize| {
                    if one_len(p, t) {
                        4 * ((t + p) % 4)
                    } else {
                        4 * ((p + 2 * q + t) % 5)
                    }
                };
                let byte =
                    |p: usize, q: usize, t: usize, i: usize| (p * 31 + q * 7 + t * 13 + i) as u8;
                // Rank `p`'s send buffer and blocks in round `t`.
                let sent = |p: usize, t: usize| {
                    let (mut send, mut blocks) = (Vec::new(), Vec::new());
                    for q in 0..n {
                        send.extend(std::iter::repeat_n(0xEE, t % 3));
                        blocks.push((send.len(), len(p, q, t)));
                        send.extend((0..len(p, q, t)).map(|i| byte(p, q, t, i)));
                    }
                    (send, blocks)
                };
                for t in 0..520 {
                    let (send, sblocks) = sent(r, t);
                    let mut rblocks = Vec::new();
                    let mut at = 0;
                    for p in 0..n {
                        rblocks.push((at, len(p, r, t)));
                        at += len(p, r, t);
                    }
                    let mut recv = vec![0u8; at];
                    let c = &mut Ctx::new(eng, comm);
                    coll::alltoall::alltoallv(c, &send, &sblocks, &mut recv, &rblocks).unwrap();
                    for (p, &(o, l)) in rblocks.iter().enumerate() {
                        let want: Vec<u8> = (0..l).map(|i| byte(p, r, t, i)).collect();
                        assert!(recv[o..o + l] == want[..], "n={n} t={t} rank {r} from {p}");
                    }
                    let root = t % n;
                    let (root_send, root_blocks) = sent(root, t);
                    let mut out = vec![0u8; len(root, r, t)];
                    let c = &mut Ctx::new(eng, comm);
                    let s = (r == root).then_some(&root_send[..]);
                    coll::gather::scatterv(c, s, &root_blocks, Some(&mut out), root).unwrap();
                    let want: Vec<u8> = (0..out.len()).map(|i| byte(root, r, t, i)).collect();
                    assert!(out == want, "scatterv n={n} t={t} rank {r} from {root}");
                }
            },
        );
    }
}

/// A slot all-to-all whose sender's blocks disagree in length with what
/// the receiver expects fails there, in either form of the sender's part,
/// leaves that block alone, and the next call runs as usual. (Not over
/// TCP, `FERROCOLL_TRANSPORT=tcp`: no slots there.)
#[test]
fn slot_alltoallv_with_mismatched_counts_fails() {
    world(2, &[("alltoall", "slots")], |r, eng, comm| {
        if !Ctx::new(eng, comm).has_slots() {
            return;
        }
        for one_len in [true, false] {
            // Rank 0 sends 8 bytes to itself and 8 (or 4) to rank 1, which
            // expects 12 from it; rank 1 sends what rank 0 expects.
            let (send, sblocks, rblocks): (Vec<u8>, Vec<_>, Vec<_>) = if r == 0 {
                let to1 = if one_len { 8 } else { 4 };
                (
                    vec![1; 8 + to1],
                    vec![(0, 8), (8, to1)],
                    vec![(0, 8), (8, 4)],
                )
            } else {
                (vec![2; 16], vec![(0, 4), (4, 12)], vec![(0, 12), (12, 12)])
            };
            let total = rblocks.iter().map(|b| b.1).sum();
            let mut recv = vec![9u8; total];
            let c = &mut Ctx::new(eng, comm);
            let res = coll::alltoall::alltoallv(c, &send, &sblocks, &mut recv, &rblocks);
            if r == 1 {
                let e = res.expect_err("rank 1 expects 12 bytes from rank 0");
                assert!(e.to_string().contains("mismatched counts"), "{e}");
                assert!(recv[..12].iter().all(|&x| x == 9), "block written");
            } else {
                res.unwrap();
                assert!(recv[8..] == [2; 4], "rank 0 from rank 1");
            }
            let mut recv = [0u8; 8];
            let c = &mut Ctx::new(eng, comm);
            let blocks = [(0, 4), (4, 4)];
            coll::alltoall::alltoallv(c, &[r as u8 + 5; 8], &blocks, &mut recv, &blocks).unwrap();
            assert!(recv == [5, 5, 5, 5, 6, 6, 6, 6], "rank {r} after");
        }
    });
}

/// `MPI_Scatter` streamed through the slots (`coll::stream::scatter`),
/// forced and as chosen by size: every rank gets its block whether the
/// blocks are a line, a piece (`SLOT_DATA / (n - 1)`) or several pieces
/// with a short last one, from the first or the last rank, in place at the
/// root, and with the root's blocks out of order and apart
/// (`scatter_uniform`); nothing past a block is written.
#[test]
fn scatter_streams_blocks_of_one_length() {
    for algo in ["stream", "auto"] {
        for n in [2, 3, 4, 8] {
            let piece = 65536 / (n - 1) / 64 * 64;
            world(n, &[("scatter", algo)], |r, eng, comm| {
                for b in [0, 64, piece, piece + 4, 3 * piece + 20, 300_004] {
                    for root in [0, n - 1] {
                        let what = format!("{algo} n={n} block {b} root {root} rank {r}");
                        let src: Vec<u8> = (0..n * b).map(|i| (i * 31 + root) as u8).collect();
                        let send = (r == root).then_some(&src[..]);
                        let mut out = vec![5u8; b + 64];
                        let c = &mut Ctx::new(eng, comm);
                        coll::gather::scatter(c, send, b, Some(&mut out[..b]), root).unwrap();
                        assert!(out[..b] == src[r * b..(r + 1) * b], "{what}");
                        assert!(out[b..].iter().all(|&x| x == 5), "{what}: past the block");

                        // In place at the root: its block stays.
                        let mut keep = src.clone();
                        let c = &mut Ctx::new(eng, comm);
                        if r == root {
                            coll::gather::scatter(c, Some(&keep), b, None, root).unwrap();
                        } else {
                            coll::gather::scatter(c, None, b, Some(&mut keep[..b]), root).unwrap();
                            assert!(keep[..b] == src[r * b..(r + 1) * b], "{what}: in place");
                        }

                        // The root's blocks in reverse order, 64 bytes apart.
                        let blocks: Vec<(usize, usize)> =
                            (0..n).map(|p| ((n - 1 - p) * (b + 64), b)).collect();
                        let far: Vec<u8> = (0..n * (b + 64)).map(|i| (i * 7) as u8).collect();
                        let (send, layout) = if r == root {
                            (Some(&far[..]), &blocks[..])
                        } else {
                            (None, &[][..])
                        };
                        let mut out = vec![0u8; b];
                        let c = &mut Ctx::new(eng, comm);
                        coll::gather::scatter_uniform(c, send, layout, b, Some(&mut out), root)
                            .unwrap();
                        let at = blocks[r].0;
                        assert!(out == far[at..at + b], "{what}: blocks apart");
                    }
                }
            });
        }
    }
}

/// `MPI_Gather` streamed through the slots (`coll::stream::gather`),
/// forced and as chosen by size: the root gets every block whether it is
/// a line, a slot or several slots with a short last chunk, at either
/// end's root, in place at the root, and with the root's blocks out of
/// order and apart (`gatherv_uniform`); nothing past the blocks is
/// written.
#[test]
fn gather_streams_blocks_of_one_length() {
    for algo in ["stream", "auto"] {
        for n in [2, 3, 4, 8] {
            world(n, &[("gather", algo)], |r, eng, comm| {
                for b in [0, 64, 40_000, 65_536, 200_004] {
                    for root in [0, n - 1] {
                        let what = format!("{algo} n={n} block {b} root {root} rank {r}");
                        let mine: Vec<u8> = (0..b).map(|i| (i * 31 + r * 7 + root) as u8).collect();
                        let want: Vec<u8> = (0..n)
                            .flat_map(|p| (0..b).map(move |i| (i * 31 + p * 7 + root) as u8))
                            .collect();
                        let mut all = vec![5u8; n * b + 64];
                        let out = (r == root).then_some(&mut all[..n * b]);
                        let c = &mut Ctx::new(eng, comm);
                        coll::gather::gather(c, Some(&mine), out, b, root).unwrap();
                        if r == root {
                            assert!(all[..n * b] == want[..], "{what}");
                            assert!(all[n * b..].iter().all(|&x| x == 5), "{what}: past");
                        }

                        // In place at the root: its block is already there.
                        let mut all = vec![0u8; n * b];
                        let c = &mut Ctx::new(eng, comm);
                        if r == root {
                            all[r * b..(r + 1) * b].copy_from_slice(&mine);
                            coll::gather::gather(c, None, Some(&mut all), b, root).unwrap();
                            assert!(all == want, "{what}: in place");
                        } else {
                            coll::gather::gather(c, Some(&mine), None, b, root).unwrap();
                        }

                        // The root's blocks in reverse order, 64 bytes apart.
                        let blocks: Vec<(usize, usize)> =
                            (0..n).map(|p| ((n - 1 - p) * (b + 64), b)).collect();
                        let mut far = vec![9u8; n * (b + 64)];
                        let (out, layout) = if r == root {
                            (Some(&mut far[..]), &blocks[..])
                        } else {
                            (None, &[][..])
                        };
                        let c = &mut Ctx::new(eng, comm);
                        coll::gather::gatherv_uniform(c, Some(&mine), out, layout, b, root)
                            .unwrap();
                        if r == root {
                            for p in 0..n {
                                let at = blocks[p].0;
                                assert!(
                                    far[at..at + b] == want[p * b..(p + 1) * b],
                                    "{what}: apart"
                                );
                                assert!(
                                    far[at + b..at + b + 64].iter().all(|&x| x == 9),
                                    "{what}: gap"
                                );
                            }
                        }
                    }
                }
            });
        }
    }
}
