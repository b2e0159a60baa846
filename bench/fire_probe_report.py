"""What the dispatcher role's process was doing when its fires were late, from bench/probe/sitecustomize.py's
``BENCH_FIRE_PROBE`` records (fire.<pid>.txt) and, when given, the run's nginx access log (``--keep``).

    .venv/bin/python bench/fire_probe_report.py /tmp/probe [/tmp/bench-fire-XXXX/nginx/access.log]
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from datetime import datetime
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def overlaps(spans: list[tuple[float, float]], starts: list[float], begin: float, end: float) -> float:
    """Seconds of [begin, end] covered by ``spans`` (sorted by start, ``starts`` their starts)."""
    covered = 0.0
    i = max(0, bisect_left(starts, begin - 1.0))
    while i < len(spans) and spans[i][0] <= end:
        s, e = spans[i]
        covered += max(0.0, min(e, end) - max(s, begin))
        i += 1
    return covered


def share(group: list[tuple[float, ...]], kind: list[tuple[float, float]], kind_starts: list[float]) -> float:
    """The share of the group's waits past their instants that ``kind`` covered, in %."""
    total = sum(h[2] - h[0] for h in group if h[2] > h[0])
    hit = sum(overlaps(kind, kind_starts, h[0], h[2]) for h in group if h[2] > h[0])
    return 100 * hit / total if total else 0.0


def touched(group: list[tuple[float, ...]], kind: list[tuple[float, float]], kind_starts: list[float]) -> float:
    """The share of the group's holds whose wait past the instant (from 1 ms before it) ``kind`` overlapped, in %."""
    return 100 * sum(1 for h in group if overlaps(kind, kind_starts, h[0] - 0.001, h[2]) > 0) / len(group)


