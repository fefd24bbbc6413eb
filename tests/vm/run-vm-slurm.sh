#!/bin/bash
# SPDX-License-Identifier: MIT
# The two-node Slurm cluster test (issue 16 point 3, suite `vm`): two QEMU TCG guests of the cached vm image
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
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-${RTD_BUILD_DIR:-}}
CACHE=${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}
TIMEOUT=${RTD_VM_TIMEOUT:-1200}

log() { echo "[vm-slurm $(date +%T)] $*" >&2; }
. "$HERE/stage-payload.sh"
skip_all() { echo "SKIP: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 77; }

[ -n "$BUILD" ] && [ -d "$BUILD" ] || { echo "usage: $0 BUILD_DIR (or RTD_BUILD_DIR)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
[ "$(id -u)" = 0 ] || skip_all "needs root (debootstrap, chroot, image build)"
for t in qemu-system-x86_64 debootstrap mkfs.ext4 flock timeout; do
        command -v "$t" >/dev/null || skip_all "$t not installed (run tools/setup-deps)"
done
[ -f "$BUILD/slurm/spank_rtd.so" ] ||
        skip_all "$BUILD/slurm/spank_rtd.so not built (libslurm-dev missing at meson setup, -Dslurm=disabled or a sanitizer build)"

T_START=$(date +%s)
WORK=$(mktemp -d /var/tmp/rtd-vm-slurm.XXXXXX)
PIDS=()
cleanup() {
        local p
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
        if [ "${RTD_VM_KEEP:-0}" = 1 ] || [ "${RC:-1}" != 0 ]; then
                log "logs kept in $WORK (serial-n*.log, results-n*/)"
                rm -rf "$WORK/payload"
        else
                rm -rf "$WORK"
        fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# --- 1. the image (cached; rebuilt when build-image.sh changes or the cache is gone) ---
T0=$(date +%s)
IMGDIR=$(bash "$HERE/build-image.sh" "$CACHE" | tail -1) || { echo "FAIL: build the guest image"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
T_IMAGE=$(( $(date +%s) - T0 ))
log "image ready in ${T_IMAGE}s: $IMGDIR"

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
        timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 \
                -accel tcg,thread=multi -cpu max,vendor=GenuineIntel -m 1G -smp 2 \
                -machine q35 -display none -no-reboot -nodefaults -serial "file:$WORK/serial-$n.log" \
                -kernel "$IMGDIR/vmlinuz-bpo" -initrd "$IMGDIR/initrd-bpo.img" \
                -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 loglevel=4 rtdvm.node=$n" \
                -drive file="$IMGDIR/rootfs.ext4",format=raw,if=virtio,cache=unsafe,snapshot=on \
                -netdev "socket,id=link,$2" -device "virtio-net-pci,netdev=link,mac=52:54:00:72:74:0${n#n}" \
                -virtfs local,path="$PAY",mount_tag=payload,security_model=none,readonly=on,id=payload \
                -virtfs local,path="$WORK/results-$n",mount_tag=results,security_model=none,id=results \
                </dev/null >"$WORK/qemu-$n.log" 2>&1 &
        PIDS+=($!)
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
pass=0 fail=0 skip=0
for n in n2 n1; do
        [ -f "$WORK/results-$n/results.txt" ] || continue
        while IFS= read -r line; do
                echo "$line"
                case "$line" in
                PASS:*) pass=$((pass + 1)) ;;
                FAIL:*) fail=$((fail + 1)) ;;
                SKIP:*) skip=$((skip + 1)) ;;
                esac
        done <"$WORK/results-$n/results.txt"
done
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
echo "$pass passed, $fail failed, $skip skipped"
RC=0
[ "$fail" -eq 0 ] || RC=1
exit $RC
