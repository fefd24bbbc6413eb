/* SPDX-License-Identifier: MIT */
/* rtd.conf: a table of {section, key, parser, offset}; parsing is pure so tests feed strings. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config-internal.h"
#include "config.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/parse-util.h"

#define DEFAULT_MAX_BODY_BYTES (1024u * 1024u)
#define DEFAULT_MAX_CONNECTIONS 256u

static const char *const smt_names[_SMT_MODE_MAX] = { "exclusive", "shared" };
static const char *const backend_names[_BACKEND_KIND_MAX] = { "auto", "systemd", "cgroup", "affinity" };
static const char *const irq_names[_IRQ_MODE_MAX] = { "housekeeping", "keep" };
static const char *const queue_names[_QUEUE_POLICY_MAX] = { "fcfs", "priority" };

const char *smt_mode_to_string(SmtMode m) {
        return m >= 0 && m < _SMT_MODE_MAX ? smt_names[m] : NULL;
}
const char *backend_kind_to_string(BackendKind b) {
        return b >= 0 && b < _BACKEND_KIND_MAX ? backend_names[b] : NULL;
}
const char *irq_mode_to_string(IrqMode m) {
        return m >= 0 && m < _IRQ_MODE_MAX ? irq_names[m] : NULL;
}
const char *queue_policy_to_string(QueuePolicy p) {
        return p >= 0 && p < _QUEUE_POLICY_MAX ? queue_names[p] : NULL;
}

static char *env_or(const char *env, const char *def) {
        const char *e = getenv(env);
        /* systemd may pass several colon-separated directories: the first one is ours. */
        if (e && *e && e[0] == '/')
                return strndup(e, strcspn(e, ":"));
        return strdup(def);
}

RtdConfig *config_new(void) {
        RtdConfig *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        *c = (RtdConfig){
                .socket_mode = 0660,
                .log_level = LOG_INFO,
                .max_body_bytes = DEFAULT_MAX_BODY_BYTES,
                .max_connections = DEFAULT_MAX_CONNECTIONS,
                .max_connections_per_user = 32,
                .reserved_admin_connections = 16,
                .max_streams_per_user = 16,
                .max_header_bytes = 16384,
                .max_uri_bytes = 8192,
                .header_timeout_sec = 10,
                .metrics_max_connections = 32,
                .metrics_timeout_sec = 10,
                .reserve_mode = RESERVE_AUTO,
                .smt = SMT_EXCLUSIVE,
                .backend = BACKEND_AUTO,
                .irqs = IRQ_HOUSEKEEPING,
                .check_interval_sec = 10,
                .rt_runtime_usec = TUNE_KEEP,
                .fair_server_runtime_usec = TUNE_KEEP,
                .timer_migration = TUNE_KEEP,
                .stat_interval_sec = TUNE_KEEP,
                .starvation_guard = STARVATION_GUARD_KERNEL,
                .starvation_threshold_usec = 1000000,
                .starvation_boost_runtime_usec = 20,
                .starvation_boost_period_usec = 1000,
                .starvation_boost_duration_usec = 1000000,
                .queue_policy = QUEUE_FCFS,
                .worker_priority = 99,
                .default_priority = 50,
                .intruder_table_size = 1024,
                .kill_grace_sec = 5,
                .max_queued = 100000,
                .keep_finished = 10000,
                .max_array_size = 10000,
                .aging_sec = 10,
                .start_timeout_sec = 10,
                .max_output_bytes = UINT64_C(1) << 30,
                .max_tasks = 4096,
                .max_memory = CONFIG_INFINITY,
                .default_timeout_sec = 0,
                .max_queue_priority = 0,
                .max_priority = 80,
                .max_cores_per_user = 0,
                .max_queued_per_user = 1000,
                .max_timeout_sec = 0,
        };
        c->socket_path = strdup("/run/rtd/rtd.sock");
        c->socket_group = strdup("rtd");
        if (asprintf(&c->metrics_listen, "127.0.0.1:%d", RTD_DEFAULT_METRICS_PORT) < 0)
                c->metrics_listen = NULL;
        c->state_directory = env_or("STATE_DIRECTORY", "/var/lib/rtd");
        c->runtime_directory = env_or("RUNTIME_DIRECTORY", "/run/rtd");
        c->submit_group = strdup("rtd");
        if (!c->socket_path || !c->socket_group || !c->metrics_listen || !c->state_directory ||
            !c->runtime_directory || !c->submit_group)
                return config_free(c);
        return c;
}

