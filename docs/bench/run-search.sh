#!/bin/bash
# Re-runs the search figures in docs/benchmarks.md: `parley bench search
# --searchers 1,8,50` (the defaults otherwise: 1,000,000 text messages from
# 50 senders over 10,000 1:1 conversations, 8 sends in flight per sender;
# then query phases of 20 s with 1, 8 and 50 concurrent searchers) over
# TCP, against a fresh `parley serve` per run, alternating a server with
# search on (the default) and one with `search: off` (the same command: only
# the load runs, the baseline for the send rate's drop). Each server gets a
# fresh data directory, so DATA/search and DATA/store are this run's alone.
# Part "phases" (after the rounds) runs the query phases twice over
# (--searchers 1,8,50,1,8,50): do queries get faster once the index has
# settled after the bulk load?
# The machine's load average is logged before each run (other work on the
# same cores shows in the figures). Reports go to docs/bench/search.txt.
# ROUNDS=N sets the rounds (default 3); ONLY=rounds or ONLY=phases runs one
# part (ONLY=phases appends to the report); ARGS="..." adds bench flags
# (e.g. ARGS="-c 100000 --convs 1000" for a quick look). BIN=path runs that
# parley binary instead of building one (A/B: two binaries, runs alternated
# by calling the script in turn), OUT=path writes the report there (it is
# appended to when OUT is given).
# Usage: docs/bench/run-search.sh   (from the repository root; 8-13 minutes a round, 6-10 more for the
# phases, depending on how busy the machine is)
set -u
out=${OUT:-$(cd "$(dirname "$0")" && pwd)/search.txt}
tmp=$(mktemp -d)
P=${BIN:-$tmp/parley}
[ -n "${BIN:-}" ] || go build -o "$P" ./cmd/parley || exit 1
: > "$tmp/on.yaml"
printf 'search: off\n' > "$tmp/off.yaml"
run() { # run CONFIG [BENCH-ARGS...]
  cfg=$1; shift
  rm -rf "$tmp/data"
  "$P" serve --config "$tmp/$cfg.yaml" --data "$tmp/data" --http 127.0.0.1:18090 --tcp 127.0.0.1:17090 --log-level warn >/dev/null 2>&1 & srv=$!
  sleep 1
  echo "=== search $cfg ($(basename "$P")): parley bench search --transport tcp --searchers 1,8,50 $* ${ARGS:-} (load average $(cut -d' ' -f1-3 /proc/loadavg))" >> "$out"
  # shellcheck disable=SC2086
  "$P" bench search --transport tcp -a 127.0.0.1:18090 --tcp 127.0.0.1:17090 --data "$tmp/data" --quiet --searchers 1,8,50 "$@" ${ARGS:-} >> "$out" 2>&1
  echo "=== end (load average $(cut -d' ' -f1-3 /proc/loadavg))" >> "$out"
  kill "$srv"; wait "$srv" 2>/dev/null
}
part() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }
if [ -z "${ONLY:-}" ] && [ -z "${OUT:-}" ]; then : > "$out"; fi
if part rounds; then
  for round in $(seq "${ROUNDS:-3}"); do
    run on
    run off
  done
fi
if part phases; then
  run on --searchers 1,8,50,1,8,50
fi
rm -rf "$tmp"
grep -E "^===|Messages stored|Indexed while|Lag:|Caught up|Hits:|Search: queries|^  all	[0-9]|DATA/|CPU:|Reliability" "$out"
