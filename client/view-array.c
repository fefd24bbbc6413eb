/* SPDX-License-Identifier: MIT */
/* rtctl show aN: one job array, its progress first, then what it runs and where its tasks are. */
#include <stdio.h>
#include <string.h>

#include "view.h"

void view_array(View *v, json_t *a) {
        const char *state = view_jstr(v, a, "state", "?");
        ViewColor c = view_state_color(streq(state, "failed") ? "failed" : state);
        json_t *ff = json_object_get(a, "first_failure");
        long long size = view_jint(a, "size");
        char buf[96];

        fprintf(v->out, "%s●%s array a%lld (%s): %s%s%s, %lld of %lld tasks ended\n", view_on(v, c), view_off(v),
                view_jint(a, "id"), view_jstr(v, a, "name", "?"), view_on(v, c), state, view_off(v),
                view_jint(a, "ended"), size);
        view_field_color(v, "Succeeded", view_jint(a, "succeeded") == size ? VC_GOOD : VC_NONE, "%lld",
                         view_jint(a, "succeeded"));
        if (view_jint(a, "failed") || view_jint(a, "timed_out") || view_jint(a, "lost")) {
                long long to = view_jint(a, "timed_out"), lost = view_jint(a, "lost");
                view_field_color(v, "Failed", VC_BAD, "%lld", view_jint(a, "failed") + to + lost);
                if (to || lost)
                        view_more(v, "of which %lld timed out, %lld lost", to, lost);
        }
        if (view_jint(a, "cancelled"))
                view_field_color(v, "Cancelled", VC_WARN, "%lld", view_jint(a, "cancelled"));
        if (!json_is_string(json_object_get(a, "ended_at")))
                view_field(v, "Now", "%lld running, %lld queued", view_jint(a, "running"), view_jint(a, "queued"));
        if (json_is_object(ff))
                view_field_color(v, "First failure", VC_BAD, "index %lld, job %lld: %s%s%s", view_jint(ff, "index"),
                                 view_jint(ff, "job"), view_jstr(v, ff, "state", "?"),
                                 json_is_string(json_object_get(ff, "reason")) ? ", " : "",
                                 view_jstr(v, ff, "reason", ""));
        if (json_is_string(json_object_get(a, "indices")))
                view_field(v, "Indices", "%s%s", view_jstr(v, a, "indices", "?"),
                           json_is_true(json_object_get(a, "substitute")) ? " ({} in the command is the index)" : "");
        else
                view_field(v, "Indices", "0-%lld, one per line of the --each file", size - 1);
        if (json_is_integer(json_object_get(a, "max_running")))
                view_field(v, "Max running", "%lld at once", view_jint(a, "max_running"));
        view_field(v, "User", "%s (uid %lld)", view_jstr(v, a, "user", "?"), view_jint(a, "uid"));
        view_field(v, "Jobs", "%lld-%lld (rtctl list a%lld)", view_jint(a, "first_job"), view_jint(a, "last_job"),
                   view_jint(a, "id"));
        if (view_time(v, json_string_value(json_object_get(a, "submitted_at")), buf, sizeof buf))
                view_field(v, "Submitted", "%s", buf);
        if (view_time(v, json_string_value(json_object_get(a, "ended_at")), buf, sizeof buf))
                view_field(v, "Ended", "%s", buf);
}
