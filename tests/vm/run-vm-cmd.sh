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
#   Exits 1 when the guest hung or SCRIPT exited non-zero. RTD_VM_KERNEL=bpo: the 6.12 kernel of the image.
# Example (libbpf's verifier log of the BPF collector's load on 6.1):
#   tests/vm/run-vm-cmd.sh build <(echo 'METRICS_PROBE_DEBUG=1 $PAY/metrics-probe sleeper 1') \
#           build/tests/integration/metrics-probe
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VM_TAG=vm-cmd
. "$HERE/vm-lib.sh"
USAGE="$0 BUILD_DIR GUEST-SCRIPT [FILE...]"
BUILD=${1:-} SCRIPT=${2:-}
[ -n "$SCRIPT" ] || { echo "usage: $USAGE" >&2; exit 2; }
shift 2
TIMEOUT=${RTD_VM_TIMEOUT:-1200}
vm_need "$USAGE"

vm_work rtd-vm-cmd
vm_image
PAY=$WORK/payload RES=$WORK/results
mkdir -p "$PAY/stage" "$RES"
stage_payload "$BUILD" "$PAY" "$SRC" 2>/dev/null
cp "$SCRIPT" "$PAY/user.sh"
for f in "$@"; do cp "$f" "$PAY/"; done
cat >"$PAY/guest-entry.sh" <<'EOF'
#!/bin/bash
PAY=/mnt/payload RES=/mnt/results
"$PAY/heartbeat" &
set -a; . "$PAY/env"; set +a
export PAY RES PATH=$(dirname "$RTCTL_BIN"):$(dirname "$RTD_BIN"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cp -a "$PAY/stage/." / && ldconfig
getent group rtd >/dev/null || groupadd -r rtd
echo "=== guest $(uname -r) ===" >"$RES/out.txt"
timeout 900 bash "$PAY/user.sh" >>"$RES/out.txt" 2>&1
echo "=== rc $? ===" >>"$RES/out.txt"
EOF

log "booting $IMGDIR (snapshot), work $WORK"
# RTD_VM_KERNEL=bpo boots the image's second kernel (bookworm-backports' 6.12) instead of Debian 12's 6.1.
KSUF=${RTD_VM_KERNEL:+-$RTD_VM_KERNEL}
vm_boot "" vmlinuz$KSUF initrd$KSUF.img "$RES" "" -m 2G -smp "${RTD_VM_SMP:-4}"
wait "${PIDS[0]}"
log "qemu rc=$?"
PIDS=()
fail=0
vm_hang_report ""
cat "$RES/out.txt" 2>/dev/null || { tail -30 "$WORK/serial.log"; exit 1; }
OUTDIR=${RTD_VM_CMD_OUT:-/tmp/rtd-vm-cmd-results}
rm -rf "$OUTDIR" && cp -r "$RES" "$OUTDIR" && log "guest files in $OUTDIR"
RC=$fail
# The script's own exit status too (a test such as guest-fair-server.sh fails through it).
grep -qx '=== rc 0 ===' "$RES/out.txt" || RC=1
exit $RC
