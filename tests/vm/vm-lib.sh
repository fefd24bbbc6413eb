# SPDX-License-Identifier: MIT
# Sourced by the three VM runners (run-vm-tests.sh, run-vm-slurm.sh, run-vm-cmd.sh) for what they share: set
# HERE (this folder) and VM_TAG (the log prefix) first. Gives SRC, CACHE, log, skip_all, stage_payload
# (stage-payload.sh) and the steps below; each runner keeps only its own guest, payload and report.
SRC=$(cd "$HERE/../.." && pwd)
CACHE=${RTD_VM_CACHE:-/var/cache/rtd-tests/vm}
PIDS=()
WATCH=()
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
        for p in "${PIDS[@]}" "${WATCH[@]}"; do kill "$p" 2>/dev/null; done
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
# "results", its console in WORK/serial$NAME.log, its monitor on WORK/monitor$NAME.sock; bounded by TIMEOUT
# seconds and by vm_watchdog. Its pid is appended to PIDS.
# TCG runs every vCPU of a guest in one host thread (thread=single; RTD_VM_TCG_THREAD=multi for one thread per
# vCPU): with multi-threaded TCG (QEMU 7.2, the 6.1 guest kernel) live patching of hot kernel text, which every
# tracepoint attach and detach does (rtd's BPF collector at each start and stop; `echo 1 >
# .../events/irq/softirq_entry/enable` as well), now and then leaves every vCPU spinning in handle_softirqs at the
# patched site for good (soft lockups on all CPUs; the patching task never returns). Seen at rtd's start and at
# its stop in the guest tier, and without rtd by toggling 8 softirq/irq/sched tracepoints on and off through
# tracefs: hung in round 22 (~350 toggles) multi-threaded; single-threaded, 400 rounds (6400 toggles) ran clean in
# 392 s (one run each), and the guest booted to its script in 37 s instead of 72 s on this loaded 2-CPU host.
# sysrq_always_enabled and unknown_nmi_panic (with panic_print=1: every task's stack) are for vm_watchdog's dump
# of a hung guest; nothing else sends the guest a SysRq key or an NMI.
vm_boot() {
        local name=$1 kernel=$2 initrd=$3 res=$4 append=$5
        shift 5
        timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 \
                -accel tcg,thread=${RTD_VM_TCG_THREAD:-single} -cpu max,vendor=GenuineIntel \
                -machine q35 -display none -no-reboot -nodefaults -serial "file:$WORK/serial$name.log" \
                -kernel "$IMGDIR/$kernel" -initrd "$IMGDIR/$initrd" \
                -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 loglevel=4 sysrq_always_enabled unknown_nmi_panic panic_print=1$append" \
                -drive file="$IMGDIR/rootfs.ext4",format=raw,if=virtio,cache=unsafe,snapshot=on \
                -virtfs local,path="$PAY",mount_tag=payload,security_model=none,readonly=on,id=payload \
                -virtfs local,path="$res",mount_tag=results,security_model=none,id=results \
                -monitor "unix:$WORK/monitor$name.sock,server=on,wait=off" \
                "$@" </dev/null >"$WORK/qemu$name.log" 2>&1 &
        PIDS+=($!)
        vm_watchdog "$name" $! "$res" </dev/null >"$WORK/watchdog$name.log" 2>&1 &
        WATCH+=($!)
}

# vm_monitor NAME COMMAND: one command to guest NAME's QEMU monitor (HMP).
vm_monitor() {
        /usr/bin/python3 - "$WORK/monitor$1.sock" "$2" <<'EOP'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
time.sleep(1)
EOP
} 2>/dev/null

