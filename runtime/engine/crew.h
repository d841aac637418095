/* crew.h - the stream threads (thread.h) that run one set of a node's tasks. A new set of
 * tasks means a new crew: the old one commits and closes first. Owned by the node's main
 * thread; the threads themselves share only the crew's flags. */
#ifndef BK_CREW_H
#define BK_CREW_H

#include <stdint.h>

#include "base/conf.h"
#include "base/task.h"
#include "engine/plan.h"
#include "engine/taskdb.h"
#include "engine/thread.h"

typedef struct bk_crew_s {
    bk_node_flags_t flags;
    bk_thread_t **threads;
    int nthreads, ntasks;
    bk_thread_stats_t total; /* of the threads stopped so far */
} bk_crew_t;

/* In a cluster: the epoch the tasks run in, each task's index in the app's task table,
 * and who hears each task's progress after a commit (on its stream thread). */
typedef struct bk_crew_cluster_s {
    uint64_t epoch;
    const int32_t *ids; /* [ntasks] */
    bk_thread_progress_cb progress;
    void *opaque;
} bk_crew_cluster_t;

/* Deals `tasks` round-robin (each thread gets tasks of every subtopology) to up to
 * --threads threads and starts them. cl NULL: a node alone (task i's id is i). pool may be
 * NULL (each thread opens its own DBs). A thread that cannot start sets flags.failed. */
void bk_crew_start(bk_crew_t *crew, const bk_plan_t *plan, const bk_conf_t *conf,
                   const bk_task_id_t *tasks, int ntasks, const bk_crew_cluster_t *cl,
                   bk_taskdb_pool_t *pool);
/* How many of its threads have ended (by themselves or asked to). */
int bk_crew_done(const bk_crew_t *crew);
/* Asks every thread to finish its batch, commit and close, waits, and adds their figures
 * to crew->total. Returns 1 if any failed. */
int bk_crew_stop(bk_crew_t *crew);
/* a += b */
void bk_crew_add_stats(bk_thread_stats_t *a, const bk_thread_stats_t *b);

#endif
