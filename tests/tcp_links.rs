//! TCP links between thread ranks on loop-back: strangers and holders of a
//! wrong secret are turned away while the job completes, and a peer whose
//! connection dies fails the operations waiting for it, naming it.

use ferrocoll::coll::Ctx;
use ferrocoll::comm::engine::Engine;
use ferrocoll::comm::Comm;
use ferrocoll::error::Error;
use ferrocoll::transport::shm::Segment;
use ferrocoll::transport::tcp::{auth::Secret, mesh};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two ranks wired over TCP with `nsocks` sockets (rank 1 dials); strangers
/// knock on rank 0's port first.
fn pair(strangers: bool, nsocks: usize) -> (Engine, Engine) {
    let seg = Arc::new(Segment::anonymous(2, 64 * 1024).unwrap());
    let secret = Secret::random().unwrap();
    let l0 = TcpListener::bind("127.0.0.1:0").unwrap();
    let a0 = l0.local_addr().unwrap();
    if strangers {
        // Garbage, then a well-formed handshake with the wrong secret.
        let mut g = TcpStream::connect(a0).unwrap();
        g.write_all(&[0x5a; 300]).unwrap();
        let wrong = Secret::random().unwrap();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(a0).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let r = ferrocoll::transport::tcp::auth::handshake(
                &mut s,
                &wrong,
                ferrocoll::transport::tcp::auth::Role::Connector,
                1,
            );
            assert!(r.is_err(), "a wrong secret must not pass");
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let (s2, sec2) = (seg.clone(), secret.clone());
    let t = std::thread::spawn(move || {
        let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
        let socks = mesh::connect_all(1, &l1, &[Some(a0), None], &sec2, deadline, nsocks).unwrap();
        Engine::over_shm_and_tcp(1, s2, socks).unwrap()
    });
    let addrs: [Option<SocketAddr>; 2] = [None, Some("127.0.0.1:9".parse().unwrap())];
    let socks = mesh::connect_all(0, &l0, &addrs, &secret, deadline, 1).unwrap();
    let e0 = Engine::over_shm_and_tcp(0, seg, socks).unwrap();
    (e0, t.join().unwrap())
}

fn exchange(e0: &mut Engine, e1: &mut Engine, len: usize) {
    let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let mut got = vec![0u8; len];
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut c = Comm::world(e0);
            Ctx::new(e0, &mut c).send(0, 1, &msg).unwrap();
        });
        s.spawn(|| {
            let mut c = Comm::world(e1);
            Ctx::new(e1, &mut c).recv(0, 0, &mut got).unwrap();
        });
    });
    assert!(got == msg, "{len} bytes over TCP");
}

/// Both ranks send `len` bytes to each other at once, then check what came.
fn swap(e0: &mut Engine, e1: &mut Engine, len: usize) {
    let pattern = |r: usize| -> Vec<u8> { (0..len).map(|i| (i * 13 + r * 101) as u8).collect() };
    std::thread::scope(|s| {
        for (r, e) in [(0usize, e0), (1, e1)] {
            let (mine, theirs) = (pattern(r), pattern(1 - r));
            s.spawn(move || {
                let mut got = vec![0u8; len];
                let mut c = Comm::world(e);
                Ctx::new(e, &mut c)
                    .sendrecv(0, 1 - r, &mine, 1 - r, &mut got)
                    .unwrap();
                assert!(got == theirs, "rank {r}: {len} bytes swapped over TCP");
            });
        }
    });
}

#[test]
fn strangers_are_rejected_and_the_job_completes() {
    let (mut e0, mut e1) = pair(true, 1);
    for len in [0, 1, 1000, 70_000, 5 << 20] {
        exchange(&mut e0, &mut e1, len);
    }
}

#[test]
fn several_sockets_per_pair_keep_the_byte_order() {
    // 3 sockets, so messages cross the 128 KiB stripes at odd offsets.
    let (mut e0, mut e1) = pair(true, 3);
    for len in [0, 1, 131_072 - 32, 131_072, 300_001, 5 << 20] {
        exchange(&mut e0, &mut e1, len);
        swap(&mut e0, &mut e1, len);
    }
    // Many small messages in a row walk the stream across every socket.
    for round in 0..200 {
        exchange(&mut e0, &mut e1, 1 + round * 997 % 5000);
    }
    swap(&mut e0, &mut e1, 9 << 20);
}

#[test]
fn a_dead_peer_fails_the_wait_naming_it() {
    let (mut e0, e1) = pair(false, 2);
    drop(e1); // closes rank 1's sockets, as its death would
    let mut buf = vec![0u8; 16];
    let start = Instant::now();
    let mut c = Comm::world(&e0);
    let r = Ctx::new(&mut e0, &mut c).recv(0, 1, &mut buf);
    assert!(
        matches!(r, Err(Error::PeerDied { rank: 1, .. })),
        "got {r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}
