#!/usr/bin/env bash
# Measures the attempt cycle through 1, 2 and 4 `limbo serve` instances on
# one PostgreSQL, for docs/scaling.md: each instance its own process, on its
# own loopback port, started here and stopped after its run; `limbo bench
# --targets` spreads the clients over them.
#
#   tools/scaling/run.sh [postgres://…]     (default: the local test server)
#
# Environment: INSTANCES ("1 2 4"), CONCURRENCY ("16 64"), DURATION (10s),
# ROUNDS (3), REFERENCE (0: no in-process reference run), CONFIG (a --config file for the instances, e.g. one that
# limits the files destination's concurrency; default none), CONNS (per-instance --db-max-conns, default 20: four instances
# then hold at most 80 of a stock max_connections = 100), OUT (a directory
# for the JSON reports and the instances' logs; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/../.."

db=${1:-postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable}
instances=${INSTANCES:-1 2 4}
concurrency=${CONCURRENCY:-16 64}
duration=${DURATION:-10s}
rounds=${ROUNDS:-3}
conns=${CONNS:-20}
config=${CONFIG:-}
out=${OUT:-$(mktemp -d /tmp/limbo-scaling-XXXXXX)}
mkdir -p "$out"

go build -o "$out/limbo" ./cmd/limbo
schema=limbo_scaling_$(date +%s)
case $db in *\?*) url="$db&search_path=$schema" ;; *) url="$db?search_path=$schema" ;; esac
psql "$db" -qc "CREATE SCHEMA $schema"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	psql "$db" -qc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE" || true
}
trap cleanup EXIT
"$out/limbo" audit keygen --out "$out/audit.key" >/dev/null
"$out/limbo" migrate --db "$url" >/dev/null

echo "results in $out" >&2
psql "$db" -Atc "SELECT 'postgres ' || current_setting('server_version') || ', max_connections ' || current_setting('max_connections') || ', shared_buffers ' || current_setting('shared_buffers') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', other clients connected ' || (SELECT COUNT(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend')" >&2
# The reference: one in-process instance, as `limbo bench` runs it, same pool
# (REFERENCE=0 skips it; it takes no CONFIG).
for c in $( [ "${REFERENCE:-1}" = 0 ] || echo "$concurrency" ); do
	echo "== in process, $c clients" >&2
	"$out/limbo" bench --db "$db" --concurrency "$c" --duration "$duration" --rounds "$rounds" \
		--db-max-conns "$conns" --reconcile-ops 0 >"$out/inprocess-$c.json"
	python3 tools/scaling/summary.py "$out/inprocess-$c.json"
done
for n in $instances; do
	targets=()
	pids=()
	for i in $(seq 1 "$n"); do
		port=$((18080 + i))
		"$out/limbo" serve --addr "127.0.0.1:$port" --db "$url" --audit-key "$out/audit.key" \
			--db-max-conns "$conns" --log-level warn ${config:+--config "$config"} 2>"$out/serve-$n-$i.log" &
		pids+=($!)
		targets+=("http://127.0.0.1:$port")
	done
	list=$(IFS=,; echo "${targets[*]}")
	for c in $concurrency; do
		echo "== $n instance(s), $c clients" >&2
		"$out/limbo" bench --db "$url" --targets "$list" --concurrency "$c" \
			--duration "$duration" --rounds "$rounds" >"$out/bench-$n-$c.json"
		python3 tools/scaling/summary.py "$out/bench-$n-$c.json"
	done
	for p in "${pids[@]}"; do kill "$p"; done
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
done
