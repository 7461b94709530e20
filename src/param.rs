//! Every environment knob, read once. Documented in one table (also in README.md):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `FERROCOLL_DEBUG` | `off` | `off`, `warn`, `info`, `trace`: diagnostics on stderr (`NCCL_DEBUG` when unset) |
//! | `FERROCOLL_TIMEOUT` | `0` (off) | seconds a collective or point-to-point wait may block before failing |
//! | `FERROCOLL_SETUP_TIMEOUT` | `60` | seconds `MPI_Init` waits for the other ranks |
//! | `FERROCOLL_STALL_WARN` | `60` | seconds a collective or point-to-point wait may block before its rank says so on stderr, naming the call and the ranks it waits for, and again each time the wait has doubled; the wait goes on; `0`: never |
//! | `FERROCOLL_CHECK` | `0` | `1`: before every collective the ranks compare what they were called with (collective, count, type, op, root); a mismatch fails on every rank with an error naming both sides instead of hanging or corrupting data |
//! | `FERROCOLL_ALGO` | (auto) | force algorithms, e.g. `allreduce=ring,bcast=binomial`; `gpu=staged`: NCCL calls on device buffers go through host memory instead of CUDA IPC; `gpu=ordered`: they are stream-ordered even where processes share a GPU (slow there; for tests); `gpu=graph`: calls on the IPC path are ordered by barriers on the streams, as captured ones are (for tests) |
//! | `FERROCOLL_GPU` | `1` | `1`: NCCL calls on GPU device buffers run on ferrocoll's device path (see README, "GPUs"); `0`: they are refused with `ncclInvalidUsage` |
//! | `FERROCOLL_GPU_STAGING_BYTES` | `67108864` | pinned host memory per communicator for NCCL calls on device buffers that are staged through host memory (larger ones use pageable memory) |
//! | `FERROCOLL_SHM_RING_BYTES` | `1048576` | bytes of each per-pair shared-memory ring |
//! | `FERROCOLL_SPIN` | `2000` | polls before a waiting rank yields, then sleeps on a futex |
//! | `FERROCOLL_RNDV_BYTES` | `131072` / `32768` / `65536` | messages from this size wait for the matching receive and land directly in its buffer; where the receiver may read the sender's memory (`FERROCOLL_CMA`) 128 KiB, or a collective's 32 KiB where ranks outnumber cores; else 64 KiB. Unset, announced messages stream through the ring, but a root's to several ranks, which are read in place (README) |
//! | `FERROCOLL_CMA` | `on` | `on`: a rank reads announced messages from another rank of its host straight out of the sender's memory (`process_vm_readv`, one copy) where a root sends to several ranks and where its sender is busy receiving (`FERROCOLL_CMA_BUSY`), and `pull` collectives reach their peers' buffers, falling back to the ring where the kernel refuses; `off`: always through the ring |
//! | `FERROCOLL_CMA_BUSY` | `auto` | where `FERROCOLL_CMA` is on, a message to another rank of the host (from the rendezvous size) whose sender is itself receiving large messages (`MPI_Sendrecv`, a halo's `MPI_Irecv`s posted before its `MPI_Isend`s, a collective's exchanges) is read in place by its receiver instead of streaming through the ring, where both together pass 2 MiB (1 MiB where ranks outnumber cores), and a 2-rank `MPI_Alltoall`'s blocks from 1 MiB and allgather's from 512 KiB (where ranks outnumber cores an `MPI_Gather` pulls from 64 KiB per rank, a reduce from 1 MiB, an allreduce from 1 MiB while all inputs together stay within 32 MiB, an `MPI_Scatter` streams only up to 1 MiB of blocks; at 2 ranks on cores of their own an allreduce pulls from 1 MiB, a reduce from 2 MiB while both inputs stay within 32 MiB; all these, and all-to-alls, allgathers, broadcasts and reduce-scatters (from 2 MiB) read in place, go untimed): `auto`: on Intel CPUs (measured faster there), not on others; `on`; `off` |
//! | `FERROCOLL_CACHE_BYTES` | (from sysfs) | bytes of the last-level CPU cache: received messages (and a rank's own block) from half this size (those streamed through the rings from 16 MiB at most: a cache of hundreds of MiB is a whole socket's), and streamed collective results from four times it, are stored past the cache |
//! | `FERROCOLL_COPY_WHOLE_BYTES` | `32768` on AMD family 1Ah (Zen 5; `8192` for messages' copies into and out of the shared-memory rings), else `262145` | copies from 2 KiB up go in 2 KiB pieces below this size (beside glibc's `rep movsb`, slow on some CPUs for lines another core holds) and in one `memcpy` from it; set, it holds for every copy |
//! | `FERROCOLL_FAR` | `auto` | how collectives write their data into shared memory (from 4 KiB), and messages from 16 KiB theirs into the rings: `auto`: cached, but past the cache while a rank's own cached writes run slow (this host's cores far apart, see `transport::shm::far`); `on`: always past the cache; `off`: always cached |
//! | `FERROCOLL_SLICE` | `auto` | scheduler slices where ranks outnumber cores: `auto`: a rank asks the kernel for 100 us slices (Linux 6.12+) for a second at a time once processes outside the job keep taking its core for long at its yields (see `comm::slice`); `short`: always; `off`: never |
//! | `FERROCOLL_TRANSPORT` | (auto) | `tcp`: every pair of ranks talks over TCP, also on one host (tests, benchmarks) |
//! | `FERROCOLL_NSOCKS` | `1` | TCP sockets per pair of ranks (1-16); a link's bytes are dealt to them in 128 KiB pieces; the dialling rank's value counts |
//! | `FERROCOLL_SOCKET_SNDBUF` | `524288` | bytes of each TCP socket's send buffer (the kernel doubles it); `0`: the kernel's autotuning |
//! | `FERROCOLL_SOCKET_RCVBUF` | `4194304` | bytes of each TCP socket's receive buffer, set only where `net.core.rmem_max` allows it; `0`: the kernel's autotuning |
//! | `FERROCOLL_SOCKET_CC` | `reno` | congestion control of each TCP socket, any name in `/proc/sys/net/ipv4/tcp_available_congestion_control`; `system`: the host's default |
//! | `FERROCOLL_SOCKET_IFNAME` | (loopback on one host) | interfaces to listen on: names or prefixes, `^` to exclude, `=` for exact names (`NCCL_SOCKET_IFNAME` when unset) |
//! | `FERROCOLL_RANK`, `FERROCOLL_SIZE`, `FERROCOLL_JOB` | (set by `ferrorun`) | this rank, the rank count, the job id |
//! | `FERROCOLL_STORE`, `FERROCOLL_SECRET` | (set by `ferrorun`) | the rendezvous store's address and the job secret (64 hex digits) |

