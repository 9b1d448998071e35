#!/usr/bin/env python3
"""Independent reference for `latscope frames`: joins a client's WAYLAND_DEBUG log to its
compositor's and prints every frame's stages, written from the protocol and libwayland's
documentation, not from latscope's code.

    frames_join.py CLIENT_LOG SERVER_LOG

Reads the libwayland 1.21 dialect of the committed logs (`[%7u.%03u]` stamps, `@` ids, two
spaces and `-> ` before a sent message). Unlike latscope, which takes for each message the
untaken counterpart closest in time, this follows the protocol's ordering: a connection's
requests reach the compositor in the order they were sent (one socket, FIFO), so the client's
requests are a subsequence of the server's dispatched requests, found greedily from the start
(the first server request with the same text, dispatched no earlier than it was sent, after the
one found before); the client's events likewise among the server's sent events, per queue (the
display queue's wl_display events, and all others), sent no later than dispatched. On a complete
pair of logs with no other client sending the same text in between, both ways find the same
messages.

Prints JSON: {"stages": {name: [ns, ...] in frame order}, "offset": [low_ns, high_ns] or null,
"found": [found, total]}.
"""
import json
import re
import sys

LINE = re.compile(r"^\[\s*(\d+)\.(\d{3})\]\s+(-> )?([A-Za-z_0-9]+)@(\d+)\.([A-Za-z_0-9]+)\((.*)\)\s*$")
FD = re.compile(r"(^|, )fd \d+(?=, |$)")
PERIOD = 1 << 32  # µs: the stamps are CLOCK_REALTIME µs modulo 2^32


def read(path):
    msgs, last, now = [], None, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            raw = int(m.group(1)) * 1000 + int(m.group(2))
            if last is None:
                now = raw
            else:
                step = (raw - last) % PERIOD
                if step > PERIOD // 2:
                    step -= PERIOD
                now += step
            last = raw
            iface, oid, name, args = m.group(4), int(m.group(5)), m.group(6), m.group(7)
            # each process numbers its own file descriptors
            text = f"{iface}@{oid}.{name}({FD.sub(lambda g: g.group(1) + 'fd', args)})"
            msgs.append({"t": now, "sent": m.group(3) is not None, "iface": iface,
                         "id": oid, "name": name, "args": args, "text": text})
    return msgs


def subsequence(client, server, want_client_sent, queue_of):
    """Greedy in-order matching per queue; returns {client index: server index}."""
    found, pos = {}, {}
    server_side = [(j, s) for j, s in enumerate(server) if s["sent"] != want_client_sent]
    for i, c in enumerate(client):
        if c["sent"] != want_client_sent:
            continue
        q = queue_of(c)
        start = pos.get(q, 0)
        for k in range(start, len(server_side)):
            j, s = server_side[k]
            if queue_of(s) != q or s["text"] != c["text"]:
                continue
            if want_client_sent and s["t"] < c["t"]:
                continue  # dispatched before it was sent: another connection's
            if not want_client_sent and s["t"] > c["t"]:
                break  # sent after it was dispatched: not found (in order, none later is)
            found[i] = j
            pos[q] = k + 1
            break
    return found


def main():
    client, server = read(sys.argv[1]), read(sys.argv[2])
    # both logs on one scale: whole periods moved so the first stamps are within half of one
    d = (server[0]["t"] - client[0]["t"]) % PERIOD
    if d > PERIOD // 2:
        d -= PERIOD
    shift = server[0]["t"] - d - client[0]["t"]
    for c in client:
        c["t"] += shift
    requests = subsequence(client, server, True, lambda m: "requests")
    events = subsequence(client, server, False,
                         lambda m: "display" if m["iface"] == "wl_display" else "default")
    match = {**requests, **events}
    st = lambda i: server[match[i]]["t"] if i in match else None

    frames, pending, callbacks, feedbacks = [], {}, {}, {}
    for i, c in enumerate(client):
        key = (c["sent"], c["iface"], c["name"])
        if key == (True, "wl_surface", "frame"):
            pending.setdefault(c["id"], ([], []))[0].append(int(c["args"].rsplit("@", 1)[1]))
        elif key == (True, "wp_presentation", "feedback"):
            surf, fb = c["args"].split(", ")
            pending.setdefault(int(surf.rsplit("@", 1)[1]), ([], []))[1].append(int(fb.rsplit("@", 1)[1]))
        elif key == (True, "wl_surface", "commit"):
            cbs, fbs = pending.pop(c["id"], ([], []))
            frames.append({"commit": (c["t"], st(i)), "done": None, "presented": None})
            for cb in cbs:
                callbacks[cb] = len(frames) - 1
            for fb in fbs:
                feedbacks[fb] = len(frames) - 1
        elif key == (False, "wl_callback", "done") and c["id"] in callbacks:
            k = callbacks.pop(c["id"])
            if frames[k]["done"] is None:
                frames[k]["done"] = (c["t"], st(i))
        elif key == (False, "wp_presentation_feedback", "presented") and c["id"] in feedbacks:
            k = feedbacks.pop(c["id"])
            a = [int(x) for x in c["args"].split(", ")]
            display_ns = ((a[0] << 32) | a[1]) * 1_000_000_000 + a[2]
            frames[k]["presented"] = (c["t"], st(i), display_ns)
        elif key == (False, "wp_presentation_feedback", "discarded"):
            feedbacks.pop(c["id"], None)

    low = high = None
    for f in frames:
        if f["presented"]:
            c_t, s_t, disp = f["presented"]
            lo = f["commit"][0] * 1000 - disp
            hi = (s_t if s_t is not None else c_t) * 1000 - disp
            low = lo if low is None else max(low, lo)
            high = hi if high is None else min(high, hi)
    stages = {n: [] for n in ["commit_to_compositor", "compositor_to_frame_done",
                              "compositor_to_presented", "presented_to_client",
                              "commit_to_presented", "commit_to_display"]}
    for f in frames:
        c_client, c_server = f["commit"]
        if c_server is not None:
            stages["commit_to_compositor"].append((c_server - c_client) * 1000)
            if f["done"] and f["done"][1] is not None:
                stages["compositor_to_frame_done"].append((f["done"][1] - c_server) * 1000)
        if f["presented"]:
            p_client, p_server, disp = f["presented"]
            if c_server is not None and p_server is not None:
                stages["compositor_to_presented"].append((p_server - c_server) * 1000)
            if p_server is not None:
                stages["presented_to_client"].append((p_client - p_server) * 1000)
            stages["commit_to_presented"].append((p_client - c_client) * 1000)
            stages["commit_to_display"].append(disp + high - c_client * 1000)
    print(json.dumps({"stages": stages, "offset": None if low is None else [low, high],
                      "found": [len(match), len(client)]}))


if __name__ == "__main__":
    main()
