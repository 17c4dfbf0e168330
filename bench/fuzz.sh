#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser that takes outside bytes (docs/FUZZING.md).
#
#   bash bench/fuzz.sh SECONDS [TARGET...]
#
# Runs each fuzz target (all of `cargo fuzz list` by default) for SECONDS with libFuzzer,
# starting from the seeds in fuzz/seeds/<target>/ and the corpus kept from earlier runs, and
# prints one table row per target: executions, executions per second, coverage (libFuzzer's
# `cov:` edges and `ft:` features at the end), corpus size and findings (crash, timeout and
# OOM inputs written to fuzz/artifacts/<target>/ by this run).
#
# Environment:
#   FUZZ_CORPUS     where the growing corpus is kept (default fuzz/corpus, ignored by git)
#   FUZZ_SANITIZER  address, none, ... (default none: the code is `forbid(unsafe_code)`,
#                   and without ASan a target runs about twice as fast)
#   FUZZ_MINIMIZE   1: minimize each corpus after its run (cargo fuzz cmin)
#   FUZZ_RSS_MB     memory limit per target, MB (default 2048)
#   FUZZ_TIMEOUT_S  one input running longer is a finding (default 10)
#
# Needs the nightly toolchain; installs cargo-fuzz if it is missing. Not run in CI (no
# nightly guarantee there, and its budget is 15 minutes).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: bash bench/fuzz.sh SECONDS [TARGET...]" >&2
    exit 2
fi
seconds=$1
shift

corpus_root=${FUZZ_CORPUS:-$root/fuzz/corpus}
sanitizer=${FUZZ_SANITIZER:-none}
rss_mb=${FUZZ_RSS_MB:-2048}
timeout_s=${FUZZ_TIMEOUT_S:-10}
logs=$root/fuzz/logs
mkdir -p "$corpus_root" "$logs"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "building ${#targets[@]} targets (sanitizer: $sanitizer)" >&2
cargo +nightly fuzz build -s "$sanitizer" >&2

# The last value of `key: N` in libFuzzer's output (its status lines), or "?".
last_value() {
    local key=$1 log=$2 value
    value=$(grep -o "$key: [0-9]*" "$log" | sed -n '$p' | sed "s/^$key: //" || true)
    echo "${value:-?}"
}

# A `stat::name: N` line of -print_final_stats, or "?".
final_stat() {
    local name=$1 log=$2 value
    value=$(grep "^stat::$name:" "$log" | sed -n '$p' | sed 's/^[^:]*:: *//; s/^[^:]*: *//' || true)
    echo "${value:-?}"
}

rows=()
failed=0
for target in "${targets[@]}"; do
    corpus=$corpus_root/$target
    seeds=$root/fuzz/seeds/$target
    artifacts=$root/fuzz/artifacts/$target
    log=$logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$seeds"
    before=$(find "$artifacts" -type f | wc -l)
    echo "fuzzing $target for ${seconds}s (log: $log)" >&2
    status=0
    # The first folder is the corpus that grows; the seeds are read, never written.
    cargo +nightly fuzz run -s "$sanitizer" "$target" "$corpus" "$seeds" -- \
        -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb="$rss_mb" \
        -timeout="$timeout_s" -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
    if [ "${FUZZ_MINIMIZE:-0}" = 1 ] && [ "$status" = 0 ]; then
        cargo +nightly fuzz cmin -s "$sanitizer" "$target" "$corpus" >>"$log" 2>&1 || true
    fi
    after=$(find "$artifacts" -type f | wc -l)
    findings=$((after - before))
    if [ "$status" != 0 ]; then
        failed=1
        if [ "$findings" = 0 ]; then
            findings="exit $status"
        fi
        echo "  $target stopped (exit $status): see $log and $artifacts/" >&2
    fi
    executions=$(final_stat number_of_executed_units "$log")
    per_s=$(final_stat average_exec_per_sec "$log")
    corpus_files=$(find "$corpus" -type f | wc -l)
    rows+=("| $target | $seconds | $executions | $per_s | $(last_value cov "$log") | $(last_value ft "$log") | $corpus_files | $findings |")
done

echo
echo "bash bench/fuzz.sh $seconds${*:+ $*}  ($(date -u '+%Y-%m-%d %H:%M UTC'), $(cargo +nightly fuzz --version), $(rustc +nightly --version | sed 's/ (.*//'), sanitizer $sanitizer, $(nproc) cores)"
echo
echo "| target | s | executions | exec/s | cov (edges) | ft (features) | corpus (files) | findings |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
exit "$failed"
