#!/usr/bin/env bash
# Builds the libFuzzer targets (with AddressSanitizer and UBSan, in the
# build-asan/ folder that .ci/sanitize.sh address shares) and runs each for
# SECONDS (default 30), or only the TARGETs named, one per core at a time.
# Each starts from its committed seeds (fuzz/corpus/<target>/) plus what
# earlier runs found (build-asan/fuzz/found/<target>/, not committed); a
# crashing input is saved as build-asan/fuzz/crashes/<target>/crash-* (copy
# it into the seed corpus with the fix, as a regression input).
# Prints a line per target, then one JSON object as the last line:
#   {"targets": N, "execs": TOTAL, "crashes": C}
# and exits 1 when C > 0.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-30}
shift || true
./setup.sh --all >/dev/null
CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMETRICS_SANITIZE=address,undefined -DMETRICS_FUZZ=ON >/dev/null
ninja -C build-asan -j"$(nproc 2>/dev/null || echo 2)" fuzz_targets >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cc; do targets+=("$(basename "$f" .cc)"); done
fi
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/.ci/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Targets run side by side, one per core (each still has SECONDS of a core
# to itself); each leaves "EXECS RC" in build-asan/fuzz/<name>.result, and
# the lines are printed in the targets' order once all have ended.
run_target() {
  local target=$1 name=${1%_fuzz} rc=0 execs
  local found="build-asan/fuzz/found/$name"
  local artifacts="build-asan/fuzz/crashes/$name"
  local log="build-asan/fuzz/$name.log"
  mkdir -p "$found" "$artifacts"
  local dict=()
  if [ -f "fuzz/$name.dict" ]; then dict=(-dict="fuzz/$name.dict"); fi
  "build-asan/fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" "$found" "fuzz/corpus/$name" \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  echo "${execs:-0} $rc" >"build-asan/fuzz/$name.result"
}
cores=$(nproc 2>/dev/null || echo 2)
for target in "${targets[@]}"; do
  rm -f "build-asan/fuzz/${target%_fuzz}.result"
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n || true; done
  run_target "$target" &
done
wait

total=0
crashes=0
for target in "${targets[@]}"; do
  name=${target%_fuzz}
  read -r execs rc <"build-asan/fuzz/$name.result"
  total=$((total + execs))
  if [ "$rc" -ne 0 ]; then
    crashes=$((crashes + 1))
    echo "fuzz: $target: CRASH (exit $rc) after $execs runs; see build-asan/fuzz/$name.log and build-asan/fuzz/crashes/$name/"
    grep -m 5 -E "ERROR|SUMMARY|runtime error" "build-asan/fuzz/$name.log" | sed 's/^/  /' || true
  else
    echo "fuzz: $target: $execs runs in ${seconds}s, no crash ($(ls "build-asan/fuzz/found/$name" | wc -l) inputs found)"
  fi
done
echo "{\"targets\": ${#targets[@]}, \"execs\": $total, \"crashes\": $crashes}"
[ "$crashes" -eq 0 ]
