/* build.h - a later generation's task built from changelogs (docs/repartitioning.md,
 * Building a task): the keys of its key groups, read from the changelogs of every
 * generation before it, oldest first, filtered by key group. Its own changelog is then
 * replayed (or tailed) on top, as any task's is.
 *
 * Two callers build the same state from the same records: an active task's opening
 * (engine/thread_build.c, which first takes what drained checkpoints on its node hold) and a
 * standby replica of it (replica/standby.c), so that a failover to the standby replays only
 * the tail of the task's own changelog. Both build only once every task of the generation
 * before whose key groups overlap the task's has drained: their changelogs end there.
 * @locality the caller's thread; uses the consumer given, which it leaves with no
 * assignment. */
#ifndef BK_BUILD_H
#define BK_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>

#include "base/task.h"
#include "engine/plan.h"
#include "engine/restore.h"
#include "engine/store.h"

typedef struct {
    const bk_plan_t *plan;
    rd_kafka_t *consumer;
    bk_task_id_t task;
    bk_store_t *const *store_of; /* [plan->nstores] the task's open stores by plan index */
    /* [partitions of the generation before] 1: that task's key groups came from its drained
     * checkpoint (not read from changelogs), or NULL: none did */
    const uint8_t *taken;
    const char *name; /* the task's name, for messages */
    atomic_int *stop;
    bk_restore_progress_cb cb; /* each replay's progress (restore.h), or NULL */
    void *opaque;
} bk_build_in_t;

/* Replays the changelogs into the task's stores and rebases them (changelog.h), so that its
 * own changelog follows from its start. Fills text ("generation G of subtopology S, key
 * groups [lo, hi) g_p[lo,hi) ...") and *applied. 0, or -1 with err. */
int bk_build_replay(const bk_build_in_t *in, char *text, size_t size, int64_t *applied,
                    char *err, size_t errsz);

/* The changelog partitions a build of `task` reads (those of the generation-before tasks not
 * in `taken`): fills topics/parts (room for max) and returns how many, or -1 if more; with
 * topics NULL, only counts them. */
int bk_build_sources(const bk_plan_t *plan, bk_task_id_t task, const uint8_t *taken,
                     const char **topics, int32_t *parts, int max);

#endif