RtdConfig *config_free(RtdConfig *c) {
        if (!c)
                return NULL;
        free(c->socket_path);
        free(c->socket_group);
        free(c->metrics_listen);
        free(c->state_directory);
        free(c->runtime_directory);
        free(c->admin_group);
        free(c->submit_group);
        free(c->lease_group);
        free(c->origin_worker_priority);
        free(c->origin_default_priority);
        free(c->origin_max_priority);
        free(c);
        return NULL;
}

static const SizeRange range_output = { 4096, "a size in bytes of at least 4096 (K, M, G, T suffixes) or infinity" };
static const SizeRange range_tasks = { 1, "a number of tasks of at least 1, or infinity" };
static const SizeRange range_memory = { 1024 * 1024, "a size in bytes of at least 1M (K, M, G, T suffixes) or "
                                        "infinity" };
static const UintRange range_interval = { 0, 86400, "a number of seconds from 0 (off) to 86400" };
static const UintRange range_prio = { 1, 99, "a priority from 1 to 99" };
static const UintRange range_grace = { 0, 3600, "a number of seconds from 0 to 3600" };
static const UintRange range_count = { 1, 10000000, "a number from 1 to 10000000" };
static const UintRange range_count0 = { 0, 10000000, "a number from 0 (no limit) to 10000000" };
static const UintRange range_body = { 1024, 64u * 1024 * 1024, "a size in bytes from 1024 to 67108864" };
static const UintRange range_array = { 1, 1000000, "a number of tasks from 1 to 1000000" };
static const UintRange range_conn = { 1, 65536, "a number from 1 to 65536" };
static const UintRange range_conn0 = { 0, 65535, "a number from 0 to 65535" };
static const UintRange range_head = { 1024, 1024 * 1024, "a size in bytes from 1024 to 1048576" };
static const UintRange range_http_timeout = { 1, 3600, "a number of seconds from 1 to 3600" };
static const UintRange range_start_timeout = { 1, 3600, "a number of seconds from 1 to 3600" };
static const UintRange range_timeout = { 0, 365u * 86400, "a number of seconds, 0 for no cap" };
static const UintRange range_default_timeout = { 0, 365u * 86400, "a number of seconds, 0 for none" };
static const UintRange range_queue_prio = { 0, 1000, "a queue priority from 0 to 1000" };
static const UintRange range_intruders = { 8, 65536, "a number of entries from 8 to 65536" };
static const TuneRange range_rt_runtime = { -1, 1000000, "keep, -1 (no throttling) or microseconds 0..1000000" };
static const TuneRange range_fair = { 0, 1000000, "keep or microseconds 0..1000000" };
static const TuneRange range_bool = { 0, 1, "keep, 0 or 1" };
static const TuneRange range_stat = { 1, 3600, "keep or seconds 1..3600" };
static const UsecRange range_starve = { 10000, 3600000000ULL, "seconds from 0.01 to 3600, e.g. 0.5" };
static const UsecRange range_boost_time = { 10000, 3600000000ULL, "seconds from 0.01 to 3600" };
static const UintRange range_boost_runtime = { 2, 1000000, "microseconds from 2 to 1000000" };
static const UintRange range_boost_period = { 100, 4000000, "microseconds from 100 to 4000000" };
static const EnumSpec smt_enum = { (const char *const[]){ "exclusive", "shared", NULL }, "exclusive or shared" };
static const EnumSpec backend_enum = { (const char *const[]){ "auto", "systemd", "cgroup", "affinity", NULL },
                                       "auto, systemd, cgroup or affinity" };
