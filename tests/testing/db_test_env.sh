# Sourced by the shell tests: a work folder and a throwaway, migrated
# database of the test PostgreSQL (the PG* variables) named after the test,
# both removed at exit, with the process whose pid is in $pid if any.
# `fail MESSAGE` ends the test.
# Usage: . tests/testing/db_test_env.sh NAME METRICSCTL
#   sets $work and $db, and exports DATABASE_URL.
work=$(mktemp -d)
db="$1_$$"
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  dropdb --if-exists "$db"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

createdb "$db"
export DATABASE_URL="dbname=$db"
"$2" migrate up >/dev/null
