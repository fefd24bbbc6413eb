/* SPDX-License-Identifier: MIT */
/*
 * rtctl's human views rendered from recorded API JSON (tests/fixtures/views/NAME.json, recorded by record.py
 * there) and compared with the golden files next to them (*.txt), so a change to a view is a visible diff.
 * RTD_UPDATE_GOLDEN=1 rewrites the golden files instead (then read the diff before committing it).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "view.h"

static char dir[4096];

static char *render(const char *name, json_t *j, bool color, time_t now) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        View v;

        assert_non_null(f);
        view_init(&v, f);
        v.color = color;
        v.now = now;
        if (startswith(name, "status-"))
                view_status(&v, j);
        else if (startswith(name, "job-"))
                view_job(&v, j);
        else if (startswith(name, "list"))
                view_jobs(&v, j);
        else if (startswith(name, "array-"))
                view_array(&v, j);
        else if (startswith(name, "metrics"))
                view_metrics(&v, j);
        else if (startswith(name, "leases"))
                view_leases(&v, j);
        else if (startswith(name, "lease-"))
                view_lease(&v, j);
        else
                fail_msg("%s: no view for this fixture name", name);
        view_done(&v);
        fclose(f);
        return text;
}

static time_t fixture_now(void) {
        char path[4200];
        long long t = 0;
        FILE *f;

        snprintf(path, sizeof path, "%s/now", dir);
        f = fopen(path, "re");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%lld", &t), 1);
        fclose(f);
        return (time_t) t;
}

static char *read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *s = NULL;
        size_t n = 0;
        ssize_t k;

        if (!f)
                return NULL;
        k = getdelim(&s, &n, 0, f);
        fclose(f);
        if (k < 0) {
                free(s);
                return strdup("");
        }
        return s;
}

static void test_golden(void **state) {
        bool update = getenv("RTD_UPDATE_GOLDEN") != NULL;
        time_t now = fixture_now();
        struct dirent **list;
        int n, checked = 0, failed = 0;

        n = scandir(dir, &list, NULL, alphasort);
        assert_true(n > 0);
        for (int i = 0; i < n; i++) {
                const char *name = list[i]->d_name;
                size_t len = strlen(name);
                char json_path[4400], golden_path[4400];
                json_t *j;

                if (len < 6 || !streq(name + len - 5, ".json")) {
                        free(list[i]);
                        continue;
                }
                snprintf(json_path, sizeof json_path, "%s/%s", dir, name);
                snprintf(golden_path, sizeof golden_path, "%s/%.*s.txt", dir, (int) (len - 5), name);
                j = json_load_file(json_path, 0, NULL);
                assert_non_null(j);
                char *text = render(name, j, false, now);
                if (update) {
                        FILE *f = fopen(golden_path, "we");
                        assert_non_null(f);
                        fputs(text, f);
                        fclose(f);
                } else {
                        char *want = read_file(golden_path);
                        if (!want || !streq(want, text)) {
                                fprintf(stderr, "%s: the view differs from %s (RTD_UPDATE_GOLDEN=1 rewrites it):\n"
                                                "---- rendered ----\n%s---- golden ----\n%s",
                                        name, golden_path, text, want ? want : "(missing)\n");
                                failed++;
                        }
                        free(want);
                }
                /* What no view may print: the JSON's nulls, or the YAML-ish dump it replaced. */
                if (strstr(text, "null") || strstr(text, "- [0]")) {
                        fprintf(stderr, "%s: the view shows a raw JSON value:\n%s", name, text);
                        failed++;
                }
                free(text);
                json_decref(j);
                checked++;
                free(list[i]);
        }
        free(list);
        assert_true(checked >= 8);
        assert_int_equal(failed, 0);
}

static void test_escapes_and_color(void **state) {
        json_t *job = json_pack("{s:i, s:s, s:s, s:s, s:i, s:{s:[s,s], s:i}, s:s, s:i, s:i, s:s}", "id", 5, "name",
                                "evil\033]0;pwned\007\n", "state", "failed", "user", "u", "uid", 1000, "spec", "argv",
                                "/bin/echo", "it's \033[2J", "cores", 1, "policy", "fifo", "priority", 10, "exit_code",
                                3, "reason", "line1\nline2");
        char *plain = render("job-x", job, false, 0), *colored;

        /* Control characters from the daemon are shown, never sent to the terminal. */
        assert_null(strchr(plain, '\033'));
        assert_non_null(strstr(plain, "evil\\x1b]0;pwned\\x07\\n"));
        assert_non_null(strstr(plain, "Reason: line1\\nline2"));
        assert_non_null(strstr(plain, "'it'\\''s \\x1b[2J'"));
        assert_non_null(strstr(plain, "failed, exit code 3"));
        /* Colour only when asked (a terminal without NO_COLOR): the state in red. */
        colored = render("job-x", job, true, 0);
        assert_non_null(strstr(colored, "\033[1;31mfailed\033[0m"));
        free(plain);
        free(colored);
        json_decref(job);
}

static void test_durations(void **state) {
        char b[32];
        assert_string_equal(view_duration(0, b, sizeof b), "0");
        assert_string_equal(view_duration(2, b, sizeof b), "2s");
        assert_string_equal(view_duration(850e-9, b, sizeof b), "850ns");
        assert_string_equal(view_duration(12e-6, b, sizeof b), "12µs");
        assert_string_equal(view_duration(0.0034, b, sizeof b), "3.40ms");
        assert_string_equal(view_duration(0.25, b, sizeof b), "250.0ms");
        assert_string_equal(view_duration(1.25, b, sizeof b), "1.25s");
        assert_string_equal(view_duration(185, b, sizeof b), "3min 5s");
        assert_string_equal(view_duration(7800, b, sizeof b), "2h 10min");
        assert_string_equal(view_duration(273600, b, sizeof b), "3d 4h");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_golden),
                cmocka_unit_test(test_escapes_and_color),
                cmocka_unit_test(test_durations),
        };
        const char *d = getenv("RTD_FIXTURES");

        snprintf(dir, sizeof dir, "%s/views", d ? d : RTD_FIXTURES_DIR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
