/* restore.h - replays store changelogs into RocksDB before a task processes
 * input: from each store's checkpointed offset (or the log's start) to the
 * changelog's end as it was when the restore began. Reports progress.
 * Uses the stream thread's consumer, then leaves it with no assignment.
 * @locality the owning stream thread only. */
#ifndef BK_RESTORE_H
#define BK_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>

#include "engine/store.h"

typedef struct bk_restore_item_s {
    bk_store_t *st;
    const char *topic; /* the store's changelog */
    int32_t partition;
    const char *task; /* "<sub>_<partition>", for messages */
    /* group_hi > group_lo: only the keys of key groups [group_lo, group_hi) are applied (a
     * later generation's task built from the changelogs of the one before) */
    int group_lo, group_hi;
} bk_restore_item_t;

typedef struct bk_restore_progress_s {
    int64_t records; /* applied so far */
    int64_t total;   /* to apply in all */
    double rate;     /* records/s since the start */
    double eta_s;    /* time left at that rate */
    double elapsed_s;
    int stores; /* stores being restored */
    int done;
} bk_restore_progress_t;

typedef void (*bk_restore_progress_cb)(void *opaque, const bk_restore_progress_t *progress);

/* How long a restore tries to read its changelogs' offsets while the errors pass (a broker
 * restarting, a leader moving): then it fails, and its task's opening is tried again. */
#define BK_RESTORE_OFFSETS_MS 120000

/* Restores every item; calls cb about once a second and once at the end.
 * Returns 0, or -1 with errstr (a store write failed, a stall of more than 120 s, or *stop
 * set), or -2 with errstr when the changelogs' offsets could not be read for an error that
 * passes (bk_kafka_retriable) within BK_RESTORE_OFFSETS_MS: worth trying again later. */
int bk_restore_run(rd_kafka_t *consumer, bk_restore_item_t *items, int n, bk_restore_progress_cb cb,
                   void *opaque, atomic_int *stop, char *errstr, size_t errstr_size);

#endif
