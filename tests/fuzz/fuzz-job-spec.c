/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the job spec parser (POST /v1/jobs bodies) must never crash, leak or accept garbage. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job-spec.h"
#include "shared/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *field = NULL, *error = NULL;
        JobSpec s;
        int r;

        r = job_spec_parse_text((const char *) data, size, &s, &field, &error);
        if (r < 0) {
                /* Every refusal names a field (possibly "" for the whole body) and says why. */
                if (r == -EINVAL && (!field || !error || !*error))
                        abort();
                return 0;
        }
        /* An accepted spec is complete and survives its own round trip. */
        if (!s.argv || !s.argv[0] || !*s.argv[0] || !s.env || s.cores < 1)
                abort();
        json_t *j = job_spec_to_json(&s, true);
        JobSpec t;
        if (!j || job_spec_parse(j, &t, NULL, NULL) < 0)
                abort();
        if (t.cores != s.cores || t.policy != s.policy || t.priority != s.priority || strcmp(t.argv[0], s.argv[0]))
                abort();
        job_spec_done(&t);
        json_decref(j);
        job_spec_done(&s);
        return 0;
}
