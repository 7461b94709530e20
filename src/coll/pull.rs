//! Collectives whose ranks read each other's buffers where they lie
//! (cross-memory attach, `transport::shm::cma`): each byte is copied once,
//! by the rank that needs it, straight from the user's buffer into the
//! user's buffer; nothing passes through the slots.
//!
//! A call takes two slot calls. In the first, the ranks whose buffers are
//! read publish their addresses and lengths; the readers read. In the
//! second, every rank says whether its reads succeeded, and waits for the
//! others: no buffer is given back to its caller before every read of it
//! has ended. If any read failed (a kernel that refuses, see
//! `FERROCOLL_CMA`), every rank learns it in that second call, turns pulls
//! off for the communicator and runs the call another way (each function
//! then returns `Ok(false)`; the destinations it wrote are written again).

use super::slots::{self, mark_done, part, publish, wait_flag, Call, Place};
use super::{split_blocks, Ctx, Reducer};
use crate::copy::copy;
use crate::error::{Error, Result};
use crate::transport::shm::{cma, demote};

/// Bytes of one offer: the address and the length of a buffer.
const OFFER: usize = 16;

fn put(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

/// Publishes this rank's offer of `buf` (and `table`, (offset, length)
/// pairs after it) in a new slot call.
fn offer(c: &mut Ctx, buf: &[u8], table: &[(usize, usize)]) -> Result<Call> {
    let call = slots::begin(c)?;
    publish_offer(c, &call, buf.as_ptr() as u64, buf.len(), table)?;
    Ok(call)
}

/// Publishes an offer of `len` bytes at `addr` (0: none to read) and
/// `table` in `call`, as `offered` reads it.
fn publish_offer(
    c: &mut Ctx,
    call: &Call,
    addr: u64,
    len: usize,
    table: &[(usize, usize)],
) -> Result<()> {
    let bytes = OFFER * (1 + table.len());
    publish(c, call, bytes, false, Place::Near, |d| {
        put(d, 0, addr);
        put(d, 8, len as u64);
        for (i, &(o, l)) in table.iter().enumerate() {
            put(d, OFFER * (1 + i), o as u64);
            put(d, OFFER * (1 + i) + 8, l as u64);
        }
        Ok(())
    })
}

/// Whether an offer with a table of `n` entries fits a slot.
pub fn fits(n: usize) -> bool {
    OFFER * (1 + n) <= crate::transport::shm::slots::SLOT_DATA
}

/// Rank `p`'s offer in `call`: (address, length), and its table entry `i`
/// if asked.
fn offered(c: &mut Ctx, call: &Call, p: usize, entry: Option<usize>) -> Result<(u64, usize)> {
    wait_flag(c, call, p)?;
    let head = part(c, call, p, false, 0, OFFER);
    let (addr, len) = (get(head, 0), get(head, 8) as usize);
    match entry {
        None => Ok((addr, len)),
        Some(i) => {
            let e = part(c, call, p, false, OFFER * (1 + i), OFFER);
            let (o, l) = (get(e, 0) as usize, get(e, 8) as usize);
            if o.checked_add(l).is_none_or(|end| end > len) {
                return Err(Error::InvalidArg(format!(
                    "rank {p}'s block {i} lies outside its buffer"
                )));
            }
            Ok((addr + o as u64, l))
        }
    }
}

/// Reads `dst.len()` bytes at `addr` of rank `p`; false if the kernel
/// refused (then this rank reads no peer's memory again) or refused
/// before.
fn read(c: &mut Ctx, p: usize, addr: u64, dst: &mut [u8]) -> bool {
    reach(c, p, |pid| cma::read(pid, addr, dst))
}

/// Writes `src` at `addr` of rank `p`, as `read` reads.
fn write(c: &mut Ctx, p: usize, addr: u64, src: &[u8]) -> bool {
    reach(c, p, |pid| cma::write(pid, addr, src))
}

/// Runs `transfer` on rank `p`'s process, where this rank may reach it;
/// a refusal stops this rank reaching any peer again.
fn reach(
    c: &mut Ctx,
    p: usize,
    transfer: impl FnOnce(u32) -> std::result::Result<(), cma::Refused>,
) -> bool {
    let Some(pid) = c.pid_of(p) else {
        return false;
    };
    let ok = transfer(pid).is_ok();
    if !ok {
        c.refused();
    }
    ok
}

/// The closing slot call: every rank publishes whether its reads
/// succeeded and waits for all the others. True if all did; otherwise
/// pulls are off for the communicator from now on, on every rank alike.
fn settle(c: &mut Ctx, ok: bool) -> Result<bool> {
    Ok(settle_all(c, ok, false)?.0)
}

/// `settle`, where a rank may also report bad arguments (`bad`): returns
/// whether every rank's reads succeeded, and whether any rank's arguments
/// were bad (so that every rank fails, not only the one that saw it).
fn settle_all(c: &mut Ctx, ok: bool, bad: bool) -> Result<(bool, bool)> {
    let call = slots::begin(c)?;
    publish(c, &call, 1, false, Place::Near, |d| {
        d[0] = u8::from(ok) | u8::from(bad) << 1;
        Ok(())
    })?;
    let (n, me, mut all, mut any_bad) = (c.size(), c.rank(), ok, bad);
    for p in (0..n).filter(|&p| p != me) {
        wait_flag(c, &call, p)?;
        let v = part(c, &call, p, false, 0, 1)[0];
        all &= v & 1 == 1;
        any_bad |= v & 2 != 0;
    }
    mark_done(c, &call, true);
    if !all {
        c.stop_pulls();
        crate::param::debug_log(crate::param::DebugLevel::Warn, || {
            format!(
                "{}: a rank could not read its peers' memory; collectives on this \
                 communicator no longer read in place",
                c.op
            )
        });
    }
    Ok((all, any_bad))
}

/// Settles a call in which this rank's arguments may be `bad`: every rank
/// fails if any rank's were (with its own error, or one naming the call's
/// mismatch), else returns whether every transfer succeeded. Reduce,
/// allreduce, reduce-scatter and gather settle so.
fn settled(c: &mut Ctx, ok: bool, bad: Option<Error>) -> Result<bool> {
    let (all, any_bad) = settle_all(c, ok, bad.is_some())?;
    verdict(c, all, any_bad, bad)
}

/// The outcome of a call settled with `settle_all` (see `settled`).
fn verdict(c: &Ctx, all: bool, any_bad: bool, bad: Option<Error>) -> Result<bool> {
    match bad {
        Some(e) => Err(e),
        None if any_bad => Err(Error::InvalidArg(format!(
            "{}: another rank's lengths differ from this one's (mismatched counts)",
            c.op
        ))),
        None => Ok(all),
    }
}

/// Reads every other member's offer in `call` into its block of `recv`,
/// in rank order after `from`: the last `tail(length)` bytes of each
/// block (all of it, or the root's share of a 2-rank gather). An offer
/// whose length differs from its block is read nowhere and reported in
/// `bad`, and one at address 0 (a block its rank writes itself,
/// `gatherv`) is passed over. Returns whether every read succeeded.
fn read_blocks(
    c: &mut Ctx,
    call: &Call,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
    from: usize,
    tail: impl Fn(usize) -> usize,
    bad: &mut Option<Error>,
) -> Result<bool> {
    let (n, mut ok) = (c.size(), true);
    for p in (1..n).map(|i| (from + i) % n) {
        let (addr, len) = offered(c, call, p, None)?;
        let (po, pl) = blocks[p];
        let t = tail(pl).min(pl);
        if addr == 0 {
            continue;
        } else if len != pl {
            bad.get_or_insert(mismatch(p, len, pl));
        } else if ok && t > 0 {
            let skip = pl - t;
            ok = read(c, p, addr + skip as u64, &mut recv[po + skip..po + pl]);
        }
    }
    Ok(ok)
}

/// Ends the offers' call (`read_all`: this rank read every peer's offer),
/// settles, and returns `bad` if there is one, else whether the call is
/// done.
fn close(c: &mut Ctx, call: Call, read_all: bool, ok: bool, bad: Option<Error>) -> Result<bool> {
    mark_done(c, &call, read_all);
    let all = settle(c, ok)?;
    bad.map_or(Ok(all), Err)
}

fn mismatch(p: usize, got: usize, want: usize) -> Error {
    Error::InvalidArg(format!(
        "rank {p} offers {got} bytes for a {want}-byte block (mismatched counts)"
    ))
}

/// Allgather(v): block `blocks[r]` of `recv` (or `send`) from every rank
/// to every rank.
pub fn allgatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<bool> {
    let me = c.rank();
    // Only to reject overlapping or outlying blocks.
    split_blocks(recv, blocks)?;
    let (o, l) = blocks[me];
    if let Some(s) = send {
        super::check_len(l, s.len())?;
    }
    let call = offer(c, send.unwrap_or(&recv[o..o + l]), &[])?;
    if let Some(s) = send {
        copy(&mut recv[o..o + l], s);
    }
    let mut bad = None;
    let ok = read_blocks(c, &call, recv, blocks, me, |l| l, &mut bad)?;
    close(c, call, true, ok, bad)
}

/// All-to-all with every block `blocks[j].1` bytes long and at the same
/// place on every rank (the layout of `MPI_Alltoall`): each rank reads
/// its block of every peer's `send`.
pub fn alltoall(
    c: &mut Ctx,
    send: &[u8],
    recv: &mut [u8],
    blocks: &[(usize, usize)],
) -> Result<bool> {
    let (n, me) = (c.size(), c.rank());
    super::check_send_blocks(send.len(), blocks)?;
    split_blocks(recv, blocks)?;
    let call = offer(c, send, &[])?;
    let (o, l) = blocks[me];
    copy(&mut recv[o..o + l], &send[o..o + l]);
    let (mut ok, mut bad) = (true, None);
    for p in (1..n).map(|i| (me + i) % n) {
        let (addr, len) = offered(c, &call, p, None)?;
        let (po, pl) = blocks[p];
        if len != send.len() {
            bad.get_or_insert(mismatch(p, len, send.len()));
        } else if ok {
            ok = read(c, p, addr + o as u64, &mut recv[po..po + pl]);
        }
    }
    close(c, call, true, ok, bad)
}

/// Broadcast of the root's `buf`. With `share`, every other rank offers
/// its buffer too, and the root writes the back `1/n` of the vector into
/// each while they read the rest, so every core copies.
pub fn bcast(c: &mut Ctx, buf: &mut [u8], root: usize, share: bool) -> Result<bool> {
    let (n, len) = (c.size(), buf.len());
    // Bytes every other rank reads; the root writes the rest, from a page
    // boundary of the vector.
    let front = if share {
        (len - len / n).next_multiple_of(4096).min(len)
    } else {
        len
    };
    if c.rank() == root {
        let call = offer(c, buf, &[])?;
        let (mut ok, mut bad) = (true, None);
        let writes = if share { n } else { 0 };
        for p in (0..writes).filter(|&p| p != root) {
            let (addr, l) = offered(c, &call, p, None)?;
            if l != len {
                bad.get_or_insert(mismatch(p, l, len));
            } else if ok {
                ok = write(c, p, addr + front as u64, &buf[front..]);
            }
        }
        return close(c, call, share, ok, bad);
    }
    let call = if share {
        offer(c, buf, &[])?
    } else {
        slots::begin(c)?
    };
    let (addr, l) = offered(c, &call, root, None)?;
    let (ok, bad) = if l == len {
        (read(c, root, addr, &mut buf[..front]), None)
    } else {
        (true, Some(mismatch(root, l, len)))
    };
    close(c, call, false, ok, bad)
}

/// Gather(v) of every rank's `send` into block `blocks[r]` of the root's
/// `recv`; on the root `send == None` means in place. The root offers its
/// buffer with the block table, and every other rank writes its block
/// there (`process_vm_writev`) while the root copies its own: the copies
/// run on every core. A block length that differs from the root's table
/// fails the call on every rank.
///
/// Where ranks outnumber cores, every other rank first says whether it
/// writes (`read_by_root`): one that shares the root's core offers its
/// block instead, and the root reads it.
pub fn gatherv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    blocks: &[(usize, usize)],
    root: usize,
) -> Result<bool> {
    let me = c.rank();
    if me != root {
        let s = send.ok_or_else(|| Error::InvalidArg("gather without a send buffer".into()))?;
        let call = slots::begin(c)?;
        let crowded = c.eng.crowded();
        let by_root = crowded && read_by_root(c, root);
        let shared = shares_gather(c);
        if crowded || shared {
            // 0: this rank writes its whole block itself.
            let addr = if by_root || shared {
                s.as_ptr() as u64
            } else {
                0
            };
            publish_offer(c, &call, addr, s.len(), &[])?;
        }
        let (ok, bad) = if by_root {
            (true, None)
        } else {
            let (addr, l) = offered(c, &call, root, Some(me))?;
            // The front of the block; the root reads the rest.
            let own = s.len() - if shared { root_share(s.len()) } else { 0 };
            if l == s.len() {
                (write(c, root, addr, &s[..own]), None)
            } else {
                (true, Some(mismatch(me, s.len(), l)))
            }
        };
        mark_done(c, &call, false);
        return settled(c, ok, bad);
    }
    let recv =
        recv.ok_or_else(|| Error::InvalidArg("gather root without a receive buffer".into()))?;
    // Blocks that overlap or outlie `recv` are offered as empty: every
    // writer then sees its length differ, and nothing is written.
    if let Err(e) = split_blocks(recv, blocks) {
        let call = offer(c, recv, &vec![(0, 0); blocks.len()])?;
        mark_done(c, &call, false);
        return settled(c, true, Some(e));
    }
    let call = offer(c, recv, blocks)?;
    let (o, l) = blocks[root];
    let mut bad = None;
    if let Some(s) = send {
        if s.len() == l {
            copy(&mut recv[o..o + l], s);
        } else {
            bad = Some(mismatch(root, s.len(), l));
        }
    }
    let crowded = c.eng.crowded();
    // Where ranks outnumber cores every other rank offers: its block to
    // read, or an address of 0 where it writes it. With two ranks on cores
    // of their own the other offers its block, and the root reads its
    // share, the block's end, once its own block is copied.
    let shared = shares_gather(c);
    let ok = if crowded {
        read_blocks(c, &call, recv, blocks, root, |l| l, &mut bad)?
    } else if shared {
        read_blocks(c, &call, recv, blocks, root, root_share, &mut bad)?
    } else {
        true
    };
    mark_done(c, &call, crowded || shared);
    settled(c, ok, bad)
}

