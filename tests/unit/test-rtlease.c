/* SPDX-License-Identifier: MIT */
/*
 * The SPANK plugin's pure half (slurm/rtlease.c) and its transport (slurm/rtlease-conn.c): option and
 * plugstack.conf parsing, the lease request it sends, the reading of rtd's recorded answers (the lease
 * contract's 201 and a 409 problem), and the bounded waits against sockets that are absent, dead or silent.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rtlease-conn.h"
#include "rtlease.h"

/* docs: /v1/leases in the lease contract (issue 16), as rtd answers it. */
static const char LEASE_201[] =
        "{\"id\": 7, \"cpus\": \"2-3\", \"owner\": \"slurm:1234.0\", \"pid\": 4242, \"priority\": 60, "
        "\"policy\": \"fifo\", \"max_priority\": 90, \"state\": \"active\", \"created\": \"2026-11-25T21:00:00Z\", "
        "\"metrics\": {\"intrusion_seconds\": 0.0, \"hardirqs\": [1, 2, {\"x\": null}]}}";
static const char PROBLEM_409[] =
        "{\"type\":\"about:blank\",\"title\":\"Conflict\",\"status\":409,"
        "\"detail\":\"CPUs 2-3 overlap lease 7 (owner slurm:1234.0)\"}";

static void test_priority(void **state) {
        int p = 0;

        assert_int_equal(rtlease_parse_priority(NULL, &p), 0);
        assert_int_equal(p, RTLEASE_DEFAULT_PRIORITY);
        assert_int_equal(rtlease_parse_priority("", &p), 0);
        assert_int_equal(p, RTLEASE_DEFAULT_PRIORITY);
        assert_int_equal(rtlease_parse_priority("60", &p), 0);
        assert_int_equal(p, 60);
        assert_int_equal(rtlease_parse_priority("99", &p), 0);
        assert_int_equal(p, 99);
        p = 5;
        assert_int_equal(rtlease_parse_priority("0", &p), -ERANGE);
        assert_int_equal(rtlease_parse_priority("100", &p), -ERANGE);
        assert_int_equal(rtlease_parse_priority("99999999999999999999", &p), -ERANGE);
        assert_int_equal(rtlease_parse_priority("-1", &p), -EINVAL);
        assert_int_equal(rtlease_parse_priority(" 5", &p), -EINVAL);
        assert_int_equal(rtlease_parse_priority("6x", &p), -EINVAL);
        assert_int_equal(rtlease_parse_priority("fifo", &p), -EINVAL);
        assert_int_equal(p, 5);         /* untouched on failure */
}

static void test_options_resolve(void **state) {
        RtOptions o = { .rt_asked = true, .priority = 60 };
        bool rr = true;

        assert_null(rtlease_options_resolve(&o));
        assert_int_equal(o.mode, RT_MODE_RT);
        o = (RtOptions) { .rt_asked = true };
        assert_null(rtlease_options_resolve(&o));
        assert_int_equal(o.priority, RTLEASE_DEFAULT_PRIORITY);
        o = (RtOptions) { .quiet_asked = true, .optional = true };
        assert_null(rtlease_options_resolve(&o));
        assert_int_equal(o.mode, RT_MODE_QUIET);
        o = (RtOptions) {};
        assert_null(rtlease_options_resolve(&o));
        assert_int_equal(o.mode, RT_MODE_OFF);

        o = (RtOptions) { .rt_asked = true, .quiet_asked = true };
        assert_non_null(strstr(rtlease_options_resolve(&o), "--rt-quiet"));
        o = (RtOptions) { .optional = true };
        assert_non_null(strstr(rtlease_options_resolve(&o), "--rt-optional"));
        o = (RtOptions) { .quiet_asked = true, .policy_asked = true };
        assert_non_null(strstr(rtlease_options_resolve(&o), "--rt-policy"));

        assert_int_equal(rtlease_parse_policy("fifo", &rr), 0);
        assert_false(rr);
        assert_int_equal(rtlease_parse_policy("rr", &rr), 0);
        assert_true(rr);
        assert_int_equal(rtlease_parse_policy("RR", &rr), -EINVAL);
        assert_int_equal(rtlease_parse_policy(NULL, &rr), -EINVAL);
}

