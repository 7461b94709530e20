//! Who started this process: rank, size and a key-value space to meet the
//! other ranks in, from the first launcher whose environment is present:
//! `ferrorun`, a PMI-1 server (`mpiexec.hydra`, `srun --mpi=pmi2`), Slurm's
//! variables, torchrun-style variables, or none (a singleton).

use super::pmi::Pmi;
use super::store::{StoreClient, StoreServer};
use crate::error::{Error, Result};
use crate::param::{params, say};
use crate::transport::tcp::auth::Secret;
use crate::transport::tcp::mesh;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Instant;

/// The launcher a job was found through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `ferrorun` (`FERROCOLL_RANK`, `FERROCOLL_SIZE`, `FERROCOLL_JOB`).
    Ferrorun,
    /// A PMI-1 server (`PMI_FD` or `PMI_PORT`).
    Pmi,
    /// Slurm's `SLURM_PROCID` / `SLURM_NTASKS`, our store at rank 0.
    Slurm,
    /// `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`, our store at rank 0.
    Torchrun,
    /// An NCCL unique id: the store named in it.
    UniqueId,
    /// No launcher: one rank.
    Singleton,
}

/// A key-value space shared by the job's ranks.
pub enum Kv {
    /// Our rendezvous store.
    Store(StoreClient),
    /// The launcher's PMI key-value space.
    Pmi(Pmi),
}

impl Kv {
    /// Publishes `value` under `key`.
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match self {
            Kv::Store(s) => s.set(key, value.as_bytes()),
            Kv::Pmi(p) => p.put(key, value),
        }
    }

    /// Makes earlier puts visible to every rank. Every rank must call it
    /// the same number of times (a PMI barrier; the store needs none,
    /// since its gets wait for the key).
    pub fn fence(&mut self) -> Result<()> {
        match self {
            Kv::Store(_) => Ok(()),
            Kv::Pmi(p) => p.barrier(),
        }
    }

    /// The value under `key` (waiting for it until `deadline` on the store).
    pub fn get(&mut self, key: &str, deadline: Instant) -> Result<String> {
        match self {
            Kv::Store(s) => {
                let v = s.get(key, deadline.saturating_duration_since(Instant::now()))?;
                String::from_utf8(v)
                    .map_err(|_| Error::InvalidArg(format!("store value of {key} is not text")))
            }
            Kv::Pmi(p) => p.get(key),
        }
    }
}

/// A job as its launcher described it.
pub struct Launch {
    /// This process's world rank.
    pub rank: usize,
    /// World size.
    pub size: usize,
    /// Where it came from.
    pub source: Source,
    /// For `ferrorun` on one host: the job id naming the shared segment
    /// (every rank is on this host, no exchange needed).
    pub local_job: Option<String>,
    /// The job secret that authenticates TCP connections, when known now
    /// (under PMI rank 0 makes one and passes it through the key-value space).
    pub secret: Option<Secret>,
    /// The store server this rank runs for the job (rank 0 under Slurm or
    /// torchrun variables); it must outlive every other rank's set-up.
    pub server: Option<StoreServer>,
    kv: Option<Kv>,
    store: Option<SocketAddr>,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

fn num(k: &str) -> Result<Option<usize>> {
    env(k)
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| Error::InvalidArg(format!("bad {k}={v} from the launcher")))
        })
        .transpose()
}

fn check_rank(rank: usize, size: usize, what: &str) -> Result<()> {
    if size == 0 || rank >= size {
        return Err(Error::InvalidArg(format!(
            "{what}: rank {rank} of {size} is out of range"
        )));
    }
    Ok(())
}

/// Resolves `host:port` (a name or an address) to its first IPv4 address.
fn resolve(addr: &str) -> Result<SocketAddr> {
    let bad =
        |e: String| Error::InvalidArg(format!("cannot resolve the store address {addr}: {e}"));
    let all: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| bad("no address".into()))
}

/// The first host of a Slurm node list: `node[03-05,9],gpu1` gives `node03`.
pub fn first_slurm_host(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    if list[end..].starts_with('[') {
        let inner = &list[end + 1..];
        let first: String = inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let tail = &inner[inner.find(']')? + 1..];
        let suffix: String = tail.chars().take_while(|&c| c != ',').collect();
        Some(format!("{prefix}{first}{suffix}"))
    } else {
        (!prefix.is_empty()).then(|| prefix.to_string())
    }
}

