#!/bin/bash
# SPDX-License-Identifier: MIT
# For run-vm-cmd.sh on the image's second kernel (RTD_VM_KERNEL=bpo: bookworm-backports' 6.12, which has the
# fair deadline server and the open-coded task iterator; no kernel lockdown, debugfs mounted by systemd).
# What the development host cannot show (its kernel's lockdown refuses every debugfs write):
#   - [Tuning] FairServerRuntimeUSec=0 turns the fair server off on the reserved CPU only, under rtd.service's
#     capabilities, and every stop puts it back as found: a clean stop, and kill -9 then the unit's
#     ExecStopPost=rtd --restore;
#   - the every-thread baseline's BPF object (kernel >= 6.7) loads under rtd.service (CAP_BPF, CAP_PERFMON,
#     no CAP_SYS_ADMIN): no "every-thread baseline" fallback once a CPU is reserved.
# Prints one PASS:/FAIL: line per check; exits 1 on any failure (run-vm-cmd.sh passes that on).
set -u
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
check() {       # check NAME DETAIL 'EXPR'
        if eval "$3"; then pass "$1 ($2)"; else fail "$1 (got: $2)"; fi
}

FS=/sys/kernel/debug/sched/fair_server
CONF='[Daemon]
Socket=/run/rtd/rtd.sock
MetricsListen=no
[Reserve]
CPUs=1
Backend=systemd
[Tuning]
FairServerRuntimeUSec=0'

echo "kernel $(uname -r), lockdown: $(cat /sys/kernel/security/lockdown 2>/dev/null || echo none)"
systemd-sysusers >/dev/null 2>&1; systemd-tmpfiles --create >/dev/null 2>&1
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
orig1=$(cat $FS/cpu1/runtime 2>&1) orig0=$(cat $FS/cpu0/runtime 2>&1)
check "the fair server's runtime is readable here (6.12, debugfs)" "cpu0=$orig0 cpu1=$orig1" \
        '[[ $orig1 =~ ^[0-9]+$ ]] && [ "$orig1" != 0 ]'

mkdir -p "$RTD_SYSCONFDIR/rtd" /etc/rtd
printf '%s\n' "$CONF" | tee "$RTD_SYSCONFDIR/rtd/rtd.conf" >/etc/rtd/rtd.conf
mkdir -p /run/systemd/system/rtd.service.d
printf '[Service]\nExecStart=\nExecStart=%s --config /etc/rtd/rtd.conf\n' "$RTD_BIN" \
        >/run/systemd/system/rtd.service.d/vmtest.conf
systemctl daemon-reload

start() {
        systemctl reset-failed rtd.service 2>/dev/null
        timeout 300 systemctl start rtd.service || return 1
        for _ in $(seq 60); do rtctl status >/dev/null 2>&1 && return 0; sleep 2; done
        return 1
}

for how in stop kill; do
        if ! start; then
                fail "$how: rtd.service starts"
                journalctl -b -u rtd.service --no-pager | tail -30
                continue
        fi
        st=$(rtctl status --json 2>/dev/null)
        k=$(jq -c '.reservation.knobs[] | select(.name == "fair_server.cpu1.runtime_ns")' <<<"$st")
        now1=$(cat $FS/cpu1/runtime) now0=$(cat $FS/cpu0/runtime)
        check "$how: FairServerRuntimeUSec=0 set on the reserved CPU 1 only, under rtd.service" \
                "cpu0=$now0 cpu1=$now1 knob=$k" \
                '[ "$now1" = 0 ] && [ "$now0" = "$orig0" ] && [ "$(jq -r .state <<<"$k")" = set ] && [ "$(jq -r .original <<<"$k")" = "$orig1" ]'
        res=$(jq -c '.reservation.residual[] | select(.source == "fair server")' <<<"$st")
        check "$how: the residual list says the fair server no longer reaches CPU 1" "$res" \
                '[ "$(jq -r .reaches <<<"$res")" = false ]'
        fb=$(jq -r '.metrics.fallbacks // ""' <<<"$st")
        check "$how: the every-thread baseline's object loaded under rtd.service (no fallback named)" \
                "collector=$(jq -r .metrics.collector <<<"$st") fallbacks=${fb:-none}" \
                '[ "$(jq -r .metrics.collector <<<"$st")" = bpf ] && [[ $fb != *every-thread* ]]'
        if [ $how = stop ]; then
                timeout 300 systemctl stop rtd.service
        else
                # kill -9: the unit's ExecStopPost=rtd --restore replays the journal; stop it before
                # Restart=on-failure brings up a new rtd that would adopt the reservation.
                systemctl kill -s SIGKILL --kill-who=main rtd.service
                timeout 300 systemctl stop rtd.service
        fi
        back1=$(cat $FS/cpu1/runtime) back0=$(cat $FS/cpu0/runtime)
        check "$how: the fair server is back as found after the $how" "cpu0=$back0 cpu1=$back1" \
                '[ "$back1" = "$orig1" ] && [ "$back0" = "$orig0" ]'
done
journalctl -b -u rtd.service --no-pager | grep -iE "fair|every-thread|restore" | tail -15
exit $failed
