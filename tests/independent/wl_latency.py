#!/usr/bin/env python3
"""Independent reference implementation of latscope's latency spans.

Written from the product rules (not from the Rust code), Python 3 stdlib only.

Usage:
    python3 wl_latency.py FILE            -> JSON with all samples and counters
    python3 wl_latency.py --summary FILE  -> count/min/max/p50/p90/p99/p99.9 (ns)
    python3 wl_latency.py --summary-json FILE -> the same summary as JSON
    python3 wl_latency.py --selftest      -> run built-in hand-computed cases

Spans: commit_to_release, frame_to_done, sync_to_done, commit_to_presented;
sides: client, server (completely separate state).

Decisions where the rules leave room (kept deliberately simple, see README):
  * Side of a message that is not in the request/event tables below: only
    needed for object creation. A message with a `new id` argument is taken as
    a request unless it is in NEW_ID_EVENTS (protocol events that create
    objects, e.g. zwp_linux_buffer_params_v1.created). Other unlisted messages
    do not change any state.
  * "Used before" (generation bump): an id counts as used once it has appeared
    on that side as the target object, an object argument or a new id of a
    message whose side is known.
  * wl_callback.done whose callback was never created by wl_surface.frame or
    wl_display.sync (unknown start) is counted as an orphan end of
    frame_to_done. A done for a callback created by some other message is
    ignored.
  * wp_presentation_feedback that was requested but never bound to a commit:
    an end (presented/discarded) counts as orphan_ends; if it never ends it is
    not counted anywhere (it has no start).
  * A negative latency ends the span (removes the start) and counts as
    `backwards`.
"""

import json
import re
import sys
from fractions import Fraction

SPANS = ("commit_to_release", "frame_to_done", "sync_to_done", "commit_to_presented")
SIDES = ("client", "server")
COUNTERS = ("count", "unmatched", "superseded", "orphan_ends", "discarded", "backwards")

REQUESTS = {
    ("wl_surface", "attach"),
    ("wl_surface", "commit"),
    ("wl_surface", "frame"),
    ("wl_surface", "destroy"),
    ("wl_display", "sync"),
    ("wp_presentation", "feedback"),
    ("wl_shm_pool", "create_buffer"),
    ("wl_buffer", "destroy"),
}
EVENTS = {
    ("wl_buffer", "release"),
    ("wl_callback", "done"),
    ("wl_display", "delete_id"),
    ("wp_presentation_feedback", "presented"),
    ("wp_presentation_feedback", "discarded"),
    ("wp_presentation_feedback", "sync_output"),
}
# Protocol *events* that carry a new_id argument (server-created objects).
NEW_ID_EVENTS = {
    ("wl_data_device", "data_offer"),
    ("zwp_primary_selection_device_v1", "data_offer"),
    ("gtk_primary_selection_device", "data_offer"),
    ("zwlr_data_control_device_v1", "data_offer"),
    ("ext_data_control_device_v1", "data_offer"),
    ("zwp_linux_buffer_params_v1", "created"),
    ("zwp_tablet_seat_v2", "tablet_added"),
    ("zwp_tablet_seat_v2", "tool_added"),
    ("zwp_tablet_seat_v2", "pad_added"),
    ("zwp_tablet_pad_v2", "group"),
    ("zwp_tablet_pad_group_v2", "ring"),
    ("zwp_tablet_pad_group_v2", "strip"),
    ("zwlr_foreign_toplevel_manager_v1", "toplevel"),
    ("ext_foreign_toplevel_list_v1", "toplevel"),
    ("zwlr_output_manager_v1", "head"),
    ("zwlr_output_head_v1", "mode"),
    ("ext_workspace_manager_v1", "workspace_group"),
    ("ext_workspace_manager_v1", "workspace"),
}

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = (
    r"^\[ *(?:(?P<ms>\d+)[.,](?P<frac>\d{3})"
    r"|(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})\.(?P<us>\d{6}))\] "
    r"(?:TID#\d+ )?"
    r"(?:\{[^}]*\} )?"
)
LINE_RE = re.compile(
    _PREFIX
    + r"(?P<disc>discarded )?"
    r"(?P<sent> -> )?"
    r"(?P<iface>[A-Za-z_][A-Za-z0-9_]*)[@#](?P<id>\d+)\."
    r"(?P<msg>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$"
)
ZOMBIE_RE = re.compile(
    _PREFIX + r"discarded \[(?:zombie|unknown)\][@#]\d+\.\[event \d+\]\(.*\)$"
)
OBJ_ARG_RE = re.compile(r"^(?P<iface>[A-Za-z_][A-Za-z0-9_]*)[@#](?P<id>\d+)$")
NEW_ID_RE = re.compile(r"^new id (?:[A-Za-z_][A-Za-z0-9_]*|\[unknown\])[@#](?P<id>\d+)$")