/// Whether a pulled gather's root reads a share of the other rank's
/// block itself (`root_share`): two ranks on cores of their own.
fn shares_gather(c: &Ctx) -> bool {
    c.size() == 2 && !c.eng.crowded()
}

/// Bytes at the end of a `len`-byte block that the root of a 2-rank
/// gather reads itself while the other rank writes the rest: about 30%,
/// in whole pages, for blocks up to `SHARED_UP_TO`. The root copies its
/// own block with `memcpy` while the other writes its block into the root
/// through the kernel (`process_vm_writev`, page by page), which took
/// longer: the root waited for it. 2 ranks, `mpibench -t` (bytes of both
/// blocks), alternated, medians, us, no share / 30%: 2 MiB 99.4 / 97.4
/// (10 rounds, 6 won), 8 MiB 663 / 511 (10 rounds, 9 won), 16 MiB 2649 /
/// 2045 (6 rounds, 6 won); past the bound, 32 MiB 4046 / 3741 (6 rounds, 3
/// won), 64 MiB 8155 / 8795 (4 rounds, 2 won: both cores copy at the
/// memory's pace there); 20-40% read alike at 2-8 MiB; 64 KiB - 1 MiB
/// alike.
fn root_share(len: usize) -> usize {
    if len > SHARED_UP_TO {
        return 0;
    }
    len * 3 / 10 / 4096 * 4096
}

