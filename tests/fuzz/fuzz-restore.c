/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the restore journal (/run/rtd), which rtd --restore reads after a crash, torn or not.
 * Parsing never fails on content; what it kept serializes to a journal that parses back to itself. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/restore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = strndup((const char *) data, size), *problem = NULL, *a, *b;
        Journal *j, *k;

        if (!text)
                return 0;
        j = journal_new(AT_FDCWD);
        if (!j || journal_parse(j, text, &problem) < 0)
                abort();
        free(problem);
        problem = NULL;
        a = journal_serialize(j);
        if (!a)
                abort();
        k = journal_new(AT_FDCWD);
        if (journal_parse(k, a, &problem) < 0 || problem)
                abort();        /* rtd's own journal must parse cleanly */
        b = journal_serialize(k);
        if (!b || strcmp(a, b) != 0)
                abort();
        free(a);
        free(b);
        journal_free(j);
        journal_free(k);
        free(text);
        return 0;
}
