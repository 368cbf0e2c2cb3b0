#!/usr/bin/env bash
# A local Parley cluster on one machine: N nodes (default 3), each its own
# `parley serve` process, NATS embedded in every node and clustered through
# routes on 127.0.0.1, all storing into one PostgreSQL schema. Everything
# listens on loopback only. See docs/operations.md, "Running a cluster".
#
# Usage (from anywhere; it finds the repository itself):
#   docs/cluster/run-local.sh [start]      build parley, start the nodes not yet running,
#                                          wait until every node's /readyz is 200, print the addresses
#   docs/cluster/run-local.sh stop [N...]  SIGTERM to every node (or nodes N...): each drains
#                                          (drain_window), then exits
#   docs/cluster/run-local.sh kill N...    SIGKILL (a crash, for fault tests; `start` brings them back)
#   docs/cluster/run-local.sh status       each node's process, /readyz, sessions and NATS routes
#   docs/cluster/run-local.sh check        cross-node 1:1, group, push and kick (docs/cluster/check)
#   docs/cluster/run-local.sh clean        stop, then delete the state dir (not the PostgreSQL schema)
#
# Environment [default]:
#   PARLEY_PG            PostgreSQL URL [postgres://postgres@127.0.0.1:5432/test?sslmode=disable]
#   PARLEY_SCHEMA        the schema all nodes share [parley_cluster]
#   PARLEY_CLUSTER_DIR   state: secrets, configs, logs, pids [${TMPDIR:-/tmp}/parley-cluster-$UID]
#   PARLEY_NODES         number of nodes [3]
#   PARLEY_HTTP_PORT     node 1's HTTP + WebSocket port; node i listens on +i-1 [8081]
#   PARLEY_TCP_PORT      node 1's TCP port [7071]
#   PARLEY_ROUTE_PORT    node 1's NATS route port [6222]
#   PARLEY_NATS_URLS     external NATS (comma-separated nats:// URLs) instead of embedded NATS
#   PARLEY_DRAIN_WINDOW  drain_window, e.g. 2s [parley's cluster default, 10s]
#   PARLEY_EXTRA_CONFIG  a YAML file appended to every node's config (only keys not set here)
#   PARLEY_LOG_LEVEL     debug, info, warn or error [info]
#   PARLEY_BIN           use this parley binary instead of building one
#   PARLEY_READY_TIMEOUT seconds to wait for every /readyz [60]
#
# Secrets (token_key, app_secret, an admin API key, nats_cluster_secret) are
# generated once into $PARLEY_CLUSTER_DIR/secrets.env (mode 0600) and reused,
# so tokens and keys stay valid across restarts; every node gets the same ones.
set -euo pipefail
umask 077 # configs and secrets are readable by this user only

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG=${PARLEY_PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
SCHEMA=${PARLEY_SCHEMA:-parley_cluster}
STATE=${PARLEY_CLUSTER_DIR:-${TMPDIR:-/tmp}/parley-cluster-$(id -u)}
[[ $STATE == /* ]] || STATE=$PWD/$STATE
NODES=${PARLEY_NODES:-3}
HTTP_PORT=${PARLEY_HTTP_PORT:-8081}
TCP_PORT=${PARLEY_TCP_PORT:-7071}
ROUTE_PORT=${PARLEY_ROUTE_PORT:-6222}
NATS_URLS=${PARLEY_NATS_URLS:-}
DRAIN_WINDOW=${PARLEY_DRAIN_WINDOW:-}
EXTRA_CONFIG=${PARLEY_EXTRA_CONFIG:-}
LOG_LEVEL=${PARLEY_LOG_LEVEL:-info}
READY_TIMEOUT=${PARLEY_READY_TIMEOUT:-60}
BIN=${PARLEY_BIN:-$STATE/bin/parley}
STOP_TIMEOUT=45 # parley serve gives its shutdown 30s; past this a node is killed

DETACH=setsid
command -v setsid >/dev/null || DETACH=nohup # macOS

die() { echo "run-local: $*" >&2; exit 1; }
say() { echo "run-local: $*"; }

[[ $NODES =~ ^[1-9][0-9]*$ ]] || die "PARLEY_NODES must be a positive number"
[[ $SCHEMA =~ ^[a-z_][a-z0-9_]*$ ]] || die "PARLEY_SCHEMA must be a lower-case SQL identifier"
command -v curl >/dev/null || die "curl is needed"

http_port() { echo $((HTTP_PORT + $1 - 1)); }
tcp_port() { echo $((TCP_PORT + $1 - 1)); }
route_port() { echo $((ROUTE_PORT + $1 - 1)); }
node_dir() { echo "$STATE/node$1"; }
config_of() { echo "$STATE/node$1/parley.yaml"; }
log_of() { echo "$STATE/node$1/parley.log"; }
pidfile_of() { echo "$STATE/node$1/pid"; }
all_nodes() { seq 1 "$NODES"; }

# pid_of prints node i's pid if that process is running and is that node's
# parley (a pid file can outlive its process, and pids are reused).
pid_of() {
	local f pid args
	f=$(pidfile_of "$1")
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	args=$(ps -ww -p "$pid" -o args= 2>/dev/null) || return 1
	[[ $args == *"serve --config $(config_of "$1")"* ]] || return 1
	echo "$pid"
}

readyz() { # node → HTTP status of /readyz (000: no answer)
	curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$(http_port "$1")/readyz" || true
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

rand_hex() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }

# secrets: generated once, then reused.
load_secrets() {
	local f=$STATE/secrets.env k v
	mkdir -p "$STATE"
	if [[ ! -f $f ]]; then
		{
			echo "# Shared by every node of the local cluster (docs/cluster/run-local.sh)."
			echo "TOKEN_KEY=$(rand_hex)"
			echo "APP_SECRET=$(rand_hex)"
			echo "ADMIN_API_KEY=$(rand_hex)"
			echo "NATS_CLUSTER_SECRET=$(rand_hex)"
		} >"$f.tmp"
		chmod 600 "$f.tmp"
		mv "$f.tmp" "$f"
		say "generated secrets into $f"
	fi
	TOKEN_KEY='' APP_SECRET='' ADMIN_API_KEY='' NATS_CLUSTER_SECRET=''
	while IFS='=' read -r k v; do
		case $k in
		TOKEN_KEY) TOKEN_KEY=$v ;;
		APP_SECRET) APP_SECRET=$v ;;
		ADMIN_API_KEY) ADMIN_API_KEY=$v ;;
		NATS_CLUSTER_SECRET) NATS_CLUSTER_SECRET=$v ;;
		esac
	done <"$f"
	[[ -n $TOKEN_KEY && -n $APP_SECRET && -n $ADMIN_API_KEY && -n $NATS_CLUSTER_SECRET ]] ||
		die "$f lacks a secret; delete it to generate new ones"
	printf '%s\n' "$ADMIN_API_KEY" >"$STATE/admin-api-key"
	chmod 600 "$STATE/admin-api-key"
}

yq() { printf "'%s'" "${1//\'/\'\'}"; } # a YAML single-quoted string

yaml_list() { # items... → ['a', 'b']
	local out='' s
	for s in "$@"; do out+="${out:+, }$(yq "$s")"; done
	printf '[%s]' "$out"
}

# write_config renders node i's YAML (keys: docs/operations.md).
write_config() {
	local i=$1 f routes=() urls=() j
	f=$(config_of "$i")
	mkdir -p "$(node_dir "$i")/data"
	{
		echo "# Node $i of the local cluster, written by docs/cluster/run-local.sh."
		echo "# Secrets come from $STATE/secrets.env: the same on every node."
		echo "node_id: $i"
		echo "data_dir: $(yq "$(node_dir "$i")/data")"
		echo "http_addr: 127.0.0.1:$(http_port "$i")"
		echo "tcp_addr: 127.0.0.1:$(tcp_port "$i")"
		echo "postgres_url: $(yq "$PG")"
		echo "postgres_schema: $SCHEMA"
		echo "token_key: $(yq "$TOKEN_KEY")"
		echo "app_secret: $(yq "$APP_SECRET")"
		echo "admin_api_keys: $(yaml_list "$ADMIN_API_KEY")"
		if [[ -n $NATS_URLS ]]; then
			IFS=',' read -r -a urls <<<"$NATS_URLS"
			echo "nats_urls: $(yaml_list "${urls[@]}")"
			echo "nats_subject_prefix: $SCHEMA # one cluster per schema on a shared NATS"
		else
			for j in $(all_nodes); do routes+=("nats://127.0.0.1:$(route_port "$j")"); done
			echo "nats_cluster_listen: 127.0.0.1:$(route_port "$i")"
			echo "nats_routes: $(yaml_list "${routes[@]}")"
			echo "nats_cluster_secret: $(yq "$NATS_CLUSTER_SECRET")"
			echo "nats_cluster_name: $SCHEMA"
		fi
		if [[ -n $DRAIN_WINDOW ]]; then echo "drain_window: $DRAIN_WINDOW"; fi
		if [[ -n $EXTRA_CONFIG ]]; then
			echo "# from $EXTRA_CONFIG"
			cat "$EXTRA_CONFIG"
		fi
	} >"$f.tmp"
	mv "$f.tmp" "$f"
}

build() {
	if [[ -n ${PARLEY_BIN:-} ]]; then
		[[ -x $BIN ]] || die "PARLEY_BIN=$BIN is not an executable"
		return
	fi
	command -v go >/dev/null || die "go is needed to build parley (or set PARLEY_BIN)"
	mkdir -p "$STATE/bin"
	say "building $BIN"
	(cd "$ROOT" && go build -o "$BIN.tmp" ./cmd/parley) || die "go build failed"
	mv "$BIN.tmp" "$BIN"
}

# signal_node sends sig to node i if it runs; true if it did.
signal_node() {
	local pid
	pid=$(pid_of "$1") || { rm -f "$(pidfile_of "$1")"; return 1; }
	kill "-$2" "$pid" 2>/dev/null
}

# wait_gone waits up to timeout seconds for nodes to exit, then SIGKILLs what is left.
wait_gone() {
	local timeout=$1 i t0 left
	shift
	t0=$SECONDS
	while :; do
		left=()
		for i in "$@"; do pid_of "$i" >/dev/null && left+=("$i"); done
		((${#left[@]} == 0)) && break
		if ((SECONDS - t0 >= timeout)); then
			for i in "${left[@]}"; do
				echo "run-local: node $i did not exit within ${timeout}s: SIGKILL" >&2
				signal_node "$i" KILL || true
			done
			sleep 0.2
			break
		fi
		sleep 0.1
	done
	for i in "$@"; do pid_of "$i" >/dev/null || rm -f "$(pidfile_of "$i")"; done
}

STARTED=()
# abort_start stops the nodes this run started (trap on a failed or
# interrupted start), so nothing is left running.
abort_start() {
	local rc=$? i
	trap - EXIT INT TERM HUP
	if ((${#STARTED[@]} > 0)); then
		echo "run-local: start failed; stopping node(s) ${STARTED[*]}" >&2
		for i in "${STARTED[@]}"; do signal_node "$i" TERM || true; done
		wait_gone 10 "${STARTED[@]}"
	fi
	exit $((rc == 0 ? 1 : rc))
}

cmd_start() {
	local i pid port ports t0 code all_ready
	load_secrets
	if [[ -n $EXTRA_CONFIG && ! -r $EXTRA_CONFIG ]]; then die "PARLEY_EXTRA_CONFIG=$EXTRA_CONFIG is not readable"; fi
	build
	trap abort_start EXIT
	trap 'exit 130' INT TERM HUP
	for i in $(all_nodes); do
		if pid=$(pid_of "$i"); then
			say "node $i already running (pid $pid)"
			continue
		fi
		ports=("$(http_port "$i")" "$(tcp_port "$i")")
		if [[ -z $NATS_URLS ]]; then ports+=("$(route_port "$i")"); fi
		for port in "${ports[@]}"; do
			if port_busy "$port"; then die "127.0.0.1:$port (node $i) is in use: set PARLEY_HTTP_PORT, PARLEY_TCP_PORT or PARLEY_ROUTE_PORT"; fi
		done
		write_config "$i"
		echo "=== $(date '+%F %T') run-local.sh start" >>"$(log_of "$i")"
		# Its own session (where setsid exists): a Ctrl-C in this terminal does not reach it.
		$DETACH "$BIN" serve --config "$(config_of "$i")" --log-level "$LOG_LEVEL" \
			</dev/null >>"$(log_of "$i")" 2>&1 &
		echo $! >"$(pidfile_of "$i")"
		STARTED+=("$i")
	done
	say "waiting for every node's /readyz (up to ${READY_TIMEOUT}s)"
	t0=$SECONDS
	while :; do
		all_ready=1
		for i in $(all_nodes); do
			if ! pid_of "$i" >/dev/null; then
				echo "run-local: node $i exited; the end of $(log_of "$i"):" >&2
				tail -n 15 "$(log_of "$i")" >&2
				exit 1
			fi
			code=$(readyz "$i")
			[[ $code == 200 ]] || all_ready=0
		done
		((all_ready)) && break
		if ((SECONDS - t0 >= READY_TIMEOUT)); then
			for i in $(all_nodes); do echo "run-local: node $i /readyz: $(readyz "$i")" >&2; done
			die "not ready after ${READY_TIMEOUT}s; see the logs in $STATE/node*/parley.log"
		fi
		sleep 0.2
	done
	trap - EXIT INT TERM HUP
	summary
}

summary() {
	local i ws=() mode
	if [[ -n $NATS_URLS ]]; then mode="external NATS $NATS_URLS"; else
		mode="NATS embedded, routes on 127.0.0.1:$(route_port 1)-$(route_port "$NODES")"
	fi
	echo
	echo "Parley local cluster: $NODES node(s) ready ($mode; PostgreSQL schema $SCHEMA)"
	for i in $(all_nodes); do
		ws+=("ws://127.0.0.1:$(http_port "$i")/ws")
		printf '  node %d  pid %-7s  ws://127.0.0.1:%d/ws  tcp://127.0.0.1:%d  http://127.0.0.1:%d\n' \
			"$i" "$(pid_of "$i")" "$(http_port "$i")" "$(tcp_port "$i")" "$(http_port "$i")"
	done
	echo "  state      $STATE (nodeN/parley.yaml, nodeN/parley.log)"
	echo "  admin key  $STATE/admin-api-key (mode 0600; the same on every node):"
	echo "             K=\$(cat $STATE/admin-api-key); curl -s -H \"X-Api-Key: \$K\" http://127.0.0.1:$(http_port 1)/v1/admin/online"
	echo "  clients    Go: client.SessionOptions{Addrs: []string{\"$(IFS='|'; echo "${ws[*]}" | sed 's/|/", "/g')\"}}"
	echo "             TypeScript: new ParleyClient({urls: ['$(IFS='|'; echo "${ws[*]}" | sed "s/|/', '/g")'], ...})"
	echo "             CLI: go run ./cmd/parley chat -a 127.0.0.1:$(http_port 1) --register --user alice --password alice-secret --to bob"
	echo "  check      $0 check     stop: $0 stop"
}

cmd_stop() {
	local i sent=()
	(($# > 0)) || set -- $(all_nodes)
	for i in "$@"; do
		if signal_node "$i" TERM; then sent+=("$i"); else say "node $i is not running"; fi
	done
	((${#sent[@]} > 0)) || return 0
	say "SIGTERM sent to node(s) ${sent[*]}; waiting while they drain"
	local t0=$SECONDS
	wait_gone "$STOP_TIMEOUT" "${sent[@]}"
	say "node(s) ${sent[*]} stopped after $((SECONDS - t0))s"
}

cmd_kill() {
	local i
	(($# > 0)) || die "kill needs node numbers"
	for i in "$@"; do
		if signal_node "$i" KILL; then say "node $i killed (SIGKILL)"; else say "node $i is not running"; fi
	done
	sleep 0.2
	for i in "$@"; do pid_of "$i" >/dev/null || rm -f "$(pidfile_of "$i")"; done
}

cmd_status() {
	local i pid sessions routes base key=''
	[[ -r $STATE/admin-api-key ]] && key=$(<"$STATE/admin-api-key")
	for i in $(all_nodes); do
		if pid=$(pid_of "$i"); then
			base=http://127.0.0.1:$(http_port "$i")
			sessions=$(curl -s --max-time 2 -H "X-Api-Key: $key" "$base/v1/admin/online?limit=1" |
				sed -n 's/.*"total":\([0-9]*\).*/\1/p')
			routes=$(curl -s --max-time 2 -H "X-Api-Key: $key" "$base/metrics" |
				sed -n 's/^parley_cluster_routes \([0-9]*\)$/\1/p')
			printf 'node %d  pid %-7s  /readyz %s  sessions %-5s  routes %-3s %s\n' \
				"$i" "$pid" "$(readyz "$i")" "${sessions:-?}" "${routes:-?}" "$base"
		else
			printf 'node %d  not running\n' "$i"
		fi
	done
}

cmd_check() {
	local i http=() tcp=()
	[[ -r $STATE/admin-api-key ]] || die "no cluster state in $STATE: run start first"
	for i in $(all_nodes); do
		http+=("http://127.0.0.1:$(http_port "$i")")
		tcp+=("127.0.0.1:$(tcp_port "$i")")
	done
	cd "$ROOT"
	go run ./docs/cluster/check -key-file "$STATE/admin-api-key" \
		-http "$(IFS=,; echo "${http[*]}")" -tcp "$(IFS=,; echo "${tcp[*]}")"
}

cmd_clean() {
	[[ -d $STATE ]] || { say "nothing in $STATE"; return 0; }
	[[ -f $STATE/secrets.env ]] || die "$STATE does not look like run-local.sh state; not deleting it"
	cmd_stop
	rm -rf "$STATE"
	say "deleted $STATE (the PostgreSQL schema $SCHEMA remains: DROP SCHEMA $SCHEMA CASCADE to empty it)"
}

cmd=${1:-start}
(($# > 0)) && shift
case $cmd in
start) cmd_start ;;
stop) cmd_stop "$@" ;;
kill) cmd_kill "$@" ;;
status) cmd_status ;;
check) cmd_check ;;
clean) cmd_clean ;;
-h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown command $cmd (start, stop, kill, status, check, clean)" ;;
esac