/// Largest block of which a 2-rank gather's root reads a share.
const SHARED_UP_TO: usize = 8 << 20;

/// Whether a gather's other rank offers its block for the root to read
/// instead of writing it: where it shares the root's core. Every writer's
/// `process_vm_writev` into the root takes the lock of the root's page
/// table for each page, and writers on two cores at once spun on it (a
/// seventh of a 4-rank gather's samples, in the paravirtual spin lock's
/// slow path); the root reading its core-mate's block copies as much on
/// that core, under its mate's lock.
fn read_by_root(c: &Ctx, root: usize) -> bool {
    c.eng.shares_core(c.comm.world_rank(root))
}

/// Scatter(v) of block `blocks[r]` of the root's `send` to rank `r`'s
/// `recv`; on the root `recv == None` means in place.
pub fn scatterv(
    c: &mut Ctx,
    send: Option<&[u8]>,
    blocks: &[(usize, usize)],
    recv: Option<&mut [u8]>,
    root: usize,
) -> Result<bool> {
    let me = c.rank();
    if me == root {
        let s =
            send.ok_or_else(|| Error::InvalidArg("scatter root without a send buffer".into()))?;
        let parts = super::send_blocks(s, blocks)?;
        let mut bad = None;
        if let Some(d) = recv {
            if d.len() == parts[root].len() {
                copy(d, parts[root]);
            } else {
                bad = Some(mismatch(root, parts[root].len(), d.len()));
            }
        }
        let call = offer(c, s, blocks)?;
        return close(c, call, false, true, bad);
    }
    let d = recv.ok_or_else(|| Error::InvalidArg("scatter without a receive buffer".into()))?;
    let call = slots::begin(c)?;
    let (addr, len) = offered(c, &call, root, Some(me))?;
    let (ok, bad) = if len == d.len() {
        (read(c, root, addr, d), None)
    } else {
        (true, Some(mismatch(root, len, d.len())))
    };
    close(c, call, false, ok, bad)
}

