"""The table of an A/B of two commits (bench/ab.sh): every figure of the must-not-regress list, each run of each
side, the medians, the change, and whether NEW is worse.

    python bench/ab_report.py /tmp/scheduler-ab/results-OLD-NEW --old 7928dc4 --new 1a2b3c4

Reads what bench/run.py wrote for each step and side (``STEP-rROUND-SIDE.json`` and ``.md``; the API table is
read from the .md, since run.py's JSON does not carry it). Standard library only: it runs under either venv.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

SIDES = ("old", "new")
NAME = re.compile(r"^(?P<step>[\w-]+)-r(?P<round>\d+)-(?P<side>old|new)$")
STORES = (("plain asyncio loop", "plain loop"), ("emulator, SQLite", "SQLite"),
          ("emulator, PostgreSQL ×1", "PostgreSQL ×1"))


@dataclass
class Figure:
    """One measured quantity: which way is better ("higher", "lower" or "" for a reference) and its runs."""

    better: str
    runs: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})


def store_of(system: str) -> str | None:
    return next((short for prefix, short in STORES if system.startswith(prefix)), None)


def summed_rss(run: dict[str, object]) -> float | None:
    """Peak RSS summed over the emulator's processes: run.py's own field, else its per-process note, else the
    one process's peak."""
    if run.get("peak_rss_total_mb") is not None:
        return float(run["peak_rss_total_mb"])  # type: ignore[arg-type]
    for note in run.get("notes") or []:  # type: ignore[attr-defined]
        if match := re.match(r"peak RSS per process ([\d/]+) MB", str(note)):
            return float(sum(int(part) for part in match.group(1).split("/")))
    value = run.get("peak_rss_mb")
    return float(value) if value is not None else None  # type: ignore[arg-type]


def read_fire(figures: dict[str, Figure], side: str, runs: list[dict[str, object]]) -> None:
    plain_cpu: dict[float, float] = {}
    emulator: list[tuple[str, float, dict[str, object], float | None]] = []
    for run in runs:
        stats = run.get("stats")
        store = store_of(str(run.get("system", "")))
        if not isinstance(stats, dict) or store is None:
            continue
        demand = float(run["demand"])  # type: ignore[arg-type]
        fired = stats["fired"] + stats.get("late_after_deadline", 0)
        cpu = 1000 * float(run["cpu_s"]) / max(1, fired) if run.get("cpu_s") is not None else None  # type: ignore[arg-type]
        if store == "plain loop":
            if cpu is not None:
                plain_cpu[demand] = cpu
            add(figures, f"{demand:,.0f}/s plain loop: CPU ms/fire (reference)", "", side, cpu)
            continue
        emulator.append((store, demand, stats, cpu))
        where = f"{demand:,.0f}/s {store}"
        add(figures, f"{where}: fires/s", "higher", side, stats["achieved"])
        add(figures, f"{where}: p99 lateness ms", "lower", side, stats["p99_ms"])
        add(figures, f"{where}: missed", "lower", side, stats["missed"])
        add(figures, f"{where}: CPU ms/fire, process tree", "lower", side, cpu)
        add(figures, f"{where}: peak RSS MB, summed over processes", "lower", side, summed_rss(run))
        gets = run.get("gets")
        if isinstance(gets, dict):
            add(figures, f"{where}: GET job p99 ms during the fires", "lower", side, gets.get("p99_ms"))
    for store, demand, _, cpu in emulator:  # against the plain loop of the same invocation (the machine then)
        if cpu is not None and plain_cpu.get(demand):
            add(figures, f"{demand:,.0f}/s {store}: CPU per fire ÷ the plain loop's", "lower", side,
                cpu / plain_cpu[demand])


def read_api(figures: dict[str, Figure], side: str, markdown: str) -> None:
    """Rows of run.py's API table: | store | operation | requests | req/s | p50 ms | p99 ms | ..."""
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[1].startswith(("PUT job", "GET job")) or "profiled" in cells[1]:
            continue
        operation = "PUT job" if cells[1].startswith("PUT") else "GET job"
        try:
            rps, p99 = float(cells[3].replace(",", "")), float(cells[5].replace(",", ""))
        except ValueError:
            continue
        add(figures, f"API {cells[0]}: {operation}/s", "higher", side, rps)
        add(figures, f"API {cells[0]}: {operation} p99 ms", "lower", side, p99)


