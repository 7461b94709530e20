//! NCCL-style bootstrap: one process makes a unique id (the address of a
//! rendezvous store it serves, plus a fresh secret), passes the 128 bytes to
//! every rank by its own means (MPI_Bcast, a file, torch's store), and each
//! rank joins with (id, nranks, rank). Links are then wired as for any
//! launcher: shared memory within a host, TCP between hosts.
//!
//! The store lives in the process that made the id until every rank has
//! joined; later calls prune finished stores.

use super::launch::Launch;
use super::store::StoreServer;
use super::wire::{wire, Wired};
use crate::error::{Error, Result};
use crate::param::params;
use crate::transport::tcp::auth::Secret;
use crate::transport::tcp::mesh;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Mutex, PoisonError};

/// Bytes in an id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;
const MAGIC: &[u8; 8] = b"fcoll-id";

/// A decoded unique id.
#[derive(Clone, Debug, PartialEq)]
pub struct UniqueId {
    /// Where the rendezvous store listens.
    pub store: SocketAddr,
    /// Authenticates every connection of the communicator.
    pub secret: Secret,
}

impl UniqueId {
    /// The id's 128 bytes: magic, IPv4 address, port, secret; zeros after.
    pub fn to_bytes(&self) -> [u8; ID_BYTES] {
        let mut b = [0u8; ID_BYTES];
        b[..8].copy_from_slice(MAGIC);
        let ip = match self.store.ip() {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        b[8..12].copy_from_slice(&ip.octets());
        b[12..14].copy_from_slice(&self.store.port().to_be_bytes());
        b[16..48].copy_from_slice(self.secret.as_bytes());
        b
    }

    /// Decodes an id, refusing bytes no `make` produced.
    pub fn from_bytes(b: &[u8; ID_BYTES]) -> Result<UniqueId> {
        if &b[..8] != MAGIC || b[48..].iter().any(|&x| x != 0) {
            return Err(Error::InvalidArg(
                "not a unique id from ncclGetUniqueId (bad magic or trailing bytes)".into(),
            ));
        }
        let ip = Ipv4Addr::new(b[8], b[9], b[10], b[11]);
        let port = u16::from_be_bytes([b[12], b[13]]);
        if ip.is_unspecified() || port == 0 {
            return Err(Error::InvalidArg("unique id holds no store address".into()));
        }
        let secret = Secret::from_bytes(b[16..48].try_into().expect("32 bytes"));
        Ok(UniqueId {
            store: SocketAddr::new(IpAddr::V4(ip), port),
            secret,
        })
    }
}

/// Stores this process serves for ids it made: (server, ranks expected
/// once known).
static SERVED: Mutex<Vec<StoreServer>> = Mutex::new(Vec::new());

/// Key under which each joining rank counts itself.
const JOINED: &str = "nccl/joined";
/// Key under which rank 0 publishes the communicator's size.
const SIZE: &str = "nccl/size";

/// Makes a fresh id and serves its store on the chosen interface
/// (`FERROCOLL_SOCKET_IFNAME`, else the first non-loopback one).
pub fn make() -> Result<UniqueId> {
    prune();
    let ip = mesh::choose_ip(params().socket_ifname.as_deref(), false)?;
    let secret = Secret::random()?;
    let server = StoreServer::start(SocketAddr::new(ip, 0), secret.clone())?;
    let id = UniqueId {
        store: server.addr(),
        secret,
    };
    SERVED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(server);
    Ok(id)
}

/// Stops the stores every rank has joined and left: a rank still connected
/// may be waiting for the reply to its own `joined` count (stopping then
/// made its `ncclCommInitRank` fail with "the store server closed").
fn prune() {
    let joined = |s: &StoreServer| {
        s.value(JOINED)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(i64::from_le_bytes)
    };
    let size = |s: &StoreServer| {
        s.value(SIZE)
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|t| t.parse::<i64>().ok())
    };
    SERVED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|s| match (joined(s), size(s)) {
            (Some(j), Some(n)) => j < n || s.clients() > 0,
            _ => true,
        });
}

/// Joins the communicator of `nranks` ranks that `id` names, as `rank`.
pub fn join(id: &UniqueId, nranks: usize, rank: usize) -> Result<Wired> {
    if rank >= nranks {
        return Err(Error::InvalidArg(format!(
            "rank {rank} is out of range for {nranks} ranks"
        )));
    }
    let mut launch = Launch::joining(rank, nranks, id.store, id.secret.clone());
    if rank == 0 {
        launch.kv()?.put(SIZE, &nranks.to_string())?;
    }
    // An NCCL rank may be one of the application's threads: not bound.
    let wired = wire(launch, false)?;
    // Counted once this rank's links are up, so the store's owner can stop it.
    let mut c = super::store::StoreClient::connect(
        id.store,
        &id.secret,
        rank as u64,
        params().setup_timeout,
    )?;
    c.add(JOINED, 1)?;
    drop(c);
    prune();
    Ok(wired)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store every rank joined stays while a rank is still connected
    /// (the last one may await the reply to its count), and goes after.
    #[test]
    fn a_joined_store_stops_only_once_its_ranks_left() {
        use crate::bootstrap::store::StoreClient;
        use std::time::{Duration, Instant};
        let secret = Secret::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), secret.clone()).unwrap();
        let addr = server.addr();
        let served = || {
            SERVED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|s| s.addr() == addr)
        };
        SERVED.lock().unwrap().push(server);
        let mut c = StoreClient::connect(addr, &secret, 0, Duration::from_secs(5)).unwrap();
        c.set(SIZE, b"1").unwrap();
        assert_eq!(c.add(JOINED, 1).unwrap(), 1);
        prune();
        assert!(served(), "stopped under a connected rank");
        assert_eq!(c.check(SIZE).unwrap(), Some(b"1".to_vec()));
        drop(c);
        let start = Instant::now();
        while served() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
            prune();
        }
        assert!(!served(), "kept after every rank left");
    }

    #[test]
    fn ids_round_trip_and_strangers_are_refused() {
        let id = UniqueId {
            store: "10.1.2.3:4567".parse().expect("address"),
            secret: Secret::from_bytes([7; 32]),
        };
        let b = id.to_bytes();
        assert_eq!(UniqueId::from_bytes(&b).expect("decodes"), id);
        let mut bad = b;
        bad[0] ^= 1;
        assert!(UniqueId::from_bytes(&bad).is_err());
        let mut bad = b;
        bad[100] = 1;
        assert!(UniqueId::from_bytes(&bad).is_err());
        assert!(UniqueId::from_bytes(&[0; ID_BYTES]).is_err());
    }
}
