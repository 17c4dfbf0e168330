#!/usr/bin/env bash
# The chaos run must catch a double sale. Builds boxoffice with the planted fault
# `planted-fault-skip-hold-condition` (every seat looks free to the hold decision: a held or
# sold seat is handed out again) into its own target directory, runs the same chaos run as
# crates/cli/tests/chaos.rs, and expects boxoffice check to find violations.
# Exit 0 when the checker caught the fault (a VIOLATION line), 1 when the broken build
# passed, 2 when the run failed for another reason (not evidence either way).
#
# Usage: bash bench/planted-fault.sh
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="$REPO/target/planted-fault"
WORK="$(mktemp -d /tmp/boxoffice-planted.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
cargo build -q -p boxoffice-cli --features planted-fault-skip-hold-condition \
  --manifest-path "$REPO/Cargo.toml" --target-dir "$TARGET" || exit 2
RUST_LOG=warn "$TARGET/debug/boxoffice" load --scenario onsale --scale 0.01 --chaos \
  --accounts 300 --hold-ttl-s 10 --report "$WORK/report.json" --html-report "$WORK/report.html" \
  > "$WORK/out.txt" 2> "$WORK/err.txt"
rc=$?
grep -E '^VIOLATION|^checked|^chaos|check (passed|FAILED)' "$WORK/out.txt" | head -20
echo "violations: $(grep -c '^VIOLATION' "$WORK/out.txt")"
tail -3 "$WORK/err.txt"
# Caught means the checker named a violation: a run that failed for another reason (initdb,
# a port, a crash) proves nothing about the checker.
violations=$(grep -c '^VIOLATION' "$WORK/out.txt")
if [ "$rc" -ne 0 ] && [ "$violations" -gt 0 ]; then
  echo "planted fault caught: boxoffice check found $violations violations (exit $rc)"
  exit 0
fi
if [ "$rc" -ne 0 ]; then
  echo "inconclusive: the chaos run failed (exit $rc) without a violation line from the checker" >&2
  exit 2
fi
echo "planted fault NOT caught: the chaos run passed with a build that double-sells" >&2
exit 1
