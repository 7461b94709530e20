//! Bounded fuzzing of every target in `ferrocoll::fuzz`, for CI: each runs
//! its corpus (`fuzz/corpus/<target>/`), then random mutations of it for
//! `FERROCOLL_FUZZ_SECS` seconds (default 10; seed `FERROCOLL_FUZZ_SEED`,
//! printed). A panic fails the test and saves the input under
//! `target/fuzz-crashes/`; so does any single allocation over
//! `ALLOC_LIMIT` or a peak of live heap over `LIVE_LIMIT` (the counting
//! allocator below sees every allocation of the process). Coverage-guided
//! runs use cargo fuzz on the same targets (`fuzz/README.md`).

use ferrocoll::fuzz::{Target, MAX_INPUT, TARGETS};
use ferrocoll::testrng::Rng;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Largest single allocation any input may cause: the engine buffers at
/// most 4 MiB of a message ahead of its bytes, a TCP link reads at most
/// 4 MiB ahead, a store value is at most 1 MiB.
const ALLOC_LIMIT: usize = 16 << 20;
/// Most heap live at once, every target and thread together.
const LIVE_LIMIT: usize = 256 << 20;

struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_sub(l.size(), Relaxed);
        note(new);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

fn note(size: usize) {
    LARGEST.fetch_max(size, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Values that tend to sit on boundaries of length and count checks.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    7,
    8,
    31,
    32,
    33,
    127,
    128,
    255,
    4096,
    65535,
    65536,
    1 << 20,
    (1 << 20) + 1,
    i32::MAX as u64,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    i64::MAX as u64,
    1 << 63,
    u64::MAX,
];

/// One to eight stacked mutations of `seed` (bytes flipped, set, inserted,
/// deleted, duplicated, boundary integers written, spliced with `other`).
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(32)).min(v.len());
                v.drain(at.min(end)..end);
            }
            4 if !v.is_empty() => {
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(64)).min(v.len());
                let piece = v[start..end].to_vec();
                v.splice(at..at, piece);
            }
            5 | 6 => {
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let x = if rng.below(2) == 0 {
                    x
                } else {
                    x.wrapping_neg()
                };
                let w = [1usize, 2, 4, 8][rng.below(4)];
                let bytes = &x.to_le_bytes()[..w];
                let end = (at + w).min(v.len());
                v.splice(at..end, bytes.iter().copied());
            }
            _ if !other.is_empty() => {
                let start = rng.below(other.len());
                let end = (start + 1 + rng.below(256)).min(other.len());
                v.splice(at..at, other[start..end].iter().copied());
            }
            _ => v.push(rng.next() as u8),
        }
    }
    v.truncate(MAX_INPUT);
    v
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/corpus").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).expect("corpus file"))
        .collect();
    assert!(!seeds.is_empty(), "corpus {} is empty", dir.display());
    seeds
}

/// Runs `f` on `input`; on a panic or an allocation over the limits, saves
/// the input and fails naming the file.
fn run_one(name: &str, f: fn(&[u8]), input: &[u8]) {
    let ok = std::panic::catch_unwind(|| f(input)).is_ok();
    let largest = LARGEST.load(Relaxed);
    let peak = PEAK.load(Relaxed);
    if ok && largest <= ALLOC_LIMIT && peak <= LIVE_LIMIT {
        return;
    }
    let dir = root().join("target/fuzz-crashes");
    let _ = std::fs::create_dir_all(&dir);
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let file = dir.join(format!("{name}-{hash:016x}"));
    let _ = std::fs::write(&file, input);
    panic!(
        "fuzz target {name}: {} on a {}-byte input, saved as {} \
         (largest allocation {largest} B, peak live heap {peak} B); \
         replay: cargo test --release --features fuzzing --test fuzz replay -- --nocapture \
         with FERROCOLL_FUZZ_REPLAY={}",
        if ok {
            "allocation over the limit"
        } else {
            "panic"
        },
        input.len(),
        file.display(),
        file.display()
    );
}