static const EnumSpec irq_enum = { (const char *const[]){ "housekeeping", "keep", NULL }, "housekeeping or keep" };
static const EnumSpec guard_enum = { (const char *const[]){ "no", "kernel", "all", NULL }, "kernel, all or no" };
static const EnumSpec queue_enum = { (const char *const[]){ "fcfs", "priority", NULL }, "fcfs or priority" };

#define F(field) offsetof(RtdConfig, field)
static const ConfItem items[] = {
        { "Daemon", "Socket", parse_absolute_path, F(socket_path) },
        { "Daemon", "SocketMode", parse_socket_mode, F(socket_mode) },
        { "Daemon", "SocketGroup", parse_group_or_none, F(socket_group) },
        { "Daemon", "MetricsListen", parse_listen, F(metrics_listen) },
        { "Daemon", "StateDirectory", parse_absolute_path, F(state_directory) },
        { "Daemon", "RuntimeDirectory", parse_absolute_path, F(runtime_directory) },
        { "Daemon", "LogLevel", parse_log_level, F(log_level) },
        { "Daemon", "MaxRequestBodyBytes", parse_uint, F(max_body_bytes), &range_body },
        { "Daemon", "MaxConnections", parse_uint, F(max_connections), &range_conn },
        { "Daemon", "MaxConnectionsPerUser", parse_uint, F(max_connections_per_user), &range_conn },
        { "Daemon", "ReservedAdminConnections", parse_uint, F(reserved_admin_connections), &range_conn0 },
        { "Daemon", "MaxStreamsPerUser", parse_uint, F(max_streams_per_user), &range_conn },
        { "Daemon", "MaxHeaderBytes", parse_uint, F(max_header_bytes), &range_head },
        { "Daemon", "MaxURIBytes", parse_uint, F(max_uri_bytes), &range_head },
        { "Daemon", "HeaderTimeoutSec", parse_uint, F(header_timeout_sec), &range_http_timeout },
        { "Daemon", "MetricsMaxConnections", parse_uint, F(metrics_max_connections), &range_conn },
        { "Daemon", "MetricsTimeoutSec", parse_uint, F(metrics_timeout_sec), &range_http_timeout },
        { "Reserve", "CPUs", parse_reserve_cpus, F(reserve_mode) },
        { "Reserve", "SMT", parse_enum, F(smt), &smt_enum },
        { "Reserve", "Backend", parse_enum, F(backend), &backend_enum },
        { "Reserve", "IRQs", parse_enum, F(irqs), &irq_enum },
        { "Reserve", "CheckIntervalSec", parse_uint, F(check_interval_sec), &range_interval },
        { "Tuning", "RTRuntimeUSec", parse_tune, F(rt_runtime_usec), &range_rt_runtime },
        { "Tuning", "FairServerRuntimeUSec", parse_tune, F(fair_server_runtime_usec), &range_fair },
        { "Tuning", "TimerMigration", parse_tune, F(timer_migration), &range_bool },
        { "Tuning", "StatIntervalSec", parse_tune, F(stat_interval_sec), &range_stat },
        { "Tuning", "StarvationGuard", parse_enum, F(starvation_guard), &guard_enum },
        { "Tuning", "StarvationThresholdSec", parse_sec_usec, F(starvation_threshold_usec), &range_starve },
        { "Tuning", "StarvationBoostRuntimeUSec", parse_uint, F(starvation_boost_runtime_usec), &range_boost_runtime },
        { "Tuning", "StarvationBoostPeriodUSec", parse_uint, F(starvation_boost_period_usec), &range_boost_period },
        { "Tuning", "StarvationBoostDurationSec", parse_sec_usec, F(starvation_boost_duration_usec), &range_boost_time },
        { "Metrics", "ProgramStats", parse_bool, F(program_stats) },
        { "Metrics", "IntruderTableSize", parse_uint, F(intruder_table_size), &range_intruders },
        { "Jobs", "Policy", parse_enum, F(queue_policy), &queue_enum },
        { "Jobs", "WorkerPriority", parse_uint, F(worker_priority), &range_prio },
        { "Jobs", "DefaultPriority", parse_uint, F(default_priority), &range_prio },
        { "Jobs", "KillGraceSec", parse_uint, F(kill_grace_sec), &range_grace },
        { "Jobs", "MaxQueued", parse_uint, F(max_queued), &range_count },
        { "Jobs", "KeepFinished", parse_uint, F(keep_finished), &range_count0 },
        { "Jobs", "AgingSec", parse_uint, F(aging_sec), &range_interval },
        { "Jobs", "StartTimeoutSec", parse_uint, F(start_timeout_sec), &range_start_timeout },
        { "Jobs", "MaxOutputBytes", parse_size, F(max_output_bytes), &range_output },
        { "Jobs", "MaxTasks", parse_size, F(max_tasks), &range_tasks },
        { "Jobs", "MaxMemory", parse_size, F(max_memory), &range_memory },
        { "Jobs", "DefaultTimeoutSec", parse_uint, F(default_timeout_sec), &range_default_timeout },
        { "Jobs", "RealtimeWithoutCpuset", parse_bool, F(realtime_without_cpuset) },
        { "Jobs", "MaxArraySize", parse_uint, F(max_array_size), &range_array },
        { "Access", "AdminGroup", parse_group_or_none, F(admin_group) },
        { "Access", "SubmitGroup", parse_group_or_none, F(submit_group) },
        { "Access", "MaxPriority", parse_uint, F(max_priority), &range_prio },
        { "Access", "MaxCoresPerUser", parse_uint, F(max_cores_per_user), &range_count0 },
        { "Access", "MaxQueuedPerUser", parse_uint, F(max_queued_per_user), &range_count },
        { "Access", "MaxTimeoutSec", parse_uint, F(max_timeout_sec), &range_timeout },
        { "Access", "MaxQueuePriority", parse_uint, F(max_queue_priority), &range_queue_prio },
        { "Access", "LeaseGroup", parse_group_or_none, F(lease_group) },
        {},
};
#undef F

