/* SPDX-License-Identifier: MIT */
/* The journal (restore.c) knows kinds of entries; the modules that record a kind know how to undo it and
 * register that here, once, before rtd, `rtd --restore` or a test replays any journal. */
#include "backend.h"
#include "irq.h"
#include "undo.h"

void host_register_undos(void) {
        task_register_undo();           /* backend-affinity.c: JOURNAL_TASK */
        systemd_register_undo();        /* backend-systemd.c: JOURNAL_UNIT, JOURNAL_UNIT_STOP */
        irqbalance_register_undo();     /* irq.c: JOURNAL_IRQBALANCE */
}
