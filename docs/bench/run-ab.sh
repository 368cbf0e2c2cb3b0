#!/bin/bash
# A/B comparison of two commits on this machine: builds both, then runs the
# same bench scenario against each in turn, ROUNDS times, each run against a
# fresh server on embedded storage. Alternating the two cancels most of the
# drift in this shared machine's speed, which over an hour can exceed the
# difference being measured.
# Usage: docs/bench/run-ab.sh OLD NEW ROUNDS -- bench-args...
#   e.g. docs/bench/run-ab.sh 00d607c HEAD 3 -- login -c 50000 -t 100 --procs 2 --transport tcp
set -u
old=$1 new=$2 rounds=$3
shift 3
[ "${1:-}" = "--" ] && shift
dir=$(mktemp -d)
for v in "$old" "$new"; do
  git worktree add -q --detach "$dir/src" "$v" || exit 1
  (cd "$dir/src" && go build -o "$dir/parley-$(git rev-parse --short HEAD)" ./cmd/parley) || exit 1
  git worktree remove --force "$dir/src"
done
o=$dir/parley-$(git rev-parse --short "$old")
n=$dir/parley-$(git rev-parse --short "$new")
data=$dir/data
for r in $(seq "$rounds"); do
  for bin in "$o" "$n"; do
    rm -rf "$data"
    "$bin" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn >/dev/null 2>&1 &
    srv=$!
    sleep 1
    echo "== round $r: $(basename "$bin") serve; $(basename "$n") bench $*"
    "$n" bench "$@" -a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --data "$data" --quiet 2>&1 |
      grep -E "Requests\/sec|99% in|CPU:|Deliveries\/sec|Lost|Duplicated|Out of order|per connection|Server RSS" | head -10
    kill "$srv"; wait "$srv" 2>/dev/null
  done
done
rm -rf "$dir"