static void test_plugin_args(void **state) {
        RtPluginArgs a;
        const char *bad = NULL;
        char *ok[] = { "socket=/run/x/rtd.sock", "timeout=5" };
        char *rel[] = { "socket=rtd.sock" };
        char *zero[] = { "timeout=0" };
        char *junk[] = { "timeout=5s" };
        char *unknown[] = { "sockt=/x" };

        assert_int_equal(rtlease_parse_plugin_args(0, NULL, &a, &bad), 0);
        assert_string_equal(a.socket, RTLEASE_DEFAULT_SOCKET);
        assert_int_equal(a.timeout_ms, RTLEASE_DEFAULT_TIMEOUT_MS);
        assert_int_equal(rtlease_parse_plugin_args(2, ok, &a, &bad), 0);
        assert_string_equal(a.socket, "/run/x/rtd.sock");
        assert_int_equal(a.timeout_ms, 5000);
        assert_int_equal(rtlease_parse_plugin_args(1, rel, &a, &bad), -EINVAL);
        assert_string_equal(bad, "socket=rtd.sock");
        assert_int_equal(rtlease_parse_plugin_args(1, zero, &a, &bad), -EINVAL);
        assert_int_equal(rtlease_parse_plugin_args(1, junk, &a, &bad), -EINVAL);
        assert_int_equal(rtlease_parse_plugin_args(1, unknown, &a, &bad), -EINVAL);
        assert_string_equal(bad, "sockt=/x");
}

static void test_owner_and_cpus(void **state) {
        char owner[RTLEASE_OWNER_MAX], cpus[16], tiny[4];
        cpu_set_t s;

        assert_int_equal(rtlease_owner(1234, 0, owner, sizeof owner), 0);
        assert_string_equal(owner, "slurm:1234.0");
        assert_int_equal(rtlease_owner(4294967294u, 4294967294u, tiny, sizeof tiny), -ENOBUFS);
        assert_true(rtlease_step_is_special(0xfffffffbu));      /* batch */
        assert_true(rtlease_step_is_special(0xfffffffcu));      /* extern */
        assert_false(rtlease_step_is_special(0));

        CPU_ZERO(&s);
        assert_int_equal(rtlease_format_cpus(&s, cpus, sizeof cpus), -EINVAL);
        CPU_SET(2, &s);
        CPU_SET(3, &s);
        CPU_SET(7, &s);
        assert_int_equal(rtlease_format_cpus(&s, cpus, sizeof cpus), 0);
        assert_string_equal(cpus, "2-3,7");
        assert_int_equal(rtlease_format_cpus(&s, tiny, sizeof tiny), -ENOBUFS);
}

