/* SPDX-License-Identifier: MIT */
/* Residual noise sources of a reserved CPU (issue 18 point 4), by kernel feature detection: the tick, RCU
 * callbacks, managed IRQs, timers pulled in by timer migration, RT throttling, the fair server. Only reading;
 * what rtd can change at run time it changes elsewhere (tune.c, irq.c): this says what is left and what would
 * remove it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "residual.h"
#include "tune.h"
#include "shared/fileio.h"
#include "shared/macro.h"

static char *drop(char *p) {
        free(p);
        return NULL;
}

/* The value of a boot parameter ("nohz_full=2-3" -> "2-3"), NULL when absent. */
static char *cmdline_param(const char *cmdline, const char *key) {
        size_t n = strlen(key);

        for (const char *p = cmdline; p && *p; p = strchr(p, ' ')) {
                while (*p == ' ')
                        p++;
                if (strncmp(p, key, n) == 0 && p[n] == '=')
                        return strndup(p + n + 1, strcspn(p + n + 1, " "));
        }
        return NULL;
}

/* Whether reserved is within the CPU list at the end of v ("managed_irq,domain,2-3" -> "2-3"). */
static bool covers(const char *v, const CpuSet *reserved) {
        const char *list = v ? strrchr(v, ',') : NULL;
        CpuSet s = {};

        list = list ? list + 1 : v;
        return list && cpuset_parse(list, &s, NULL) >= 0 && cpuset_is_subset(reserved, &s) &&
               !cpuset_is_empty(reserved);
}

/* kernel.sched_rt_runtime_us as the reservation knows it, read only when it does not (tune.h says why). */
static char *rt_runtime(int proc_fd, const TuneState *tune) {
        const char *known = tune ? tune_known_value(tune, "kernel.sched_rt_runtime_us") : NULL;
        char *s = NULL;

        if (known)
                return strdup(known);
        (void) read_one_line_at(proc_fd, "sys/kernel/sched_rt_runtime_us", &s);
        return s;
}

static void add(json_t *a, const char *source, bool reaches, const char *evidence, const char *remedy) {
        json_array_append_new(a, json_pack("{s:s, s:b, s:s, s:s?}", "source", source, "reaches", reaches,
                                           "evidence", evidence, "remedy", reaches ? remedy : NULL));
}

