/* SPDX-License-Identifier: MIT */
/*
 * Group sync of the WAL, for writes that must reach the disk soon but not one by one: the starts of an
 * array's tasks. store_write_durable() syncs inside the commit (one disk flush per write, rtd's loop waiting
 * on it, and the flush's completion interrupt on whichever CPU the disk's queue is bound to, often a reserved
 * one); 2000 tiny tasks made that 2000 flushes. store_write_synced_soon() commits like any other write
 * (synchronous=NORMAL: it survives a crash of rtd at once) and asks this thread to fdatasync() the WAL: the
 * thread waits STORE_SYNC_BATCH_USEC for more such writes to gather, then syncs them all with one flush. A
 * power cut therefore loses at most the writes of the last batch (and the flush in progress).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "store.h"
#include "store-internal.h"

static void sync_wal(StoreSyncer *y) {
        uint64_t want = atomic_load(&y->requested);
        int fd;

        if (want == atomic_load(&y->synced))
                return;
        /* Opened each time: SQLite may delete and recreate the WAL file; fdatasync() on any descriptor of it
         * writes out every commit the loop's connection made to it so far. */
        fd = open(y->wal_path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fdatasync(fd) == 0)
                atomic_fetch_add(&y->syncs, 1);
        else
                atomic_fetch_add(&y->failures, 1);      /* shown in /v1/status; the next batch tries again */
        if (fd >= 0)
                close(fd);
        atomic_store(&y->synced, want);
}

static void *syncer_thread(void *userdata) {
        StoreSyncer *y = userdata;
        struct timespec batch = { .tv_sec = 0, .tv_nsec = STORE_SYNC_BATCH_USEC * 1000L };
        uint64_t n;

        store_thread_below_loop();
        while (read(y->wake_fd, &n, sizeof n) == sizeof n || errno == EINTR) {
                if (atomic_load(&y->stop))
                        break;
                /* Until every request is synced: one that came in during a sync did not wake us. */
                do {
                        (void) nanosleep(&batch, NULL);         /* let the batch gather */
                        sync_wal(y);
                } while (!atomic_load(&y->stop) && atomic_load(&y->requested) != atomic_load(&y->synced));
        }
        sync_wal(y);            /* stopping: nothing asked for is left unsynced */
        return NULL;
}

int store_syncer_start(StoreSyncer *y, const char *db_path) {
        sigset_t all, saved;
        int r;

        if (asprintf(&y->wal_path, "%s-wal", db_path) < 0) {
                y->wal_path = NULL;
                return -ENOMEM;
        }
        y->wake_fd = eventfd(0, EFD_CLOEXEC);
        if (y->wake_fd < 0)
                return -errno;
        /* The thread takes no signals: rtd's are for its loop's signalfd. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        r = pthread_create(&y->thread, NULL, syncer_thread, y);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r != 0)
                return -r;
        y->running = true;
        return 0;
}

void store_syncer_stop(StoreSyncer *y) {
        uint64_t one = 1;

        if (y->running) {
                atomic_store(&y->stop, true);
                (void) !write(y->wake_fd, &one, sizeof one);
                pthread_join(y->thread, NULL);
                y->running = false;
        }
        if (y->wake_fd >= 0)
                close(y->wake_fd);
        y->wake_fd = -1;
        free(y->wal_path);
        y->wal_path = NULL;
}

int store_write_synced_soon(Store *s, const StoreJob *j, bool insert) {
        StoreSyncer *y = &s->sync;
        uint64_t one = 1;
        int r;

        if (!y->running)
                return store_write_durable(s, j, insert);
        r = insert ? store_insert(s, j) : store_update(s, j);
        if (r < 0)
                return r;
        /* The first request of a batch wakes the thread; the rest ride along. */
        if (atomic_fetch_add(&y->requested, 1) == atomic_load(&y->synced))
                (void) !write(y->wake_fd, &one, sizeof one);
        return r;
}
