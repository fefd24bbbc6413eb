/* SPDX-License-Identifier: MIT */
/* What this host offers, asked by all three backends and by the reservation: a real procfs, systemd as PID 1,
 * cgroup v2 cpusets, rtd's own cgroup; and so which backend can run here. The backends share these through
 * this module, never through each other. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <systemd/sd-daemon.h>

#include "probe.h"
#include "shared/fileio.h"
#include "shared/log.h"

#define CG "fs/cgroup"

bool proc_is_procfs(int proc_fd) {
        struct statfs sfs;

        return fstatfs(proc_fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
}

bool systemd_running(void) {
        return sd_booted() > 0;
}

const char *const systemd_shrunk_units[SYSTEMD_N_SHRUNK_UNITS] = {
        "system.slice", "user.slice", "init.scope", "machine.slice",
};

bool systemd_unit_is_shrunk(const char *unit) {
        for (size_t i = 0; i < SYSTEMD_N_SHRUNK_UNITS; i++)
                if (streq(unit, systemd_shrunk_units[i]))
                        return true;
        return false;
}

bool cgroup_v2_cpuset_available(int sys_fd, char **ret_reason) {
        _cleanup_free_ char *ctl = NULL;
        int r = read_one_line_at(sys_fd, CG "/cgroup.controllers", &ctl);

        if (r < 0) {
                if (ret_reason)
                        *ret_reason = strdup("cgroup v2 is not mounted at /sys/fs/cgroup (a v1 or hybrid "
                                             "hierarchy)");
                return false;
        }
        for (char *s = ctl, *save = NULL, *t; (t = strtok_r(s, " ", &save)); s = NULL)
                if (streq(t, "cpuset"))
                        return true;
        if (ret_reason)
                *ret_reason = strdup("the cpuset controller is not available in the cgroup v2 hierarchy (it "
                                     "may be bound to a v1 hierarchy)");
        return false;
}

int own_cgroup(int proc_fd, char **ret) {
        _cleanup_free_ char *text = NULL;
        int r = read_full_file_at(proc_fd, "self/cgroup", &text, NULL);

        if (r < 0)
                return r;
        for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
                nl = strchr(l, '\n');
                if (nl)
                        *nl = 0;
                if (startswith(l, "0::")) {
                        *ret = strdup(l + 3);
                        return *ret ? 0 : -ENOMEM;
                }
        }
        return -ENOENT;
}

/* The top-level cgroup holding cgroup path p ("/system.slice/rtd.service" → "system.slice"), or NULL. */
char *cgroup_top(const char *p) {
        while (*p == '/')
                p++;
        return *p ? strndup(p, strcspn(p, "/")) : NULL;
}

int backend_detect(int proc_fd, int sys_fd, BackendKind wanted, BackendKind *ret, char **ret_reason) {
        _cleanup_free_ char *why = NULL, *own = NULL, *top = NULL;
        bool cg = cgroup_v2_cpuset_available(sys_fd, &why);
        bool real = proc_is_procfs(proc_fd);
        bool sd = real && systemd_running();
        char *reason = NULL;
        int r = 0;

        /* The systemd backend shrinks the top-level units; rtd's workers and jobs live in rtd's own
         * cgroup, so rtd must not be inside one of them (rtd.service ships with Slice=rtd.slice). */
        if (real && own_cgroup(proc_fd, &own) >= 0)
                top = cgroup_top(own);
        bool inside_shrunk = top && systemd_unit_is_shrunk(top);

        switch (wanted) {
        case BACKEND_SYSTEMD:
                if (!sd || !cg)
                        r = asprintf(&reason, "Backend=systemd needs systemd as PID 1 and cgroup v2 with the cpuset "
                                              "controller%s%s", cg ? "" : ": ", cg ? "" : strempty(why));
                else if (inside_shrunk)
                        r = asprintf(&reason, "Backend=systemd: rtd runs in %s (cgroup %s), which this backend "
                                              "shrinks to the housekeeping CPUs, so its workers could not use the "
                                              "reserved ones; run rtd.service with Slice=rtd.slice (as shipped)",
                                     top, own);
                else {
                        reason = strdup("Backend=systemd");
                        break;
                }
                if (ret_reason)
                        *ret_reason = r < 0 ? NULL : reason;
                else
                        free(reason);
                return -EOPNOTSUPP;
        case BACKEND_CGROUP:
                if (!cg) {
                        if (ret_reason)
                                *ret_reason = asprintf(&reason, "Backend=cgroup: %s", strempty(why)) < 0 ? NULL
                                                                                                       : reason;
                        return -EOPNOTSUPP;
                }
                reason = strdup("Backend=cgroup");
                break;
        case BACKEND_AFFINITY:
                reason = strdup("Backend=affinity");
                break;
        default:
                if (sd && cg && !inside_shrunk) {
                        wanted = BACKEND_SYSTEMD;
                        reason = strdup("auto: systemd is PID 1 and cgroup v2 has the cpuset controller");
                } else if (cg && real && !sd) {
                        wanted = BACKEND_CGROUP;
                        reason = strdup("auto: cgroup v2 with the cpuset controller, systemd is not PID 1");
                } else {
                        wanted = BACKEND_AFFINITY;
                        if (!real)
                                reason = strdup("auto: not a real /proc (test root): tasks left alone");
                        else if (sd && cg)
                                r = asprintf(&reason, "auto: systemd runs, but rtd itself is in %s, which the "
                                                      "systemd backend would shrink (run rtd.service with "
                                                      "Slice=rtd.slice)", strempty(top));
                        else
                                r = asprintf(&reason, "auto: %s", strempty(why));
                        if (r < 0)
                                reason = NULL;
                }
        }
        *ret = wanted;
        if (ret_reason)
                *ret_reason = reason;
        else
                free(reason);
        return 0;
}
