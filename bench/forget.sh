#!/usr/bin/env bash
# A node forgets (issue 38, item 3): the memory of one `boxoffice serve` node after it served
# many small events one after another, with the idle writers' unload on (a short idle time)
# and off. Each event is a trip of 40 seats (one section, 4 rows of 10); each gets 3 holds
# from 3 fans, then their 3 releases, so that nothing of it stays HELD. After the last event
# and a pause longer than the idle time, the node's VmRSS and VmHWM (/proc/PID/status) and
# its writers running (/metrics) are read. A benchmark, not a test: it prints numbers.
#
# Usage: bash bench/forget.sh [events] [runs]
#   BOXOFFICE_BENCH_PORT   private PostgreSQL port (default 25443)
#   FORGET_CLIENTS         events served at once (default 4: one after another per client)
#   FORGET_IDLE_S          --writer-idle-unload-s of the "on" runs (default 1)
#   BOXOFFICE_BIN          a boxoffice binary to run (default: build the release one here)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
EVENTS="${1:-10000}"; RUNS="${2:-3}"
PORT="${BOXOFFICE_BENCH_PORT:-25443}"
CLIENTS="${FORGET_CLIENTS:-4}"
IDLE_S="${FORGET_IDLE_S:-1}"
BIN=/usr/lib/postgresql/15/bin
WORK="$(mktemp -d /tmp/boxoffice-forget.XXXXXX)"
SECRET="bench-secret-0123456789abcdef"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

chown postgres "$WORK" 2>/dev/null || true
as_pg $BIN/initdb -D "$WORK/data" -A trust -U postgres >/dev/null
cat >> "$WORK/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$WORK'
max_connections = 200
shared_buffers = 512MB
synchronous_commit = on
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

if [ -z "${BOXOFFICE_BIN:-}" ]; then
  cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
fi
BOXOFFICE="${BOXOFFICE_BIN:-$REPO/target/release/boxoffice}"
ADMIN=$(BOXOFFICE_JWT_SECRET=$SECRET "$BOXOFFICE" token --account ops --admin --ttl 7d)
FANS=$(for n in 1 2 3; do BOXOFFICE_JWT_SECRET=$SECRET "$BOXOFFICE" token --account "fan$n" --ttl 7d; done | paste -sd,)

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $EVENTS events of 40 seats, 3 holds and 3 releases each, $CLIENTS at once"
for run in $(seq 1 "$RUNS"); do
  for mode in on off; do
    idle=0; [ "$mode" = on ] && idle=$IDLE_S
    $PSQL -c "DROP DATABASE IF EXISTS boxoffice_forget" postgres
    BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn "$BOXOFFICE" serve \
      --database-url "postgres://postgres@127.0.0.1:$PORT/boxoffice_forget" --listen 127.0.0.1:0 \
      --ticket-key "$WORK/ticket-key.pem" --waitroom-state "$WORK/waitroom-$run-$mode" \
      --limit all=off --writer-idle-unload-s "$idle" \
      > "$WORK/serve.out" 2> "$WORK/serve.err" &
    SERVER_PID=$!
    for _ in $(seq 1 100); do grep -q 'listening on' "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
    URL=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/serve.out" | head -1)
    [ -n "$URL" ] || { cat "$WORK/serve.err"; exit 1; }
    python3 - "$URL" "$EVENTS" "$CLIENTS" "$ADMIN" "$FANS" "$SERVER_PID" "$idle" "$run" "$mode" <<'PY'
import http.client, json, sys, threading, time, uuid, urllib.parse
url, events, clients, admin, fans, pid, idle, run, mode = sys.argv[1:]
events, clients, idle = int(events), int(clients), int(idle)
fans = fans.split(",")
host = urllib.parse.urlparse(url)

def status_kb(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

def metric(conn, name):
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0

failures = []
def client(first):
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
    def call(method, path, token, body=None):
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4()),
                   "Content-Type": "application/json"}
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        return answer.status, data
    for n in range(first, events, clients):
        status, data = call("POST", "/v1/admin/events", admin, {
            "name": f"Trip {n}", "startsAt": "2027-06-01T08:00:00Z", "currency": "EUR",
            "sections": [{"name": "A", "rows": 4, "seatsPerRow": 10, "priceMinor": 2500}]})
        if status != 201:
            failures.append(("event", status, data[:200])); continue
        event_id = json.loads(data)["eventId"]
        holds = []
        for i, token in enumerate(fans):
            status, data = call("POST", f"/v1/events/{event_id}/holds", token,
                                {"seatIds": [f"A-1-{i + 1}"]})
            if status != 201:
                failures.append(("hold", status, data[:200])); continue
            holds.append((token, json.loads(data)["holdId"]))
        for token, hold_id in holds:
            status, data = call("DELETE", f"/v1/holds/{hold_id}", token)
            if status != 200:
                failures.append(("release", status, data[:200]))

started = time.time()
threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
served_s = time.time() - started
# Past the idle time (and a renewal), the unloaded writers are gone.
time.sleep(idle + 3)
conn = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
writers = metric(conn, "boxoffice_writers_running")
leases = metric(conn, "boxoffice_cluster_leases_held")
rss, hwm = status_kb("VmRSS"), status_kb("VmHWM")
print(f"run {run} unload={mode} idle_s={idle} events={events} served_s={served_s:.0f} "
      f"failures={len(failures)} writers_running={writers:.0f} leases_held={leases:.0f} "
      f"VmRSS_MiB={rss / 1024:.0f} VmHWM_MiB={hwm / 1024:.0f}", flush=True)
for failure in failures[:5]:
    print("  failure:", failure, flush=True)
PY
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  done
done
