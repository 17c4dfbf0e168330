#!/usr/bin/env bash
# Runs the crash-point suite (every named point, PostgreSQL and SQLite) N times in a row:
# CI runs it once per backend; this is the longer soak. Prints one line per round and stops
# at the first failure.
# Usage: bash bench/crash-soak.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-10}"
cargo test -q -p boxoffice-cli --test crash --no-run
for round in $(seq 1 "$ROUNDS"); do
  start=$(date +%s)
  cargo test -q -p boxoffice-cli --test crash >/tmp/crash-soak.log 2>&1 || { cat /tmp/crash-soak.log; echo "round $round FAILED"; exit 1; }
  echo "round $round ok ($(( $(date +%s) - start )) s)"
done
