#!/usr/bin/env python3
"""Opens many idle CoordinatorService.WatchSessions streams over raw HTTP/2 (no
grpc module needed) and holds them; reports how many the daemon closed at once
(a trailers-only answer, e.g. RESOURCE_EXHAUSTED) and how many stay open.

usage: h2_watchers.py HOST:PORT STREAMS CONNECTIONS HOLD_SECONDS READY_FILE
Writes READY_FILE once every stream was sent, then holds them HOLD_SECONDS."""
import selectors, socket, struct, sys, time

addr, streams, conns, hold, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
host, port = addr.rsplit(":", 1)

def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload

def hpack_str(s):
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b)]) + b

def header(name, value):  # literal without indexing, new name, no Huffman
    return b"\x00" + hpack_str(name) + hpack_str(value)

headers = b"".join(header(n, v) for n, v in [
    (":method", "POST"), (":scheme", "http"), (":authority", addr),
    (":path", "/profctl.v1.CoordinatorService/WatchSessions"),
    ("content-type", "application/grpc"), ("te", "trailers")])
sel = selectors.DefaultSelector()
state = {}
per = (streams + conns - 1) // conns
sent = 0
for c in range(conns):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
    n = min(per, streams - sent)
    for i in range(n):
        sid = 1 + 2 * i
        s.sendall(frame(1, 4, sid, headers) + frame(0, 1, sid, b"\x00\x00\x00\x00\x00"))
    sent += n
    s.setblocking(False)
    state[s] = {"buf": b"", "open": set(1 + 2 * i for i in range(n)), "closed": 0, "goaway": False}
    sel.register(s, selectors.EVENT_READ)

def pump(until):
    while time.monotonic() < until:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj; st = state[s]
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            if not d:
                st["goaway"] = True; sel.unregister(s); continue
            st["buf"] += d
            while len(st["buf"]) >= 9:
                ln = int.from_bytes(st["buf"][:3], "big")
                if len(st["buf"]) < 9 + ln: break
                ft, fl = st["buf"][3], st["buf"][4]
                sid = int.from_bytes(st["buf"][5:9], "big") & 0x7fffffff
                pl = st["buf"][9:9 + ln]; st["buf"] = st["buf"][9 + ln:]
                if ft == 4 and not fl & 1: s.sendall(frame(4, 1, 0))
                elif ft == 6 and not fl & 1: s.sendall(frame(6, 1, 0, pl))
                elif ft == 7: st["goaway"] = True
                elif (ft in (1, 0) and fl & 1) or ft == 3:
                    if sid in st["open"]: st["open"].discard(sid); st["closed"] += 1

def report(tag):
    o = sum(len(st["open"]) for st in state.values() if not st["goaway"])
    c = sum(st["closed"] for st in state.values())
    g = sum(1 for st in state.values() if st["goaway"])
    print(f"{tag}: {sent} streams sent on {conns} connections; open {o}, closed by the daemon {c}, connections gone {g}", flush=True)

pump(time.monotonic() + 3)
report("after 3 s")
open(ready, "w").write("ready\n")
pump(time.monotonic() + hold)
report(f"after {hold + 3:.0f} s")
