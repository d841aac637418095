/* thread_internal.h - a stream thread's insides, shared by the files that make it up:
 * thread.c (life cycle, the record path, the loop), thread_setup.c (start-up: tables,
 * stores, clients, Lua, restore, offsets), thread_commit.c (commit, commit markers,
 * snapshots) and thread_ffi.c (what Lua calls). Nothing else includes it. Every field
 * belongs to the stream thread itself, except where a comment says another thread reads or
 * writes it (flags, the snapshot mailbox under snap_lock, done). */
#ifndef BK_THREAD_INTERNAL_H
#define BK_THREAD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <lua.h>
#include <stdatomic.h>

#include "base/ffi.h"
#include "engine/store.h"
#include "engine/thread.h"

typedef enum { POLICY_FAIL, POLICY_SKIP, POLICY_DLQ } policy_t;

struct bk_thread_s {
    int index;
    char name[32];
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_node_flags_t *flags;
    bk_task_id_t *tasks;
    int ntasks;
    policy_t policy;
    int batch_size;
    int64_t commit_interval_ms;
    pthread_t tid;
    int started;
    atomic_int done;
    int rc;

    lua_State *L;
    int ref_run, ref_punctuate, ref_close, ref_flush, ref_hook, ref_init;

    /* State: one DB per task; store_of[task][plan store] or NULL. */
    bk_db_t **dbs;
    bk_store_t ***store_of;
    rd_kafka_topic_t **changelog_rkts; /* by plan store */

    rd_kafka_t *consumer, *producer;
    rd_kafka_queue_t *queue;
    rd_kafka_topic_t **out_rkts; /* by topic index, sinks only */
    rd_kafka_topic_t *dlq_rkt;

    /* The batch in hand, shared with Lua. */
    bk_io_t io;
    rd_kafka_message_t **msgs;
    int *rec_tp; /* toppar of each record */

    /* Assigned topic-partitions and the next offset to commit of each. */
    int ntp;
    int *tp_topic, *tp_partition;
    int64_t *tp_next;
    int64_t *tp_first; /* first offset processed, -1: none yet */
    char *tp_dirty;
    int **task_of, **tp_of; /* [topic][partition] -> task / toppar, -1 */
    const rd_kafka_topic_t *last_rkt;
    int last_topic;

    int dr_failed;
    int punct_failed;  /* a stream-time punctuation raised under on_error=fail */
    int commit_failed; /* a commit failed: no later commit may succeed it */
    char dr_err[512];
    char err[1024];
    bk_thread_stats_t stats;

    bk_taskdb_pool_t *pool; /* where DBs come from and go back to (NULL: open, close) */
    /* Cold bootstrap, the active's side: snapshots asked for (made after the next commit)
     * and made (taken by the node). Guarded by snap_lock. */
    pthread_mutex_t snap_lock;
    bk_snapshot_made_t snap_req[BK_SNAPSHOT_REQUESTS], snap_done[BK_SNAPSHOT_REQUESTS];
    int nsnap_req, nsnap_done;
    atomic_int snap_wanted;
    int clean; /* the final commit went through */

    /* In a cluster (bk_thread_set_cluster). */
    uint64_t epoch;
    int32_t *ids;
    bk_thread_progress_cb progress;
    void *progress_opaque;
};

/* Start-up, in order (thread_setup.c); each 0, or -1 with thr->err. */
void bk_thread_build_tables(bk_thread_t *thr);
int bk_thread_open_stores(bk_thread_t *thr);
int bk_thread_start_kafka(bk_thread_t *thr);
int bk_thread_start_lua(bk_thread_t *thr);
int bk_thread_restore(bk_thread_t *thr);
int bk_thread_init_lua(bk_thread_t *thr);
int bk_thread_assign_inputs(bk_thread_t *thr);

/* The input offsets of task t (next to read, -1: none), in the order of its input
 * partitions; their count. */
int bk_thread_task_inputs(const bk_thread_t *thr, int t, int64_t *offs);

/* Commit (thread_commit.c): flush, write, mark, commit offsets (thread.h has the order).
 * 0, or -1 with thr->err (the node then stops without committing). */
int bk_thread_commit(bk_thread_t *thr);
/* Makes the snapshots asked for (bk_thread_request_snapshot), right after a commit. */
void bk_thread_make_snapshots(bk_thread_t *thr);

#endif