size_t config_key_count(void) {
        return ELEMENTSOF(items) - 1;
}

/* Remember where the keys that config_validate() weighs against each other were set. */
static int note_origin(RtdConfig *c, const ConfItem *item, const char *filename, unsigned line) {
        char **slot = item->offset == offsetof(RtdConfig, worker_priority)    ? &c->origin_worker_priority
                      : item->offset == offsetof(RtdConfig, default_priority) ? &c->origin_default_priority
                      : item->offset == offsetof(RtdConfig, max_priority)     ? &c->origin_max_priority
                                                                              : NULL;
        if (!slot)
                return 0;
        free(*slot);
        if (asprintf(slot, "%s:%u", filename, line) < 0) {
                *slot = NULL;
                return -ENOMEM;
        }
        return 0;
}

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static bool section_known(const char *s) {
        for (const ConfItem *i = items; i->section; i++)
                if (streq(i->section, s))
                        return true;
        return false;
}

int config_parse_text(RtdConfig *c, const char *filename, const char *text, FILE *err, unsigned *ret_warnings) {
        _cleanup_free_ char *copy = strdup(text), *section = NULL;
        unsigned line = 0, warnings = 0, errors = 0;
        char *saveptr = NULL;

        if (!copy)
                return -ENOMEM;

        for (char *l = copy; l; l = saveptr) {
                char *nl = strchr(l, '\n'), *p, *eq, *key, *value;
                const ConfItem *item = NULL;

                saveptr = nl ? nl + 1 : NULL;
                if (nl)
                        *nl = 0;
                line++;
                p = strip(l);
                if (!*p || *p == '#' || *p == ';')
                        continue;

                if (*p == '[') {
                        char *end = strchr(p, ']');
                        if (!end || end[1] != 0) {
                                fprintf(err, "%s:%u: malformed section header '%s': expected [Section]\n",
                                        filename, line, p);
                                errors++;
                                continue;
                        }
                        free(section);
                        section = strndup(p + 1, (size_t) (end - p - 1));
                        if (!section)
                                return -ENOMEM;
                        if (!section_known(section)) {
                                fprintf(err, "%s:%u: warning: unknown section [%s], ignoring its keys\n",
                                        filename, line, section);
                                warnings++;
                        }
                        continue;
                }

                eq = strchr(p, '=');
                if (!eq) {
                        fprintf(err, "%s:%u: expected Key=Value, got '%s'\n", filename, line, p);
                        errors++;
                        continue;
                }
                *eq = 0;
                key = strip(p);
                value = strip(eq + 1);
                if (!section) {
                        fprintf(err, "%s:%u: key '%s' outside of a [Section]\n", filename, line, key);
                        errors++;
                        continue;
                }
                if (!section_known(section))
                        continue;       /* already warned about the section */

                for (const ConfItem *i = items; i->section; i++)
                        if (streq(i->section, section) && streq(i->key, key)) {
                                item = i;
                                break;
                        }
                if (!item) {
                        fprintf(err, "%s:%u: warning: unknown key '%s' in [%s], ignoring\n", filename, line, key,
                                section);
                        warnings++;
                        continue;
                }

                const char *allowed = "a valid value";
                int r = item->parse(value, (char *) c + item->offset, item->arg, &allowed);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        fprintf(err, "%s:%u: invalid value '%s' for %s= in [%s]: expected %s\n", filename, line,
                                value, key, section, allowed);
                        errors++;
                } else if (note_origin(c, item, filename, line) < 0)
                        return -ENOMEM;
        }

        if (ret_warnings)
                *ret_warnings += warnings;
        return errors > 0 ? -EINVAL : 0;
}

