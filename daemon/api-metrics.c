/* SPDX-License-Identifier: MIT */
#include "api.h"

const Route api_metrics_routes[] = {
        {},
};
