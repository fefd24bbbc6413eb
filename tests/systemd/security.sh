#!/bin/bash
# SPDX-License-Identifier: MIT
# Hardening of rtd.service: record the exposure score of `systemd-analyze security --offline=true` (target
# <= 5.0) and check the rules of style.md 13: no ProtectKernelTunables=/RestrictRealtime= (they break
# rtd), ProtectSystem=strict, a capability bounding set without CAP_SYS_ADMIN, one comment per capability.
# Usage: security.sh UNIT_FILE [RECORD_FILE]
set -u
UNIT=$1 RECORD=${2:-}
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze missing"; exit 77; }
fail=0
out=$(systemd-analyze security --offline=true --no-pager "$UNIT" 2>&1); rc=$?
score=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [ -z "$score" ]; then
        echo "$out" | tail -20; echo "FAIL: no exposure score (rc=$rc)"; exit 1
fi
echo "$out" | grep '✗' | sed 's/^/    /'
echo "exposure of rtd.service: $score (target <= 5.0)"
[ -n "$RECORD" ] && echo "$score" >"$RECORD"
if [ "$(echo "$score <= 5.0" | bc)" = 1 ]; then echo "PASS: exposure $score <= 5.0"; else echo "FAIL: exposure $score > 5.0"; fail=1; fi

key() { sed -n "s/^$1=//p" "$UNIT" | tail -1; }
for k in ProtectKernelTunables RestrictRealtime ProtectControlGroups MemoryDenyWriteExecute PrivateTmp; do
        if grep -q "^$k=" "$UNIT"; then echo "FAIL: $k= is set: it breaks rtd or its jobs"; fail=1; fi
done
[ "$(key ProtectSystem)" = strict ] && echo "PASS: ProtectSystem=strict" || { echo "FAIL: ProtectSystem= is not strict"; fail=1; }
# Several CapabilityBoundingSet= lines add up (an empty one would reset them: not allowed here).
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr '\n' ' ')
if grep -q '^CapabilityBoundingSet=$' "$UNIT"; then echo "FAIL: an empty CapabilityBoundingSet= resets the set"; fail=1; fi
[ -n "$caps" ] || { echo "FAIL: no CapabilityBoundingSet="; fail=1; }
case " $caps " in *" CAP_SYS_ADMIN "*) echo "FAIL: CAP_SYS_ADMIN in the bounding set"; fail=1;; esac
# Each capability is justified on a comment line of its own (style.md 13).
for c in $caps; do
        grep -q "^#.*$c" "$UNIT" || { echo "FAIL: $c has no comment saying why"; fail=1; }
done
[ "$fail" = 0 ] && echo "PASS: capabilities ($caps) each justified"
exit $fail
