//! TCP links between ranks on different hosts (or everywhere, with
//! `FERROCOLL_TRANSPORT=tcp`): authenticated connections (`auth`) whose
//! bytes a per-process progress thread moves between the sockets and
//! per-peer queues, so the engine never blocks on a socket and a full
//! socket buffer never stalls a ring of sends.

pub mod auth;
pub mod congestion;
pub mod link;
pub mod mesh;
mod rxbuf;
pub mod sockbuf;
