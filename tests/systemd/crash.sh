# SPDX-License-Identifier: MIT
# Sourced by container.sh (its helpers: ct, ct_as, prop, check, wait_for, snapshot, knob_diff, reserved):
# issue 13 point 2. A job of alice's survives `systemctl restart rtd`, a kill -9 of rtd (Restart=on-failure)
# and a watchdog kill (SIGSTOP of rtd's main pid: WatchdogSec= fires, systemd sends SIGABRT), each time
# ending `succeeded` with its complete output, and the host's knobs were not written (snapshot before and
# after, and the new rtd's count of knob writes: status .reservation.start.knob_writes == 0). Then a stop
# cancels the running job, and a unit that keeps failing (start limit hit) ends with every knob restored by
# OnFailure=rtd-restore.service and the job ended.
# A survival's job ticks 4 times a second for longer than its event takes (a restart or kill -9 about 2 s,
# a watchdog kill about 11 s), so it is running when the new rtd adopts it, and the test waits no longer.
CRASH_JOB_SECS=${CRASH_JOB_SECS:-30}

# A JSON field from stdin, parsed on the host (the container has no python): jfield '["reservation"]["start"]'
jfield() { /usr/bin/python3 -c 'import json, sys
try:
    v = eval("json.load(sys.stdin)" + sys.argv[1])
except Exception:
    v = ""
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$1" 2>/dev/null; }
job_field() { ct rtctl --json show "$1" 2>/dev/null | jfield "[\"$2\"]"; }
crash_job() {   # crash_job [SECONDS]: a job of alice's that ticks 4 times a second, then says done
        local ticks=$((4 * ${1:-$CRASH_JOB_SECS}))
        ct_as alice rtctl --json submit -- /bin/sh -c \
                "i=0; while [ \$i -lt $ticks ]; do i=\$((i+1)); echo tick \$i; sleep 0.25; done; echo done" \
                2>/dev/null | jfield '["id"]'
}
expected_output() { seq 1 $((4 * $1)) | sed 's/^/tick /'; echo done; }
rtd_up() { [ "$(prop ActiveState rtd.service)" = active ] && ct rtctl status >/dev/null 2>&1; }

# One survival: $1 names the event, $2 is a function that causes it and returns once it is under way, $3 is
# how long the job runs (s).
survive() {
        local what=$1 cause=$2 secs=$3 id pid0 n0 state st mode writes moved out d
        id=$(crash_job "$secs")
        if [ -z "$id" ]; then bad "$what: could not submit the job"; return; fi
        wait_for 15 eval '[ "$(job_field "$id" state)" = running ]'
        pid0=$(prop MainPID rtd.service) n0=$(prop NRestarts rtd.service)
        snapshot >"$WORKDIR/knobs.reserved"
        log "$what: job $id running (pid $(job_field "$id" pid)), rtd pid $pid0"
        $cause "$pid0"
        wait_for 60 eval '[ "$(prop MainPID rtd.service)" != "$pid0" ] && rtd_up'
        check "$what: a new rtd answers (MainPID $pid0 -> $(prop MainPID rtd.service), NRestarts $n0 -> $(prop NRestarts rtd.service))" \
                eval '[ "$(prop MainPID rtd.service)" != "$pid0" ] && rtd_up'
        state=$(job_field "$id" state) st=$(ct rtctl --json status 2>/dev/null)
        check "$what: job $id kept running and was re-adopted (state $state, adopted $(job_field "$id" adopted))" \
                eval '[ "$state" = running ] && [ "$(job_field "$id" adopted)" = true ]'
        check "$what: the new rtd adopted rtd-jobs.scope (status jobs.scope: $(echo "$st" | jfield '["jobs"]["scope"]'))" \
                eval '[ "$(echo "$st" | jfield "[\"jobs\"][\"scope\"][\"adopted\"]")" = true ]'
        mode=$(echo "$st" | jfield '["reservation"]["start"]["mode"]')
        writes=$(echo "$st" | jfield '["reservation"]["start"]["knob_writes"]')
        moved=$(echo "$st" | jfield '["reservation"]["start"]["tasks_moved"]')
        check "$what: the new rtd adopted the reservation with no knob written (start.mode=$mode, knob_writes=$writes, tasks_moved=$moved)" \
                eval '[ "$mode" = adopted ] && [ "$writes" = 0 ]'
        d=$(knob_diff "$WORKDIR/knobs.reserved")
        check "$what: host knobs as before the event (IRQ masks, sysctls, workqueue mask)${d:+: $(echo "$d" | tr '\t\n' ' ;')}" \
                test -z "$d"
        wait_for $((secs + 30)) eval '[ "$(job_field "$id" state)" != running ]'
        state=$(job_field "$id" state)
        out=$(ct rtctl logs "$id" 2>/dev/null)
        check "$what: job $id ended succeeded, exit code $(job_field "$id" exit_code) (state $state)" \
                eval '[ "$state" = succeeded ] && [ "$(job_field "$id" exit_code)" = 0 ]'
        check "$what: job $id's output is complete ($(echo "$out" | wc -l) lines, last '$(echo "$out" | tail -1)')" \
                test "$out" = "$(expected_output "$secs")"
}

cause_restart() { ct systemctl restart rtd.service; }
cause_kill9() { ct kill -KILL "$1"; }
cause_watchdog() { ct kill -STOP "$1"; }

# ---------------------------------------------------------------- 10b. jobs outlive rtd (issue 13 point 2)
if ! rtd_up || ! reserved; then
        bad "rtd is not running with CPU 1 reserved: cannot test that jobs outlive it"
else
        check "workers and jobs live in rtd-jobs.scope (rtd.slice, Delegate=yes) after rtd started" \
                eval '[ "$(prop ActiveState rtd-jobs.scope)" = active ] && [ "$(prop Slice rtd-jobs.scope)" = rtd.slice ] &&
                      [ "$(prop Delegate rtd-jobs.scope)" = yes ]'
        survive "systemctl restart rtd" cause_restart 12
        survive "kill -9 of rtd (Restart=on-failure)" cause_kill9 12
        wd0=$(ct journalctl -u rtd.service -b --no-pager -o cat | grep -ci "watchdog timeout")
        survive "watchdog kill (SIGSTOP, WatchdogSec=$(prop WatchdogUSec rtd.service))" cause_watchdog 24
        wd1=$(ct journalctl -u rtd.service -b --no-pager -o cat | grep -ci "watchdog timeout")
        check "journal: that kill was a watchdog timeout (timeouts logged: $wd0 before, $wd1 after)" test "$wd1" -gt "$wd0"

        # No job running: idle workers leave with rtd, the anchor keeps the scope until the next rtd's is in.
        inv0=$(prop InvocationID rtd-jobs.scope)
        ct systemctl restart rtd.service
        wait_for 15 rtd_up
        check "systemctl restart with no job: the same rtd-jobs.scope carries on (InvocationID ${inv0:0:8} -> $(prop InvocationID rtd-jobs.scope | cut -c1-8)), one anchor in it ($(ct pgrep -xc rtd-anchor))" \
                eval '[ -n "$inv0" ] && [ "$(prop InvocationID rtd-jobs.scope)" = "$inv0" ] && [ "$(ct pgrep -xc rtd-anchor)" = 1 ]'

        # A stop is not a restart: the running job is cancelled, the knobs restored (section 11 checks the
        # knobs again with a job whose grandchild left its session).
        id=$(crash_job)
        wait_for 15 eval '[ "$(job_field "$id" state)" = running ]'
        jpid=$(job_field "$id" pid)
        ct systemctl stop rtd.service
        check "systemctl stop: job $id's process (pid $jpid) is gone" eval '[[ "$jpid" =~ ^[0-9]+$ ]] && ! ct test -d /proc/$jpid'
        d=$(knob_diff "$WORKDIR/host-knobs.before")
        check "systemctl stop: every host knob restored${d:+: $(echo "$d" | tr '\t\n' ' ;')}" test -z "$d"
        check "systemctl stop: rtd-jobs.scope is gone, no anchor or worker left ($(prop ActiveState rtd-jobs.scope))" \
                wait_for 15 eval '[ "$(prop ActiveState rtd-jobs.scope)" != active ] && ! ct pgrep -x "rtd-anchor|rtd-worker" >/dev/null'
        ct systemctl start rtd.service
        check "systemctl stop: job $id was recorded cancelled (state $(job_field "$id" state), reason '$(job_field "$id" reason)')" \
                eval '[ "$(job_field "$id" state)" = cancelled ]'

        # A unit that fails for good: a broken configuration, then a crash. Restart= tries once; that rtd
        # exits 78 (invalid configuration), which RestartPreventExitStatus= does not retry; the crash's
        # ExecStopPost= kept the knobs for the next rtd, so OnFailure= restores them.
        id=$(crash_job)
        wait_for 15 eval '[ "$(job_field "$id" state)" = running ]'
        jpid=$(job_field "$id" pid) pid0=$(prop MainPID rtd.service)
        conf '[Reserve]\nCPUs=banana\n' 60-broken.conf
        ct kill -KILL "$pid0"
        wait_for 60 eval '[ "$(prop ActiveState rtd.service)" = failed ] && [ "$(prop ActiveState rtd-restore.service)" = inactive ] &&
                          [ -n "$(prop ExecMainExitTimestamp rtd-restore.service)" ]'
        check "a unit whose configuration broke ends failed after one try, not in a restart loop ($(prop ActiveState rtd.service), Result=$(prop Result rtd.service), ExecMainStatus=$(prop ExecMainStatus rtd.service), NRestarts=$(prop NRestarts rtd.service))" \
                eval '[ "$(prop ActiveState rtd.service)" = failed ] && [ "$(prop ExecMainStatus rtd.service)" = 78 ] &&
                      [ "$(prop NRestarts rtd.service)" -le 1 ]'
        check "OnFailure=rtd-restore.service ran (Result=$(prop Result rtd-restore.service), status $(prop ExecMainStatus rtd-restore.service))" \
                eval '[ -n "$(prop ExecMainExitTimestamp rtd-restore.service)" ] && [ "$(prop ExecMainStatus rtd-restore.service)" = 0 ]'
        d=$(knob_diff "$WORKDIR/host-knobs.before")
        check "after the unit failed for good every host knob is restored${d:+: $(echo "$d" | tr '\t\n' ' ;')}" test -z "$d"
        check "tasks got CPU 1 back ($BACKEND backend)" given_back
        check "the orphaned job (pid $jpid) was ended with rtd-jobs.scope" \
                wait_for 15 eval '[[ "$jpid" =~ ^[0-9]+$ ]] && ! ct test -d /proc/$jpid'
        check "no restore journal left in /run/rtd" eval '! ct sh -c "ls /run/rtd/*.json" >/dev/null 2>&1'
        ct rm -f "$CONFDIR/rtd.conf.d/60-broken.conf"
        ct systemctl reset-failed rtd.service rtd.socket rtd-metrics.socket rtd-restore.service
        ct systemctl start rtd.socket rtd.service
        check "rtd starts again after the failures and reserves CPU 1" wait_for 15 eval 'rtd_up && reserved'
        st=$(job_field "$id" state)
        check "the orphaned job $id is recorded as ended, not succeeded (state $st, reason '$(job_field "$id" reason)')" \
                eval '[ "$st" = lost ] || [ "$st" = failed ]'
fi
