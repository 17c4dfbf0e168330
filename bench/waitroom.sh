#!/usr/bin/env bash
# Waiting-room status polls through HTTP with N accounts queued in memory, next to a plain
# axum hello-world measured with the same wrk settings in the same run (a benchmark, not a
# test: it reports numbers and asserts nothing).
#
# One `boxoffice serve` on SQLite with the in-process (journaled) waiting room; `boxoffice
# load queue` creates an event, pauses its queue (so every account stays WAITING: the hot
# path) and joins the accounts; wrk then polls GET /v1/events/{id}/queue/status, rotating
# over a sample of the accounts' (bearer token, queue ticket) pairs. Per run: wrk against
# `boxoffice hello` (static request), against hello with the poll script's rotating headers
# (the load tool's own Lua cost), and against the status endpoint. The server's VmRSS before
# and after the joins gives the memory of the queued accounts.
#
# Usage: bash bench/waitroom.sh [duration_s] [runs]
#   BOXOFFICE_BENCH_ACCOUNTS   queued accounts (default 2000000)
#   BOXOFFICE_BENCH_CLIENTS    concurrent joining clients (default 64)
#   BOXOFFICE_BENCH_SAMPLE     accounts the poll script rotates over (default 10000)
#   WRK_THREADS, WRK_CONNECTIONS   (default 2, 256)
#   BOXOFFICE_BENCH_PORT, BOXOFFICE_BENCH_HELLO_PORT   fixed ports (default 0: any free one)
#   BOXOFFICE_BENCH_SCRAPE_S   scrape /metrics every this many seconds, as Prometheus would
#                              (default 1; 0: never). The recorder keeps every histogram
#                              sample until a scrape drains it, so without scrapes the
#                              server's memory grows with each request and the memory figure
#                              of the queued accounts would include their join requests.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-20}"; RUNS="${2:-3}"
ACCOUNTS="${BOXOFFICE_BENCH_ACCOUNTS:-2000000}"
CLIENTS="${BOXOFFICE_BENCH_CLIENTS:-64}"
SAMPLE="${BOXOFFICE_BENCH_SAMPLE:-10000}"
THREADS="${WRK_THREADS:-2}"; CONNS="${WRK_CONNECTIONS:-256}"
PORT="${BOXOFFICE_BENCH_PORT:-0}"; HELLO_PORT="${BOXOFFICE_BENCH_HELLO_PORT:-0}"
SCRAPE_S="${BOXOFFICE_BENCH_SCRAPE_S:-1}"
WORK="$(mktemp -d /tmp/boxoffice-waitroom-bench.XXXXXX)"
SECRET="bench-secret-0123456789abcdef"
SERVER_PID=""; HELLO_PID=""; SCRAPER_PID=""
cleanup() {
  [ -n "$SCRAPER_PID" ] && kill "$SCRAPER_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  [ -n "$HELLO_PID" ] && kill "$HELLO_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v wrk >/dev/null; then
  apt-get install -y -q wrk >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }
fi
cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"

# Waits for "listening on URL" in $1 (process $2); prints the URL.
listening_url() {
  for _ in $(seq 1 300); do
    grep -q 'listening on' "$1" 2>/dev/null && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  sed -n 's/^listening on \(.*\)$/\1/p' "$1" | head -1
}
rss_kb() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }
load_avg() { cut -d' ' -f1-3 /proc/loadavg; }

