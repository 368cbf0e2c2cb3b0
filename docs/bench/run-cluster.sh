#!/bin/bash
# Re-runs the cluster figures in docs/benchmarks.md: the same scenarios
# against one node on PostgreSQL and against a local 3-node cluster
# (docs/cluster/run-local.sh: three `parley serve` processes, embedded NATS
# routed on loopback, one PostgreSQL schema), on the same machine. Then a
# connection count past one process's 20,000-file limit, held by the
# cluster. Outputs go to docs/bench/cluster/*.txt.
# Usage: docs/bench/run-cluster.sh   (from the repository root; ~10 minutes;
# needs PostgreSQL at $PARLEY_PG and psql)
set -u
root=$(pwd)
out=$root/docs/bench/cluster
mkdir -p "$out"
PG=${PARLEY_PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
tmp=$(mktemp -d)
P=$tmp/parley
go build -o "$P" ./cmd/parley || exit 1

scenarios() { # label, then the -a/--tcp/--api-key flags
  local label=$1; shift
  "$P" bench user "$@" -c 100000 -t 100 --pipeline 16 --transport tcp --quiet > "$out/$label-user.txt" 2>&1
  "$P" bench group "$@" -c 20000 -t 100 -m 20 -p 0.5 --transport tcp --quiet > "$out/$label-group.txt" 2>&1
  "$P" bench login "$@" -c 20000 -t 100 --procs 2 --transport tcp --quiet > "$out/$label-login.txt" 2>&1
  "$P" bench fanout "$@" -m 5000 --online 3000 -c 500 --procs 2 --transport tcp --quiet > "$out/$label-fanout.txt" 2>&1
}

# One node on PostgreSQL, limits as in the cluster below.
schema=bench_single_$$
cat > "$tmp/single.yaml" <<EOF
data_dir: $tmp/single
http_addr: 127.0.0.1:18080
tcp_addr: 127.0.0.1:17070
postgres_url: "$PG"
postgres_schema: $schema
user_send_rate: -1
user_request_rate: -1
EOF
"$P" serve --config "$tmp/single.yaml" --log-level warn > "$tmp/single.log" 2>&1 & srv=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.2; done
scenarios single -a 127.0.0.1:18080 --tcp 127.0.0.1:17070 --data "$tmp/single"
kill "$srv"; wait "$srv" 2>/dev/null
psql "$PG" -qc "drop schema if exists $schema cascade"

# Three nodes.
export PARLEY_CLUSTER_DIR=$tmp/cluster PARLEY_SCHEMA=bench_cluster_$$ PARLEY_PG=$PG PARLEY_BIN=$P
export PARLEY_DRAIN_WINDOW=1s PARLEY_LOG_LEVEL=warn PARLEY_EXTRA_CONFIG=$root/docs/bench/unlimited.yaml
docs/cluster/run-local.sh start > "$out/cluster-start.txt" 2>&1 || { cat "$out/cluster-start.txt"; exit 1; }
key=$(<"$PARLEY_CLUSTER_DIR/admin-api-key")
nodes="-a 127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083 --tcp 127.0.0.1:7071,127.0.0.1:7072,127.0.0.1:7073 --api-key $key"
scenarios cluster3 $nodes

# Connections past one process's file limit: 45,000 held by the cluster
# (three load processes, each under 20,000 sockets), each node's RSS read
# while they are held.
"$P" bench conns $nodes -c 45000 -t 100 --hold 20s --procs 3 --transport tcp --quiet > "$out/cluster3-conns.txt" 2>&1 & b=$!
{
  for _ in $(seq 300); do
    total=0
    for i in 1 2 3; do
      n=$(curl -s -H "X-Api-Key: $key" "http://127.0.0.1:808$i/metrics" | awk '$1=="parley_sessions"{print $2}')
      total=$((total + ${n:-0}))
    done
    [ "$total" -ge 45000 ] && break
    sleep 1
  done
  echo "sessions held by the cluster: $total"
  for i in 1 2 3; do
    pid=$(<"$PARLEY_CLUSTER_DIR/node$i/pid")
    n=$(curl -s -H "X-Api-Key: $key" "http://127.0.0.1:808$i/metrics" | awk '$1=="parley_sessions"{print $2}')
    echo "node $i: $n sessions, $(grep VmRSS /proc/$pid/status)"
  done
} > "$out/cluster3-conns-nodes.txt" 2>&1
wait "$b"
docs/cluster/run-local.sh clean > /dev/null 2>&1
psql "$PG" -qc "drop schema if exists $PARLEY_SCHEMA cascade"
rm -rf "$tmp"
echo "outputs in $out"
