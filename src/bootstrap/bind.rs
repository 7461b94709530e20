//! Binding each rank of a machine to one CPU, round-robin (or, asked for,
//! in blocks of consecutive ranks, `Bind::Block`).
//!
//! Left alone, Linux places ranks badly in two ways seen here:
//! - ranks that outnumber the cores were kept unbalanced: with 4 ranks on
//!   2 cores, one rank ran alone on a core and the other three in turn on
//!   the other, so every collective waited for three context switches
//!   instead of one (bound, 8 B, medians of 3 runs: allreduce 6.5 -> 4.3 us,
//!   barrier 5.9 -> 3.5 us, alltoall 6.7 -> 4.4 us);
//! - with as many ranks as cores, both ranks of a 2-rank job sometimes
//!   shared one core for a whole run (a waker pulls the woken rank next to
//!   it), and every small call then cost a context switch: MPI_Gather 8 B
//!   took 2.2 us in 2 runs of 8 unbound, 0.15-0.17 us in all 8 bound.
//!
//! Open MPI binds by default for the same reason. Only MPI ranks are
//! bound: an NCCL rank may be one of several threads of the application,
//! whose thread must not be pinned behind its back.

use crate::param::{debug_log, DebugLevel};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The CPU `bind` bound this rank to (`usize::MAX`: none).
static HOME: AtomicUsize = AtomicUsize::new(usize::MAX);

/// How many CPUs this process could use before `bind` bound it (0: not
/// bound).
static CORES: AtomicUsize = AtomicUsize::new(0);

/// `FERROCOLL_BIND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// Bind when the machine runs more than one rank of the job.
    Auto,
    /// Never bind.
    None,
    /// Always bind each rank to one CPU.
    Core,
    /// As `Auto`, but where ranks outnumber the CPUs, consecutive ranks
    /// share one (`choose`).
    Block,
}

impl Bind {
    /// Parses the variable's value (`auto` for anything unknown).
    pub fn parse(v: Option<&str>) -> Bind {
        match v.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("none" | "no" | "0" | "off") => Bind::None,
            Some("core" | "cpu" | "1" | "on") => Bind::Core,
            Some("block" | "pack") => Bind::Block,
            _ => Bind::Auto,
        }
    }
}

/// The CPU for the `index`-th of `ranks` ranks on this machine, given the
/// CPUs this process may run on, or `None` to leave it unbound: round
/// robin, or with `Block` where ranks outnumber the CPUs, blocks of
/// consecutive ranks per CPU (4 ranks on 2: ranks 0 and 1 on the first).
/// Round robin keeps ranks 0 and 1 on CPUs of their own, which a pair
/// exchanging alone needs (4 ranks on 2 cores, pingpong of 8 B between
/// them, us: 0.18, Open MPI 3.0 sharing one); blocks put a rank's
/// neighbours in a ring on its own CPU and the next, so that a neighbour
/// exchange needs the fewest switches (halo of 8 B, us a loop, round
/// robin / blocks: 7.0-7.7 / 5.1-5.8, switches per rank per loop
/// 0.59-0.76 / 0.50-0.52; Open MPI 4.2-6.4).
pub fn choose(policy: Bind, index: usize, ranks: usize, allowed: &[usize]) -> Option<usize> {
    let bind = match policy {
        Bind::None => false,
        Bind::Core => true,
        Bind::Auto | Bind::Block => ranks > 1,
    };
    let n = allowed.len();
    let slot = if policy == Bind::Block && ranks > n {
        index % ranks * n / ranks
    } else {
        index % n.max(1)
    };
    (bind && n > 1).then(|| allowed[slot])
}

/// Binds the calling thread (and the threads it starts later) by `choose`;
/// failures only log, since binding is an optimisation.
pub fn bind(policy: Bind, index: usize, ranks: usize) {
    let allowed = match allowed_cpus() {
        Ok(a) => a,
        Err(e) => {
            debug_log(DebugLevel::Warn, || format!("not binding: {e}"));
            return;
        }
    };
    let Some(cpu) = choose(policy, index, ranks, &allowed) else {
        return;
    };
    if pin(cpu) {
        HOME.store(cpu, Ordering::Relaxed);
        CORES.store(allowed.len(), Ordering::Relaxed);
        debug_log(DebugLevel::Info, || {
            format!("rank {index} of {ranks} on this machine bound to CPU {cpu}")
        });
    } else {
        let e = std::io::Error::last_os_error();
        debug_log(DebugLevel::Warn, || {
            format!("binding to CPU {cpu} failed: {e}")
        });
    }
}

