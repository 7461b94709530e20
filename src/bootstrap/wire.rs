//! Wiring a job's links once rank and size are known: shared memory among
//! the ranks of each host (same hostname and boot id), TCP between hosts,
//! TCP everywhere when `FERROCOLL_TRANSPORT=tcp` asks for it.
//!
//! Ranks meet in the launcher's key-value space in at most two rounds:
//! first each publishes its host identity and listening address (rank 0
//! under PMI also a fresh job secret); then, where a host has several
//! ranks, its lowest rank creates the host's segment under a random name
//! and publishes the name for the others.

use super::bind;
use super::host;
use super::launch::{Kv, Launch};
use super::pmi::Pmi;
use super::store::StoreServer;
use crate::comm::engine::Engine;
use crate::error::{Error, Result};
use crate::param::params;
use crate::transport::shm::segment::{path_for, Segment};
use crate::transport::tcp::auth::Secret;
use crate::transport::tcp::mesh;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Instant;

/// Which transport links ranks of one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Shared memory within a host, TCP between hosts (the default).
    Auto,
    /// TCP between every pair of ranks (`FERROCOLL_TRANSPORT=tcp`).
    Tcp,
}

/// A wired rank: its engine, its host's segment, and what must live until
/// `MPI_Finalize` (the PMI session, the store this rank serves).
pub struct Wired {
    /// Links to every rank.
    pub engine: Engine,
    /// This host's segment (abort flag, pids, rings).
    pub segment: Arc<Segment>,
    /// The launcher's PMI session, finalized at the end.
    pub pmi: Option<Pmi>,
    /// The store this rank serves for the others.
    pub server: Option<StoreServer>,
}

/// Connects this rank to every other rank of a job of two or more. With
/// `bind_thread` (an MPI rank, a process of its own) the calling thread
/// is bound to a CPU of its machine (`bind::bind`) before it attaches to
/// the host's segment, so that the other ranks' barriers reach it
/// (`membarrier::reaches_me`).
pub fn wire(mut launch: Launch, bind_thread: bool) -> Result<Wired> {
    let p = params();
    let (me, size) = (launch.rank, launch.size);
    let deadline = Instant::now() + p.setup_timeout;
    let forced = p.transport == Transport::Tcp;
    let (mut segment, local, tcp, hosts, machine) = match launch.local_job.clone() {
        Some(job) => {
            // ferrorun on one host: every rank is here; the segment is named by the job.
            if bind_thread {
                bind::bind(p.bind, me, size);
            }
            let seg = Segment::attach(&path_for(&job), me, size, p.ring_bytes, p.setup_timeout)?;
            let tcp = if forced {
                let listener = listen(true)?;
                let kv = launch.kv()?;
                kv.put(&format!("a{me}"), &addr_of(&listener)?)?;
                let secret = launch.secret.clone().ok_or_else(|| {
                    Error::Unsupported("FERROCOLL_TRANSPORT=tcp needs FERROCOLL_SECRET".into())
                })?;
                let to = |_| true;
                connect(launch.kv()?, &listener, (me, size), to, &secret, deadline)?
            } else {
                Vec::new()
            };
            (seg, (0..size).collect::<Vec<_>>(), tcp, vec![0; size], size)
        }
        None => meet(&mut launch, forced, bind_thread, deadline)?,
    };
    segment.settle(deadline.saturating_duration_since(Instant::now()))?;
    let segment = Arc::new(segment);
    let mut engine = Engine::over_host(me, size, segment.clone(), &local, tcp)?;
    engine.set_hosts(hosts)?;
    engine.set_machine_ranks(machine);
    Ok(Wired {
        engine,
        segment,
        pmi: launch.take_pmi(),
        server: launch.server.take(),
    })
}

/// A host's segment, the world ranks sharing it, TCP connections to the
/// other ranks, each world rank's host number, and how many ranks share
/// this machine's cores.
type Links = (
    Segment,
    Vec<usize>,
    Vec<(usize, Vec<TcpStream>)>,
    Vec<u32>,
    usize,
);

