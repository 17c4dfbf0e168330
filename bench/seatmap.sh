#!/usr/bin/env bash
# The seat map (issue 5): 50,000-seat snapshot requests per second and their latency, and how
# long a change takes to reach 1,000 open Server-Sent-Events streams; each next to a baseline
# measured with the same load client in the same run (a benchmark, not a test: it reports
# numbers and asserts nothing).
#
# Servers: `boxoffice serve --dev-auth` on PostgreSQL (database $DB, dropped before and after)
# and, unless BOXOFFICE_BENCH_SQLITE=0, a second one on SQLite (a temporary file). Baselines:
# `boxoffice hello` (plain axum hello-world) and `boxoffice load seatmap-mirror`, a bare tokio
# HTTP/1.1 server that serves a byte-for-byte copy of the same snapshot from memory (identity
# and gzip, same ETag) and turns each `POST …/holds` into one stream message broadcast to
# every open stream before answering 201: no store, no framework, no application. A second
# mirror sets TCP_NODELAY on its sockets (`boxoffice serve`, through axum::serve, does not).
#
# Per run, every case below runs once, in this order (the load client is always `boxoffice
# load seatmap` or `boxoffice load sse`, one tokio runtime on the same 2 cores):
#   hello           closed loop, C clients, GET / of the hello-world
#   {mirror,pg}-identity   closed loop, C clients, the 2 MB snapshot uncompressed
#   {mirror,pg,sqlite}-gzip   closed loop, C clients, Accept-Encoding: gzip
#   {mirror,pg}-gzip-open  open loop at R req/s (at most 256 in flight), gzip: p99 at the goal rate
#   pg-gzip-changing   closed loop, gzip, while 20 seats/s are held (the map re-renders)
#   {mirror,pg}-etag       closed loop, If-None-Match with the last ETag (304s)
#   sse-{mirror,mirror-nodelay,pg,sqlite}   N streams, H holds at 20/s, delay until each
#                   stream delivered each hold
#
# Usage: bash bench/seatmap.sh [duration_s] [runs]
#   BOXOFFICE_BENCH_CLIENTS      closed-loop clients (default 64)
#   BOXOFFICE_BENCH_RATE         open-loop snapshot requests/s (default 2000, the goal)
#   BOXOFFICE_BENCH_SSE_CLIENTS  streams (default 1000); BOXOFFICE_BENCH_SSE_CHANGES holds
#                                (default 200); BOXOFFICE_BENCH_SSE_RATE holds/s (default 20)
#   BOXOFFICE_BENCH_PG           PostgreSQL server URL (default postgres://postgres@127.0.0.1:5432)
#   BOXOFFICE_BENCH_SQLITE       1 (default): also a SQLite-backed server; 0: not
#   BOXOFFICE_BENCH_PORT_BASE    first port tried (default 18700; ports below 32768)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-10}"; RUNS="${2:-3}"
CLIENTS="${BOXOFFICE_BENCH_CLIENTS:-64}"
RATE="${BOXOFFICE_BENCH_RATE:-2000}"
SSE_CLIENTS="${BOXOFFICE_BENCH_SSE_CLIENTS:-1000}"
SSE_CHANGES="${BOXOFFICE_BENCH_SSE_CHANGES:-200}"
SSE_RATE="${BOXOFFICE_BENCH_SSE_RATE:-20}"
PG="${BOXOFFICE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}"
DB=boxoffice_bench_seatmap
WITH_SQLITE="${BOXOFFICE_BENCH_SQLITE:-1}"
PORT_BASE="${BOXOFFICE_BENCH_PORT_BASE:-18700}"
# Every token is signed with the development secret (`serve --dev-auth`, the load tool's default).
unset BOXOFFICE_JWT_SECRET DATABASE_URL BOXOFFICE_LISTEN
WORK="$(mktemp -d /tmp/boxoffice-seatmap-bench.XXXXXX)"
PIDS=()
drop_db() { psql "$PG/postgres" -qtA -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  drop_db
  rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
# A private copy: a rebuild in the tree during the run must not change what is measured.
cp "$REPO/target/release/boxoffice" "$WORK/boxoffice"
BOXOFFICE="$WORK/boxoffice"
drop_db

NEXT_PORT="$PORT_BASE"
free_port() {
  local p="$NEXT_PORT"
  while [ -n "$(ss -Htln "sport = :$p")" ]; do p=$((p + 1)); done
  [ "$p" -lt 32768 ] || { echo "no free port below 32768" >&2; exit 1; }
  NEXT_PORT=$((p + 1))
  echo "$p"
}
# Waits for "listening on URL" in $1 (process $2); prints the URL.
listening_url() {
  for _ in $(seq 1 600); do
    grep -q 'listening on' "$1" 2>/dev/null && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  sed -n 's/^listening on \(.*\)$/\1/p' "$1" | head -1
}
# start NAME CMD...: starts a process in the background; sets URL and PID.
start() {
  local name="$1"; shift
  "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PID=$!
  PIDS+=("$PID")
  URL=$(listening_url "$WORK/$name.out" "$PID")
  [ -n "$URL" ] || { echo "$name did not start:" >&2; cat "$WORK/$name.err" >&2; exit 1; }
}
serve() { # NAME DATABASE_URL
  local port; port=$(free_port)
  mkdir -p "$WORK/$1"
  start "$1" env RUST_LOG=warn BOXOFFICE_TICKET_KEY="$WORK/$1/ticket.pem" \
    BOXOFFICE_WAITROOM_STATE="$WORK/$1/waitroom" \
    "$BOXOFFICE" serve --dev-auth --database-url "$2" --listen "127.0.0.1:$port"
}
# Prints the event id a load run printed ("event ID").
event_of() { sed -n 's/^event \(.*\)$/\1/p' "$1" | head -1; }

TCK=$(getconf CLK_TCK)
machine_cpu() { awk -v t="$TCK" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/t}' /proc/stat; }
process_cpu() { awk -v t="$TCK" '{print ($14+$15)/t}' "/proc/$1/stat"; }
# (`times` must run in the shell that waited for the load client, not in a $(...) subshell.)
children_cpu() { awk 'NR==2{split($1,u,"m"); split($2,s,"m"); print u[1]*60+u[2]+s[1]*60+s[2]}' "$1"; }
load_avg() { cut -d' ' -f1-3 /proc/loadavg; }

# measure CASE RUN TARGET_PID CMD...: runs one load client, keeps its result line with the
# CPU (in cores) the measured server, the load client and everything else used meanwhile.
measure() {
  local name="$1" run="$2" pid="$3"; shift 3
  local m0 m1 s0 s1 w0 w1 t0 t1 rc=0 line
  t0=$(date +%s.%N); m0=$(machine_cpu); s0=$(process_cpu "$pid"); times > "$WORK/times"; w0=$(children_cpu "$WORK/times")
  "$@" > "$WORK/$name-$run.out" 2> "$WORK/$name-$run.err" || rc=$?
  times > "$WORK/times"; w1=$(children_cpu "$WORK/times"); s1=$(process_cpu "$pid"); m1=$(machine_cpu); t1=$(date +%s.%N)
  line=$(grep -m1 -E '^(seatmap|sse) ' "$WORK/$name-$run.out" | cut -d' ' -f2- || true)
  if [ -z "$line" ]; then
    echo "run $run $name: no result (exit $rc): $(tail -2 "$WORK/$name-$run.err" | tr '\n' ' ')" >&2
    line="failed=1"
  fi
  line="$line $(awk -v m="$m0 $m1" -v s="$s0 $s1" -v w="$w0 $w1" -v t="$t0 $t1" 'BEGIN {
      split(m, a, " "); split(s, b, " "); split(w, c, " "); split(t, d, " ")
      wall = d[2] - d[1]; server = b[2] - b[1]; client = c[2] - c[1]
      other = (a[2] - a[1]) - server - client; if (other < 0) other = 0
      printf "cpu_server=%.2f cpu_client=%.2f cpu_other=%.2f exit='"$rc"'", server / wall, client / wall, other / wall
    }')"
  echo "$name $run $line" >> "$WORK/results"
  echo "run $run $name: $line"
}