/// Bytes of a block a rank reads and folds at a time: the piece of the
/// result stays in cache between the reads and the folds, and each piece
/// costs a read from every peer and, in an allreduce, a write to each.
/// Alternated, medians of 6, us, pieces of 64 KiB / 256 KiB / 512 KiB:
/// 2-rank allreduce 512 KiB 29.1 / 24.1 / 24.4, 2 MiB 214 / 195 / 197, 8
/// MiB 904 / 822 / 828; 2-rank reduce 2 MiB 191 / 180 / 176, 8 MiB 906 /
/// 863 / 857 (2 MiB of L2 per core). An earlier host: 2-rank reduce 512
/// KiB 26.1 / 24.9, 1 MiB 57.7 / 57.4.
///
/// The same where ranks outnumber cores, which took 64 KiB pieces before:
/// an allreduce's piece goes to every peer, each copy a system call, and
/// two ranks' pieces of 256 KiB with their scratch still fit a core's
/// cache. `-t`, alternated, us, medians of 4-6, 64 / 256 KiB (paired
/// ratio): 4 ranks on 2 cores allreduce 1 MiB 614 / 572 (0.93), 2 MiB
/// 1156 / 1020 (0.91), 4 MiB 2298 / 1980 (0.87), 8 MiB 6739 / 5495 (0.84),
/// 16 MiB 14691 / 13438 (0.89), 32 MiB 30624 / 29199 (0.96); 3 ranks 1
/// MiB 618 / 528 (0.90), 4 MiB 2034 / 1883 (0.93); 8 ranks 1 MiB 1387 /
/// 1381 (0.96), 4 MiB 7352 / 6379 (0.92); 4 ranks reduce 256 KiB - 8 MiB
/// and reduce_scatter 1-8 MiB alike (0.97-1.01).
const REDUCE_PIECE: usize = 256 << 10;

