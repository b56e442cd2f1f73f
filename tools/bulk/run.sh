#!/usr/bin/env bash
# Limbo's bulk intake next to River's InsertMany, interleaved in one run
# (docs/benchmarks.md). Each round, for each batch size: limbo bench timing
# only POST /operations/batch, then riverbench -mode insertmany, both with
# CONCURRENCY clients for DURATION. Prints one JSON line per run, then the
# medians and their ratio per batch size.
#
#   tools/bulk/run.sh postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
#
# env: BATCHES (default "100 1000"), CONCURRENCY (16), DURATION (10s),
# ROUNDS (3), RIVERBENCH (default: built from ../shared/peers/riverbench),
# RIVER_DB (default: database perf_river on the same server, created).
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=${1:?usage: tools/bulk/run.sh POSTGRES_URL}
BATCHES=${BATCHES:-100 1000}
CONCURRENCY=${CONCURRENCY:-16}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$(mktemp -t limbo-bulk-XXXXXX.jsonl)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/limbo" ./cmd/limbo
RB=${RIVERBENCH:-}
if [ -z "$RB" ]; then
    cp -r ../shared/peers/riverbench "$work/riverbench-src"
    (cd "$work/riverbench-src" && go build -o "$work/riverbench" .)
    RB=$work/riverbench
fi
RIVER_DB=${RIVER_DB:-$(python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/perf_river")))' "$DB")}
admin=$(python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/postgres", query="sslmode=disable")))' "$DB")
psql "$admin" -XAtq -c "SELECT 1 FROM pg_database WHERE datname = 'perf_river'" | grep -q 1 ||
    psql "$admin" -Xq -c 'CREATE DATABASE perf_river'
"$RB" -mode migrate -db "$RIVER_DB" >/dev/null

for r in $(seq 1 "$ROUNDS"); do
    for b in $BATCHES; do
        "$work/limbo" bench --db "$DB" --no-cycles --reconcile-ops 0 --rounds 1 --warmup 1s \
            --duration "$DURATION" --concurrency "$CONCURRENCY" --bulk-batch "$b" |
            python3 -c 'import json,sys; d=json.load(sys.stdin)["bulk"][0]; d.update(peer="limbo", round='"$r"'); print(json.dumps(d))' | tee -a "$OUT"
        "$RB" -db "$RIVER_DB" -mode insertmany -c "$CONCURRENCY" -batch "$b" -duration "$DURATION" -warmup 1s |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"peer":"river","round":'"$r"',"batch":d["batch"],"ops_per_s":round(d["jobs_per_s"]),"call_p50_ms":d["call_p50_ms"],"call_p99_ms":d["call_p99_ms"]}))' | tee -a "$OUT"
    done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for b in sorted({r["batch"] for r in runs}):
    med = {p: statistics.median(r["ops_per_s"] for r in runs if r["batch"] == b and r["peer"] == p) for p in ("limbo", "river")}
    ratios = [l["ops_per_s"] / v["ops_per_s"] for l in runs if l["peer"] == "limbo" and l["batch"] == b
              for v in runs if v["peer"] == "river" and v["batch"] == b and v["round"] == l["round"]]
    print(f"batch {b}: limbo {med['limbo']:.0f} ops/s, river InsertMany {med['river']:.0f} jobs/s, "
          f"ratio of medians {med['limbo']/med['river']:.2f}, per round {', '.join(f'{x:.2f}' for x in ratios)}")
PY