ulimit -n 20000 2>/dev/null || true
echo "# $(date -u +%FT%TZ) $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r), ulimit -n $(ulimit -n), load: $(load_avg)"
echo "# ${DUR}s per case, $RUNS runs; closed loop $CLIENTS clients; open loop $RATE req/s; sse $SSE_CLIENTS streams, $SSE_CHANGES holds at $SSE_RATE/s"

serve pg "$PG/$DB"; PG_URL=$URL; PG_PID=$PID
start hello "$BOXOFFICE" hello --listen "127.0.0.1:$(free_port)"; HELLO_URL=$URL; HELLO_PID=$PID
# The stadiums: one read (its map stays as created), one changed while read, one for the streams.
"$BOXOFFICE" load seatmap --base-url "$PG_URL" --clients 1 --duration-s 1 > "$WORK/ev.out" 2>&1
EV=$(event_of "$WORK/ev.out")
"$BOXOFFICE" load seatmap --base-url "$PG_URL" --clients 1 --duration-s 1 > "$WORK/ev-chg.out" 2>&1
EV_CHG=$(event_of "$WORK/ev-chg.out")
"$BOXOFFICE" load sse --base-url "$PG_URL" --clients 1 --changes 1 > "$WORK/ev-sse.out" 2>&1
EV_SSE=$(event_of "$WORK/ev-sse.out")
[ -n "$EV" ] && [ -n "$EV_CHG" ] && [ -n "$EV_SSE" ] || { cat "$WORK"/ev*.out >&2; exit 1; }
grep '^seatmap' "$WORK/ev.out" | sed 's/^/# first read: /'
start mirror "$BOXOFFICE" load seatmap-mirror --from "$PG_URL/v1/events/$EV/seatmap" --listen "127.0.0.1:$(free_port)"
MIRROR_URL=$URL; MIRROR_PID=$PID
sed -n 's/^copied/# mirror copied/p' "$WORK/mirror.out"
start mirror-nodelay "$BOXOFFICE" load seatmap-mirror --nodelay --from "$PG_URL/v1/events/$EV/seatmap" --listen "127.0.0.1:$(free_port)"
MIRROR_ND_URL=$URL; MIRROR_ND_PID=$PID
if [ "$WITH_SQLITE" = 1 ]; then
  serve sqlite "sqlite://$WORK/sqlite/bench.db"; SQ_URL=$URL; SQ_PID=$PID
  "$BOXOFFICE" load seatmap --base-url "$SQ_URL" --clients 1 --duration-s 1 > "$WORK/ev-sq.out" 2>&1
  EV_SQ=$(event_of "$WORK/ev-sq.out")
  "$BOXOFFICE" load sse --base-url "$SQ_URL" --clients 1 --changes 1 > "$WORK/ev-sq-sse.out" 2>&1
  EV_SQ_SSE=$(event_of "$WORK/ev-sq-sse.out")
  [ -n "$EV_SQ" ] && [ -n "$EV_SQ_SSE" ] || { cat "$WORK"/ev-sq*.out >&2; exit 1; }
