#!/bin/bash
# SPDX-License-Identifier: MIT
# A quick look at one thing on the guest's kernel (Debian 12's stock 6.1) without the whole vm suite:
# boots the cached image (snapshot=on) with this build staged, runs GUEST-SCRIPT there as root after
# installing the build, prints its output and powers off. About 1-2 min on a loaded 2-CPU host.
#
# Usage: run-vm-cmd.sh BUILD_DIR GUEST-SCRIPT [FILE...]     (as root)
#   GUEST-SCRIPT runs under bash in the guest with PATH set to the installed rtd/rtctl, $PAY the payload
#   share (FILEs are copied there: helper binaries such as BUILD/tests/integration/metrics-probe) and
#   $RES a writable share whose files are copied to $RTD_VM_CMD_OUT (default /tmp/rtd-vm-cmd-results).
# Example (libbpf's verifier log of the BPF collector's load on 6.1):
#   tests/vm/run-vm-cmd.sh build <(echo 'METRICS_PROBE_DEBUG=1 $PAY/metrics-probe sleeper 1') \
#           build/tests/integration/metrics-probe
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:?usage: run-vm-cmd.sh BUILD_DIR GUEST-SCRIPT [FILE...]}
SCRIPT=${2:?usage: run-vm-cmd.sh BUILD_DIR GUEST-SCRIPT [FILE...]}
shift 2
CACHE=${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}
log() { echo "[vm-cmd $(date +%T)] $*" >&2; }
. "$HERE/stage-payload.sh"

BUILD=$(cd "$BUILD" && pwd)
IMGDIR=$(bash "$HERE/build-image.sh" "$CACHE" | tail -1) || exit 1
WORK=$(mktemp -d /var/tmp/rtd-vm-cmd.XXXXXX)
PAY=$WORK/payload RES=$WORK/results
mkdir -p "$PAY/stage" "$RES"
stage_payload "$BUILD" "$PAY" "$SRC" 2>/dev/null
cp "$SCRIPT" "$PAY/user.sh"
for f in "$@"; do cp "$f" "$PAY/"; done
cat >"$PAY/guest-entry.sh" <<'EOF'
#!/bin/bash
PAY=/mnt/payload RES=/mnt/results
set -a; . "$PAY/env"; set +a
export PAY RES PATH=$(dirname "$RTCTL_BIN"):$(dirname "$RTD_BIN"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cp -a "$PAY/stage/." / && ldconfig
getent group rtd >/dev/null || groupadd -r rtd
echo "=== guest $(uname -r) ===" >"$RES/out.txt"
timeout 900 bash "$PAY/user.sh" >>"$RES/out.txt" 2>&1
echo "=== rc $? ===" >>"$RES/out.txt"
EOF

log "booting $IMGDIR (snapshot), work $WORK"
timeout --kill-after=10 "${RTD_VM_TIMEOUT:-1200}" qemu-system-x86_64 \
        -accel tcg,thread=multi -cpu max,vendor=GenuineIntel -m 2G -smp "${RTD_VM_SMP:-4}" \
        -machine q35 -display none -no-reboot -nodefaults -serial "file:$WORK/serial.log" \
        -kernel "$IMGDIR/vmlinuz" -initrd "$IMGDIR/initrd.img" \
        -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 loglevel=4" \
        -drive file="$IMGDIR/rootfs.ext4",format=raw,if=virtio,cache=unsafe,snapshot=on \
        -virtfs local,path="$PAY",mount_tag=payload,security_model=none,readonly=on,id=payload \
        -virtfs local,path="$RES",mount_tag=results,security_model=none,id=results \
        </dev/null >"$WORK/qemu.log" 2>&1
log "qemu rc=$?"
cat "$RES/out.txt" 2>/dev/null || { tail -30 "$WORK/serial.log"; exit 1; }
OUTDIR=${RTD_VM_CMD_OUT:-/tmp/rtd-vm-cmd-results}
rm -rf "$OUTDIR" && cp -r "$RES" "$OUTDIR" && log "guest files in $OUTDIR"
rm -rf "$WORK"
