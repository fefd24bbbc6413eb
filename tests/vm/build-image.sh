#!/bin/bash
# SPDX-License-Identifier: MIT
# Build (or reuse) the VM-guest image of the 'vm' test suite: Debian bookworm with the Debian kernel
# (BTF), systemd as PID 1, pure cgroup v2 and the runtime libraries rtd links against.
# The image is generic: rtd, rtctl and the in-guest tests arrive per run over a read-only 9p share.
#
# Usage: build-image.sh [CACHE_DIR]     (default /var/cache/rtd-tests/vm; run as root)
# Prints the directory holding vmlinuz, initrd.img and rootfs.ext4 on stdout; logs go to stderr.
# The cache key is a hash of this script, so any change here rebuilds the image; a missing or
# half-built cache entry is rebuilt from nothing. Concurrent callers wait on a lock.
set -euo pipefail

CACHE=${1:-${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}}
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
[ -n "$MIRROR" ] || MIRROR=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
IMG_SIZE=2048M          # sparse; the tree is ~0.8 GB

# systemd/dbus/udev: PID 1 and sd-bus; linux-image-amd64: 6.1 with BTF; the lib* packages are what
# rtd and rtctl are linked against on the (Debian 12) build host; jq/curl: checks of the JSON API.
PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,iproute2,procps,util-linux,passwd,linux-image-amd64
PACKAGES+=,initramfs-tools,libsystemd0,libmicrohttpd12,libjansson4,libcurl4,libsqlite3-0,libbpf1
PACKAGES+=,libelf1,zlib1g,jq,curl,bpftool
# The two-node Slurm cluster (run-vm-slurm.sh): Debian 12's Slurm 22.05 and munge, and a Prometheus that
# scrapes both nodes' rtd (the SPANK plugin comes with rtd's build over the payload share). Disabled
# below: only that test starts them.
PACKAGES+=,slurmd,slurmctld,slurm-client,munge,prometheus
SLURM_UNITS="slurmd.service slurmctld.service munge.service prometheus.service"

log() { echo "[build-image $(date +%T)] $*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root (debootstrap, chroot)"; exit 1; }
for t in debootstrap mkfs.ext4 chroot; do
        command -v "$t" >/dev/null || { log "missing $t: run tools/setup-deps"; exit 1; }
done

KEY=$(sha256sum "$0" | cut -c1-16)
OUT=$CACHE/$KEY
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

