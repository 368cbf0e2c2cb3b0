#!/bin/bash
# The "Retention" figures of docs/benchmarks.md: the time to sweep N expired
# messages, and the 1:1 send rate of `parley bench user` while a sweep runs
# vs. without one. Seeds N messages straight into the embedded store (the
# network path would take far longer), then serves it.
# Usage: N=1000000 docs/bench/run-retention.sh   (from the repository root;
# ~5 minutes for 1M). Outputs go to docs/bench/retention.txt.
set -u
N=${N:-1000000}
out=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)/parley
go build -o "$P" ./cmd/parley || exit 1
data=$(mktemp -d)/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --api-key retention-bench-key --quiet"
KEY="X-Api-Key: retention-bench-key"
{
echo "# N=$N, $(date -u), $(nproc) cores"
PARLEY_SEED_DIR="$data/store" PARLEY_SEED_N=$N go test ./internal/store/pebblestore -run TestSeedRetentionBench -count=1 -v | grep seeded
"$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn --config "$out/retention.yaml" --new-secrets & srv=$!
sleep 2
echo "## without a sweep"
"$P" bench user $A --transport tcp -c 200000 -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost"
curl -s -X PUT -H "$KEY" -d '{"messages":1}' http://127.0.0.1:18080/v1/admin/conversations/g:retention-seed/retention; echo
echo "## while sweeping"
( s=$(date +%s.%N); curl -s -X POST -H "$KEY" http://127.0.0.1:18080/v1/admin/retention/sweep; echo " sweep took $(echo "$(date +%s.%N) - $s" | bc) s" ) & sw=$!
"$P" bench user $A --transport tcp -c 200000 -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost"
wait $sw
echo "## after the sweep"
"$P" bench user $A --transport tcp -c 200000 -t 100 --pipeline 16 | grep -iE "sends/s|p99|lost"
du -sh "$data/store"
kill $srv; wait $srv 2>/dev/null; rm -rf "$data"
} > "$out/retention.txt" 2>&1
