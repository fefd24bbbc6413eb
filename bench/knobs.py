# SPDX-License-Identifier: MIT
# bench/knobs.py: snapshot of the global knobs rtd may change (design.md §4), and putting them back.
# bench/run takes the snapshot before it starts rtd and compares after rtd stopped: a difference means
# rtd failed to restore something, which bench/run then repairs and reports.
import glob
import os

FILES = [
        '/proc/sys/kernel/sched_rt_runtime_us',
        '/proc/sys/kernel/sched_rt_period_us',
        '/proc/sys/kernel/timer_migration',
        '/proc/sys/vm/stat_interval',
        '/proc/irq/default_smp_affinity',
        '/sys/devices/virtual/workqueue/cpumask',
]
GLOBS = [
        '/proc/irq/*/smp_affinity_list',
        '/sys/devices/virtual/workqueue/*/cpumask',
        '/sys/kernel/debug/sched/fair_server/cpu*/runtime',
]


def _read(path):
        try:
                with open(path) as f:
                        return f.read().strip()
        except OSError:
                return None


def snapshot():
        paths = list(FILES)
        for g in GLOBS:
                paths.extend(sorted(glob.glob(g)))
        snap = {}
        for p in paths:
                v = _read(p)
                if v is not None:
                        snap[p] = v
        return snap


def restore(snap):
        """Write back every knob that differs from snap; returns one line per difference found."""
        diffs = []
        for path, orig in snap.items():
                now = _read(path)
                if now is None or now == orig:
                        continue        # gone (an IRQ freed, a debugfs unmounted) or unchanged
                try:
                        with open(path, 'w') as f:
                                f.write(orig + '\n')
                        after = _read(path)
                        how = 'put back' if after == orig else f'wrote it back, reads {after!r}'
                except OSError as e:
                        how = f'could not put back: {os.strerror(e.errno)}'
                diffs.append(f'{path}: was {orig!r}, found {now!r}; {how}')
        return diffs
