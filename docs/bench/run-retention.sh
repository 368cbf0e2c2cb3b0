#!/bin/bash
# The "Retention" figures of docs/benchmarks.md: the time to sweep N expired
# messages of one conversation, and the 1:1 send rate of `parley bench user`
# while the sweep runs against the same load without a sweep.
#
# Seeds N messages straight into the embedded store once (the network path
# would take far longer), then serves two identical copies of it in turn:
#   1. with the sweep: bench runs of DURING_C messages each (default 500000)
#      follow one another until the sweep ends (K runs);
#   2. without a sweep: the same K runs.
# Sustained sends slow down by themselves as the store grows (flushes and
# compactions of what they write), so the sweep's cost is the difference
# between run i of the two copies, not against a short burst. The line
# "during the sweep" is the K runs' total sends over their sending time
# (each run's sent / its rate); "without" likewise.
# Usage: N=1000000 docs/bench/run-retention.sh   (from the repository root;
# ~5 minutes for 1M, ~40 for 10M). Outputs go to docs/bench/retention.txt
# (OUT=name.txt for another file).
set -u
N=${N:-1000000}
DURING_C=${DURING_C:-500000}
OUT=${OUT:-retention.txt}
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
seed=$tmp/seed data=$tmp/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --api-key retention-bench-key --quiet"
KEY="X-Api-Key: retention-bench-key"

# bench appends "sent rate" of one run to file $1 and prints its lines.
bench() {
  local r
  r=$("$P" bench user $A --transport tcp -c "$DURING_C" -t 100 --pipeline 16 | grep -iE "sends/s|lost|^ *sent:")
  echo "$r" | tr '\n' ' ' | sed 's/\t/ /g'; echo
  echo "$r" | awk '/Sends\/sec/ {r = $2} /Sent:/ {n = $2} END {print n, r}' >> "$1"
}
total() { awk '$2 > 0 {n += $1; t += $1 / $2} END {printf "%d runs, %d sends, %.0f sends/s", NR, n, n / t}' "$1"; }
serve() {
  rm -rf "$data"; cp -a "$seed" "$data"
  "$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn --config "$out/retention.yaml" --new-secrets >/dev/null & srv=$!
  # The store builds its de-dup filter by scanning the seeded keys when it
  # opens (a few seconds for 10 M; new ids are looked up on disk until
  # then): wait for it, so that it is measured as a server runs.
  sleep "${WAIT:-45}"
}
{
echo "# N=$N, DURING_C=$DURING_C, $(date -u), $(nproc) cores"
PARLEY_SEED_DIR="$seed/store" PARLEY_SEED_N=$N go test ./internal/store/pebblestore -run TestSeedRetentionBench -count=1 -timeout 0 -v | grep seeded
with=$tmp/with without=$tmp/without
: > "$with"; : > "$without"

echo "## 1. with the sweep"
serve
du -sh "$data/store"; echo "load: $(cat /proc/loadavg)"
curl -s -X PUT -H "$KEY" -d '{"messages":1}' http://127.0.0.1:18080/v1/admin/conversations/g:retention-seed/retention; echo
( s=$(date +%s.%N); curl -s -m 7200 -X POST -H "$KEY" http://127.0.0.1:18080/v1/admin/retention/sweep; echo " sweep took $(echo "$(date +%s.%N) - $s" | bc) s" ) & sw=$!
while kill -0 $sw 2>/dev/null; do bench "$with"; done
wait $sw
echo "load: $(cat /proc/loadavg)"
echo "after the sweep:"; : > "$tmp/after"; bench "$tmp/after"
du -sh "$data/store"
kill $srv; wait $srv 2>/dev/null
K=$(wc -l < "$with")

echo "## 2. without a sweep, the same $K runs"
serve
echo "load: $(cat /proc/loadavg)"
for _ in $(seq "$K"); do bench "$without"; done
echo "load: $(cat /proc/loadavg)"
du -sh "$data/store"
kill $srv; wait $srv 2>/dev/null

echo "## run by run: sends/s with the sweep, without"
paste "$with" "$without" | awk '{printf "  %2d  %8.0f  %8.0f\n", NR, $2, $4}'
echo "  with the sweep:    $(total "$with")"
echo "  without a sweep:   $(total "$without")"
} > "$out/$OUT" 2>&1
rm -rf "$tmp"
