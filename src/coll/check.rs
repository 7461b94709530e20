//! Mismatch detection (`FERROCOLL_CHECK=1`): before a collective runs, its
//! ranks gather a fixed-size description of what each was called with and
//! compare them. Ranks that called different collectives, or the same one
//! with different counts, types, ops or roots, would otherwise hang or
//! exchange the wrong bytes; with the check every rank fails with the same
//! error naming both sides. The exchange is the same small allgather
//! whatever the call, so it cannot itself mismatch.

use super::{allgather, Ctx};
use crate::error::{Error, Result};

/// Bytes one rank contributes to the exchange.
pub const WIRE: usize = 128;
/// Bytes of the key (fixed fields) at the start of the wire form.
const KEY: usize = 32;
/// Marks the wire form, so a rank that skipped the check (its own setting
/// differs) is reported instead of being compared field by field.
const MAGIC: u32 = 0xc4ec_c011;
/// A field every value matches (v-variant counts are per rank).
const ANY: u64 = u64::MAX;

/// What one rank was called with. Fields left unset match anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    call: u32,
    root: u64,
    bytes: u64,
    elem: u64,
    op: u64,
    /// The call as the user wrote it, for the error message.
    text: String,
}

impl Signature {
    /// A call to the collective `name` (e.g. `MPI_Allreduce`), described
    /// for the error message by `text` (e.g. `MPI_Allreduce(count 4 of MPI_INT, MPI_SUM)`).
    pub fn new(name: &str, text: String) -> Signature {
        Signature {
            call: fnv1a(name.as_bytes()),
            root: ANY,
            bytes: ANY,
            elem: ANY,
            op: ANY,
            text,
        }
    }

    /// The root rank, which all ranks must name.
    pub fn root(mut self, root: usize) -> Signature {
        self.root = root as u64;
        self
    }

    /// The data bytes every rank's part must have, and the element type
    /// they are made of (a stable id: the C handle or enum value).
    pub fn data(mut self, bytes: usize, elem: u32) -> Signature {
        self.bytes = bytes as u64;
        self.elem = elem as u64;
        self
    }

    /// The data bytes alone (untyped data such as `MPI_BYTE` matches any type).
    pub fn bytes(mut self, bytes: usize) -> Signature {
        self.bytes = bytes as u64;
        self
    }

    /// The element type alone (sizes differ per rank, as in the v-variants).
    pub fn elem(mut self, elem: u32) -> Signature {
        self.elem = elem as u64;
        self
    }

    /// The reduction (a stable id: the C handle or enum value).
    pub fn op(mut self, op: u32) -> Signature {
        self.op = op as u64;
        self
    }

    /// The fixed-size wire form: key fields, then the text (cut to fit).
    pub fn encode(&self) -> [u8; WIRE] {
        let mut w = [0u8; WIRE];
        w[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        w[4..8].copy_from_slice(&self.call.to_le_bytes());
        w[8..16].copy_from_slice(&self.root.to_le_bytes());
        w[16..24].copy_from_slice(&self.bytes.to_le_bytes());
        // Element type and op share one word each half: ids are 32-bit.
        w[24..28].copy_from_slice(&(self.elem as u32).to_le_bytes());
        w[28..32].copy_from_slice(&(self.op as u32).to_le_bytes());
        let mut text = self.text.as_bytes();
        if text.len() > WIRE - KEY - 1 {
            let mut cut = WIRE - KEY - 1;
            while !self.text.is_char_boundary(cut) {
                cut -= 1;
            }
            text = &text[..cut];
        }
        w[KEY] = text.len() as u8;
        w[KEY + 1..KEY + 1 + text.len()].copy_from_slice(text);
        w
    }

    /// Reads a wire form back; `None` when it is not one (no magic, or a
    /// length beyond the buffer).
    pub fn decode(w: &[u8]) -> Option<Signature> {
        if w.len() != WIRE || u32::from_le_bytes(w[0..4].try_into().ok()?) != MAGIC {
            return None;
        }
        let word = |a: usize| u64::from_le_bytes(w[a..a + 8].try_into().expect("8 bytes"));
        let half = |a: usize| u32::from_le_bytes(w[a..a + 4].try_into().expect("4 bytes"));
        let widen = |v: u32| if v == u32::MAX { ANY } else { v as u64 };
        let len = w[KEY] as usize;
        let text = w.get(KEY + 1..KEY + 1 + len)?;
        Some(Signature {
            call: half(4),
            root: word(8),
            bytes: word(16),
            elem: widen(half(24)),
            op: widen(half(28)),
            text: String::from_utf8_lossy(text).into_owned(),
        })
    }

    /// Whether two ranks' calls can run together.
    pub fn matches(&self, other: &Signature) -> bool {
        let same = |a: u64, b: u64| a == b || a == ANY || b == ANY;
        self.call == other.call
            && same(self.root, other.root)
            && same(self.bytes, other.bytes)
            && same(self.elem, other.elem)
            && same(self.op, other.op)
    }
}

/// Exchanges `mine` with every rank of `c` and fails, on every rank alike,
/// when some rank's call does not match rank 0's: the error names rank 0's
/// call and the lowest-ranked differing one.
pub fn agree(c: &mut Ctx, mine: &Signature) -> Result<()> {
    let n = c.size();
    if n == 1 {
        return Ok(());
    }
    let mut all = vec![0u8; WIRE * n];
    let blocks: Vec<(usize, usize)> = (0..n).map(|r| (r * WIRE, WIRE)).collect();
    allgather::allgatherv(c, Some(&mine.encode()), &mut all, &blocks)?;
    verdict(&all)
}

/// The comparison of `agree`, over the gathered wire forms.
fn verdict(all: &[u8]) -> Result<()> {
    let sigs: Vec<Option<Signature>> = all.chunks(WIRE).map(Signature::decode).collect();
    let Some(Some(first)) = sigs.first() else {
        return Err(mismatch(0, "a collective with FERROCOLL_CHECK off", None));
    };
    for (r, s) in sigs.iter().enumerate().skip(1) {
        match s {
            None => {
                return Err(mismatch(
                    r,
                    "a collective with FERROCOLL_CHECK off",
                    Some(&first.text),
                ))
            }
            Some(s) if !first.matches(s) => return Err(mismatch(r, &s.text, Some(&first.text))),
            Some(_) => {}
        }
    }
    Ok(())
}

fn mismatch(r: usize, theirs: &str, first: Option<&str>) -> Error {
    let first = first.unwrap_or("a collective with FERROCOLL_CHECK off");
    Error::Mismatch(format!(
        "collective mismatch (FERROCOLL_CHECK): rank 0 called {first} but rank {r} called {theirs}"
    ))
}

/// 32-bit FNV-1a: a stable id for a collective's name.
fn fnv1a(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ x as u32).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(name: &str) -> Signature {
        Signature::new(name, format!("{name}(...)"))
    }

