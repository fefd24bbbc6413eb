#!/bin/bash
# SPDX-License-Identifier: MIT
# The 'vm' test suite: boots the freshly built rtd in a QEMU (TCG) guest with systemd as PID 1, pure
# cgroup v2 and 2 sockets x 2 cores x 2 threads, runs tests/vm/guest-tests.sh there and reports.
#
# Usage: run-vm-tests.sh [BUILD_DIR]   (or RTD_BUILD_DIR=...; run as root)
# Env:   RTD_VM_CACHE   image cache (default /var/cache/rtd-tests/vm)
#        RTD_VM_KEEP=1  keep the work directory (serial log, guest journal) even on success
#        RTD_VM_TIMEOUT seconds for the whole boot (default 2400; emulation is 20-50x slower than native)
# Output: one line per guest check, then "N passed, N failed, N skipped"; exit 1 if anything failed
# or the guest did not finish, 77 if this machine cannot run the suite at all.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-${RTD_BUILD_DIR:-}}
CACHE=${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}
TIMEOUT=${RTD_VM_TIMEOUT:-2400}
SMP=8,sockets=2,cores=2,threads=2

log() { echo "[vm $(date +%T)] $*" >&2; }
. "$HERE/stage-payload.sh"
skip_all() { echo "SKIP: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 77; }

[ -n "$BUILD" ] && [ -d "$BUILD" ] || { echo "usage: $0 BUILD_DIR (or RTD_BUILD_DIR)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
[ "$(id -u)" = 0 ] || skip_all "needs root (debootstrap, chroot, image build)"
for t in qemu-system-x86_64 debootstrap mkfs.ext4 flock timeout; do
        command -v "$t" >/dev/null || skip_all "$t not installed (run tools/setup-deps)"
done

T_START=$(date +%s)
WORK=$(mktemp -d /var/tmp/rtd-vm.XXXXXX)
QEMU_PID=
cleanup() {
        [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null
        if [ "${RTD_VM_KEEP:-0}" = 1 ] || [ "${RC:-1}" != 0 ]; then
                log "logs kept in $WORK (serial.log, results/)"
                rm -rf "$WORK/payload"
        else
                rm -rf "$WORK"
        fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT     # meson's timeout: still stop QEMU and keep the logs

# --- 1. the image (cached; rebuilt when build-image.sh changes or the cache is gone) ---
T0=$(date +%s)
IMGDIR=$(bash "$HERE/build-image.sh" "$CACHE" | tail -1) || { echo "FAIL: build the guest image"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
T_IMAGE=$(( $(date +%s) - T0 ))
log "image ready in ${T_IMAGE}s: $IMGDIR"

# --- 2. the payload: staged install of this build + the guest tests ---
PAY=$WORK/payload
RES=$WORK/results
mkdir -p "$PAY/stage" "$RES"
stage_payload "$BUILD" "$PAY" "$SRC"
install -m 0755 "$HERE/guest-tests.sh" "$PAY/guest-entry.sh"
install -m 0644 "$HERE/guest-crash.sh" "$PAY/guest-crash.sh"

# --- 3. boot ---
# snapshot=on: the cached image is never written; every run boots the same pristine guest.
T0=$(date +%s)
log "booting QEMU TCG, -smp $SMP (several minutes; timeout ${TIMEOUT}s)"
timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 \
        -accel tcg,thread=multi -cpu max,vendor=GenuineIntel -m 2G -smp "$SMP" \
        -machine q35 -display none -no-reboot -nodefaults -serial "file:$WORK/serial.log" \
        -kernel "$IMGDIR/vmlinuz" -initrd "$IMGDIR/initrd.img" \
        -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 loglevel=4" \
        -drive file="$IMGDIR/rootfs.ext4",format=raw,if=virtio,cache=unsafe,snapshot=on \
        -virtfs local,path="$PAY",mount_tag=payload,security_model=none,readonly=on,id=payload \
        -virtfs local,path="$RES",mount_tag=results,security_model=none,id=results \
        </dev/null >"$WORK/qemu.log" 2>&1 &
QEMU_PID=$!
wait "$QEMU_PID"
QRC=$?
QEMU_PID=
T_BOOT=$(( $(date +%s) - T0 ))

# --- 4. report ---
pass=0 fail=0 skip=0
if [ -f "$RES/results.txt" ]; then
        while IFS= read -r line; do
                echo "$line"
                case "$line" in
                PASS:*) pass=$((pass + 1)) ;;
                FAIL:*) fail=$((fail + 1)) ;;
                SKIP:*) skip=$((skip + 1)) ;;
                esac
        done <"$RES/results.txt"
fi
if [ ! -f "$RES/done" ]; then
        echo "FAIL: guest ran the suite to the end (qemu rc=$QRC after ${T_BOOT}s; see $WORK/serial.log)"
        fail=$((fail + 1))
fi
if [ "$fail" -gt 0 ]; then
        echo "--- serial console (last 60 lines) ---"
        tail -60 "$WORK/serial.log" 2>/dev/null | tr -d '\r'
        [ -s "$WORK/qemu.log" ] && { echo "--- qemu ---"; tail -10 "$WORK/qemu.log"; }
        for j in "$RES"/journal-rtd-*.txt; do
                [ -f "$j" ] || continue
                echo "--- rtd's journal in the guest, ${j##*/journal-rtd-} (repeats dropped, last 25) ---"
                sed 's/^\[ *[0-9.]*\] //' "$j" | awk '!seen[$0]++' | tail -25
        done
fi
echo "wall time: total $(( $(date +%s) - T_START ))s (image ${T_IMAGE}s, boot+tests+poweroff ${T_BOOT}s; guest: $(cat "$RES/timing" 2>/dev/null || echo n/a))"
echo "$pass passed, $fail failed, $skip skipped"
RC=0
[ "$fail" -eq 0 ] || RC=1
exit $RC
