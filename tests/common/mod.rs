//! Helpers shared by the thread-per-rank test binaries: a world of ranks
//! on threads, and i32 test data with its reference sum.
#![allow(dead_code)] // each test binary uses a different subset

use ferrocoll::coll::Reducer;
use ferrocoll::comm::engine::Engine;
use ferrocoll::comm::Comm;
use ferrocoll::transport::shm::Segment;
use ferrocoll::transport::tcp::{auth::Secret, mesh};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Runs `f(rank, engine, world)` on `n` threads sharing one segment (a
/// rank that panics aborts the process, since its peers would wait for it);
/// with `FERROCOLL_TRANSPORT=tcp` the ranks talk over authenticated
/// loop-back TCP connections instead of the rings.
pub fn world(n: usize, algo: &[(&str, &str)], f: impl Fn(usize, &mut Engine, &mut Comm) + Sync) {
    world_on_hosts(n, None, algo, f)
}

/// As `world`, but with `hosts` (a host number per rank) the ranks act as
/// if on those hosts: rings between ranks of one host, TCP across hosts.
pub fn world_on_hosts(
    n: usize,
    hosts: Option<&[u32]>,
    algo: &[(&str, &str)],
    f: impl Fn(usize, &mut Engine, &mut Comm) + Sync,
) {
    let seg = Arc::new(Segment::anonymous(n, 64 * 1024).unwrap());
    let forced = std::env::var("FERROCOLL_TRANSPORT").is_ok_and(|t| t == "tcp");
    let tcp = forced || hosts.is_some();
    let apart = |a: usize, b: usize| forced || hosts.is_some_and(|h| h[a] != h[b]);
    let secret = Secret::random().unwrap();
    let addrs = Mutex::new(vec![None; n]);
    let met = Barrier::new(n);
    std::thread::scope(|s| {
        for r in 0..n {
            let (seg, f, addrs, met, secret) = (seg.clone(), &f, &addrs, &met, &secret);
            s.spawn(move || {
                let mut eng = if tcp {
                    let l = TcpListener::bind("127.0.0.1:0").unwrap();
                    addrs.lock().unwrap()[r] = Some(l.local_addr().unwrap());
                    met.wait();
                    let mut peers: Vec<Option<SocketAddr>> = addrs.lock().unwrap().clone();
                    for (q, p) in peers.iter_mut().enumerate() {
                        if q == r || !apart(q, r) {
                            *p = None;
                        }
                    }
                    let deadline = Instant::now() + Duration::from_secs(30);
                    let nsocks = ferrocoll::param::params().nsocks;
                    let socks = mesh::connect_all(r, &l, &peers, secret, deadline, nsocks).unwrap();
                    Engine::over_shm_and_tcp(r, seg, socks).unwrap()
                } else {
                    Engine::over_shm(r, seg)
                };
                if let Some(h) = hosts {
                    eng.set_hosts(h.to_vec()).unwrap();
                }
                eng.algo = algo
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect();
                let mut comm = Comm::world(&eng);
                // The library's own panic catcher, for its message.
                if let Err(why) = ferrocoll::ffi::boundary::catch(|| f(r, &mut eng, &mut comm)) {
                    // The other ranks would wait for this one forever (a
                    // thread's death is not a process's, which the engine
                    // notices): fail the whole binary now instead of
                    // hanging. Written past the test harness's capture,
                    // which an abort would throw away.
                    let _ = writeln!(
                        std::io::stderr(),
                        "rank {r} of {n} panicked: {why}; aborting the test binary"
                    );
                    std::process::abort();
                }
            });
        }
    });
}

pub fn val(r: usize, i: usize) -> i32 {
    ((r * 131 + i * 7) % 1000) as i32 - 300
}

pub fn data(r: usize, count: usize) -> Vec<u8> {
    (0..count).flat_map(|i| val(r, i).to_ne_bytes()).collect()
}

pub fn sum_i32(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(4)) {
        let v = i32::from_ne_bytes(s.try_into().unwrap())
            .wrapping_add(i32::from_ne_bytes((&*d).try_into().unwrap()));
        d.copy_from_slice(&v.to_ne_bytes());
    }
}

pub const SUM: Reducer<'static> = Reducer {
    extent: 4,
    commutative: true,
    apply: &sum_i32,
};

pub fn fold_ref(parts: impl Iterator<Item = Vec<u8>>, red: &Reducer) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = parts.collect();
    let mut acc = parts.last().unwrap().clone();
    for p in parts.iter().rev().skip(1) {
        (red.apply)(p, &mut acc);
    }
    acc
}

pub fn sum_ref(n: usize, count: usize) -> Vec<u8> {
    fold_ref((0..n).map(|r| data(r, count)), &SUM)
}
