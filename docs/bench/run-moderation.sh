#!/bin/bash
# Re-runs the moderation figures in docs/benchmarks.md, in alternating rounds:
#  - 1:1 pipelined sends with no hook, with a before-send hook in the batch
#    form (max_batch 256, max_in_flight 8) and in the plain form (one event a
#    request, the defaults), the hook being `parley bench hook-server` (allows
#    everything, checks each signature, decodes each body) in its own process;
#  - the same at a fixed 18,000 sends/s (about half the no-hook maximum here),
#    for the latency a hook adds;
#  - the word filter off and on with 10,000 entries (two-word phrases in a
#    mask list read from a words file; the server told to read content type
#    "bench" as text), at the default 64-byte payload and at 200 bytes.
#  - the latency a hook adds without fsync waits (no_sync: true), closed loop
#    at 2 in flight per sender.
# ONLY=hook, ONLY=nosync or ONLY=filter runs one part, appending to the report.
# Per-user rate limits are off. Reports go to docs/bench/moderation.txt.
# Usage: docs/bench/run-moderation.sh   (from the repository root; ~6 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)/moderation.txt
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
python3 - "$tmp/words.txt" <<'PY'
import random, sys
random.seed(7)
words = set()
w = lambda: ''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(4, 7)))
while len(words) < 10000:
    # Two-word phrases: a single short word turned up, once in 300,000
    # messages, inside a bench message's binary header (its stream id, number
    # and timestamp), and the masked header made the message unrecognizable.
    words.add(w() + ' ' + w())
open(sys.argv[1], 'w').write('\n'.join(sorted(words)) + '\n')
PY
base='user_send_rate: -1
user_request_rate: -1'
printf '%s\n' "$base" > "$tmp/off.yaml"
printf 'no_sync: true\n%s\n' "$base" > "$tmp/off-nosync.yaml"
hook() { # hook NAME EXTRA
  printf '%s\nmoderation_hooks:\n  - name: bench\n    url: http://127.0.0.1:19099/\n    secret: bench-hook-secret\n    events: [message.direct, message.group]\n    policy: fail_open\n%s' "$base" "$2" > "$tmp/$1.yaml"
}
hook batch '    max_batch: 256
    max_in_flight: 8
'
hook plain ''
{ echo 'no_sync: true'; cat "$tmp/batch.yaml"; } > "$tmp/batch-nosync.yaml"
printf '%s\nword_filter_content_types: [bench]\nword_filter_lists:\n  - name: bench\n    action: mask\n    words_file: %s\n' "$base" "$tmp/words.txt" > "$tmp/filter.yaml"
"$P" bench hook-server --secret bench-hook-secret --listen 127.0.0.1:19099 > "$tmp/hook.log" 2>&1 & hk=$!
srv=
run() { # run CONFIG BENCH-ARGS...
  cfg=$1; shift
  rm -rf "$tmp/data"
  "$P" serve --config "$tmp/$cfg.yaml" --data "$tmp/data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn >/dev/null 2>&1 & srv=$!
  sleep 1
  echo "=== $cfg: user $*" >> "$out"
  "$P" bench user "$@" --transport tcp --tcp 127.0.0.1:17070 -a 127.0.0.1:18080 --data "$tmp/data" --quiet >> "$out" 2>&1
  kill "$srv"; wait "$srv" 2>/dev/null
}
part() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }
if [ -z "${ONLY:-}" ]; then : > "$out"; fi
if part hook; then
  for round in 1 2 3; do
    run off   -c 100000 -t 100 --pipeline 16
    run batch -c 100000 -t 100 --pipeline 16
    run plain -c 50000 -t 100 --pipeline 16
  done
  for round in 1 2 3; do
    run off   -c 270000 -t 100 --pipeline 16 --rate 18000
    run batch -c 270000 -t 100 --pipeline 16 --rate 18000
  done
fi
if part nosync; then
  for round in 1 2 3; do
    run off-nosync   -c 60000 -t 100 --pipeline 2
    run batch-nosync -c 60000 -t 100 --pipeline 2
  done
fi
if part filter; then
  for round in 1 2 3; do
    run off    -c 100000 -t 100 --pipeline 16
    run filter -c 100000 -t 100 --pipeline 16
    run off    -c 100000 -t 100 --pipeline 16 --size 200
    run filter -c 100000 -t 100 --pipeline 16 --size 200
  done
fi
kill "$hk"; wait "$hk" 2>/dev/null
cat "$tmp/hook.log" >> "$out"
rm -rf "$tmp"
grep -E "^===|Requests/sec|50% in|99% in|CPU|Reliability|hook-server:" "$out"
