/* SPDX-License-Identifier: MIT */
/* Placeholder until reserve.c lands: reserves nothing. */
#include <errno.h>
#include <stdlib.h>

#include "manager.h"
#include "reserve.h"

struct Reservation {
        Manager *manager;
};

int reservation_new(Manager *m, Reservation **ret) {
        Reservation *r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        r->manager = m;
        *ret = r;
        return 0;
}
int reservation_apply(Reservation *r, const CpuSet *cpus) {
        (void) r;
        (void) cpus;
        return -EOPNOTSUPP;
}
int reservation_release(Reservation *r) {
        (void) r;
        return 0;
}
void reservation_cpus(Reservation *r, CpuSet *ret_reserved, CpuSet *ret_housekeeping) {
        (void) r;
        if (ret_reserved)
                cpuset_zero(ret_reserved);
        if (ret_housekeeping)
                cpuset_zero(ret_housekeeping);
}
void reservation_stats(Reservation *r, ReservationStats *ret) {
        (void) r;
        *ret = (ReservationStats){};
}
json_t *reservation_to_json(Reservation *r) {
        (void) r;
        return json_pack("{s:s}", "state", "none");
}
Reservation *reservation_free(Reservation *r) {
        free(r);
        return NULL;
}
int reservation_restore_only(int proc_fd, int sys_fd, int runtime_fd) {
        (void) proc_fd;
        (void) sys_fd;
        (void) runtime_fd;
        return 0;
}