json_t *residual_sources(int proc_fd, int sys_fd, const CpuSet *reserved, const TuneState *tune) {
        _cleanup_free_ char *cmdline = NULL, *list = NULL, *nohz = NULL, *nocbs = NULL, *isol = NULL;
        _cleanup_free_ char *tm = NULL, *rt = NULL, *ev = NULL, *rem = NULL;
        json_t *a = json_array();
        bool nohz_kernel, tick_stopped, rcu_off;

        if (!a)
                return NULL;
        (void) read_one_line_at(proc_fd, "cmdline", &cmdline);
        (void) cpuset_format(reserved, &list);
        /* The sysfs file exists only on a kernel built with CONFIG_NO_HZ_FULL. */
        nohz_kernel = read_one_line_at(sys_fd, "devices/system/cpu/nohz_full", &nohz) >= 0;
        if (nohz && streq(nohz, "(null)"))      /* what the file says when no CPU is nohz_full (6.1) */
                nohz = drop(nohz);
        tick_stopped = nohz_kernel && covers(nohz, reserved);
        if (asprintf(&ev, nohz_kernel ? "nohz_full=%s on this boot" : "kernel built without CONFIG_NO_HZ_FULL "
                     "(no /sys/devices/system/cpu/nohz_full): the tick runs at HZ on a busy CPU%s",
                     nohz_kernel ? nohz ?: "(absent)" : "") < 0 ||
            asprintf(&rem, nohz_kernel ? "boot with nohz_full=%s" : "a kernel built with CONFIG_NO_HZ_FULL, "
                     "booted with nohz_full=%s", strempty(list)) < 0)
                return a;
        add(a, "tick", !tick_stopped, ev, rem);
        ev = drop(ev), rem = drop(rem);

        /* nohz_full= implies rcu_nocbs= for the same CPUs. */
        nocbs = cmdline ? cmdline_param(cmdline, "rcu_nocbs") : NULL;
        rcu_off = covers(nocbs, reserved) || tick_stopped;
        if (asprintf(&ev, "rcu_nocbs=%s on this boot", nocbs ?: "(absent)") < 0 ||
            asprintf(&rem, "boot with rcu_nocbs=%s (callbacks run by rcuo kthreads on housekeeping CPUs)",
                     strempty(list)) < 0)
                return a;
        add(a, "RCU callbacks", !rcu_off, ev, rem);
        ev = drop(ev), rem = drop(rem);

        isol = cmdline ? cmdline_param(cmdline, "isolcpus") : NULL;
        if (asprintf(&ev, "isolcpus=%s on this boot", isol ?: "(absent)") < 0 ||
            asprintf(&rem, "boot with isolcpus=managed_irq,%s (kernel-managed queue IRQs avoid the CPUs "
                     "where the device allows it)", strempty(list)) < 0)
                return a;
        add(a, "managed IRQs", !(isol && strstr(isol, "managed_irq") && covers(isol, reserved)), ev, rem);
        ev = drop(ev), rem = drop(rem);

        /* Timer migration (6.9+ hierarchy): idle CPUs hand their global timers to a CPU that is awake, and a
         * reserved CPU running a job is always awake. While the tick runs at HZ that costs nothing measurable
         * (tune.c); on a tickless CPU each pulled-in timer would be an interrupt of its own. */
        if (read_one_line_at(proc_fd, "sys/kernel/timer_migration", &tm) >= 0) {
                if (asprintf(&ev, "kernel.timer_migration=%s%s", tm, tick_stopped ? "" : "; the tick runs anyway, "
                             "and 0 against 1 made no difference on a busy reserved CPU (bench/floor-run)") < 0)
                        return a;
                add(a, "timers pulled in by timer migration", streq(tm, "1") && tick_stopped, ev,
                    "kernel.timer_migration=0 ([Tuning] TimerMigration=0)");
                ev = drop(ev);
        }

        /* RT throttling: real-time tasks stop for (period - runtime) each period, the CPU idles or runs CFS
         * tasks meanwhile (measured by bench/floor-run: one 50 ms gap a second with the default 950000). */
        rt = rt_runtime(proc_fd, tune);
        if (rt) {
                if (asprintf(&ev, "kernel.sched_rt_runtime_us=%s", rt) < 0)
                        return a;
                add(a, "RT throttling", !streq(rt, "-1"), ev, "kernel.sched_rt_runtime_us=-1 ([Tuning] RTRuntimeUSec=-1)");
                ev = drop(ev);
        }

        /* The fair server (6.12+) lends CFS tasks runtime on a CPU busy with real-time work: up to 5% of
         * it by default (50 ms a second). */
        struct utsname u;
        _cleanup_free_ char *why = NULL;
        int fs = tune_fair_server_probe(sys_fd, uname(&u) == 0 ? u.release : NULL, &why);
        if (fs == -EOPNOTSUPP)
                add(a, "fair server", false, why, NULL);
        else if (fs < 0 && asprintf(&ev, "%s: CFS tasks may get up to 5%% of a reserved CPU", strempty(why)) >= 0) {
                add(a, "fair server", true, ev, fs == -EPERM ? "boot without kernel lockdown (kernel_lockdown(7)), "
                    "then set [Tuning] FairServerRuntimeUSec=0: nothing at run time changes it under lockdown" :
                    "mount debugfs and set [Tuning] FairServerRuntimeUSec=0");
                ev = drop(ev);
        }
        for (int cpu = cpuset_first(reserved); fs == 0 && cpu >= 0; cpu = cpuset_next(reserved, cpu)) {
                char path[96];
                _cleanup_free_ char *runtime = NULL;

                (void) snprintf(path, sizeof path, "kernel/debug/sched/fair_server/cpu%d/runtime", cpu);
                if (read_one_line_at(sys_fd, path, &runtime) < 0) {
                        if (asprintf(&ev, "cannot read /sys/%s: CFS tasks may get up to 5%% of a reserved CPU",
                                     path) < 0)
                                return a;
                        add(a, "fair server", true, ev, "[Tuning] FairServerRuntimeUSec=0");
                        ev = drop(ev);
                        break;
                }
                if (!streq(runtime, "0")) {
                        if (asprintf(&ev, "fair_server/cpu%d/runtime=%s ns", cpu, runtime) < 0)
                                return a;
                        add(a, "fair server", true, ev, "[Tuning] FairServerRuntimeUSec=0");
                        ev = drop(ev);
                        break;
                }
                if (cpuset_next(reserved, cpu) < 0)
                        add(a, "fair server", false, "runtime 0 on every reserved CPU", NULL);
        }
        return a;
}
