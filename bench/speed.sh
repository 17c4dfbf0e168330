#!/usr/bin/env bash
# Issue 6's speed goals, each next to the pgbench ceiling of the hold transaction measured in
# the same run, on one private PostgreSQL 15 cluster with durable commits (fsync on,
# synchronous_commit on); server and load tool on the same machine. A benchmark, not a
# test: it reports numbers and asserts nothing.
#
# Per run:
#   pgbench   hold_update.sql at 32 and 64 clients (the best of the two is the ceiling)
#   holds     closed loop, 256 clients, hot-skewed 1-6 adjacent seats, 1 s TTL: decided/s
#   holds-open HOLDS_OPEN_RATES holds/s offered (open loop, default "2000 5000"): p99
#   order-status 5,000 reads/s offered (open loop): p99
#   sellout   256 clients hammering a sold-out section: rejects/s (and the store-write counters)
#   onsale    the full on-sale: 50,000 seats, 20,000 fans over 5 s, no waiting room, every
#             fan pays with pm_card_visa through the simulator (100-300 ms authorization):
#             seconds from the first hold to the last ticket issued
#   sqlite    the holds scenario against SQLite (no goal)
#   overdemand issue 35's on-sale straight at the seats with more demand than the house:
#             24,000 fans over 6 s (1-6 seats each, about 1.7x the 50,000 seats), no waiting
#             room, OVERDEMAND_CARDS (default visa=80,declined=10,3ds=5,slow=5: declines,
#             3-D Secure and slow approvals), 5 % abandoning, 60 s holds; fans refused seats
#             wait on the waiting list for what comes back: seconds from the on-sale until
#             every seat is sold, 5xx, tickets against sold seats, then boxoffice check
#   door      issue 16's sale at one tenth of its size: 200,000 fans over 30 s through the
#             waiting room (fifo, release from the API's default start rate up to
#             DOOR_MAX_RELEASE, default 2000/s), 50,000 seats, the load tool's card mix
#             (declines, 3-D Secure, slow and lost answers), 10 % abandoning; simulator at
#             100-300 ms: seconds from on-sale to sold out, the SOLD_OUT answers, Kendall's tau
#             of queue position against admission order, then boxoffice check
#   checkouts checkouts on one event at CHECKOUT_RATES (default "1000 2000") per second (open
#             loop), each of a seat held beforehand, simulator at zero latency: confirmed/s, p99
#   exchanges issue 7's exchanges on one hot trip: 8,000 ticketed owners, exchanges offered at
#             EXCHANGE_RATES (default "2000 5000") per second (open loop): achieved/s and p99
#   forward   issue 15: two nodes on one store; holds through the event's owner, and through the
#             other node (which forwards every hold to the owner), each on a fresh store: open
#             loop at FORWARD_RATE (default 1500) holds/s (p50, p99), then the closed-loop
#             holds case (decided/s)
#   takeover  issue 15: two nodes (lease TTL 3 s), the owner SIGKILLed, one hold sent to the
#             other node at once: when the dead owner's lease lapsed, when the other node took
#             it over, when the hold was answered (ms after the kill)
#
# Usage: bash bench/speed.sh [duration_s] [runs]
#   BOXOFFICE_BENCH_PORT   private cluster port (default 25443, below the client port range)
#   SHARED_BENCH           folder with the pgbench scripts (default ../shared/bench)
#   ONLY                   space-separated subset of: pgbench holds holds-open order-status
#                          sellout onsale sqlite checkouts exchanges forward takeover door
#                          overdemand (default: all but checkouts, exchanges, forward,
#                          takeover, door, overdemand)
#   CHECKOUT_RATES         offered checkout rates (default "1000 2000")
#   EXCHANGE_RATES         offered exchange rates (default "2000 5000")
#   HOLDS_OPEN_RATES       offered hold rates of the holds-open case (default "2000 5000")
#   ONSALE_CARDS           the on-sale's test-card mix (default visa=100; the load tool's own
#                          default mix declines, asks for 3-D Secure and times out a share)
#   ONSALE_ABANDON         share of the on-sale's holds abandoned, half released and half
#                          left to expire (default 0)
#   OVERDEMAND_LEAVE       1: the overdemand case's refused fans go home at once instead of
#                          waiting on the waiting list (an A/B of what the waiting costs)
#   DOOR_MAX_RELEASE       the door case's maxReleasePerSecond (default 2000)
#   DOOR_TARGET_HOLD_P99_MS  the door case's targetHoldP99Ms (default the API's, 300)
#   DOOR_PRESALE_SHARE     the door case with two queues (issue 40): that share of the fans
#                          redeem an access code and queue in a presale lane of their own
#                          (`load onsale --presale-share`); the JSON report's lanes printed
#   DOOR_CARDS, DOOR_ABANDON   the door case's card mix and abandon share (default the load
#                          tool's mix, 0.1)
#   DOOR_FANS, DOOR_ARRIVAL_S  the door case's fans and arrival window (default --scale 0.1:
#                          200,000 over 30 s, 10,000 shoppers inside at most)
#   BOXOFFICE              the boxoffice binary of the load tool and check (default: this
#                          checkout's release build, built first); set, nothing is built: an
#                          A/B of servers with one load tool while the checkout changes
#   SERVER_BIN             the boxoffice binary that serves (default: this checkout's release
#                          build; the load tool and check are always this checkout's): an A/B
#                          against an older build in the same session
#   PG_STATEMENTS          1: load pg_stat_statements and, after each checkouts, onsale or door
#                          case, write the 20 statements of most total time (and the 30
#                          most called) to
#                          $TMPDIR/boxoffice-statements-<case>-<run>.txt (a profile, not a figure)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-10}"; RUNS="${2:-3}"
PORT="${BOXOFFICE_BENCH_PORT:-25443}"
SHARED="${SHARED_BENCH:-$REPO/../shared/bench}"
ONLY="${ONLY:-pgbench holds holds-open order-status sellout onsale sqlite}"
EXCHANGE_RATES="${EXCHANGE_RATES:-2000 5000}"
HOLDS_OPEN_RATES="${HOLDS_OPEN_RATES:-2000 5000}"
CHECKOUT_RATES="${CHECKOUT_RATES:-1000 2000}"
FORWARD_RATE="${FORWARD_RATE:-1500}"
BIN=/usr/lib/postgresql/15/bin
WORK="$(mktemp -d /tmp/boxoffice-speed.XXXXXX)"
SECRET="bench-secret-0123456789abcdef"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
want() { [[ " $ONLY " == *" $1 "* ]]; }

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
if [ "${PG_STATEMENTS:-0}" = 1 ]; then
  printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track_planning = on\n" >> "$WORK/data/postgresql.conf"