PERIOD_MS = 2 ** 32          # µs counter, printed as ms.µs
PERIOD_TOD = 86400 * 10 ** 6  # µs in a day


def split_args(s):
    """Split the argument list on ', ' but keep quoted strings whole (libwayland
    does not escape strings; a closing quote is one followed by ', ' or EOL)."""
    out = []
    i, n = 0, len(s)
    if n == 0:
        return out
    while i <= n:
        if i < n and s[i] == '"':
            j = i + 1
            while True:
                k = s.find('"', j)
                if k == -1:
                    out.append(s[i:])
                    return out
                if k + 1 == n or s.startswith(", ", k + 1):
                    break
                j = k + 1
            out.append(s[i:k + 1])
            if k + 1 == n:
                return out
            i = k + 3
        else:
            k = s.find(", ", i)
            if k == -1:
                out.append(s[i:])
                return out
            out.append(s[i:k])
            i = k + 2
    return out


class Clock:
    """Unwraps raw µs timestamps (one clock per file, per timestamp format)."""

    def __init__(self):
        self.prev = {}
        self.offset = {}

    def ns(self, kind, raw):
        period = PERIOD_MS if kind == "ms" else PERIOD_TOD
        prev = self.prev.get(kind)
        off = self.offset.get(kind, 0)
        if prev is not None and prev - raw > period // 2:
            off += period
            self.offset[kind] = off
        self.prev[kind] = raw
        return (raw + off) * 1000


class SideState:
    def __init__(self):
        self.gen = {}            # id -> current generation
        self.seen = set()        # ids used on this side
        self.deleted = set()     # ids announced by delete_id (informational)
        self.pending_buf = {}    # surface key -> buffer key or None
        self.out_commit = {}     # buffer key -> commit ts
        self.frames = {}         # callback key -> ts
        self.syncs = {}          # callback key -> ts
        self.cb_origin = {}      # callback key -> "frame" | "sync" (created by)
        self.created = set()     # keys created by a new_id on this side
        self.pending_fb = {}     # surface key -> [feedback key]
        self.fb_unbound = set()  # feedback keys requested, not yet committed
        self.fb_bound = {}       # feedback key -> commit ts

    def key(self, oid):
        return (oid, self.gen.get(oid, 0))

    def create(self, oid):
        if oid in self.seen:
            self.gen[oid] = self.gen.get(oid, 0) + 1
        else:
            self.gen.setdefault(oid, 0)
        self.seen.add(oid)
        self.deleted.discard(oid)
        k = self.key(oid)
        self.created.add(k)
        return k


