#!/bin/bash
# Re-runs the group figures in docs/benchmarks.md, each against a fresh
# server on embedded storage. Outputs go to docs/bench/*.txt.
# Usage: docs/bench/run-groups.sh   (from the repository root; ~5 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)/parley
go build -o "$P" ./cmd/parley || exit 1
data=$(mktemp -d)/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --data $data --transport tcp --quiet"
srv=
fresh() {
  [ -n "$srv" ] && kill "$srv" && wait "$srv" 2>/dev/null
  rm -rf "$data"
  "$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn & srv=$!
  sleep 1
}
fresh; "$P" bench group $A -c 50000 -t 100 -m 20 -p 0.5 > "$out/group.txt" 2>&1
fresh; "$P" bench send-rate $A --groups 100 -m 100 --pipeline 4 -c 300000 > "$out/send-rate.txt" 2>&1
fresh; "$P" bench fanout $A -m 10000 --online 5000 -c 2000 --procs 2 > "$out/fanout.txt" 2>&1
fresh; "$P" bench fanout $A -m 10000 --online 5000 -c 2000 --procs 2 --ack=false > "$out/fanout-noack.txt" 2>&1
fresh; "$P" bench mixed $A --duration 30s --procs 2 > "$out/mixed.txt" 2>&1
kill "$srv"
