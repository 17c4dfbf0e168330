#!/usr/bin/env bash
# Issue 36's two counts of the store's size: the lines of the SQL store for both dialects
# (store-sql without its conformance suite, store-postgres, store-sqlite; `src/` only) and
# the methods of the store's traits (all, and those without a default a store must write).
# A measurement, not a test: it prints numbers.
# Usage: bash bench/store-size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sql=$(ls crates/store-sql/src/*.rs | grep -v conformance.rs)
for part in "store-sql:$sql" "store-postgres:$(ls crates/store-postgres/src/*.rs)" \
  "store-sqlite:$(ls crates/store-sqlite/src/*.rs)"; do
  name=${part%%:*}
  # shellcheck disable=SC2086
  printf '%-15s %6d lines\n' "$name" "$(cat ${part#*:} | wc -l)"
done
# shellcheck disable=SC2086
printf '%-15s %6d lines\n' total "$(cat $sql crates/store-postgres/src/*.rs crates/store-sqlite/src/*.rs | wc -l)"
python3 - <<'PY'
import glob, re
traits = ["Store", "ReadStore", "WorkerStore", "EngineStore", "LeaseStore", "ReportStore",
          "TransferStore", "RefundStore", "CancellationStore", "WaitlistStore", "DoorStore",
          "WebhookStore"]
total = required = 0
for path in sorted(glob.glob("crates/store/src/*.rs")):
    text = open(path).read()
    for trait in traits:
        m = re.search(r"pub trait " + trait + r"\b[^{]*\{", text)
        if not m:
            continue
        i, depth = m.end(), 1
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body, depth, n, req = text[m.end():i], 0, 0, 0
        for t in re.finditer(r"\{|\}|\bfn\s+\w+", body):
            if t.group() in "{}":
                depth += 1 if t.group() == "{" else -1
            elif depth == 0:
                n += 1
                rest = body[t.end():]
                semi, brace = rest.find(";"), rest.find("{")
                req += semi != -1 and (brace == -1 or semi < brace)
        print(f"{trait:15} {n:3} methods, {req:3} without a default")
        total, required = total + n, required + req
print(f"{'all traits':15} {total:3} methods, {required:3} without a default")
PY
