/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the values rtd's handlers take from query strings (?limit=, ?cursor=, ?job=, ?follow=,
 * ?offset=, ?state=, ?cpus=): numbers, booleans, job states. libmicrohttpd's splitting and decoding of the
 * query string itself runs in fuzz-request. A parser either refuses or yields a value that prints back. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "shared/parse-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *) data, size), buf[32];
        uint64_t u64;
        int64_t i64;
        unsigned u;
        int st;

        if (!s)
                return 0;
        if (safe_atou64(s, &u64) >= 0) {
                uint64_t back;
                snprintf(buf, sizeof buf, "%" PRIu64, u64);
                if (safe_atou64(buf, &back) < 0 || back != u64)
                        abort();
        }
        if (safe_atou(s, &u) >= 0 && (safe_atou64(s, &u64) < 0 || u64 != u))
                abort();        /* the same number, whichever width is asked for */
        if (safe_atoi64(s, &i64) >= 0) {
                int64_t back;
                snprintf(buf, sizeof buf, "%" PRId64, i64);
                if (safe_atoi64(buf, &back) < 0 || back != i64)
                        abort();
        }
        (void) parse_boolean(s);
        st = job_state_from_string(s);
        if (st >= 0 && strcmp(job_state_to_string(st), s) != 0)
                abort();
        free(s);
        return 0;
}
