/* livestats.h - a node's live counters for /metrics (docs/queries.md): per task (records
 * in, out, skipped, dead-lettered, its input lag at the last commit, the age of its latest
 * record; records dropped as late, per store) and per stream thread (commits and their time, the
 * record cache's hits and misses). Counters live in C so that any thread reads them, not in a Lua
 * VM.
 *
 * Each task's counters have one writer at a time, the stream thread that runs the task (a
 * task changes threads through the thread's mailbox, under a mutex), so a writer adds with
 * a plain load and store (bk_livestats_add: no locked instruction on the record path);
 * readers load them relaxed and may see a figure a batch old. Indexed by the app's task
 * table (a task's slot on its thread). @locality writers: the stream threads; readers: any */
#ifndef BK_LIVESTATS_H
#define BK_LIVESTATS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct bk_livestats_task_s {
    _Atomic uint64_t in, out, skipped, dlq;
    _Atomic int64_t lag;    /* input records behind the partitions' ends at its last commit, -1 */
    _Atomic int64_t e2e_ms; /* wall clock minus the timestamp of its latest record, when done */
    /* while it opens on this node: changelog records restored of those to restore (the
     * restore of its thread's opening job, which may hold several tasks); total -1: not
     * restoring */
    _Atomic int64_t restore_done, restore_total;
    /* its life on this node (engine/tasklife.h): the state, and since when (wall ms) */
    _Atomic int64_t life, life_since_ms;
    _Atomic int64_t sb_life, sb_life_since_ms; /* ... and its standby replica's here */
} bk_livestats_task_t;

typedef struct bk_livestats_thread_s {
    _Atomic uint64_t commits, commit_ms; /* commits and the ms they took in all */
    /* the record cache's gets: answered by it, sent on to the stores (as of the last commit) */
    _Atomic uint64_t cache_hits, cache_misses;
    _Atomic int64_t last_commit_ms;
} bk_livestats_thread_t;

typedef struct bk_livestats_s {
    int ntasks, nthreads, nstores;
    bk_livestats_task_t *task;     /* [ntasks] */
    bk_livestats_thread_t *thread; /* [nthreads] */
    /* [ntasks * nstores] records a task dropped as late, by the store of the window or join
     * they came too late for (task t, store s at t * nstores + s): Kafka Streams' dropped
     * records sensor, by store */
    _Atomic uint64_t *late;
} bk_livestats_t;

/* NULL without memory. nstores: the plan's room for stores. */
bk_livestats_t *bk_livestats_new(int ntasks, int nthreads, int nstores);
void bk_livestats_destroy(bk_livestats_t *s);

/* The one writer's add and set. */
static inline void bk_livestats_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline void bk_livestats_set(_Atomic int64_t *g, int64_t v)
{
    atomic_store_explicit(g, v, memory_order_relaxed);
}

#endif
