#!/bin/bash
# Re-runs the "Backup" figures in docs/benchmarks.md against a fresh server on
# embedded storage: fills it with MESSAGES 1:1 messages of 16,000 bytes
# (default 65,000: 1 GB of payload, which Pebble compresses to about 100 MB)
# and FILES uploaded files of 4 MiB of random bytes (default 1,216: 5.1 GB),
# times `parley backup` of it with no other load, then runs the same
# `parley bench user` 1:1 load (2,000 sends/s, 30 s) alone and with a backup
# started 3 s into it, and compares the ACK p99.
# Output: docs/bench/backup.txt. Needs twice the data's size free in $TMPDIR (11 GB).
# Usage: docs/bench/run-backup.sh [MESSAGES [FILES]]   (from the repository root; ~5 minutes)
set -u
out=$(cd "$(dirname "$0")" && pwd)/backup.txt
fill=${1:-65000}
files=${2:-1216}
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
data=$tmp/data
A="-a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --data $data --transport tcp"
"$P" serve --data "$data" --http 127.0.0.1:18080 --tcp 127.0.0.1:17070 --log-level warn & srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1
PARLEY_API_KEY=$(grep -A1 '"admin_api_keys"' "$data/secrets.json" | tail -1 | tr -d ' ",')
export PARLEY_API_KEY
now() { date +%s.%N; }
backup() { # FILE: prints the time the backup took
	local t0; t0=$(now)
	"$P" backup --server http://127.0.0.1:18080 --out "$1" || return 1
	echo "backup took $(echo "$(now) - $t0" | bc) s"
}
load() { "$P" bench user $A -t 100 -c 60000 --rate 2000 2>&1 | grep -v '^\['; }
{
	echo "== fill: $fill messages of 16000 bytes"
	"$P" bench user $A -t 100 -c "$fill" --pipeline 16 --size 16000 2>&1 | grep -E 'Run time|Requests/sec|Lost'
	echo "== fill: $files files of 4 MiB"
	"$P" bench upload $A -t 32 -c "$files" --file-size 4194304 2>&1 | grep -E 'Run time|Requests/sec|MB/s'
	echo "store directory: $(du -sb --exclude PARLEY-BALLAST "$data/store" | cut -f1) bytes"
	echo "media directory: $(du -sb "$data/media" | cut -f1) bytes"
	echo; echo "== backup, no other load"
	backup "$tmp/b1.tar"
	ls -l "$tmp/b1.tar"; rm -f "$tmp/b1.tar"
	echo; echo "== 1:1 load alone"
	load
	echo; echo "== the same 1:1 load, a backup started 3 s into it"
	load > "$tmp/load.txt" & l=$!
	sleep 3
	backup "$tmp/b2.tar"
	wait $l
	cat "$tmp/load.txt"
	echo "$(uptime)"
} > "$out" 2>&1
