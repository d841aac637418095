/* route.c - the query routing table (route.h). */
#include "query/route.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "engine/taskdb.h"
#include "query/jbuf.h"

typedef struct {
    char id[BK_MEMBER_MAX_ID + 1], endpoint[BK_MEMBER_MAX_ID + 1], rack[BK_MEMBER_MAX_ID + 1];
    int alive;
    int64_t last_ts; /* its latest heartbeat's time */
    uint64_t epoch;  /* the epoch it reported */
} node_t;

struct bk_route_s {
    const bk_plan_t *plan;
    char self[BK_MEMBER_MAX_ID + 1];
    /* the app's task table, shared with the plan: it grows with the moves (bk_plan_grow), so
     * the arrays below are sized by its room (cap) and read up to its count now */
    const bk_task_id_t *tasks;
    int cap;
    pthread_mutex_t lock;
    int alone;
    uint64_t epoch;
    node_t *nodes;
    int nnodes;
    /* [cap] the current epoch's active, -1; the node holding the task, which runs it while
     * a handoff is in progress. A holder may be stale: views change their version only for
     * changes of their own node's (member_view.c), so a handoff elsewhere does not update
     * this table; a stale holder says 503 and the next target is asked. */
    int32_t *run, *held;
    int32_t *standby; /* [cap * k] */
    int k;
    bk_member_progress_t *progress; /* the replicas' progress, as the heartbeats said, by task */
    int32_t nprogress;
    int32_t *prog_first; /* [cap + 1] task t's are [prog_first[t], [t + 1]) */
    int64_t log_time;
};