class Analyzer:
    def __init__(self):
        self.lines = 0
        self.skipped = 0
        self.zombie = 0
        self.messages = 0
        self.clock = Clock()
        self.side = {s: SideState() for s in SIDES}
        self.samples = {sp: {s: [] for s in SIDES} for sp in SPANS}
        self.counts = {sp: {s: {c: 0 for c in COUNTERS} for s in SIDES} for sp in SPANS}

    # -- helpers ---------------------------------------------------------
    def _end(self, span, side, start_ts, end_ts):
        lat = end_ts - start_ts
        if lat < 0:
            self.counts[span][side]["backwards"] += 1
        else:
            self.samples[span][side].append(lat)

    def _inc(self, span, side, what):
        self.counts[span][side][what] += 1

    # -- parsing ---------------------------------------------------------
    def feed_line(self, raw_line):
        self.lines += 1
        line = ANSI_RE.sub("", raw_line)
        if line.endswith("\r"):
            line = line[:-1]
        m = LINE_RE.match(line)
        if not m:
            if ZOMBIE_RE.match(line):
                self.zombie += 1
            else:
                self.skipped += 1
            return
        self.messages += 1
        if m.group("ms") is not None:
            raw = int(m.group("ms")) * 1000 + int(m.group("frac"))
            ts = self.clock.ns("ms", raw)
        else:
            raw = ((int(m.group("h")) * 60 + int(m.group("m"))) * 60 + int(m.group("s"))) \
                * 10 ** 6 + int(m.group("us"))
            ts = self.clock.ns("tod", raw)
        sent = m.group("sent") is not None
        iface, msg = m.group("iface"), m.group("msg")
        oid = int(m.group("id"))
        args = split_args(m.group("args"))
        self.handle(ts, sent, iface, oid, msg, args)

    def handle(self, ts, sent, iface, oid, msg, args):
        im = (iface, msg)
        new_ids = []
        obj_args = []
        for a in args:
            nm = NEW_ID_RE.match(a)
            if nm:
                new_ids.append(int(nm.group("id")))
                continue
            om = OBJ_ARG_RE.match(a)
            if om:
                obj_args.append(int(om.group("id")))
        if im in REQUESTS:
            is_request = True
        elif im in EVENTS or im in NEW_ID_EVENTS:
            is_request = False
        elif new_ids:
            is_request = True
        else:
            return  # not relevant, side unknown
        side = "client" if (is_request == sent) else "server"
        st = self.side[side]
        # ids referenced (before creation of the new ids in this message)
        st.seen.add(oid)
        for o in obj_args:
            st.seen.add(o)
        created = [st.create(n) for n in new_ids]

        if iface == "wl_surface":
            skey = st.key(oid)
            if msg == "attach":
                first = args[0] if args else "nil"
                om = OBJ_ARG_RE.match(first)
                st.pending_buf[skey] = st.key(int(om.group("id"))) if om else None
            elif msg == "commit":
                buf = st.pending_buf.get(skey)
                if buf is not None:
                    if buf in st.out_commit:
                        self._inc("commit_to_release", side, "superseded")
                    st.out_commit[buf] = ts
                st.pending_buf[skey] = None
                for fk in st.pending_fb.pop(skey, []):
                    st.fb_unbound.discard(fk)
                    st.fb_bound[fk] = ts
            elif msg == "frame" and created:
                st.frames[created[0]] = ts
                st.cb_origin[created[0]] = "frame"
        elif im == ("wl_display", "sync") and created:
            st.syncs[created[0]] = ts
            st.cb_origin[created[0]] = "sync"
        elif im == ("wl_display", "delete_id"):
            if args and args[0].isdigit():
                st.deleted.add(int(args[0]))
        elif im == ("wp_presentation", "feedback"):
            if len(args) >= 1 and created:
                sm = OBJ_ARG_RE.match(args[0])
                if sm:
                    skey = st.key(int(sm.group("id")))
                    st.pending_fb.setdefault(skey, []).append(created[-1])
                    st.fb_unbound.add(created[-1])
        elif im == ("wl_buffer", "release"):
            bkey = st.key(oid)
            if bkey in st.out_commit:
                self._end("commit_to_release", side, st.out_commit.pop(bkey), ts)
            else:
                self._inc("commit_to_release", side, "orphan_ends")
        elif im == ("wl_callback", "done"):
            ckey = st.key(oid)
            if ckey in st.frames:
                self._end("frame_to_done", side, st.frames.pop(ckey), ts)
            elif ckey in st.syncs:
                self._end("sync_to_done", side, st.syncs.pop(ckey), ts)
            else:
                origin = st.cb_origin.get(ckey)
                if origin == "sync":
                    self._inc("sync_to_done", side, "orphan_ends")
                elif origin == "frame" or ckey not in st.created:
                    self._inc("frame_to_done", side, "orphan_ends")
                # else: callback created by another message: not our span
        elif iface == "wp_presentation_feedback" and msg in ("presented", "discarded"):
            fkey = st.key(oid)
            if fkey in st.fb_bound:
                start = st.fb_bound.pop(fkey)
                if msg == "presented":
                    self._end("commit_to_presented", side, start, ts)
                else:
                    self._inc("commit_to_presented", side, "discarded")
            else:
                if fkey in st.fb_unbound:
                    st.fb_unbound.discard(fkey)
                    for lst in st.pending_fb.values():
                        if fkey in lst:
                            lst.remove(fkey)
                self._inc("commit_to_presented", side, "orphan_ends")

    def finish(self):
        for side in SIDES:
            st = self.side[side]
            self.counts["commit_to_release"][side]["unmatched"] += len(st.out_commit)
            self.counts["frame_to_done"][side]["unmatched"] += len(st.frames)
            self.counts["sync_to_done"][side]["unmatched"] += len(st.syncs)
            self.counts["commit_to_presented"][side]["unmatched"] += len(st.fb_bound)
        for sp in SPANS:
            for s in SIDES:
                self.samples[sp][s].sort()
                self.counts[sp][s]["count"] = len(self.samples[sp][s])

    def result(self):
        return {
            "lines": self.lines,
            "skipped": self.skipped,
            "zombie": self.zombie,
            "messages": self.messages,
            "spans": self.samples,
            "counts": self.counts,
        }