/// Binds the calling thread to `cpu` alone; false where the kernel
/// refuses (a CPU outside the process's cpuset, say).
pub fn pin(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: `set` is a plain bit set owned by this frame; the call only
    // reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The CPU `bind` bound this rank to, if the calling thread still runs
/// there alone: only then may the library move it for a while
/// (`Engine::borrow_idle_core`), never a thread the application bound.
pub fn home() -> Option<usize> {
    let cpu = HOME.load(Ordering::Relaxed);
    alone_on().filter(|&one| one == cpu)
}

/// The one CPU the calling thread may run on, if it may run on one alone.
pub fn alone_on() -> Option<usize> {
    match allowed_cpus().ok()?.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The CPUs this process may use: as many as before `bind` bound it.
pub fn cores() -> usize {
    match CORES.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
        n => n,
    }
}

/// The CPUs the calling thread may run on.
pub(crate) fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: `set` is a plain bit set owned by this frame, filled by the
    // kernel up to the size given.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        set
    };
    // SAFETY: CPU_ISSET reads the set within its fixed size.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deals_ranks_round_robin_when_a_machine_has_several() {
        let two = [0, 1];
        assert_eq!(choose(Bind::Auto, 0, 1, &two), None);
        // Not bound by `bind` (no test binds): never `home`.
        assert_eq!(home(), None);
        assert_eq!(choose(Bind::Auto, 1, 2, &two), Some(1));
        assert_eq!(choose(Bind::Auto, 1, 2, &[0, 1, 2, 3]), Some(1));
        assert_eq!(choose(Bind::Auto, 3, 4, &two), Some(1));
        assert_eq!(choose(Bind::Auto, 2, 4, &two), Some(0));
        assert_eq!(choose(Bind::Auto, 2, 3, &[4, 6]), Some(4));
        assert_eq!(choose(Bind::None, 3, 4, &two), None);
        assert_eq!(choose(Bind::Core, 1, 2, &two), Some(1));
        // Already bound to one CPU (by the launcher): nothing to choose.
        assert_eq!(choose(Bind::Core, 1, 4, &[3]), None);
        assert_eq!(Bind::parse(Some(" None ")), Bind::None);
        assert_eq!(Bind::parse(Some("core")), Bind::Core);
        assert_eq!(Bind::parse(Some("Block")), Bind::Block);
        assert_eq!(Bind::parse(Some("x")), Bind::Auto);
        assert_eq!(Bind::parse(None), Bind::Auto);
    }

    #[test]
    fn deals_blocks_of_consecutive_ranks_where_they_outnumber_the_cpus() {
        let two = [0, 1];
        let on = |ranks: usize, cpus: &[usize]| -> Vec<Option<usize>> {
            (0..ranks)
                .map(|i| choose(Bind::Block, i, ranks, cpus))
                .collect()
        };
        assert_eq!(on(4, &two), [Some(0), Some(0), Some(1), Some(1)]);
        assert_eq!(on(3, &two), [Some(0), Some(0), Some(1)]);
        assert_eq!(
            on(5, &[4, 6]),
            [Some(4), Some(4), Some(4), Some(6), Some(6)]
        );
        assert_eq!(
            on(6, &[0, 1, 2, 3]),
            [Some(0), Some(0), Some(1), Some(2), Some(2), Some(3)]
        );
        // No more ranks than CPUs: one each, as round robin deals them.
        assert_eq!(on(2, &two), [Some(0), Some(1)]);
        assert_eq!(on(2, &[0, 1, 2, 3]), [Some(0), Some(1)]);
        // A lone rank, or one the launcher bound: left alone.
        assert_eq!(on(1, &two), [None]);
        assert_eq!(choose(Bind::Block, 1, 4, &[3]), None);
    }

    #[test]
    fn this_thread_may_run_somewhere() {
        let cpus = allowed_cpus().expect("sched_getaffinity");
        assert!(!cpus.is_empty());
        // No test binds through `bind`: the cores are the process's.
        assert_eq!(cores(), std::thread::available_parallelism().unwrap().get());
        // A thread bound to one CPU runs there alone; `bind` never ran.
        let first = cpus[0];
        let on = std::thread::spawn(move || (pin(first), alone_on(), home()));
        assert_eq!(on.join().unwrap(), (true, Some(first), None));
    }
}