fn budget() -> Duration {
    let secs = std::env::var("FERROCOLL_FUZZ_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(10.0);
    Duration::from_secs_f64(secs.max(0.0))
}

fn fuzz(name: &str) {
    let &(_, f): &Target = TARGETS
        .iter()
        .find(|t| t.0 == name)
        .expect("a known target");
    let seeds = corpus(name);
    for s in &seeds {
        run_one(name, f, s);
    }
    let seed = std::env::var("FERROCOLL_FUZZ_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let mut rng = Rng(seed | 1);
    let (start, limit) = (Instant::now(), budget());
    let mut execs = seeds.len();
    while start.elapsed() < limit {
        let a = &seeds[rng.below(seeds.len())];
        let b = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, a, b);
        run_one(name, f, &input);
        execs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz {name}: {execs} execs in {secs:.1} s ({:.0}/s), {} seeds, seed {seed}; \
         largest allocation so far {} KiB, peak live heap {} KiB",
        execs as f64 / secs.max(1e-9),
        seeds.len(),
        LARGEST.load(Relaxed) >> 10,
        PEAK.load(Relaxed) >> 10
    );
}

#[test]
fn tcp_stream() {
    fuzz("tcp_stream");
}

#[test]
fn handshake() {
    fuzz("handshake");
}

#[test]
fn store_server() {
    fuzz("store_server");
}

#[test]
fn store_replies() {
    fuzz("store_replies");
}

#[test]
fn pmi() {
    fuzz("pmi");
}

#[test]
fn handles() {
    fuzz("handles");
}

/// A peer whose stream stops making sense fails the waits on it with an
/// error naming it, and nothing panics.
#[test]
fn malformed_stream_fails_naming_the_sender() {
    use ferrocoll::comm::buffer::RawBuf;
    use ferrocoll::comm::engine::{Engine, Match};
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut theirs = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut eng = Engine::fuzz_over_tcp(l.accept().unwrap().0).unwrap();
    let mut buf = [0u8; 8];
    let m = Match {
        source: Some(1),
        ctx: 0,
        tag: Some(0),
    };
    // SAFETY: `buf` outlives the request, which is waited for below.
    let id = eng
        .irecv(m, unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) })
        .unwrap();
    theirs.write_all(&[0x5a; 32]).unwrap();
    let start = Instant::now();
    while !eng.fuzz_finished() && start.elapsed() < Duration::from_secs(5) {
        eng.progress();
    }
    let e = eng.wait(id, "MPI_Recv").unwrap_err().to_string();
    assert!(
        e.contains("rank 1 sent a malformed message stream: a header with a bad magic"),
        "{e}"
    );
    assert!(
        eng.irecv(m, RawBuf::EMPTY).is_err(),
        "the engine stays failed"
    );
}

/// A send to a peer whose connection closed fails naming it, instead of
/// completing into the dead socket for ever (a rank that only sends, as
/// rank 0 of a scan, never noticed otherwise).
#[test]
fn sends_to_a_closed_connection_fail_naming_the_peer() {
    use ferrocoll::comm::buffer::RawBuf;
    use ferrocoll::comm::engine::Engine;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let theirs = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut eng = Engine::fuzz_over_tcp(l.accept().unwrap().0).unwrap();
    let data = [7u8; 1024];
    // SAFETY: `data` outlives the engine, and sends only read it.
    let raw = || unsafe { RawBuf::new(data.as_ptr() as *mut u8, data.len()) };
    let first = eng.isend(1, 0, 0, raw(), "MPI_Scan").unwrap();
    assert!(eng.is_done(first), "a small send completes at once");
    drop(theirs);
    let start = Instant::now();
    while !eng.fuzz_finished() && start.elapsed() < Duration::from_secs(5) {
        eng.progress();
    }
    let e = eng
        .isend(1, 0, 0, raw(), "MPI_Scan")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "peer rank 1 died during MPI_Scan");
}

#[test]
fn every_target_has_a_test_and_a_corpus() {
    for (name, _) in TARGETS {
        assert!(
            std::fs::read_to_string(root().join("tests/fuzz.rs"))
                .expect("this file")
                .contains(&format!("fn {name}()")),
            "no #[test] for target {name}"
        );
        corpus(name);
    }
}

/// Replays the saved input `FERROCOLL_FUZZ_REPLAY` names (its target is
/// the file name's part before the last `-`); does nothing without it.
#[test]
fn replay() {
    let Ok(path) = std::env::var("FERROCOLL_FUZZ_REPLAY") else {
        return;
    };
    let path = Path::new(&path);
    let file = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a file name");
    let name = file.rsplit_once('-').map_or(file, |(n, _)| n);
    let &(_, f) = TARGETS
        .iter()
        .find(|t| t.0 == name)
        .expect("a known target");
    f(&std::fs::read(path).expect("the saved input"));
}
