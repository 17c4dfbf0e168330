#!/usr/bin/env bash
# Issue 38: the failover timeline under pg_auto_failover. For each run: `boxoffice cluster up`
# (2 nodes, 2 shards, each a pg_auto_failover formation of a primary and a synchronous
# secondary under one monitor, with the settings of crates/cli/src/autofailover.rs),
# open-loop holds through HAProxy at RATE/s on an event of the home shard for DURATION s,
# and after 8 s the home shard's primary dies with its keeper (its process group SIGKILLed:
# keeper, postmaster and every backend, as when its machine dies). Reports, from the kill:
# when the monitor marked it unhealthy and when the secondary was the primary (`cluster
# status` polled every 200 ms), and what the clients saw (`load holds-open --timeline`):
# the first tenth of a second with an answer other than 201/409, the first tenth after the
# last such one with only 201/409 again, and the answers in between by status. A benchmark,
# not a test: it reports and asserts nothing.
#
# Usage: bash bench/failover.sh [runs] [rate] [duration-s]
#   BOXOFFICE  the boxoffice binary (default: this checkout's release build, built)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
RUNS="${1:-3}"; RATE="${2:-200}"; DURATION="${3:-40}"
if [ -z "${BOXOFFICE:-}" ]; then
  cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
  BOXOFFICE="$REPO/target/release/boxoffice"
fi
export BOXOFFICE_JWT_SECRET="failover-bench-secret-0123456789abcdef"
WORK=$(mktemp -d); chmod 755 "$WORK"   # PostgreSQL runs as postgres
trap '"$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), rate ${RATE}/s, runs $RUNS"
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/c"
  out=$("$BOXOFFICE" cluster up --dir "$WORK/c" --nodes 2 --shards 2)
  balancer=$(sed -n 's/^balancer //p' <<<"$out")
  load_started=$(date +%s.%N)
  "$BOXOFFICE" load holds-open --base-url "$balancer" --rate "$RATE" --duration-s "$DURATION" \
    --hold-ttl-s 1 --timeline >"$WORK/load.out" 2>"$WORK/load.err" &
  load=$!
  sleep 8
  "$BOXOFFICE" cluster status --dir "$WORK/c" >"$WORK/before.json"
  read -r name group < <(python3 - "$WORK/c/cluster.json" "$WORK/before.json" <<'PY'
import json, sys
state, status = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
primary = next(m for m in status[0]["members"] if m["primary"])
member = next(m for m in state["shards"][0]["members"] if m["name"] == primary["name"])
print(member["name"], member["pid"])
PY
  )
  kill -KILL -- "-$group" 2>/dev/null || true
  killed=$(date +%s.%N)
  : >"$WORK/status.log"
  while kill -0 "$load" 2>/dev/null; do
    echo "$(date +%s.%N) $("$BOXOFFICE" cluster status --dir "$WORK/c" | tr -d '\n ')" >>"$WORK/status.log"
    sleep 0.2
  done
  wait "$load" || true
  python3 - "$run" "$name" "$load_started" "$killed" "$WORK/status.log" "$WORK/load.out" <<'PY'
import json, sys
run, name, load_started, killed = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
unhealthy = promoted = None
for line in open(sys.argv[5]):
    at, _, text = line.partition(" ")
    members = json.loads(text)[0]["members"]
    t = float(at) - killed
    if unhealthy is None and any(m["name"] == name and not m["healthy"] for m in members):
        unhealthy = t
    if promoted is None and any(m["name"] != name and m["primary"] for m in members):
        promoted = t
out = open(sys.argv[6]).read().splitlines()
kill_t = killed - load_started
rows = []
for line in out:
    if line.startswith("t="):
        parts = line.split()
        counts = {int(k): int(v) for k, v in (p.split("=") for p in parts[1:])}
        rows.append((float(parts[0][2:]) - kill_t, counts))
bad = [t for t, c in rows if t >= -0.1 and any(s not in (201, 409) for s in c)]
fmt = lambda x: "-" if x is None else f"{x:.1f}"
summary = out[0] if out else "no load output"
if not bad:
    print(f"run {run}: unhealthy +{fmt(unhealthy)} s, promoted +{fmt(promoted)} s; no failed answer seen; load {summary}")
    sys.exit(0)
after = [t for t, c in rows if t > bad[-1] and c and all(s in (201, 409) for s in c)]
back = after[0] if after else None
meanwhile = {}
for t, c in rows:
    if bad[0] <= t <= (back if back is not None else 1e9):
        for s, n in c.items():
            meanwhile[s] = meanwhile.get(s, 0) + n
print(f"run {run} (from the kill): unhealthy +{fmt(unhealthy)} s, promoted +{fmt(promoted)} s; "
      f"clients: first failed answer +{fmt(bad[0])} s, only 201/409 again from +{fmt(back)} s; "
      f"answers in between by status {dict(sorted(meanwhile.items()))}; load {summary}")
PY
  "$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null
done
