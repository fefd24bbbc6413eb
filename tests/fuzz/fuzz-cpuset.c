/* SPDX-License-Identifier: MIT */
/* libFuzzer target: CPU lists ("0-3,8", config, job specs, ?cpus=). An accepted list formats to a canonical
 * list that parses back to the same set; a refused one names the bad part. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/cpuset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = strndup((const char *) data, size), *bad = NULL, *out = NULL, *out2 = NULL;
        CpuSet s, t;

        if (!text)
                return 0;
        if (cpuset_parse(text, &s, &bad) < 0) {
                free(bad);
                free(text);
                return 0;
        }
        free(bad);
        if (cpuset_format(&s, &out) < 0)
                abort();
        if (*out && (cpuset_parse(out, &t, NULL) < 0 || !cpuset_equal(&s, &t)))
                abort();
        if (*out && (cpuset_format(&t, &out2) < 0 || strcmp(out, out2) != 0))
                abort();
        if (cpuset_count(&s) > CPUSET_MAX || (cpuset_last(&s) >= 0 && (unsigned) cpuset_last(&s) >= CPUSET_MAX))
                abort();
        free(out2);
        free(out);
        free(text);
        return 0;
}
