/* SPDX-License-Identifier: MIT */
/* IRQ affinity steering: /proc/irq/N masks and default_smp_affinity, unmovable IRQs, irqbalance. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "restore.h"
#include "shared/cpuset.h"

typedef enum IrqErrorClass {
        IRQ_ERROR_NONE,
        IRQ_ERROR_TRANSIENT,    /* retried: EAGAIN, EBUSY, ENOMEM, EINTR, EINVAL, ERANGE */
        IRQ_ERROR_UNMOVABLE,    /* EIO/EPERM (managed or per-CPU), ENOSPC (no vectors left) */
        IRQ_ERROR_FAILED,       /* anything else */
} IrqErrorClass;

IrqErrorClass irq_classify_error(int r);

/* (old ∩ housekeeping), or housekeeping when that is empty. */
void irq_target_mask(const CpuSet *old, const CpuSet *housekeeping, CpuSet *ret);

typedef struct IrqName {
        unsigned irq;
        char *chip;             /* "PCI-MSIX-0000:00:04.0", "IO-APIC" */
        char *name;             /* action names: "virtio3-rx", "nvme0q1" */
} IrqName;
/* Parse /proc/interrupts text into the numbered IRQs. Pure (unit-tested). */
int irq_parse_interrupts(const char *text, IrqName **ret, size_t *ret_n);
void irq_names_free(IrqName *names, size_t n);

typedef struct IrqUnmovable {
        unsigned irq;
        char *name;
        char *chip;
        CpuSet hits;            /* reserved CPUs it may still fire on */
        int error;              /* -errno of the refused write */
        const char *reason;
        const char *remedy;
} IrqUnmovable;

/* Why the kernel refused and what would help, from the errno and the IRQ's chip and name. */
void irq_explain_refusal(int error, const char *chip, const char *name, const char **ret_reason,
                         const char **ret_remedy);

/* remedy with "<reserved CPUs>" replaced by the list. */
char *irq_remedy(const char *remedy, const CpuSet *reserved);

typedef struct IrqState {
        unsigned total;
        unsigned moved;         /* written by the last pass */
        unsigned already;       /* already within housekeeping */
        unsigned failed;
        uint64_t drifted;       /* re-applied after someone undid them, total */
        IrqUnmovable *unmovable;
        size_t n_unmovable;
        json_t *failures;       /* [{"irq","error"}] of the last pass */
        bool default_affinity_set;
        CpuSet reserved;        /* of the last pass, for remedies that name the CPUs */
        pid_t irqbalance_pid;   /* 0: not running */
        char *irqbalance_note;
} IrqState;
void irq_state_done(IrqState *s);

/*
 * One pass over /proc/irq: every movable IRQ gets its target mask, default_smp_affinity too. drift=true
 * counts IRQs whose mask someone changed back. With k->plan set nothing is written.
 */
int irq_apply(KnobCtx *k, const CpuSet *housekeeping, const CpuSet *reserved, unsigned nr_cpu_ids, bool drift,
              IrqState *st);
json_t *irq_state_to_json(const IrqState *st);

/* irqbalance: find it, tell it which CPUs to leave alone, and reset that on restore. */
pid_t irqbalance_find(int proc_fd);
int irqbalance_ban(KnobCtx *k, pid_t pid, const CpuSet *reserved, char **ret_note);
int irqbalance_reset(pid_t pid, const char *socket);
/* Hands the journal the undo of JOURNAL_IRQBALANCE entries (host_register_undos()). */
void irqbalance_register_undo(void);
