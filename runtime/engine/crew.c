/* crew.c - a node's stream threads and the tasks on them (crew.h). */
#include "engine/crew.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/skips.h"

void bk_crew_start(bk_crew_t *crew, const bk_plan_t *plan, const bk_conf_t *conf, int nthreads,
                   uint64_t instance, bk_thread_progress_cb progress, void *opaque,
                   bk_taskdb_pool_t *pool, bk_livestats_t *live)
{
    memset(crew, 0, sizeof(*crew));
    atomic_init(&crew->flags.lease_until, INT64_MAX); /* until a member publishes one */
    crew->flags.skips = bk_skips_new(conf, plan->id);
    {
        int n;
        crew->tasks = bk_plan_task_table(plan, &n, &crew->cap); /* made by the node */
    }
    crew->owner = malloc(((size_t)crew->cap + 1) * sizeof(int));
    for (int i = 0; crew->owner && i < crew->cap; i++) {
        crew->owner[i] = -1;
    }
    crew->threads = calloc((size_t)nthreads + 1, sizeof(*crew->threads));
    crew->load = calloc((size_t)nthreads + 1, sizeof(int));
    crew->tickets = calloc((size_t)nthreads + 1, sizeof(uint64_t));
    for (int t = 0; t < nthreads; t++) {
        crew->threads[t] = bk_thread_new(t, plan, conf, &crew->flags);
        bk_thread_set_pool(crew->threads[t], pool);
        bk_thread_set_live(crew->threads[t], live);
        bk_thread_set_progress(crew->threads[t], progress, opaque);
        bk_thread_set_instance(crew->threads[t], instance);
        if (bk_thread_start(crew->threads[t]) != 0) {
            bk_log_error("cannot start thread %d", t);
            crew->flags.stop = crew->flags.failed = 1;
            bk_thread_destroy(crew->threads[t]);
            break;
        }
        crew->nthreads = t + 1;
    }
}

void bk_crew_set_instance(bk_crew_t *crew, uint64_t instance)
{
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_set_instance(crew->threads[t], instance);
    }
}

void bk_crew_set_drained(bk_crew_t *crew, bk_thread_drained_cb cb, void *opaque)
{
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_set_drained(crew->threads[t], cb, opaque);
    }
}

void bk_crew_set_recover(bk_crew_t *crew, bk_thread_recover_cb cb, void *opaque)
{
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_set_recover(crew->threads[t], cb, opaque);
    }
}

static int least_loaded(const bk_crew_t *crew)
{
    int best = 0;
    for (int t = 1; t < crew->nthreads; t++) {
        if (crew->load[t] < crew->load[best]) {
            best = t;
        }
    }
    return best;
}

static int most_loaded(const bk_crew_t *crew)
{
    int best = 0;
    for (int t = 1; t < crew->nthreads; t++) {
        if (crew->load[t] > crew->load[best]) {
            best = t;
        }
    }
    return best;
}

/* The tasks of thread `from` that moves to `to` to even them out: the newest given. */
static int pick_task(const bk_crew_t *crew, int from)
{
    for (int i = crew->cap - 1; i >= 0; i--) {
        if (crew->owner[i] == from) {
            return i;
        }
    }
    return -1;
}

