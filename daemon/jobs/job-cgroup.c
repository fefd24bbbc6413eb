/* SPDX-License-Identifier: MIT */
/* Job cgroups: each job gets <rtd's cgroup>/<name> when cgroup v2 is writable, for whole-tree kill and accounting. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job-cgroup.h"
#include "job-cpuset.h"
#include "shared/fileio.h"
#include "shared/macro.h"

int job_cgroups_parse_mountinfo(const char *text, char **ret_mount, char **ret_root) {
        /* "36 35 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw" */
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                _cleanup_free_ char *l = strndup(line, end - line);
                char root[4096], mnt[4096];
                const char *sep;

                if (!l)
                        return -ENOMEM;
                sep = strstr(l, " - ");
                if (sep && strneq(sep + 3, "cgroup2 ", 8) &&
                    sscanf(l, "%*s %*s %*s %4095s %4095s", root, mnt) == 2) {
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

int job_cgroups_parse_self(const char *text, char **ret_path) {
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                if (strneq(line, "0::", 3)) {
                        *ret_path = strndup(line + 3, end - line - 3);
                        return *ret_path ? 0 : -ENOMEM;
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

/* Fork a child that joins a fresh cgroup and asks for SCHED_FIFO 1: refused means RT group scheduling bites. */
static int probe_rt(int dir_fd, const char *name) {
        char procs[256];
        int status;
        pid_t pid;

        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(procs, sizeof procs, "%s/cgroup.procs", name);
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                (void) unlinkat(dir_fd, name, AT_REMOVEDIR);
                return r;
        }
        if (pid == 0) {
                struct sched_param sp = { .sched_priority = 1 };
                if (write_string_at(dir_fd, procs, "0") < 0)
                        _exit(2);
                if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                        _exit(errno == EPERM ? 3 : 4);
                _exit(0);
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        (void) unlinkat(dir_fd, name, AT_REMOVEDIR);
        if (!WIFEXITED(status))
                return -EIO;
        switch (WEXITSTATUS(status)) {
        case 0:
                return 0;
        case 2:
                return -EACCES;
        case 3:
                return 1;
        default:
                return -EIO;
        }
}

void job_cgroups_setup(int proc_fd, const char *probe_name, JobCgroups *ret) {
        _cleanup_free_ char *mountinfo = NULL, *self = NULL, *mnt = NULL, *root = NULL, *own = NULL;
        const char *rel;
        int r;

        *ret = (JobCgroups){ .dir_fd = -EBADF };
        if (read_full_file_at(proc_fd, "self/mountinfo", &mountinfo, NULL) < 0 ||
            job_cgroups_parse_mountinfo(mountinfo, &mnt, &root) < 0) {
                ret->reason = strdup("no cgroup v2 hierarchy is mounted; jobs are tracked by process group");
                return;
        }
        if (read_full_file_at(proc_fd, "self/cgroup", &self, NULL) < 0 || job_cgroups_parse_self(self, &own) < 0) {
                ret->reason = strdup("rtd's own cgroup v2 path is unknown; jobs are tracked by process group");
                return;
        }
        /* Inside a cgroup namespace the mount's root is a prefix of nothing we see: paths are relative to it. */
        rel = own;
        if (!streq(root, "/") && startswith(own, root))
                rel = own + strlen(root);
        if (asprintf(&ret->path, "%s%s", mnt, streq(rel, "/") ? "" : rel) < 0) {
                ret->path = NULL;
                return;
        }
        ret->dir_fd = open(ret->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ret->dir_fd < 0) {
                if (asprintf(&ret->reason, "cannot open %s: %s; jobs are tracked by process group", ret->path,
                                strerror(errno)) < 0)
                        ret->reason = NULL;
                return;
        }
        r = probe_rt(ret->dir_fd, probe_name);
        if (r == 1) {
                /* The kernel gives a new cgroup no RT runtime: a FIFO job inside it could not even start. */
                ret->rt_group_trap = true;
                if (asprintf(&ret->reason, "SCHED_FIFO is refused inside child cgroups of %s "
                                "(CONFIG_RT_GROUP_SCHED with the cpu controller enabled); jobs are tracked by process "
                                "group instead", ret->path) < 0)
                        ret->reason = NULL;
        } else if (r < 0 && asprintf(&ret->reason, "cannot create cgroups in %s: %s; jobs are tracked by process "
                                     "group", ret->path, strerror(-r)) < 0)
                ret->reason = NULL;
        if (r != 0)
                ret->dir_fd = safe_close(ret->dir_fd);
}

void job_cgroups_done(JobCgroups *c) {
        safe_close(c->dir_fd);
        free(c->path);
        free(c->reason);
        *c = (JobCgroups){ .dir_fd = -EBADF };
}

int job_cgroup_signal(int dir_fd, const char *name, int sig) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (sig == SIGKILL) {
                if (asprintf(&path, "%s/cgroup.kill", name) < 0)
                        return -ENOMEM;
                r = write_string_at(dir_fd, path, "1");
                if (r != -ENOENT)       /* cgroup.kill needs Linux 5.14; else fall through to the list */
                        return r;
        }
        return cgroup_kill_procs(dir_fd, name, sig, sig == SIGKILL ? 50 : 1);
}

int job_cgroup_make(int dir_fd, const char *name, uint64_t *ret_id) {
        struct stat st;
        int fd;

        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* The cgroup id is its inode number on cgroup2: what BPF's bpf_get_current_cgroup_id() reports. */
        *ret_id = fstat(fd, &st) >= 0 ? (uint64_t) st.st_ino : 0;
        return fd;
}

int job_cgroup_remove(int dir_fd, const char *name) {
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}