use std::sync::OnceLock;
use std::time::Duration;

/// How much the library says on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DebugLevel {
    /// Nothing.
    Off,
    /// Unexpected but recoverable situations.
    Warn,
    /// Set-up decisions (transport, algorithms).
    Info,
    /// Every collective call.
    Trace,
}

/// All knobs, parsed once from the environment.
#[derive(Clone, Debug)]
pub struct Params {
    /// `FERROCOLL_DEBUG`.
    pub debug: DebugLevel,
    /// `FERROCOLL_TIMEOUT`; `None` means wait forever (peer death is still noticed).
    pub timeout: Option<Duration>,
    /// `FERROCOLL_SETUP_TIMEOUT`.
    pub setup_timeout: Duration,
    /// `FERROCOLL_STALL_WARN`; `None`: a wait never says it is long.
    pub stall_warn: Option<Duration>,
    /// `FERROCOLL_CHECK`: compare every collective's arguments across ranks first.
    pub check: bool,
    /// `FERROCOLL_ALGO`: (collective, algorithm) pairs.
    pub algo: Vec<(String, String)>,
    /// `FERROCOLL_SHM_RING_BYTES`, rounded up to a multiple of 4 KiB.
    /// 1 MiB keeps 16 of the ring's 64 KiB chunks (`ring::CHUNK`) in flight
    /// and fits a core's 2 MiB L2 here: alternated 2-rank pingpong, us,
    /// 256 KiB / 512 KiB / 1 MiB / 2 MiB rings: 2 MiB messages 224 / 147 /
    /// 70 / 66, 8 MiB 969 / 709 / 360 / 347.
    pub ring_bytes: usize,
    /// `FERROCOLL_SPIN`.
    pub spin: u32,
    /// `FERROCOLL_RNDV_BYTES`; `None`: the engine's default
    /// (`comm::engine::rndv_default`).
    pub rndv_min: Option<usize>,
    /// `FERROCOLL_CMA`: announced messages on this host are read from the
    /// sender's memory (`transport::shm::cma`).
    pub cma: bool,
    /// `FERROCOLL_CMA_BUSY`: `Some(on)` where set to on or off, `None` for
    /// the CPU's default (`comm::engine::reads_busy_default`).
    pub cma_busy: Option<bool>,
    /// `FERROCOLL_CACHE_BYTES`; `None`: read the cache size from sysfs.
    pub cache_bytes: Option<usize>,
    /// `FERROCOLL_COPY_WHOLE_BYTES`; `None`: by the CPU (`copy::whole_from`,
    /// `copy::message_whole_from`).
    pub copy_whole_bytes: Option<usize>,
    /// `FERROCOLL_TRANSPORT`.
    pub transport: crate::bootstrap::wire::Transport,
    /// `FERROCOLL_SOCKET_IFNAME`.
    pub socket_ifname: Option<String>,
    /// `FERROCOLL_NSOCKS`, 1 to 16.
    pub nsocks: usize,
    /// `FERROCOLL_SOCKET_SNDBUF` (0: the kernel's autotuning).
    pub socket_sndbuf: usize,
    /// `FERROCOLL_SOCKET_RCVBUF` (0: the kernel's autotuning).
    pub socket_rcvbuf: usize,
    /// `FERROCOLL_SOCKET_CC`; `None`: the host's default.
    pub socket_cc: Option<String>,
    /// `FERROCOLL_BIND`.
    pub bind: crate::bootstrap::bind::Bind,
    /// `FERROCOLL_FAR`.
    pub far: crate::transport::shm::far::Mode,
    /// `FERROCOLL_SLICE`.
    pub slice: crate::comm::slice::Mode,
    /// `FERROCOLL_GPU`: NCCL calls on device buffers run (1, the default) or
    /// are refused (0).
    pub gpu: bool,
    /// `FERROCOLL_GPU_STAGING_BYTES`: pinned host memory per communicator
    /// for the NCCL device path's host staging (larger batches stage
    /// through pageable memory).
    pub gpu_staging: usize,
}

