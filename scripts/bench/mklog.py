#!/usr/bin/env python3
"""Build a large WAYLAND_DEBUG log for benchmarks: a real log repeated with shifted timestamps.

    mklog.py SOURCE.log SIZE_MB OUT.log

Each repetition continues where the previous one ended (its stamps shifted by the source's
duration plus 1 ms), so latencies stay real and the 32-bit microsecond counter wraps as it would
in a long capture. Object ids repeat, as they do in a long-running client.
"""
import re
import sys

STAMP = re.compile(rb'^\[\s*(\d+)\.(\d{3})\] ')


def main(source, size_mb, out_path):
    lines = []
    for line in open(source, 'rb').read().split(b'\n'):
        m = STAMP.match(line)
        if m:
            lines.append((int(m.group(1)) * 1000 + int(m.group(2)), line[m.end():]))
        elif line:
            lines.append((None, line))
    stamps = [t for t, _ in lines if t is not None]
    duration = (stamps[-1] - stamps[0]) % (1 << 32) + 1000
    target = int(size_mb) << 20
    written, offset = 0, 0
    with open(out_path, 'wb', buffering=1 << 22) as out:
        while written < target:
            chunk = []
            for t, rest in lines:
                if t is None:
                    chunk.append(rest + b'\n')
                    continue
                us = (t + offset) % (1 << 32)
                chunk.append(b'[%7d.%03d] ' % (us // 1000, us % 1000) + rest + b'\n')
            data = b''.join(chunk)
            out.write(data)
            written += len(data)
            offset += duration


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
