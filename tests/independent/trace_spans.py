#!/usr/bin/env python3
"""Independent reference for `latscope spans`: pairs trace events with plain regular
expressions and dictionaries, written apart from latscope's Rust parsers.

  trace_spans.py text FILE START END START_KEY END_KEY BY   perf script, ftrace, babeltrace2 text
  trace_spans.py chrome FILE                               Chrome JSON (chrome_trace.py)

Prints {series: {"count": n, "min": ns, "max": ns}} as JSON. Text events pair keep-last: a
second start with the same key replaces the first. Times are exact integer nanoseconds.
"""
import json
import os
import re
import sys
from decimal import Decimal

STAMP = re.compile(r"(?:^|\s)(\d+\.\d+):\s+(\S+):\s?(.*)$")
BABEL = re.compile(r"^\[([^\]]+)\]\s+(?:\([^)]*\)\s+)?(?:\S+\s+)??(\S+):\s(.*)$")


def ns(seconds):
    return int(Decimal(seconds) * 1_000_000_000)


def babel_stamp(text, state):
    if ":" not in text:
        return ns(text)
    h, m, s = text.split(":")
    t = (int(h) * 3600 + int(m) * 60) * 1_000_000_000 + ns(s)
    if state.get("last") is not None and t + state["day"] + 43_200 * 10**9 < state["last"]:
        state["day"] += 86_400 * 10**9
    t += state["day"]
    state["last"] = t
    return t


def events(path):
    state = {"last": None, "day": 0}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            # babeltrace2 starts with its [stamp]; perf script -F cpu,... with its [CPU],
            # followed by the SECONDS.FRACTION: stamp.
            if line.startswith("[") and not re.match(r"\[\d+\]\s+\d+\.\d+:", line):
                m = BABEL.match(line)
                if not m:
                    continue
                fields = dict(re.findall(r"(\w+) = (\"[^\"]*\"|[^,}]+)", m.group(3)))
                fields = {k: v.strip().strip('"') for k, v in fields.items()}
                yield babel_stamp(m.group(1), state), m.group(2), fields
            else:
                m = STAMP.search(line)
                if not m:
                    continue
                # A value runs to the next " NAME=" (perf and ftrace print a thread name as it
                # is, spaces included) or to sched_switch's "==>".
                fields = dict(re.findall(r"(?:^|\s)([A-Za-z_]\w*)=(.*?)(?=\s+[A-Za-z_]\w*=|\s+==>|\s*$)", m.group(3)))
                yield ns(m.group(1)), m.group(2), fields


def same(spec, name):
    return spec == name or spec.split(":")[-1] == name.split(":")[-1] and (":" in spec) != (":" in name)


def text(path, start, end, skey, ekey, by):
    skeys, ekeys = skey.split(","), ekey.split(",")
    open_, out = {}, {}
    for ts, name, f in events(path):
        if same(end, name) and all(k in f for k in ekeys):
            key = tuple(f[k] for k in ekeys)
            if key in open_:
                t0, group = open_.pop(key)
                d = ts - t0
                if d >= 0:
                    s = out.setdefault(group, [])
                    s.append(d)
        if same(start, name) and all(k in f for k in skeys):
            open_[tuple(f[k] for k in skeys)] = (ts, f.get(by, "?"))
    return {g: {"count": len(v), "min": min(v), "max": max(v)} for g, v in out.items()}


def chrome(path):
    """Chrome JSON spans, from chrome_trace.py (the Trace Event Format's own rules)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import chrome_trace

    out, _ = chrome_trace.spans(chrome_trace.load(path))
    return {g: {"count": v["count"], "min": v["min"], "max": v["max"]}
            for g, v in out.items() if v["count"]}


if __name__ == "__main__":
    if sys.argv[1] == "chrome":
        print(json.dumps(chrome(sys.argv[2])))
    else:
        print(json.dumps(text(*sys.argv[2:8])))