/// `REDUCE_PIECE` in whole elements.
fn piece_of(red: &Reducer) -> usize {
    let extent = red.extent.max(1);
    (REDUCE_PIECE / extent).max(1) * extent
}

/// Most bytes of its input that a rank of a pulled allreduce, reduce or
/// reduce-scatter hands to the shared cache (`demote`) as its peers come
/// to read them (an allreduce or reduce once its offer is out, see
/// `folded`; a reduce-scatter before it offers): the blocks the others
/// fold, which the program has most likely just written and this core
/// still holds, so that each peer's read is served by the shared cache
/// instead of a snoop of this core.
/// Not where ranks outnumber cores, where a reader may share this core's
/// caches. 2 ranks, alternated runs, `mpibench -t`, medians of 6, us,
/// without / with (paired ratios): allreduce 128 KiB 32.2 / 24.9 (0.75)
/// and 29.0 / 26.6 (0.91), 256 KiB 61.2 / 46.0 (0.79) and 53.2 / 48.1
/// (0.92), 512 KiB 118 / 89.3 (0.75) and 110 / 99.1 (0.88), 1 MiB 246 /
/// 227 (0.88) and 242 / 234 (0.97); reduce_scatter 1 MiB 200 / 168
/// (0.86). Demoting more lost: allreduce 2 MiB (1 MiB demoted, half the
/// L2) 409 / 513 and 409 / 510, 8 MiB 1580 / 1867.
const DEMOTE_INPUT: usize = 512 << 10;

