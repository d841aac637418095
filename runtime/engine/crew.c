/* crew.c - a node's stream threads for one set of tasks (crew.h). */
#include "engine/crew.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

void bk_crew_start(bk_crew_t *crew, const bk_plan_t *plan, const bk_conf_t *conf,
                   const bk_task_id_t *tasks, int ntasks, const bk_crew_cluster_t *cl,
                   bk_taskdb_pool_t *pool)
{
    int nthreads = (int)bk_conf_int(conf, BK_CONF_THREADS);
    bk_task_id_t *mine = calloc((size_t)ntasks + 1, sizeof(*mine));
    int32_t *ids = calloc((size_t)ntasks + 1, sizeof(*ids));

    memset(crew, 0, sizeof(*crew));
    if (nthreads > ntasks) {
        if (ntasks > 0 && !cl) {
            bk_log_warn("%d threads for %d tasks: running %d threads", nthreads, ntasks, ntasks);
        }
        nthreads = ntasks;
    }
    crew->ntasks = ntasks;
    crew->threads = calloc((size_t)nthreads + 1, sizeof(*crew->threads));
    for (int t = 0; t < nthreads; t++) {
        int n = 0;
        for (int i = t; i < ntasks; i += nthreads) {
            ids[n] = cl ? cl->ids[i] : i;
            mine[n++] = tasks[i];
        }
        crew->threads[t] = bk_thread_new(t, plan, conf, &crew->flags, mine, n);
        bk_thread_set_pool(crew->threads[t], pool);
        if (cl) {
            bk_thread_set_cluster(crew->threads[t], cl->epoch, ids, cl->progress, cl->opaque);
        }
        if (bk_thread_start(crew->threads[t]) != 0) {
            bk_log_error("cannot start thread %d", t);
            crew->flags.stop = crew->flags.failed = 1;
            bk_thread_destroy(crew->threads[t]);
            break;
        }
        crew->nthreads = t + 1;
    }
    free(mine);
    free(ids);
    if (!cl || ntasks > 0) {
        bk_log_info("app %s: %d task(s) on %d thread(s)", plan->id, ntasks, crew->nthreads);
    }
}

int bk_crew_done(const bk_crew_t *crew)
{
    int done = 0;
    for (int t = 0; t < crew->nthreads; t++) {
        done += bk_thread_done(crew->threads[t]);
    }
    return done;
}

void bk_crew_add_stats(bk_thread_stats_t *a, const bk_thread_stats_t *b)
{
    a->in += b->in;
    a->out += b->out;
    a->skipped += b->skipped;
    a->dlq += b->dlq;
}

int bk_crew_stop(bk_crew_t *crew)
{
    crew->flags.stop = 1;
    for (int t = 0; t < crew->nthreads; t++) {
        bk_thread_stats_t st;
        bk_thread_join(crew->threads[t], &st);
        bk_crew_add_stats(&crew->total, &st);
        bk_thread_destroy(crew->threads[t]);
    }
    free(crew->threads);
    crew->threads = NULL;
    crew->nthreads = 0;
    return crew->flags.failed;
}