def main() -> None:
    directory = Path(sys.argv[1])
    arrivals: dict[int, float] = {}
    if len(sys.argv) > 2:
        for line in Path(sys.argv[2]).read_text().splitlines():
            parts = line.split("|")
            if len(parts) >= 3 and parts[2] not in ("", "-"):
                expected = datetime.fromisoformat(parts[2].replace("Z", "+00:00")).timestamp()
                arrivals.setdefault(round(expected * 1e6), float(parts[0]))
    for path in sorted(directory.glob("fire.*.txt")):
        holds: list[tuple[float, ...]] = []
        spans: dict[str, list[tuple[float, float]]] = {}
        claimed: list[tuple[float, ...]] = []
        for line in path.read_text().splitlines():
            f = line.split()
            if f[0] == "hold":
                holds.append(tuple(float(x) for x in f[1:]))
            elif f[0] == "span":
                spans.setdefault(f[1], []).append((float(f[2]), float(f[3])))
            elif f[0] == "claimed":
                claimed.append(tuple(float(x) for x in f[1:]))
            elif f[0] == "gc":
                spans.setdefault(f"gc{f[1]}", []).append((float(f[2]), float(f[3])))
        if not holds:
            continue
        holds.sort()
        t0, t1 = holds[0][0], holds[-1][0]
        spans = {name: sorted(s for s in v if t0 - 1 <= s[0] <= t1 + 1) for name, v in spans.items()}
        spans = {name: v for name, v in spans.items() if v}
        starts = {name: [s for s, _ in v] for name, v in spans.items()}
        late = [(h[2] - h[0]) * 1000 for h in holds]
        print(f"{path.name}: {len(holds)} holds over {t1 - t0:.1f} s")
        print(f"  woke after the instant, ms: p50 {pct(late, 0.5):.2f} p90 {pct(late, 0.9):.2f} "
              f"p99 {pct(late, 0.99):.2f} max {max(late):.2f}")
        entered_late = [h for h in holds if h[1] > h[0]]
        print(f"  entered the hold after the instant: {len(entered_late)} "
              f"(p99 of how late: {pct([(h[1] - h[0]) * 1000 for h in entered_late], 0.99):.1f} ms)")
        lead = [(h[0] - h[1]) * 1000 for h in holds]
        print(f"  lead at entering, ms: p1 {pct(lead, 0.01):.1f} p50 {pct(lead, 0.5):.1f}")
        if arrivals:
            matched = [(arrivals[round(h[0] * 1e6)] - h[0]) * 1000 for h in holds if round(h[0] * 1e6) in arrivals]
            sent = [(arrivals[round(h[0] * 1e6)] - h[2]) * 1000 for h in holds if round(h[0] * 1e6) in arrivals]
            print(f"  nginx lateness, ms ({len(matched)} matched): p50 {pct(matched, 0.5):.1f} "
                  f"p99 {pct(matched, 0.99):.1f}; arrival minus waking: p50 {pct(sent, 0.5):.1f} "
                  f"p99 {pct(sent, 0.99):.1f} max {max(sent):.1f}")
        ends = {round(s, 6): e for s, e in spans.get("claim_due", [])}
        window_claims = [c for c in claimed if t0 - 1 <= c[1] <= t1]
        if window_claims:
            leads = [(c[1] - ends.get(round(c[0], 6), c[0])) * 1000 for c in window_claims]
            jobs = pct([c[3] for c in window_claims], 0.5)
            print(f"  claims in the window: {len(window_claims)}, jobs each p50 {jobs:.0f}; "
                  f"earliest claimed minus the claim's end, ms: min {min(leads):.0f} p10 {pct(leads, 0.1):.0f} "
                  f"p50 {pct(leads, 0.5):.0f}; claims ending later than 50 ms before their earliest: "
                  f"{sum(1 for x in leads if x < 50)}")
        for name, v in sorted(spans.items()):
            lengths = [(e - s) * 1000 for s, e in v]
            busy = sum(lengths) / 1000 / max(1e-9, t1 - t0)
            print(f"  span {name}: {len(v)} over the window, {100 * busy:.1f} % of it, ms each p50 "
                  f"{pct(lengths, 0.5):.2f} p99 {pct(lengths, 0.99):.2f} max {max(lengths) if lengths else 0:.2f}")
        threshold = pct(late, 0.99)
        worst = [h for h in holds if (h[2] - h[0]) * 1000 >= threshold]
        print(f"  the worst 1 % (woke >= {threshold:.2f} ms late, {len(worst)} holds): share of [instant, woke] "
              "covered by each kind, against the same for all holds")
        for name in sorted(spans):
            kind, kind_starts = spans[name], starts[name]
            print(f"    {name:>20}: covers {share(worst, kind, kind_starts):5.1f} % "
                  f"(all: {share(holds, kind, kind_starts):5.1f} %); touches {touched(worst, kind, kind_starts):5.1f} "
                  f"% of the worst (all: {touched(holds, kind, kind_starts):5.1f} %)")
        # What ran in the worker threads while each fire waited past its instant, by how late it woke.
        kinds = ("claim_due", "write", "log_write")
        for low, high in ((0, 2), (2, 5), (5, 10), (10, float("inf"))):
            group = [h for h in holds if low <= (h[2] - h[0]) * 1000 < high]
            if not group:
                continue
            mix: dict[str, int] = {}
            for h in group:
                ran = [k for k in kinds if k in spans and overlaps(spans[k], starts[k], h[0] - 0.0005, h[2]) > 0]
                key = "+".join(ran) or "none of them"
                mix[key] = mix.get(key, 0) + 1
            ranked = sorted(mix.items(), key=lambda kv: -kv[1])
            shares = ", ".join(f"{k} {100 * v / len(group):.0f} %" for k, v in ranked)
            print(f"  woke {low}-{high} ms late: {len(group)} fires; meanwhile {shares}")
        # The loop thread's CPU between consecutive wake-ups against the wall time between them.
        gaps = []
        for a, b in zip(holds, holds[1:], strict=False):
            wall = b[2] - a[2]
            if wall > 0.004:
                gaps.append((wall * 1000, (b[3] - a[3]) * 1000, (b[4] - a[4]) * 1000))
        if gaps:
            gaps.sort(reverse=True)
            print("  the longest gaps between wake-ups (wall ms, loop thread CPU ms, process CPU ms):",
                  ", ".join(f"{w:.1f}/{c:.1f}/{p:.1f}" for w, c, p in gaps[:12]))


if __name__ == "__main__":
    main()
