#!/bin/bash
# SPDX-License-Identifier: MIT
# Build (or reuse) the cached Debian bookworm rootfs that the systemd container test boots.
# Usage: rootfs.sh DEST   -> DEST is a fresh rootfs unpacked from /var/cache/rtd-tests/<key>.tar.zst,
# which is debootstrapped first when missing. The key hashes suite + package list, so a changed list rebuilds.
set -euo pipefail

DEST=$1
SUITE=${SUITE:-bookworm}
CACHE=${RTD_TEST_CACHE:-/var/cache/rtd-tests}
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
[ -n "$MIRROR" ] || MIRROR=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
# systemd as PID 1 plus rtd's shared libraries, so the .deb installs with dpkg -i and no network.
PKGS=systemd,systemd-sysv,dbus,procps,libmicrohttpd12,libjansson4,libsqlite3-0,libbpf1,libelf1,zlib1g,passwd
KEY=$SUITE-$(echo "$SUITE $PKGS v1" | sha256sum | cut -c1-12)
TARBALL=$CACHE/$KEY.tar.zst

mkdir -p "$CACHE"
# Two test runs may race to build the cache: serialise on a lock next to it.
exec 9>"$CACHE/$KEY.lock"
flock 9
if [ ! -s "$TARBALL" ]; then
        tmp=$(mktemp -d "$CACHE/build.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        echo "rootfs: debootstrap $SUITE ($PKGS) from $MIRROR into the cache (once; 40-100 s)" >&2
        if ! debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$tmp/root" "$MIRROR" \
                >"$tmp/debootstrap.log" 2>&1; then
                tail -20 "$tmp/debootstrap.log" >&2
                exit 1
        fi
        rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
        tar -C "$tmp/root" --zstd -cf "$tmp/rootfs.tar.zst" .
        mv "$tmp/rootfs.tar.zst" "$TARBALL"
fi
flock -u 9
mkdir -p "$DEST"
tar -C "$DEST" --zstd -xf "$TARBALL"
echo "$TARBALL"