fi
echo "# servers: pg $PG_URL (events $EV, $EV_CHG, $EV_SSE), mirror $MIRROR_URL, mirror-nodelay $MIRROR_ND_URL, hello $HELLO_URL${SQ_URL:+, sqlite $SQ_URL}"

L="$BOXOFFICE load"
SNAP=(--duration-s "$DUR")
SSE=(--clients "$SSE_CLIENTS" --changes "$SSE_CHANGES" --rate "$SSE_RATE")
for run in $(seq 1 "$RUNS"); do
  echo "# run $run, load: $(load_avg)"
  measure hello "$run" "$HELLO_PID" $L seatmap --url "$HELLO_URL/" --clients "$CLIENTS" "${SNAP[@]}"
  measure mirror-identity "$run" "$MIRROR_PID" $L seatmap --base-url "$MIRROR_URL" --event-id "$EV" --clients "$CLIENTS" "${SNAP[@]}"
  measure pg-identity "$run" "$PG_PID" $L seatmap --base-url "$PG_URL" --event-id "$EV" --clients "$CLIENTS" "${SNAP[@]}"
  measure mirror-gzip "$run" "$MIRROR_PID" $L seatmap --base-url "$MIRROR_URL" --event-id "$EV" --gzip --clients "$CLIENTS" "${SNAP[@]}"
  measure pg-gzip "$run" "$PG_PID" $L seatmap --base-url "$PG_URL" --event-id "$EV" --gzip --clients "$CLIENTS" "${SNAP[@]}"
  if [ "$WITH_SQLITE" = 1 ]; then
    measure sqlite-gzip "$run" "$SQ_PID" $L seatmap --base-url "$SQ_URL" --event-id "$EV_SQ" --gzip --clients "$CLIENTS" "${SNAP[@]}"
  fi
  measure mirror-gzip-open "$run" "$MIRROR_PID" $L seatmap --base-url "$MIRROR_URL" --event-id "$EV" --gzip --rate "$RATE" --clients 256 "${SNAP[@]}"
  measure pg-gzip-open "$run" "$PG_PID" $L seatmap --base-url "$PG_URL" --event-id "$EV" --gzip --rate "$RATE" --clients 256 "${SNAP[@]}"
  measure pg-gzip-changing "$run" "$PG_PID" $L seatmap --base-url "$PG_URL" --event-id "$EV_CHG" --gzip --hold-rate 20 --clients "$CLIENTS" "${SNAP[@]}"
  measure mirror-etag "$run" "$MIRROR_PID" $L seatmap --base-url "$MIRROR_URL" --event-id "$EV" --etag --clients "$CLIENTS" "${SNAP[@]}"
  measure pg-etag "$run" "$PG_PID" $L seatmap --base-url "$PG_URL" --event-id "$EV" --etag --clients "$CLIENTS" "${SNAP[@]}"
  measure sse-mirror "$run" "$MIRROR_PID" $L sse --base-url "$MIRROR_URL" --event-id "$EV" "${SSE[@]}"
  measure sse-mirror-nodelay "$run" "$MIRROR_ND_PID" $L sse --base-url "$MIRROR_ND_URL" --event-id "$EV" "${SSE[@]}"
  measure sse-pg "$run" "$PG_PID" $L sse --base-url "$PG_URL" --event-id "$EV_SSE" "${SSE[@]}"
  if [ "$WITH_SQLITE" = 1 ]; then
    measure sse-sqlite "$run" "$SQ_PID" $L sse --base-url "$SQ_URL" --event-id "$EV_SQ_SSE" "${SSE[@]}"
  fi
