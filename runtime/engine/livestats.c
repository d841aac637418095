/* livestats.c - a node's live counters (livestats.h). */
#include "engine/livestats.h"

#include <stdlib.h>

bk_livestats_t *bk_livestats_new(int ntasks, int nthreads, int nstores)
{
    bk_livestats_t *s = calloc(1, sizeof(*s));
    if (!s) {
        return NULL;
    }
    s->ntasks = ntasks;
    s->nthreads = nthreads;
    s->nstores = nstores;
    s->task = calloc((size_t)ntasks + 1, sizeof(*s->task));
    s->thread = calloc((size_t)nthreads + 1, sizeof(*s->thread));
    s->late = calloc((size_t)ntasks * (size_t)nstores + 1, sizeof(*s->late));
    if (!s->task || !s->thread || !s->late) {
        bk_livestats_destroy(s);
        return NULL;
    }
    for (int t = 0; t < ntasks; t++) {
        atomic_init(&s->task[t].lag, -1);
        atomic_init(&s->task[t].e2e_ms, -1);
        atomic_init(&s->task[t].restore_done, -1);
        atomic_init(&s->task[t].restore_total, -1);
    }
    return s;
}

void bk_livestats_destroy(bk_livestats_t *s)
{
    if (s) {
        free(s->task);
        free(s->thread);
        free(s->late);
        free(s);
    }
}
