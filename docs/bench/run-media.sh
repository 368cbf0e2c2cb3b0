#!/bin/bash
# Re-runs the media figures in docs/benchmarks.md: uploads of 1 MiB files
# from 100 clients to the local store and to S3 (a local versitygw started
# by .ci/s3.sh), 100 clients each uploading one 50 MiB file (server memory),
# downloads through signed URLs, and 1:1 sends with and without an
# attachment (alternating). Per-user rate limits are off (upload rate,
# sends). Reports go to docs/bench/media.txt.
# Usage: docs/bench/run-media.sh   (from the repository root; ~5 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)/media.txt
root=$(pwd)
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
eval "$(PARLEY_S3_TTL=1200 bash .ci/s3.sh)"
s3=$PARLEY_TEST_S3
srv=
fresh() { # fresh [s3]
  [ -n "$srv" ] && kill "$srv" && wait "$srv" 2>/dev/null
  rm -rf "$tmp/data"
  printf 'user_send_rate: -1\nuser_request_rate: -1\nmedia_upload_rate: -1\n' > "$tmp/server.yaml"
  if [ "${1:-}" = s3 ]; then
    python3 - "$s3" >> "$tmp/server.yaml" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
print(f"media_s3_endpoint: http://{u.hostname}:{u.port}\nmedia_s3_bucket: {u.path.strip('/')}\n"
      f"media_s3_access_key: {u.username}\nmedia_s3_secret_key: {u.password}\nmedia_s3_path_style: true\n"
      f"media_s3_prefix: bench-{__import__('time').time_ns()}/")
PY
  fi
  "$P" serve --config "$tmp/server.yaml" --data "$tmp/data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn & srv=$!
  sleep 1
}
b() { echo "=== $*" >> "$out"; "$P" bench "$@" -a 127.0.0.1:18080 --data "$tmp/data" --quiet >> "$out" 2>&1; }
: > "$out"
fresh;    b upload -c 2000 -t 100 --file-size 1048576
fresh s3; b upload -c 2000 -t 100 --file-size 1048576
fresh;    b upload -c 100 -t 100 --file-size 52428800
fresh s3; b upload -c 100 -t 100 --file-size 52428800
fresh;    b download -c 20000 -t 100 --file-size 1048576
fresh;    b download -c 20000 -t 100 --file-size 65536
for round in 1 2 3; do
  fresh; b user -c 100000 -t 100 --pipeline 16 --transport tcp --tcp 127.0.0.1:17070
  fresh; b user -c 100000 -t 100 --pipeline 16 --transport tcp --tcp 127.0.0.1:17070 --attach
done
kill "$srv"; wait "$srv" 2>/dev/null
kill "$PARLEY_S3_PID" 2>/dev/null
rm -rf "$tmp"
grep -E "^===|Requests/sec|Throughput|99% in|CPU|RSS|Reliability" "$out"
