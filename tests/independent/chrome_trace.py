#!/usr/bin/env python3
"""Independent reference for Chrome Trace Event JSON spans, written from the Trace Event
Format document (docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
not from latscope's code.

  chrome_trace.py FILE

What the document says, and what this script does with it:
- Duration events `B`/`E` nest per thread (pid, tid): an `E` ends the most recent `B`.
- Complete events `X` carry their duration `dur`.
- Nestable async events `b`/`n`/`e`: events with the same category and id belong to one async
  tree; `id2: {"local": ...}` is an id local to the process, `id2: {"global": ...}` and a plain
  `id` are global; `scope` puts an id in a namespace of its own. Within a tree, an `e` ends the
  most recent open `b` with the same name (async events of a tree nest by time).
- Legacy async `S`/`T`/`p`/`F`: a start `S` and finish `F` of the same name, category and id.
- Flow events `s`/`t`/`f` and instants `i`/`I`/`n` are not spans (counted here).
- `ts` and `dur` are microseconds; "events do not have to be in timestamp-sorted order", so
  each thread's and each tree's events are taken in time order (a stable sort).

Prints {series: {count, min, p50, p90, p99, p999, max, unmatched, orphan_ends}} as JSON, every
time in integer nanoseconds; percentiles are nearest-rank (the ceil(q*n)-th smallest), and a
series without a span still appears when it has unmatched starts or orphan ends.
"""
import json
import math
import sys
from decimal import Decimal
from fractions import Fraction

QUANTILES = (("p50", Fraction(1, 2)), ("p90", Fraction(9, 10)),
             ("p99", Fraction(99, 100)), ("p999", Fraction(999, 1000)))


def micros_to_ns(v):
    return int(Decimal(str(v)) * 1000)


def nearest_rank(sorted_values, q):
    return sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1]


def id_of(e):
    """(kind, id text, process or None): None when the event has no id."""
    id2 = e.get("id2")
    if isinstance(id2, dict) and "local" in id2:
        return ("local", str(id2["local"]), str(e.get("pid")))
    if isinstance(id2, dict) and "global" in id2:
        return ("global", str(id2["global"]), None)
    if "id" in e:
        return ("global", str(e["id"]), None)
    return None


def spans(events):
    durations, unmatched, orphans = {}, {}, {}
    counts = {"flows": 0, "instants": 0}

    def add(name, d):
        durations.setdefault(name, []).append(d)

    threads, trees, legacy = {}, {}, {}
    for order, e in enumerate(events):
        ph = e.get("ph")
        if ph in ("s", "t", "f"):
            counts["flows"] += 1
        elif ph in ("i", "I", "n"):
            counts["instants"] += 1
        if "ts" not in e or ph is None:
            continue
        if ph == "X" and "dur" in e:
            add(e.get("name", ""), micros_to_ns(e["dur"]))
        elif ph in ("B", "E"):
            threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(e)
        elif ph in ("b", "e") and id_of(e) is not None:
            trees.setdefault((e.get("cat", ""), e.get("scope", ""), id_of(e)), []).append(e)
        elif ph in ("S", "F") and id_of(e) is not None:
            key = (e.get("cat", ""), e.get("scope", ""), id_of(e), e.get("name", ""))
            legacy.setdefault(key, []).append(e)

    by_time = lambda e: micros_to_ns(e["ts"])
    for evs in threads.values():
        stack = []
        for e in sorted(evs, key=by_time):
            if e["ph"] == "B":
                stack.append(e)
            elif stack:
                b = stack.pop()
                if by_time(e) >= by_time(b):
                    add(b.get("name", ""), by_time(e) - by_time(b))
            else:
                orphans[e.get("name", "")] = orphans.get(e.get("name", ""), 0) + 1
        for b in stack:
            unmatched[b.get("name", "")] = unmatched.get(b.get("name", ""), 0) + 1
    for evs in trees.values():
        open_ = []
        for e in sorted(evs, key=by_time):
            name = e.get("name", "")
            if e["ph"] == "b":
                open_.append(e)
                continue
            match = [i for i, b in enumerate(open_) if b.get("name", "") == name]
            if not match:
                orphans[name] = orphans.get(name, 0) + 1
                continue
            b = open_.pop(match[-1])
            add(name, by_time(e) - by_time(b))
        for b in open_:
            unmatched[b.get("name", "")] = unmatched.get(b.get("name", ""), 0) + 1
    for (_, _, _, name), evs in legacy.items():
        start = None
        for e in sorted(evs, key=by_time):
            if e["ph"] == "S":
                if start is not None:
                    pass  # a second start replaces the first (counted as superseded)
                start = e
            elif start is not None:
                add(name, by_time(e) - by_time(start))
                start = None
            else:
                orphans[name] = orphans.get(name, 0) + 1
        if start is not None:
            unmatched[name] = unmatched.get(name, 0) + 1

    out = {}
    for name in set(durations) | set(unmatched) | set(orphans):
        v = sorted(durations.get(name, []))
        row = {"count": len(v), "unmatched": unmatched.get(name, 0),
               "orphan_ends": orphans.get(name, 0)}
        if v:
            row.update(min=v[0], max=v[-1])
            row.update({k: nearest_rank(v, q) for k, q in QUANTILES})
        out[name] = row
    return out, counts


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def self_test():
    # Two processes with local id 0x1 are two trees; nested names close as a stack.
    evs = [
        {"ph": "b", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 1, "ts": 0},
        {"ph": "b", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 2, "ts": 5},
        {"ph": "b", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 1, "ts": 1},
        {"ph": "e", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 1, "ts": 3},
        {"ph": "e", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 2, "ts": 6},
        {"ph": "e", "name": "a", "cat": "c", "id2": {"local": "0x1"}, "pid": 1, "ts": 10},
    ]
    out, _ = spans(evs)
    assert out["a"]["count"] == 3 and out["a"]["min"] == 1000 and out["a"]["max"] == 10000, out
    assert nearest_rank([10, 20, 30], Fraction(1, 2)) == 20
    assert nearest_rank(list(range(1, 1001)), Fraction(999, 1000)) == 999


if __name__ == "__main__":
    self_test()
    result, counts = spans(load(sys.argv[1]))
    if len(sys.argv) > 2 and sys.argv[2] == "--counts":
        print(json.dumps(counts))
    else:
        print(json.dumps(result, sort_keys=True))
