#!/usr/bin/env bash
# A local S3-compatible server for the S3 store's tests (internal/media/blob):
# versitygw serving a temporary directory through its posix backend, on a
# free loopback port, with fixed test credentials and one bucket.
#
#   .ci/s3.sh          start it; prints PARLEY_TEST_S3=... and PARLEY_S3_PID=...
#   source .ci/s3.sh   start it and export PARLEY_TEST_S3 and PARLEY_S3_PID
#
# It stops by itself after PARLEY_S3_TTL seconds (default 3600; 0: never),
# or at once with: kill "$PARLEY_S3_PID" (the pid is also in the file
# printed as its pid file). Its directory is removed when it stops.
# Installs versitygw with `go install` if it is not on PATH or in GOPATH/bin.
#
# Settings (environment): PARLEY_S3_TTL, PARLEY_S3_PORT (default: a free
# port), PARLEY_S3_DIR (default: a new temporary directory; versitygw needs
# a file system with extended attributes there).

parley_s3_start() {
  local version=v1.8.0 access=parleytest secret=parleytestsecret bucket=parley-test
  local ttl=${PARLEY_S3_TTL:-3600} vgw dir port pid url tries code owned=

  vgw=$(command -v versitygw || true)
  if [ -z "$vgw" ]; then
    vgw="$(go env GOPATH)/bin/versitygw"
    if [ ! -x "$vgw" ]; then
      echo "s3.sh: installing versitygw $version" >&2
      go install "github.com/versity/versitygw/cmd/versitygw@$version" || return 1
    fi
  fi
  command -v curl >/dev/null || { echo "s3.sh: needs curl" >&2; return 1; }

  dir=${PARLEY_S3_DIR:-}
  if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/parley-s3.XXXXXX") || return 1
    owned=1
  fi
  mkdir -p "$dir/data" || return 1

  for tries in 1 2 3 4 5 6 7 8 9 10; do
    port=${PARLEY_S3_PORT:-$((20000 + RANDOM % 20000))}
    # Taken ports answer; try another.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      [ -n "${PARLEY_S3_PORT:-}" ] && { echo "s3.sh: port $port is taken" >&2; return 1; }
      continue
    fi
    # The subshell stops versitygw on TERM or INT, waits for it and removes
    # the directory if it made it; timeout stops it after the TTL.
    (
      set +e
      trap 'kill -TERM "$child" 2>/dev/null' TERM INT
      if [ "$ttl" -gt 0 ] 2>/dev/null && command -v timeout >/dev/null; then
        ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret timeout "$ttl" \
          "$vgw" --port "127.0.0.1:$port" --quiet posix "$dir/data" >"$dir/log" 2>&1 &
      else
        ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
          "$vgw" --port "127.0.0.1:$port" --quiet posix "$dir/data" >"$dir/log" 2>&1 &
      fi
      child=$!
      wait "$child"
      wait "$child" 2>/dev/null
      [ -n "$owned" ] && rm -rf "$dir"
    ) </dev/null >/dev/null 2>&1 &
    pid=$!
    echo "$pid" >"$dir/pid"

    # Wait until it answers by creating the bucket (signed with SigV4).
    for _ in $(seq 1 100); do
      code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
        --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
        -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
        "http://127.0.0.1:$port/$bucket" || true)
      case $code in
        200 | 409) break ;;
      esac
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ "$code" = 200 ] || [ "$code" = 409 ]; then
      url="http://$access:$secret@127.0.0.1:$port/$bucket"
      echo "s3.sh: versitygw on 127.0.0.1:$port (pid $pid, pid file $dir/pid, data $dir/data)" >&2
      PARLEY_TEST_S3=$url
      PARLEY_S3_PID=$pid
      return 0
    fi
    echo "s3.sh: versitygw on port $port did not answer (last status $code):" >&2
    cat "$dir/log" >&2 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ -n "${PARLEY_S3_PORT:-}" ] && return 1
    mkdir -p "$dir/data"
  done
  echo "s3.sh: could not start versitygw" >&2
  return 1
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  parley_s3_start && export PARLEY_TEST_S3 PARLEY_S3_PID
else
  set -u
  parley_s3_start || exit 1
  echo "PARLEY_TEST_S3=$PARLEY_TEST_S3"
  echo "PARLEY_S3_PID=$PARLEY_S3_PID"
fi
