#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ (or the ones named) for a bounded time each and
# prints, per target, the executions, coverage, features and crashes.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Installs cargo-fuzz when it is missing. libFuzzer's instrumentation needs nightly rustc
# flags; on a stable toolchain RUSTC_BOOTSTRAP=1 lets them through. Targets are built
# without a sanitizer (the gateway's code forbids `unsafe`) but with debug assertions and
# overflow checks. New inputs go to fuzz/work/<target>/ (not committed); the committed
# seeds in fuzz/corpus/<target>/ are read only. A crash is saved under
# fuzz/artifacts/<target>/ (and counts as a failure until removed): minimise it
# (`cargo fuzz tmin`), commit it to the corpus, add a unit test beside the code, and fix
# the cause. FUZZ_TARGET_DIR overrides the build directory (default fuzz/target).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
if ! rustc --version | grep -q nightly; then
  export RUSTC_BOOTSTRAP=1
fi
target_dir="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
build=(-s none --debug-assertions --codegen-units 16 --target-dir "$target_dir")

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build "${build[@]}"

summary=()
failed=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
  log="fuzz/work/$t.log"
  echo "fuzz: $t for ${secs}s"
  status=0
  cargo fuzz run "${build[@]}" "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="fuzz/dicts/$t.dict" -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  crashes=$(find "fuzz/artifacts/$t" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l)
  summary+=("$(printf '%-16s %10s runs in %4s s  %-22s crashes: %s' \
    "$t" "${runs:-?}" "${took:-<$secs}" "${cov:-?}" "$crashes")")
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    grep -E '^(==[0-9]+== ERROR|thread .* panicked|SUMMARY|artifact_prefix)' "$log" | head -5 || true
  fi
done
printf '%s\n' "${summary[@]}"
exit "$failed"
