#!/usr/bin/env bash
# Runs the whole test suite: installs packages, builds, then runs ctest inside
# pg_virtualenv, which starts a throwaway PostgreSQL cluster for the run (and
# removes it after), exporting the PG* variables the tests read.
# Extra arguments go to ctest, e.g. ./test.sh -L unit, ./test.sh -R Migrator.
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
cd build
exec pg_virtualenv ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" "$@"
