//! The header that precedes every message on a link.

/// Encoded header length in bytes.
pub const FRAME_BYTES: usize = 32;
const MAGIC: u32 = 0xFC01_F4A3;

/// What a header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A message whose `len` bytes follow at once.
    Eager = 0,
    /// Ready to send: a message of `len` bytes waits for the receiver to
    /// ask for it (`Cts`); `token` names the sender's request.
    Rts = 1,
    /// Clear to send: the message named by `token` may come, into the
    /// receiver's place named by `len`.
    Cts = 2,
    /// The data of a message asked for by `Cts`: `token` is the receiver's
    /// place, `len` bytes follow.
    Data = 3,
    /// Ready to be read (shared memory only): a message of `len` bytes
    /// waits at address `token` of the sender, for the receiver to read it
    /// there (`transport::shm::cma`); `aux` names the sender's request,
    /// which also takes a `Cts` instead (a receiver that cannot read it).
    Pull = 4,
    /// The receiver has read the message of send `token` (a `Pull`).
    Done = 5,
}

/// Bytes of a header in its short form (`shorten`).
pub const SHORT_BYTES: usize = 16;

/// The short form of an encoded header whose `len` fits 32 bits and whose
/// `token` is 0 (an eager message's): the 16 bytes after the magic, which
/// `lengthen` turns back into the same 32. `None` for any other bytes. A
/// shared-memory post keeps a header this way, so that the header and a
/// message of up to 32 bytes share one cache line (`transport::shm::ring`).
pub fn shorten(b: &[u8]) -> Option<[u8; SHORT_BYTES]> {
    let b: &[u8; FRAME_BYTES] = b.try_into().ok()?;
    if b[..4] != MAGIC.to_le_bytes() || b[4 + SHORT_BYTES..].iter().any(|&x| x != 0) {
        return None;
    }
    let mut short = [0u8; SHORT_BYTES];
    short.copy_from_slice(&b[4..4 + SHORT_BYTES]);
    Some(short)
}

/// The 32 bytes whose short form (`shorten`) is `short`.
pub fn lengthen(short: &[u8; SHORT_BYTES]) -> [u8; FRAME_BYTES] {
    let mut b = [0u8; FRAME_BYTES];
    b[..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..4 + SHORT_BYTES].copy_from_slice(short);
    b
}

/// Largest `Frame::aux`: it travels in 24 bits.
pub const AUX_MAX: u32 = (1 << 24) - 1;

/// Message envelope: kind, context id, tag, payload length and a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What follows.
    pub kind: FrameKind,
    /// Communicator context (point-to-point and collective contexts differ).
    pub ctx: u32,
    /// MPI tag, or a collective's (sequence, step) tag.
    pub tag: i32,
    /// Payload bytes (or, for `Cts`, the receiver's place).
    pub len: u64,
    /// Names a request in a rendezvous (`Rts`, `Cts`, `Data`, `Done`), or
    /// the sender's address (`Pull`).
    pub token: u64,
    /// The sender's request of a `Pull` (at most `AUX_MAX`); 0 otherwise.
    pub aux: u32,
}

impl Frame {
    /// An eager message header.
    pub fn eager(ctx: u32, tag: i32, len: usize) -> Frame {
        Frame {
            kind: FrameKind::Eager,
            ctx,
            tag,
            len: len as u64,
            token: 0,
            aux: 0,
        }
    }

    /// Serialises the header.
    pub fn encode(&self) -> [u8; FRAME_BYTES] {
        let mut b = [0u8; FRAME_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.ctx.to_le_bytes());
        b[8..12].copy_from_slice(&self.tag.to_le_bytes());
        b[12] = self.kind as u8;
        debug_assert!(self.aux <= AUX_MAX);
        b[13..16].copy_from_slice(&self.aux.to_le_bytes()[..3]);
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.token.to_le_bytes());
        b
    }

    /// Parses a header; `None` if it is not one (corrupted stream).
    pub fn decode(b: &[u8; FRAME_BYTES]) -> Option<Frame> {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let long = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if word(0) != MAGIC {
            return None;
        }
        let kind = match b[12] {
            0 => FrameKind::Eager,
            1 => FrameKind::Rts,
            2 => FrameKind::Cts,
            3 => FrameKind::Data,
            4 => FrameKind::Pull,
            5 => FrameKind::Done,
            _ => return None,
        };
        Some(Frame {
            kind,
            ctx: word(4),
            tag: word(8) as i32,
            len: long(16),
            token: long(24),
            aux: u32::from_le_bytes([b[13], b[14], b[15], 0]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_reject_garbage() {
        let f = Frame {
            kind: FrameKind::Rts,
            ctx: 7,
            tag: -5,
            len: 1 << 40,
            token: u64::MAX - 3,
            aux: 0,
        };
        assert_eq!(Frame::decode(&f.encode()), Some(f));
        let pull = Frame {
            kind: FrameKind::Pull,
            aux: AUX_MAX,
            ..f
        };
        assert_eq!(Frame::decode(&pull.encode()), Some(pull));
        let mut bad = f.encode();
        bad[0] ^= 1;
        assert_eq!(Frame::decode(&bad), None);
        let mut bad = f.encode();
        bad[12] = 9;
        assert_eq!(Frame::decode(&bad), None);
    }

    /// Eager headers (token 0, `len` under 4 GiB) have a short form that
    /// gives the same bytes back; other headers and other bytes have none.
    #[test]
    fn short_forms_give_the_same_bytes_back() {
        for (ctx, tag, len) in [
            (0, 0, 0),
            (7, -5, 32),
            (u32::MAX, i32::MIN, u32::MAX as usize),
        ] {
            let e = Frame::eager(ctx, tag, len).encode();
            let short = shorten(&e).expect("an eager header shortens");
            assert_eq!(lengthen(&short), e);
        }
        let big = Frame::eager(1, 2, 1 << 32).encode();
        assert_eq!(shorten(&big), None);
        let done = Frame {
            kind: FrameKind::Done,
            token: 9,
            ..Frame::eager(1, 2, 0)
        };
        assert_eq!(shorten(&done.encode()), None);
        let mut bad = Frame::eager(1, 2, 3).encode();
        bad[0] ^= 1;
        assert_eq!(shorten(&bad), None);
        assert_eq!(shorten(&bad[..31]), None);
    }
}