/// The general case: ranks exchange host identities and addresses, each
/// host gets its segment, and ranks on different hosts (all, when forced)
/// connect over TCP.
fn meet(launch: &mut Launch, forced: bool, bind_thread: bool, deadline: Instant) -> Result<Links> {
    let p = params();
    let (me, size) = (launch.rank, launch.size);
    let listener = listen(false)?;
    let made_secret = match (&launch.secret, me) {
        (None, 0) => Some(Secret::random()?),
        _ => None,
    };
    let kv = launch.kv()?;
    kv.put(&format!("h{me}"), &host::host_id())?;
    kv.put(&format!("a{me}"), &addr_of(&listener)?)?;
    if let Some(s) = &made_secret {
        kv.put("secret", &s.to_hex())?;
    }
    kv.fence()?;
    let hosts = (0..size)
        .map(|q| kv.get(&format!("h{q}"), deadline))
        .collect::<Result<Vec<_>>>()?;
    let secret = match (made_secret, launch.secret.clone()) {
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => Secret::from_hex(&launch.kv()?.get("secret", deadline)?)?,
    };
    let local = host::same_host(&hosts, me);
    let my = local
        .iter()
        .position(|&q| q == me)
        .expect("a rank is on its own host");
    let crowded = (0..size).any(|q| host::same_host(&hosts, q).len() > 1);
    let machine = host::same_machine(&hosts, me);
    if bind_thread {
        bind::bind(p.bind, machine.1, machine.0);
    }
    let kv = launch.kv()?;
    let segment = if local.len() == 1 {
        if crowded {
            kv.fence()?;
        }
        Segment::anonymous(1, p.ring_bytes)?
    } else {
        let leader = local[0];
        let mut seg = None;
        if me == leader {
            // Under ferrorun the job id leads, so its clean-up finds leftovers.
            let job = std::env::var("FERROCOLL_JOB")
                .map(|j| j + "-")
                .unwrap_or_default();
            let name = format!("{job}{}", &Secret::random()?.to_hex()[..24]);
            seg = Some(Segment::attach(
                &path_for(&name),
                0,
                local.len(),
                p.ring_bytes,
                p.setup_timeout,
            )?);
            kv.put(&format!("s{leader}"), &name)?;
        }
        kv.fence()?;
        match seg {
            Some(s) => s,
            None => {
                let name = kv.get(&format!("s{leader}"), deadline)?;
                let ok = |c: char| c.is_ascii_alphanumeric() || c == '-';
                if name.is_empty() || !name.chars().all(ok) {
                    return Err(Error::InvalidArg(format!(
                        "rank {leader} published a bad segment name {name:?}"
                    )));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                Segment::attach(&path_for(&name), my, local.len(), p.ring_bytes, left)?
            }
        }
    };
    let remote = |q: usize| forced || !local.contains(&q);
    let tcp = connect(
        launch.kv()?,
        &listener,
        (me, size),
        remote,
        &secret,
        deadline,
    )?;
    Ok((segment, local, tcp, host::numbers(&hosts), machine.0))
}

/// A listening socket on the chosen interface (loopback when `local` and
/// no interface was named).
fn listen(local: bool) -> Result<TcpListener> {
    let ip = mesh::choose_ip(params().socket_ifname.as_deref(), local)?;
    TcpListener::bind((ip, 0)).map_err(|e| Error::os("listening for peers", e))
}

fn addr_of(l: &TcpListener) -> Result<String> {
    l.local_addr()
        .map(|a| a.to_string())
        .map_err(|e| Error::os("listening for peers", e))
}

/// Connects rank `me` of `size` to the peers `want` selects, at the
/// listening addresses they published.
fn connect(
    kv: &mut Kv,
    listener: &TcpListener,
    (me, size): (usize, usize),
    want: impl Fn(usize) -> bool,
    secret: &Secret,
    deadline: Instant,
) -> Result<Vec<(usize, Vec<TcpStream>)>> {
    let addrs = (0..size)
        .map(|q| {
            if q == me || !want(q) {
                return Ok(None);
            }
            let text = kv.get(&format!("a{q}"), deadline)?;
            text.parse().map(Some).map_err(|_| {
                Error::InvalidArg(format!("rank {q} published a bad address {text:?}"))
            })
        })
        .collect::<Result<Vec<Option<SocketAddr>>>>()?;
    mesh::connect_all(me, listener, &addrs, secret, deadline, params().nsocks)
}
