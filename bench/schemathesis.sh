#!/usr/bin/env bash
# The served OpenAPI document attacked as an outside client would (issue 18): schemathesis
# with every check and every phase (examples, coverage, fuzzing, stateful), once with a fan
# token and once with an admin token, against `boxoffice demo` on a fresh data folder.
#
#   bash bench/schemathesis.sh [MAX_EXAMPLES] [BOXOFFICE_BIN]
#
# MAX_EXAMPLES (default 30) bounds the examples per operation and phase; .ci/run uses a small
# budget, a longer run takes a larger one. Exit 0 only when both runs find nothing.
# bench/schemathesis_hooks.py excuses the few refusals a JSON Schema cannot state (rules
# between two fields, against the stored event, or against an earlier request's key), each
# named there, and nothing the document could say. SCHEMATHESIS_HOOKS= (empty) runs without
# it, as an outside client would: what it excused is then counted as failures.
set -euo pipefail
cd "$(dirname "$0")/.."

max_examples="${1:-30}"
bin="${2:-target/debug/boxoffice}"
port="${SCHEMATHESIS_PORT:-18098}"
hooks="${SCHEMATHESIS_HOOKS-bench/schemathesis_hooks.py}"
version=4.32.5

if ! command -v st >/dev/null || [ "$(st --version 2>/dev/null | awk '{print $3}')" != "$version" ]; then
  python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
fi

dir="$(mktemp -d)"
export BOXOFFICE_JWT_SECRET=schemathesis-secret-0123456789abcdef
# The abuse limits off: one fan token sends every request, and 429s would leave the logic
# behind them untested (the limits have tests of their own).
export BOXOFFICE_LIMITS=all=off
"$bin" demo --data-dir "$dir/data" --listen "127.0.0.1:$port" >"$dir/demo.log" 2>&1 &
demo_pid=$!
cleanup() {
  kill "$demo_pid" 2>/dev/null || true
  wait "$demo_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  if ! kill -0 "$demo_pid" 2>/dev/null; then
    cat "$dir/demo.log" >&2
    exit 1
  fi
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null

fan=$("$bin" token --account st-fan)
admin=$("$bin" token --account st-admin --admin)
status=0
for who in fan admin; do
  token=$fan
  [ "$who" = admin ] && token=$admin
  echo "== schemathesis as the $who (max examples $max_examples)"
  started=$(date +%s)
  : >"$dir/excused-$who.log"
  hooks_env=()
  [ -n "$hooks" ] && hooks_env=("SCHEMATHESIS_HOOKS=$hooks")
  if ! env -u SCHEMATHESIS_HOOKS "${hooks_env[@]}" SCHEMATHESIS_EXCUSED_LOG="$dir/excused-$who.log" st --config-file bench/schemathesis.toml run "http://127.0.0.1:$port/openapi.json" \
    --checks all \
    --max-examples "$max_examples" \
    --header "Authorization: Bearer $token" \
    --seed 1 \
    --no-color \
    --report junit --report-dir "$dir/report-$who" >"$dir/st-$who.log" 2>&1; then
    status=1
  fi
  # The summary: operations, test cases and failures; the failures' details when any.
  if [ "$status" -ne 0 ]; then
    cat "$dir/st-$who.log"
  else
    sed -n '/= SUMMARY =/,$p' "$dir/st-$who.log"
  fi
  echo "-- refusals of schema-valid requests excused by ${hooks:-no hooks file}:"
  sort "$dir/excused-$who.log" | uniq -c | sort -rn
  echo "== $who: $(($(date +%s) - started)) s"
done
exit "$status"
