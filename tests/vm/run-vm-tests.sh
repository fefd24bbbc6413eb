#!/bin/bash
# SPDX-License-Identifier: MIT
# The 'vm' test suite: boots the freshly built rtd in a QEMU (TCG) guest with systemd as PID 1, pure
# cgroup v2 and 2 sockets x 2 cores x 2 threads, runs tests/vm/guest-tests.sh there and reports.
#
# Usage: run-vm-tests.sh [BUILD_DIR]   (or RTD_BUILD_DIR=...; run as root)
# Env:   RTD_VM_CACHE   image cache (default /var/cache/rtd-tests/vm)
#        RTD_VM_KEEP=1  keep the work directory (serial log, guest journal) even on success
#        RTD_VM_TIMEOUT seconds for the whole boot (default 2400; emulation is 20-50x slower than native)
#        RTD_VM_STALL   seconds without a guest heartbeat or console output before the guest counts as hung:
#                       its kernel dumps its tasks to serial.log, QEMU is stopped (default 180; vm-lib.sh)
# Output: one line per guest check, then "N passed, N failed, N skipped"; exit 1 if anything failed
# or the guest did not finish, 77 if this machine cannot run the suite at all.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VM_TAG=vm
. "$HERE/vm-lib.sh"
BUILD=${1:-${RTD_BUILD_DIR:-}}
TIMEOUT=${RTD_VM_TIMEOUT:-2400}
SMP=8,sockets=2,cores=2,threads=2
vm_need "$0 BUILD_DIR (or RTD_BUILD_DIR)"

T_START=$(date +%s)
vm_work rtd-vm
vm_image

# --- 2. the payload: staged install of this build + the guest tests ---
PAY=$WORK/payload
RES=$WORK/results
mkdir -p "$PAY/stage" "$RES"
stage_payload "$BUILD" "$PAY" "$SRC"
install -m 0755 "$HERE/guest-tests.sh" "$PAY/guest-entry.sh"
install -m 0644 "$HERE/guest-crash.sh" "$PAY/guest-crash.sh"

# --- 3. boot ---
T0=$(date +%s)
log "booting QEMU TCG, -smp $SMP (several minutes; timeout ${TIMEOUT}s)"
vm_boot "" vmlinuz initrd.img "$RES" "" -m 2G -smp "$SMP"
wait "${PIDS[0]}"
QRC=$?
PIDS=()
T_BOOT=$(( $(date +%s) - T0 ))

# --- 4. report ---
vm_tally "$RES/results.txt"
vm_hang_report ""
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
vm_end
