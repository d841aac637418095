/* node_moves.c - the leader's check of a move, and the plan following the moves
 * (node_moves.h). */
#include "node/node_moves.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "engine/kafka.h"
#include "engine/topics.h"

#define MAX_TASKS 4096 /* a generation's task count at most: one key group each */

/* The integer after "key=" in text, or -1. */
static long word_int(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, ' ')) {
        while (*p == ' ') {
            p++;
        }
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *end;
            long v = strtol(p + kl + 1, &end, 10);
            return end > p + kl + 1 && (*end == ' ' || *end == '\0') && v >= 0 ? v : -1;
        }
    }
    return -1;
}

int bk_node_moves_tasks_of(const bk_plan_t *plan, int sub)
{
    int nsubs = plan->nsubs, best = 0, tasks = 0;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *x = &plan->subs[s];
        if (x->of == sub && !x->passthrough && x->generation > best) {
            best = x->generation;
            tasks = x->partitions;
        }
    }
    return tasks;
}

/* 1 (and why) while the latest move of subtopology `sub` is under way: a task of the
 * generation it replaces has not drained. */
static int under_way(const bk_plan_t *plan, const bk_member_view_t *view, int sub, char *why,
                     size_t size)
{
    int g = bk_plan_latest_generation(plan, sub), prev, first, n, drained = 0;
    if (g < 1 || (prev = bk_plan_prev_generation(plan, bk_plan_generation_sub(plan, sub, g))) < 0) {
        return 0;
    }
    first = bk_plan_first_task(plan, prev);
    n = plan->subs[prev].partitions;
    for (int i = 0; i < view->ndrained; i++) {
        drained += view->drained[i] >= first && view->drained[i] < first + n;
    }
    if (drained == n) {
        return 0;
    }
    snprintf(why, size,
             "the move of subtopology %d to %d tasks is under way (%d of the %d "
             "tasks it replaces have drained)",
             sub, plan->subs[bk_plan_generation_sub(plan, sub, g)].partitions, drained, n);
    return 1;
}

void bk_node_moves_on_note(const bk_plan_t *plan, bk_member_t *member, const bk_member_view_t *view,
                           const bk_member_note_t *note)
{
    long sub = word_int(note->text, "sub"), tasks = word_int(note->text, "tasks");
    int now, ntasks, cap, gen0;
    char why[512] = "";

    if (!view->is_leader) {
        return;
    }
    bk_plan_task_table(plan, &ntasks, &cap);
    if (sub >= 0 && sub < plan->nsubs && plan->subs[sub].of != sub &&
        !plan->subs[sub].passthrough) {
        /* a later generation's index, as its tasks' names show it (task 5_1): the
         * subtopology it is a generation of is meant */
        bk_log_info("repartition from %s: subtopology %ld is generation %d of subtopology %d: "
                    "moving that",
                    note->from, sub, plan->subs[sub].generation, plan->subs[sub].of);
        sub = plan->subs[sub].of;
    }
    now = sub >= 0 && sub < plan->nsubs ? bk_node_moves_tasks_of(plan, (int)sub) : 0;
    /* generation 0 (by input partition) moves to generation 1, with as many tasks too:
     * then its keys are owned by key group and its input may grow */
    gen0 = now == 0 && sub >= 0 && sub < plan->nsubs;
    if (gen0) {
        now = plan->subs[sub].partitions;
    }
    if (sub < 0 || tasks < 0) {
        snprintf(why, sizeof(why), "'%.200s' is not \"sub=S tasks=N\"", note->text);
    } else if (sub < plan->nsubs && plan->subs[sub].passthrough) {
        snprintf(why, sizeof(why),
                 "subtopology %ld is the passthrough that feeds subtopology "
                 "%d's generations: move %d (--subtopology %d)",
                 sub, plan->subs[sub].of, plan->subs[sub].of, plan->subs[sub].of);
    } else if (sub >= plan->nsubs || plan->subs[sub].of != sub) {
        snprintf(why, sizeof(why),
                 "the topology has no subtopology %ld (beck describe lists "
                 "them)",
                 sub);
    } else if (tasks < 1 || tasks > MAX_TASKS) {
        snprintf(why, sizeof(why), "%ld tasks: 1 to %d can be run", tasks, MAX_TASKS);
    } else if (tasks == now && !gen0) {
        snprintf(why, sizeof(why), "subtopology %ld runs %d tasks already", sub, now);
    } else if (under_way(plan, view, (int)sub, why, sizeof(why))) {
        /* one move of a subtopology at a time: its passthrough writes barriers to the
         * generation it leaves, which must be the one that drains */
    } else if (ntasks + tasks > cap) {
        snprintf(why, sizeof(why),
                 "%ld more tasks do not fit in the %d this app's task table "
                 "has room for",
                 tasks, cap);
    } else if (bk_member_add_generation(member, (int32_t)sub, (int32_t)tasks, view->ngenerations) !=
               0) {
        snprintf(why, sizeof(why), "the move could not be written to the control topic");
    }
    if (why[0]) {
        bk_log_warn("repartition from %s: %s: refused", note->from, why);
        /* the command waits for the move: it says why there is none */
        bk_member_note(member, note->from, BK_NODE_MOVES_REFUSED, why);
        return;
    }
    bk_log_info("repartition from %s: subtopology %ld moves from %d to %ld tasks (move %d)",
                note->from, sub, now, tasks, (int)view->ngenerations + 1);
}