/// Demotes the blocks of `input` other than this rank's `(o, l)`, where
/// `DEMOTE_INPUT` says.
fn demote_for_readers(c: &Ctx, input: &[u8], (o, l): (usize, usize)) {
    if c.eng.crowded() || o + l > input.len() || input.len() - l > DEMOTE_INPUT {
        return;
    }
    demote::range(&input[..o]);
    demote::range(&input[o + l..]);
}

/// Reduce of every rank's `send` (or, on the root in place, `out`) into
/// `out` on the root (`folded`).
pub fn reduce(
    c: &mut Ctx,
    send: Option<&[u8]>,
    out: Option<&mut [u8]>,
    root: usize,
    red: &Reducer,
) -> Result<bool> {
    let out = out.filter(|_| c.rank() == root);
    folded(c, send, out, Some(root), red)
}

/// Allreduce of every rank's `send` (or, in place, `out`) into every
/// rank's `out` (`folded`).
pub fn allreduce(c: &mut Ctx, send: Option<&[u8]>, out: &mut [u8], red: &Reducer) -> Result<bool> {
    folded(c, send, Some(out), None, red)
}

/// Reduce (to `root`) or allreduce (`root == None`) with every rank
/// reducing one block: rank `r` reads block `r` of every other rank's
/// input, folds it (in rank order, `p0 op (p1 op ...)`, where the op does
/// not commute) and writes the result into the `out` of every rank that
/// gets one (`process_vm_writev`). Each input byte is read once, and every
/// core folds. `out` is `Some` exactly on the ranks that get the result.
fn folded(
    c: &mut Ctx,
    send: Option<&[u8]>,
    mut out: Option<&mut [u8]>,
    root: Option<usize>,
    red: &Reducer,
) -> Result<bool> {
    let (n, me) = (c.size(), c.rank());
    let len = match (send, out.as_deref()) {
        (_, Some(o)) => o.len(),
        (Some(s), None) => s.len(),
        (None, None) => return Err(Error::InvalidArg("reduce without a send buffer".into())),
    };
    // In place at a reduce's root, the input is copied aside: the others'
    // results overwrite `out` while it is still read, and a refused read
    // must leave the input as it was for the fallback. In place in an
    // allreduce, each rank reads only its own block of every input, and
    // only it overwrites that block, each piece after reading it; every
    // rank reads a first piece from every peer before anyone writes, so a
    // refused read (refusals come at the first) changes nothing.
    let copied = match (send, out.as_deref(), root) {
        (None, Some(o), Some(_)) => Some(c.copy_of(o)),
        _ => None,
    };
    // `None` only in place in an allreduce.
    let own = send.or(copied.as_deref());
    let mine = out.as_deref().map_or(0, |o| o.as_ptr() as u64);
    let (in_addr, in_len) = own.map_or((mine, len), |i| (i.as_ptr() as u64, i.len()));
    let (o, l) = super::even_blocks(len, red.extent, n)[me];
    let call = slots::begin(c)?;
    publish(c, &call, 2 * OFFER, false, Place::Near, |d| {
        put(d, 0, in_addr);
        put(d, 8, in_len as u64);
        put(d, OFFER, mine);
        put(d, OFFER + 8, len as u64);
        Ok(())
    })?;
    // Demoted after the offer goes out: a peer still busy with its own
    // demotion or its program's stores finds the offer when it looks, and
    // one that looks early reads the lines not yet demoted from this core
    // (a slower read, no other effect). 2 ranks, `-t`, alternated, paired,
    // after / before: 128 KiB 0.964 and 0.975 (8 and 10 rounds), 256 KiB -
    // 1 MiB 0.99-1.00.
    if let Some(input) = own.or(out.as_deref()) {
        demote_for_readers(c, &input[..len.min(input.len())], (o, l));
    }
    let mut bad = (in_len != len).then(|| mismatch(me, in_len, len));
    let (mut addr, mut targets) = (vec![0u64; n], Vec::new());
    for p in (0..n).filter(|&p| p != me) {
        let (a, l) = offered(c, &call, p, None)?;
        if l != len {
            bad.get_or_insert(mismatch(p, l, len));
        }
        addr[p] = a;
        if root.is_none_or(|r| r == p) {
            let t = part(c, &call, p, false, OFFER, OFFER);
            let (t, tl) = (get(t, 0), get(t, 8) as usize);
            if tl != len {
                bad.get_or_insert(mismatch(p, tl, len));
            }
            targets.push((p, t));
        }
    }
    // Hands a piece of this rank's block, at `at`, to every rank that gets it.
    let hand_out = |c: &mut Ctx, at: usize, piece: &[u8]| {
        targets
            .iter()
            .all(|&(p, t)| write(c, p, t + at as u64, piece))
    };
    let mut ok = bad.is_none();
    let Some(input) = own else {
        // In place: the first piece is folded aside, so every rank has
        // read from every peer before anyone writes; the rest in place.
        let out = out.expect("an allreduce has a result everywhere");
        let first = piece_of(red).min(l);
        let mut aside = c.scratch(first);
        let probe = Some(&mut aside[..]);
        ok = ok
            && fold_block(c, red, &addr, Own::At(out), (o, first), probe, |_, _, _| {
                true
            });
        mark_done(c, &call, true);
        let (all, any_bad) = settle_all(c, ok, bad.is_some())?;
        if all && !any_bad {
            copy(&mut out[o..o + first], &aside);
            let rest = Some(&mut out[o + first..o + l]);
            ok = hand_out(c, o, &aside)
                && fold_block(
                    c,
                    red,
                    &addr,
                    Own::InDest,
                    (o + first, l - first),
                    rest,
                    hand_out,
                );
            // The first reads succeeded everywhere, so a later read or
            // write fails only where a buffer went away meanwhile:
            // nothing is left to fall back to.
            if !settle(c, ok)? {
                bad.get_or_insert(Error::Os(
                    "a rank lost access to a peer's buffer during an in-place allreduce".into(),
                ));
            }
        }
        c.give_back(aside);
        return verdict(c, all, any_bad, bad);
    };
    if ok {
        let dest = out.as_deref_mut().map(|d| &mut d[o..o + l]);
        ok = fold_block(c, red, &addr, Own::At(input), (o, l), dest, hand_out);
    }
    mark_done(c, &call, true);
    let (all, any_bad) = settle_all(c, ok, bad.is_some())?;
    if let Some(v) = copied {
        if !all && !any_bad {
            if let Some(o) = out {
                copy(o, &v);
            }
        }
        c.give_back(v);
    }
    verdict(c, all, any_bad, bad)
}