/// Most sockets per pair of ranks (`FERROCOLL_NSOCKS`).
pub const MAX_NSOCKS: usize = 16;

/// The most seconds a knob in seconds takes (larger values count as this).
const MAX_SECS: f64 = 1e9;

impl Params {
    /// Parses knobs from any key lookup (tests pass a closure over a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Params {
        let secs = |k: &str, d: f64| {
            get(k)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(d)
                // Beyond this `Duration::from_secs_f64` panics; 31 years
                // is forever to a wait.
                .min(MAX_SECS)
        };
        // An on/off knob: `Some(true)` for 1, on, yes, true; `Some(false)`
        // for 0, off, no, false; `None` unset or anything else.
        let switch = |k: &str| match get(k).as_deref().map(str::trim) {
            Some("1" | "on" | "yes" | "true") => Some(true),
            Some("0" | "off" | "no" | "false") => Some(false),
            _ => None,
        };
        let timeout = secs("FERROCOLL_TIMEOUT", 0.0);
        let stall_warn = secs("FERROCOLL_STALL_WARN", 60.0);
        // NCCL programs' own knob counts when ours is not set.
        let debug = get("FERROCOLL_DEBUG").or_else(|| get("NCCL_DEBUG"));
        let debug = match debug.as_deref().map(str::trim) {
            Some("warn" | "WARN") => DebugLevel::Warn,
            Some("info" | "INFO") => DebugLevel::Info,
            Some("trace" | "TRACE") => DebugLevel::Trace,
            _ => DebugLevel::Off,
        };
        let algo = get("FERROCOLL_ALGO")
            .map(|v| {
                v.split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase()))
                    .collect()
            })
            .unwrap_or_default();
        let ring = get("FERROCOLL_SHM_RING_BYTES")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1 << 20)
            .clamp(4096, 1 << 30);
        Params {
            debug,
            timeout: (timeout > 0.0).then(|| Duration::from_secs_f64(timeout)),
            setup_timeout: Duration::from_secs_f64(secs("FERROCOLL_SETUP_TIMEOUT", 60.0).max(0.1)),
            stall_warn: (stall_warn > 0.0).then(|| Duration::from_secs_f64(stall_warn)),
            check: switch("FERROCOLL_CHECK") == Some(true),
            algo,
            ring_bytes: ring.div_ceil(4096) * 4096,
            spin: get("FERROCOLL_SPIN")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(2000),
            rndv_min: get("FERROCOLL_RNDV_BYTES")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .map(|b| b.max(1)),
            cma: switch("FERROCOLL_CMA") != Some(false),
            cma_busy: switch("FERROCOLL_CMA_BUSY"),
            cache_bytes: get("FERROCOLL_CACHE_BYTES")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&b| b > 0),
            copy_whole_bytes: get("FERROCOLL_COPY_WHOLE_BYTES")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&b| b > 0),
            transport: match get("FERROCOLL_TRANSPORT").as_deref().map(str::trim) {
                Some("tcp" | "TCP") => crate::bootstrap::wire::Transport::Tcp,
                _ => crate::bootstrap::wire::Transport::Auto,
            },
            socket_ifname: get("FERROCOLL_SOCKET_IFNAME")
                .or_else(|| get("NCCL_SOCKET_IFNAME"))
                .filter(|v| !v.trim().is_empty()),
            nsocks: get("FERROCOLL_NSOCKS")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(1)
                .clamp(1, MAX_NSOCKS),
            socket_sndbuf: get("FERROCOLL_SOCKET_SNDBUF")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(512 * 1024),
            socket_rcvbuf: get("FERROCOLL_SOCKET_RCVBUF")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(4 << 20),
            socket_cc: match get("FERROCOLL_SOCKET_CC").as_deref().map(str::trim) {
                None => Some("reno".to_string()),
                Some("" | "system") => None,
                Some(name) => Some(name.to_string()),
            },
            bind: crate::bootstrap::bind::Bind::parse(get("FERROCOLL_BIND").as_deref()),
            far: crate::transport::shm::far::Mode::parse(get("FERROCOLL_FAR").as_deref()),
            slice: crate::comm::slice::Mode::parse(get("FERROCOLL_SLICE").as_deref()),
            gpu: get("FERROCOLL_GPU").is_none_or(|v| v.trim() != "0"),
            gpu_staging: get("FERROCOLL_GPU_STAGING_BYTES")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(64 << 20),
        }
    }

    /// The forced algorithm for a collective, if `FERROCOLL_ALGO` names one.
    pub fn algo_for(&self, coll: &str) -> Option<&str> {
        self.algo
            .iter()
            .find(|(k, _)| k == coll)
            .map(|(_, v)| v.as_str())
    }
}