    #[test]
    fn wire_form_round_trips() {
        let s = sig("MPI_Reduce")
            .root(3)
            .data(40, 0x4c00_0405)
            .op(0x5800_0003);
        assert_eq!(Signature::decode(&s.encode()), Some(s.clone()));
        let v = sig("MPI_Gatherv").root(1).elem(7);
        assert_eq!(Signature::decode(&v.encode()), Some(v));
        // Long text is cut on a character boundary, not rejected.
        let long = Signature::new("MPI_Bcast", "é".repeat(200));
        let back = Signature::decode(&long.encode()).expect("decodes");
        assert!(back.text.len() < WIRE - KEY && back.text.starts_with('é'));
        assert_eq!(Signature::decode(&[0u8; WIRE]), None);
        let mut bad = s.encode();
        bad[KEY] = 200;
        assert_eq!(Signature::decode(&bad), None);
    }

    #[test]
    fn each_field_must_agree_unless_unset() {
        let a = sig("MPI_Reduce").root(0).data(16, 1).op(2);
        assert!(a.matches(&a.clone()));
        assert!(!a.matches(&sig("MPI_Bcast").root(0).data(16, 1)));
        assert!(!a.matches(&sig("MPI_Reduce").root(1).data(16, 1).op(2)));
        assert!(!a.matches(&sig("MPI_Reduce").root(0).data(8, 1).op(2)));
        assert!(!a.matches(&sig("MPI_Reduce").root(0).data(16, 9).op(2)));
        assert!(!a.matches(&sig("MPI_Reduce").root(0).data(16, 1).op(3)));
        // v-variants compare root and type only.
        let v = sig("MPI_Gatherv").root(0).elem(1);
        assert!(v.matches(&sig("MPI_Gatherv").root(0).elem(1)));
        assert!(!v.matches(&sig("MPI_Gatherv").root(2).elem(1)));
    }

    #[test]
    fn verdict_names_rank_zero_and_the_first_odd_one() {
        let a = sig("MPI_Allreduce").data(4, 1).op(2);
        let b = Signature::new("MPI_Bcast", "MPI_Bcast(count 1)".into()).root(0);
        let mut all = Vec::new();
        for s in [&a, &a, &b, &b] {
            all.extend_from_slice(&s.encode());
        }
        let e = verdict(&all).unwrap_err().to_string();
        assert!(
            e.contains("rank 0 called MPI_Allreduce(...) but rank 2 called MPI_Bcast(count 1)"),
            "{e}"
        );
        let mut ok = Vec::new();
        ok.extend_from_slice(&a.encode());
        ok.extend_from_slice(&a.encode());
        assert_eq!(verdict(&ok), Ok(()));
        // A rank that did not run the check shows up as such.
        ok.extend_from_slice(&[0u8; WIRE]);
        let e = verdict(&ok).unwrap_err().to_string();
        assert!(
            e.contains("rank 2 called a collective with FERROCOLL_CHECK off"),
            "{e}"
        );
    }
}
