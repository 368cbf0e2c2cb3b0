#!/bin/bash
# Re-runs the push-offline figures in docs/benchmarks.md: three rounds, each
# the floor (the bench's FCM client straight to the stand-in, no server),
# then a fresh server with the default badge, then one with push_badge_off;
# 40 groups of 1,000 members (39,960 offline devices with FCM targets).
# The floor has a stand-in of its own (its keys name its port). Reports go
# to docs/bench/push-offline.txt.
# Usage: docs/bench/run-push-offline.sh   (from the repository root; ~3 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)/push-offline.txt
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
"$P" bench push-offline --provider-setup --provider-dir "$tmp/standin" >/dev/null || exit 1
: > "$out"
for round in 1 2 3; do
  echo "=== floor, round $round" >> "$out"
  "$P" bench push-offline --floor --provider-dir "$tmp/floor" --provider 127.0.0.1:0 -c 40 -m 1000 >> "$out" 2>&1
  for mode in badge nobadge; do
    rm -rf "$tmp/data"
    cp "$tmp/standin/server.yaml" "$tmp/server.yaml"
    echo "push_delay: 1s" >> "$tmp/server.yaml"
    [ "$mode" = nobadge ] && echo "push_badge_off: true" >> "$tmp/server.yaml"
    "$P" serve --config "$tmp/server.yaml" --data "$tmp/data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn & srv=$!
    sleep 1
    echo "=== $mode, round $round" >> "$out"
    "$P" bench push-offline -a 127.0.0.1:18080 --provider-dir "$tmp/standin" --data "$tmp/data" -c 40 -t 40 -m 1000 --quiet >> "$out" 2>&1
    kill "$srv"; wait "$srv" 2>/dev/null
  done
done
rm -rf "$tmp"
grep -E "^===|Notifications/sec|CPU" "$out"
