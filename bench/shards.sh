#!/usr/bin/env bash
# Issue 17, item 6: two events on one shard against two events on two shards. For each shard
# count, `boxoffice cluster up --nodes 2 --shards S` (each shard a primary with a synchronous
# standby), then two closed-loop holds loads at once through HAProxy (128 clients each, 1-6
# seats, hot-skewed, 1 s TTL), each on its own event: with one shard both events are on it,
# with two the directory places them one on each. Reports each load's decided/s and p99 and
# their sum, and where the events landed. A benchmark, not a test: it reports and asserts
# nothing. Everything shares this machine's cores, the shards' primaries and standbys too.
#
# Usage: bash bench/shards.sh [duration_s] [runs]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
DUR="${1:-10}"; RUNS="${2:-3}"
cargo build --release -q -p boxoffice-cli --manifest-path "$REPO/Cargo.toml"
BOXOFFICE="$REPO/target/release/boxoffice"
export BOXOFFICE_JWT_SECRET="shards-bench-secret-0123456789abcdef"
WORK=$(mktemp -d); chmod 755 "$WORK"   # PostgreSQL runs as postgres
trap '"$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), duration ${DUR}s, runs $RUNS"
for run in $(seq 1 "$RUNS"); do
  for shards in 1 2; do
    rm -rf "$WORK/c"
    out=$("$BOXOFFICE" cluster up --dir "$WORK/c" --nodes 2 --shards "$shards")
    balancer=$(sed -n 's/^balancer //p' <<<"$out")
    home=$(sed -n 's/^database-url //p' <<<"$out")
    for n in 1 2; do
      "$BOXOFFICE" load holds --base-url "$balancer" --clients 128 --duration-s "$DUR" \
        >"$WORK/load-$n.out" 2>"$WORK/load-$n.err" &
    done
    wait
    total=0
    for n in 1 2; do
      line=$(cat "$WORK/load-$n.out")
      [ -n "$line" ] || line="failed: $(grep -m1 -i error "$WORK/load-$n.err")"
      echo "run $run shards=$shards event $n $line"
      d=$(sed -n 's/.*decided\/s=\([0-9.]*\).*/\1/p' <<<"$line"); total=$(python3 -c "print($total + ${d:-0})")
    done
    echo "run $run shards=$shards both events decided/s=$total placement: $("$BOXOFFICE" shard list --database-url "$home" | tr '\n' ';')"
    "$BOXOFFICE" cluster down --dir "$WORK/c" >/dev/null
  done
done
