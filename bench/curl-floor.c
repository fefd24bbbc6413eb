/* SPDX-License-Identifier: MIT */
/*
 * The start-up floor of any program that uses libcurl, as rtctl does: it only initialises libcurl and
 * exits. bench/dispatch runs it in the same loop as `rtctl submit --wait` and the by-hand baseline, so the
 * share of rtctl's time that comes from loading libcurl and its 30-odd libraries is measured, not assumed.
 */
#include <curl/curl.h>

int main(void) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return 1;
        curl_global_cleanup();
        return 0;
}
