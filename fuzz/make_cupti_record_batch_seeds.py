#!/usr/bin/env python3
"""Writes the seed corpus of cupti_record_batch_fuzzer: small record batches in the format of
inject/records.h (docs/cupti.md), little-endian. Run from the repository root."""
import os
import struct

OUT = "fuzz/corpus/cupti_record_batch"
MAGIC, VERSION, NO_STRING = 0x42524650, 1, 0xFFFFFFFF
KERNEL, MEMCPY, MEMSET, API, NVTX, MEMORY, DEVICE, SYNC = 1, 2, 3, 4, 5, 6, 7, 8


def rec(kind, body):
    size = 8 + len(body)
    assert size % 8 == 0, (kind, size)
    return struct.pack("<HHI", kind, size, 0) + body


def batch(strings, records, pid=100, offset=-700, dropped=0):
    table = b"".join(struct.pack("<I", len(s)) + s for s in strings)
    body = b"".join(records)
    header = struct.pack("<IHHIIIIQqQQ", MAGIC, VERSION, 56, pid, len(records), len(strings),
                         len(table), len(body), offset, dropped, 0)
    return header + table + body


T = 1_000_000_000_000
strings = [b"train_step 1", b"square(float*, int)", b"cudaLaunchKernel", b"NVIDIA H100"]
# DeviceRecord: the first version's 64 bytes, then (added within version 1) uuid[16],
# mig_uuid[16], flags (1 has UUID, 2 MIG instance), reserved.
DEVICE_V1 = struct.pack("<QQIIIIIIIIII", 85520809984, 3352320000000, 0, 3, 9, 0, 132, 1980000,
                        64, 32, 65536, 233472)
UUID = bytes.fromhex("5f1c123489abcdef0123456789abcdef")
records = [
    rec(DEVICE, DEVICE_V1 + UUID + bytes(16) + struct.pack("<II", 1, 0)),
    rec(NVTX, struct.pack("<QQIIIIII", T, T + 5000, 100, 101, 0, NO_STRING, 1, 0)),
    rec(API, struct.pack("<QQIIIIIB3x", T + 100, T + 110, 100, 101, 2, 211, 2, 1)),
    rec(KERNEL, struct.pack("<QQIIII3i3iIIII", T + 200, T + 900, 0, 1, 7, 2, 64, 1, 1, 128, 1, 1,
                            32, 0, 0, 1)),
    rec(MEMCPY, struct.pack("<QQQIIIIBBBBI", T + 120, T + 180, 4096, 0, 1, 13, 3, 1, 2, 3, 1, 0)),
    rec(MEMSET, struct.pack("<QQQIIIIIHH", T + 950, T + 960, 256, 0, 1, 7, 4, 0, 3, 0)),
    rec(MEMORY, struct.pack("<QQQIIIIBB6x", T + 50, 0x7F0000000000, 4096, 0, 7, 5, 100, 1, 3)),
    # cudaStreamSynchronize (cbid 131, no name) and its stream synchronization (type 3, stream 7).
    rec(API, struct.pack("<QQIIIIIB3x", T + 970, T + 1000, 100, 101, 8, 131, NO_STRING, 1)),
    rec(SYNC, struct.pack("<QQIIIIB7x", T + 975, T + 995, 8, 1, 7, NO_STRING, 3)),
]
os.makedirs(OUT, exist_ok=True)
# An older library's batch: the 64-byte DeviceRecord, no UUID.
old_device = [rec(DEVICE, DEVICE_V1), records[3]]
for name, data in [("empty.bin", batch([], [])), ("small.bin", batch(strings, records, dropped=2)),
                   ("old_device.bin", batch(strings, old_device))]:
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