/// Where a rank's own contribution to `fold_block` lies.
enum Own<'a> {
    /// In a buffer of its own (the whole vector).
    At(&'a [u8]),
    /// In `dest` (in place): with a commutative op each piece starts the
    /// fold there; otherwise it is first copied aside.
    InDest,
}

/// Folds this rank's block `(o, l)` a piece at a time: each piece of the
/// result is made in `dest` (the block's place, `l` bytes) or else in
/// scratch, from every rank's input (this rank's as `own` says, a peer's
/// read at `addr[p]`, into scratch where it is folded into another), then
/// handed to `deliver` with its offset. False once a read or a delivery
/// failed.
fn fold_block(
    c: &mut Ctx,
    red: &Reducer,
    addr: &[u64],
    own: Own,
    (o, l): (usize, usize),
    mut dest: Option<&mut [u8]>,
    mut deliver: impl FnMut(&mut Ctx, usize, &[u8]) -> bool,
) -> bool {
    let (n, me) = (c.size(), c.rank());
    let in_dest = matches!(own, Own::InDest);
    // Commutative: start from a peer's piece, which is read in place of a
    // copy of this rank's, or in place from this rank's, already there.
    let order: Vec<usize> = match (red.commutative, in_dest) {
        (true, false) => (1..=n).map(|i| (me + i) % n).collect(),
        (true, true) => (0..n).map(|i| (me + i) % n).collect(),
        (false, _) => (0..n).rev().collect(),
    };
    let piece = piece_of(red).min(l);
    let need = |yes: bool| if yes { piece } else { 0 };
    // Scratch for the result (without `dest`), for a peer's piece folded
    // into another's, and for this rank's piece copied aside.
    let mut spare = c.scratch(need(dest.is_none()));
    let mut tmp = c.scratch(need(order.iter().skip(1).any(|&p| p != me)));
    let mut aside = c.scratch(need(in_dest && !red.commutative));
    let ok = 'pieces: {
        let mut at = o;
        while at < o + l {
            let end = (o + l).min(at + piece);
            let acc: &mut [u8] = match dest.as_deref_mut() {
                Some(d) => &mut d[at - o..end - o],
                None => &mut spare[..end - at],
            };
            let mine: &[u8] = match own {
                Own::At(input) => &input[at..end],
                Own::InDest if red.commutative => &[],
                Own::InDest => {
                    copy(&mut aside[..end - at], acc);
                    &aside[..end - at]
                }
            };
            for (i, &p) in order.iter().enumerate() {
                let ok = match (p == me, i == 0) {
                    (true, true) if in_dest && red.commutative => true,
                    (true, true) => {
                        copy(acc, mine);
                        true
                    }
                    (true, false) => {
                        red.fold_left(mine, acc);
                        true
                    }
                    (false, true) => read(c, p, addr[p] + at as u64, acc),
                    (false, false) => {
                        let t = &mut tmp[..end - at];
                        let ok = read(c, p, addr[p] + at as u64, t);
                        if ok {
                            red.fold_left(t, acc);
                        }
                        ok
                    }
                };
                if !ok {
                    break 'pieces false;
                }
            }
            if !deliver(c, at, acc) {
                break 'pieces false;
            }
            at = end;
        }
        true
    };
    for v in [spare, tmp, aside] {
        c.give_back(v);
    }
    ok
}

