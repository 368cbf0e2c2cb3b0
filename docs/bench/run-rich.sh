#!/bin/bash
# Re-runs the rich-message figures in docs/benchmarks.md, in three
# alternating rounds, each run against a fresh `parley serve` (default
# settings, durable storage) over TCP:
#  - reactions: 1,000 members of one group react to its one message for 10 s,
#    one request in flight each (the defaults), and the same against a
#    server with no_sync: true (is the fsync what limits it?); part
#    "pipeline": the defaults with 4 requests in flight per member (does
#    more in flight raise the rate?);
#  - stream: 100 bots each streaming to its own group of 100 online members
#    at 50 chunks/s (the defaults: 500,000 chunk deliveries/s asked), then
#    100 bots at 2 chunks/s (20,000/s), then 20 bots × 20 members at
#    50 chunks/s (20,000/s).
# The machine's load average is logged before each run (other work on the
# same cores shows in the figures). Reports go to docs/bench/rich.txt.
# ONLY=reactions, ONLY=pipeline or ONLY=stream runs one part, appending to
# the report.
# Usage: docs/bench/run-rich.sh   (from the repository root; ~12 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)/rich.txt
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
: > "$tmp/default.yaml"
printf 'no_sync: true\n' > "$tmp/nosync.yaml"
srv=
run() { # run CONFIG SCENARIO BENCH-ARGS...
  cfg=$1; shift
  rm -rf "$tmp/data"
  "$P" serve --config "$tmp/$cfg.yaml" --data "$tmp/data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn >/dev/null 2>&1 & srv=$!
  sleep 1
  echo "=== $cfg: $* (load average $(cut -d' ' -f1-3 /proc/loadavg))" >> "$out"
  "$P" bench "$@" --transport tcp --tcp 127.0.0.1:17070 -a 127.0.0.1:18080 --data "$tmp/data" --quiet >> "$out" 2>&1
  kill "$srv"; wait "$srv" 2>/dev/null
}
part() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }
if [ -z "${ONLY:-}" ]; then : > "$out"; fi
for round in 1 2 3; do
  if part reactions; then
    run default reactions
    run nosync reactions
  fi
  if part pipeline; then
    run default reactions --pipeline 4
  fi
  if part stream; then
    run default stream
    run default stream --rate 2
    run default stream -t 20 -m 20
  fi
done
rm -rf "$tmp"
grep -E "^===|Requests/sec|Deliveries/sec|50% in|99% in|Slowest|Lost|Final counts|views differing|Finished messages|Stored|late|CPU|Reliability" "$out"
