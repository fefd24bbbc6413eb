/* SPDX-License-Identifier: MIT */
/* rtctl's escaping for the terminal (client/escape.c): controls and non-UTF-8 escaped, the rest untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "rtctl.h"

static void expect(const char *in, const char *out) {
        char *e = ctl_escape(in);
        assert_non_null(e);
        assert_string_equal(e, out);
        free(e);
}

static void test_escape(void **state) {
        expect("", "");
        expect("plain name-1_2 /usr/bin", "plain name-1_2 /usr/bin");
        expect("ünïcode ✓ 🙂", "ünïcode ✓ 🙂");                        /* valid UTF-8 stays */
        expect("a\x1b[2Jb", "a\\x1b[2Jb");                            /* C0 ESC */
        expect("\x07\t\n\r\x7f", "\\x07\\t\\n\\x0d\\x7f");
        expect("a\xc2\x9b" "31mb", "a\\u009b31mb");                   /* C1 CSI as UTF-8 */
        expect("\xc2\x85\xc2\x80\xc2\xa0", "\\u0085\\u0080\xc2\xa0"); /* NEL, PAD; NBSP is printable */
        expect("a\x9b" "31m", "a\\x9b31m");                           /* a lone C1 byte: not UTF-8 */
        expect("\xc0\xaf", "\\xc0\\xaf");                             /* overlong '/' */
        expect("\xed\xa0\x80", "\\xed\\xa0\\x80");                    /* a surrogate */
        expect("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");           /* past U+10FFFF */
        expect("\xe2\x82", "\\xe2\\x82");                             /* truncated */
}

static void test_safe(void **state) {
        const char *clean = "job-1";
        const char *a, *b;

        assert_ptr_equal(ctl_safe(clean), clean);                     /* clean: no copy */
        assert_null(ctl_safe(NULL));
        a = ctl_safe("x\x1b");
        b = ctl_safe("y\x1b");
        assert_string_equal(a, "x\\x1b");                             /* several live at once */
        assert_string_equal(b, "y\\x1b");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_escape),
                cmocka_unit_test(test_safe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
