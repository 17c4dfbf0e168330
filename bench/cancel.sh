#!/usr/bin/env bash
# Issue 37's cancellation benchmark: a sold-out 50,000-seat event cancelled while another
# event's on-sale runs on the same node. A benchmark, not a test: it reports numbers and
# asserts nothing (but for `boxoffice check` at the end, whose verdict it prints).
#
# On one private PostgreSQL 15 cluster with durable commits, one `boxoffice serve` with the
# in-process payment simulator at SIM_LATENCY (default 100-300 ms) for authorizations and
# refunds alike:
#   1. on-sale A: bench/speed.sh's on-sale (50,000 seats, 20,000 fans over 5 s, every fan
#      pays with pm_card_visa), waited for until every ticket is issued and the relay drained;
#   2. on-sale B alone, the same: the baseline of what an on-sale takes on this node now;
#   3. event A cancelled (POST .../cancel), and at once on-sale C, the same again; the
#      cancellation polled every second until CANCELLED.
# Reported: the cancel call's latency, refunds recorded and settled per second (overall and
# while C ran), minutes from the cancel to the last refund settled, C's and B's first hold to
# last ticket (and hold p99) side by side, and check.
#
# Usage: bash bench/cancel.sh
#   RATE                  cancellation-refunds-per-second (default 100, the server's default)
#   CONTROL               1: the same three on-sales, nothing cancelled (what a third on-sale
#                         on the same store takes anyway)
#   SIM_LATENCY           the simulator's latency, MIN-MAX ms (default 100-300)
#   BOXOFFICE_BENCH_PORT  private cluster port (default 25443)
#   BOXOFFICE             the boxoffice binary (default: this checkout's release build, built)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
PORT="${BOXOFFICE_BENCH_PORT:-25443}"
RATE="${RATE:-100}"
SIM_LATENCY="${SIM_LATENCY:-100-300}"
BIN=/usr/lib/postgresql/15/bin
WORK="$(mktemp -d /tmp/boxoffice-cancel.XXXXXX)"
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
autovacuum_naptime = 10s
CONF
as_pg $BIN/pg_ctl -D "$WORK/data" -l "$WORK/pg.log" -w start >/dev/null
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  as_pg $BIN/pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PSQL="psql -h 127.0.0.1 -p $PORT -U postgres -X -q -v ON_ERROR_STOP=1"
DB="postgres://postgres@127.0.0.1:$PORT/boxoffice_bench"
q() { $PSQL -At -c "$1" boxoffice_bench; }

if [ -z "${BOXOFFICE:-}" ]; then
  cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
fi
BOXOFFICE="${BOXOFFICE:-$REPO/target/release/boxoffice}"
export BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), rate $RATE/s, simulator $SIM_LATENCY ms"
$PSQL -c "DROP DATABASE IF EXISTS boxoffice_bench" postgres
"$BOXOFFICE" serve --database-url "$DB" --listen 127.0.0.1:0 --ticket-key "$WORK/ticket-key.pem" \
  --waitroom-state "$WORK/waitroom" --sim-auth-latency-ms "$SIM_LATENCY" \
  --sim-refund-latency-ms "$SIM_LATENCY" --limit "cancellation-refunds-per-second=$RATE" \
  > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER_PID=$!
for _ in $(seq 1 300); do grep -q 'listening on' "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/serve.out" | head -1)
[ -n "$URL" ] || { cat "$WORK/serve.err"; exit 1; }

# onsale NAME: the on-sale, then waits for its tickets and the relay; prints its figures.
onsale() {
  local name=$1
  "$BOXOFFICE" load onsale --base-url "$URL" --no-waiting-room --accounts 20000 --arrival-s 5 \
    --abandon 0 --cards visa=100 --max-in-flight 20000 --hold-ttl-s 120 \
    --report "$WORK/$name.json" --html-report "$WORK/$name.html" > "$WORK/$name.out" 2> "$WORK/$name.err" || true
  local event n t span
  event=$(sed -n 's/^onsale event=\([^ ]*\).*/\1/p' "$WORK/$name.out")
  for _ in $(seq 1 300); do
    n=$(q "SELECT count(*) FROM seat WHERE event_id = '$event' AND status = 'SOLD'")
    t=$(q "SELECT count(*) FROM ticket WHERE event_id = '$event'")
    [ "$n" = "$t" ] && break; sleep 1
  done
  span=$(q "SELECT round(extract(epoch FROM (SELECT max(issued_at) FROM ticket WHERE event_id = '$event') - (SELECT min(created_at) FROM hold WHERE event_id = '$event'))::numeric, 1)")
  echo "$event" > "$WORK/$name.event"
  echo "onsale $name sold_seats=$n tickets=$t first_hold_to_last_ticket_s=$span $(grep -E '^hold |^checkout ' "$WORK/$name.out" | awk '{printf "%s_p99_ms=%s ", $1, $5}')$(grep -o 'errors (5xx/transport)=[0-9]* unexpected=[0-9]*' "$WORK/$name.out")"
}
drain() {
  for _ in $(seq 1 300); do
    [ "$(q "SELECT count(*) FROM outbox WHERE published_at IS NULL")" = 0 ] && return; sleep 1
  done
}

