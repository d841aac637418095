/* crew.h - a node's stream threads (thread.h) and the tasks it runs on them. The threads
 * start with the node and stop with it; tasks come and go on them in place: a task that
 * stays is never stopped, closed or reopened because another one moved. Owned by the
 * node's main thread; the threads themselves share only the crew's flags. */
#ifndef BK_CREW_H
#define BK_CREW_H

#include <stdint.h>

#include "base/conf.h"
#include "base/task.h"
#include "engine/livestats.h"
#include "engine/plan.h"
#include "engine/snapshot.h"
#include "engine/taskdb.h"
#include "engine/thread.h"

typedef struct bk_crew_s {
    bk_node_flags_t flags;
    bk_thread_t **threads;
    int nthreads;
    int ntasks;              /* tasks given to the threads */
    int cap;                 /* the app's task count */
    const bk_task_id_t *tasks; /* [cap] the plan's task table (it grows into its room) */
    int *owner;              /* [cap] the thread a task was given to, -1 */
    int *load;               /* [nthreads] tasks given to each thread */
    uint64_t *tickets;       /* [nthreads] scratch: removals asked for */
    bk_thread_stats_t total; /* of the threads stopped so far */
} bk_crew_t;

/* Starts nthreads threads with no tasks, their transactional ids of node incarnation
 * `instance` (exactly-once). progress (may be NULL) hears each task's next
 * input offset after a commit, on its stream thread. pool may be NULL (each thread opens
 * and closes its own DBs); live (may be NULL) gets the threads' live counters, nthreads of
 * them at least. A thread that cannot start sets flags.failed. */
/* Every thread's archive recovery (bk_thread_set_recover); before tasks are added. */
/* Who hears of a replaced generation's task that drained (bk_thread_set_drained); before
 * tasks are added. */
void bk_crew_set_drained(bk_crew_t *crew, bk_thread_drained_cb cb, void *opaque);
void bk_crew_set_recover(bk_crew_t *crew, bk_thread_recover_cb cb, void *opaque);

void bk_crew_start(bk_crew_t *crew, const bk_plan_t *plan, const bk_conf_t *conf, int nthreads,
                   uint64_t instance, bk_thread_progress_cb progress, void *opaque,
                   bk_taskdb_pool_t *pool, bk_livestats_t *live);
/* Exactly-once: the node's incarnation, which its threads' transactional ids name
 * (bk_thread_set_instance); `instance` of bk_crew_start is the first (0 outside a cluster). */
void bk_crew_set_instance(bk_crew_t *crew, uint64_t instance);
/* Gives tasks (indices into the app's task table) to the least loaded threads, from epoch
 * on; they open in the background. Then evens the threads out (a node's tasks spread over
 * its threads: a task moves from the most loaded to the least loaded thread while both
 * differ by more than one). Returns 1 if a thread failed. */
int bk_crew_add(bk_crew_t *crew, uint64_t epoch, const int32_t *ids, int n);
/* Takes tasks back and waits until each is closed, committed and its DB in the pool. Every
 * thread with tasks to give up does so at once. Returns 1 if a thread failed. */
int bk_crew_remove(bk_crew_t *crew, const int32_t *ids, int n);
/* Asks every thread to finish: a last commit, which waits for the brokers at most
 * BK_NODE_STOP_WAIT_MS from the first ask (thread.h). bk_crew_stop asks and joins. */
void bk_crew_ask_stop(bk_crew_t *crew);
/* How many of its threads have ended (by themselves or asked to). */
int bk_crew_done(const bk_crew_t *crew);
/* Cold bootstrap's active side: asks the thread running `task` for a snapshot (0, or -1),
 * and takes a snapshot made by any (1 and *out, or 0). */
int bk_crew_request_snapshot(bk_crew_t *crew, int32_t task, const char *req);
int bk_crew_take_snapshot(bk_crew_t *crew, bk_snapshot_made_t *out);
/* Asks every thread to finish its batch, commit and close, waits, and adds their figures
 * to crew->total. Returns 1 if any failed. */
int bk_crew_stop(bk_crew_t *crew);
/* a += b */
void bk_crew_add_stats(bk_thread_stats_t *a, const bk_thread_stats_t *b);

#endif
