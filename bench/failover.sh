#!/usr/bin/env bash
# Issue 17: the failover timeline. For each run: `boxoffice cluster up` (2 nodes, 2 shards,
# each a primary with a synchronous standby, the failover watcher), open-loop holds through
# HAProxy at RATE/s on an event of the home shard, and after 6 s the home shard's primary
# is SIGKILLed with its backends. Reports the watcher's timeline (detection, fencing of the
# old primary, promotion, commits alone, leases fenced; from cluster.json) and what the
# clients saw (from `load holds-open --timeline`): the first tenth of a second with an answer
# other than 201/409, the first tenth after it with only 201/409 again, and the answers in
# between by status. A benchmark, not a test: it reports and asserts nothing.
#
# Usage: bash bench/failover.sh [runs] [rate]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
RUNS="${1:-3}"; RATE="${2:-200}"
cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"
export BOXOFFICE_JWT_SECRET="failover-bench-secret-0123456789abcdef"
WORK=$(mktemp -d); chmod 755 "$WORK"   # PostgreSQL runs as postgres
trap '"$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), rate ${RATE}/s, runs $RUNS"
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/c"
  out=$("$BOXOFFICE" cluster up --dir "$WORK/c" --nodes 2 --shards 2)
  balancer=$(sed -n 's/^balancer //p' <<<"$out")
  "$BOXOFFICE" load holds-open --base-url "$balancer" --rate "$RATE" --duration-s 20 \
    --hold-ttl-s 1 --timeline >"$WORK/load.out" 2>"$WORK/load.err" &
  load=$!
  sleep 6
  data=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['shards'][0]['primary']['data'])" "$WORK/c/cluster.json")
  pm=$(head -1 "$data/postmaster.pid")
  kill -KILL $(pgrep -P "$pm") "$pm" 2>/dev/null || true
  wait "$load" || true
  python3 - "$run" "$WORK/c/cluster.json" "$WORK/load.out" <<'PY'
import json, re, sys
run, state, out = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3]).read().splitlines()
tl = state["shards"][0].get("failover")
rows = []
for line in out:
    if line.startswith("t="):
        parts = line.split()
        t = float(parts[0][2:])
        counts = {int(k): int(v) for k, v in (p.split("=") for p in parts[1:])}
        rows.append((t, counts))
bad = [t for t, c in rows if any(s not in (201, 409) for s in c)]
summary = out[0] if out else "no load output"
if not bad:
    print(f"run {run} no failed answer seen; failover {json.dumps(tl)}; load {summary}")
    sys.exit(0)
first_bad = bad[0]
after = [t for t, c in rows if t > bad[-1] and all(s in (201, 409) for s in c)]
back = after[0] if after else None
meanwhile = {}
for t, c in rows:
    if first_bad <= t <= (back or 1e9):
        for s, n in c.items():
            meanwhile[s] = meanwhile.get(s, 0) + n
det = (tl or {}).get("detected") or {}
print(f"run {run} clients: first failed answer t={first_bad:.1f}s, answered only 201/409 again from t={back}s "
      f"(outage seen {((back or first_bad) - first_bad):.1f} s), answers meanwhile by status {meanwhile}; "
      f"watcher: first failed check {det.get('firstFailedCheckMsBefore')} ms before the step, "
      f"old primary fenced +{tl.get('oldPrimaryFencedMs')} ms, promoted +{tl.get('promotedMs')} ms, "
      f"commits alone +{tl.get('writableAloneMs')} ms, {tl.get('leasesFenced')} leases fenced +{tl.get('leasesFencedMs')} ms; "
      f"load {summary}")
PY
  "$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null
done