impl Launch {
    /// Reads the environment (and, under PMI, asks the launcher).
    pub fn discover() -> Result<Launch> {
        let p = params();
        let blank = |rank, size, source| Launch {
            rank,
            size,
            source,
            local_job: None,
            secret: None,
            server: None,
            kv: None,
            store: None,
        };
        if let (Some(r), Some(n), Some(job)) = (
            num("FERROCOLL_RANK")?,
            num("FERROCOLL_SIZE")?,
            env("FERROCOLL_JOB"),
        ) {
            check_rank(r, n, "ferrorun")?;
            if !job.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(Error::InvalidArg(format!("bad FERROCOLL_JOB={job}")));
            }
            let mut l = blank(r, n, Source::Ferrorun);
            // `ferrorun --hosts` spreads ranks over hosts: they find each other.
            if env("FERROCOLL_MULTIHOST").is_none() {
                l.local_job = Some(job);
            }
            l.store = env("FERROCOLL_STORE").map(|s| resolve(&s)).transpose()?;
            l.secret = env("FERROCOLL_SECRET")
                .map(|s| Secret::from_hex(&s))
                .transpose()?;
            return Ok(l);
        }
        if Pmi::offered() {
            let pmi = Pmi::from_env(p.setup_timeout)?;
            let mut l = blank(pmi.rank(), pmi.size(), Source::Pmi);
            l.kv = Some(Kv::Pmi(pmi));
            return Ok(l);
        }
        let slurm = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?);
        let torch = (num("RANK")?, num("WORLD_SIZE")?);
        let (source, rank, size, job) = match (slurm, torch) {
            ((Some(r), Some(n)), _) => {
                let id = format!(
                    "slurm-{}.{}",
                    env("SLURM_JOB_ID").unwrap_or_default(),
                    env("SLURM_STEP_ID").unwrap_or_default()
                );
                (Source::Slurm, r, n, id)
            }
            (_, (Some(r), Some(n))) if env("MASTER_ADDR").is_some() => {
                let id = format!(
                    "torchrun-{}:{}-{}",
                    env("MASTER_ADDR").unwrap_or_default(),
                    env("MASTER_PORT").unwrap_or_default(),
                    env("TORCHELASTIC_RUN_ID").unwrap_or_default()
                );
                (Source::Torchrun, r, n, id)
            }
            _ => return Ok(blank(0, 1, Source::Singleton)),
        };
        check_rank(rank, size, &format!("{source:?} environment"))?;
        let mut l = blank(rank, size, source);
        if size == 1 {
            return Ok(l);
        }
        let store = store_address(source)?;
        l.secret = Some(match env("FERROCOLL_SECRET") {
            Some(s) => Secret::from_hex(&s)?,
            None => {
                if rank == 0 {
                    say(&format!(
                        "ferrocoll: FERROCOLL_SECRET is not set; connections of job {job} are \
                         authenticated with a secret derived from its name, which keeps jobs \
                         apart but not attackers out"
                    ));
                }
                Secret::derived(&job)
            }
        });
        if rank == 0 {
            l.server = Some(serve_store(store, l.secret.clone().expect("set above"))?);
        }
        l.store = Some(store);
        Ok(l)
    }

    /// Rank `rank` of `size` meeting the others at the store `store`
    /// (an NCCL unique id's), authenticated with `secret`.
    pub fn joining(rank: usize, size: usize, store: SocketAddr, secret: Secret) -> Launch {
        Launch {
            rank,
            size,
            source: Source::UniqueId,
            local_job: None,
            secret: Some(secret),
            server: None,
            kv: None,
            store: Some(store),
        }
    }

    /// The key-value space, connecting to the store on first use.
    pub fn kv(&mut self) -> Result<&mut Kv> {
        if self.kv.is_none() {
            let p = params();
            let (Some(addr), Some(secret)) = (self.store, self.secret.as_ref()) else {
                return Err(Error::Unsupported(
                    "this job needs the rendezvous store, but the launcher gave none \
                     (ferrorun sets FERROCOLL_STORE and FERROCOLL_SECRET)"
                        .into(),
                ));
            };
            let c = StoreClient::connect(addr, secret, self.rank as u64, p.setup_timeout)?;
            self.kv = Some(Kv::Store(c));
        }
        Ok(self.kv.as_mut().expect("set above"))
    }

    /// Gives up the PMI session, if any (to finalize it at the end).
    pub fn take_pmi(&mut self) -> Option<Pmi> {
        match self.kv.take() {
            Some(Kv::Pmi(p)) => Some(p),
            other => {
                self.kv = other;
                None
            }
        }
    }
}

/// Where the store of a Slurm or torchrun-style job listens:
/// `FERROCOLL_STORE`, else `MASTER_ADDR:MASTER_PORT`, else (Slurm) the
/// step's first node at a port derived from the job and step ids.
fn store_address(source: Source) -> Result<SocketAddr> {
    if let Some(s) = env("FERROCOLL_STORE") {
        return resolve(&s);
    }
    if let (Some(a), Some(port)) = (env("MASTER_ADDR"), env("MASTER_PORT")) {
        return resolve(&format!("{}:{}", a.trim(), port.trim()));
    }
    if source == Source::Slurm {
        let nodes = env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST"));
        if let Some(host) = nodes.as_deref().and_then(first_slurm_host) {
            let job = num("SLURM_JOB_ID")?.unwrap_or(0);
            let step = num("SLURM_STEP_ID")?.unwrap_or(0);
            // Below Linux's ephemeral ports (32768 up), where connections would collide.
            let port = 12000 + (job * 31 + step) % 20000;
            return resolve(&format!("{host}:{port}"));
        }
    }
    Err(Error::InvalidArg(
        "no rendezvous address: set MASTER_ADDR and MASTER_PORT (or FERROCOLL_STORE=host:port)"
            .into(),
    ))
}

/// Rank 0 serves the store at `addr`; when that address belongs to no
/// local interface (a service name in front of the pod, say) it listens on
/// the chosen interface at the same port.
fn serve_store(addr: SocketAddr, secret: Secret) -> Result<StoreServer> {
    let ours = addr.ip().is_loopback()
        || mesh::interfaces()
            .iter()
            .any(|(_, ip)| std::net::IpAddr::V4(*ip) == addr.ip());
    let bind = if ours {
        addr
    } else {
        let ip = mesh::choose_ip(params().socket_ifname.as_deref(), false)?;
        SocketAddr::new(ip, addr.port())
    };
    StoreServer::start(bind, secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_node_lists() {
        assert_eq!(
            first_slurm_host("node[03-05,9],gpu1").as_deref(),
            Some("node03")
        );
        assert_eq!(first_slurm_host("a1,b2").as_deref(), Some("a1"));
        assert_eq!(first_slurm_host("single").as_deref(), Some("single"));
        assert_eq!(first_slurm_host(""), None);
    }
}