bk_route_t *bk_route_new(const bk_plan_t *plan, const char *self_id)
{
    bk_route_t *r = calloc(1, sizeof(*r));
    if (!r) {
        return NULL;
    }
    int n = 0;
    r->plan = plan;
    snprintf(r->self, sizeof(r->self), "%s", self_id ? self_id : "");
    r->tasks = bk_plan_task_table(plan, &n, &r->cap);
    if (r->cap < n) {
        r->cap = n;
    }
    r->run = calloc((size_t)r->cap + 1, sizeof(int32_t));
    r->held = calloc((size_t)r->cap + 1, sizeof(int32_t));
    if (!r->tasks || !r->run || !r->held) {
        bk_route_destroy(r);
        return NULL;
    }
    for (int t = 0; t < r->cap; t++) {
        r->run[t] = r->held[t] = -1;
    }
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void bk_route_destroy(bk_route_t *r)
{
    if (!r) {
        return;
    }
    if (r->tasks && r->run && r->held) {
        pthread_mutex_destroy(&r->lock);
    }
    free(r->run);
    free(r->held);
    free(r->standby);
    free(r->nodes);
    free(r->progress);
    free(r->prog_first);
    free(r);
}

void bk_route_set_alone(bk_route_t *r)
{
    pthread_mutex_lock(&r->lock);
    r->alone = 1;
    pthread_mutex_unlock(&r->lock);
}

static int by_task(const void *a, const void *b)
{
    const bk_member_progress_t *x = a, *y = b;
    return x->task != y->task ? (x->task > y->task) - (x->task < y->task)
                              : (x->peer > y->peer) - (x->peer < y->peer);
}

/* The tasks of the table now (entries below the count are complete: plan.h). */
static int table_count(const bk_route_t *r)
{
    int n = 0, cap = 0;
    bk_plan_task_table(r->plan, &n, &cap);
    return n < r->cap ? n : r->cap;
}

void bk_route_update(bk_route_t *r, const bk_member_view_t *view)
{
    int ntasks = table_count(r);
    node_t *nodes = calloc((size_t)view->npeers + 1, sizeof(*nodes));
    int32_t *standby = calloc((size_t)r->cap * (size_t)view->k + 1, sizeof(int32_t));
    bk_member_progress_t *progress = calloc((size_t)view->nprogress + 1, sizeof(*progress));
    int32_t *prog_first;

    if (!nodes || !standby || !progress) {
        free(nodes);
        free(standby);
        free(progress);
        return; /* the old table stays: queries may be sent to a node that says 503 */
    }
    memcpy(progress, view->progress, (size_t)view->nprogress * sizeof(*progress));
    /* by task (the view's are by peer), so that a task's are found at once */
    qsort(progress, (size_t)view->nprogress, sizeof(*progress), by_task);
    if (!(prog_first = calloc((size_t)r->cap + 2, sizeof(*prog_first)))) {
        free(nodes);
        free(standby);
        free(progress);
        return;
    }
    for (int32_t i = 0, t = 0; t <= r->cap; t++) {
        while (i < view->nprogress && progress[i].task < t) {
            i++;
        }
        prog_first[t] = i;
    }
    for (int32_t i = 0; i < view->npeers; i++) {
        const bk_member_peer_t *p = &view->peers[i];
        snprintf(nodes[i].id, sizeof(nodes[i].id), "%s", p->id ? p->id : "");
        snprintf(nodes[i].endpoint, sizeof(nodes[i].endpoint), "%s",
                 p->endpoint ? p->endpoint : "");
        snprintf(nodes[i].rack, sizeof(nodes[i].rack), "%s", p->rack ? p->rack : "");
        nodes[i].alive = p->state == BK_MEMBER_ALIVE;
        nodes[i].last_ts = p->last_ts;
        nodes[i].epoch = p->epoch;
    }
    pthread_mutex_lock(&r->lock);
    free(r->nodes);
    free(r->standby);
    free(r->progress);
    free(r->prog_first);
    r->progress = progress;
    r->prog_first = prog_first;
    r->nprogress = view->nprogress;
    r->log_time = view->log_time;
    r->nodes = nodes;
    r->nnodes = view->npeers;
    r->standby = standby;
    r->k = view->k;
    r->epoch = view->epoch;
    for (int32_t t = 0; t < r->cap; t++) {
        int ok = t < ntasks && t < view->ntasks;
        r->run[t] = ok ? view->owner[t] : -1;
        r->held[t] = ok ? view->holder[t] : -1;
        for (int32_t j = 0; j < view->k; j++) {
            standby[(size_t)t * (size_t)view->k + (size_t)j] =
                ok ? view->standby_of[(size_t)t * (size_t)view->k + (size_t)j] : -1;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

int bk_route_serving_sub(const bk_route_t *r, int sub)
{
    int g = bk_plan_latest_generation(r->plan, sub);
    int s = g >= 1 ? bk_plan_generation_sub(r->plan, sub, g) : -1;
    return s >= 0 ? s : sub;
}

int32_t bk_route_task_of(const bk_route_t *r, int sub, const char *key, size_t klen,
                         bk_task_id_t *id)
{
    int s = bk_route_serving_sub(r, sub), n = r->plan->subs[s].partitions, p;
    int32_t t;
    if (n <= 0) {
        return -1;
    }
    /* a generation's tasks own key groups by range (the `tasks` setting, the moves) */
    p = r->plan->subs[s].generation > 0 ? bk_hash_group_owner(bk_hash_key_group(key, klen), n)
                                        : bk_hash_partition(key, klen, n);
    t = bk_plan_first_task(r->plan, s) + p;
    if (t >= table_count(r)) {
        return -1; /* the task table has not taken the generation's tasks yet */
    }
    *id = (bk_task_id_t){s, p};
    return t;
}

int bk_route_sub_tasks(const bk_route_t *r, int sub, int32_t *first)
{
    int s = bk_route_serving_sub(r, sub), n = r->plan->subs[s].partitions;
    *first = bk_plan_first_task(r->plan, s);
    return *first + n <= table_count(r) ? n : 0;
}

bk_task_id_t bk_route_task_id(const bk_route_t *r, int32_t t)
{
    return r->tasks[t];
}

static void add(bk_route_t *r, int32_t peer, int role, bk_route_target_t *out, int *n, int max)
{
    const node_t *nd;
    if (peer < 0 || peer >= r->nnodes || *n >= max) {
        return;
    }
    nd = &r->nodes[peer];
    if (!nd->alive) {
        return;
    }
    memcpy(out[*n].node, nd->id, sizeof(nd->id));
    memcpy(out[*n].endpoint, nd->endpoint, sizeof(nd->endpoint));
    out[*n].role = role;
    out[*n].self = strcmp(nd->id, r->self) == 0;
    (*n)++;
}

int bk_route_targets(bk_route_t *r, int32_t t, int standbys, bk_route_target_t *out, int max)
{
    int n = 0;
    if (t < 0 || t >= table_count(r)) {
        return 0;
    }
    pthread_mutex_lock(&r->lock);
    if (r->alone) {
        if (max > 0) {
            snprintf(out[0].node, sizeof(out[0].node), "%s", r->self);
            out[0].endpoint[0] = '\0';
            out[0].role = BK_TASKDB_ACTIVE;
            out[0].self = 1;
            n = 1;
        }
    } else {
        add(r, r->run[t], BK_TASKDB_ACTIVE, out, &n, max);
        if (r->held[t] != r->run[t]) {
            add(r, r->held[t], BK_TASKDB_ACTIVE, out, &n, max);
        }
        for (int j = 0; standbys && j < r->k; j++) {
            add(r, r->standby[(size_t)t * (size_t)r->k + (size_t)j], BK_TASKDB_STANDBY, out, &n,
                max);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

void bk_route_json(bk_route_t *r, bk_jbuf_t *b)
{
    int ntasks = table_count(r);
    pthread_mutex_lock(&r->lock);
    bk_jbuf_printf(b, "{\"epoch\":%llu,\"nodes\":[", (unsigned long long)r->epoch);
    for (int i = 0; i < r->nnodes; i++) {
        bk_jbuf_printf(b, "%s{\"node\":", i ? "," : "");
        bk_jbuf_str(b, r->nodes[i].id, strlen(r->nodes[i].id));
        bk_jbuf_lit(b, ",\"rack\":");
        bk_jbuf_str(b, r->nodes[i].rack, strlen(r->nodes[i].rack));
        bk_jbuf_lit(b, ",\"endpoint\":");
        bk_jbuf_str(b, r->nodes[i].endpoint, strlen(r->nodes[i].endpoint));
        bk_jbuf_printf(b, ",\"alive\":%s,\"epoch\":%llu,\"heartbeat_ms_ago\":%lld}",
                       r->nodes[i].alive ? "true" : "false", (unsigned long long)r->nodes[i].epoch,
                       (long long)(r->log_time - r->nodes[i].last_ts));
    }
    bk_jbuf_lit(b, "],\"tasks\":[");
    for (int t = 0; t < ntasks; t++) {
        int32_t a = r->alone ? -2 : r->run[t];
        bk_jbuf_printf(b, "%s{\"task\":\"%s\",\"active\":", t ? "," : "",
                       BK_TASK_NAME(r->tasks[t]));
        if (a == -2) {
            bk_jbuf_str(b, r->self, strlen(r->self));
        } else if (a >= 0 && a < r->nnodes) {
            bk_jbuf_str(b, r->nodes[a].id, strlen(r->nodes[a].id));
        } else {
            bk_jbuf_lit(b, "null");
        }
        bk_jbuf_lit(b, ",\"standbys\":[");
        for (int j = 0, w = 0; !r->alone && j < r->k; j++) {
            int32_t s = r->standby[(size_t)t * (size_t)r->k + (size_t)j];
            if (s >= 0 && s < r->nnodes) {
                if (w++) {
                    bk_jbuf_lit(b, ",");
                }
                bk_jbuf_str(b, r->nodes[s].id, strlen(r->nodes[s].id));
            }
        }
        /* each replica's progress: offset (an active's input position, a standby's changelog
         * position) and how far behind the changelogs' end it is */
        bk_jbuf_lit(b, "],\"progress\":[");
        for (int32_t i = r->prog_first ? r->prog_first[t] : 0, w = 0;
             r->prog_first && i < r->prog_first[t + 1]; i++) {
            const bk_member_progress_t *p = &r->progress[i];
            if (p->peer < 0 || p->peer >= r->nnodes) {
                continue;
            }
            if (w++) {
                bk_jbuf_lit(b, ",");
            }
            bk_jbuf_lit(b, "{\"node\":");
            bk_jbuf_str(b, r->nodes[p->peer].id, strlen(r->nodes[p->peer].id));
            bk_jbuf_printf(b, ",\"offset\":%lld,\"lag\":%lld}", (long long)p->offset,
                           (long long)p->lag);
        }
        bk_jbuf_lit(b, "]}");
    }
    bk_jbuf_lit(b, "]}");
    pthread_mutex_unlock(&r->lock);
}

int bk_route_mine(bk_route_t *r, int32_t *out, int max)
{
    int n = 0, ntasks = table_count(r);
    pthread_mutex_lock(&r->lock);
    for (int32_t t = 0; t < ntasks && n < max; t++) {
        int32_t a = r->run[t];
        if (r->alone || (a >= 0 && a < r->nnodes && strcmp(r->nodes[a].id, r->self) == 0)) {
            out[n++] = t;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}
