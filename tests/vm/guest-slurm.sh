#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs INSIDE each guest of run-vm-slurm.sh (issue 16 point 3): a two-node Slurm 22.05 cluster from Debian 12 with
# one rtd per node (the build's, installed from the payload share) and the SPANK plugin, linked by a private
# network 10.77.0.0/24. The kernel command line says which node this is (rtdvm.node=n1|n2). Both nodes run
# munged (one key), rtd and slurmd; n1 also runs slurmctld and Prometheus (docs/prometheus/fleet.yml scraping
# both nodes' rtd over the link) and drives the cases as an unprivileged user; n2 waits until n1 is done.
# Results: "PASS:|FAIL:|SKIP: name" lines in /mnt/results/results.txt, figures in /mnt/results/figures.txt.
#
# `guest-slurm.sh snap PHASE` (run by the steps themselves, on every node, as the user) prints one line of this
# node's knobs: the IRQs whose mask holds CPU 1, the workqueue cpumask, an ordinary task's CPUs and a digest
# of every IRQ mask with the workqueue mask.
set -u

PAY=/mnt/payload
RES=/mnt/results
LEASED=1        # each node: CPU 0 housekeeping, CPU 1 what the steps bind to and lease
USER_NAME=rtdslurm-u1

expand() {      # "0-2,5" -> " 0 1 2 5 "
        local part out=" "
        IFS=, read -ra parts <<<"$1"
        for part in "${parts[@]}"; do
                [ -z "$part" ] && continue
                if [[ $part == *-* ]]; then out+="$(seq -s' ' "${part%-*}" "${part#*-}") "; else out+="$part "; fi
        done
        echo "$out"
}

if [ "${1:-}" = snap ]; then
        irqs="" all=""
        for d in /proc/irq/[0-9]*; do
                m=$(cat "$d/smp_affinity_list" 2>/dev/null) || continue
                all+="${d##*/}:$m "
                [[ $(expand "$m") == *" $LEASED "* ]] && irqs+="${d##*/},"
        done
        wq=$(cat /sys/devices/virtual/workqueue/cpumask 2>/dev/null)
        hog=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$(cat /run/rtdvm-hog.pid)/status" 2>/dev/null)
        echo "SNAP node=$(hostname) phase=$2 irqs_with_cpu$LEASED=${irqs%,} wq_cpumask=$wq other_task_cpus=$hog" \
             "knobs=$(echo "$all$wq" | md5sum | cut -c1-8)"
        exit 0
fi

exec > >(tee -a "$RES/console.txt") 2>&1
"$PAY/heartbeat" &      # for the host's watchdog (vm-lib.sh)
. "$PAY/env"
export PATH=$(dirname "$RTCTL_BIN"):$(dirname "$RTD_BIN"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
NODE=$(sed -n 's/.*rtdvm\.node=\(n[12]\).*/\1/p' /proc/cmdline)
IP=10.77.0.${NODE#n}
: >"$RES/results.txt"
: >"$RES/figures.txt"
pass() { echo "PASS: $NODE: $*" | tee -a "$RES/results.txt"; }
fail() { echo "FAIL: $NODE: $*" | tee -a "$RES/results.txt"; }
check() {       # check NAME DETAIL 'EXPR' (EXPR eval'd: it sees the caller's variables)
        if eval "$3"; then pass "$1${2:+ ($2)}"; else fail "$1${2:+ (got: $2)}"; fi
}
figure() { echo "$*" | tee -a "$RES/figures.txt"; }
sec() { echo; echo "===== $NODE: $* ($(cut -d' ' -f1 /proc/uptime)s) ====="; }
finish() {
        journalctl -b --no-pager -o short-monotonic >"$RES/journal.txt" 2>&1
        cp /var/log/slurm/*.log "$RES/" 2>/dev/null
        echo "guest $NODE: boot to script ${T0}s, script $(awk -v a="$T0" -v b="$(cut -d' ' -f1 /proc/uptime)" \
             'BEGIN{printf "%.0f", b-a}')s" >"$RES/timing"
        sync; touch "$RES/done"; sync
        exit 0
}
T0=$(cut -d' ' -f1 /proc/uptime)

# ------------------------------------------------------------------------------------------------
sec "node set-up"
IF=$(for i in /sys/class/net/*; do [ "${i##*/}" = lo ] || echo "${i##*/}"; done | head -1)
ip link set "$IF" up && ip addr add "$IP/24" dev "$IF"
hostname "$NODE"
printf '10.77.0.1 n1\n10.77.0.2 n2\n' >>/etc/hosts
check "private link up" "$IF $(ip -br addr show "$IF" 2>/dev/null | tr -s ' ')" '[ -n "$IF" ] && ip -br addr show "$IF" | grep -q "$IP/"'
check "2 CPUs" "$(nproc --all)" '[ "$(nproc --all)" = 2 ]'

# The unprivileged submitter, with the same uid on both nodes (munge carries the uid).
useradd -u 4242 -m -s /bin/bash "$USER_NAME"

# rtd from the build, as the installed service: no reservation of its own, leases only; its metrics on the link.
cp -a "$PAY/stage/." / && ldconfig
getent group rtd >/dev/null || groupadd -r rtd
systemd-sysusers >/dev/null 2>&1
mkdir -p "$RTD_SYSCONFDIR/rtd" /run/systemd/system/rtd-metrics.socket.d /run/systemd/system/rtd.service.d
# CheckIntervalSec=60: the drift check would move the test's intruder (below) off the leased CPU within 10 s
# and make its intrusion figure a matter of timing; no lease here lives 60 s.
printf '[Reserve]\nCPUs=none\nCheckIntervalSec=60\n' >"$RTD_SYSCONFDIR/rtd/rtd.conf"
# Emulated (TCG) and on a loaded host, the BPF verifier alone takes seconds. rtd widens its watchdog until
# READY=1 by itself; this is margin for the rest of the run, where an emulated CPU on a loaded host can stall
# rtd's loop for seconds (the shipped WatchdogSec=10s once killed rtd here). Real nodes need none of it.
printf '[Service]\nWatchdogSec=120s\n' >/run/systemd/system/rtd.service.d/emulated.conf
printf '[Socket]\nListenStream=\nListenStream=%s:9477\n' "$IP" >/run/systemd/system/rtd-metrics.socket.d/link.conf
systemctl daemon-reload
timeout 300 systemctl start rtd.socket rtd-metrics.socket rtd.service
check "rtd.service runs (build $RTD_HOST_COMMIT)" "$(systemctl is-active rtd.service)" 'systemctl is-active -q rtd.service'
# The per-step intrusion figures need the BPF collector (the procfs fallback has no intrusion accounting).
bpf=$(curl -s -m 30 "http://$IP:9477/metrics" | awk '$1 == "rtd_bpf_enabled" {print $2}')
check "rtd's BPF collector is attached (kernel $(uname -r))" "rtd_bpf_enabled ${bpf:-missing}" '[ "$bpf" = 1 ]'

# An ordinary task on every CPU: rtd must move it off a leased CPU and give it back.
systemd-run --quiet --unit=rtdvm-hog sleep 100000
systemctl show -P MainPID rtdvm-hog.service >/run/rtdvm-hog.pid

install -o munge -g munge -m 0400 "$PAY/munge.key" /etc/munge/munge.key
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm
# Emulated nodes are slow: generous message and node timeouts.
cat >/etc/slurm/slurm.conf <<EOF
ClusterName=rtdvm
SlurmctldHost=n1(10.77.0.1)
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MessageTimeout=60
SlurmdTimeout=600
KillWait=5
NodeName=n1 NodeAddr=10.77.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
NodeName=n2 NodeAddr=10.77.0.2 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
PartitionName=p Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
echo "required $RTD_SPANK_PLUGIN timeout=30" >/etc/slurm/plugstack.conf
timeout 120 systemctl start munge.service
check "munged runs with the run's key" "$(systemctl is-active munge.service)" 'systemctl is-active -q munge.service'
if [ "$NODE" = n1 ]; then
        timeout 300 systemctl start slurmctld.service
        check "slurmctld runs" "$(systemctl is-active slurmctld.service)" 'systemctl is-active -q slurmctld.service'
        # Prometheus with the fleet's scrape config and rules, the two nodes as file_sd targets.
        mkdir -p /etc/prometheus/rtd-targets /var/tmp/prometheus
        cp "$PAY/prometheus/fleet.yml" "$PAY/prometheus/rtd-rules.yml" /etc/prometheus/
        printf -- "- targets: ['10.77.0.1:9477']\n  labels: {node: n1, cluster: rtdvm}\n- targets: ['10.77.0.2:9477']\n  labels: {node: n2, cluster: rtdvm}\n" \
                >/etc/prometheus/rtd-targets/nodes.yml
        systemd-run --quiet --unit=rtdvm-prometheus /usr/bin/prometheus --config.file=/etc/prometheus/fleet.yml \
                --storage.tsdb.path=/var/tmp/prometheus --web.listen-address=127.0.0.1:9090
fi
timeout 300 systemctl start slurmd.service
check "slurmd runs with the plugin in plugstack.conf" "$(systemctl is-active slurmd.service), $RTD_SPANK_PLUGIN" \
        'systemctl is-active -q slurmd.service && [ -f "$RTD_SPANK_PLUGIN" ]'

if [ "$NODE" = n2 ]; then
        # n1 ends this node's wait (over Slurm, as root) when it is done; n1's host-side deadline backs it.
        sec "waiting for n1"
        for i in $(seq 1800); do [ -e /run/rtdvm-finish ] && break; sleep 1; done
        rtctl status 2>&1 | head -20
        finish
fi

# ------------------------------------------------------------------------------------------------
# n1: the cases. Steps run as the unprivileged user from /tmp (present on both nodes).
cd /tmp || exit 1
as_user() { runuser -u "$USER_NAME" -- "$@"; }
usrun() { as_user timeout 300 srun "$@"; }
# usrun_bg OUT ARGS...: srun in the background, stdout+stderr in OUT; SRUN_PID.
usrun_bg() { local out=$1; shift; as_user timeout 600 srun "$@" >"$out" 2>&1 & SRUN_PID=$!; }
# wait_lines FILE PATTERN N SECS: until FILE holds N lines matching PATTERN (or srun ended).
wait_lines() {
        local i
        for i in $(seq $(( $4 * 2 ))); do
                [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
                kill -0 "$SRUN_PID" 2>/dev/null || { [ "$(grep -c -- "$2" "$1")" -ge "$3" ]; return; }
                sleep 0.5
        done
        return 1
}
metric() {      # metric NODE NAME: the sum of a metric's samples on a node's rtd (scraped directly)
        curl -s -m 20 "http://10.77.0.${1#n}:9477/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $2} END {print s + 0}'
}
leases_gone() { # leases_gone SECS: rtd_leases_active 0 on both nodes within SECS
        local i
        for i in $(seq "$1"); do
                [ "$(metric n1 rtd_leases_active)" = 0 ] && [ "$(metric n2 rtd_leases_active)" = 0 ] && return 0
                sleep 1
        done
        return 1
}
promql() {      # promql QUERY: "node=value ..." of an instant query
        curl -s -m 20 -G http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$1" |
                jq -r '[.data.result[] | "\(.metric.node)=\(.value[1])"] | sort | join(" ")'
}
field() { sed -n "s/.*node=$1 .*$2=\([^ ]*\).*/\1/p" <<<"$3" | head -1; }
PROBE='echo "PROBE node=$(hostname) step=$SLURM_JOB_ID.$SLURM_STEP_ID policy=$(chrt -p $$ | sed -n "s/.*policy: //p")'\
' prio=$(chrt -p $$ | sed -n "s/.*priority: //p") cpus=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)";'\
' bash /mnt/payload/guest-entry.sh snap during; sleep $0; exit $1'

sec "cluster"
for i in $(seq 150); do
        st=$(sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ')
        [ "$st" = "n1=idle n2=idle " ] && break
        sleep 2
done
check "both slurmd registered and idle" "$st" '[ "$st" = "n1=idle n2=idle " ]'

sec "srun --rt=60 -N2"
before=$(usrun -N2 -n2 --ntasks-per-node=1 bash "$PAY/guest-entry.sh" snap before 2>&1)
OUT=/tmp/rt-step.out
usrun_bg $OUT -N2 -n2 --ntasks-per-node=1 -c2 --rt=60 --cpu-bind=map_cpu:$LEASED bash -c "$PROBE" 20 0
if wait_lines $OUT '^SNAP .*phase=during' 2 240; then
        lease1=$(curl -s -m 20 http://10.77.0.1:9477/metrics | grep '^rtd_lease_active{')
        lease2=$(curl -s -m 20 http://10.77.0.2:9477/metrics | grep '^rtd_lease_active{')
        # An intruder on n2 only: a root task pinned onto the leased CPU for 4 s (the drift check, every 60 s
        # here, does not move it first); n2's intrusion series must show it, n1's must not.
        timeout 120 srun -w n2 -n1 taskset -c $LEASED timeout 4 sh -c 'while :; do :; done'
fi
wait "$SRUN_PID"; rc=$?
cat $OUT
during=$(grep '^SNAP' $OUT)
STEP=$(sed -n 's/.*PROBE .*step=\([0-9.]*\).*/\1/p' $OUT | head -1)
check "the step runs on both nodes, srun exits 0" "rc=$rc step=$STEP" '[ $rc = 0 ] && [ "$(grep -c "^PROBE" $OUT)" = 2 ]'
for n in n1 n2; do
        p=$(grep "^PROBE node=$n " $OUT)
        check "$n: the task runs SCHED_FIFO 60 on CPU $LEASED" "$p" \
                '[ "$(field $n policy "$p")" = SCHED_FIFO ] && [ "$(field $n prio "$p")" = 60 ] && [ "$(field $n cpus "$p")" = $LEASED ]'
done
check "each node's rtd holds the step's lease of CPU $LEASED while it runs" "n1: $lease1 | n2: $lease2" \
        '[[ $lease1 == *"owner=\"slurm:$STEP\",cpus=\"$LEASED\""* ]] && [[ $lease2 == *"owner=\"slurm:$STEP\",cpus=\"$LEASED\""* ]]'
check "the leases go when the step ends" "" 'leases_gone 60'
after=$(usrun -N2 -n2 --ntasks-per-node=1 bash "$PAY/guest-entry.sh" snap after 2>&1)
for n in n1 n2; do
        b=$(grep "node=$n " <<<"$before") d=$(grep "node=$n " <<<"$during") a=$(grep "node=$n " <<<"$after")
        figure "knobs $n before: ${b#SNAP }"
        figure "knobs $n during: ${d#SNAP }"
        figure "knobs $n after:  ${a#SNAP }"
        hb=$(field $n other_task_cpus "$b") hd=$(field $n other_task_cpus "$d") ha=$(field $n other_task_cpus "$a")
        check "$n: an ordinary task is moved off CPU $LEASED during the step and back after" "$hb -> $hd -> $ha" \
                '[ "$hb" = 0-1 ] && [ "$hd" = 0 ] && [ "$ha" = 0-1 ]'
        ib=$(field $n irqs_with_cpu$LEASED "$b") id=$(field $n irqs_with_cpu$LEASED "$d")
        # Left on CPU 1: IRQs the kernel refuses to move (here the timer, the cascade and a virtio queue's
        # managed IRQ: rtd logs "Permission denied" for each); named from n1's /proc/interrupts (same machine).
        left=$(for q in ${id//,/ }; do echo -n "$q:$(awk -v q="$q:" '$1 == q {print $NF}' /proc/interrupts) "; done)
        check "$n: movable IRQs are moved off CPU $LEASED during the step" \
                "IRQs with CPU $LEASED before: ${ib:-none}; during: ${id:-none} ${left:+(${left% })}" \
                '[ -n "$ib" ] && [ "$(tr , "\n" <<<"$id" | grep -c .)" -lt "$(tr , "\n" <<<"$ib" | grep -c .)" ]'
        kb=$(field $n knobs "$b") ka=$(field $n knobs "$a") kd=$(field $n knobs "$d")
        check "$n: every IRQ mask and the workqueue mask are back as found after the step" "digest $kb -> $kd -> $ka" \
                '[ -n "$kb" ] && [ "$kb" = "$ka" ] && [ "$kb" != "$kd" ]'
done

sec "Prometheus: the step's series per node"
sel="{owner=\"slurm:$STEP\"}"
intr=$(promql "max by (node) (max_over_time(rtd_lease_intrusion_seconds_total${sel}[30m]))")
hirq=$(promql "sum by (node) (max_over_time(rtd_lease_hardirqs_total${sel}[30m]))")
csw=$(promql "sum by (node) (max_over_time(rtd_lease_context_switches_total${sel}[30m]))")
up=$(promql 'up{job="rtd"}')
figure "PromQL slurm:$STEP intrusion_seconds: $intr"
figure "PromQL slurm:$STEP hardirqs: $hirq"
figure "PromQL slurm:$STEP context_switches: $csw"
figure "PromQL up{job=\"rtd\"}: $up"
check "Prometheus scrapes both nodes' rtd over the link" "$up" '[ "$up" = "n1=1 n2=1" ]'
check "PromQL gives the step's intrusion seconds and IRQ counts for both nodes" "intrusion $intr; hardirqs $hirq" \
        '[[ $intr == n1=*" n2="* ]] && [[ $hirq == n1=*" n2="* ]]'
i1=$(sed -n 's/.*n1=\([^ ]*\).*/\1/p' <<<"$intr") i2=$(sed -n 's/.*n2=\([^ ]*\).*/\1/p' <<<"$intr")
check "n2's intrusion series shows the 4 s intruder, n1's does not" "n1=$i1 s, n2=$i2 s" \
        'awk -v a="$i1" -v b="$i2" "BEGIN {exit !(b >= 1 && b - a >= 1)}"'

sec "a failing step"
out=$(usrun -N2 -n2 --ntasks-per-node=1 -c2 --rt=40 --cpu-bind=map_cpu:$LEASED bash -c "$PROBE" 1 3 2>&1); rc=$?
echo "$out"
FAILED=$(sed -n 's/.*PROBE .*step=\([0-9.]*\).*/\1/p' <<<"$out" | head -1)
check "a step whose tasks exit 3 ran SCHED_FIFO 40 on both nodes, srun exits 3" "rc=$rc step=$FAILED" \
        '[ $rc = 3 ] && [ "$(grep -c "policy=SCHED_FIFO prio=40" <<<"$out")" = 2 ]'
check "the failed step's leases go on both nodes" "" 'leases_gone 60'

sec "scancel"
OUT=/tmp/cancel.out
usrun_bg $OUT -N2 -n2 --ntasks-per-node=1 -c2 --rt-quiet --cpu-bind=map_cpu:$LEASED bash -c "$PROBE" 300 0
wait_lines $OUT '^SNAP .*phase=during' 2 240
CANCELLED=$(sed -n 's/.*PROBE .*step=\([0-9.]*\).*/\1/p' $OUT | head -1)
l1=$(metric n1 rtd_leases_active) l2=$(metric n2 rtd_leases_active)
as_user scancel "${CANCELLED%.*}"; src=$?
wait "$SRUN_PID"; rc=$?
cat $OUT
check "a --rt-quiet step holds a lease on both nodes, the user's scancel ends it" \
        "leases n1=$l1 n2=$l2, scancel rc=$src, srun rc=$rc" \
        '[ "$l1" = 1 ] && [ "$l2" = 1 ] && [ $src = 0 ] && grep -q "CANCELLED" $OUT'
check "the cancelled step's leases go on both nodes" "" 'leases_gone 60'

sec "overlapping steps"
OUT=/tmp/overlap-a.out
usrun_bg $OUT -N2 -n2 --ntasks-per-node=1 -c2 --rt=50 --cpu-bind=map_cpu:$LEASED bash -c "$PROBE" 12 0
wait_lines $OUT '^SNAP .*phase=during' 2 240
STEP_A=$(sed -n 's/.*PROBE .*step=\([0-9.]*\).*/\1/p' $OUT | head -1)
b=$(usrun -w n2 -n1 -c2 --rt=50 --cpu-bind=map_cpu:$LEASED bash -c 'echo RAN' 2>&1); brc=$?
echo "$b"
wait "$SRUN_PID"; arc=$?
check "a second step on n2 asking for CPU $LEASED is refused with rtd's reason naming the holder" \
        "$(grep -m1 refused <<<"$b")" \
        '[ $brc != 0 ] && ! grep -q RAN <<<"$b" && grep -q "rtd refused to lease CPUs $LEASED" <<<"$b" && grep -q 409 <<<"$b" && grep -q "slurm:$STEP_A" <<<"$b"'
check "the first step runs on to its end" "srun rc=$arc" '[ $arc = 0 ] && [ "$(grep -c "policy=SCHED_FIFO prio=50" $OUT)" = 2 ]'
check "its leases go on both nodes" "" 'leases_gone 60'

sec "how each node's rtd saw the leases end"
# One srun (each costs seconds here) also stops rtd on n2 for the next case.
ends=$(timeout 300 srun -N2 -n2 --ntasks-per-node=1 bash -c 'echo "LEASES $(hostname) $(curl -s -m 20 --unix-socket /run/rtd/rtd.sock http://rtd/v1/leases |
        jq -c "[.leases[] | select(.state != \"active\") | {owner, end_reason}]")"
        [ "$(hostname)" = n1 ] || systemctl stop rtd.service rtd.socket rtd-metrics.socket' 2>&1)
echo "$ends"
for n in n1 n2; do
        e=$(grep "^LEASES $n " <<<"$ends")
        ok=1
        for s in "$STEP" "$FAILED" "$CANCELLED" "$STEP_A"; do
                jq -e --arg o "slurm:$s" 'map(select(.owner == $o and (.end_reason | test("DELETE")))) | length == 1' \
                        <<<"${e#LEASES $n }" >/dev/null 2>&1 || ok=0
        done
        check "$n: each step's lease ended by the plugin's DELETE (end, failure, scancel)" "${e#LEASES }" '[ $ok = 1 ]'
done

sec "a node without rtd (stopped on n2 above)"
t0=$(date +%s)
out=$(usrun -N2 -n2 --ntasks-per-node=1 --rt=60 bash -c 'echo RAN on $(hostname)' 2>&1); rc=$?
took=$(( $(date +%s) - t0 ))
echo "$out"
check "with rtd stopped on n2, the step fails there clearly" "rc=$rc after ${took}s: $(grep -m1 'not running' <<<"$out")" \
        '[ $rc != 0 ] && grep -q "rtd is not running on this node" <<<"$out" && grep -q -- "--rt-optional" <<<"$out" && ! grep -q "RAN on n2" <<<"$out"'
figure "no rtd on n2: srun exited $rc after ${took}s: $(grep 'rtd' <<<"$out" | tr '\n' '|')"

sec "done"
timeout 120 srun -w n2 -n1 touch /run/rtdvm-finish
finish
