#!/usr/bin/env python3
"""Rewrite a real libwayland 1.21 WAYLAND_DEBUG log into another libwayland dialect.

Independent of latscope's Rust code: used by the golden tests to check that every dialect of
the same real log gives the same latencies, including across both kinds of timestamp wrap.

    dialect.py DIALECT [--wrap] IN.log > OUT.log

DIALECT:
  1.19-comma  `[%10.3f]` stamps printed in a comma locale: `[3740146,719]`
  1.21        unchanged (`[%7u.%03u]`, `@` ids)
  1.23        `{Default Queue}` / `{Display Queue}` names and `#` ids
  1.25-color  1.23 with `TID#n` and the ANSI colours of a terminal (or FORCE_COLOR)
  1.26        `[HH:MM:SS.uuuuuu]` UTC time-of-day stamps, `TID#n`, queues, `#` ids
--wrap shifts every stamp by a constant so that the counter wraps half-way through the log:
2^32 microseconds for the `[ms.us]` dialects, midnight for 1.26. Differences between stamps,
and so every latency, are unchanged.
"""
import re
import sys

STAMP = re.compile(r'^\[\s*(\d+)[.,](\d{3})\] (.*)$')
BODY = re.compile(r'^(\s->\s)?(\w+)@(\d+)\.(\w+)\((.*)\)$')
PERIOD_32 = 1 << 32
DAY = 86_400_000_000
TID = 4242
GREEN, YELLOW, RED, BLUE, MAGENTA, CYAN, RESET = (f'\x1b[{n}m' for n in (32, 33, 31, 34, 35, 36, 0))


def parse(line):
    m = STAMP.match(line)
    if not m:
        return None
    micros = int(m.group(1)) * 1000 + int(m.group(2))
    return micros, m.group(3)


def stamps(lines):
    return [p[0] for p in map(parse, lines) if p]


def unwrap(values, period):
    out, offset, last = [], 0, None
    for v in values:
        if last is not None and v < last and last - v > period // 2:
            offset += period
        out.append(v + offset)
        last = v
    return out


def shift_for_wrap(lines, period):
    """A shift that puts the wrap point half-way between the first and the last stamp."""
    absolute = unwrap(stamps(lines), PERIOD_32)
    if not absolute:
        return 0
    middle = (absolute[0] + absolute[-1]) // 2
    return (period - middle) % period


def hash_ids(text):
    return re.sub(r'(\w|\])@(\d+|nil)', r'\1#\2', text)


def queue_for(iface, name, sent):
    if not sent and iface == 'wl_display' and name in ('delete_id', 'error'):
        return 'Display Queue'
    return 'Default Queue'


def stamp_text(dialect, micros):
    if dialect == '1.26':
        seconds, us = divmod(micros, 1_000_000)
        return f'[{seconds // 3600 % 24:02}:{seconds // 60 % 60:02}:{seconds % 60:02}.{us:06}]'
    ms, us = divmod(micros, 1000)
    if dialect == '1.19-comma':
        return f'[{ms:7},{us:03}]'
    return f'[{ms:7}.{us:03}]'


def convert(dialect, micros, rest):
    body = BODY.match(rest)
    stamp = stamp_text(dialect, micros)
    if dialect in ('1.19-comma', '1.21') or not body:
        if body is None and dialect not in ('1.19-comma', '1.21'):
            rest = hash_ids(rest)
        return f'{stamp} {rest}'
    arrow, iface, oid, name, args = body.groups()
    queue = queue_for(iface, name, bool(arrow))
    args = hash_ids(args)
    arrow = ' -> ' if arrow else ''
    if dialect == '1.23':
        return f'{stamp} {{{queue}}} {arrow}{iface}#{oid}.{name}({args})'
    if dialect == '1.26':
        return f'{stamp} TID#{TID} {{{queue}}} {arrow}{iface}#{oid}.{name}({args})'
    # 1.25 with colour, as wl_closure_print emits it on a terminal
    return (f'{GREEN}{stamp} {RESET}{CYAN}TID#{TID} {RESET}{YELLOW}{{{queue}}} {RESET}{arrow}'
            f'{BLUE}{iface}{RESET}#{MAGENTA}{oid}{RESET}.{CYAN}{name}{RESET}({args})')


def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    wrap = '--wrap' in argv
    if len(args) != 2 or args[0] not in ('1.19-comma', '1.21', '1.23', '1.25-color', '1.26'):
        sys.exit(__doc__)
    dialect, path = args
    with open(path, encoding='utf-8', errors='surrogateescape') as f:
        lines = f.read().split('\n')
    period = DAY if dialect == '1.26' else PERIOD_32
    shift = shift_for_wrap(lines, period) if wrap else 0
    absolute = iter(unwrap(stamps(lines), PERIOD_32))
    out = []
    for line in lines:
        parsed = parse(line)
        if parsed is None:
            out.append(line)
            continue
        micros = (next(absolute) + shift) % period
        out.append(convert(dialect, micros, parsed[1]))
    sys.stdout.buffer.write('\n'.join(out).encode('utf-8', 'surrogateescape'))


if __name__ == '__main__':
    main(sys.argv[1:])
