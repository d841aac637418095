/* thread.h - a stream thread: one LuaJIT VM, one consumer, one producer and
 * a set of tasks (subtopology, partition) that may change while it runs, nothing
 * shared on the record path.
 *
 * The loop: fetch a batch from the consumer queue, hand it to Lua in one call
 * (records as an FFI array, bk_io_t), apply the error policy to a record that
 * raised, fire wall-clock punctuation, and every commit_interval_ms commit in the
 * at-least-once order (engine/thread_commit.c; docs/state.md says why):
 *   1. flush the record cache into the stores' write batches and changelogs;
 *   2. flush the producer: every output and changelog record acknowledged;
 *   3. commit the input offsets of what was processed (a failure: nothing below, the next
 *      commit carries it all);
 *   4. write each task's batch into RocksDB with a synced WAL, and
 *   5. its checkpoint file (changelog offsets, and the input offsets that state is of);
 *   6. write a commit marker into each changelog of each task whose input moved.
 * A failure in 1, 2, 4, 5 or 6 stops the node without committing further. Under
 * exactly-once (thread_txn.c) the producer is transactional and the order is 1, the markers
 * (6) in the transaction, the offsets in it and its commit (2-3), then 4 and 5; a failed
 * transaction drops the interval and starts the tasks again from their last commit. */
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
    /* The node's lease, wall-clock ms (cluster/member.h, bk_member_set_lease): a stream
     * thread processes and commits only before it. Past it, another node may run its tasks
     * already: whatever this one did since its last commit is dropped as in a crash, never
     * committed (issue 38: a node frozen past its session woke and committed its release
     * over the new owner's work). INT64_MAX outside a cluster (bk_crew_start). */
    _Atomic int64_t lease_until;
    /* Set with `stop` (bk_crew_stop), monotonic ms: past it a stopping thread waits on the
     * brokers no more (a stop while none answers ends in bounded time, its last interval
     * not committed). 0 while no stop is asked for. */
    _Atomic int64_t stop_by;
    /* The records `beck skip` listed (engine/skips.h): a task parked on a record that raised
     * under on_error=fail goes on once its record is listed. */
    struct bk_skips_s *skips;
} bk_node_flags_t;

/* How long a stop may wait for the brokers to take the last commit (bk_node_flags_t). */
#define BK_NODE_STOP_WAIT_MS 10000

/* Whether a stop was asked for and its wait for the brokers is over. @locality any thread */
static inline int bk_node_stop_overdue(bk_node_flags_t *flags, int64_t mono_now)
{
    int64_t by = atomic_load(&flags->stop_by);
    return by > 0 && mono_now >= by;
}

/* Whether the node's lease holds at wall-clock time now. @locality any thread */
static inline int bk_node_leased(bk_node_flags_t *flags, int64_t now)
{
    return now < atomic_load_explicit(&flags->lease_until, memory_order_acquire);
}

/* Creates (does not start) thread `index`, with no tasks. plan, conf and flags must outlive
 * the thread. */
bk_thread_t *bk_thread_new(int index, const bk_plan_t *plan, const bk_conf_t *conf,
                           bk_node_flags_t *flags);

/* Tasks come and go while the thread runs (engine/thread_tasks.c). A task is its index in
 * the app's task table (bk_plan_tasks). */
/* Asks the thread to take tasks from `epoch` on (the epoch names their runs in the log's
 * "first record" and "last record" lines, which spec/02-integration/08-cluster_spec.lua
 * reads to check that no two nodes ever process one task at once). Each opens and restores
 * in the background, then goes live; the others keep running. @locality any thread */
void bk_thread_add_tasks(bk_thread_t *thr, const int32_t *ids, int n, uint64_t epoch);
/* Asks the thread to give tasks up: their processors close, all of the thread's work is
 * committed, their partitions are unassigned and their DBs go back to the pool. Returns a
 * ticket for bk_thread_wait_removed. @locality any thread */
