# SPDX-License-Identifier: MIT
# Sourced by vm-lib.sh (for the three VM runners): how this build reaches a guest.
# stage_payload BUILD PAY SRC: `meson install --destdir PAY/stage` of BUILD plus the binaries themselves (and
# the SPANK plugin when built), PAY/env with the paths the guest needs and PAY/heartbeat. Logs to WORK/install.log.
stage_payload() {
        local build=$1 pay=$2 src=$3 b f d
        mkdir -p "$pay/stage"
        if ! meson install -C "$build" --no-rebuild --quiet --destdir "$pay/stage" >"$pay/../install.log" 2>&1; then
                log "meson install failed (see below); copying the binaries instead"
                tail -5 "$pay/../install.log" >&2
        fi
        # Where this build installs (the guest needs the paths; rtd's default config is under sysconfdir).
        eval "$(meson introspect --buildoptions "$build" 2>/dev/null | /usr/bin/python3 -c '
import json, shlex, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
for k in ("prefix", "bindir", "sbindir", "libexecdir", "libdir", "sysconfdir"):
        print("%s=%s" % (k.upper(), shlex.quote(str(opts.get(k, "")))))
' 2>/dev/null)"
        PREFIX=${PREFIX:-/usr/local}
        case "${SYSCONFDIR:-etc}" in /*) ;; *) SYSCONFDIR=$PREFIX/${SYSCONFDIR:-etc} ;; esac
        [ "$SYSCONFDIR" = /usr/etc ] && SYSCONFDIR=/etc     # meson's special case for prefix /usr
        case "${BINDIR:-bin}" in /*) ;; *) BINDIR=$PREFIX/${BINDIR:-bin} ;; esac
        case "${SBINDIR:-sbin}" in /*) ;; *) SBINDIR=$PREFIX/${SBINDIR:-sbin} ;; esac
        case "${LIBEXECDIR:-libexec}" in /*) ;; *) LIBEXECDIR=$PREFIX/${LIBEXECDIR:-libexec} ;; esac
        case "${LIBDIR:-lib}" in /*) ;; *) LIBDIR=$PREFIX/${LIBDIR:-lib} ;; esac
        # Whatever `meson install` did, the binaries of this build dir are what is tested.
        for b in daemon/rtd:$SBINDIR daemon/rtd-worker:$LIBEXECDIR/rtd client/rtctl:$BINDIR \
                 slurm/spank_rtd.so:$LIBDIR/slurm-wlm; do
                f=$build/${b%%:*}; d=$pay/stage${b#*:}
                if [ -e "$f" ]; then mkdir -p "$d"; cp -f "$f" "$d/"; else log "not built: $f"; fi
        done
        cat >"$pay/env" <<EOV
RTD_BIN=$SBINDIR/rtd
RTCTL_BIN=$BINDIR/rtctl
RTD_SYSCONFDIR=$SYSCONFDIR
RTD_SPANK_PLUGIN=$LIBDIR/slurm-wlm/spank_rtd.so
RTD_HOST_COMMIT=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
EOV
        # The guests' heartbeat for vm_watchdog: `"$PAY/heartbeat" &` first thing; it stops when the guest hangs.
        cat >"$pay/heartbeat" <<'EOH'
#!/bin/sh
while :; do cut -d' ' -f1 /proc/uptime >/mnt/results/heartbeat; sleep 5; done
EOH
        chmod 0755 "$pay/heartbeat"
        log "payload: $(cd "$pay/stage" && find . -type f | sed 's|^\.||' | tr '\n' ' ')"
}
