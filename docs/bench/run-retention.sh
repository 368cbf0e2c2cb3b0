#!/bin/bash
# The "Retention" figures of docs/benchmarks.md: the time to sweep N expired
# messages, and the 1:1 send rate of `parley bench user` while a sweep runs
# vs. without one. Seeds N messages straight into the embedded store (the
# network path would take far longer), then serves it.
# Usage: N=1000000 docs/bench/run-retention.sh   (from the repository root;
# ~5 minutes for 1M, ~1 hour for 10M). Outputs go to docs/bench/retention.txt
# (OUT=name.txt for another file). While the sweep runs, bench runs of
# DURING_C messages each (default 200000) follow one another until it ends,
# so the whole sweep is under load; the line "during the sweep" is their
# total sends over their sending time (the last run may end after the sweep).
set -u
N=${N:-1000000}
DURING_C=${DURING_C:-200000}
OUT=${OUT:-retention.txt}
out=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)/parley
go build -o "$P" ./cmd/parley || exit 1
data=$(mktemp -d)/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --api-key retention-bench-key --quiet"
KEY="X-Api-Key: retention-bench-key"
{
echo "# N=$N, $(date -u), $(nproc) cores"
PARLEY_SEED_DIR="$data/store" PARLEY_SEED_N=$N go test ./internal/store/pebblestore -run TestSeedRetentionBench -count=1 -timeout 0 -v | grep seeded
"$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn --config "$out/retention.yaml" --new-secrets & srv=$!
# The store builds its de-dup filter by scanning the seeded keys when it
# opens (a few seconds for 10 M; new ids are looked up on disk until then):
# the first phase waits for it, so that it is measured as a server runs.
sleep 45
du -sh "$data/store"; echo "load: $(cat /proc/loadavg)"
echo "## without a sweep"
"$P" bench user $A --transport tcp -c 200000 -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost"
curl -s -X PUT -H "$KEY" -d '{"messages":1}' http://127.0.0.1:18080/v1/admin/conversations/g:retention-seed/retention; echo
echo "load: $(cat /proc/loadavg)"
echo "## while sweeping"
( s=$(date +%s.%N); curl -s -m 7200 -X POST -H "$KEY" http://127.0.0.1:18080/v1/admin/retention/sweep; echo " sweep took $(echo "$(date +%s.%N) - $s" | bc) s" ) & sw=$!
runs=$(mktemp)
while kill -0 $sw 2>/dev/null; do
  r=$("$P" bench user $A --transport tcp -c "$DURING_C" -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost|^ *sent:")
  echo "$r"
  echo "$r" | awk '/Sends\/sec/ {r = $2} /Sent:/ {n = $2} END {print n, r}' >> "$runs"
done
wait $sw
# Each run's sends over its sending time (sent / rate), summed.
awk '$2 > 0 {n += $1; t += $1 / $2} END {printf "  during the sweep: %d runs, %d sends, %.0f sends/s\n", NR, n, n / t}' "$runs"
echo "load: $(cat /proc/loadavg)"
echo "## after the sweep"
"$P" bench user $A --transport tcp -c 200000 -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost"
du -sh "$data/store"
kill $srv; wait $srv 2>/dev/null; rm -rf "$data"
} > "$out/$OUT" 2>&1
