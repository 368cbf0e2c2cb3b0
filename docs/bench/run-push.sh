#!/bin/bash
# Re-runs the push figures in docs/benchmarks.md: the seed's ApacheBench test
# (ab -k -c 500 -n 20000 pushing to one online user, every push counted by
# the receiver) and the bench tool's push scenario. Needs ab (Debian:
# apache2-utils). Outputs go to docs/bench/push-*.txt.
# Usage: docs/bench/run-push.sh   (from the repository root; ~1 minute)
set -u
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
P=$tmp/parley; R=$tmp/pushrecv
go build -o "$P" ./cmd/parley && go build -o "$R" ./docs/bench/pushrecv || exit 1
data=$tmp/data
srv=
fresh() {
  [ -n "$srv" ] && kill "$srv" && wait "$srv" 2>/dev/null
  rm -rf "$data"
  "$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn & srv=$!
  sleep 1
}
fresh
KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["admin_api_keys"][0])' "$data/secrets.json")
printf 'ten bytes!' > "$tmp/body"
: > "$out/push-ab.txt"
for run in 1 2 3 4 5; do
  rm -f "$tmp/ready"
  "$R" -key "$KEY" -n 20000 -ready "$tmp/ready" > "$tmp/recv.txt" 2>&1 & recv=$!
  while [ ! -e "$tmp/ready" ]; do sleep 0.1; done
  echo "== run $run: ab -k -c 500 -n 20000" >> "$out/push-ab.txt"
  ab -k -c 500 -n 20000 -p "$tmp/body" -T application/octet-stream -H "X-Api-Key: $KEY" \
    'http://127.0.0.1:18080/v1/admin/push/users?user_ids=u123&op=1000' 2>&1 \
    | grep -E 'Complete requests|Failed requests|Non-2xx|Requests per second|Time per request|  50%|  99%|100%' >> "$out/push-ab.txt"
  wait "$recv"; cat "$tmp/recv.txt" >> "$out/push-ab.txt"
done
fresh; "$P" bench push -a 127.0.0.1:18080 --data "$data" -c 200000 -t 500 --quiet > "$out/push-bench.txt" 2>&1
kill "$srv"; wait "$srv" 2>/dev/null
rm -rf "$tmp"