static void test_request_body(void **state) {
        RtOptions rt = { .mode = RT_MODE_RT, .priority = 60 }, quiet = { .mode = RT_MODE_QUIET },
                  rr = { .mode = RT_MODE_RT, .priority = 10, .rr = true }, off = {};
        char *b = NULL;

        assert_int_equal(rtlease_request_body("2-3", "slurm:1234.0", 4242, &rt, &b), 0);
        assert_string_equal(b, "{\"cpus\":\"2-3\",\"owner\":\"slurm:1234.0\",\"pid\":4242,\"priority\":60,"
                               "\"policy\":\"fifo\"}");
        free(b);
        assert_int_equal(rtlease_request_body("2", "slurm:1.2", 7, &rr, &b), 0);
        assert_non_null(strstr(b, "\"priority\":10,\"policy\":\"rr\""));
        free(b);
        /* --rt-quiet: no priority, so rtd sets no policy and checks no MaxPriority=. */
        assert_int_equal(rtlease_request_body("0-1", "slurm:5.0", 9, &quiet, &b), 0);
        assert_string_equal(b, "{\"cpus\":\"0-1\",\"owner\":\"slurm:5.0\",\"pid\":9}");
        free(b);
        /* Nothing that could break out of the JSON string gets in. */
        b = NULL;
        assert_int_equal(rtlease_request_body("0\",\"pid\":1", "slurm:5.0", 9, &rt, &b), -EINVAL);
        assert_int_equal(rtlease_request_body("0", "slurm:5.0\"}", 9, &rt, &b), -EINVAL);
        assert_int_equal(rtlease_request_body("0", "slurm:5.0", 0, &rt, &b), -EINVAL);
        assert_int_equal(rtlease_request_body("0", "slurm:5.0", 9, &off, &b), -EINVAL);
        assert_null(b);
}

