#!/usr/bin/env bash
# Makes the GPU check's bundle: a folder, and a .tar.gz of it, holding
# gpu-check, metrics-agent and gpu-load, every shared library they load but
# the NVIDIA driver's, Debian's dynamic loader to run them with, and the
# Python client's NVML modules, so that it runs on a GPU machine that has
# none of this project's packages (docs/testing.md, "The GPU check").
#
# Usage: tools/gpu_check/make_bundle.sh [BUILD_DIR [OUT_DIR]]
#   BUILD_DIR: where the three programs were built (default: build)
#   OUT_DIR:   the bundle folder to make (default: BUILD_DIR/gpu-check);
#              OUT_DIR.tar.gz is made beside it.
# On the GPU machine: tar xzf gpu-check.tar.gz && gpu-check/run --load
# Fails when the folder would pass 64 MiB.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
out=${2:-$build/gpu-check}
limit_mib=64

rm -rf "$out" "$out.tar.gz"
mkdir -p "$out/bin" "$out/lib" "$out/python/metrics_client"
for program in "$build/client/metrics-agent" "$build/tools/gpu_check/gpu-check" \
    "$build/tools/gpu_check/gpu-load"; do
  # Without debug sections: a third of the size, the same code.
  strip --strip-debug -o "$out/bin/$(basename "$program")" "$program"
done

# The libraries as this machine's loader resolves them. The NVIDIA driver's
# (NVML, CUDA) must be the GPU machine's own, matched to its kernel module.
if ldd "$out"/bin/* | grep -q "not found"; then
  ldd "$out"/bin/* | grep "not found" >&2
  exit 1
fi
ldd "$out"/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -v -E '/lib(nvidia-|cuda)' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
# glibc's split-off libraries, empty since glibc 2.34 but still named by
# libraries built against an older one, as the NVIDIA driver's may be: from
# the bundle's glibc, never the machine's, which would not match it.
libc_dir=$(dirname "$(ldd "$out/bin/metrics-agent" | awk '$1 == "libc.so.6" { print $3 }')")
for stub in libpthread.so.0 libdl.so.2 librt.so.1; do
  if [ -e "$libc_dir/$stub" ]; then cp -L "$libc_dir/$stub" "$out/lib/"; fi
done
loader=$(ldd "$out/bin/metrics-agent" | awk '$1 ~ /^\/.*ld-linux/ { print $1 }')
[ -n "$loader" ] || { echo "make_bundle.sh: no dynamic loader in ldd's answer" >&2; exit 1; }
cp -L "$loader" "$out/lib/"

cp "$repo/client/python/metrics_client/_nvml.py" \
   "$repo/client/python/metrics_client/_signals.py" "$out/python/metrics_client/"
cp "$repo/common/vocabulary/signals.json" "$out/python/metrics_client/"
cp "$repo/tools/gpu_check/python_readings.py" "$out/python/"

cat > "$out/run" <<'RUN'
#!/bin/sh
# Runs the GPU check from this folder with its own loader and libraries;
# NVML and nvidia-smi are this machine's. Flags: ./run --help
here=$(cd "$(dirname "$0")" && pwd)
loader=$(ls "$here"/lib/ld-linux* | head -n 1)
exec "$loader" --library-path "$here/lib" "$here/bin/gpu-check" \
  --agent="$here/bin/metrics-agent" --gpu-load="$here/bin/gpu-load" \
  --loader="$loader" \
  --library-path="$here/lib" \
  --python-readings="$here/python/python_readings.py" "$@"
RUN
chmod +x "$out/run"

size_kib=$(du -sk "$out" | cut -f1)
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "make_bundle.sh: $out is $((size_kib / 1024)) MiB, over $limit_mib MiB" >&2
  exit 1
fi
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
echo "$out: $((size_kib / 1024)) MiB, $(ls "$out/lib" | wc -l) files in lib/;" \
  "$out.tar.gz: $(( $(stat -c %s "$out.tar.gz") / 1024 / 1024 )) MiB"
