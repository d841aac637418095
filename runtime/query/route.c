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
} node_t;

struct bk_route_s {
    const bk_plan_t *plan;
    char self[BK_MEMBER_MAX_ID + 1];
    bk_task_id_t *tasks; /* the app's table */
    int ntasks;
    int *first; /* [nsubs] index of a subtopology's first task */
    pthread_mutex_t lock;
    int alone;
    uint64_t epoch;
    node_t *nodes;
    int nnodes;
    /* [ntasks] the current epoch's active, -1; the node holding the task, which runs it while
     * a handoff is in progress. A holder may be stale: views change their version only for
     * changes of their own node's (member_view.c), so a handoff elsewhere does not update
     * this table; a stale holder says 503 and the next target is asked. */
    int32_t *run, *held;
    int32_t *standby; /* [ntasks * k] */
    int k;
};

bk_route_t *bk_route_new(const bk_plan_t *plan, const char *self_id)
{
    bk_route_t *r = calloc(1, sizeof(*r));
    if (!r) {
        return NULL;
    }
    r->plan = plan;
    snprintf(r->self, sizeof(r->self), "%s", self_id ? self_id : "");
    r->tasks = bk_plan_tasks(plan, &r->ntasks);
    r->first = calloc((size_t)plan->nsubs + 1, sizeof(int));
    r->run = calloc((size_t)r->ntasks + 1, sizeof(int32_t));
    r->held = calloc((size_t)r->ntasks + 1, sizeof(int32_t));
    if (!r->tasks || !r->first || !r->run || !r->held) {
        bk_route_destroy(r);
        return NULL;
    }
    for (int s = 0, n = 0; s < plan->nsubs; s++) {
        r->first[s] = n;
        n += plan->subs[s].partitions;
    }
    for (int t = 0; t < r->ntasks; t++) {
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
    if (r->first && r->run && r->held) {
        pthread_mutex_destroy(&r->lock);
    }
    free(r->tasks);
    free(r->first);
    free(r->run);
    free(r->held);
    free(r->standby);
    free(r->nodes);
    free(r);
}

void bk_route_set_alone(bk_route_t *r)
{
    pthread_mutex_lock(&r->lock);
    r->alone = 1;
    pthread_mutex_unlock(&r->lock);
}

void bk_route_update(bk_route_t *r, const bk_member_view_t *view)
{
    node_t *nodes = calloc((size_t)view->npeers + 1, sizeof(*nodes));
    int32_t *standby = calloc((size_t)r->ntasks * (size_t)view->k + 1, sizeof(int32_t));

    if (!nodes || !standby) {
        free(nodes);
        free(standby);
        return; /* the old table stays: queries may be sent to a node that says 503 */
    }
    for (int32_t i = 0; i < view->npeers; i++) {
        const bk_member_peer_t *p = &view->peers[i];
        snprintf(nodes[i].id, sizeof(nodes[i].id), "%s", p->id ? p->id : "");
        snprintf(nodes[i].endpoint, sizeof(nodes[i].endpoint), "%s",
                 p->endpoint ? p->endpoint : "");
        snprintf(nodes[i].rack, sizeof(nodes[i].rack), "%s", p->rack ? p->rack : "");
        nodes[i].alive = p->state == BK_MEMBER_ALIVE;
    }
    pthread_mutex_lock(&r->lock);
    free(r->nodes);
    free(r->standby);
    r->nodes = nodes;
    r->nnodes = view->npeers;
    r->standby = standby;
    r->k = view->k;
    r->epoch = view->epoch;
    for (int32_t t = 0; t < r->ntasks; t++) {
        int ok = t < view->ntasks;
        r->run[t] = ok ? view->owner[t] : -1;
        r->held[t] = ok ? view->holder[t] : -1;
        for (int32_t j = 0; j < view->k; j++) {
            standby[(size_t)t * (size_t)view->k + (size_t)j] =
                ok ? view->standby_of[(size_t)t * (size_t)view->k + (size_t)j] : -1;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

int32_t bk_route_task_of(const bk_route_t *r, int sub, const char *key, size_t klen,
                         bk_task_id_t *id)
{
    int n = r->plan->subs[sub].partitions;
    int p;
    if (n <= 0) {
        return -1;
    }
    p = bk_hash_partition(key, klen, n);
    *id = (bk_task_id_t){sub, p};
    return r->first[sub] + p;
}

int bk_route_sub_tasks(const bk_route_t *r, int sub, int32_t *first)
{
    *first = r->first[sub];
    return r->plan->subs[sub].partitions;
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
    if (t < 0 || t >= r->ntasks) {
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
    pthread_mutex_lock(&r->lock);
    bk_jbuf_printf(b, "{\"epoch\":%llu,\"nodes\":[", (unsigned long long)r->epoch);
    for (int i = 0; i < r->nnodes; i++) {
        bk_jbuf_printf(b, "%s{\"node\":", i ? "," : "");
        bk_jbuf_str(b, r->nodes[i].id, strlen(r->nodes[i].id));
        bk_jbuf_lit(b, ",\"rack\":");
        bk_jbuf_str(b, r->nodes[i].rack, strlen(r->nodes[i].rack));
        bk_jbuf_lit(b, ",\"endpoint\":");
        bk_jbuf_str(b, r->nodes[i].endpoint, strlen(r->nodes[i].endpoint));
        bk_jbuf_printf(b, ",\"alive\":%s}", r->nodes[i].alive ? "true" : "false");
    }
    bk_jbuf_lit(b, "],\"tasks\":[");
    for (int t = 0; t < r->ntasks; t++) {
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
        bk_jbuf_lit(b, "]}");
    }
    bk_jbuf_lit(b, "]}");
    pthread_mutex_unlock(&r->lock);
}

int bk_route_mine(bk_route_t *r, int32_t *out)
{
    int n = 0;
    pthread_mutex_lock(&r->lock);
    for (int32_t t = 0; t < r->ntasks; t++) {
        int32_t a = r->run[t];
        if (r->alone || (a >= 0 && a < r->nnodes && strcmp(r->nodes[a].id, r->self) == 0)) {
            out[n++] = t;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}
