# SPDX-License-Identifier: MIT
# Sourced by guest-tests.sh (its helpers: start_rtd, stop_rtd, rtctl, jstate, check, status_json, allowed,
# same, expand, check_clean): issue 13 point 2 with real cgroup v2 cpusets. A job held by its cpuset inside
# rtd-jobs.scope keeps running, held, through `systemctl restart rtd` and a kill -9 of rtd (Restart=), is
# re-adopted, ends succeeded with its whole output, and the new rtds wrote no knob. The job runs longer
# than on a real machine: an emulated restart takes tens of seconds.
VM_JOB_SECS=150
vm_job_cpuset() {      # the job's cpuset.cpus.effective, read from its cgroup in the scope
        local cg
        cg=$(jstate "$1" '.cgroup // empty')
        cgfile "rtd.slice/rtd-jobs.scope/${cg:-none}/cpuset.cpus.effective"
}
vm_survive() {         # vm_survive WHAT ID CAUSE-COMMAND...
        local what=$1 id=$2 pid0 i st mode writes eff cpus jpid; shift 2
        pid0=$(systemctl show -P MainPID rtd.service)
        "$@"
        for i in $(seq 150); do
                [ "$(systemctl show -P MainPID rtd.service)" != "$pid0" ] && [ "$(systemctl show -P ActiveState rtd.service)" = active ] &&
                        rtctl status >/dev/null 2>&1 && break
                sleep 2
        done
        st=$(status_json)
        mode=$(jq -r '.reservation.start.mode' <<<"$st" 2>/dev/null)
        writes=$(jq -r '.reservation.start.knob_writes' <<<"$st" 2>/dev/null)
        check "crash: $what: a new rtd answers" "MainPID $pid0 -> $(systemctl show -P MainPID rtd.service)" \
                '[ "$(systemctl show -P MainPID rtd.service)" != "$pid0" ] && [ -n "$st" ]'
        check "crash: $what: the reservation was adopted with no knob written" "start.mode=$mode knob_writes=$writes" \
                '[ "$mode" = adopted ] && [ "$writes" = 0 ]'
        check "crash: $what: the job kept running and was re-adopted" \
                "state $(jstate "$id" .state) adopted $(jstate "$id" .adopted)" \
                '[ "$(jstate "$id" .state)" = running ] && [ "$(jstate "$id" .adopted)" = true ]'
        cpus=$(jstate "$id" .cpus) eff=$(vm_job_cpuset "$id") jpid=$(jstate "$id" .pid)
        check "crash: $what: the job's cpuset in rtd-jobs.scope still holds it on its CPU" \
                "job CPUs $cpus, cpuset.cpus.effective '$eff', pid $jpid allowed $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$jpid/status 2>/dev/null)" \
                '[ -n "$cpus" ] && same "$eff" "$cpus" && same "$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/$jpid/status)" "$cpus"'
}

sec "crash: jobs outlive rtd (systemd, CPUs=4-7 in the config)"
if start_rtd crash unit "${CONF_COMMON/CPUs=none/CPUs=4-7}
Backend=systemd"; then
        check "crash: rtd-jobs.scope is active in rtd.slice with Delegate=yes" \
                "$(systemctl show -P ActiveState rtd-jobs.scope) $(systemctl show -P Slice rtd-jobs.scope) Delegate=$(systemctl show -P Delegate rtd-jobs.scope)" \
                '[ "$(systemctl show -P ActiveState rtd-jobs.scope)" = active ] && [ "$(systemctl show -P Slice rtd-jobs.scope)" = rtd.slice ] &&
                 [ "$(systemctl show -P Delegate rtd-jobs.scope)" = yes ]'
        id=$(rtctl --json submit -- /bin/sh -c "i=0; while [ \$i -lt $VM_JOB_SECS ]; do i=\$((i+1)); echo tick \$i; sleep 1; done; echo done" 2>/dev/null | jq -r '.id // empty')
        for i in $(seq 60); do [ "$(jstate "$id" .state)" = running ] && break; sleep 1; done
        cpus=$(jstate "$id" .cpus) eff=$(vm_job_cpuset "$id")
        check "crash: the job runs held by a v2 cpuset in rtd-jobs.scope" \
                "job $id $(jstate "$id" .state), CPUs $cpus, cgroup $(jstate "$id" .cgroup) effective '$eff'" \
                '[ -n "$cpus" ] && same "$eff" "$cpus" && subset "$cpus" 4-7'
        vm_survive "systemctl restart rtd" "$id" timeout 300 systemctl restart rtd.service
        vm_survive "kill -9 of rtd (Restart=on-failure)" "$id" kill -KILL "$(systemctl show -P MainPID rtd.service)"
        for i in $(seq $((VM_JOB_SECS + 60))); do [ "$(jstate "$id" .state)" != running ] && break; sleep 1; done
        out=$(rtctl logs "$id" 2>/dev/null)
        check "crash: the job ended succeeded, exit code 0" "state $(jstate "$id" .state) exit $(jstate "$id" .exit_code)" \
                '[ "$(jstate "$id" .state)" = succeeded ] && [ "$(jstate "$id" .exit_code)" = 0 ]'
        check "crash: the job's output is complete" "$(wc -l <<<"$out") lines, last '$(tail -1 <<<"$out")'" \
                '[ "$out" = "$( (seq 1 $VM_JOB_SECS | sed "s/^/tick /"; echo done) )" ]'
        check "crash: systemctl stop rtd" "" 'stop_rtd crash'
        a1=$(allowed system.slice) a2=$(allowed user.slice) a3=$(allowed init.scope)
        check "crash: stop restores AllowedCPUs of the slices" "'$a1' '$a2' '$a3'" \
                '[ "$a1" = "$ORIG_SYS" ] && [ "$a2" = "$ORIG_USER" ] && [ "$a3" = "$ORIG_INIT" ]'
        check "crash: rtd-jobs.scope is gone after the stop" "$(systemctl show -P ActiveState rtd-jobs.scope)" \
                '[ "$(systemctl show -P ActiveState rtd-jobs.scope)" != active ]'
else
        fail "crash: rtd starts as rtd.service with CPUs=4-7"
        journalctl -b -u rtd.service --no-pager | tail -20
        stop_rtd crash
fi
sleep 2
check_clean "crash: after stop (kernel)"