/// The process-wide knobs, read from the environment on first use.
pub fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params::from_lookup(|k| std::env::var(k).ok()))
}

/// Prints a diagnostic when `FERROCOLL_DEBUG` is at least `level`.
pub fn debug_log(level: DebugLevel, msg: impl FnOnce() -> String) {
    if params().debug >= level {
        say(&format!("ferrocoll[{}]: {}", std::process::id(), msg()));
    }
}

/// Writes `line` and a newline to stderr in one system call: ranks share
/// the stream, and `eprintln!` writes a formatted line piece by piece, so
/// two ranks failing at once produced one garbled line.
pub fn say(line: &str) {
    use std::io::Write;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    let _ = std::io::stderr().write_all(buf.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Params {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_and_overrides() {
        let p = parse(&[]);
        assert_eq!(p.timeout, None);
        assert_eq!(p.debug, DebugLevel::Off);
        assert_eq!(p.ring_bytes, 1 << 20);
        assert!(!p.check);
        assert_eq!(p.cache_bytes, None);
        assert_eq!(p.socket_cc.as_deref(), Some("reno"));
        assert_eq!(parse(&[("FERROCOLL_SOCKET_CC", "system")]).socket_cc, None);
        assert_eq!(
            parse(&[("FERROCOLL_SOCKET_CC", " cubic ")])
                .socket_cc
                .as_deref(),
            Some("cubic")
        );
        assert_eq!(
            parse(&[("FERROCOLL_CACHE_BYTES", "4194304")]).cache_bytes,
            Some(4 << 20)
        );
        assert_eq!(parse(&[("FERROCOLL_CACHE_BYTES", "0")]).cache_bytes, None);
        assert_eq!(p.copy_whole_bytes, None);
        assert_eq!(
            parse(&[("FERROCOLL_COPY_WHOLE_BYTES", " 65536")]).copy_whole_bytes,
            Some(65536)
        );
        assert_eq!(
            parse(&[("FERROCOLL_COPY_WHOLE_BYTES", "lots")]).copy_whole_bytes,
            None
        );
        assert!(parse(&[("FERROCOLL_CHECK", "1")]).check);
        assert!(!parse(&[("FERROCOLL_CHECK", "0")]).check);
        assert!(p.cma && !parse(&[("FERROCOLL_CMA", " off")]).cma);
        assert_eq!(p.cma_busy, None);
        assert_eq!(parse(&[("FERROCOLL_CMA_BUSY", "on")]).cma_busy, Some(true));
        assert_eq!(
            parse(&[("FERROCOLL_CMA_BUSY", "no ")]).cma_busy,
            Some(false)
        );
        assert_eq!(parse(&[("FERROCOLL_CMA_BUSY", "auto")]).cma_busy, None);
        let p = parse(&[
            ("FERROCOLL_TIMEOUT", "2.5"),
            ("FERROCOLL_ALGO", "allreduce=Ring, bcast=binomial"),
            ("FERROCOLL_SHM_RING_BYTES", "5000"),
            ("FERROCOLL_DEBUG", "info"),
        ]);
        assert_eq!(p.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(p.algo_for("allreduce"), Some("ring"));
        assert_eq!(p.algo_for("bcast"), Some("binomial"));
        assert_eq!(p.algo_for("reduce"), None);
        assert_eq!(p.ring_bytes, 8192);
        assert_eq!(p.debug, DebugLevel::Info);
        assert_eq!(parse(&[("FERROCOLL_TIMEOUT", "-1")]).timeout, None);
        assert_eq!(p.stall_warn, Some(Duration::from_secs(60)));
        let warn = |v| parse(&[("FERROCOLL_STALL_WARN", v)]).stall_warn;
        assert_eq!(warn("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(warn("0"), None);
        assert_eq!(warn("soon"), Some(Duration::from_secs(60)));
        let forever = parse(&[
            ("FERROCOLL_TIMEOUT", "1e300"),
            ("FERROCOLL_STALL_WARN", "1e30"),
        ]);
        assert_eq!(forever.timeout, Some(Duration::from_secs(1_000_000_000)));
        assert_eq!(forever.stall_warn, Some(Duration::from_secs(1_000_000_000)));
    }
}
