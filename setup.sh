#!/usr/bin/env bash
# Installs every Debian 12 package the project needs to build, run and test,
# then the npm packages of the profiler page (web/package-lock.json) and of
# the OpenTelemetry exporters' test (tests/otel_clients/package-lock.json)
# into their node_modules. Safe to run again: apt-get skips what is
# installed, and npm runs only when a lock file changed since its last
# install.
#   ./setup.sh         what ./run.sh and ./test.sh need
#   ./setup.sh --all   also clang's sanitizers and libFuzzer (.ci/sanitize.sh,
#                      fuzz/run.sh) and VictoriaMetrics (bench/peers.sh):
#                      about 80 MB more to fetch and unpack, which the
#                      README's commands do without
set -euo pipefail
cd "$(dirname "$0")"

all=false
case "${1:-}" in
  "") ;;
  --all) all=true ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup.sh: unknown argument $1 (--all or nothing)" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config ninja-build
  # The compiler cache and the linker the build uses where they are
  # installed (CMakeLists.txt).
  ccache lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libpqxx-dev libpq-dev libabsl-dev libssl-dev
  libgtest-dev libgmock-dev
  # gzip-encoded OTLP/HTTP bodies.
  zlib1g-dev
  # Boost.Beast and Asio (header-only): the HTTP transport.
  libboost1.81-dev
  # google/api/{annotations,http}.proto: the REST routes in the protos.
  golang-github-grpc-ecosystem-grpc-gateway-dev
  postgresql postgresql-contrib postgresql-common
  docker-compose
  python3 curl
  # The Python client (client/python) and its tests: Debian's packages only,
  # for /usr/bin/python3; venv, pip, setuptools and wheel for its install.
  python3-grpcio python3-protobuf python3-psutil python3-pytest python3-pandas
  python3-venv python3-pip python3-setuptools python3-wheel
  # The Collector configuration in docs/otlp.md is checked as YAML.
  python3-yaml
  # The platform harness's requests are posted as it posts them
  # (tests/integration/harness_report_test.py).
  python3-requests
  # The TLS tests and docker-compose's secrets make certificates with it.
  openssl
  # promtool (in Debian's prometheus package) checks GET /metrics in the tests.
  prometheus
  # The tests check docker-compose's load balancer configuration with it.
  haproxy
  # pg_auto_failover: the engine that promotes a standby when the database
  # primary dies (docs/operating.md; tests/integration/database_failover_test).
  postgresql-15-auto-failover pg-auto-failover-cli
  # The profiler page's browser test runs Debian's Chromium (never a
  # downloaded one).
  chromium
)
if $all; then
  packages+=(
    # The sanitizer and fuzzer builds (.ci/sanitize.sh, fuzz/run.sh): clang,
    # its runtimes, and llvm-symbolizer for their reports.
    clang libclang-rt-14-dev llvm-14
    # The peers benchmark (bench/peers.sh) measures the service against it
    # and Prometheus on the same data.
    victoria-metrics
  )
fi
# Node.js and npm install uPlot, playwright-core and OpenTelemetry's
# JavaScript SDK from the npm registry.
# A machine that already has them (e.g. from NodeSource, whose nodejs
# carries npm) keeps its own; Debian's would conflict with it.
if ! command -v node >/dev/null; then packages+=(nodejs); fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  # dpkg syncs each file it unpacks unless told not to (a bare machine's
  # setup: 214-234 s in three runs against 237 s). What a crash mid-install leaves is fixed by
  # running this script again.
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
  # Debian starts the daemons of these two on install; the tests and the
  # benchmarks run the programs themselves, so a service this run installed
  # is stopped and disabled (one that was there before is left alone). A
  # failure here leaves a daemon running, no reason to stop the setup.
  if [ -d /run/systemd/system ]; then
    for p in prometheus victoria-metrics; do
      if [[ " ${missing[*]} " == *" $p "* ]]; then
        "${sudo_cmd[@]}" systemctl disable --now "$p" || true
      fi
    done
  fi
fi

# Where npm is missing, npm itself comes from the npm registry, pinned by
# version and checksum, into build/: Debian's npm is 387 packages that dpkg
# took 52 s to unpack on a bare machine, against 1 s for this 2.7 MB
# tarball, npm's own with its dependencies bundled. Node fetches it, so a
# proxy CA given to Node (NODE_EXTRA_CA_CERTS) serves this download too.
npm_version=9.9.4
npm_sha512=37371088ba6a0ee2e16af772276277b4627f9e2fde6dca87545664bf50b8ffa95b96b6943db3e0089e1585be286b71458516b6623f60039f23187ff3b4ab9e35
npm=(npm)
if ! command -v npm >/dev/null; then
  npm_dir=build/npm-$npm_version
  if [ ! -f "$npm_dir/bin/npm-cli.js" ]; then
    echo "setup: fetching npm $npm_version from the npm registry"
    mkdir -p build
    node - "https://registry.npmjs.org/npm/-/npm-$npm_version.tgz" \
      "$npm_sha512" "$npm_dir.tgz" <<'JS'
const [url, sha512, file] = process.argv.slice(2);
require('https').get(url, (res) => {
  if (res.statusCode !== 200) {
    console.error(`setup: ${url} answered ${res.statusCode}`);
    process.exit(1);
  }
  const parts = [];
  res.on('data', (part) => parts.push(part));
  res.on('end', () => {
    const body = Buffer.concat(parts);
    const got = require('crypto').createHash('sha512').update(body).digest('hex');
    if (got !== sha512) {
      console.error(`setup: ${url} has sha512 ${got}, not the pinned ${sha512}`);
      process.exit(1);
    }
    require('fs').writeFileSync(file, body);
  });
}).on('error', (e) => {
  console.error(`setup: ${url}: ${e.message}`);
  process.exit(1);
});
JS
    # Unpacked beside and renamed once whole, as a killed setup may leave it.
    rm -rf "$npm_dir" "$npm_dir.part" && mkdir -p "$npm_dir.part"
    tar -xzf "$npm_dir.tgz" -C "$npm_dir.part" --strip-components=1
    mv "$npm_dir.part" "$npm_dir" && rm "$npm_dir.tgz"
  fi
  npm=(node "$npm_dir/bin/npm-cli.js")
fi

# Each stamp is a copy of the lock file npm last installed from.
for dir in web tests/otel_clients; do
  stamp=$dir/node_modules/.installed-package-lock.json
  if ! cmp -s "$dir/package-lock.json" "$stamp"; then
    echo "setup: installing the npm packages of $dir/package-lock.json"
    "${npm[@]}" ci --prefix "$dir" --no-audit --no-fund --no-update-notifier \
      --loglevel=error
    cp "$dir/package-lock.json" "$stamp"
  fi
done
