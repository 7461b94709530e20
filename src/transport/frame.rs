//! The header that precedes every message on a link.

/// Encoded header length in bytes.
pub const FRAME_BYTES: usize = 24;
const MAGIC: u32 = 0xFC01_F4A3;

/// Message envelope: context id, tag and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Communicator context (point-to-point and collective contexts differ).
    pub ctx: u32,
    /// MPI tag, or a collective's (sequence, step) tag.
    pub tag: i32,
    /// Payload bytes that follow.
    pub len: u64,
}

impl Frame {
    /// Serialises the header.
    pub fn encode(&self) -> [u8; FRAME_BYTES] {
        let mut b = [0u8; FRAME_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.ctx.to_le_bytes());
        b[8..12].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Parses a header; `None` if the magic is wrong (corrupted stream).
    pub fn decode(b: &[u8; FRAME_BYTES]) -> Option<Frame> {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if word(0) != MAGIC {
            return None;
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[16..24]);
        Some(Frame {
            ctx: word(4),
            tag: word(8) as i32,
            len: u64::from_le_bytes(len),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_reject_garbage() {
        let f = Frame {
            ctx: 7,
            tag: -5,
            len: 1 << 40,
        };
        assert_eq!(Frame::decode(&f.encode()), Some(f));
        let mut bad = f.encode();
        bad[0] ^= 1;
        assert_eq!(Frame::decode(&bad), None);
    }
}
