# SPDX-License-Identifier: MIT
# Not a test: a guest script for run-vm-cmd.sh that shows why vm-lib.sh runs TCG single-threaded. It turns 8 hot
# tracepoints (softirq, IRQ, sched, timer, IPI) on and off through tracefs ROUNDS times, as rtd's BPF collector
# does at each start and stop: each toggle live-patches kernel text (static keys and calls, text_poke_bp).
#   RTD_VM_TCG_THREAD=multi RTD_VM_STALL=90 RTD_VM_SMP=8,sockets=2,cores=2,threads=2 \
#           tests/vm/run-vm-cmd.sh build tests/vm/guest-tcg-poke.sh
# With QEMU 7.2's multi-threaded TCG and the 6.1 guest the guest hung in round 22 (every vCPU in handle_softirqs,
# vm_watchdog's report); single-threaded it ran all 400 rounds in 392 s.
ROUNDS=${ROUNDS:-400}
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
T=/sys/kernel/tracing/events
dd if=/dev/vda of=/dev/null bs=64k 2>/dev/null &      # block I/O: softirqs meanwhile
( while :; do cat /proc/interrupts >/dev/null; done ) &
EV="irq/softirq_entry irq/softirq_exit irq/irq_handler_entry irq/irq_handler_exit sched/sched_switch sched/sched_wakeup
    timer/hrtimer_expire_entry ipi/ipi_raise"
t0=$(cut -d' ' -f1 /proc/uptime)
for i in $(seq "$ROUNDS"); do
        for e in $EV; do echo 1 >"$T/$e/enable"; done
        for e in $EV; do echo 0 >"$T/$e/enable"; done
        [ $((i % 10)) = 0 ] && echo "round $i at uptime $(cut -d' ' -f1 /proc/uptime)"
done
echo "$ROUNDS rounds in $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{print b-a}') s"
