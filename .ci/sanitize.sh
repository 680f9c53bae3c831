#!/usr/bin/env bash
# Builds with a sanitizer (clang) and runs tests under it, in a throwaway
# PostgreSQL (pg_virtualenv), as CI does:
#   .ci/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer,
#                             every target, the whole suite (build-asan/)
#   .ci/sanitize.sh thread    ThreadSanitizer, the tests of the concurrent
#                             core only (build-tsan/)
# More arguments go to ctest (e.g. -R IngestService). A finding fails the
# test that hit it; the report is in the test's output. Suppressions, each
# with its reason, are in .ci/lsan.supp and .ci/tsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
kind=${1:?usage: .ci/sanitize.sh address|thread [ctest arguments]}
shift
./setup.sh --all >/dev/null

case "$kind" in
  address)
    # Also builds fuzz/ (the same build serves fuzz/run.sh) and the
    # benchmarks, which no other build of CI compiles.
    dir=build-asan
    sanitize=address,undefined
    targets=(all benchmarks)
    tests=()
    fuzz=ON
    ;;
  thread)
    # The tests labelled "concurrency" in CMake: the ingest reactor, writer
    # and group commit, follow and its notifier, the REST gateway's
    # streams, the HTTP engine, the client reporter, the pool.
    dir=build-tsan
    sanitize=thread
    fuzz=OFF
    targets=(concurrency_tests)
    tests=(-L concurrency)
    ;;
  *) echo "sanitize.sh: unknown kind $kind (address or thread)" >&2; exit 2 ;;
esac

CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMETRICS_SANITIZE="$sanitize" -DMETRICS_FUZZ="$fuzz" >/dev/null
ninja -C "$dir" -j"$(nproc 2>/dev/null || echo 2)" "${targets[@]}"

# Tests that measure memory skip that check under a sanitizer.
export METRICS_SANITIZER=$kind
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$root/.ci/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="suppressions=$root/.ci/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
if [ "$kind" = thread ]; then
  # absl::Mutex made visible to TSan (tests/tsan/absl_mutex_annotations.cc);
  # preloaded so the processes the tests start have it too.
  export LD_PRELOAD="$root/$dir/tests/libtsan_absl_mutex.so"
fi
cd "$dir"
exec pg_virtualenv ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" "${tests[@]}" "$@"