fi
as_pg $BIN/pg_ctl -D "$WORK/data" -l "$WORK/pg.log" -w start >/dev/null
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=""
}
# start_node NAME DATABASE_URL [serve flags...]: one more boxoffice serve on the store (a
# cluster node named NAME): NODE_URL, NODE_PID.
NODE_PIDS=""
start_node() {
  local name=$1 db=$2; shift 2
  "$SERVER_BIN" serve --database-url "$db" --listen 127.0.0.1:0 --node-id "$name" \
    --ticket-key "$WORK/ticket-key.pem" --waitroom-state "$WORK/waitroom-$name" "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" &
  NODE_PID=$!; NODE_PIDS="$NODE_PIDS $NODE_PID"
  for _ in $(seq 1 300); do grep -q 'listening on' "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
  NODE_URL=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/$name.out" | head -1)
  [ -n "$NODE_URL" ] || { cat "$WORK/$name.err"; exit 1; }
}
stop_nodes() {
  for pid in $NODE_PIDS; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  NODE_PIDS=""
}
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
cleanup() {
  stop_nodes
  stop_server
  as_pg $BIN/pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PSQL="psql -h 127.0.0.1 -p $PORT -U postgres -X -q -v ON_ERROR_STOP=1"

if [ -z "${BOXOFFICE:-}" ]; then
  cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
fi
BOXOFFICE="${BOXOFFICE:-$REPO/target/release/boxoffice}"
SERVER_BIN="${SERVER_BIN:-$BOXOFFICE}"
export BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn

# start_server DATABASE_URL [serve flags...]: starts boxoffice serve, sets URL.
start_server() {
  local db=$1; shift
  rm -rf "$WORK/waitroom"
  RUST_LOG="warn,boxoffice_server::runtime::writer=info" "$SERVER_BIN" serve --database-url "$db" --listen 127.0.0.1:0 \
    --ticket-key "$WORK/ticket-key.pem" --waitroom-state "$WORK/waitroom" "$@" \
    > "$WORK/serve.out" 2> "$WORK/serve.err" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do grep -q 'listening on' "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
  URL=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/serve.out" | head -1)
  [ -n "$URL" ] || { cat "$WORK/serve.err"; exit 1; }
}
# statements CASE: the statements of most total time since the database was made.
statements() {
  [ "${PG_STATEMENTS:-0}" = 1 ] || return 0
  $PSQL -c "SELECT round(total_exec_time)::bigint AS total_ms, round(total_plan_time)::bigint AS plan_ms, calls, round((total_exec_time / calls)::numeric, 3) AS mean_ms, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 300) AS query FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'boxoffice_bench') ORDER BY total_exec_time DESC LIMIT 20" postgres \
    > "${TMPDIR:-/tmp}/boxoffice-statements-$1.txt" 2>&1 || true
  $PSQL -c "SELECT sum(calls) AS calls, round(sum(total_exec_time))::bigint AS total_ms FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'boxoffice_bench')" postgres \
    >> "${TMPDIR:-/tmp}/boxoffice-statements-$1.txt" 2>&1 || true
  $PSQL -c "SELECT calls, round(total_exec_time)::bigint AS total_ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 200) AS query FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'boxoffice_bench') ORDER BY calls DESC LIMIT 30" postgres \
    >> "${TMPDIR:-/tmp}/boxoffice-statements-$1.txt" 2>&1 || true
}
fresh_pg() {
  $PSQL -c "DROP DATABASE IF EXISTS boxoffice_bench" postgres
  if [ "${PG_STATEMENTS:-0}" = 1 ]; then
    $PSQL -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" postgres
    $PSQL -c "SELECT pg_stat_statements_reset()" postgres >/dev/null
  fi
  echo "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load: $(cut -d' ' -f1-3 /proc/loadavg), duration ${DUR}s, runs $RUNS"
for run in $(seq 1 "$RUNS"); do
  if want pgbench; then
    for c in 32 64; do
      $PSQL -f "$SHARED/schema.sql" postgres >/dev/null 2>&1
      out=$($BIN/pgbench -h 127.0.0.1 -p $PORT -U postgres -n -M prepared -T "$DUR" -c $c -j 2 -f "$SHARED/hold_update.sql" postgres 2>&1)
      tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -1)
      echo "run $run pgbench hold_update.sql c=$c tx/s=$tps"
    done
  fi
  if want holds || want holds-open || want order-status || want sellout; then
    start_server "$(fresh_pg)"
    want holds && "$BOXOFFICE" load holds --base-url "$URL" --clients 256 --duration-s "$DUR" | sed "s/^/run $run holds c=256 /"
    if want holds-open; then
      for rate in $HOLDS_OPEN_RATES; do
        "$BOXOFFICE" load holds-open --base-url "$URL" --rate "$rate" --duration-s "$DUR" 2>/dev/null | sed "s/^/run $run holds-open /"
      done
    fi
    want order-status && { "$BOXOFFICE" load order-status --base-url "$URL" --orders 500 --rate 5000 --duration-s "$DUR" 2>/dev/null | sed "s/^/run $run order-status /" || true; }
    want sellout && "$BOXOFFICE" load sellout --base-url "$URL" --clients 256 --duration-s "$DUR" 2>/dev/null | sed "s/^/run $run sellout /"
    stop_server
  fi
  if want onsale; then
    start_server "$(fresh_pg)" --sim-auth-latency-ms 100-300
    "$BOXOFFICE" load onsale --base-url "$URL" --no-waiting-room --accounts 20000 --arrival-s 5 \
      --abandon "${ONSALE_ABANDON:-0}" --cards "${ONSALE_CARDS:-visa=100}" --max-in-flight 20000 --hold-ttl-s 120 \
      --report "$WORK/onsale.json" --html-report "$WORK/onsale-$run.html" > "$WORK/onsale.out" 2> "$WORK/onsale.err" || true
    event=$(sed -n 's/^onsale event=\([^ ]*\).*/\1/p' "$WORK/onsale.out")
    # Tickets are issued by the outbox relay after each confirmation: wait for the last one.
    for _ in $(seq 1 120); do
      n=$($PSQL -At -c "SELECT count(*) FROM seat WHERE event_id = '$event' AND status = 'SOLD'" boxoffice_bench)
      t=$($PSQL -At -c "SELECT count(*) FROM ticket WHERE event_id = '$event'" boxoffice_bench)
      [ "$n" = "$t" ] && break; sleep 1
    done
    span=$($PSQL -At -c "SELECT round(extract(epoch FROM (SELECT max(issued_at) FROM ticket WHERE event_id = '$event') - (SELECT min(created_at) FROM hold WHERE event_id = '$event'))::numeric, 1)" boxoffice_bench)
    # The relay's backlog (captures, voids of cancelled orders' authorizations, tickets): the
    # check below judges the state the relay leaves, so it waits for it (up to 120 s).
    for _ in $(seq 1 120); do
      left=$($PSQL -At -c "SELECT count(*) FROM outbox WHERE published_at IS NULL" boxoffice_bench)
      [ "$left" = 0 ] && break; sleep 1
    done
    drained=$($PSQL -At -c "SELECT round(extract(epoch FROM max(published_at) - (SELECT max(issued_at) FROM ticket WHERE event_id = '$event'))::numeric, 1) FROM outbox" boxoffice_bench)
    refused=$(grep -c 'group refused' "$WORK/serve.err" || true)
    echo "run $run onsale sold_seats=$n tickets=$t first_hold_to_last_ticket_s=$span outbox_unpublished=$left outbox_drained_after_last_ticket_s=$drained groups_refused=$refused $(grep -E '^hold |^checkout |^order_final ' "$WORK/onsale.out" | awk '{printf "%s_p99_ms=%s ", $1, $5}')$(grep -o 'errors (5xx/transport)=[0-9]* unexpected=[0-9]*' "$WORK/onsale.out")"
    cp "$WORK/onsale-$run.html" "${TMPDIR:-/tmp}/boxoffice-onsale-$run.html"
    cp "$WORK/onsale.out" "${TMPDIR:-/tmp}/boxoffice-onsale-$run.txt"
    cp "$WORK/serve.err" "${TMPDIR:-/tmp}/boxoffice-onsale-$run.serve.err"
    statements "onsale-$run"
    stop_server
    "$BOXOFFICE" check --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" > "${TMPDIR:-/tmp}/boxoffice-onsale-$run.check.txt" || true
    tail -1 "${TMPDIR:-/tmp}/boxoffice-onsale-$run.check.txt" | sed "s/^/run $run onsale check: /"
  fi
  if want overdemand; then
    ulimit -n 40000 2>/dev/null || true
    start_server "$(fresh_pg)" --sim-auth-latency-ms 100-300
    "$BOXOFFICE" load onsale --base-url "$URL" --no-waiting-room --accounts 24000 --arrival-s 6 \
      --abandon 0.05 --cards "${OVERDEMAND_CARDS:-visa=80,declined=10,3ds=5,slow=5}" --max-in-flight 30000 --hold-ttl-s 60 ${OVERDEMAND_LEAVE:+--refused-fans-leave} \
      --report "$WORK/overdemand.json" --html-report "$WORK/overdemand-$run.html" > "$WORK/overdemand.out" 2> "$WORK/overdemand.err" || true
    event=$(sed -n 's/^onsale event=\([^ ]*\).*/\1/p' "$WORK/overdemand.out")
    for _ in $(seq 1 120); do
      left=$($PSQL -At -c "SELECT count(*) FROM outbox WHERE published_at IS NULL" boxoffice_bench)
      [ "$left" = 0 ] && break; sleep 1
    done
    n=$($PSQL -At -c "SELECT count(*) FROM seat WHERE event_id = '$event' AND status = 'SOLD'" boxoffice_bench)
    t=$($PSQL -At -c "SELECT count(*) FROM ticket WHERE event_id = '$event' AND status = 'VALID'" boxoffice_bench)
    echo "run $run overdemand sold_seats=$n valid_tickets=$t $(grep -E '^(every seat sold|outcomes):' "$WORK/overdemand.out" | tr '\n' ' ')$(grep -o 'errors (5xx/transport)=[0-9]* unexpected=[0-9]*' "$WORK/overdemand.out") elapsed_s=$(sed -n 's/.* elapsed_s=\([^ ]*\).*/\1/p' "$WORK/overdemand.out")"
    cp "$WORK/overdemand-$run.html" "${TMPDIR:-/tmp}/boxoffice-overdemand-$run.html"
    cp "$WORK/overdemand.json" "${TMPDIR:-/tmp}/boxoffice-overdemand-$run.json"
    cp "$WORK/overdemand.out" "${TMPDIR:-/tmp}/boxoffice-overdemand-$run.txt"
    stop_server
    "$BOXOFFICE" check --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" > "${TMPDIR:-/tmp}/boxoffice-overdemand-$run.check.txt" || true
    tail -1 "${TMPDIR:-/tmp}/boxoffice-overdemand-$run.check.txt" | sed "s/^/run $run overdemand check: /"
  fi
  if want door; then
    ulimit -n 20000 2>/dev/null || true
    start_server "$(fresh_pg)" --sim-auth-latency-ms 100-300
    # The server's own latencies during the sale (the simulation's IO model is calibrated on
    # the writer's group commits): /metrics every 20 s.
    rm -f "$WORK"/metrics-*.txt
    ( while kill -0 "$SERVER_PID" 2>/dev/null; do
        curl -s -m 5 "$URL/metrics" > "$WORK/metrics-$(date +%s).txt" || true; sleep 20
      done ) &
    SCRAPER_PID=$!
    /usr/bin/time -f "load_cpu_s=%U+%S load_max_rss_kb=%M" -o "$WORK/door.time" \
      "$BOXOFFICE" load onsale --base-url "$URL" --scale 0.1 ${DOOR_FANS:+--accounts "$DOOR_FANS"} ${DOOR_ARRIVAL_S:+--arrival-s "$DOOR_ARRIVAL_S"} \
      --abandon "${DOOR_ABANDON:-0.1}" ${DOOR_CARDS:+--cards "$DOOR_CARDS"} ${DOOR_PRESALE_SHARE:+--presale-share "$DOOR_PRESALE_SHARE"} --max-in-flight 1000000 --max-release "${DOOR_MAX_RELEASE:-2000}" ${DOOR_TARGET_HOLD_P99_MS:+--target-hold-p99-ms "$DOOR_TARGET_HOLD_P99_MS"} \
      --report "$WORK/door.json" --html-report "$WORK/door-$run.html" > "$WORK/door.out" 2> "$WORK/door.err" || true
    event=$(sed -n 's/^onsale event=\([^ ]*\).*/\1/p' "$WORK/door.out")
    n=$($PSQL -At -c "SELECT count(*) FROM seat WHERE event_id = '$event' AND status = 'SOLD'" boxoffice_bench)
    echo "run $run door sold_seats=$n $(grep -E '^(outcomes|door|fairness):' "$WORK/door.out" | tr '\n' ' ')$(grep -o 'errors (5xx/transport)=[0-9]* unexpected=[0-9]*' "$WORK/door.out") elapsed_s=$(sed -n 's/.* elapsed_s=\([^ ]*\).*/\1/p' "$WORK/door.out")"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); l=r.get("lanes"); print("lanes: " + json.dumps(l, sort_keys=True)) if l else None' "$WORK/door.json" 2>/dev/null | sed "s/^/run $run door /" || true
    cp "$WORK/door-$run.html" "${TMPDIR:-/tmp}/boxoffice-door-$run.html"
    cp "$WORK/door.json" "${TMPDIR:-/tmp}/boxoffice-door-$run.json"
    cp "$WORK/door.out" "${TMPDIR:-/tmp}/boxoffice-door-$run.txt"
    cp "$WORK/serve.err" "${TMPDIR:-/tmp}/boxoffice-door-$run.serve.err"
    kill "$SCRAPER_PID" 2>/dev/null || true; wait "$SCRAPER_PID" 2>/dev/null || true
    statements "door-$run"
    curl -s -m 5 "$URL/metrics" > "$WORK/metrics-$(date +%s).txt" || true
    cat "$WORK"/metrics-*.txt > "${TMPDIR:-/tmp}/boxoffice-door-$run.metrics.txt"
    # CPU seconds of the server (utime+stime, clock ticks) and of the load tool, who share two cores.
    server_cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.0f", ($14 + $15) / hz}' "/proc/$SERVER_PID/stat")
    echo "run $run door cpu: server_cpu_s=$server_cpu $(cat "$WORK/door.time" 2>/dev/null | tail -1)"
    for summary in boxoffice_hold_batch_seconds 'boxoffice_http_request_seconds{route="/v1/events/{eventId}/holds",method="POST"'; do
      python3 "$HERE/quantiles.py" "$summary" $(ls "$WORK"/metrics-*.txt | sort) | tail -1 | sed "s/^/run $run door server: /"
    done
    for _ in $(seq 1 120); do
      left=$($PSQL -At -c "SELECT count(*) FROM outbox WHERE published_at IS NULL" boxoffice_bench)
      [ "$left" = 0 ] && break; sleep 1
    done
    stop_server
    "$BOXOFFICE" check --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" > "${TMPDIR:-/tmp}/boxoffice-door-$run.check.txt" || true
    tail -1 "${TMPDIR:-/tmp}/boxoffice-door-$run.check.txt" | sed "s/^/run $run door check: /"
  fi
  if want checkouts; then
    for rate in $CHECKOUT_RATES; do
      start_server "$(fresh_pg)"
      "$BOXOFFICE" load checkouts --base-url "$URL" --rate "$rate" --duration-s "$DUR" 2>/dev/null \
        | sed "s/^/run $run checkouts /" || true
      statements "checkouts-$rate-$run"
      stop_server
      "$BOXOFFICE" check --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" | tail -1 | sed "s/^/run $run checkouts check: /"
    done
  fi
  if want exchanges; then
    for rate in $EXCHANGE_RATES; do
      start_server "$(fresh_pg)"
      "$BOXOFFICE" load exchanges --base-url "$URL" --orders 8000 --rate "$rate" --duration-s "$DUR" 2>/dev/null \
        | sed "s/^/run $run exchanges /" || true
      stop_server
      "$BOXOFFICE" check --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_bench" | tail -1 | sed "s/^/run $run exchanges check: /"
    done
  fi
  if want forward; then
    # Each side on a fresh store and fresh nodes (the first side's outbox backlog would
    # otherwise be relayed during the second), alternating which side goes first.
    sides="owner via-other-node"; [ $((run % 2)) = 0 ] && sides="via-other-node owner"
    for side in $sides; do
      db=$(fresh_pg)
      start_node fwd-1 "$db"; OWNER_URL=$NODE_URL
      start_node fwd-2 "$db"; OTHER_URL=$NODE_URL
      via=""; [ "$side" = via-other-node ] && via="--holds-via $OTHER_URL"
      # shellcheck disable=SC2086
      { "$BOXOFFICE" load holds-open --base-url "$OWNER_URL" $via --rate "$FORWARD_RATE" --duration-s "$DUR" 2>/dev/null || true; } \
        | sed "s/^/run $run forward $side open-loop /"
      # shellcheck disable=SC2086
      { "$BOXOFFICE" load holds --base-url "$OWNER_URL" $via --clients 256 --duration-s "$DUR" || true; } \
        | sed "s/^/run $run forward $side c=256 /"
      stop_nodes
      cp "$WORK/fwd-1.err" "${TMPDIR:-/tmp}/boxoffice-forward-$side-owner-$run.err"
      cp "$WORK/fwd-2.err" "${TMPDIR:-/tmp}/boxoffice-forward-$side-other-$run.err"
    done
  fi
  if want takeover; then
    db=$(fresh_pg)
    start_node kill-1 "$db" --lease-ttl-ms 3000; OWNER_URL=$NODE_URL; OWNER_PID=$NODE_PID
    start_node kill-2 "$db" --lease-ttl-ms 3000; OTHER_URL=$NODE_URL
    admin=$("$BOXOFFICE" token --account ops --admin 2>/dev/null); fan=$("$BOXOFFICE" token --account fan 2>/dev/null)
    event=$(curl -s -X POST "$OWNER_URL/v1/admin/events" -H "authorization: Bearer $admin" -H "idempotency-key: tk-$run" \
      -H 'content-type: application/json' \
      -d '{"name":"Takeover","startsAt":"2030-01-01T20:00:00Z","currency":"EUR","sections":[{"name":"A","rows":1,"seatsPerRow":10,"priceMinor":100}]}' \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["eventId"])')
    hold() { curl -s -o /dev/null -w '%{http_code}' -X POST "$1/v1/events/$event/holds" -H "authorization: Bearer $fan" \
      -H "idempotency-key: $2" -H 'content-type: application/json' -d "{\"seatIds\":[\"$3\"]}"; }
    first=$(hold "$OWNER_URL" first A-1-1)
    sleep 1.5   # a renewal or two
    kill -9 "$OWNER_PID"; killed=$(ms_now)
    expires=$($PSQL -At -c "SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM event_lease WHERE event_id = '$event'" boxoffice_bench)
    status=$(hold "$OTHER_URL" next A-1-2); answered=$(ms_now)
    since=$($PSQL -At -c "SELECT (extract(epoch FROM since) * 1000)::bigint FROM event_lease WHERE event_id = '$event'" boxoffice_bench)
    epoch=$($PSQL -At -c "SELECT epoch FROM event_lease WHERE event_id = '$event'" boxoffice_bench)
    echo "run $run takeover ttl_ms=3000 first=$first status=$status epoch=$epoch lease_lapsed_after_kill_ms=$((expires - killed)) taken_over_after_kill_ms=$((since - killed)) answered_after_kill_ms=$((answered - killed))"
    stop_nodes
  fi
  if want sqlite; then
    rm -f "$WORK/bench.db"*
    start_server "sqlite://$WORK/bench.db"
    "$BOXOFFICE" load holds --base-url "$URL" --clients 256 --duration-s "$DUR" | sed "s/^/run $run sqlite holds c=256 /"
    stop_server
  fi
done