static int load_one(RtdConfig *c, const char *path, FILE *err, bool must_exist) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_full_file_at(AT_FDCWD, path, &text, NULL);
        if (r == -ENOENT && !must_exist)
                return 0;
        if (r < 0) {
                fprintf(err, "%s: cannot read: %s\n", path, strerror(-r));
                return r;
        }
        return config_parse_text(c, path, text, err, NULL);
}

static int filter_conf(const struct dirent *d) {
        size_t l = strlen(d->d_name);
        return d->d_name[0] != '.' && l > 5 && streq(d->d_name + l - 5, ".conf");
}

int config_load(RtdConfig *c, const char *path, FILE *err) {
        _cleanup_free_ char *dropin_dir = NULL;
        struct dirent **list = NULL;
        bool explicit_path = path != NULL;
        int r, n, result = 0;

        if (!path)
                path = RTD_SYSCONFDIR "/rtd/rtd.conf";
        /* The default file may be absent (all defaults); a file named on the command line must exist. */
        r = load_one(c, path, err, explicit_path);
        if (r < 0)
                result = r;

        if (asprintf(&dropin_dir, "%s.d", path) < 0)
                return -ENOMEM;
        n = scandir(dropin_dir, &list, filter_conf, alphasort);
        if (n < 0)
                return result;  /* no drop-in directory */
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s/%s", dropin_dir, list[i]->d_name) >= 0) {
                        r = load_one(c, p, err, true);
                        if (r < 0 && result == 0)
                                result = r;
                }
                free(list[i]);
        }
        free(list);
        return result;
}

/*
 * A job's priority must stay below its worker's, so the worker always preempts the job on its CPU (to reap,
 * report, start the next job, give a start up). Named at the line that set the key, else WorkerPriority='s.
 */
