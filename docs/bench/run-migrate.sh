#!/bin/bash
# Re-runs the "Migrate" figure in docs/benchmarks.md: seeds an embedded
# store (1,000,000 messages over 10,000 1:1 conversations by default), then
# times `parley migrate` into a fresh schema of the PostgreSQL at
# PARLEY_TEST_PG. Output goes to docs/bench/migrate.txt.
# Usage: PARLEY_TEST_PG=postgres://... docs/bench/run-migrate.sh [MESSAGES [CONVERSATIONS]]
#        (from the repository root; ~5 minutes for the default size)
set -u
: "${PARLEY_TEST_PG:?set PARLEY_TEST_PG to the PostgreSQL URL}"
out=$(cd "$(dirname "$0")" && pwd)
msgs=${1:-1000000}
convs=${2:-10000}
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1
schema=migrate_bench_$$
{
  echo "seeding $msgs messages over $convs conversations into $tmp/data"
  PARLEY_MIGRATE_SEED=$tmp/data PARLEY_MIGRATE_MESSAGES=$msgs PARLEY_MIGRATE_CONVERSATIONS=$convs \
    go test ./internal/migrate -run TestSeedForBenchmark -count=1 -v -timeout 30m | grep seeded
  du -sh "$tmp/data/store"
  start=$(date +%s.%N)
  "$P" migrate --from "$tmp/data" --to "$PARLEY_TEST_PG" --schema "$schema"
  rc=$?
  end=$(date +%s.%N)
  printf 'exit %d; parley migrate took %.1f s: %.0f messages/s overall, copy and verification included\n' \
    "$rc" "$(echo "$end - $start" | bc)" "$(echo "$msgs / ($end - $start)" | bc)"
} > "$out/migrate.txt" 2>&1
psql "$PARLEY_TEST_PG" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1
rm -rf "$tmp"
cat "$out/migrate.txt"
