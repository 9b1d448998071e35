#!/usr/bin/env python3
"""Independent reference for call traces with durations, from the tools' manuals:

  calls.py strace FILE       strace -T / ltrace -T (with or without -f, -tt or -ttt)
  calls.py perf-trace FILE   perf trace

strace(1): "-T Show the time spent in system calls. This records the time difference between
the beginning and the end of each system call", printed as <seconds> at the end of the line;
with -f a call interrupted by another process's output is printed "<unfinished ...>" and
finished later by "<... NAME resumed>" on a line of the same pid. ltrace(1) -T prints the same.
perf-trace(1) prints "START ( DURATION ms): COMM/TID CALL(ARGS) = RET". Its COMM/TID column is
left out when the traced process has one thread (`perf trace -p PID`). A call that another
thread's output interrupts is printed without a duration and ending in "...", then finished by
"START ( DURATION ms): COMM/TID  ... [continued]: CALL()) = RET", which repeats its start and
gives the whole call's duration (perf's builtin-trace.c, trace__sys_exit); a "?" start is a call
begun before the trace, with no duration.

Prints {call: {count, min, p50, p90, p99, p999, max}} (integer ns, nearest-rank percentiles).
"""
import json
import math
import re
import sys
from decimal import Decimal
from fractions import Fraction

LINE = re.compile(r"^(?:\[pid\s+(\d+)\]\s+|(\d+)\s+)?(?:((?:\d+:\d+:)?\d+\.\d+)\s+)?(.*)$")
DUR = re.compile(r"<(\d+\.\d+)>\s*$")
PERF = re.compile(
    r"^\s*(\d+\.\d+) \(\s*(\d+\.\d+) ms\): (?:\S+/\d+ +)?(?:\.\.\. \[continued\]: )?([^\s(]+)\(")


def ns(text, scale=10**9):
    return int(Decimal(text) * scale)


def strace(path):
    out, pending = {}, {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = LINE.match(line.strip())
        pid, rest = m.group(1) or m.group(2) or "", m.group(4)
        d = DUR.search(rest)
        r = re.match(r"<\.\.\. (\S+) resumed>", rest)
        if r:
            stack = pending.get(pid, [])
            names = [n for n, _ in stack]
            if r.group(1) in names and d:
                i = len(names) - 1 - names[::-1].index(r.group(1))
                stack.pop(i)
                out.setdefault(r.group(1), []).append(ns(d.group(1)))
            continue
        c = re.match(r"([^\s(]+)\(", rest)
        if not c:
            continue
        if rest.rstrip().endswith("<unfinished ...>"):
            pending.setdefault(pid, []).append((c.group(1), 0))
        elif d:
            out.setdefault(c.group(1), []).append(ns(d.group(1)))
    return out


def perf_trace(path):
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = PERF.match(line)
        if m:
            out.setdefault(m.group(3), []).append(ns(m.group(2), 10**6))
    return out


def summary(out):
    qs = {"p50": Fraction(1, 2), "p90": Fraction(9, 10), "p99": Fraction(99, 100),
          "p999": Fraction(999, 1000)}
    res = {}
    for name, v in out.items():
        v.sort()
        row = {"count": len(v), "min": v[0], "max": v[-1]}
        row.update({k: v[max(1, math.ceil(q * len(v))) - 1] for k, q in qs.items()})
        res[name] = row
    return res


if __name__ == "__main__":
    f = strace if sys.argv[1] == "strace" else perf_trace
    print(json.dumps(summary(f(sys.argv[2])), sort_keys=True))