if [ -f "$OUT/complete" ] && [ -s "$OUT/rootfs.ext4" ] && [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/initrd.img" ] && [ -s "$OUT/initrd-bpo.img" ]; then
        log "cached image $OUT (built $(cat "$OUT/complete"))"
        echo "$OUT"
        exit 0
fi

T0=$(date +%s)
TMP=$CACHE/$KEY.tmp
ROOTFS=$TMP/rootfs
umount_all() {
        for m in dev/pts dev proc sys; do
                mountpoint -q "$ROOTFS/$m" 2>/dev/null && umount -l "$ROOTFS/$m" || true
        done
}
trap 'umount_all; rm -rf "$TMP"' EXIT
rm -rf "$TMP" "$OUT"
mkdir -p "$ROOTFS"

log "debootstrap bookworm from $MIRROR (a few minutes)"
if ! debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$TMP/debootstrap.log" 2>&1; then
        tail -30 "$TMP/debootstrap.log" >&2
        log "debootstrap failed (is the Debian mirror reachable?)"
        exit 1
fi
umount_all
log "debootstrap done after $(( $(date +%s) - T0 )) s"

# --- guest configuration ---
echo rtd-vm >"$ROOTFS/etc/hostname"
# payload: rtd build + tests (read-only); results: what the guest reports back.
cat >"$ROOTFS/etc/fstab" <<'EOF'
/dev/vda  /                ext4  rw,noatime  0 1
payload   /mnt/payload     9p    trans=virtio,version=9p2000.L,msize=262144,ro,nofail,x-systemd.device-timeout=30s  0 0
results   /mnt/results     9p    trans=virtio,version=9p2000.L,msize=262144,nofail,x-systemd.device-timeout=30s  0 0
EOF
mkdir -p "$ROOTFS/mnt/payload" "$ROOTFS/mnt/results"
printf '9p\n9pnet\n9pnet_virtio\n' >>"$ROOTFS/etc/initramfs-tools/modules"
chroot "$ROOTFS" passwd -d root >/dev/null      # serial-console debugging only; the guest has no network
# Nothing but the tests needs to run: fewer units make the (emulated, slow) boot shorter.
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
         e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service \
         man-db.timer dpkg-db-backup.timer; do
        ln -sf /dev/null "$ROOTFS/etc/systemd/system/$u"
done

chroot "$ROOTFS" systemctl disable $SLURM_UNITS >/dev/null 2>&1 || true
# A second kernel, for the Slurm guests: rtd's BPF collector does not load on Debian 12's 6.1 (EINVAL; rtd
# falls back to procfs, which has no intrusion accounting), it does on bookworm-backports' kernel. The
# first kernel stays the 6.1 of the other VM tests.
KVER=$(ls "$ROOTFS/lib/modules" | head -1)
echo "deb $MIRROR bookworm-backports main" >"$ROOTFS/etc/apt/sources.list.d/backports.list"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true
log "kernel from bookworm-backports"
if ! { chroot "$ROOTFS" apt-get update -q && DEBIAN_FRONTEND=noninteractive chroot "$ROOTFS" apt-get install -y -q \
        --no-install-recommends -t bookworm-backports linux-image-amd64; } >"$TMP/backports.log" 2>&1; then
        tail -20 "$TMP/backports.log" >&2
        log "installing the backports kernel failed"
        exit 1
fi
rm -f "$ROOTFS/etc/apt/sources.list.d/backports.list"

rm -f "$ROOTFS/etc/munge/munge.key"     # each run brings one key for all its nodes

# The in-guest entry point comes from the payload share, so a change of the tests never
# rebuilds the image. The unit powers the guest off whatever happens.
cat >"$ROOTFS/etc/systemd/system/rtd-vmtest.service" <<'EOF'
[Unit]
Description=rtd VM-guest test suite (from the payload share)
After=multi-user.target mnt-payload.mount mnt-results.mount
Requires=mnt-payload.mount mnt-results.mount
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/payload/guest-entry.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=2400

[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/rtd-vmtest.service \
        "$ROOTFS/etc/systemd/system/multi-user.target.wants/rtd-vmtest.service"

rm -rf "$ROOTFS"/usr/share/{doc,man,info,locale}/* "$ROOTFS"/var/cache/apt/archives/*.deb \
        "$ROOTFS"/var/lib/apt/lists/* || true
KBPO=$(ls "$ROOTFS/lib/modules" | grep -vxF "$KVER" | head -1) || true
[ -n "$KBPO" ] || { log "no backports kernel in $ROOTFS/lib/modules"; exit 1; }
chroot "$ROOTFS" update-initramfs -u -k "$KVER" >"$TMP/initramfs.log" 2>&1 || {
        tail -20 "$TMP/initramfs.log" >&2; log "update-initramfs failed"; exit 1; }

mkdir -p "$TMP/out"
cp "$ROOTFS/boot/vmlinuz-$KVER" "$TMP/out/vmlinuz"
cp "$ROOTFS/boot/initrd.img-$KVER" "$TMP/out/initrd.img"
cp "$ROOTFS/boot/vmlinuz-$KBPO" "$TMP/out/vmlinuz-bpo"
cp "$ROOTFS/boot/initrd.img-$KBPO" "$TMP/out/initrd-bpo.img"
mkfs.ext4 -q -F -L rtdvm -d "$ROOTFS" "$TMP/out/rootfs.ext4" "$IMG_SIZE" >&2
echo "$(date -u +%FT%TZ) kernel=$KVER kernel_bpo=$KBPO build_s=$(( $(date +%s) - T0 )) rootfs=$(du -sh "$ROOTFS" | cut -f1)" \
        >"$TMP/out/complete"
mv "$TMP/out" "$OUT"
rm -rf "$TMP"
trap - EXIT
# Keep only the current image: older keys are stale by definition.
for d in "$CACHE"/*/; do
        d=${d%/}
        [ "$d" = "$OUT" ] || rm -rf "$d"
done
log "built $OUT in $(( $(date +%s) - T0 )) s: $(cat "$OUT/complete")"
echo "$OUT"
