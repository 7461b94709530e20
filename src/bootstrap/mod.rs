//! Rank, size and peer discovery before any link exists: launcher
//! environments and a small authenticated key-value store (`store`) where
//! ranks publish their addresses and meet at barriers.

pub mod bind;
pub mod host;
pub mod launch;
pub mod pmi;
pub mod store;
pub mod unique_id;
pub mod wire;
