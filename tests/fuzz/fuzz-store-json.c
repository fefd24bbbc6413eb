/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a job as read back from the store (jobs.db's JSON: spec with argv/env, credentials,
 * times). A row that does not make a job is refused (recovery marks it lost); one that does survives its
 * own round trip through the store's JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const states[] = { "queued", "starting", "running", "succeeded", "lost", "bogus" };
        JobManager jm = { .output_fd = -1 };
        json_t *row, *again;
        Job *j = NULL, *k = NULL;

        if (size < 1)
                return 0;
        row = json_loadb((const char *) data + 1, size - 1, JSON_DECODE_ANY, NULL);
        if (!row)
                return 0;
        if (job_from_json(&jm, 7, states[data[0] % 6], 1000, 3, row, &j) >= 0) {
                again = job_to_json(&jm, j, true, true);
                if (!again)
                        abort();
                if (job_from_json(&jm, 7, states[data[0] % 6], 1000, 3, again, &k) < 0)
                        abort();        /* what rtd stored, it cannot read back */
                if (strcmp(k->spec.argv[0], j->spec.argv[0]) != 0 || k->gid != j->gid || k->n_groups != j->n_groups)
                        abort();
                json_decref(again);
                job_free_unregistered(k);
                job_free_unregistered(j);
        }
        json_decref(row);
        return 0;
}
