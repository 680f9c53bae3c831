#!/usr/bin/env bash
# Runs the whole test suite: installs packages, builds, then runs ctest inside
# pg_virtualenv, which starts a throwaway PostgreSQL cluster for the run (and
# removes it after), exporting the PG* variables the tests read.
# Extra arguments go to ctest, e.g. ./test.sh -L unit, ./test.sh -R Migrator.
# Ends with one line of where the time went (docs/testing.md, "How long each
# step takes"):
#   test.sh: setup 225 s, build 336 s, tests 417 s, total 978 s (rc 0)
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
split=""
finish() {
  local rc=$?
  echo "test.sh: ${split}total $((SECONDS - start)) s (rc $rc)"
}
trap finish EXIT
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  split+="$name $((SECONDS - t0)) s, "
  return $rc
}
step setup ./setup.sh
step build env METRICS_SETUP_DONE=1 ./build.sh
cd build
# One test more than cores: a third of a test's time is waiting (on a server,
# PostgreSQL, a subprocess), which another test fills (docs/testing.md, "How
# long each step takes"). Tests that must run alone say RUN_SERIAL.
jobs=$(($(nproc 2>/dev/null || echo 2) + 1))
step tests pg_virtualenv ctest --output-on-failure -j"$jobs" "$@"
