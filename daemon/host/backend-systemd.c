/* SPDX-License-Identifier: MIT */
/* The systemd backend: AllowedCPUs= on system.slice, user.slice, init.scope (and machine.slice) as runtime
 * properties over sd-bus. The reserved CPUs live in a different subtree: rtd.slice, where rtd.service and
 * its delegated worker and job cgroups run (rtd itself pins to the housekeeping CPUs). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "backend.h"
#include "shared/fileio.h"
#include "shared/log.h"

static void bus_unrefp(sd_bus **b) {
        sd_bus_flush_close_unref(*b);
}

static int bus_open(sd_bus **ret) {
        return sd_bus_open_system(ret);
}

static const char *unit_interface(const char *unit) {
        const char *dot = strrchr(unit, '.');

        if (dot && streq(dot, ".slice"))
                return "org.freedesktop.systemd1.Slice";
        if (dot && streq(dot, ".scope"))
                return "org.freedesktop.systemd1.Scope";
        return "org.freedesktop.systemd1.Service";
}

/* AllowedCPUs is a byte array, bit N of byte N/8 for CPU N. */
static size_t cpuset_to_bytes(const CpuSet *s, uint8_t *buf, size_t size) {
        int last = cpuset_last(s);
        size_t n = last < 0 ? 0 : (size_t) last / 8 + 1;

        n = MIN(n, size);
        memset(buf, 0, n);
        for (size_t i = 0; i < n * 8; i++)
                if (cpuset_isset(s, (unsigned) i))
                        buf[i / 8] |= (uint8_t) (1u << (i % 8));
        return n;
}

static void cpuset_from_bytes(const uint8_t *buf, size_t n, CpuSet *ret) {
        cpuset_zero(ret);
        for (size_t i = 0; i < n * 8 && i < CPUSET_MAX; i++)
                if (buf[i / 8] & (1u << (i % 8)))
                        cpuset_set(ret, (unsigned) i);
}

/* The unit's current AllowedCPUs as a CPU list ("" when unset); -ENOENT when the unit is not loaded. */
static int unit_get_allowed(sd_bus *bus, const char *unit, char **ret) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        const char *p;
        const void *data;
        size_t size;
        CpuSet set;
        int r;

        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnit", &error, &reply, "s", unit);
        if (r < 0) {
                sd_bus_error_free(&error);
                return -ENOENT;
        }
        r = sd_bus_message_read(reply, "o", &p);
        if (r < 0)
                return r;
        path = strdup(p);
        if (!path)
                return -ENOMEM;
        reply = sd_bus_message_unref(reply);
        r = sd_bus_get_property(bus, "org.freedesktop.systemd1", path, unit_interface(unit), "AllowedCPUs",
                                &error, &reply, "ay");
        sd_bus_error_free(&error);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &data, &size);
        if (r < 0)
                return r;
        cpuset_from_bytes(data, size, &set);
        return cpuset_format(&set, ret);
}

static int unit_set_allowed(sd_bus *bus, const char *unit, const CpuSet *cpus) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        uint8_t bytes[CPUSET_MAX / 8];
        size_t n = cpuset_to_bytes(cpus, bytes, sizeof bytes);
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "SetUnitProperties");
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", unit, 1);   /* runtime=true: gone at reboot */
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "AllowedCPUs");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "ay");
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', bytes, n);
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, 0, &error, NULL);
        if (r < 0)
                log_warning_errno(r, "SetUnitProperties(%s, AllowedCPUs) failed: %s", unit,
                                  error.message ?: "%m");
        sd_bus_error_free(&error);
        return r;
}

