#!/usr/bin/env python3
"""Floods an agent with Capture calls it refuses (host_tracer_level=4: INVALID_ARGUMENT) over raw
HTTP/2 (no grpc module needed), as fast as it answers, for SECONDS; prints how many were answered.

usage: h2_capture_flood.py HOST:PORT SECONDS [CONNECTIONS]"""
import selectors, socket, struct, sys, time

addr, seconds = sys.argv[1], float(sys.argv[2])
conns = int(sys.argv[3]) if len(sys.argv) > 3 else 4
host, port = addr.rsplit(":", 1)
IN_FLIGHT = 50  # streams open at once per connection (under gRPC's default limit of 100)


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
    (":path", "/profctl.v1.AgentService/Capture"),
    ("content-type", "application/grpc"), ("te", "trailers")])
# CaptureRequest{session_id: "flood", duration_ms: 100, host_tracer_level: 4}
msg = b"\x0a\x05flood" + b"\x18\x64" + b"\x38\x04"
body = b"\x00" + struct.pack(">I", len(msg)) + msg

sel = selectors.DefaultSelector()
state = {}
answered = 0


def send_stream(s, st):
    sid = st["next"]
    st["next"] += 2
    st["open"].add(sid)
    s.sendall(frame(1, 4, sid, headers) + frame(0, 1, sid, body))


for _ in range(conns):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) +
              frame(8, 0, 0, struct.pack(">I", 1 << 30)))  # a big connection window
    st = {"buf": b"", "open": set(), "next": 1, "gone": False}
    state[s] = st
    for _ in range(IN_FLIGHT):
        send_stream(s, st)
    sel.register(s, selectors.EVENT_READ)

end = time.monotonic() + seconds
while time.monotonic() < end and any(not st["gone"] for st in state.values()):
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        st = state[s]
        try:
            d = s.recv(1 << 20)
        except (BlockingIOError, ConnectionError):
            d = b""
        if not d:
            st["gone"] = True
            sel.unregister(s)
            continue
        st["buf"] += d
        while len(st["buf"]) >= 9:
            ln = int.from_bytes(st["buf"][:3], "big")
            if len(st["buf"]) < 9 + ln:
                break
            ft, fl = st["buf"][3], st["buf"][4]
            sid = int.from_bytes(st["buf"][5:9], "big") & 0x7fffffff
            pl = st["buf"][9:9 + ln]
            st["buf"] = st["buf"][9 + ln:]
            if ft == 4 and not fl & 1:
                s.sendall(frame(4, 1, 0))
            elif ft == 6 and not fl & 1:
                s.sendall(frame(6, 1, 0, pl))
            elif ft == 7:
                st["gone"] = True
            elif (ft in (1, 0) and fl & 1) or ft == 3:
                if sid in st["open"]:
                    st["open"].discard(sid)
                    answered += 1
                    if time.monotonic() < end and st["next"] < (1 << 31) - 2:
                        send_stream(s, st)
print(f"{answered} Capture calls answered in {seconds:.0f} s on {conns} connections", flush=True)