done
echo "# done $(date -u +%FT%TZ), load: $(load_avg); server VmRSS: pg $(awk '/^VmRSS/{print int($2/1024)}' "/proc/$PG_PID/status") MiB${SQ_PID:+, sqlite $(awk '/^VmRSS/{print int($2/1024)}' "/proc/$SQ_PID/status") MiB}"

echo
awk -v rate="$RATE" '
  function median(name, key,   n, i, j, t, v) {
    n = 0
    for (r = 1; r <= runs[name]; r++) if ((name, r, key) in cell) v[++n] = cell[name, r, key] + 0
    if (n == 0) return "-"
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  # Median over runs of the per-run ratio name.key / base.key.
  function ratio(name, base, key,   n, i, j, t, v) {
    n = 0
    for (r = 1; r <= runs[name]; r++)
      if ((name, r, key) in cell && (base, r, key) in cell && cell[base, r, key] + 0 > 0)
        v[++n] = cell[name, r, key] / cell[base, r, key]
    if (n == 0) return "-"
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return sprintf("%.2f", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
  }
  {
    name = $1; run = $2 + 0; if (run > runs[name] + 0) runs[name] = run
    if (!(name in seen)) { seen[name] = 1; order[++names] = name }
    for (i = 3; i <= NF; i++) { split($i, kv, "="); cell[name, run, kv[1]] = kv[2] }
    bad = cell[name, run, "other"] + cell[name, run, "failed"] + cell[name, run, "holds_failed"] + cell[name, run, "missed"] + cell[name, run, "connect_failures"] + cell[name, run, "hold_errors"]
    if (cell[name, run, "exit"] != 0 || bad > 0) problems[name] = problems[name] " run" run
  }
  END {
    base["pg-identity"] = "mirror-identity"; base["pg-gzip"] = "mirror-gzip"; base["sqlite-gzip"] = "mirror-gzip"
    base["pg-gzip-open"] = "mirror-gzip-open"; base["pg-gzip-changing"] = "mirror-gzip"
    base["pg-etag"] = "mirror-etag"; base["mirror-etag"] = "hello"
    fmt = "%-18s %8s %8s %8s %8s %8s %9s %9s %7s %7s %7s\n"
    print "snapshot (medians of " runs["hello"] " runs; ratio = median of per-run ratios against the baseline named)"
    printf fmt, "case", "req/s", "p50 ms", "p99 ms", "max ms", "MiB/s", "baseline", "req ratio", "cpu srv", "cpu cli", "other"
    for (k = 1; k <= names; k++) {
      n = order[k]; if (n ~ /^sse-/) continue
      b = (n in base) ? base[n] : "-"
      printf fmt, n, median(n, "req_s"), median(n, "p50_ms"), median(n, "p99_ms"), median(n, "max_ms"), median(n, "mib_s"), b, (b == "-" ? "-" : ratio(n, b, "req_s")), median(n, "cpu_server"), median(n, "cpu_client"), median(n, "cpu_other")
    }
    print "(open loop: " rate " req/s offered, latency from when each request was due; p99 ratio pg/mirror: " ratio("pg-gzip-open", "mirror-gzip-open", "p99_ms") ")"
    print "(pg-etag against hello, both tiny answers: " ratio("pg-etag", "hello", "req_s") ")"
    print ""
    fmt = "%-19s %6s %6s %5s %6s %7s %7s %7s %8s %8s %8s %8s %7s %7s\n"
    print "sse: delay from the hold'"'"'s 201 to delivery on each stream (medians of runs; ratio = pg p99 / mirror p99)"
    printf fmt, "case", "missed", "gaps", "reset", "reconn", "p50 ms", "p99 ms", "max ms", "send p99", "first99", "spread99", "hold p50", "cpu srv", "other"
    for (k = 1; k <= names; k++) {
      n = order[k]; if (n !~ /^sse-/) continue
      printf fmt, n, median(n, "missed"), median(n, "gaps"), median(n, "resets"), median(n, "reconnects"), median(n, "p50_ms"), median(n, "p99_ms"), median(n, "max_ms"), median(n, "send_p99_ms"), median(n, "first_p99_ms"), median(n, "spread_p99_ms"), median(n, "hold_p50_ms"), median(n, "cpu_server"), median(n, "cpu_other")
    }
    print "(p99 ratio sse-pg / sse-mirror: " ratio("sse-pg", "sse-mirror", "p99_ms") "; sse-mirror-nodelay / sse-mirror: " ratio("sse-mirror-nodelay", "sse-mirror", "p99_ms") ")"
    print ""
    g1 = median("pg-gzip", "req_s"); g2 = median("pg-gzip-open", "p99_ms"); g3 = median("sse-pg", "p99_ms")
    printf "goal snapshot >= 2000 req/s (gzip, closed loop): %s -> %s\n", g1, (g1 >= 2000 ? "met" : "NOT met")
    printf "goal snapshot p99 < 50 ms at %s req/s (gzip, open loop): %s ms -> %s\n", rate, g2, (g2 < 50 ? "met" : "NOT met")
    printf "goal change propagation p99 < 500 ms to the streams (from the 201): %s ms -> %s\n", g3, (g3 < 500 ? "met" : "NOT met")
    for (n in problems) printf "WARNING %s: errors, failures or missed deliveries in%s (see the run lines)\n", n, problems[n]
  }' "$WORK/results"