static int check_below_worker(const RtdConfig *c, FILE *err, const char *section, const char *key, unsigned v,
                              const char *origin) {
        if (v < c->worker_priority)
                return 0;
        fprintf(err, "%s: [%s] %s=%u must be below [Jobs] WorkerPriority=%u, so that rtd's worker always preempts "
                     "a job on its CPU; lower %s= or raise WorkerPriority=\n",
                origin ?: c->origin_worker_priority ?: "(defaults)", section, key, v, c->worker_priority, key);
        return -EINVAL;
}

int config_validate(const RtdConfig *c, FILE *err) {
        int r = 0;

        if (check_below_worker(c, err, "Jobs", "DefaultPriority", c->default_priority, c->origin_default_priority) < 0)
                r = -EINVAL;
        if (check_below_worker(c, err, "Access", "MaxPriority", c->max_priority, c->origin_max_priority) < 0)
                r = -EINVAL;
        if (c->max_uri_bytes > c->max_header_bytes) {
                fprintf(err, "[Daemon] MaxURIBytes=%u must not exceed MaxHeaderBytes=%u (the URL is part of the "
                             "request head); lower it or raise MaxHeaderBytes=\n",
                        c->max_uri_bytes, c->max_header_bytes);
                r = -EINVAL;
        }

        if (c->default_priority > c->max_priority && c->max_priority < 99)
                fprintf(err, "warning: [Jobs] DefaultPriority=%u is above [Access] MaxPriority=%u; "
                             "non-admin jobs will be capped to %u\n",
                        c->default_priority, c->max_priority, c->max_priority);
        if (c->starvation_boost_runtime_usec > c->starvation_boost_period_usec) {
                fprintf(err, "[Tuning] StarvationBoostRuntimeUSec=%u exceeds StarvationBoostPeriodUSec=%u; "
                             "lower the runtime or raise the period\n",
                        c->starvation_boost_runtime_usec, c->starvation_boost_period_usec);
                r = -EINVAL;
        }
        if (c->max_timeout_sec > 0 && c->default_timeout_sec > c->max_timeout_sec) {
                fprintf(err, "[Jobs] DefaultTimeoutSec=%u is above [Access] MaxTimeoutSec=%u: non-admins could "
                             "not even submit a job without a timeout; lower DefaultTimeoutSec= or raise "
                             "MaxTimeoutSec=\n", c->default_timeout_sec, c->max_timeout_sec);
                r = -EINVAL;
        }
        if (streq(c->state_directory, c->runtime_directory)) {
                fprintf(err, "StateDirectory= and RuntimeDirectory= must differ (both are %s)\n",
                        c->state_directory);
                r = -EINVAL;
        }
        return r;
}

static const char *size_str(uint64_t v, char buf[static 32]) {
        if (v == CONFIG_INFINITY)
                return "infinity";
        snprintf(buf, 32, "%llu", (unsigned long long) v);
        return buf;
}

static const char *tune_str(int64_t v, char buf[static 32]) {
        if (v == TUNE_KEEP)
                return "keep";
        snprintf(buf, 32, "%lld", (long long) v);
        return buf;
}

