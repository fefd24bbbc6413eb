/* SPDX-License-Identifier: MIT */
/* libFuzzer target: rtd.conf parsing. Never crash or leak; an accepted config dumps to text that parses back
 * to the same dump (what --check-config prints is a valid config). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(const RtdConfig *c) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                abort();
        if (config_dump(c, f) < 0) {
                fclose(f);
                free(buf);
                return NULL;
        }
        fclose(f);
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static FILE *null;
        char *text, *first, *second;
        RtdConfig *c, *d;
        unsigned warnings = 0;

        if (!null && !(null = fopen("/dev/null", "we")))
                abort();
        if (!(text = strndup((const char *) data, size)))
                return 0;
        c = config_new();
        if (!c)
                abort();
        if (config_parse_text(c, "fuzz.conf", text, null, &warnings) < 0 || config_validate(c, null) < 0) {
                config_free(c);
                free(text);
                return 0;
        }
        first = dump(c);
        if (first) {
                d = config_new();
                if (config_parse_text(d, "dump.conf", first, null, &warnings) < 0)
                        abort();        /* rtd --check-config printed something rtd refuses */
                second = dump(d);
                if (!second || strcmp(first, second) != 0)
                        abort();        /* the dump does not describe the config it came from */
                free(second);
                config_free(d);
        }
        free(first);
        config_free(c);
        free(text);
        return 0;
}
