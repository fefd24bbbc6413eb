/* SPDX-License-Identifier: MIT */
/*
 * Job cpusets. A job's CPUs are more than its starting affinity: its cgroup's cpuset.cpus is set to them
 * before the child is cloned into it, so sched_setaffinity() outside them fails (EINVAL) or is clamped by
 * the kernel, for the job and all it forks. Where cgroup v2 has the cpuset controller (systemd hosts) that
 * is the job's own cgroup; on hybrid hosts, where cpuset is bound to the v1 hierarchy, each job also gets
 * a v1 cpuset of the same name, which its child joins before it runs anything of the user's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job-cpuset.h"
#include "shared/fileio.h"
#include "shared/macro.h"

static const char *const enforcement_names[] = {
        [CPU_ENFORCE_AFFINITY] = "affinity only (drift check)",
        [CPU_ENFORCE_V2] = "cpuset (cgroup v2)",
        [CPU_ENFORCE_V1] = "cpuset (cgroup v1)",
};

const char *cpu_enforcement_to_string(CpuEnforcement m) {
        return m >= 0 && m < (int) ELEMENTSOF(enforcement_names) ? enforcement_names[m] : NULL;
}

/* Whether the comma- or space-separated list names word. */
static bool list_has(const char *list, const char *word, const char *seps) {
        size_t l = strlen(word);

        for (const char *p = list; p && *p;) {
                size_t n = strcspn(p, seps);
                if (n == l && strneq(p, word, l))
                        return true;
                p += n;
                p += strspn(p, seps);
        }
        return false;
}

bool cgroup_list_has(const char *list, const char *controller) {
        return list_has(list, controller, " \n");
}

