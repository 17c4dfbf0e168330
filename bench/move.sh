#!/usr/bin/env bash
# Issue 17: moving a sold-through event between shards (`boxoffice shard move`). A local
# cluster (`cluster up --nodes 1 --shards 2`), one 50,000-seat event with N sold seats and
# their tickets (`load checkouts`), then the event moved from main to s1 and back, RUNS times
# each way. Reports each move's total time, how long the source's tables were locked against
# writes, and the rows moved; then `boxoffice check`. A benchmark, not a test: it reports and
# asserts nothing.
#
# The move is by logical replication (issue 38): `cluster up` must give every shard
# wal_level = logical; pass --locked-copy as the third argument for issue 17's way. The
# store-level comparison of both ways is `cargo run -p boxoffice-store-postgres --example
# move_pause`.
#
# Usage: bash bench/move.sh [sold (500 per second of checkouts)] [runs] [--locked-copy]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
SOLD="${1:-10000}"; RUNS="${2:-3}"; WAY="${3:-}"
cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"
export BOXOFFICE_JWT_SECRET="move-bench-secret-0123456789abcdef"
WORK=$(mktemp -d); chmod 755 "$WORK"   # PostgreSQL runs as postgres
trap '"$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), sold $SOLD, runs $RUNS"
out=$("$BOXOFFICE" cluster up --dir "$WORK/c" --nodes 1 --shards 2)
balancer=$(sed -n 's/^balancer //p' <<<"$out")
home=$(sed -n 's/^database-url //p' <<<"$out")
"$BOXOFFICE" load checkouts --base-url "$balancer" --rate 500 --duration-s $((SOLD / 500)) | tail -3
psql_home() { psql "$home" -Atc "$1"; }
event=$(psql_home "SELECT event_id FROM event ORDER BY event_id LIMIT 1")
# Wait for the relay to issue every ticket (at most a minute).
for _ in $(seq 1 120); do
  n=$(psql_home "SELECT count(*) FROM ticket WHERE event_id = '$event'")
  [ "$n" -ge "$SOLD" ] && break
  sleep 0.5
done
echo "event $event: $(psql_home "SELECT count(*) FROM seat WHERE event_id = '$event'") seats, $(psql_home "SELECT count(*) FROM orders WHERE event_id = '$event'") orders, $n tickets"
for run in $(seq 1 "$RUNS"); do
  for to in s1 main; do
    echo "run $run -> $to: $("$BOXOFFICE" shard move --database-url "$home" --event "$event" --to "$to" $WAY | tr '\n' ' ')"
  done
done
"$BOXOFFICE" check --database-url "$home" | tail -4
