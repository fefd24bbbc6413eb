/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "topology.h"
#include "tune.h"

/* What still reaches the reserved CPUs on the running kernel whatever rtd writes at run time, each with the
 * evidence it was detected by and its remedy: [{source, reaches, evidence, remedy}]. tune (may be NULL): the
 * knobs of the reservation, whose known values stand in for reads that disturb the machine (tune.h). */
json_t *residual_sources(int proc_fd, int sys_fd, const CpuSet *reserved, const TuneState *tune);