int systemd_backend_apply(KnobCtx *k, const CpuSet *hk, const CpuSet *reserved, CgroupState *st) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *hk_list = NULL;
        int r;

        r = bus_open(&bus);
        if (r < 0)
                return log_error_errno(r, "Could not connect to the system bus: %m");
        if (cpuset_format(hk, &hk_list) < 0)
                return -ENOMEM;
        json_decref(st->shrunk);
        st->shrunk = json_array();

        for (size_t i = 0; i < SYSTEMD_N_SHRUNK_UNITS; i++) {
                _cleanup_free_ char *cur = NULL;
                const char *unit = systemd_shrunk_units[i];
                JournalEntry *e = k->journal ? journal_find(k->journal, JOURNAL_UNIT, KNOB_PROC, unit) : NULL;

                r = unit_get_allowed(bus, unit, &cur);
                if (r == -ENOENT)
                        continue;       /* machine.slice exists only with VMs/containers */
                if (r < 0)
                        return log_error_errno(r, "Could not read AllowedCPUs of %s: %m", unit);
                if (k->plan) {
                        json_array_append_new(k->plan, json_pack("{s:s, s:s, s:s, s:s}", "unit", unit, "property",
                                                                 "AllowedCPUs", "from", cur, "to", hk_list));
                        continue;
                }
                if (!e) {
                        r = journal_add(k->journal, JOURNAL_UNIT, KNOB_PROC, unit, cur, &e, NULL);
                        if (r >= 0)
                                r = journal_flush(k->journal);
                        if (r < 0)
                                return r;
                }
                (void) journal_entry_set_applied(k->journal, e, hk_list);
                r = unit_set_allowed(bus, unit, hk);
                if (r < 0) {
                        /* The others still help; status shows which unit refused. */
                        json_array_append_new(st->shrunk, json_pack("{s:s, s:s, s:s}", "unit", unit, "cpus", cur,
                                                                    "error", strerror(-r)));
                        continue;
                }
                json_array_append_new(st->shrunk, json_pack("{s:s, s:s}", "unit", unit, "cpus", hk_list));
        }

        /* The reserved CPUs stay usable in rtd's own slice, which is not shrunk: workers and jobs live in
         * rtd's delegated cgroup and pin themselves; rtd pins itself to the housekeeping CPUs. */
        _cleanup_free_ char *own = NULL;
        free(st->reserved_cgroup);
        st->reserved_cgroup = own_cgroup(k->proc_fd, &own) >= 0 ? strdup(own) : NULL;
        free(st->partition_note);
        st->partition_note = strdup("no isolated cpuset partition with the systemd backend (systemd 252 has no "
                                    "CPUSetPartition=, and rtd's cgroup is systemd's to manage)");
        return 0;
}

int systemd_unit_restore(const char *unit, const char *original) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        CpuSet set = {};
        int r;

        if (original && cpuset_parse(original, &set, NULL) < 0)
                return -EINVAL;
        r = bus_open(&bus);
        if (r < 0)
                return r;
        if (cpuset_is_empty(&set)) {
                /* systemd writes no cpuset.cpus at all for an empty AllowedCPUs=, so the kernel would keep
                 * the housekeeping CPUs. Widen to every online CPU first (systemd writes cpuset.cpus), then
                 * set the property back to empty as found: unset in systemctl show, unconfined in the
                 * kernel. */
                _cleanup_free_ char *online = NULL;
                CpuSet all = {};

                if (read_one_line_at(AT_FDCWD, "/sys/devices/system/cpu/online", &online) >= 0 &&
                    cpuset_parse(online, &all, NULL) >= 0 && !cpuset_is_empty(&all)) {
                        r = unit_set_allowed(bus, unit, &all);
                        if (r < 0)
                                return r;
                }
        }
        /* An empty set writes "AllowedCPUs=", which is what an unset property was. */
        return unit_set_allowed(bus, unit, &set);
}

int systemd_unit_stop(const char *unit) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = bus_open(&bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "StopUnit", &error, NULL, "ss", unit, "fail");
        if (r < 0 && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit"))
                r = 0;
        sd_bus_error_free(&error);
        return r;
}

static int unit_undo(const JournalEntry *e, int proc_fd, int sys_fd) {
        return systemd_unit_restore(e->key, e->original);
}

static int unit_stop_undo(const JournalEntry *e, int proc_fd, int sys_fd) {
        return systemd_unit_stop(e->key);
}

void systemd_register_undo(void) {
        journal_register_undo(JOURNAL_UNIT, unit_undo);
        journal_register_undo(JOURNAL_UNIT_STOP, unit_stop_undo);
}