int bk_crew_add(bk_crew_t *crew, uint64_t epoch, const int32_t *ids, int n)
{
    if (crew->nthreads == 0) {
        return n > 0;
    }
    /* one at a time to the least loaded: in the app's order this deals each thread tasks
     * of every subtopology, as round-robin did */
    for (int i = 0; i < n; i++) {
        int t;
        if (ids[i] < 0 || ids[i] >= crew->cap || crew->owner[ids[i]] >= 0) {
            continue;
        }
        t = least_loaded(crew);
        crew->owner[ids[i]] = t;
        crew->load[t]++;
        crew->ntasks++;
        bk_thread_add_tasks(crew->threads[t], &ids[i], 1, epoch);
    }
    for (;;) {
        int lo = least_loaded(crew), hi = most_loaded(crew), task;
        if (crew->load[hi] - crew->load[lo] <= 1 || (task = pick_task(crew, hi)) < 0) {
            break;
        }
        /* a move within the node: only the moved task pauses */
        if (bk_thread_wait_removed(crew->threads[hi],
                                   bk_thread_remove_tasks(crew->threads[hi], &task, 1)) != 0) {
            return 1;
        }
        crew->owner[task] = lo;
        crew->load[hi]--;
        crew->load[lo]++;
        bk_thread_add_tasks(crew->threads[lo], &task, 1, epoch);
        bk_log_info("task %s moved from stream-%d to stream-%d to even the threads out",
                    BK_TASK_NAME(crew->tasks[task]), hi, lo);
    }
    return 0;
}

int bk_crew_remove(bk_crew_t *crew, const int32_t *ids, int n)
{
    int32_t *mine = calloc((size_t)n + 1, sizeof(int32_t));
    int failed = 0;

    if (!mine) {
        return 1;
    }
    for (int t = 0; t < crew->nthreads; t++) {
        int k = 0;
        crew->tickets[t] = 0;
        for (int i = 0; i < n; i++) {
            if (ids[i] >= 0 && ids[i] < crew->cap && crew->owner[ids[i]] == t) {
                mine[k++] = ids[i];
                crew->owner[ids[i]] = -1;
            }
        }
        if (k > 0) {
            crew->tickets[t] = bk_thread_remove_tasks(crew->threads[t], mine, k);
            crew->load[t] -= k;
            crew->ntasks -= k;
        }
    }
    for (int t = 0; t < crew->nthreads; t++) {
        if (crew->tickets[t] && bk_thread_wait_removed(crew->threads[t], crew->tickets[t]) != 0) {
            failed = 1;
        }
    }
    free(mine);
    return failed;
}

int bk_crew_done(const bk_crew_t *crew)
{
    int done = 0;
    for (int t = 0; t < crew->nthreads; t++) {
        done += bk_thread_done(crew->threads[t]);
    }
    return done;
}

int bk_crew_request_snapshot(bk_crew_t *crew, int32_t task, const char *req)
{
    if (task < 0 || task >= crew->cap || crew->owner[task] < 0) {
        return -1;
    }
    return bk_thread_request_snapshot(crew->threads[crew->owner[task]], task, req);
}

int bk_crew_take_snapshot(bk_crew_t *crew, bk_snapshot_made_t *out)
{
    for (int t = 0; t < crew->nthreads; t++) {
        if (bk_thread_take_snapshot(crew->threads[t], out)) {
            return 1;
        }
    }
    return 0;
}

void bk_crew_add_stats(bk_thread_stats_t *a, const bk_thread_stats_t *b)
{
    a->in += b->in;
    a->out += b->out;
    a->skipped += b->skipped;
    a->dlq += b->dlq;
}

void bk_crew_ask_stop(bk_crew_t *crew)
{
    if (atomic_load(&crew->flags.stop_by) == 0) {
        atomic_store(&crew->flags.stop_by, bk_clock_mono_ms() + BK_NODE_STOP_WAIT_MS);
    }
    crew->flags.stop = 1;
}

int bk_crew_stop(bk_crew_t *crew)
{
    bk_crew_ask_stop(crew);
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_stats_t st;
        bk_thread_join(crew->threads[t], &st);
        bk_crew_add_stats(&crew->total, &st);
        bk_thread_destroy(crew->threads[t]);
    }
    free(crew->threads);
    free(crew->owner);
    free(crew->load);
    free(crew->tickets);
    bk_skips_destroy(crew->flags.skips);
    crew->flags.skips = NULL;
    crew->threads = NULL;
    crew->tasks = NULL;
    crew->owner = crew->load = NULL;
    crew->tickets = NULL;
    crew->nthreads = crew->ntasks = 0;
    return crew->flags.failed;
}