def analyze_text(text):
    a = Analyzer()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for ln in lines:
        a.feed_line(ln)
    a.finish()
    return a.result()


def analyze_file(path):
    with open(path, "rb") as f:
        data = f.read()
    return analyze_text(data.decode("utf-8", errors="replace"))


QUANTILES = (("p50", Fraction(1, 2)), ("p90", Fraction(9, 10)),
             ("p99", Fraction(99, 100)), ("p99.9", Fraction(999, 1000)))


def nearest_rank(sorted_vals, q):
    """ceil(q*n)-th smallest, 1-based, q in (0,1] (exact rational arithmetic)."""
    n = len(sorted_vals)
    if n == 0:
        return None
    r = -((-q * n) // 1)  # ceil for Fraction
    r = max(1, min(n, int(r)))
    return sorted_vals[r - 1]


def summarize(res):
    out = {}
    for sp in SPANS:
        out[sp] = {}
        for s in SIDES:
            v = res["spans"][sp][s]
            d = {"count": len(v), "min": v[0] if v else None, "max": v[-1] if v else None}
            for name, q in QUANTILES:
                d[name] = nearest_rank(v, q)
            for c in ("unmatched", "superseded", "orphan_ends", "discarded", "backwards"):
                d[c] = res["counts"][sp][s][c]
            out[sp][s] = d
    return out


def print_summary(res, stream=sys.stdout):
    summ = summarize(res)
    print("lines=%d messages=%d skipped=%d zombie=%d"
          % (res["lines"], res["messages"], res["skipped"], res["zombie"]), file=stream)
    hdr = "%-20s %-6s %7s %12s %12s %12s %12s %12s %12s  %s" % (
        "span", "side", "count", "min", "p50", "p90", "p99", "p99.9", "max",
        "unmatched/superseded/orphan/discarded/backwards")
    print(hdr, file=stream)
    for sp in SPANS:
        for s in SIDES:
            d = summ[sp][s]
            f = lambda x: "-" if x is None else str(x)
            print("%-20s %-6s %7d %12s %12s %12s %12s %12s %12s  %d/%d/%d/%d/%d" % (
                sp, s, d["count"], f(d["min"]), f(d["p50"]), f(d["p90"]), f(d["p99"]),
                f(d["p99.9"]), f(d["max"]), d["unmatched"], d["superseded"],
                d["orphan_ends"], d["discarded"], d["backwards"]), file=stream)


# ---------------------------------------------------------------------------
# Self test: hand-computed expectations.

def _check(name, got, want):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (name, got, want))


