/* SPDX-License-Identifier: MIT */
#include "api.h"

const Route api_jobs_routes[] = {
        {},
};
