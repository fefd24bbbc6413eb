#!/bin/bash
# SPDX-License-Identifier: MIT
# The VM tier fails fast on a hung guest (vm-lib.sh's vm_watchdog): a guest whose every CPU runs a SCHED_FIFO
# spinner with RT throttling off (nothing else runs, not even the heartbeat or `timeout`) must be stopped after
# RTD_VM_STALL seconds, not at the runner's timeout, and the report must carry the guest kernel's dump.
#
# Usage: test-vm-watchdog.sh [BUILD_DIR]   (or RTD_BUILD_DIR=...; run as root). Exit 77 where VMs cannot run.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-${RTD_BUILD_DIR:-}}
STALL=20     # short: the heartbeat beats every 5 s; the test is the dump and the stop, not the limit
OUT=$(mktemp -d /tmp/rtd-vm-watchdog.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
cat >"$OUT/hang.sh" <<'EOS'
sysctl -q kernel.sched_rt_runtime_us=-1
echo "hanging the guest at uptime $(cut -d' ' -f1 /proc/uptime)"
sleep 1
for c in $(seq 0 $(( $(nproc) - 1 ))); do chrt -f 10 taskset -c "$c" sh -c 'while :; do :; done' & done
wait
EOS
T0=$(date +%s)
RTD_VM_STALL=$STALL RTD_VM_SMP=2 RTD_VM_TIMEOUT=1200 RTD_VM_CMD_OUT=$OUT/results \
        bash "$HERE/run-vm-cmd.sh" "$BUILD" "$OUT/hang.sh" >"$OUT/log" 2>&1
RC=$?
T=$(( $(date +%s) - T0 ))
if [ "$RC" = 77 ]; then cat "$OUT/log"; exit 77; fi
pass=0 fail=0
check() {
        if eval "$3"; then echo "PASS: $1 ($2)"; pass=$((pass + 1)); else echo "FAIL: $1 (got: $2)"; fail=$((fail + 1)); fi
}
check "the hang script ran in the guest" "$(grep -c 'hanging the guest' "$OUT/log") line(s)" 'grep -q "hanging the guest" "$OUT/log"'
check "the runner fails (exit 1) on the hung guest" "exit $RC" '[ "$RC" = 1 ]'
check "the report says the guest hung, after how long" "$(grep -m1 '^FAIL: guest' "$OUT/log")" \
        'grep -q "^FAIL: guest stayed responsive (hung: no progress for" "$OUT/log"'
check "the report carries the kernel's dump: blocked tasks, the NMI panic, a spinner's state" \
        "$(for m in 'sysrq: Show Blocked State' 'Kernel panic - not syncing: NMI' '^task:sh +state:R'; do
                grep -qE "$m" "$OUT/log" && echo "'$m'"; done | paste -sd' ') found" \
        'grep -q "sysrq: Show Blocked State" "$OUT/log" && grep -q "Kernel panic - not syncing: NMI" "$OUT/log" &&
         grep -qE "^task:sh +state:R" "$OUT/log"'
# Boot (1-3 min loaded) + STALL + the dump: far below the 1200 s the guest was given.
check "QEMU stopped well before its own timeout" "${T}s for RTD_VM_STALL=${STALL}s, timeout 1200s" '[ "$T" -lt 900 ]'
if [ "$fail" -gt 0 ]; then echo "--- run-vm-cmd.sh's output (last 60 lines) ---"; tail -60 "$OUT/log"; fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