def selftest():
    MS = 1_000_000  # ns per ms

    # 1. basic client flow (libwayland 1.21 format), delete_id before done,
    #    non-protocol noise, zombie line, sync.
    t = "\n".join([
        "some toolkit warning",
        "[   1000.000]  -> wl_display@1.sync(new id wl_callback@2)",
        "[   1000.050] wl_display@1.delete_id(2)",
        "[   1000.060] wl_callback@2.done(77)",
        "[   1000.100]  -> wl_compositor@4.create_surface(new id wl_surface@3)",
        "[   1000.200]  -> wl_shm_pool@6.create_buffer(new id wl_buffer@5, 0, 10, 10, 40, 0)",
        "[   1000.300]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[   1000.400]  -> wl_surface@3.frame(new id wl_callback@7)",
        "[   1000.500]  -> wl_surface@3.commit()",
        "[   1001.500] wl_buffer@5.release()",
        "[   1016.000] wl_display@1.delete_id(7)",
        "[   1016.900] wl_callback@7.done(123)",
        "[   1017.000] discarded [zombie]@9.[event 0](0 fd, 12 byte)",
        "",
    ]) + "\n"
    r = analyze_text(t)
    _check("1.lines", r["lines"], 14)
    _check("1.skipped", r["skipped"], 2)
    _check("1.zombie", r["zombie"], 1)
    _check("1.c2r", r["spans"]["commit_to_release"]["client"], [1 * MS])
    _check("1.f2d", r["spans"]["frame_to_done"]["client"], [16_500_000])
    _check("1.s2d", r["spans"]["sync_to_done"]["client"], [60_000])
    _check("1.server empty", r["spans"]["commit_to_release"]["server"], [])
    for sp in SPANS:
        for k in ("unmatched", "superseded", "orphan_ends", "discarded", "backwards"):
            _check("1.%s.%s" % (sp, k), r["counts"][sp]["client"][k], 0)

    # 2. superseded commit, orphan release, unmatched at EOF, attach(nil),
    #    commit without attach does not re-commit the buffer.
    t = "\n".join([
        "[2000.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[2000.100]  -> wl_surface@3.commit()",            # c1 (superseded)
        "[2000.200]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[2000.300]  -> wl_surface@3.commit()",            # c2
        "[2000.400]  -> wl_surface@3.commit()",            # no pending buffer
        "[2000.900] wl_buffer@5.release()",                 # 600 us
        "[2001.000] wl_buffer@5.release()",                 # orphan
        "[2001.100]  -> wl_surface@3.attach(nil, 0, 0)",
        "[2001.200]  -> wl_surface@3.commit()",            # nothing
        "[2001.300]  -> wl_surface@3.attach(wl_buffer@8, 0, 0)",
        "[2001.400]  -> wl_surface@3.commit()",            # unmatched
        "[2001.500]  -> wl_surface@3.frame(new id wl_callback@9)",  # unmatched
    ])
    r = analyze_text(t)
    c = r["counts"]["commit_to_release"]["client"]
    _check("2.samples", r["spans"]["commit_to_release"]["client"], [600_000])
    _check("2.superseded", c["superseded"], 1)
    _check("2.orphan", c["orphan_ends"], 1)
    _check("2.unmatched", c["unmatched"], 1)
    _check("2.frame unmatched", r["counts"]["frame_to_done"]["client"]["unmatched"], 1)
    _check("2.lines (no trailing newline)", r["lines"], 12)

    # 3. 32-bit µs wrap: 4294967.000 -> 0.500 is +796 µs; small backwards step
    #    is not a wrap but a 'backwards' latency.
    t = "\n".join([
        "[4294967.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[4294967.000]  -> wl_surface@3.commit()",
        "[      0.500] wl_buffer@5.release()",
        "[      1.000]  -> wl_surface@3.attach(wl_buffer@6, 0, 0)",
        "[      1.000]  -> wl_surface@3.commit()",
        "[      0.900] wl_buffer@6.release()",   # -100 µs
        "[      2,000]  -> wl_surface@3.attach(wl_buffer@6, 0, 0)",  # comma locale
        "[      2,000]  -> wl_surface@3.commit()",
        "[      2,250] wl_buffer@6.release()",
    ])
    r = analyze_text(t)
    _check("3.samples", r["spans"]["commit_to_release"]["client"], [250_000, 796_000])
    _check("3.backwards", r["counts"]["commit_to_release"]["client"]["backwards"], 1)
    _check("3.unmatched", r["counts"]["commit_to_release"]["client"]["unmatched"], 0)

    # 4. time-of-day format (1.26), midnight wrap, ANSI colours, TID, queue,
    #    '#' ids, 'discarded' event still counts.
    E = "\x1b[0m"
    t = "\n".join([
        "\x1b[32m[23:59:59.999000]" + E + " TID#4711 \x1b[33m{Default Queue}" + E +
        "  -> \x1b[34mwl_surface" + E + "#\x1b[35m3" + E + ".\x1b[36mattach" + E + "(wl_buffer#5, 0, 0)",
        "[23:59:59.999100] {Default Queue}  -> wl_surface#3.commit()",
        "[00:00:00.001100] {Default Queue} discarded wl_buffer#5.release()",
        "[00:00:00.002000] {Default Queue}  -> wl_surface#3.frame(new id wl_callback#7)",
        "[00:00:00.002000] {Default Queue}  -> wl_surface#3.commit()",
        "[00:00:00.018000] {Default Queue} wl_callback#7.done(5)",
        "[00:00:00.019000] discarded [unknown]#44.[event 1](0 fd, 8 byte)",
    ])
    r = analyze_text(t)
    _check("4.c2r", r["spans"]["commit_to_release"]["client"], [2_000_000])
    _check("4.f2d", r["spans"]["frame_to_done"]["client"], [16_000_000])
    _check("4.zombie", r["zombie"], 1)
    _check("4.skipped", r["skipped"], 0)

    # 5. server and client side in one stream (nested compositor) with
    #    colliding ids: they must not interact.
    t = "\n".join([
        "[5000.000] wl_surface@3.attach(wl_buffer@5, 0, 0)",      # server (request received)
        "[5000.010] wl_surface@3.commit()",
        "[5000.020]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",  # client (request sent)
        "[5000.030]  -> wl_surface@3.commit()",
        "[5000.100]  -> wl_buffer@5.release()",                   # server sends release: 90 us
        "[5000.500] wl_buffer@5.release()",                       # client gets release: 470 us
        "[5000.600] wl_display@1.sync(new id wl_callback@9)",     # server
        "[5000.610]  -> wl_callback@9.done(0)",                   # server: 10 us
        "[5000.620]  -> wl_display@1.delete_id(9)",
        "[5000.700] wl_callback@9.done(0)",                       # client: orphan (frame_to_done)
    ])
    r = analyze_text(t)
    _check("5.server c2r", r["spans"]["commit_to_release"]["server"], [90_000])
    _check("5.client c2r", r["spans"]["commit_to_release"]["client"], [470_000])
    _check("5.server s2d", r["spans"]["sync_to_done"]["server"], [10_000])
    _check("5.client orphan done", r["counts"]["frame_to_done"]["client"]["orphan_ends"], 1)
    _check("5.client s2d", r["spans"]["sync_to_done"]["client"], [])

    # 6. generations: a buffer re-created while its commit is outstanding;
    #    callbacks with reused ids (delete_id printed before the last event).
    t = "\n".join([
        "[6000.000]  -> wl_shm_pool@4.create_buffer(new id wl_buffer@5, 0, 1, 1, 4, 0)",
        "[6000.100]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[6000.200]  -> wl_surface@3.commit()",                   # gen0 outstanding
        "[6000.300]  -> wl_buffer@5.destroy()",
        "[6000.400] wl_display@1.delete_id(5)",
        "[6000.500]  -> wl_shm_pool@4.create_buffer(new id wl_buffer@5, 0, 1, 1, 4, 0)",
        "[6000.600] wl_buffer@5.release()",                       # gen1: orphan
        "[6000.700]  -> wl_surface@3.frame(new id wl_callback@7)",
        "[6000.800]  -> wl_surface@3.commit()",
        "[6001.000] wl_display@1.delete_id(7)",
        "[6001.100] wl_callback@7.done(1)",                       # 400 us
        "[6001.200]  -> wl_surface@3.frame(new id wl_callback@7)",
        "[6001.300]  -> wl_surface@3.commit()",
        "[6001.500] wl_callback@7.done(2)",                       # 300 us
    ])
    r = analyze_text(t)
    c = r["counts"]["commit_to_release"]["client"]
    _check("6.c2r samples", r["spans"]["commit_to_release"]["client"], [])
    _check("6.orphan", c["orphan_ends"], 1)
    _check("6.unmatched", c["unmatched"], 1)
    _check("6.f2d", r["spans"]["frame_to_done"]["client"], [300_000, 400_000])

    # 7. presentation feedback: bound at the next commit even without a
    #    buffer; discarded; never-bound feedback ending -> orphan;
    #    sync_output ignored; bound but never ended -> unmatched.
    t = "\n".join([
        "[7000.000]  -> wp_presentation@10.feedback(wl_surface@3, new id wp_presentation_feedback@11)",
        "[7000.100]  -> wp_presentation@10.feedback(wl_surface@3, new id wp_presentation_feedback@12)",
        "[7000.200]  -> wl_surface@3.commit()",
        "[7010.000] wp_presentation_feedback@11.sync_output(wl_output@13)",
        "[7010.200] wp_presentation_feedback@11.presented(0, 1, 2, 16666666, 0, 3, 7)",  # 10 ms
        "[7010.300] wp_presentation_feedback@12.discarded()",
        "[7011.000]  -> wp_presentation@10.feedback(wl_surface@3, new id wp_presentation_feedback@14)",
        "[7011.500] wp_presentation_feedback@14.presented(0, 1, 2, 16666666, 0, 3, 7)",  # orphan
        "[7012.000]  -> wp_presentation@10.feedback(wl_surface@3, new id wp_presentation_feedback@15)",
        "[7012.100]  -> wl_surface@3.commit()",
        "[7013.000] wp_presentation_feedback@99.presented(0, 1, 2, 16666666, 0, 3, 7)",  # orphan
    ])
    r = analyze_text(t)
    c = r["counts"]["commit_to_presented"]["client"]
    _check("7.samples", r["spans"]["commit_to_presented"]["client"], [10 * MS])
    _check("7.discarded", c["discarded"], 1)
    _check("7.orphan", c["orphan_ends"], 2)
    _check("7.unmatched", c["unmatched"], 1)

    # 8. strings containing ", " and parentheses; [unknown] new ids create
    #    objects (generation bump); lines that almost match are skipped.
    t = "\n".join([
        '[8000.000]  -> xdg_toplevel@20.set_title("a, b) (c")',
        "[8000.100]  -> wl_registry@2.bind(1, \"wl_compositor\", 4, new id [unknown]@5)",
        "[8000.200]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)",
        "[8000.300]  -> wl_surface@3.commit()",
        "[8000.400]  -> wl_registry@2.bind(2, \"wl_shm\", 1, new id [unknown]@5)",  # gen bump
        "[8000.500] wl_buffer@5.release()",                      # orphan (new gen)
        "[8000.600] wl_buffer@5.release() trailing",             # skipped
        "[8000.600]wl_buffer@5.release()",                       # skipped (no space)
        "[8000.6000] wl_buffer@5.release()",                     # skipped (4-digit frac)
        "[03:10:13.767] weston 10.0.1",                          # skipped (weston log)
        "[2026-11-22 03:10:22.735295] < -warning- > wayland: x",  # skipped (Mir log)
    ])
    r = analyze_text(t)
    _check("8.skipped", r["skipped"], 5)
    _check("8.orphan", r["counts"]["commit_to_release"]["client"]["orphan_ends"], 1)
    _check("8.unmatched", r["counts"]["commit_to_release"]["client"]["unmatched"], 1)
    _check("8.split", split_args('"a, b) (c", 3, nil'), ['"a, b) (c"', "3", "nil"])
    _check("8.split2", split_args('"x", "y"'), ['"x"', '"y"'])
    _check("8.split3", split_args(""), [])

    # 9. nearest-rank percentiles (exact arithmetic: 0.999*1000 must give 999).
    v = list(range(1, 1001))
    _check("9.p50", nearest_rank(v, Fraction(1, 2)), 500)
    _check("9.p99.9", nearest_rank(v, Fraction(999, 1000)), 999)
    _check("9.p99 n=3", nearest_rank([10, 20, 30], Fraction(99, 100)), 30)
    _check("9.p50 n=3", nearest_rank([10, 20, 30], Fraction(1, 2)), 20)
    _check("9.p90 n=1", nearest_rank([7], Fraction(9, 10)), 7)
    _check("9.empty", nearest_rank([], Fraction(1, 2)), None)

    # 10. commit_to_release with a dmabuf buffer created by an event
    #     (zwp_linux_buffer_params_v1.created) and by create_immed.
    t = "\n".join([
        "[9000.000] zwp_linux_buffer_params_v1@30.created(new id wl_buffer@4278190080)",
        "[9000.100]  -> wl_surface@3.attach(wl_buffer@4278190080, 0, 0)",
        "[9000.200]  -> wl_surface@3.commit()",
        "[9000.700] wl_buffer@4278190080.release()",   # 500 us
    ])
    r = analyze_text(t)
    _check("10.c2r", r["spans"]["commit_to_release"]["client"], [500_000])

    print("selftest: all cases passed")
    return 0


def main(argv):
    if "--selftest" in argv[1:]:
        return selftest()
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = [a for a in argv[1:] if a.startswith("--")]
    bad = [o for o in opts if o not in ("--summary", "--summary-json")]
    if len(args) != 1 or bad:
        print("usage: %s [--summary|--summary-json] FILE | --selftest" % argv[0], file=sys.stderr)
        return 2
    res = analyze_file(args[0])
    if "--summary-json" in opts:
        json.dump({"lines": res["lines"], "skipped": res["skipped"], "zombie": res["zombie"],
                   "messages": res["messages"], "summary": summarize(res)},
                  sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    elif "--summary" in opts:
        print_summary(res)
    else:
        json.dump(res, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