static void test_parse_lease(void **state) {
        RtLease l;
        RtOptions rt = { .mode = RT_MODE_RT, .priority = 60 }, high = { .mode = RT_MODE_RT, .priority = 95 };
        int prio = 0;

        assert_int_equal(rtlease_parse_lease(LEASE_201, &l), 0);
        assert_int_equal(l.id, 7);
        assert_int_equal(l.max_priority, 90);
        assert_string_equal(l.cpus, "2-3");
        assert_true(l.quieted);         /* an rtd that does not say: nothing to wait for */
        assert_false(l.ended);
        assert_int_equal(rtlease_task_priority(&rt, &l, &prio), 0);
        assert_int_equal(prio, 60);
        /* An rtd that granted more than its own MaxPriority= is not believed. */
        assert_int_equal(rtlease_task_priority(&high, &l, &prio), -ERANGE);

        /* max_priority absent: the asked priority, which rtd checked. */
        assert_int_equal(rtlease_parse_lease("{\"id\":3}", &l), 0);
        assert_int_equal(l.max_priority, -1);
        assert_int_equal(rtlease_task_priority(&high, &l, &prio), 0);

        assert_int_equal(rtlease_parse_lease(NULL, &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease("", &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease("{\"id\":\"7\"}", &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease("{\"id\":0}", &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease("{\"id\":7.5}", &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease("{\"id\":7", &l), -EBADMSG);                /* truncated */
        assert_int_equal(rtlease_parse_lease("{\"id\":7}{\"id\":8}", &l), -EBADMSG);     /* two objects */
        assert_int_equal(rtlease_parse_lease("[{\"id\":7}]", &l), -EBADMSG);
        assert_int_equal(rtlease_parse_lease(PROBLEM_409, &l), -EBADMSG);

        /* "quieted": false makes the plugin wait; anything but a JSON boolean is not read as one. */
        assert_int_equal(rtlease_parse_lease("{\"id\":3,\"quieted\":false}", &l), 0);
        assert_false(l.quieted);
        assert_int_equal(rtlease_parse_lease("{\"id\":3,\"quieted\":true}", &l), 0);
        assert_true(l.quieted);
        assert_int_equal(rtlease_parse_lease("{\"id\":3,\"quieted\":false,\"state\":\"released\"}", &l), 0);
        assert_true(l.ended);
        bool b = true;
        assert_int_equal(rtlease_json_bool("{\"quieted\":0}", "quieted", &b), -EMEDIUMTYPE);
        assert_int_equal(rtlease_json_bool("{\"quieted\":\"false\"}", "quieted", &b), -EMEDIUMTYPE);
        assert_int_equal(rtlease_json_bool("{\"x\":false}", "quieted", &b), -ENOENT);
        assert_true(b);
}

static void test_json_reader(void **state) {
        char *s = NULL;
        int64_t v;

        assert_int_equal(rtlease_json_string("{\"a\":{\"t\":\"x\"},\"t\":\"q\\\"\\\\\\n\\u0041\\u00e9\"}", "t", &s),
                         0);
        assert_string_equal(s, "q\"\\\nA?");     /* the nested "t" is not the top-level one */
        free(s);
        assert_int_equal(rtlease_json_int("{ \"n\" : -12 , \"m\": [true,false,null,1e3] }", "n", &v), 0);
        assert_int_equal(v, -12);
        assert_int_equal(rtlease_json_int("{\"n\":1}", "m", &v), -ENOENT);
        assert_int_equal(rtlease_json_int("{\"n\":\"1\"}", "n", &v), -EMEDIUMTYPE);
        assert_int_equal(rtlease_json_string("{\"n\":\"a\x01\"}", "n", &s), -EBADMSG);
        assert_int_equal(rtlease_json_string("{\"n\":\"\\x\"}", "n", &s), -EBADMSG);
        assert_int_equal(rtlease_json_string("{\"n\":\"\\u12\"}", "n", &s), -EBADMSG);
        assert_int_equal(rtlease_json_string("{\"n\":tru}", "n", &s), -EBADMSG);
        assert_int_equal(rtlease_json_string("{\"n\" \"a\"}", "n", &s), -EBADMSG);
        assert_int_equal(rtlease_json_string("{\"n\":[1,}", "n", &s), -EBADMSG);
}

static void test_problem_text(void **state) {
        char *t;

        t = rtlease_problem_text(409, PROBLEM_409);
        assert_string_equal(t, "Conflict: CPUs 2-3 overlap lease 7 (owner slurm:1234.0)");
        free(t);
        t = rtlease_problem_text(403, "{\"detail\":\"priority 95 is above MaxPriority=90\\u001b[2J\"}");
        assert_string_equal(t, "priority 95 is above MaxPriority=90?[2J");    /* no escape reaches a tty */
        free(t);
        t = rtlease_problem_text(502, "<html>bad gateway</html>");
        assert_string_equal(t, "HTTP status 502 without a problem description");
        free(t);
        t = rtlease_problem_text(500, NULL);
        assert_non_null(strstr(t, "500"));
        free(t);
}

/* ---- transport ---- */

typedef struct Server {
        int fd;
        const char *answer;     /* NULL: accept and never answer */
        char request[4096];
} Server;

static void *serve_one(void *userdata) {
        Server *s = userdata;
        int c = accept(s->fd, NULL, NULL);
        size_t n = 0;

        if (c < 0)
                return NULL;
        /* Read the head and the body, whose length the head says. */
        for (;;) {
                ssize_t k = read(c, s->request + n, sizeof s->request - 1 - n);
                char *end, *cl;

                if (k <= 0)
                        break;
                n += (size_t) k;
                s->request[n] = 0;
                end = strstr(s->request, "\r\n\r\n");
                cl = strstr(s->request, "Content-Length: ");
                if (end && (!cl || strlen(end + 4) >= (size_t) atoi(cl + 16)))
                        break;
        }
        if (s->answer)
                (void) !write(c, s->answer, strlen(s->answer));
        else {
                char b;
                while (read(c, &b, 1) > 0)      /* silent until the client gives up and closes */
                        ;
        }
        close(c);
        return NULL;
}

static int listen_at(const char *path, bool do_listen) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        strcpy(sa.sun_path, path);
        (void) unlink(path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        if (do_listen)
                assert_int_equal(listen(fd, 4), 0);
        return fd;
}

static char dir[] = "/tmp/test-rtlease-XXXXXX";

static RtPluginArgs args_for(const char *name, int timeout_ms) {
        RtPluginArgs a = { .timeout_ms = timeout_ms };
        snprintf(a.socket, sizeof a.socket, "%s/%s", dir, name);
        return a;
}

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_call_absent(void **state) {
        RtPluginArgs a = args_for("none.sock", 1000);
        RtReply r = {};
        char *err = NULL;
        int fd, e;

        e = rtlease_call(&a, "POST", "/v1/leases", "{}", &r, &err);
        assert_int_equal(e, -ENOENT);
        assert_true(rtlease_error_is_absent(e));
        assert_non_null(strstr(err, "rtd is not running on this node"));
        free(err);
        err = NULL;

        /* A stale socket file: bound, nobody listening. */
        a = args_for("stale.sock", 1000);
        fd = listen_at(a.socket, false);
        e = rtlease_call(&a, "POST", "/v1/leases", "{}", &r, &err);
        assert_int_equal(e, -ECONNREFUSED);
        assert_true(rtlease_error_is_absent(e));
        assert_non_null(strstr(err, "nobody listens"));
        free(err);
        close(fd);
}

static void test_call_silent(void **state) {
        RtPluginArgs a = args_for("silent.sock", 300);
        Server s = {};
        pthread_t t;
        RtReply r = {};
        char *err = NULL;
        double t0;
        int e;

        s.fd = listen_at(a.socket, true);
        assert_int_equal(pthread_create(&t, NULL, serve_one, &s), 0);
        t0 = now();
        e = rtlease_call(&a, "POST", "/v1/leases", "{\"cpus\":\"1\"}", &r, &err);
        /* An rtd that accepts and never answers costs the timeout, not a hung step. */
        assert_int_equal(e, -ETIMEDOUT);
        assert_false(rtlease_error_is_absent(e));
        assert_true(now() - t0 < 2.5);
        assert_non_null(strstr(err, "did not answer within"));
        free(err);
        pthread_join(t, NULL);
        close(s.fd);
}

static void test_call_answers(void **state) {
        RtPluginArgs a = args_for("rtd.sock", 2000);
        Server s = { .answer = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"id\"\r\n4\r\n:7}\n\r\n0\r\n\r\n" };
        pthread_t t;
        RtReply r = {};
        RtLease l;
        char *err = NULL;

        s.fd = listen_at(a.socket, true);
        assert_int_equal(pthread_create(&t, NULL, serve_one, &s), 0);
        assert_int_equal(rtlease_call(&a, "POST", "/v1/leases", "{\"cpus\":\"1\"}", &r, &err), 0);
        pthread_join(t, NULL);
        assert_int_equal(r.status, 201);
        assert_int_equal(rtlease_parse_lease(r.body, &l), 0);
        assert_int_equal(l.id, 7);
        assert_non_null(strstr(s.request, "POST /v1/leases HTTP/1.1\r\n"));
        assert_non_null(strstr(s.request, "Content-Type: application/json\r\n"));
        assert_non_null(strstr(s.request, "\r\n\r\n{\"cpus\":\"1\"}"));
        rtlease_reply_done(&r);

        /* Not HTTP at all: an error that says so, not a guess. */
        s.answer = "SSH-2.0-OpenSSH_9.2\r\n";
        assert_int_equal(pthread_create(&t, NULL, serve_one, &s), 0);
        assert_int_equal(rtlease_call(&a, "DELETE", "/v1/leases/7", NULL, &r, &err), -EBADMSG);
        pthread_join(t, NULL);
        assert_non_null(strstr(err, "malformed"));
        assert_non_null(strstr(s.request, "DELETE /v1/leases/7 HTTP/1.1\r\n"));
        free(err);
        close(s.fd);
}

static int setup(void **state) {
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_priority),
                cmocka_unit_test(test_options_resolve),
                cmocka_unit_test(test_plugin_args),
                cmocka_unit_test(test_owner_and_cpus),
                cmocka_unit_test(test_request_body),
                cmocka_unit_test(test_parse_lease),
                cmocka_unit_test(test_json_reader),
                cmocka_unit_test(test_problem_text),
                cmocka_unit_test(test_call_absent),
                cmocka_unit_test(test_call_silent),
                cmocka_unit_test(test_call_answers),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
