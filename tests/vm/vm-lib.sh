# SPDX-License-Identifier: MIT
# Sourced by the three VM runners (run-vm-tests.sh, run-vm-slurm.sh, run-vm-cmd.sh) for what they share: set
# HERE (this folder) and VM_TAG (the log prefix) first. Gives SRC, CACHE, log, skip_all, stage_payload
# (stage-payload.sh) and the steps below; each runner keeps only its own guest, payload and report.
SRC=$(cd "$HERE/../.." && pwd)
CACHE=${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}
PIDS=()
WORK=

log() { echo "[$VM_TAG $(date +%T)] $*" >&2; }
skip_all() { echo "SKIP: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 77; }
. "$HERE/stage-payload.sh"

# vm_need USAGE: BUILD (a build dir) made absolute, else the usage and exit 2; skips (77) when not root or
# a tool is missing.
vm_need() {
        local t
        [ -n "${BUILD:-}" ] && [ -d "$BUILD" ] || { echo "usage: $1" >&2; exit 2; }
        BUILD=$(cd "$BUILD" && pwd)
        [ "$(id -u)" = 0 ] || skip_all "needs root (debootstrap, chroot, image build)"
        for t in qemu-system-x86_64 debootstrap mkfs.ext4 flock timeout; do
                command -v "$t" >/dev/null || skip_all "$t not installed (run tools/setup-deps)"
        done
}

# vm_image: IMGDIR, the cached image (rebuilt when build-image.sh changes or the cache is gone), and T_IMAGE.
vm_image() {
        local t0
        t0=$(date +%s)
        IMGDIR=$(bash "$HERE/build-image.sh" "$CACHE" | tail -1) ||
                { echo "FAIL: build the guest image"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
        T_IMAGE=$(( $(date +%s) - t0 ))
        log "image ready in ${T_IMAGE}s: $IMGDIR"
}

# vm_work PREFIX: WORK, a fresh work directory under /var/tmp, removed at exit (vm_cleanup).
vm_work() {
        WORK=$(mktemp -d "/var/tmp/$1.XXXXXX")
        trap 'vm_cleanup' EXIT
        trap 'exit 143' TERM INT     # meson's timeout: still stop QEMU and keep the logs
}

# The EXIT trap: stops the guests still running; keeps WORK (without the payload) when RC is not 0 or with
# RTD_VM_KEEP=1, for its serial logs and results.
vm_cleanup() {
        local p
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
        [ -n "$WORK" ] && [ -d "$WORK" ] || return 0
        if [ "${RTD_VM_KEEP:-0}" = 1 ] || [ "${RC:-1}" != 0 ]; then
                log "logs kept in $WORK"
                rm -rf "$WORK/payload"
        else
                rm -rf "$WORK"
        fi
}

# vm_boot NAME KERNEL INITRD RESULTS APPEND [QEMU-ARG...]: one TCG guest of the cached image in the background
# (snapshot=on: the cache is never written), $PAY shared read-only as "payload" and RESULTS writable as
# "results", its console in WORK/serial$NAME.log; bounded by TIMEOUT seconds. Its pid is appended to PIDS.
vm_boot() {
        local name=$1 kernel=$2 initrd=$3 res=$4 append=$5
        shift 5
        timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 \
                -accel tcg,thread=multi -cpu max,vendor=GenuineIntel \
                -machine q35 -display none -no-reboot -nodefaults -serial "file:$WORK/serial$name.log" \
                -kernel "$IMGDIR/$kernel" -initrd "$IMGDIR/$initrd" \
                -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 loglevel=4$append" \
                -drive file="$IMGDIR/rootfs.ext4",format=raw,if=virtio,cache=unsafe,snapshot=on \
                -virtfs local,path="$PAY",mount_tag=payload,security_model=none,readonly=on,id=payload \
                -virtfs local,path="$res",mount_tag=results,security_model=none,id=results \
                "$@" </dev/null >"$WORK/qemu$name.log" 2>&1 &
        PIDS+=($!)
}

# vm_tally FILE...: prints the guests' PASS/FAIL/SKIP lines and counts them in pass, fail and skip.
pass=0 fail=0 skip=0
vm_tally() {
        local f line
        for f in "$@"; do
                [ -f "$f" ] || continue
                while IFS= read -r line; do
                        echo "$line"
                        case "$line" in
                        PASS:*) pass=$((pass + 1)) ;;
                        FAIL:*) fail=$((fail + 1)) ;;
                        SKIP:*) skip=$((skip + 1)) ;;
                        esac
                done <"$f"
        done
}

# vm_end: the closing count, and the exit status (RC, which vm_cleanup reads).
vm_end() {
        echo "$pass passed, $fail failed, $skip skipped"
        RC=0
        [ "$fail" -eq 0 ] || RC=1
        exit $RC
}