int job_cpusets_parse_v1_mount(const char *text, char **ret_mount, char **ret_root) {
        /* "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset" */
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                _cleanup_free_ char *l = strndup(line, end - line);
                char root[4096], mnt[4096], opts[4096];
                const char *sep;

                if (!l)
                        return -ENOMEM;
                sep = strstr(l, " - ");
                if (sep && strneq(sep + 3, "cgroup ", 7) && sscanf(sep + 3, "%*s %*s %4095s", opts) == 1 &&
                    list_has(opts, "cpuset", ",") && sscanf(l, "%*s %*s %*s %4095s %4095s", root, mnt) == 2) {
                        *ret_mount = strdup(mnt);
                        *ret_root = strdup(root);
                        if (!*ret_mount || !*ret_root)
                                return -ENOMEM;
                        return 0;
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

int job_cpusets_parse_v1_self(const char *text, char **ret_path) {
        /* "3:cpuset:/" or "4:cpu,cpuset:/a" */
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                const char *c1 = memchr(line, ':', end - line);
                const char *c2 = c1 ? memchr(c1 + 1, ':', end - c1 - 1) : NULL;

                if (c2) {
                        _cleanup_free_ char *ctl = strndup(c1 + 1, c2 - c1 - 1);
                        if (!ctl)
                                return -ENOMEM;
                        if (list_has(ctl, "cpuset", ",")) {
                                *ret_path = strndup(c2 + 1, end - c2 - 1);
                                return *ret_path ? 0 : -ENOMEM;
                        }
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

/* Fork a child that joins dir_fd/name and exits: whether a job's child could be placed there. */
static int probe_join(int dir_fd, const char *name) {
        char procs[256];
        int status;
        pid_t pid;

        snprintf(procs, sizeof procs, "%s/cgroup.procs", name);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int r = write_string_at(dir_fd, procs, "0");
                _exit(r < 0 ? -r : 0);
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
}

/* The parent of pid, or 0. */
static pid_t getppid_of(pid_t pid) {
        _cleanup_free_ char *stat = NULL;
        char path[64], *p;
        int ppid = 0;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        if (read_full_file_at(AT_FDCWD, path, &stat, NULL) < 0 || !(p = strrchr(stat, ')')) ||
            sscanf(p + 1, " %*c %d", &ppid) != 1)
                return 0;
        return (pid_t) ppid;
}

/*
 * rtd's own processes out of the job cgroups' home into the leaf `self`: cgroup v2 lets a cgroup with
 * processes of its own enable the cpuset controller (a threaded one), but then makes it a thread root,
 * where no job cgroup (a domain) can take a process. Only rtd and its children are moved.
 */
static int leave_home(int dir_fd, const char *self) {
        _cleanup_free_ char *procs = NULL;
        char path[256];
        struct stat st;
        int r;

        if (fstatat(dir_fd, "cgroup.type", &st, 0) < 0)
                return 0;       /* the root cgroup: no such rule */
        r = read_full_file_at(dir_fd, "cgroup.procs", &procs, NULL);
        if (r < 0 || !*procs)
                return r;
        for (char *p = procs, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid != getpid() && getppid_of((pid_t) pid) != getpid())
                        return -EBUSY;  /* not ours to move */
        }
        if (mkdirat(dir_fd, self, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(path, sizeof path, "%s/cgroup.procs", self);
        for (char *p = procs, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                char s[32];
                if (end == p)
                        break;
                snprintf(s, sizeof s, "%ld", pid);
                r = write_string_at(dir_fd, path, s);
                if (r < 0 && r != -ESRCH)
                        return r;
        }
        return 0;
}

/* The cpuset controller for the children of the job cgroups' home, or why not. */
static int enable_v2(int dir_fd, const char *path, const char *self, const char *probe, char **ret_why) {
        _cleanup_free_ char *avail = NULL, *on = NULL;
        int r;

        if (read_full_file_at(dir_fd, "cgroup.controllers", &avail, NULL) < 0 || !cgroup_list_has(avail, "cpuset"))
                return asprintf(ret_why, "the cpuset controller is not available in %s", path) < 0 ? -ENOMEM
                                                                                                   : -ENOENT;
        r = leave_home(dir_fd, self);
        if (r < 0)
                return asprintf(ret_why, "cannot move rtd out of %s into %s/%s: %s", path, path, self,
                                strerror(-r)) < 0 ? -ENOMEM : r;
        if (read_full_file_at(dir_fd, "cgroup.subtree_control", &on, NULL) < 0 || !cgroup_list_has(on, "cpuset")) {
                r = write_string_at(dir_fd, "cgroup.subtree_control", "+cpuset");
                if (r < 0)
                        return asprintf(ret_why, "cannot enable it in %s/cgroup.subtree_control: %s", path,
                                        strerror(-r)) < 0 ? -ENOMEM : r;
        }
        /* What a job's child will do: join a fresh cgroup there. */
        if (mkdirat(dir_fd, probe, 0755) < 0 && errno != EEXIST)
                r = -errno;
        else {
                r = probe_join(dir_fd, probe);
                (void) unlinkat(dir_fd, probe, AT_REMOVEDIR);
        }
        if (r < 0)
                return asprintf(ret_why, "a process cannot join a cpuset cgroup in %s: %s", path, strerror(-r)) < 0
                               ? -ENOMEM : r;
        return 0;
}

static char *strip(char *s) {
        if (s)
                s[strcspn(s, "\n")] = 0;
        return s;
}

/* rtd's own v1 cpuset, opened, with the memory nodes job cpusets get; a probe cpuset shows we can make them. */
static int setup_v1(int proc_fd, const char *probe, JobCpusets *c, char **ret_why) {
        _cleanup_free_ char *mountinfo = NULL, *self = NULL, *mnt = NULL, *root = NULL, *own = NULL, *cpus = NULL;
        const char *rel;
        char f[256];
        int r;

        if (read_full_file_at(proc_fd, "self/mountinfo", &mountinfo, NULL) < 0 ||
            job_cpusets_parse_v1_mount(mountinfo, &mnt, &root) < 0)
                return asprintf(ret_why, "no cpuset hierarchy is mounted") < 0 ? -ENOMEM : -ENOENT;
        if (read_full_file_at(proc_fd, "self/cgroup", &self, NULL) < 0 || job_cpusets_parse_v1_self(self, &own) < 0)
                return asprintf(ret_why, "rtd's own cpuset is unknown") < 0 ? -ENOMEM : -ENOENT;
        rel = own;
        if (!streq(root, "/") && startswith(own, root))
                rel = own + strlen(root);
        if (asprintf(&c->v1_path, "%s%s", mnt, streq(rel, "/") ? "" : rel) < 0) {
                c->v1_path = NULL;
                return -ENOMEM;
        }
        c->v1_fd = open(c->v1_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (c->v1_fd < 0)
                return asprintf(ret_why, "cannot open %s: %s", c->v1_path, strerror(errno)) < 0 ? -ENOMEM : -errno;
        if (read_full_file_at(c->v1_fd, "cpuset.effective_mems", &c->v1_mems, NULL) < 0 &&
            read_full_file_at(c->v1_fd, "cpuset.mems", &c->v1_mems, NULL) < 0)
                return asprintf(ret_why, "cannot read the memory nodes of %s", c->v1_path) < 0 ? -ENOMEM : -EIO;
        if (read_full_file_at(c->v1_fd, "cpuset.effective_cpus", &cpus, NULL) < 0 &&
            read_full_file_at(c->v1_fd, "cpuset.cpus", &cpus, NULL) < 0)
                return asprintf(ret_why, "cannot read the CPUs of %s", c->v1_path) < 0 ? -ENOMEM : -EIO;
        strip(c->v1_mems);
        strip(cpus);
        /* A cpuset takes no task before it has both CPUs and memory nodes: both are written for each job. */
        if (mkdirat(c->v1_fd, probe, 0755) < 0 && errno != EEXIST)
                r = -errno;
        else {
                snprintf(f, sizeof f, "%s/cpuset.mems", probe);
                r = write_string_at(c->v1_fd, f, c->v1_mems);
                snprintf(f, sizeof f, "%s/cpuset.cpus", probe);
                if (r >= 0)
                        r = write_string_at(c->v1_fd, f, cpus);
                (void) unlinkat(c->v1_fd, probe, AT_REMOVEDIR);
        }
        if (r < 0)
                return asprintf(ret_why, "cannot make cpusets in %s: %s", c->v1_path, strerror(-r)) < 0 ? -ENOMEM : r;
        return 0;
}

void job_cpusets_setup(int proc_fd, int v2_dir_fd, const char *v2_path, const char *self, const char *probe,
                       JobCpusets *ret) {
        _cleanup_free_ char *why_v2 = NULL, *why_v1 = NULL;

        *ret = (JobCpusets){ .v1_fd = -EBADF };
        if (v2_dir_fd >= 0 && enable_v2(v2_dir_fd, strempty(v2_path), self, probe, &why_v2) >= 0) {
                ret->mode = CPU_ENFORCE_V2;
                return;
        }
        if (setup_v1(proc_fd, probe, ret, &why_v1) >= 0) {
                ret->mode = CPU_ENFORCE_V1;
                return;
        }
        ret->v1_fd = safe_close(ret->v1_fd);
        ret->mode = CPU_ENFORCE_AFFINITY;
        if (asprintf(&ret->reason, "no cpuset can hold jobs on their CPUs (cgroup v2: %s; cgroup v1: %s)",
                     v2_dir_fd >= 0 ? strempty(why_v2) : "no job cgroups", strempty(why_v1)) < 0)
                ret->reason = NULL;
}

void job_cpusets_done(JobCpusets *c) {
        safe_close(c->v1_fd);
        free(c->v1_path);
        free(c->v1_mems);
        free(c->reason);
        *c = (JobCpusets){ .v1_fd = -EBADF };
}

static int write_in(int dir_fd, const char *name, const char *file, const char *value) {
        char path[256];

        snprintf(path, sizeof path, "%s/%s", name, file);
        return write_string_at(dir_fd, path, value);
}

int job_cpuset_make(const JobCpusets *c, int v2_dir_fd, const char *name, const CpuSet *cpus) {
        _cleanup_free_ char *list = NULL;
        int r, fd;

        if (c->mode == CPU_ENFORCE_AFFINITY)
                return 0;
        if (cpuset_format(cpus, &list) < 0)
                return -ENOMEM;
        if (c->mode == CPU_ENFORCE_V2)
                return write_in(v2_dir_fd, name, "cpuset.cpus", list);  /* memory nodes: the parent's */

        if (mkdirat(c->v1_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        r = write_in(c->v1_fd, name, "cpuset.mems", c->v1_mems);
        if (r >= 0)
                r = write_in(c->v1_fd, name, "cpuset.cpus", list);
        if (r >= 0) {
                fd = openat(c->v1_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd >= 0)
                        return fd;
                r = -errno;
        }
        (void) unlinkat(c->v1_fd, name, AT_REMOVEDIR);
        return r;
}

int job_cpuset_remove(const JobCpusets *c, const char *name) {
        if (c->mode != CPU_ENFORCE_V1 || c->v1_fd < 0)
                return 0;
        return unlinkat(c->v1_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int cgroup_kill_procs(int dir_fd, const char *name, int sig, unsigned passes) {
        char path[256];

        snprintf(path, sizeof path, "%s/cgroup.procs", name);
        for (unsigned pass = 0; pass < passes; pass++) {
                _cleanup_free_ char *procs = NULL;
                bool any = false;
                int r = read_full_file_at(dir_fd, path, &procs, NULL);

                if (r < 0)
                        return r;
                for (char *p = procs, *end; *p; p = end) {
                        long pid = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        if (pid > 0 && kill((pid_t) pid, sig) == 0)
                                any = true;
                }
                if (!any)
                        return 0;
                if (sig != SIGKILL)
                        return 0;       /* a request to stop: once */
                /* Killed tasks leave the list as they exit, on their own CPUs: give them a moment. */
                (void) nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000 }, NULL);
        }
        return -EBUSY;
}