int bk_node_moves_follow(bk_plan_t *plan, const bk_conf_t *conf, lua_State *L,
                         const char *generations, char *err, size_t errsz)
{
    int from_topic = plan->ntopics, from_store = plan->nstores, rc;
    const char *have = plan->generations ? plan->generations : "";
    rd_kafka_t *admin;

    if (!generations || strcmp(generations, have) == 0) {
        return 0;
    }
    if (bk_plan_grow(plan, conf, L, generations, err, errsz) != 0) {
        return -1;
    }
    admin = bk_kafka_new(conf, BK_KAFKA_ADMIN, "beck-admin", NULL, NULL, err, errsz);
    if (!admin) {
        return -1;
    }
    rc = bk_topics_ensure_grown(plan, conf, admin, from_topic, from_store, err, errsz);
    rd_kafka_destroy(admin);
    if (rc == 0) {
        /* the threads make their handles of them; the passthroughs may switch */
        bk_plan_set_ready(plan, plan->ntopics, plan->nstores);
    }
    return rc;
}

void bk_node_moves_origins(const bk_plan_t *plan, int32_t *origin, int from, int to)
{
    int n, cap;
    const bk_task_id_t *table = bk_plan_task_table(plan, &n, &cap);
    for (int t = from; t < to; t++) {
        const bk_plan_sub_t *sub = t < n ? &plan->subs[table[t].sub] : NULL;
        int prev = sub ? bk_plan_prev_generation(plan, table[t].sub) : -1;
        int lo, hi, best = -1, most = 0, np;
        origin[t] = -1;
        if (prev < 0) {
            continue;
        }
        np = plan->subs[prev].partitions;
        bk_hash_group_range(table[t].partition, sub->partitions, &lo, &hi);
        if (plan->subs[prev].generation == 0 && np > 0) {
            /* every task of generation 0 may hold keys of every group: spread */
            origin[t] = bk_plan_first_task(plan, prev) + table[t].partition % np;
            continue;
        }
        for (int p = 0; p < np; p++) {
            int plo, phi, over;
            bk_hash_group_range(p, np, &plo, &phi);
            over = (phi < hi ? phi : hi) - (plo > lo ? plo : lo);
            if (over > most) {
                most = over;
                best = p;
            }
        }
        if (best >= 0) {
            origin[t] = bk_plan_first_task(plan, prev) + best;
        }
    }
}

static int drained_of(const bk_member_view_t *view, int first, int n)
{
    int d = 0;
    for (int i = 0; i < view->ndrained; i++) {
        d += view->drained[i] >= first && view->drained[i] < first + n;
    }
    return d;
}

void bk_node_moves_progress(const bk_plan_t *plan, const bk_member_view_t *view, bk_hooks_t *hooks,
                            int32_t *told)
{
    int nsubs = plan->nsubs;
    for (int s = 0; s < nsubs; s++) {
        const bk_plan_sub_t *sub = &plan->subs[s];
        int r = bk_plan_prev_generation(plan, s);
        int n, d;
        bk_hooks_repartition_t p;
        if (r < 0) {
            continue;
        }
        n = plan->subs[r].partitions;
        d = drained_of(view, bk_plan_first_task(plan, r), n);
        p = (bk_hooks_repartition_t){"moved", sub->of, sub->generation, sub->partitions, n, d};
        if (told[s] < 0) {
            bk_log_info("move of subtopology %d to %d tasks (generation %d, from %d tasks): "
                        "%d of them drained",
                        sub->of, sub->partitions, sub->generation, n, d);
            bk_hooks_repartition(hooks, &p);
            told[s] = 0;
        }
        if (d > told[s]) {
            p.phase = "drained";
            bk_hooks_repartition(hooks, &p);
            if (d == n) {
                bk_log_info("move of subtopology %d to %d tasks (generation %d) complete: "
                            "the %d tasks it replaced have drained",
                            sub->of, sub->partitions, sub->generation, n);
                p.phase = "complete";
                bk_hooks_repartition(hooks, &p);
            }
            told[s] = d;
        }
    }
}
