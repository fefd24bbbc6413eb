/* SPDX-License-Identifier: MIT */
/* CpuSet: the kernel's list and hex-mask syntaxes (parse, format, strictness) and the set operations. */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

/* Parses s (must succeed) and returns its canonical list form; the caller frees. */
static char *roundtrip(const char *s) {
        CpuSet set;
        char *out = NULL;

        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        assert_int_equal(cpuset_format(&set, &out), 0);
        return out;
}

static CpuSet set_of(const char *s) {
        CpuSet set;

        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        return set;
}

static void assert_set(const CpuSet *set, const char *expected) {
        _cleanup_free_ char *s = NULL;

        assert_int_equal(cpuset_format(set, &s), 0);
        assert_string_equal(s, expected);
}

static void test_parse_format(void **state) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "", "" },
                { "0", "0" },
                { "0-3,8,10-11", "0-3,8,10-11" },
                { "3,1", "1,3" },                       /* any order, canonical output */
                { "0,1,2", "0-2" },
                { "5-5", "5" },
                { "0-63,64-127", "0-127" },             /* across a 64-bit word */
                { "  1-2\n", "1-2" },                   /* what read() gives from sysfs */
                { "4095", "4095" },
                { "0-4095", "0-4095" },
                { "63,64,127,128", "63-64,127-128" },
                { "0,2,4-6,300", "0,2,4-6,300" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *out = roundtrip(cases[i].in);
                assert_string_equal(out, cases[i].out);
        }
        CpuSet all = set_of("0-4095");
        assert_int_equal(cpuset_count(&all), 4096);
        assert_int_equal(cpuset_last(&all), 4095);
}

