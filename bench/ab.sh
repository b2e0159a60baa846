#!/usr/bin/env bash
# The must-not-regress A/B of two commits, back to back on this machine (issue 50; bench/README.md#ab-of-two-commits-benchabsh):
#
#     bench/ab.sh OLD_REV NEW_REV            # ~20-25 min on a quiet 2-core machine (a loaded one: up to twice that)
#     AB_MILLION=1 bench/ab.sh OLD NEW       # and 10,000,000 jobs on PostgreSQL (~+10 min)
#
# Each revision is exported (git archive, no worktree) into $AB_DIR/<commit> with a venv of its own, made once and
# reused. Then every step runs once per revision, the two back to back, OLD NEW in odd rounds and NEW OLD in even
# ones (drift on a shared machine hits both). One instrument for both: the bench/ scripts beside this one are
# copied over each tree's bench/ and run under that tree's venv, so what differs is the code under test (each
# commit's src/ and migrations/), run as its users run it (`python -m scheduler_emulator`, default flags, jobs
# created through its API). The fire and API steps use none of the service's modules in the bench process (the
# history is counted in SQL); the million step seeds through store.database and store.models.
#
#   fire       1,000 then 3,000 fires/s over AB_WINDOW s each: the plain loop, SQLite, PostgreSQL ×1 (rate, p99,
#              CPU per fire summed over the emulator's process tree, peak RSS; the plain loop's CPU per fire in the
#              same invocation), with 100 GET job/s during each window (GET p99 under 3,000 fires/s); in one
#              invocation, so that the 1,000/s runs teach run.py how long creating the 3,000/s runs' jobs takes
#   api        job PUT/s and GET/s (AB_WINDOW s each), 16 clients: SQLite (one process), PostgreSQL (two API processes)
#   million    (AB_MILLION=1) start-up with 10,000,000 jobs on PostgreSQL: first fire, RSS, idle CPU; once per
#              revision (~5 min each, mostly the insert)
#
# Then bench/ab_report.py prints one table: each figure, every run of each revision,
# the medians and the change, and which figures are worse for NEW. Everything lands in $AB_OUT.
#
# Environment: AB_DIR (/tmp/scheduler-ab), AB_OUT ($AB_DIR/results-OLD-NEW), AB_ROUNDS (2), AB_WINDOW (8 s: N = rate × 8 jobs),
# AB_MILLION (0), AB_STEPS (fire api), BENCH_PG as bench/run.py reads it. PostgreSQL at
# 127.0.0.1:5432 and nginx (`make bench` installs it) are needed.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: bench/ab.sh OLD_REV NEW_REV   (e.g. bench/ab.sh 7928dc4 main)" >&2
    exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "$here" rev-parse --show-toplevel)"
old="$(git -C "$repo" rev-parse --verify "$1^{commit}")"
new="$(git -C "$repo" rev-parse --verify "$2^{commit}")"
AB_DIR="${AB_DIR:-/tmp/scheduler-ab}"
AB_OUT="${AB_OUT:-$AB_DIR/results-${old:0:7}-${new:0:7}}"
AB_ROUNDS="${AB_ROUNDS:-2}"
AB_WINDOW="${AB_WINDOW:-8}"
AB_STEPS="${AB_STEPS-fire api}"  # set and empty: no steps (only the trees)
if [ "${AB_MILLION:-0}" = 1 ]; then AB_STEPS="$AB_STEPS million"; fi
command -v nginx >/dev/null || { echo "ab.sh: nginx is the HTTP target: apt-get install nginx (or make bench)" >&2; exit 1; }
mkdir -p "$AB_DIR" "$AB_OUT"
rm -f "$AB_OUT"/*-r*-old.* "$AB_OUT"/*-r*-new.*  # a previous A/B of the same two commits: the report reads all
report="$AB_OUT/report.md"

say() { echo "[$(date -u +%H:%M:%S)] ab.sh: $*" >&2; }

tree_of() {  # an exported tree with its venv, made once per commit
    local rev="$1" dir="$AB_DIR/$1"
    if [ ! -f "$dir/.venv/.ab-ready" ]; then
        say "exporting ${rev:0:7} into $dir and installing its venv"
        rm -rf "$dir" && mkdir -p "$dir"
        git -C "$repo" archive "$rev" | tar -x -C "$dir"
        python3 -m venv "$dir/.venv"
        "$dir/.venv/bin/pip" install --quiet -e "$dir" -r "$dir/bench/requirements.txt" >&2
        touch "$dir/.venv/.ab-ready"
    fi
    rm -rf "$dir/bench" && cp -r "$here" "$dir/bench" && rm -rf "$dir/bench/profiles" "$dir/bench/__pycache__"
    echo "$dir"
}

step_args() {  # bench/run.py's flags for one step
    local quiet=(--quiet-wait 10 --quiet-budget 60)
    case "$1" in
        fire) echo "--scenarios fire --systems plain,sqlite,pg1 --paths user --rates 1000,3000 --window $AB_WINDOW ${quiet[*]}" ;;
        api) echo "--scenarios api --api-stores sqlite,pg --api-seconds $AB_WINDOW ${quiet[*]}" ;;
        million) echo "--scenarios million --million-stores pg --million-jobs-pg 10000000 ${quiet[*]}" ;;
        *) echo "ab.sh: unknown step $1 (fire, api, million)" >&2; return 1 ;;
    esac
}

old_dir="$(tree_of "$old")"
new_dir="$(tree_of "$new")"
began=$(date +%s)
for round in $(seq 1 "$AB_ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for step in $AB_STEPS; do
        if [ "$step" = million ] && [ "$round" -gt 1 ]; then continue; fi  # long: once per revision
        args="$(step_args "$step")"
        for side in $order; do
            if [ "$side" = old ]; then dir="$old_dir" rev="$old"; else dir="$new_dir" rev="$new"; fi
            out="$AB_OUT/$step-r$round-$side"
            say "round $round, $step, $side (${rev:0:7})"
            # shellcheck disable=SC2086  # args is a list of flags
            if ! (cd "$dir" && timeout 1500 "$dir/.venv/bin/python" bench/run.py $args --output "$out.md" \
                    > "$out.log" 2>&1); then
                say "  bench/run.py failed; its log: $out.log"
            fi
        done
    done
done
say "done in $(( ($(date +%s) - began) / 60 )) min; results in $AB_OUT"
python3 "$here/ab_report.py" "$AB_OUT" --old "${old:0:7}" --new "${new:0:7}" | tee "$report"
say "report: $report"