# vm_watchdog NAME PID RESULTS (started by vm_boot): a guest that hangs must not burn the whole TIMEOUT. The
# guest's scripts write their uptime to RESULTS/heartbeat every 5 s (stage-payload.sh's heartbeat); when it (before
# the first one: the console) has not changed for RTD_VM_STALL seconds (default 180; a slow step does not stop
# the heartbeat, only a hung guest does), the guest is hung: its kernel is asked for the blocked tasks and every
# CPU's backtrace (SysRq w, l), then an NMI makes it panic with every task's stack on the console; then QEMU
# (PID, the timeout wrapping it) is stopped. The reason goes to WORK/hung$NAME for the runner's report.
vm_watchdog() {
        local name=$1 pid=$2 res=$3 stall=${RTD_VM_STALL:-180} sig prev="" last now i
        last=$(date +%s)
        # Alive and not a zombie: a guest that ended waits to be reaped until its runner gets to it (n2 after n1).
        alive() { local st; st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ]; }
        while alive; do
                sleep 5
                # Once there is a heartbeat it alone tells: a hung kernel may go on printing (soft lockups).
                if [ -s "$res/heartbeat" ]; then
                        sig=$(cat "$res/heartbeat" 2>/dev/null)
                else
                        sig=$(stat -c %s "$WORK/serial$name.log" 2>/dev/null)
                fi
                now=$(date +%s)
                if [ "$sig" != "$prev" ]; then
                        prev=$sig last=$now
                        continue
                fi
                [ $((now - last)) -ge "$stall" ] || continue
                echo "no progress for $((now - last)) s (no heartbeat, or no console output before the first; the guest's last" \
                     "heartbeat at uptime $(cut -d' ' -f1 "$res/heartbeat" 2>/dev/null || echo none) s):" \
                     "SysRq w and l, then an NMI, then QEMU stopped" >"$WORK/hung$name"
                log "guest${name:+ $name} hung: $(cat "$WORK/hung$name")"
                vm_monitor "$name" "sendkey alt-sysrq-w"
                vm_monitor "$name" "sendkey alt-sysrq-l"
                sleep 20
                # A key sent while the other was still being handled can be lost (seen once: no "Show Blocked
                # State"): once more, alone.
                if ! grep -q "sysrq: Show Blocked State" "$WORK/serial$name.log" 2>/dev/null; then
                        vm_monitor "$name" "sendkey alt-sysrq-w"
                        sleep 10
                fi
                vm_monitor "$name" nmi
                # The panic (panic=-1, -no-reboot) ends QEMU once the dump is out.
                for i in $(seq 60); do alive || return 0; sleep 1; done
                kill "$pid" 2>/dev/null
                return 0
        done
}

# vm_hang_report NAME: when vm_watchdog stopped guest NAME, a FAIL line (counted) and the kernel's dump.
vm_hang_report() {
        local name=$1
        [ -f "$WORK/hung$name" ] || return 0
        echo "FAIL: guest${name:+ $name} stayed responsive (hung: $(cat "$WORK/hung$name"); see $WORK/serial$name.log)"
        fail=$((fail + 1))
        # The dump's tasks that matter: blocked (D) and runnable (R), listed, then each with its stack, and the CPUs'.
        tr -d '\r' <"$WORK/serial$name.log" | sed -n '/sysrq: Show/,$p' | sed 's/^\[ *[0-9.]*\] //' \
                >"$WORK/dump$name.txt"
        echo "--- guest${name:+ $name}: what the kernel said before (soft lockups, RCU stalls, hung tasks: first 20) ---"
        tr -d '\r' <"$WORK/serial$name.log" | sed -n '/sysrq: Show Blocked State/q; p' |
                grep -aE 'soft lockup|rcu: INFO|blocked for more than|RIP: 0010|BUG|Oops' | head -20
        echo "--- guest${name:+ $name}: tasks blocked (D) or runnable (R) when it hung (the kernel's dump) ---"
        grep -E '^task:.* state:[DR]' "$WORK/dump$name.txt" | sed 's/ *stack:.* pid:/ pid:/; s/ *ppid:.*//' | sort -u | head -80
        echo "--- guest${name:+ $name}: their stacks and the CPUs' (first 400 lines; all in $WORK/serial$name.log) ---"
        awk '/^task:/ { p = $0 ~ /state:[DR]/ } /^(sysrq:|NMI backtrace|Kernel panic|Uhhuh|rcu: INFO)/ { p = 1 } p' \
                "$WORK/dump$name.txt" | head -400
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
