/* SPDX-License-Identifier: MIT */
/* The naming of IPI call sites from a /proc/kallsyms written here: the text symbol at or below an address,
 * a sample's new addresses named in one pass, the cache, and a hidden table (kptr_restrict: all zeros). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics/kallsyms.h"

static char dir[32], path[64];

static int fake_proc(const char *content) {
        FILE *f;
        int fd;

        (void) snprintf(dir, sizeof dir, "/tmp/test-kallsyms-XXXXXX");
        assert_non_null(mkdtemp(dir));
        (void) snprintf(path, sizeof path, "%s/kallsyms", dir);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        assert_int_equal(fclose(f), 0);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

/* The symbols' cache, and the fake /proc fake_proc() made. */
static void done_proc(Symbols *s, int fd) {
        symbols_done(s);
        close(fd);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
}

static const char table[] =
        "0000000000000000 A fixed_percpu_data\n"
        "ffffffff81000000 T _stext\n"
        "ffffffff81000100 t helper\n"
        "ffffffff81000200 D some_data\n"
        "ffffffff81000300 T generic_exec_single\n"
        "ffffffff81000400 T update_curr\n"
        "ffffffffc0000000 t mod_fn\t[some_module]\n";

static void test_names_and_one_pass(void **state) {
        Symbols s = {};
        uint64_t addrs[] = { 0xffffffff81000336, 0xffffffff81000250, 0, 0xffffffff81000336, 0xffffffffc0000010 };
        int fd = fake_proc(table);

        (void) state;
        s.proc_fd = fd;
        symbols_resolve(&s, addrs, 5);
        assert_int_equal(s.scans, 1);
        assert_int_equal(s.n_cache, 3);                 /* the duplicate and the 0 are not looked up */
        /* Data symbols do not count: 0x...250 is in helper, past some_data. */
        assert_string_equal(symbols_name(&s, 0xffffffff81000250), "helper+0x150");
        assert_string_equal(symbols_name(&s, 0xffffffff81000336), "generic_exec_single+0x36");
        assert_string_equal(symbols_name(&s, 0xffffffffc0000010), "mod_fn+0x10");
        assert_string_equal(symbols_name(&s, 0), "-");
        assert_int_equal(s.scans, 1);                   /* all from the cache */
        /* A new address alone: one more pass. */
        assert_string_equal(symbols_name(&s, 0xffffffff81000400), "update_curr+0x0");
        assert_int_equal(s.scans, 2);
        done_proc(&s, fd);
}

static void test_hidden_addresses(void **state) {
        Symbols s = {};
        uint64_t addrs[] = { 0xffffffff81000336 };
        int fd = fake_proc("0000000000000000 T _stext\n0000000000000000 T generic_exec_single\n");

        (void) state;
        s.proc_fd = fd;
        symbols_resolve(&s, addrs, 1);
        assert_string_equal(symbols_name(&s, 0xffffffff81000336), "?");
        assert_int_equal(s.failures, 1);
        /* No further scans once the table is known to be hidden. */
        assert_string_equal(symbols_name(&s, 0xffffffff81000999), "?");
        assert_int_equal(s.scans, 1);
        done_proc(&s, fd);
}

static void test_malformed_lines(void **state) {
        Symbols s = {};
        int fd = fake_proc("garbage\nffffffff8100 T\nffffffff81000000 Tx bad\n\nffffffff81000010 T good\n");

        (void) state;
        s.proc_fd = fd;
        assert_string_equal(symbols_name(&s, 0xffffffff81000020), "good+0x10");
        done_proc(&s, fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_and_one_pass),
                cmocka_unit_test(test_hidden_addresses),
                cmocka_unit_test(test_malformed_lines),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