int config_dump(const RtdConfig *c, FILE *out) {
        _cleanup_free_ char *cpus = NULL;
        char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];

        if (c->reserve_mode == RESERVE_LIST && cpuset_format(&c->reserve_cpus, &cpus) < 0)
                return -ENOMEM;
        fprintf(out,
                "[Daemon]\nSocket=%s\nSocketMode=%04o\nSocketGroup=%s\nMetricsListen=%s\nStateDirectory=%s\n"
                "RuntimeDirectory=%s\nLogLevel=%s\nMaxRequestBodyBytes=%u\nMaxConnections=%u\n",
                c->socket_path, c->socket_mode, c->socket_group ?: "none", c->metrics_listen ?: "no",
                c->state_directory, c->runtime_directory, log_level_to_string(c->log_level), c->max_body_bytes,
                c->max_connections);
        fprintf(out,
                "MaxConnectionsPerUser=%u\nReservedAdminConnections=%u\nMaxStreamsPerUser=%u\nMaxHeaderBytes=%u\n"
                "MaxURIBytes=%u\nHeaderTimeoutSec=%u\nMetricsMaxConnections=%u\nMetricsTimeoutSec=%u\n\n",
                c->max_connections_per_user, c->reserved_admin_connections, c->max_streams_per_user,
                c->max_header_bytes, c->max_uri_bytes, c->header_timeout_sec, c->metrics_max_connections,
                c->metrics_timeout_sec);
        fprintf(out, "[Reserve]\nCPUs=%s\nSMT=%s\nBackend=%s\nIRQs=%s\nCheckIntervalSec=%u\n\n",
                c->reserve_mode == RESERVE_AUTO ? "auto" : c->reserve_mode == RESERVE_NONE ? "none" : cpus,
                smt_mode_to_string(c->smt), backend_kind_to_string(c->backend), irq_mode_to_string(c->irqs),
                c->check_interval_sec);
        fprintf(out, "[Tuning]\nRTRuntimeUSec=%s\nFairServerRuntimeUSec=%s\nTimerMigration=%s\nStatIntervalSec=%s\n",
                tune_str(c->rt_runtime_usec, b1), tune_str(c->fair_server_runtime_usec, b2),
                tune_str(c->timer_migration, b3), tune_str(c->stat_interval_sec, b4));
        fprintf(out, "StarvationGuard=%s\nStarvationThresholdSec=%" PRIu64 ".%06" PRIu64 "\n"
                     "StarvationBoostRuntimeUSec=%u\nStarvationBoostPeriodUSec=%u\n"
                     "StarvationBoostDurationSec=%" PRIu64 ".%06" PRIu64 "\n\n",
                guard_enum.names[c->starvation_guard], c->starvation_threshold_usec / 1000000,
                c->starvation_threshold_usec % 1000000, c->starvation_boost_runtime_usec,
                c->starvation_boost_period_usec, c->starvation_boost_duration_usec / 1000000,
                c->starvation_boost_duration_usec % 1000000);
        fprintf(out, "[Metrics]\nProgramStats=%s\nIntruderTableSize=%u\n\n", c->program_stats ? "yes" : "no",
                c->intruder_table_size);
        fprintf(out,
                "[Jobs]\nPolicy=%s\nWorkerPriority=%u\nDefaultPriority=%u\nKillGraceSec=%u\nMaxQueued=%u\n"
                "KeepFinished=%u\nAgingSec=%u\nStartTimeoutSec=%u\nMaxOutputBytes=%s\nMaxTasks=%s\nMaxMemory=%s\n"
                "DefaultTimeoutSec=%u\nRealtimeWithoutCpuset=%s\nMaxArraySize=%u\n\n",
                queue_policy_to_string(c->queue_policy), c->worker_priority, c->default_priority, c->kill_grace_sec,
                c->max_queued, c->keep_finished, c->aging_sec, c->start_timeout_sec, size_str(c->max_output_bytes, b5),
                size_str(c->max_tasks, b6), size_str(c->max_memory, b7), c->default_timeout_sec,
                c->realtime_without_cpuset ? "yes" : "no", c->max_array_size);
        fprintf(out,
                "[Access]\nAdminGroup=%s\nSubmitGroup=%s\nMaxPriority=%u\nMaxCoresPerUser=%u\nMaxQueuedPerUser=%u\n"
                "MaxTimeoutSec=%u\nMaxQueuePriority=%u\n",
                c->admin_group ?: "none", c->submit_group ?: "none", c->max_priority, c->max_cores_per_user,
                c->max_queued_per_user, c->max_timeout_sec, c->max_queue_priority);
        fprintf(out, "LeaseGroup=%s\n", c->lease_group ?: "none");
        return 0;
}
