#!/bin/bash
# SPDX-License-Identifier: MIT
# systemd-analyze verify on every unit rtd installs, as installed (staged `meson install`), with ExecStart=
# and friends pointed at the staged binaries. Any output at all is a failure: verify only warns (rc 0) on
# unknown keys and bad values.
# Usage: verify-units.sh BUILD_DIR SBINDIR
set -u
BUILD=$1 SBINDIR=$2
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze missing"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! meson install -C "$BUILD" --destdir "$tmp/stage" --no-rebuild >"$tmp/install.log" 2>&1; then
        cat "$tmp/install.log"; echo "FAIL: meson install --destdir"; exit 1
fi
units=$(find "$tmp/stage" -path '*/systemd/system/*' -type f | sort)
[ -n "$units" ] || { echo "FAIL: meson install put no unit under */systemd/system/"; exit 1; }
mkdir "$tmp/units"
for u in $units; do
        # The staged binaries stand in for the installed ones (verify checks that ExecStart= is executable).
        sed "s#$SBINDIR/#$tmp/stage$SBINDIR/#g" "$u" >"$tmp/units/$(basename "$u")"
done
fail=0
for u in "$tmp"/units/*; do
        out=$(cd "$tmp/units" && systemd-analyze verify --man=no "$(basename "$u")" 2>&1); rc=$?
        if [ "$rc" = 0 ] && [ -z "$out" ]; then
                echo "PASS: systemd-analyze verify $(basename "$u")"
        else
                echo "FAIL: systemd-analyze verify $(basename "$u") (rc=$rc):"; echo "$out" | sed 's/^/    /'
                fail=1
        fi
done
for u in rtd.service rtd.socket rtd-metrics.socket; do
        [ -e "$tmp/units/$u" ] || { echo "FAIL: $u is not installed"; fail=1; }
done
sysusers=$(find "$tmp/stage" -path '*/sysusers.d/rtd.conf')
if [ -n "$sysusers" ] && grep -Eq '^g[[:space:]]+rtd[[:space:]]' "$sysusers"; then
        echo "PASS: sysusers.d/rtd.conf creates group rtd"
else
        echo "FAIL: no sysusers.d/rtd.conf with 'g rtd'"; fail=1
fi
exit $fail
