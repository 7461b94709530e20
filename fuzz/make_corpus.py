#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/corpus/<target>/.

The seeds are well-formed inputs (and a few near misses) that the mutations
of tests/fuzz.rs and cargo fuzz start from; cargo fuzz adds what it finds to
the same folders. Rerun after a wire format changes; it overwrites only the
seed-* files."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# transport/frame.rs: magic, ctx, tag, kind, 3 pad bytes, len, token.
FRAME_MAGIC = 0xFC01F4A3
EAGER, RTS, CTS, DATA = 0, 1, 2, 3


def frame(kind, ctx=0, tag=0, length=0, token=0):
    return struct.pack("<IIiB3xQQ", FRAME_MAGIC, ctx, tag, kind, length, token)


def recvs(*specs):
    """tcp_stream's script: receive count, then (size index, tag, any-source) each.
    Size index: 0 -> 0, 1 -> 1, 2 -> 16, 3 -> 4096, 4 -> 100000 bytes."""
    out = bytes([len(specs)])
    for size, tag, any_src in specs:
        out += bytes([size, tag, 0 if any_src else 1])
    return out


UNEXPECTED = 1 << 63


def tcp_stream():
    yield "eager-matched", recvs((2, 0, False)) + frame(EAGER, tag=0, length=8) + b"abcdefgh"
    yield "eager-unexpected", recvs() + frame(EAGER, tag=3, length=5) + b"hello"
    yield "two-messages", recvs((2, 0, True), (3, 1, False)) + frame(
        EAGER, tag=1, length=4) + b"1234" + frame(EAGER, tag=0, length=2) + b"ok"
    yield "truncated", recvs((1, 0, False)) + frame(EAGER, length=16) + b"x" * 16
    yield "zero-length", recvs((0, 2, False)) + frame(EAGER, tag=2)
    # Announced, asked for by the posted receive 0, then its data.
    body = bytes(range(256)) * 16
    yield "rts-data-posted", recvs((3, 0, False)) + frame(RTS, length=4096, token=9) + frame(
        DATA, length=4096, token=0) + body
    # Announced with no receive: buffered as unexpected message 0, asked for.
    yield "rts-data-unexpected", recvs() + frame(RTS, tag=1, length=4096, token=4) + frame(
        DATA, length=4096, token=UNEXPECTED) + body
    yield "cts-for-nothing", recvs() + frame(CTS, length=0, token=3)
    yield "data-for-nothing", recvs() + frame(DATA, length=4, token=0) + b"abcd"
    yield "huge-eager", recvs() + frame(EAGER, length=1 << 40) + b"x" * 64
    yield "bad-magic", recvs() + b"\x00" * 32
    yield "partial-header", recvs() + frame(EAGER, length=4)[:20]


def handshake():
    hello = b"FRCL\x00\x00\x00\x01" + bytes(range(32)) + struct.pack("<Q", 1)
    yield "hello-and-tag", hello + bytes(32)
    yield "hello-only", hello
    yield "bad-greeting", b"GET / HTTP/1.1\r\n\r\n" + bytes(80)


# bootstrap/store.rs: op u8, key len u32, key, value len u32, value.
SET, GET, CHECK, ADD = 1, 2, 3, 4


def req(op, key, value=b""):
    return bytes([op]) + struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value


def store_server():
    yield "set-get", req(SET, b"addr/0", b"10.0.0.1:4000") + req(GET, b"addr/0", struct.pack("<Q", 10))
    yield "get-missing", req(GET, b"nobody", struct.pack("<Q", 1000))
    yield "check", req(SET, b"k", b"v") + req(CHECK, b"k") + req(CHECK, b"missing")
    yield "add", req(ADD, b"barrier/count", struct.pack("<q", 1)) * 3 + req(
        ADD, b"barrier/count", struct.pack("<q", -(1 << 63)))
    yield "add-not-counter", req(SET, b"c", b"xyz") + req(ADD, b"c", struct.pack("<q", 1))
    yield "bad-op", bytes([9]) + bytes(16)
    yield "key-too-long", bytes([SET]) + struct.pack("<I", 1 << 30) + b"k"
    yield "value-too-long", bytes([SET]) + struct.pack("<I", 1) + b"k" + struct.pack("<I", 0xFFFFFFFF)


def store_replies():
    def reply(status, body):
        return bytes([status]) + struct.pack("<I", len(body)) + body
    yield "ok-missing-err", reply(0, b"10.0.0.1:4000") + reply(1, b"") + reply(2, b"no such key")
    yield "counter", reply(0, struct.pack("<q", 3))
    yield "oversized", bytes([0]) + struct.pack("<I", 0xFFFFFFFF)
    yield "short-body", bytes([0]) + struct.pack("<I", 100) + b"abc"


def pmi():
    session = (
        b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
        b"cmd=my_kvsname kvsname=kvs_7_0\n"
        b"cmd=put_result rc=0 msg=success\n"
        b"cmd=barrier_out\n"
        b"cmd=get_result rc=0 msg=success value=10.0.0.2:4001\n"
        b"cmd=finalize_ack\n"
    )
    yield "env-session", b"\x00" + session
    yield "port-session", b"\x01" + b"cmd=initack rc=0\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n" + session
    yield "bad-rank", b"\x02" + session
    yield "init-refused", b"\x00cmd=response_to_init rc=-1\n"
    yield "no-newline", b"\x00cmd=response_to_init " + b"x" * 2000
    yield "tiny-maxes", b"\x00" + session.replace(b"keylen_max=64", b"keylen_max=1")


def handles():
    out = b""
    # (call << 1 | pick-from-table, word, word): every MPI call on table handles.
    for call in range(15):
        for a, b in [(0, 11), (3, 12), (21, 1), (22, 23), (10, 16)]:
            out += bytes([call << 1 | 1]) + struct.pack("<ii", a, b)
    yield "table-handles", out
    raw = b""
    for call in range(15):
        for a in [0x1234, -1, 0, 0x44000002, 0x4C000405, 0x58000003, 0x2C000001, 0x54000001]:
            raw += bytes([call << 1]) + struct.pack("<ii", a, 0x44000000)
    yield "raw-handles", raw
    cfg = struct.pack("<QII", 72, 0xCAFEBEEF, 0x22800) + struct.pack("<i", 0) + bytes(60)
    yield "nccl-config", bytes([2]) + struct.pack("<ii", 7, 3) + cfg


def main():
    for name, gen in [("tcp_stream", tcp_stream), ("handshake", handshake),
                      ("store_server", store_server), ("store_replies", store_replies),
                      ("pmi", pmi), ("handles", handles)]:
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        for seed, data in gen():
            with open(os.path.join(d, "seed-" + seed), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
