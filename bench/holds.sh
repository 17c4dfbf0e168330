#!/usr/bin/env bash
# Hold throughput through HTTP against PostgreSQL, next to the pgbench ceiling of the same
# hold transaction, both on one private PostgreSQL 15 cluster in one run (a benchmark, not a
# test: it reports numbers and asserts nothing).
#
# Usage: bash bench/holds.sh [duration_s] [runs]
#   BOXOFFICE_BENCH_PORT   private cluster port (default 25441, below the client port range)
#   SHARED_BENCH           folder with the pgbench scripts (default ../shared/bench)
#   LIMITS_ORDER           the order of the two servers per run (default "default all=off")
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-20}"; RUNS="${2:-3}"
PORT="${BOXOFFICE_BENCH_PORT:-25441}"
SHARED="${SHARED_BENCH:-$REPO/../shared/bench}"
BIN=/usr/lib/postgresql/15/bin
WORK="$(mktemp -d /tmp/boxoffice-bench.XXXXXX)"
SECRET="bench-secret-0123456789abcdef"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

chown postgres "$WORK" 2>/dev/null || true
as_pg $BIN/initdb -D "$WORK/data" -A trust -U postgres >/dev/null
cat >> "$WORK/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$WORK'
max_connections = 200
shared_buffers = 2GB
wal_buffers = 64MB
max_wal_size = 8GB
checkpoint_timeout = 15min
synchronous_commit = on
fsync = on
full_page_writes = on
autovacuum_naptime = 10s
CONF
as_pg $BIN/pg_ctl -D "$WORK/data" -l "$WORK/pg.log" -w start >/dev/null
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  as_pg $BIN/pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PSQL="psql -h 127.0.0.1 -p $PORT -U postgres -X -q -v ON_ERROR_STOP=1"

cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
  # The ceiling: the per-request hold transaction replayed by pgbench (32 clients: the best
  # cell of ../shared/bench/run.sh on this machine).
  $PSQL -f "$SHARED/schema.sql" postgres >/dev/null 2>&1
  out=$($BIN/pgbench -h 127.0.0.1 -p $PORT -U postgres -n -M prepared -T "$DUR" -c 32 -j 2 -f "$SHARED/hold_update.sql" postgres 2>&1)
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -1)
  held=$($PSQL -At -c "SELECT count(*) FROM holds" postgres)
  echo "run $run pgbench hold_update.sql c=32 tx/s=$tps holds_ok/s=$(( held / DUR ))"

  # The service: boxoffice serve on the same cluster, boxoffice load driving it over HTTP,
  # with its abuse limits as they ship (limits=default) and without them (limits=off), in
  # the order LIMITS_ORDER gives (default first; "all=off default" for the other order).
  for limits in ${LIMITS_ORDER:-default all=off}; do
    limit_args=()
    [ "$limits" = default ] || limit_args=(--limit "$limits")
    $PSQL -c "DROP DATABASE IF EXISTS boxoffice_bench" postgres
    BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn "$BOXOFFICE" serve \
      --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" --listen 127.0.0.1:0 \
      --ticket-key "$WORK/ticket-key.pem" --waitroom-state "$WORK/waitroom" "${limit_args[@]}" \
      > "$WORK/serve.out" 2> "$WORK/serve.err" &
    SERVER_PID=$!
    for _ in $(seq 1 100); do grep -q 'listening on' "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
    URL=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/serve.out" | head -1)
    [ -n "$URL" ] || { cat "$WORK/serve.err"; exit 1; }
    BOXOFFICE_JWT_SECRET=$SECRET "$BOXOFFICE" load holds --base-url "$URL" --clients 64 --duration-s "$DUR" \
      | sed "s/^/run $run limits=$([ "$limits" = default ] && echo on || echo off) boxoffice /"
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  done
done
