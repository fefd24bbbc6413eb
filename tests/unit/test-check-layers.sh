#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/check-layers on tiny trees (tests/fixtures/layers): it passes a layered tree and fails, naming the
# include, on a folder cycle, on another folder's internal header, and on a forbidden edge.
set -u
CHECK=$1
FIX=$2
fail=0
expect() {      # expect <0|1> <tree> <text the report must contain>...
        local want=$1 tree=$2 out rc
        shift 2
        out=$("$CHECK" "$FIX/$tree" 2>&1)
        rc=$?
        if [ "$rc" != "$want" ]; then
                echo "FAIL $tree: exit $rc, wanted $want"; echo "$out"; fail=1; return
        fi
        for t in "$@"; do
                if ! grep -qF -- "$t" <<<"$out"; then
                        echo "FAIL $tree: report lacks '$t'"; echo "$out"; fail=1
                fi
        done
        echo "ok $tree"
}
expect 0 ok
expect 1 cycle "cycle between folders: a/ -> b/ -> c/ -> a/" "c/c.c:2: #include \"a/a.h\""
expect 1 internal "b/b.c:1: #include \"a/a-internal.h\"" "internal to a/"
expect 1 forbidden "worker/ must not include store/" "jobs/jobs.c:1: #include \"sched-metrics.skel.h\": only" \
        "host/restore.c:2: #include \"backend.h\": host/restore.c is a bottom module"
# The skeleton's owner may include it: exactly one skeleton complaint (jobs.c's).
n=$("$CHECK" "$FIX/forbidden" 2>&1 | grep -c "skel.h")
[ "$n" = 1 ] || { echo "FAIL forbidden: $n skeleton complaints, wanted 1"; fail=1; }
exit $fail
