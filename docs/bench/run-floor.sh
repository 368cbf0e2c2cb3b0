#!/bin/bash
# The "Floor" table of docs/benchmarks.md: each scenario against the floor
# (parley bench floor: the gateway with only maps behind it) and against a
# fresh server on embedded storage, alternating, ROUNDS times (default 3),
# with the load average before each run. Outputs: docs/bench/floor-*.txt.
# Usage: [PARLEY=bin] docs/bench/run-floor.sh [ROUNDS] [SCENARIO...]   (from the repository root)
#   SCENARIO: user-pipe user-t1000 login group fanout (default: all)
set -u
rounds=${1:-3}
[ $# -gt 0 ] && shift
scen=${*:-user-pipe user-t1000 login group fanout}
out=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
P=${PARLEY:-$dir/parley} # PARLEY=path: a binary already built from this tree
[ -n "${PARLEY:-}" ] || go build -o "$P" ./cmd/parley || exit 1
data=$dir/data
H=127.0.0.1:18080 T=127.0.0.1:17070
args() {
  case $1 in
  user-pipe) echo "user -c 100000 -t 100 --pipeline 16 --transport tcp" ;;
  user-t1000) echo "user -c 30000 -t 1000 --transport tcp" ;;
  login) echo "login -c 20000 -t 100 --procs 2 --transport tcp" ;;
  group) echo "group -c 20000 -t 100 -m 20 -p 0.5 --transport tcp" ;;
  fanout) echo "fanout -m 10000 --online 5000 -c 500 --procs 2 --transport tcp" ;;
  esac
}
up() { # wait until the TCP port accepts
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/17070) 2>/dev/null && return; sleep 0.1; done
}
for s in $scen; do
  f=$out/floor-$s.txt
  echo "# parley bench $(args "$s") -a $H --tcp $T (--api-key floor | --data D)" > "$f"
  echo "# machine shared with other jobs compiling: see the load average before each run" >> "$f"
  for r in $(seq "$rounds"); do
    for target in floor parley; do
      rm -rf "$data"
      if [ $target = floor ]; then
        "$P" bench floor --http $H --tcp $T --api-key floor 2>/dev/null & srv=$!
        key="--api-key floor"
      else
        "$P" serve --data "$data" --http $H --tcp $T --log-level warn >/dev/null 2>&1 & srv=$!
        key="--data $data"
      fi
      up
      { echo; echo "== $s round $r: $target; loadavg $(cat /proc/loadavg)"; } | tee -a "$f"
      # shellcheck disable=SC2046
      "$P" bench $(args "$s") -a $H --tcp $T $key --quiet >> "$f" 2>&1
      echo "exit $?; loadavg after $(cat /proc/loadavg)" >> "$f"
      grep -E "Requests/sec|Deliveries/sec|99% in|CPU:|Lost|Reliability" "$f" | tail -6
      kill "$srv"; wait "$srv" 2>/dev/null
    done
  done
done
rm -rf "$dir"