onsale A; drain
A=$(cat "$WORK/A.event")
orders=$(q "SELECT count(*) FROM orders o JOIN payment_operation p ON p.order_id = o.order_id WHERE o.event_id = '$A' AND o.status = 'CONFIRMED' AND p.status = 'CAPTURED'")
echo "event A: $orders captured orders"
onsale B; drain

if [ "${CONTROL:-0}" = 1 ]; then
  onsale C
  exit 0
fi
ADMIN=$("$BOXOFFICE" token --account ops --admin --ttl 2h)
t0=$(ms_now)
answer=$(curl -s -X POST "$URL/v1/admin/events/$A/cancel" -H "authorization: Bearer $ADMIN" \
  -H 'content-type: application/json' -H 'idempotency-key: bench-cancel' -d '{"reason":"bench"}')
t1=$(ms_now)
echo "cancel answered in $((t1 - t0)) ms: $answer"
( onsale C > "$WORK/C.line" ) &
C_PID=$!
while :; do
  now=$(ms_now)
  c=$(curl -s -w '\n%{http_code}' "$URL/v1/admin/events/$A/cancellation" -H "authorization: Bearer $ADMIN")
  code=$(tail -1 <<<"$c"); c=$(sed '$d' <<<"$c")
  if [ "$code" != 200 ]; then echo "poll answered $code: $c" >> "$WORK/poll-errors.txt"; sleep 1; continue; fi
  recorded=$(q "SELECT count(*) FROM refund WHERE event_id = '$A' AND account_id = 'boxoffice:cancellation'")
  settled=$(q "SELECT count(*) FROM refund WHERE event_id = '$A' AND account_id = 'boxoffice:cancellation' AND status <> 'PENDING'")
  echo "$(( (now - t0) / 1000 )) s recorded=$recorded settled=$settled $(echo "$c" | python3 -c 'import json,sys; c=json.load(sys.stdin); print("status=%s refunded=%s failed=%s" % (c["status"], c["refunded"], c["failed"]))')" >> "$WORK/progress.txt"
  if kill -0 "$C_PID" 2>/dev/null; then echo "$recorded $settled $now" > "$WORK/during-c.txt"; fi
  echo "$c" | grep -q '"status":"CANCELLED"' && break
  [ $(( now - t0 )) -gt 3600000 ] && { echo "not finished after an hour"; break; }
  sleep 1
done
t2=$(ms_now)
wait "$C_PID" || true
cat "$WORK/C.line"
sed -n '1~30p' "$WORK/progress.txt" | sed 's/^/progress /'
tail -1 "$WORK/progress.txt" | sed 's/^/progress /'
last=$(q "SELECT round(extract(epoch FROM max(settled_at) - (SELECT created_at FROM event_cancellation WHERE event_id = '$A'))::numeric, 1) FROM refund WHERE event_id = '$A' AND account_id = 'boxoffice:cancellation'")
n=$(q "SELECT count(*) FROM refund WHERE event_id = '$A' AND account_id = 'boxoffice:cancellation' AND status = 'SUCCEEDED'")
read -r rec_c set_c at_c < "$WORK/during-c.txt" || true
echo "cancellation: $n refunds succeeded, last refund settled ${last} s after the cancellation ($(python3 -c "print(round($last/60, 1))") min): $(python3 -c "print(round($n/$last, 1))") refunds/s overall; until C's last ticket: ${rec_c:-?} recorded, ${set_c:-?} settled in $(( (${at_c:-$t0} - t0) / 1000 )) s; finished after $(( (t2 - t0) / 1000 )) s"
[ -f "$WORK/poll-errors.txt" ] && { echo "polls of the cancellation not answered 200: $(wc -l < "$WORK/poll-errors.txt")"; sort "$WORK/poll-errors.txt" | uniq -c | sort -rn | head -3; }
kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
"$BOXOFFICE" check --database-url "$DB" > "$WORK/check.txt" || true
tail -1 "$WORK/check.txt" | sed 's/^/check: /'