static void test_parse_strict(void **state) {
        static const struct {
                const char *in;
                int r;
                const char *bad;        /* the part named in the error */
        } cases[] = {
                { "abc", -EINVAL, "abc" },
                { "3-1", -EINVAL, "3-1" },              /* reversed range */
                { "1,2,1", -EINVAL, "1" },              /* duplicate */
                { "0-3,2-5", -EINVAL, "2-5" },          /* overlapping ranges */
                { "1,", -EINVAL, "," },                 /* trailing comma */
                { ",1", -EINVAL, "" },
                { "1,,2", -EINVAL, "" },
                { "1-", -EINVAL, "1-" },
                { "-1", -EINVAL, "-1" },
                { "1 2", -EINVAL, "1 2" },
                { "1, 2", -EINVAL, " 2" },
                { "1-2-3", -EINVAL, "1-2-3" },
                { "0x1", -EINVAL, "0x1" },
                { "+1", -EINVAL, "+1" },
                { "1a", -EINVAL, "1a" },
                { "2,4096", -ERANGE, "4096" },          /* CPUSET_MAX */
                { "0-4096", -ERANGE, "0-4096" },
                { "99999999999999999999999", -ERANGE, "99999999999999999999999" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *bad = NULL;
                CpuSet set = set_of("7");       /* must be left alone on failure */

                assert_int_equal(cpuset_parse(cases[i].in, &set, &bad), cases[i].r);
                assert_non_null(bad);
                assert_string_equal(bad, cases[i].bad);
                assert_set(&set, "7");
                /* ret_bad is optional */
                assert_int_equal(cpuset_parse(cases[i].in, &set, NULL), cases[i].r);
        }
}

static void test_mask_format(void **state) {
        static const struct {
                const char *list;
                unsigned nr_cpu_ids;
                const char *mask;
        } cases[] = {
                { "", 0, "00000000" },
                { "", 64, "00000000,00000000" },
                { "0-1", 2, "00000003" },
                { "0-3", 64, "00000000,0000000f" },
                { "31-32", 33, "00000001,80000000" },
                { "0,63", 2, "80000000,00000001" },      /* widened to hold the highest CPU */
                { "4-7,64", 128, "00000000,00000001,00000000,000000f0" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *mask = NULL;
                CpuSet set = set_of(cases[i].list), back;

                assert_int_equal(cpuset_format_mask(&set, cases[i].nr_cpu_ids, &mask), 0);
                assert_string_equal(mask, cases[i].mask);
                assert_int_equal(cpuset_parse_mask(mask, &back), 0);
                assert_true(cpuset_equal(&set, &back));
        }
}

static void test_mask_above_256(void **state) {
        _cleanup_free_ char *mask = NULL;
        CpuSet set = set_of("300"), back;
        size_t commas = 0;

        /* CPU 300 needs 301 bits: ten 32-bit words, bit 12 of the most significant one. */
        assert_int_equal(cpuset_format_mask(&set, 2, &mask), 0);
        for (const char *p = mask; *p; p++)
                commas += *p == ',';
        assert_int_equal(commas, 9);
        assert_int_equal(strlen(mask), 10 * 8 + 9);
        assert_true(startswith(mask, "00001000,00000000,"));
        assert_int_equal(cpuset_parse_mask(mask, &back), 0);
        assert_set(&back, "300");

        /* The top CPU fills 128 words; asking for more never reads past the set. */
        free(mask);
        mask = NULL;
        set = set_of("4095");
        assert_int_equal(cpuset_format_mask(&set, 100000, &mask), 0);
        assert_int_equal(strlen(mask), 128 * 9 - 1);
        assert_true(startswith(mask, "80000000,"));
        assert_int_equal(cpuset_parse_mask(mask, &back), 0);
        assert_set(&back, "4095");
}

static void test_mask_parse(void **state) {
        CpuSet set;

        assert_int_equal(cpuset_parse_mask("f\n", &set), 0);
        assert_set(&set, "0-3");
        assert_int_equal(cpuset_parse_mask("FF", &set), 0);
        assert_set(&set, "0-7");
        /* Each comma-separated chunk is one 32-bit word, leading zeros optional (bitmap_parse). */
        assert_int_equal(cpuset_parse_mask("1,0", &set), 0);
        assert_set(&set, "32");
        assert_int_equal(cpuset_parse_mask("3,00000001", &set), 0);
        assert_set(&set, "0,32-33");
        assert_int_equal(cpuset_parse_mask("00000000,00000000", &set), 0);
        assert_true(cpuset_is_empty(&set));
}

static void test_mask_strict(void **state) {
        static const char *const bad[] = { "", "\n", "xyz", "0x3", "123456789", "1,,0", ",1", "1,", "f g" };
        _cleanup_free_ char *big = NULL, *zeros = NULL;
        CpuSet set = set_of("7");
        size_t n = 129 * 9;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(cpuset_parse_mask(bad[i], &set), -EINVAL);
                assert_set(&set, "7");
        }

        /* Word 128 is CPU 4096..4127: beyond CPUSET_MAX when set, harmless when zero. */
        big = malloc(n);
        zeros = malloc(n);
        assert_non_null(big);
        assert_non_null(zeros);
        strcpy(big, "00000001");
        strcpy(zeros, "00000000");
        for (int i = 0; i < 128; i++) {
                strcat(big, ",00000000");
                strcat(zeros, i == 127 ? ",00000002" : ",00000000");
        }
        assert_int_equal(cpuset_parse_mask(big, &set), -ERANGE);
        assert_set(&set, "7");
        assert_int_equal(cpuset_parse_mask(zeros, &set), 0);
        assert_set(&set, "1");
}

static void test_ops(void **state) {
        CpuSet a = set_of("0-3,64,200"), b = set_of("2-5,200"), r;

        assert_int_equal(cpuset_count(&a), 6);
        assert_false(cpuset_is_empty(&a));
        assert_true(cpuset_is_empty(&(CpuSet) {}));

        cpuset_and(&r, &a, &b);
        assert_set(&r, "2-3,200");
        cpuset_or(&r, &a, &b);
        assert_set(&r, "0-5,64,200");
        cpuset_andnot(&r, &a, &b);
        assert_set(&r, "0-1,64");
        cpuset_andnot(&r, &b, &a);
        assert_set(&r, "4-5");

        assert_true(cpuset_intersects(&a, &b));
        assert_false(cpuset_intersects(&a, &(CpuSet) {}));
        r = set_of("1,64");
        assert_true(cpuset_is_subset(&r, &a));
        assert_false(cpuset_is_subset(&a, &r));
        assert_true(cpuset_is_subset(&(CpuSet) {}, &r));
        assert_true(cpuset_equal(&a, &a));
        assert_false(cpuset_equal(&a, &b));

        assert_int_equal(cpuset_first(&a), 0);
        assert_int_equal(cpuset_last(&a), 200);
        assert_int_equal(cpuset_next(&a, 3), 64);
        assert_int_equal(cpuset_next(&a, 64), 200);
        assert_int_equal(cpuset_next(&a, 200), -1);
        assert_int_equal(cpuset_first(&(CpuSet) {}), -1);
        assert_int_equal(cpuset_last(&(CpuSet) {}), -1);
        r = set_of("4095");
        assert_int_equal(cpuset_next(&r, 4094), 4095);
        assert_int_equal(cpuset_next(&r, 4095), -1);

        cpuset_zero(&r);
        cpuset_set(&r, 5);
        cpuset_set(&r, 4096);           /* out of range: ignored, not a write past the end */
        assert_true(cpuset_isset(&r, 5));
        assert_false(cpuset_isset(&r, 4096));
        cpuset_clear(&r, 5);
        assert_true(cpuset_is_empty(&r));
}

static void test_foreach(void **state) {
        CpuSet a = set_of("1,3,63-65,4095");
        unsigned seen[8], n = 0;

        CPUSET_FOREACH(cpu, &a) {
                assert_true(n < ELEMENTSOF(seen));
                seen[n++] = (unsigned) cpu;
        }
        assert_int_equal(n, 6);
        assert_int_equal(seen[0], 1);
        assert_int_equal(seen[1], 3);
        assert_int_equal(seen[2], 63);
        assert_int_equal(seen[4], 65);
        assert_int_equal(seen[5], 4095);

        n = 0;
        CPUSET_FOREACH(cpu, &(CpuSet) {})
                n++;
        assert_int_equal(n, 0);
}

static void test_cpu_set_t(void **state) {
        CpuSet a = set_of("0,5,1023,1024,4000"), back;
        cpu_set_t c;

        cpuset_to_cpu_set(&a, &c);
        assert_int_equal(CPU_COUNT(&c), 3);     /* CPUs >= CPU_SETSIZE (1024) are dropped */
        assert_true(CPU_ISSET(1023, &c));
        cpuset_from_cpu_set(&c, &back);
        assert_set(&back, "0,5,1023");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_format),
                cmocka_unit_test(test_parse_strict),
                cmocka_unit_test(test_mask_format),
                cmocka_unit_test(test_mask_above_256),
                cmocka_unit_test(test_mask_parse),
                cmocka_unit_test(test_mask_strict),
                cmocka_unit_test(test_ops),
                cmocka_unit_test(test_foreach),
                cmocka_unit_test(test_cpu_set_t),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