uint64_t bk_thread_remove_tasks(bk_thread_t *thr, const int32_t *ids, int n);
/* Waits until the removal of `ticket` is done: 0, or -1 if the thread ended first.
 * @locality any thread but the stream thread */
int bk_thread_wait_removed(bk_thread_t *thr, uint64_t ticket);

/* Told after each commit the next input offset of each task (of its first input
 * partition), on the stream thread. Call before bk_thread_start(). */
typedef void (*bk_thread_progress_cb)(void *opaque, int32_t task, int64_t offset);
void bk_thread_set_progress(bk_thread_t *thr, bk_thread_progress_cb cb, void *opaque);

/* A task of a generation that a move replaces drained: it read every passthrough task's
 * barrier, and the commit after it went through (docs/repartitioning.md). Told once per
 * task and opening, on the stream thread. Call before tasks are added. */
typedef void (*bk_thread_drained_cb)(void *opaque, int32_t task);
void bk_thread_set_drained(bk_thread_t *thr, bk_thread_drained_cb cb, void *opaque);

/* Cold bootstrap, the active's side (docs/bootstrap.md): a snapshot asked for is made by the
 * thread right after its next commit (which it then does at once); engine/snapshot.h has
 * the request's answer. */
/* Asks for a snapshot of task `id` (answered with an error if this thread does not run it):
 * 0, or -1 if BK_SNAPSHOT_REQUESTS are waiting. @locality any thread */
int bk_thread_request_snapshot(bk_thread_t *thr, int32_t id, const char *req);
/* A snapshot made (or failed): 1 and *out filled, or 0. @locality any thread */
int bk_thread_take_snapshot(bk_thread_t *thr, bk_snapshot_made_t *out);

/* The recovery order's archive step (docs/state.md, replica/archive.h): when set, a task
 * whose changelog no longer holds what its state needs (its head deleted past the store's
 * checkpoint, or a fresh store's changelog not starting at 0) is handed to cb with its DB
 * closed: 1 it installed a snapshot in task_dir (the task replays the tail from there), 0
 * none would do (`what` says why: the task's thread stops, naming the lost offsets), -1
 * failed (err). Without it such a task replays what is left, saying how much is lost. Set it
 * before tasks are added. */
typedef int (*bk_thread_recover_cb)(void *opaque, const char *task, const char *task_dir,
                                    char *const *changelogs, const int64_t *lo, int n,
                                    char *what, size_t what_size, char *err, size_t err_size);
void bk_thread_set_recover(bk_thread_t *thr, bk_thread_recover_cb cb, void *opaque);

/* Exactly-once: the node's incarnation (cluster/member.h), which the thread's transactional
 * id names (engine/fence.h); 0 outside a cluster. Set before start, and again when the node
 * rejoins its app as a new incarnation: the thread then takes a producer of the new id
 * before it opens another task (a thread whose tasks still run starts them again from
 * their last commit). @locality any thread */
void bk_thread_set_instance(bk_thread_t *thr, uint64_t instance);

/* DBs come from this pool (taskdb.h) and go back to it after a clean final commit; call
 * before bk_thread_start. Without one they are opened and closed. */
struct bk_taskdb_pool_s;
void bk_thread_set_pool(bk_thread_t *thr, struct bk_taskdb_pool_s *pool);
/* The node's live counters this thread keeps (livestats.h); NULL: none. Before start. */
struct bk_livestats_s;
void bk_thread_set_live(bk_thread_t *thr, struct bk_livestats_s *live);
int bk_thread_start(bk_thread_t *thr);
/* Waits for the thread to end; returns 0 if it ended cleanly. */
int bk_thread_join(bk_thread_t *thr, bk_thread_stats_t *stats);
/* True once the thread has stopped by itself or after a stop request. */
int bk_thread_done(const bk_thread_t *thr);
void bk_thread_destroy(bk_thread_t *thr);

#endif
