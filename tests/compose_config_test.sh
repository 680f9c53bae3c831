#!/usr/bin/env bash
# Validates docker-compose.yml offline (no Docker engine runs here): Debian's
# docker-compose must accept it, every host file it mounts must exist, and
# the build context must have a Dockerfile.
# Usage: compose_config_test.sh <repository root>
set -euo pipefail
cd "$1"
docker-compose -f docker-compose.yml config -q
resolved=$(docker-compose -f docker-compose.yml config)
missing=0
for source in $(printf '%s\n' "$resolved" | sed -n 's|^ *- \(/[^:]*\):.*|\1|p'); do
  if [ ! -e "$source" ]; then
    echo "docker-compose.yml mounts $source, which does not exist"
    missing=1
  fi
done
for context in $(printf '%s\n' "$resolved" | sed -n 's|^ *context: ||p'); do
  if [ ! -f "$context/Dockerfile" ]; then
    echo "build context $context has no Dockerfile"
    missing=1
  fi
done
exit $missing
