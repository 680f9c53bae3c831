#!/usr/bin/env bash
# Runs commands in a clone of this repository's committed HEAD inside a bare
# Debian 12 root, as a newcomer's machine would: nothing installed but what
# debootstrap's minbase variant holds (about the debian:12 image), so every
# package the project needs must come from setup.sh. Prints each command's
# exit status and seconds, and the end of its log.
#
# Usage (root, with debootstrap installed: apt-get install debootstrap):
#   tools/fresh_machine.sh './test.sh'
#   tools/fresh_machine.sh './setup.sh' './test.sh -L unit'
# Each command runs in the clone's root, one after another, in the same root;
# the first that fails stops the run (exit 1). The bare root is made once and
# kept as a tarball (FRESH_MACHINE_DIR, default ~/.cache/fresh-machine), so
# later runs take seconds to start. Logs: $FRESH_MACHINE_DIR/run/<N>.log.
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" = 0 ] || { echo "fresh_machine.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null ||
  { echo "fresh_machine.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
dir=${FRESH_MACHINE_DIR:-$HOME/.cache/fresh-machine}
base=$dir/bookworm-minbase.tar
root=$dir/root
mkdir -p "$dir/run"

# The mirror this machine's apt uses, so the root reaches the same packages.
mirror=$( (sed -n 's|^URIs: *\(https\{0,1\}://[^ ]*/debian\)/\{0,1\}$|\1|p' \
    /etc/apt/sources.list.d/*.sources
  awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2 }' /etc/apt/sources.list) 2>/dev/null |
  head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

if [ ! -f "$base" ]; then
  echo "making a bare Debian 12 root from $mirror (once)..."
  rm -rf "$dir/base"
  debootstrap --variant=minbase bookworm "$dir/base" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
    { echo "debootstrap failed: $dir/debootstrap.log" >&2; exit 2; }
  tar -C "$dir/base" -cf "$base" . && rm -rf "$dir/base"
fi

unmount() {
  for m in proc sys dev; do umount -R "$root/$m" 2>/dev/null || true; done
}
unmount
rm -rf "$root" && mkdir -p "$root"
tar -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A machine whose traffic to the registries passes a TLS-inspecting proxy
# trusts that proxy's CA; npm in the root is given the same bundle.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/host-ca.crt" 2>/dev/null || true
git clone -q "$repo" "$root/project"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
trap unmount EXIT

n=0
for command in "$@"; do
  n=$((n + 1))
  log=$dir/run/$n.log
  start=$SECONDS
  rc=0
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NODE_EXTRA_CA_CERTS=/etc/host-ca.crt /bin/bash -lc "cd /project && $command" >"$log" 2>&1 || rc=$?
  echo "$n: $command: rc $rc, $((SECONDS - start)) s ($log)"
  tail -n 3 "$log" | sed 's/^/    /'
  [ "$rc" = 0 ] || exit 1
done
