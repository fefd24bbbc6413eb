/* SPDX-License-Identifier: MIT */
#include "api.h"

const Route api_reserve_routes[] = {
        {},
};