def read_million(figures: dict[str, Figure], side: str, results: list[dict[str, object]]) -> None:
    for m in results:
        if "error" in m:
            continue
        where = f"start-up, {int(m['jobs']):,} jobs ({m.get('store')})"  # type: ignore[call-overload]
        add(figures, f"{where}: s to first fire", "lower", side, m.get("first_fire_s"))
        add(figures, f"{where}: s to Listening", "lower", side, m.get("listening_s"))
        add(figures, f"{where}: peak RSS MB, summed", "lower", side, m.get("peak_rss_mb"))
        add(figures, f"{where}: idle CPU %", "lower", side, m.get("idle_cpu_pct"))


def add(figures: dict[str, Figure], name: str, better: str, side: str, value: object) -> None:
    if value is None:
        return
    figures.setdefault(name, Figure(better)).runs[side].append(float(value))  # type: ignore[arg-type]


def verdict(figure: Figure) -> tuple[str, str]:
    """(change of NEW's median against OLD's, whether NEW is worse): "worse" when the medians say so and the two
    sides' runs (two or more each) do not overlap, "within the spread" when they overlap. One run a side says
    nothing: an A/A of one commit against itself, one run each, differed by 10-14 % in CPU per fire on a busy
    machine (bench/README.md, "A/B of two commits")."""
    old, new = figure.runs["old"], figure.runs["new"]
    if not old or not new:
        return "—", "missing"
    mo, mn = statistics.median(old), statistics.median(new)
    change = f"{100 * (mn - mo) / mo:+.0f} %" if mo else f"{mn - mo:+.2f}"
    if not figure.better:
        return change, ""
    worse_median = mn > mo if figure.better == "lower" else mn < mo
    if not worse_median or mn == mo:
        return change, "no"
    if min(len(old), len(new)) < 2:
        return change, "worse? one run a side"
    apart = min(new) > max(old) if figure.better == "lower" else max(new) < min(old)
    return change, "**worse**" if apart else "worse, within the spread"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the directory bench/ab.sh wrote (AB_OUT)")
    parser.add_argument("--old", default="old")
    parser.add_argument("--new", default="new")
    opts = parser.parse_args()
    figures: dict[str, Figure] = {}
    seen: list[str] = []
    for md in sorted(opts.results.glob("*-r*-*.md")):
        match = NAME.match(md.stem)
        if match is None:
            continue
        side = match["side"]
        seen.append(md.stem)
        read_api(figures, side, md.read_text(errors="replace"))
        data = md.with_suffix(".json")
        if data.exists():
            payload = json.loads(data.read_text())
            read_fire(figures, side, payload.get("fire") or [])
            read_million(figures, side, payload.get("million") or [])

    def runs(values: list[float]) -> str:
        return " / ".join(f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}" for v in values) or "—"

    def med(values: list[float]) -> str:
        if not values:
            return "—"
        m = statistics.median(values)
        return f"{m:,.3g}" if abs(m) < 10 else f"{m:,.0f}"

    print(f"# A/B: {opts.old} (old) vs {opts.new} (new)\n")
    print(f"{len(seen)} bench/run.py invocations read from {opts.results}: {', '.join(seen)}\n")
    print(f"| figure | better | {opts.old} runs | {opts.new} runs | {opts.old} median | {opts.new} median "
          "| change | new worse? |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for name, figure in figures.items():
        change, worse = verdict(figure)
        print(f"| {name} | {figure.better or 'reference'} | {runs(figure.runs['old'])} | {runs(figure.runs['new'])} "
              f"| {med(figure.runs['old'])} | {med(figure.runs['new'])} | {change} | {worse} |")
    print("\nRuns are listed in the order they ran; a figure is **worse** when NEW's median is worse and no run of "
          "NEW (two or more) is as good as OLD's worst run, \"within the spread\" when the runs overlap.")


if __name__ == "__main__":
    main()
