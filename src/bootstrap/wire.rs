//! Wiring a job's links once rank and size are known: shared memory
//! between the ranks of this host, TCP (through the rendezvous store)
//! where `FERROCOLL_TRANSPORT=tcp` asks for it.

use super::store::StoreClient;
use crate::comm::engine::Engine;
use crate::error::{Error, Result};
use crate::param::params;
use crate::transport::shm::Segment;
use crate::transport::tcp::auth::Secret;
use crate::transport::tcp::mesh;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Instant;

/// Which transport links ranks of one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Shared memory within a host (the default).
    Auto,
    /// TCP between every pair of ranks (`FERROCOLL_TRANSPORT=tcp`).
    Tcp,
}

/// The engine for `rank` of `size` ranks that share `seg`: its rings, or
/// TCP connections found through the store at `FERROCOLL_STORE`.
pub fn engine(rank: usize, size: usize, seg: Arc<Segment>) -> Result<Engine> {
    match params().transport {
        Transport::Auto => Ok(Engine::over_shm(rank, seg)),
        Transport::Tcp => {
            let env = |k: &str| std::env::var(k).ok();
            let (Some(store), Some(secret)) = (env("FERROCOLL_STORE"), env("FERROCOLL_SECRET"))
            else {
                return Err(Error::Unsupported(
                    "FERROCOLL_TRANSPORT=tcp needs a launcher that runs the rendezvous store \
                     (ferrorun sets FERROCOLL_STORE and FERROCOLL_SECRET)"
                        .into(),
                ));
            };
            let store: SocketAddr = store
                .trim()
                .parse()
                .map_err(|_| Error::InvalidArg(format!("bad FERROCOLL_STORE address {store}")))?;
            let secret = Secret::from_hex(&secret)?;
            let socks = tcp_mesh(rank, size, store, &secret)?;
            Engine::over_shm_and_tcp(rank, seg, socks)
        }
    }
}

/// Publishes this rank's listening address in the store, reads everyone
/// else's, and connects to all of them.
fn tcp_mesh(
    rank: usize,
    size: usize,
    store: SocketAddr,
    secret: &Secret,
) -> Result<Vec<(usize, std::net::TcpStream)>> {
    let p = params();
    let deadline = Instant::now() + p.setup_timeout;
    let ip = mesh::choose_ip(p.socket_ifname.as_deref(), true)?;
    let listener = TcpListener::bind((ip, 0)).map_err(|e| Error::os("listening for peers", e))?;
    let me = listener
        .local_addr()
        .map_err(|e| Error::os("listening for peers", e))?;
    let mut kv = StoreClient::connect(store, secret, rank as u64, p.setup_timeout)?;
    kv.set(&format!("addr/{rank}"), me.to_string().as_bytes())?;
    let mut addrs = vec![None; size];
    for (q, slot) in addrs.iter_mut().enumerate().filter(|&(q, _)| q != rank) {
        let left = deadline.saturating_duration_since(Instant::now());
        let raw = kv.get(&format!("addr/{q}"), left)?;
        let text = String::from_utf8_lossy(&raw);
        *slot = Some(text.parse::<SocketAddr>().map_err(|_| {
            Error::InvalidArg(format!("rank {q} published a bad address {text:?}"))
        })?);
    }
    mesh::connect_all(rank, &listener, &addrs, secret, deadline)
}
