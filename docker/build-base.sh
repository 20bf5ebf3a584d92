#!/usr/bin/env bash
# Build the CPU image's base from Debian's own packages when no registry can be reached
# (`make docker-base`): debootstrap a minimal bookworm, check its package set against
# docker/base.packages, and `docker import` it as capsule-base:bookworm.
#
# Pinning: Debian's archive serves one version of each package per suite and point release, so the
# committed package list (name=version, one per line) is the pin. A base whose packages differ (a new
# point release, a security update) is refused with the difference; CAPSULE_BASE_REFRESH=1 accepts
# it and rewrites docker/base.packages, to be committed like a lock refresh.
# Needs root, debootstrap and a reachable Debian mirror ($CAPSULE_DEBIAN_MIRROR).
set -euo pipefail

suite=bookworm
mirror=${CAPSULE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
image=${CAPSULE_BASE:-capsule-base:bookworm}
packages=docker/base.packages
work=${CAPSULE_BASE_WORK:-/var/tmp/capsule-base}

die() { echo "Error: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "debootstrap needs root; run \`sudo make docker-base\` or build on a host with a registry (docker/README.md)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (Debian/Ubuntu: apt-get install debootstrap)"
command -v docker >/dev/null || die "no docker client (apt-get install docker.io)"
curl -fsI --max-time 15 "$mirror/dists/$suite/Release" >/dev/null 2>&1 \
  || die "the Debian mirror $mirror is not reachable; set CAPSULE_DEBIAN_MIRROR to one that is"

rm -rf "$work" && mkdir -p "$work"
start=$(date +%s)
debootstrap --variant=minbase "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || die "debootstrap failed; see $work/debootstrap.log"
chroot "$work/rootfs" dpkg-query -W -f '${Package}=${Version}\n' | LC_ALL=C sort >"$work/packages"
if [ -f "$packages" ] && ! diff -u "$packages" "$work/packages" >"$work/packages.diff"; then
  if [ "${CAPSULE_BASE_REFRESH:-0}" = 1 ]; then
    cp "$work/packages" "$packages"
    echo "docker/base.packages refreshed (commit it):"; cat "$work/packages.diff"
  else
    cat "$work/packages.diff" >&2
    die "the debootstrapped base differs from $packages (above); CAPSULE_BASE_REFRESH=1 accepts it"
  fi
elif [ ! -f "$packages" ]; then
  cp "$work/packages" "$packages"
fi
# apt's caches and logs would only make the base differ between two builds
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/log/"*
tar -C "$work/rootfs" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase $suite $mirror; packages: $(sha256sum "$packages" | cut -c1-16)" \
  - "$image" >/dev/null
echo "built $image from $suite ($(wc -l <"$packages") packages) in $(( $(date +%s) - start )) s; $(du -sh "$work/rootfs" | cut -f1)"
rm -rf "$work"
