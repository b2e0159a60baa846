"""Percentiles of what bench/probe/sitecustomize.py recorded: for each process, the GETs' time inside the app in
parts (to the read starting, the read, back to the handler, all of it), in ms.

    .venv/bin/python bench/probe_report.py /tmp/probe
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))] * 1000


def main() -> None:
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe")
    files = sorted(directory.glob("gets.*.txt"))
    if not files:
        raise SystemExit(f"no gets.*.txt in {directory}: was BENCH_PROBE_DIR set, and PYTHONPATH=bench/probe?")
    for path in files:
        rows = [[float(x) for x in line.split()] for line in path.read_text().splitlines() if line.strip()]
        if not rows:
            continue
        parts = {
            "to the read": [r[1] - r[0] for r in rows],
            "the read": [r[2] - r[1] for r in rows],
            "back to the handler": [r[3] - r[2] for r in rows],
            "in the app": [r[3] - r[0] for r in rows],
        }
        print(f"{path.name}: {len(rows)} GETs")
        print("| part | p50 ms | p90 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
        for name, values in parts.items():
            cells = " | ".join(f"{percentile(values, q):.2f}" for q in (0.5, 0.9, 0.99, 1.0))
            print(f"| {name} | {cells} |")
        print()
    spans = [[float(x) for x in line.split()] for path in files for line in path.read_text().splitlines() if line]
    begin, end = min(r[0] for r in spans), max(r[3] for r in spans)
    for path in sorted(directory.glob("lag.*.txt")):
        wakes = [float(line.split()[0]) for line in path.read_text().splitlines() if len(line.split()) == 2]
        wakes = [t for t in wakes if begin <= t <= end]
        gaps = [b - a for a, b in pairwise(wakes)]
        if gaps:
            cells = " | ".join(f"{percentile(gaps, q):.1f}" for q in (0.5, 0.9, 0.99, 1.0))
            print(f"{path.name}: the event loop's turns while the GETs ran ({len(gaps)} gaps between wake-ups)")
            print(f"| p50 ms | p90 ms | p99 ms | max ms |\n|---:|---:|---:|---:|\n| {cells} |\n")


if __name__ == "__main__":
    main()
