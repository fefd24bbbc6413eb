#!/bin/bash
# SPDX-License-Identifier: MIT
# The two-node Slurm cluster test (issue 16 point 3, suite `vm-slurm`): two QEMU TCG guests of the cached vm image
# (its bookworm-backports kernel, on which rtd's BPF collector loads; `-smp 2 -m 1G` each, snapshot=on) linked by a private socket netdev, each with munged, slurmd and the rtd of
# this build (with the SPANK plugin); n1 also runs slurmctld and Prometheus. tests/vm/guest-slurm.sh runs the
# cases in the guests; this prints one line per check, the PromQL figures and knob snapshots, and
# "N passed, N failed, N skipped".
#
# Usage: run-vm-slurm.sh [BUILD_DIR]   (or RTD_BUILD_DIR=...; run as root)
# Env:   RTD_VM_CACHE   image cache (default /var/cache/rtd-tests/vm)
#        RTD_VM_KEEP=1  keep the work directory (serial logs, guest journals, Slurm logs) even on success
#        RTD_VM_TIMEOUT seconds for the whole run (default 1200)
# Exit 1 on any failure or when a guest did not finish, 77 if this machine cannot run it at all.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VM_TAG=vm-slurm
. "$HERE/vm-lib.sh"
BUILD=${1:-${RTD_BUILD_DIR:-}}
TIMEOUT=${RTD_VM_TIMEOUT:-1200}
vm_need "$0 BUILD_DIR (or RTD_BUILD_DIR)"
[ -f "$BUILD/slurm/spank_rtd.so" ] ||
        skip_all "$BUILD/slurm/spank_rtd.so not built (libslurm-dev missing at meson setup, -Dslurm=disabled or a sanitizer build)"

T_START=$(date +%s)
vm_work rtd-vm-slurm
vm_image

# --- 2. the payload, one for both guests: this build, the guest script, the fleet's Prometheus files, a munge key ---
PAY=$WORK/payload
stage_payload "$BUILD" "$PAY" "$SRC"
install -m 0755 "$HERE/guest-slurm.sh" "$PAY/guest-entry.sh"
mkdir -p "$PAY/prometheus"
cp "$SRC/docs/prometheus/fleet.yml" "$SRC/docs/prometheus/rtd-rules.yml" "$PAY/prometheus/"
head -c 1024 /dev/urandom >"$PAY/munge.key"
chmod -R a+rX "$PAY"

# --- 3. boot both; n1 listens on the link, n2 connects ---
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
boot() {        # boot NODE NETDEV-ARGS
        local n=$1
        mkdir -p "$WORK/results-$n"
        vm_boot "-$n" vmlinuz-bpo initrd-bpo.img "$WORK/results-$n" " rtdvm.node=$n" -m 1G -smp 2 \
                -netdev "socket,id=link,$2" -device "virtio-net-pci,netdev=link,mac=52:54:00:72:74:0${n#n}"
}
T0=$(date +%s)
log "booting n1 and n2 (QEMU TCG, -smp 2 -m 1G each; link 127.0.0.1:$PORT; timeout ${TIMEOUT}s)"
boot n1 "listen=127.0.0.1:$PORT"
sleep 2
boot n2 "connect=127.0.0.1:$PORT"
wait "${PIDS[0]}"
Q1=$?
# n1 tells n2 to finish over Slurm; give it a minute to write its results, then stop it.
for i in $(seq 60); do kill -0 "${PIDS[1]}" 2>/dev/null || break; sleep 1; done
kill "${PIDS[1]}" 2>/dev/null
wait "${PIDS[1]}"
PIDS=()
T_RUN=$(( $(date +%s) - T0 ))

# --- 4. report ---
vm_tally "$WORK/results-n2/results.txt" "$WORK/results-n1/results.txt"
vm_hang_report -n1
vm_hang_report -n2
for n in n1 n2; do
        if [ ! -f "$WORK/results-$n/done" ]; then
                echo "FAIL: guest $n ran to the end (n1's qemu rc=$Q1 after ${T_RUN}s; see $WORK/serial-$n.log)"
                fail=$((fail + 1))
        fi
done
echo "--- figures (n1's Prometheus; knob snapshots taken by the steps on each node) ---"
cat "$WORK/results-n1/figures.txt" 2>/dev/null
if [ "$fail" -gt 0 ]; then
        for n in n1 n2; do
                echo "--- $n: console (last 40 lines) ---"
                tail -40 "$WORK/results-$n/console.txt" 2>/dev/null || tail -40 "$WORK/serial-$n.log" | tr -d '\r'
        done
fi
echo "wall time: total $(( $(date +%s) - T_START ))s (image ${T_IMAGE}s, both guests' boot+cases+poweroff ${T_RUN}s;" \
     "$(cat "$WORK"/results-n*/timing 2>/dev/null | tr '\n' ' ')"
vm_end