# The wrk scripts. done() prints one RESULT line; poll.lua rotates over the sample file
# (argument 1) and counts every answer that is not 200.
cat > "$WORK/report.lua" <<'LUA'
local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
  thread:set("id", #threads)
end
function done(summary, latency, requests)
  local non200 = 0
  local counted = false
  for _, t in ipairs(threads) do
    local n = t:get("non200")
    if n then non200 = non200 + n; counted = true end
  end
  -- Without a response() hook wrk only counts statuses above 399.
  if not counted then non200 = summary.errors.status end
  local e = summary.errors
  io.write(string.format(
    "RESULT req_s=%.0f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f requests=%d non200=%d socket_errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, summary.requests, non200,
    e.connect + e.read + e.write + e.timeout))
end
LUA
cp "$WORK/report.lua" "$WORK/static.lua"
cat "$WORK/report.lua" - > "$WORK/poll.lua" <<'LUA'
function init(args)
  local reqs = {}
  for line in io.lines(args[1]) do
    local token, ticket = line:match("^(%S+) (%S+)$")
    if token then
      reqs[#reqs + 1] = wrk.format("GET", wrk.path,
        { ["Authorization"] = "Bearer " .. token, ["Queue-Ticket"] = ticket })
    end
  end
  if #reqs == 0 then error("no (token, ticket) pairs in " .. tostring(args[1])) end
  reqs_, n_, non200 = reqs, #reqs, 0
  i_ = ((id - 1) * 104729) % n_
end
function request()
  i_ = i_ % n_ + 1
  return reqs_[i_]
end
function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
    if non200 <= 3 then io.stderr:write("non-200: " .. status .. " " .. body .. "\n") end
  end
end
LUA

# CPU seconds: the machine's busy and total time (all cores), one process's, this shell's
# waited children's. They tell how much of the machine something else used during a run.
TCK=$(getconf CLK_TCK)
machine_cpu() { awk -v t="$TCK" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/t, ($2+$3+$4+$5+$6+$7+$8+$9)/t}' /proc/stat; }
process_cpu() { awk -v t="$TCK" '{print ($14+$15)/t}' "/proc/$1/stat"; }
# (`times` must run in the shell that waited for wrk, not in a $(...) subshell of it.)
children_cpu() { awk 'NR==2{split($1,u,"m"); split($2,s,"m"); print u[1]*60+u[2]+s[1]*60+s[2]}' "$1"; }

# wrk NAME URL SCRIPT [args]: runs it, keeps the output, prints the RESULT line's fields and
# the CPU (in cores) the server, the hello-world, wrk and everything else used meanwhile.
bench() {
  local name="$1" url="$2" script="$3"; shift 3
  local m0 m1 s0 s1 h0 h1 w0 w1
  m0=$(machine_cpu); s0=$(process_cpu "$SERVER_PID"); h0=$(process_cpu "$HELLO_PID"); times > "$WORK/times"; w0=$(children_cpu "$WORK/times")
  wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --timeout 10s --latency -s "$script" "$url" -- "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" || { cat "$WORK/$name.err" >&2; return 1; }
  times > "$WORK/times"; w1=$(children_cpu "$WORK/times"); h1=$(process_cpu "$HELLO_PID"); s1=$(process_cpu "$SERVER_PID"); m1=$(machine_cpu)
  echo "$(grep -m1 '^RESULT' "$WORK/$name.out" | sed 's/^RESULT //') $(awk \
    -v m0="$m0" -v m1="$m1" -v s="$s0 $s1" -v h="$h0 $h1" -v w="$w0 $w1" -v dur="$DUR" 'BEGIN {
      split(m0, a, " "); split(m1, b, " "); split(s, sv, " "); split(h, hv, " "); split(w, wv, " ")
      busy = b[1] - a[1]; wall = (b[2] - a[2]) / dur  # cores
      server = sv[2] - sv[1]; hello = hv[2] - hv[1]; wrk = wv[2] - wv[1]
      other = busy - server - hello - wrk; if (other < 0) other = 0
      printf "cpu_server=%.2f cpu_hello=%.2f cpu_wrk=%.2f cpu_other=%.2f cores=%.1f", server / dur, hello / dur, wrk / dur, other / dur, wall
    }')"
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load: $(load_avg)"
echo "# wrk -t$THREADS -c$CONNS -d${DUR}s --latency; $ACCOUNTS accounts queued, polls rotate over $SAMPLE of them; /metrics scraped every ${SCRAPE_S}s (0: never)"

BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn \
  DATABASE_URL="sqlite://$WORK/bench.db" BOXOFFICE_WAITROOM_STATE="$WORK/waitroom" \
  BOXOFFICE_TICKET_KEY="$WORK/ticket.pem" \
  "$BOXOFFICE" serve --listen "127.0.0.1:$PORT" > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER_PID=$!
URL=$(listening_url "$WORK/serve.out" "$SERVER_PID")
[ -n "$URL" ] || { cat "$WORK/serve.err"; exit 1; }
"$BOXOFFICE" hello --listen "127.0.0.1:$HELLO_PORT" > "$WORK/hello.out" 2> "$WORK/hello.err" &
HELLO_PID=$!
HELLO_URL=$(listening_url "$WORK/hello.out" "$HELLO_PID")
[ -n "$HELLO_URL" ] || { cat "$WORK/hello.err"; exit 1; }

if [ "$SCRAPE_S" != 0 ]; then
  while sleep "$SCRAPE_S"; do curl -s -o /dev/null "$URL/metrics" || true; done &
  SCRAPER_PID=$!
fi
sleep 1
RSS0=$(rss_kb "$SERVER_PID")
BOXOFFICE_JWT_SECRET=$SECRET "$BOXOFFICE" load queue --base-url "$URL" --accounts "$ACCOUNTS" \
  --clients "$CLIENTS" --sample "$SAMPLE" --sample-out "$WORK/sample.txt" | tee "$WORK/load.out"
EVENT=$(sed -n 's/^event \(.*\)$/\1/p' "$WORK/load.out")
[ -n "$EVENT" ] || { echo "no event id from boxoffice load queue" >&2; exit 1; }
sleep 2 # the journal writer drains
RSS1=$(rss_kb "$SERVER_PID")
ADMIN=$(BOXOFFICE_JWT_SECRET=$SECRET "$BOXOFFICE" token --account bench-admin --admin)
curl -sf -H "Authorization: Bearer $ADMIN" "$URL/v1/admin/events/$EVENT/queue" \
  | jq -c '{joined, waiting, serving, admitted, paused, stateBackend}' | sed 's/^/# queue: /'

POLL_URL="$URL/v1/events/$EVENT/queue/status"
ROWS=()
for run in $(seq 1 "$RUNS"); do
  load=$(load_avg)
  h=$(bench "hello-$run" "$HELLO_URL/" "$WORK/static.lua")
  hl=$(bench "hellolua-$run" "$HELLO_URL/" "$WORK/poll.lua" "$WORK/sample.txt")
  p=$(bench "poll-$run" "$POLL_URL" "$WORK/poll.lua" "$WORK/sample.txt")
  echo "run $run load $load hello: $h"
  echo "run $run load $load hello+lua: $hl"
  echo "run $run load $load poll: $p"
  grep -h '^non-200' "$WORK/poll-$run.err" 2>/dev/null | head -3 | sed "s/^/run $run /" || true
  ROWS+=("$run $(field req_s "$h") $(field p99_ms "$h") $(field req_s "$hl") $(field p99_ms "$hl") $(field req_s "$p") $(field p99_ms "$p") $(field non200 "$p") $(field socket_errors "$p") $(field cpu_other "$h") $(field cpu_other "$p")")
done
RSS2=$(rss_kb "$SERVER_PID")

echo
printf '%s\n' "${ROWS[@]}" | awk -v accounts="$ACCOUNTS" -v rss0="$RSS0" -v rss1="$RSS1" -v rss2="$RSS2" '
  function median(col,   n, i, j, t, v) {
    n = 0; for (i = 1; i <= NR; i++) v[++n] = cell[i, col] + 0
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  { for (c = 1; c <= 11; c++) cell[NR, c] = $c; cell[NR, 12] = $6 / $2 }
  END {
    fmt = "%-6s %11s %8s %11s %8s %11s %8s %7s %7s %6s %6s %6s\n"
    printf fmt, "run", "hello req/s", "p99 ms", "hello+lua", "p99 ms", "poll req/s", "p99 ms", "non200", "sockerr", "ratio", "other", "other"
    printf fmt, "", "", "", "", "", "", "", "", "", "", "hello", "poll"
    for (i = 1; i <= NR; i++)
      printf fmt, cell[i, 1], cell[i, 2], cell[i, 3], cell[i, 4], cell[i, 5], cell[i, 6], cell[i, 7], cell[i, 8], cell[i, 9], sprintf("%.2f", cell[i, 12]), cell[i, 10], cell[i, 11]
    printf fmt, "median", median(2), median(3), median(4), median(5), median(6), median(7), median(8), median(9), sprintf("%.2f", median(12)), median(10), median(11)
    print "(other: cores busy with anything but the server, the hello-world and wrk during the wrk run)"
    printf "\nserver VmRSS: %.1f MiB before joins, %.1f MiB after %d joins, %.1f MiB after the polls\n", rss0 / 1024, rss1 / 1024, accounts, rss2 / 1024
    printf "queued accounts: %.1f MiB, %.0f bytes per account\n", (rss1 - rss0) / 1024, (rss1 - rss0) * 1024 / accounts
  }'
echo "journal on disk: $(du -sh "$WORK/waitroom" | cut -f1)"

# Restart: SIGKILL the server and start it on the same journal; the time to "listening"
# is migrations plus the journal replay. The middle sampled account's answer must not change.
read -r TOKEN TICKET <<<"$(sed -n "$(( ($(wc -l < "$WORK/sample.txt") + 1) / 2 ))p" "$WORK/sample.txt")"
poll_once() { curl -s -H "Authorization: Bearer $TOKEN" -H "Queue-Ticket: $TICKET" "$1/v1/events/$EVENT/queue/status"; }
BEFORE=$(poll_once "$URL")
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
STARTED=$(date +%s.%N)
BOXOFFICE_JWT_SECRET=$SECRET RUST_LOG=warn \
  DATABASE_URL="sqlite://$WORK/bench.db" BOXOFFICE_WAITROOM_STATE="$WORK/waitroom" \
  BOXOFFICE_TICKET_KEY="$WORK/ticket.pem" \
  "$BOXOFFICE" serve --listen "127.0.0.1:$PORT" > "$WORK/serve2.out" 2> "$WORK/serve2.err" &
SERVER_PID=$!
for _ in $(seq 1 6000); do
  grep -q 'listening on' "$WORK/serve2.out" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
URL2=$(sed -n 's/^listening on \(.*\)$/\1/p' "$WORK/serve2.out" | head -1)
[ -n "$URL2" ] || { cat "$WORK/serve2.err"; exit 1; }
READY=$(date +%s.%N)
AFTER=$(poll_once "$URL2")
echo "restart after SIGKILL: listening again in $(awk -v a="$STARTED" -v b="$READY" 'BEGIN{printf "%.1f", b - a}') s with $ACCOUNTS accounts replayed (VmRSS $(( $(rss_kb "$SERVER_PID") / 1024 )) MiB)"
echo "  one sampled account before: $BEFORE"
echo "  after:                      $AFTER"
echo "# goal: poll >= 100000 req/s, p99 < 10 ms, ratio >= 0.6; $(date -u +%FT%TZ) load: $(load_avg)"
