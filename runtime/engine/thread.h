/* thread.h - a stream thread: one LuaJIT VM, one consumer, one producer and
 * a set of tasks (subtopology, partition), nothing shared on the record path.
 *
 * The loop: fetch a batch from the consumer queue, hand it to Lua in one call
 * (records as an FFI array, bk_io_t), apply the error policy to a record that
 * raised, fire wall-clock punctuation, and every commit_interval_ms commit in the
 * at-least-once order (engine/thread_commit.c; docs/state.md says why):
 *   1. flush the record cache into the stores' write batches and changelogs;
 *   2. flush the producer: every output and changelog record acknowledged;
 *   3. write each task's batch into RocksDB with a synced WAL, and
 *   4. its checkpoint file (changelog offsets, and the input offsets that state is of);
 *   5. commit the input offsets of what was processed;
 *   6. write a commit marker into each changelog of each task whose input moved.
 * A failure in 1-4 or 6 stops the node without committing further. */
#ifndef BK_THREAD_H
#define BK_THREAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/conf.h"
#include "engine/plan.h"
#include "engine/snapshot.h"

typedef struct bk_thread_s bk_thread_t;

/* Totals of a thread, read by the node after join. */
typedef struct bk_thread_stats_s {
    uint64_t in, out, skipped, dlq, commits;
} bk_thread_stats_t;

/* Shared flags of the node: `stop` asks every thread to finish and commit;
 * a thread that fails sets `failed` and `stop`. */
typedef struct bk_node_flags_s {
    atomic_int stop;   /* set by any thread; the stream threads poll it */
    atomic_int failed; /* set by the thread that failed */
} bk_node_flags_t;

/* Creates (does not start) thread `index` for `tasks` (copied). plan, conf
 * and flags must outlive the thread. */
bk_thread_t *bk_thread_new(int index, const bk_plan_t *plan, const bk_conf_t *conf,
                           bk_node_flags_t *flags, const bk_task_id_t *tasks, int ntasks);
/* In a cluster: the epoch the tasks run in (for the log's "first record" and "last record"
 * lines of each input partition, which spec/02-integration/08-cluster_spec.lua reads to
 * check that no two nodes ever process one task at once), the caller's id of each task,
 * and a callback told after each commit the next input offset of each task (of its first
 * input partition), run on the stream thread. Call before bk_thread_start(). */
typedef void (*bk_thread_progress_cb)(void *opaque, int32_t task, int64_t offset);
/* Cold bootstrap, the active's side (docs/bootstrap.md): a snapshot asked for is made by the
 * thread right after its next commit (which it then does at once); engine/snapshot.h has
 * the request's answer. */
/* Asks for a snapshot of task `id`: 0, or -1 if this thread does not run it or has
 * BK_SNAPSHOT_REQUESTS waiting. @locality any thread */
int bk_thread_request_snapshot(bk_thread_t *thr, int32_t id, const char *req);
/* A snapshot made (or failed): 1 and *out filled, or 0. @locality any thread */
int bk_thread_take_snapshot(bk_thread_t *thr, bk_snapshot_made_t *out);

/* DBs come from this pool (taskdb.h) and go back to it after a clean final commit; call
 * before bk_thread_start. Without one they are opened and closed. */
struct bk_taskdb_pool_s;
void bk_thread_set_pool(bk_thread_t *thr, struct bk_taskdb_pool_s *pool);
void bk_thread_set_cluster(bk_thread_t *thr, uint64_t epoch, const int32_t *ids,
                           bk_thread_progress_cb cb, void *opaque);
int bk_thread_start(bk_thread_t *thr);
/* Waits for the thread to end; returns 0 if it ended cleanly. */
int bk_thread_join(bk_thread_t *thr, bk_thread_stats_t *stats);
/* True once the thread has stopped by itself or after a stop request. */
int bk_thread_done(const bk_thread_t *thr);
void bk_thread_destroy(bk_thread_t *thr);

#endif