/// Reduce-scatter of `send` (or, in place, `recv`; the vector is `blocks`
/// laid out in rank order) leaving block `rank` at the start of `recv`:
/// each rank reads its block of every peer's input and folds it there (in
/// rank order where the op does not commute). In place, the input is
/// folded from a copy: the result's place holds block 0 of the input,
/// which rank 0 reads, and a refused read must leave the input whole.
pub fn reduce_scatter(
    c: &mut Ctx,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: &[(usize, usize)],
    red: &Reducer,
) -> Result<bool> {
    let (n, me) = (c.size(), c.rank());
    let total = blocks.iter().map(|b| b.1).sum::<usize>();
    let (o, l) = blocks[me];
    let copied = send
        .is_none()
        .then(|| c.copy_of(&recv[..total.min(recv.len())]));
    let input = send.or(copied.as_deref()).expect("one of the two");
    demote_for_readers(c, &input[..total.min(input.len())], (o, l));
    let call = offer(c, input, &[])?;
    let mut bad = if input.len() < total {
        Some(mismatch(me, input.len(), total))
    } else if recv.len() < l {
        Some(Error::InvalidArg(format!(
            "reduce-scatter: a {l}-byte block does not fit a {}-byte receive buffer",
            recv.len()
        )))
    } else {
        None
    };
    let mut addr = vec![0u64; n];
    for p in (0..n).filter(|&p| p != me) {
        let (a, pl) = offered(c, &call, p, None)?;
        if pl < total {
            bad.get_or_insert(mismatch(p, pl, total));
        }
        addr[p] = a;
    }
    let ok = bad.is_some()
        || fold_block(
            c,
            red,
            &addr,
            Own::At(input),
            (o, l),
            Some(&mut recv[..l]),
            |_, _, _| true,
        );
    mark_done(c, &call, true);
    let (all, any_bad) = settle_all(c, ok, bad.is_some())?;
    if let Some(v) = copied {
        if !all && !any_bad {
            copy(&mut recv[..l], &v[..l]);
        }
        c.give_back(v);
    }
    verdict(c, all, any_bad, bad)
}
