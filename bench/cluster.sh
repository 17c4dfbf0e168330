#!/usr/bin/env bash
# Issue 17, item 6 (first figures): the cost of the balancer and of forwarding, on one
# machine. For each node count, `boxoffice cluster up` (a primary with a synchronous standby,
# Redis, the nodes, HAProxy), then the closed-loop holds case (256 clients, 1-6 seats,
# hot-skewed, 1 s TTL): once straight to node-1 and once through HAProxy, which spreads the
# holds round robin (a node that does not own the event forwards them to the one that
# does). Then `cluster down`. A benchmark, not a test: it reports and asserts nothing.
#
# Usage: bash bench/cluster.sh [duration_s] [runs] [node counts, default "1 3"]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-10}"; RUNS="${2:-3}"; NODES="${3:-1 3}"
cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"
export BOXOFFICE_JWT_SECRET="cluster-bench-secret-0123456789abcdef"
WORK=$(mktemp -d); chmod 755 "$WORK"   # PostgreSQL runs as postgres
trap '"$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), duration ${DUR}s, runs $RUNS"
for run in $(seq 1 "$RUNS"); do
  for n in $NODES; do
    rm -rf "$WORK/c"
    out=$("$BOXOFFICE" cluster up --dir "$WORK/c" --nodes "$n")
    balancer=$(sed -n 's/^balancer //p' <<<"$out")
    node1=$(python3 -c "import json,sys; print('http://127.0.0.1:%d' % json.load(open(sys.argv[1]))['nodes'][0]['port'])" "$WORK/c/cluster.json")
    for target in "direct-to-node-1 $node1" "via-haproxy $balancer"; do
      set -- $target
      "$BOXOFFICE" load holds --base-url "$2" --clients 256 --duration-s "$DUR" 2>"$WORK/load.err" \
        | sed "s/^/run $run nodes=$n $1 /" \
        || echo "run $run nodes=$n $1 failed: $(grep -m1 -i error "$WORK/load.err")"
    done
    "$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null
  done
done
