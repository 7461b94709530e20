//! `ncclGroupStart` / `ncclGroupEnd`: calls between them are queued on the
//! calling thread and run at the outermost end: communicator set-ups first
//! (several ranks of one process set up from one thread, as nccl-tests
//! does), then each communicator's operations, communicators in parallel.

use super::comm::Shared;
use super::result::{NcclErr, NcclResult};
use super::work::{run_batch, Job};
use crate::bootstrap::unique_id::UniqueId;
use std::cell::RefCell;
use std::sync::Arc;

/// A communicator set-up deferred to the group's end.
pub struct Setup {
    /// The communicator being made (its handle already returned).
    pub shared: Arc<Shared>,
    /// The id it joins.
    pub id: UniqueId,
}

#[derive(Default)]
struct Group {
    depth: usize,
    setups: Vec<Setup>,
    jobs: Vec<(Arc<Shared>, Job)>,
    /// An argument error inside the group: reported again at the end.
    failed: Option<NcclErr>,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

/// Whether the calling thread is inside a group.
pub fn in_group() -> bool {
    GROUP.with(|g| g.borrow().depth > 0)
}

/// Runs `job` now, or queues it when inside a group.
pub fn submit(shared: Arc<Shared>, job: Job) -> NcclResult<()> {
    let queued = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return None;
        }
        g.jobs.push((shared.clone(), job.clone()));
        Some(())
    });
    match queued {
        Some(()) => Ok(()),
        None => run_on(&shared, vec![job]),
    }
}

/// Runs one communicator's operations, on host buffers or (the device
/// path) on device buffers, never both in one batch.
fn run_on(shared: &Arc<Shared>, jobs: Vec<Job>) -> NcclResult<()> {
    match jobs.iter().filter(|j| j.device).count() {
        0 => shared.with_core(|core| run_batch(&jobs, core)),
        d if d == jobs.len() => super::device::submit(shared, jobs),
        _ => Err(NcclErr::usage(
            "a group mixes device-memory and host-memory buffers on one communicator",
        )),
    }
}

/// Queues a set-up (only called inside a group).
pub fn defer_setup(s: Setup) {
    GROUP.with(|g| g.borrow_mut().setups.push(s));
}

/// Remembers an error raised by a call inside the group.
pub fn note_failure(e: &NcclErr) {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 && g.failed.is_none() {
            g.failed = Some(e.clone());
        }
    });
}

/// `ncclGroupStart`.
pub fn start() {
    GROUP.with(|g| g.borrow_mut().depth += 1);
}

/// `ncclGroupEnd`: at the outermost level, runs what was queued.
pub fn end() -> NcclResult<()> {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match g.depth {
            0 => Err(NcclErr::usage("ncclGroupEnd without ncclGroupStart")),
            1 => {
                g.depth = 0;
                Ok(Some((
                    std::mem::take(&mut g.setups),
                    std::mem::take(&mut g.jobs),
                    g.failed.take(),
                )))
            }
            _ => {
                g.depth -= 1;
                Ok(None)
            }
        }
    })?;
    let Some((setups, jobs, failed)) = taken else {
        return Ok(());
    };
    if let Some(e) = failed {
        for s in &setups {
            s.shared.destroy();
        }
        return Err(e);
    }
    let nonblocking = setups.iter().any(|s| !s.shared.settings.blocking);
    if nonblocking && jobs.is_empty() {
        return set_up_in_background(setups);
    }
    set_up_all(&setups)?;
    run_jobs(jobs)
}

/// Sets up `setups` on a thread of their own and returns `ncclInProgress`
/// (non-blocking communicators; `ncclCommGetAsyncError` reports the outcome).
pub fn set_up_in_background(setups: Vec<Setup>) -> NcclResult<()> {
    std::thread::Builder::new()
        .name("ferrocoll-nccl-init".into())
        .spawn(move || {
            let _ = set_up_all(&setups);
        })
        .map_err(|e| NcclErr {
            code: super::types::ncclResult_t::ncclSystemError,
            msg: format!("cannot start a set-up thread: {e}"),
        })?;
    Err(NcclErr::in_progress())
}

/// Sets up every queued communicator, concurrently when there are several
/// (they may be ranks of the same communicator waiting for each other).
pub fn set_up_all(setups: &[Setup]) -> NcclResult<()> {
    match setups {
        [] => Ok(()),
        [one] => one.shared.set_up(&one.id),
        many => std::thread::scope(|s| {
            let hs: Vec<_> = many
                .iter()
                .map(|x| s.spawn(move || x.shared.set_up(&x.id)))
                .collect();
            first_error(hs.into_iter().map(|h| h.join()))
        }),
    }
}

/// Runs queued operations: each communicator's in call order, several
/// communicators concurrently (their ranks may depend on each other).
fn run_jobs(jobs: Vec<(Arc<Shared>, Job)>) -> NcclResult<()> {
    let mut batches: Vec<(Arc<Shared>, Vec<Job>)> = Vec::new();
    for (sh, job) in jobs {
        match batches.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &sh)) {
            Some((_, v)) => v.push(job),
            None => batches.push((sh, vec![job])),
        }
    }
    let run = |(sh, v): &(Arc<Shared>, Vec<Job>)| run_on(sh, v.clone());
    match &batches[..] {
        [] => Ok(()),
        [one] => run(one),
        many => std::thread::scope(|s| {
            let (first, rest) = many.split_first().expect("several");
            let hs: Vec<_> = rest.iter().map(|b| s.spawn(move || run(b))).collect();
            let mine = run(first);
            first_error(std::iter::once(Ok(mine)).chain(hs.into_iter().map(|h| h.join())))
        }),
    }
}

fn first_error(
    results: impl Iterator<Item = std::thread::Result<NcclResult<()>>>,
) -> NcclResult<()> {
    let mut out = Ok(());
    for r in results {
        let r = r.unwrap_or_else(|_| {
            Err(NcclErr {
                code: super::types::ncclResult_t::ncclInternalError,
                msg: "a group worker panicked".into(),
            })
        });
        if out.is_ok() {
            out = r;
        }
    }
    out
}
