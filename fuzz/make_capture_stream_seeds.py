#!/usr/bin/env python3
"""Writes fuzz/corpus/capture_stream/: Capture streams as capture_stream_fuzzer.cc reads them
(one byte for the size limit, then length-prefixed CaptureChunk messages), hand-encoded so it
needs no protobuf module. Deterministic: run it again after changing the stream format."""
import os
import sys
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "capture_stream")


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    tag = varint(num << 3 | wire)
    if wire == 0:
        return tag + varint(payload)
    return tag + varint(len(payload)) + payload  # wire type 2


def header(total, start=1_700_000_000_000_000_000, name=b"worker-0", cancelled=False):
    h = field(1, 2, b"s1") + field(2, 0, start) + field(3, 0, start + 2_000_000_000)
    h += field(4, 0, total) + field(6, 2, name) + field(7, 2, b"host")
    if cancelled:
        h += field(5, 0, 1) + field(8, 0, 1)
    return field(1, 2, h)


def data(b):
    return field(2, 2, b)


def trailer(chunks, crc=None):
    t = field(1, 0, chunks)
    if crc is not None:
        t += field(2, 0, crc)
    return field(3, 2, t)


def started(ns=1_700_000_000_000_000_000):
    return field(4, 2, field(1, 0, ns))


def stream(limit_log2, chunks):
    return bytes([limit_log2]) + b"".join(varint(len(c)) + c for c in chunks)


def main():
    os.makedirs(OUT, exist_ok=True)
    payload = bytes(range(256)) * 3
    parts = [payload[i:i + 200] for i in range(0, len(payload), 200)]
    crc = zlib.crc32(payload)
    seeds = {
        "whole_with_crc": stream(20, [started(), header(len(payload))] + [data(p) for p in parts]
                                 + [trailer(len(parts), crc)]),
        "whole_old_agent": stream(20, [header(len(payload))] + [data(p) for p in parts]
                                  + [trailer(len(parts))]),
        "empty_cancelled": stream(10, [started(), header(0, cancelled=True), trailer(0, 0)]),
        "bad_crc": stream(20, [header(len(payload))] + [data(p) for p in parts]
                          + [trailer(len(parts), crc ^ 1)]),
        "over_limit": stream(8, [header(1 << 40)]),
        "more_than_announced": stream(20, [header(10), data(b"0123456789A")]),
        "truncated": stream(20, [started(), header(len(payload)), data(parts[0])]),
        "sink_full": stream(20, [header(4), data(b"\xffabc"), trailer(1)]),
    }
    for name, body in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
