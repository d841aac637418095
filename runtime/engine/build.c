/* build.c - a later generation's task built from changelogs (build.h). */
#include "engine/build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "engine/changelog.h"

/* The store of subtopology `sub` that copies (or is) the store `root`, -1: none. */
static int store_in(const bk_plan_t *plan, int sub, int root)
{
    for (int i = 0; i < plan->nstores; i++) {
        if (plan->stores[i].sub == sub && (i == root || plan->stores[i].of_store == root)) {
            return i;
        }
    }
    return -1;
}

/* One read of a build: the changelogs of generation subtopology gsub's task p, for key
 * groups [lo, hi). */
typedef int (*visit_fn)(void *opaque, int gsub, int p, int lo, int hi);

/* Every read of a build, in order. The overlapping tasks of the generation before that are
 * not taken: their groups from the changelogs of every generation before, oldest first (a
 * later one's changelog holds only what its tasks wrote after they were built, and each
 * key's writes of one generation all come before the next one's). From generation 0 when
 * there is one (a move from input partitions), every partition of its changelogs may hold
 * keys of these groups; but when it is the generation before, those of the other tasks come
 * in their own turn (or are in their checkpoints): its task p's alone. 0, the first
 * visit's non-zero, or -2 when a generation is missing. */
static int each_read(const bk_plan_t *plan, bk_task_id_t task, const uint8_t *taken,
                     visit_fn visit, void *opaque)
{
    const bk_plan_sub_t *sub = &plan->subs[task.sub];
    int prev = bk_plan_prev_generation(plan, task.sub), lo, hi, rc;
    if (prev < 0) {
        return -2;
    }
    bk_hash_group_range(task.partition, sub->partitions, &lo, &hi);
    for (int p = 0; p < plan->subs[prev].partitions; p++) {
        int plo, phi, rlo, rhi;
        bk_plan_task_groups(plan, prev, p, &plo, &phi);
        rlo = plo > lo ? plo : lo;
        rhi = phi < hi ? phi : hi;
        if (rlo >= rhi || (taken && taken[p])) {
            continue;
        }
        for (int g = bk_plan_generation_sub(plan, sub->of, 0) >= 0 ? 0 : 1; g < sub->generation;
             g++) {
            int gsub = bk_plan_generation_sub(plan, sub->of, g);
            if (gsub < 0) {
                return -2;
            }
            for (int q = 0; q < plan->subs[gsub].partitions; q++) {
                int qlo, qhi;
                bk_plan_task_groups(plan, gsub, q, &qlo, &qhi);
                if (qhi <= rlo || qlo >= rhi || (gsub == prev && g == 0 && q != p)) {
                    continue;
                }
                if ((rc = visit(opaque, gsub, q, rlo, rhi)) != 0) {
                    return rc;
                }
            }
        }
    }
    return 0;
}

typedef struct {
    const bk_build_in_t *in;
    bk_restore_item_t *items;
    char *text;
    size_t size, tlen;
    int64_t applied;
    char *err;
    size_t errsz;
} replay_t;

/* Counts what a replay applied (its last progress report), and passes the report on. */
static void count_applied(void *opaque, const bk_restore_progress_t *p)
{
    replay_t *r = opaque;
    if (p->done) {
        r->applied += p->records;
    }
    if (r->in->cb) {
        bk_restore_progress_t q = *p;
        q.records += r->applied - (p->done ? p->records : 0);
        r->in->cb(r->in->opaque, &q);
    }
}

/* Replays into the task's stores the keys of groups [lo, hi) from the changelogs of
 * generation subtopology gsub's task p (a store settles its records by the markers of one
 * changelog partition, changelog.h). */
static int replay_one(void *opaque, int gsub, int p, int lo, int hi)
{
    replay_t *r = opaque;
    const bk_plan_t *plan = r->in->plan;
    int n = 0;
    for (int i = 0; i < plan->nstores; i++) {
        bk_store_t *st = r->in->store_of[i];
        int root = plan->stores[i].of_store >= 0 ? plan->stores[i].of_store : i, from;
        if (!st || !plan->stores[i].logged || (from = store_in(plan, gsub, root)) < 0) {
            continue;
        }
        r->items[n++] =
            (bk_restore_item_t){st, plan->stores[from].changelog, p, r->in->name, lo, hi};
    }
    if (bk_restore_run(r->in->consumer, r->items, n, count_applied, r, r->in->stop, r->err,
                       r->errsz) != 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        bk_changelog_rebase(r->items[i].st);
    }
    if (r->tlen < r->size) {
        r->tlen += (size_t)snprintf(r->text + r->tlen, r->size - r->tlen, " %d_%d[%d,%d)", gsub,
                                    p, lo, hi);
    }
    return 0;
}

int bk_build_replay(const bk_build_in_t *in, char *text, size_t size, int64_t *applied,
                    char *err, size_t errsz)
{
    const bk_plan_sub_t *sub = &in->plan->subs[in->task.sub];
    replay_t r = {in, NULL, text, size, 0, 0, err, errsz};
    int lo, hi, rc;
    bk_hash_group_range(in->task.partition, sub->partitions, &lo, &hi);
    r.items = calloc((size_t)in->plan->nstores + 1, sizeof(*r.items));
    if (!r.items) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    r.tlen = (size_t)snprintf(text, size, "generation %d of subtopology %d, key groups [%d, %d)",
                              sub->generation, sub->of, lo, hi);
    rc = each_read(in->plan, in->task, in->taken, replay_one, &r);
    if (rc == -2) {
        snprintf(err, errsz, "task %s: subtopology %d lacks a generation before %d", in->name,
                 sub->of, sub->generation);
    }
    free(r.items);
    *applied = r.applied;
    return rc == 0 ? 0 : -1;
}

typedef struct {
    const bk_plan_t *plan;
    const char **topics;
    int32_t *parts;
    int n, max;
} sources_t;

static int list_one(void *opaque, int gsub, int p, int lo, int hi)
{
    sources_t *s = opaque;
    (void)lo;
    (void)hi;
    for (int i = 0; i < s->plan->nstores; i++) {
        if (s->plan->stores[i].sub != gsub || !s->plan->stores[i].logged) {
            continue;
        }
        if (!s->topics) {
            s->n++; /* counting */
            continue;
        }
        if (s->n >= s->max) {
            return -1;
        }
        s->topics[s->n] = s->plan->stores[i].changelog;
        s->parts[s->n++] = p;
    }
    return 0;
}

int bk_build_sources(const bk_plan_t *plan, bk_task_id_t task, const uint8_t *taken,
                     const char **topics, int32_t *parts, int max)
{
    sources_t s = {plan, topics, parts, 0, max};
    return each_read(plan, task, taken, list_one, &s) == 0 ? s.n : -1;
}
