#!/usr/bin/env bash
# Runs the whole test suite: installs packages, builds, then runs ctest inside
# pg_virtualenv, which starts a throwaway PostgreSQL cluster for the run (and
# removes it after), exporting the PG* variables the tests read.
# Extra arguments go to ctest, e.g. ./test.sh -L unit, ./test.sh -R Migrator.
# Ends with one line of where the time went (docs/testing.md, "How long each
# step takes"):
#   test.sh: setup 139 s, build 283 s, tests 439 s, total 861 s (rc 0)
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
split=""
memory_dir=""
finish() {
  local rc=$?
  [ -z "$memory_dir" ] || rm -rf "$memory_dir"
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
# The throwaway cluster's files go to memory (/dev/shm) where it has room for
# the suite's peak (2 GB measured, 4 GB asked): each test makes and drops a
# database of about 1000 files, and on disk the file system's work for them
# made the suite 11 % slower (docs/testing.md, "How long each step takes").
cluster=()
avail_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
if [ "${avail_kb:-0}" -ge $((4 * 1024 * 1024)) ] &&
   memory_dir=$(mktemp -d /dev/shm/metrics-test-pg.XXXXXX); then
  chmod 755 "$memory_dir"  # the cluster runs as postgres when we are root
  cluster=(-c "-d $memory_dir/data")
  echo "test.sh: the test cluster's files are in $memory_dir (memory)"
fi
step tests pg_virtualenv "${cluster[@]}" ctest --output-on-failure -j"$jobs" "$@"
