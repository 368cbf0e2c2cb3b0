#!/bin/bash
# Re-runs every figure in docs/benchmarks.md ("Single node"), each against a
# fresh server on embedded storage. Outputs go to docs/bench/*.txt.
# Usage: docs/bench/run-1to1.sh   (from the repository root; ~6 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)/parley
go build -o "$P" ./cmd/parley || exit 1
data=$(mktemp -d)/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --data $data --quiet"
srv=
fresh() { # [extra serve flags]
  [ -n "$srv" ] && kill "$srv" && wait "$srv" 2>/dev/null
  rm -rf "$data"
  "$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn "$@" & srv=$!
  sleep 1
}
fresh; "$P" bench conns $A --transport tcp -c 15000 -t 100 --hold 5s --procs 2 > "$out/conns-tcp.txt" 2>&1
fresh; "$P" bench conns $A --transport ws -c 15000 -t 100 --hold 5s --procs 2 > "$out/conns-ws.txt" 2>&1
fresh; "$P" bench login $A --transport tcp -c 50000 -t 100 --procs 2 > "$out/login-tcp.txt" 2>&1
"$P" bench login $A --transport ws -c 50000 -t 100 --procs 2 > "$out/login-ws.txt" 2>&1
fresh; "$P" bench user $A --transport tcp -c 100000 -t 1000 > "$out/user-t1000.txt" 2>&1
fresh; "$P" bench user $A --transport tcp -c 400000 -t 100 --pipeline 16 > "$out/user-pipe.txt" 2>&1
fresh; "$P" bench user $A --transport ws -c 200000 -t 100 --pipeline 16 > "$out/user-pipe-ws.txt" 2>&1
fresh --config "$out/unlimited.yaml"; "$P" bench order $A --transport tcp -c 300000 --window 256 > "$out/order.txt" 2>&1
fresh; "$P" bench soak $A --transport tcp -t 500 --rate 20 --duration 60s > "$out/soak.txt" 2>&1
kill "$srv"
