/* member_copy.c - copies of the view for the node (bk_member_poll): made under the
 * member's lock on the caller's thread, into arrays the caller's view keeps between
 * polls. */
#define _GNU_SOURCE

#include "cluster/member_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "base/wire.h"
#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"

int bk_member_cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Grows the int32 arrays `lists`, which share the capacity *cap, to n elements each; 0 or -1
 * (then *cap is unchanged and the arrays that grew are merely larger than it says). */
static int grow_i32(int32_t **lists[], size_t count, size_t *cap, size_t n)
{
    if (n <= *cap) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        int32_t *l = realloc(*lists[i], n * sizeof(*l));
        if (!l) {
            return -1;
        }
        *lists[i] = l;
    }
    *cap = n;
    return 0;
}

/* Grows the view's arrays; 0 or -1. */
static int view_reserve(bk_member_view_t *v, size_t npeers, size_t ntasks, size_t strings,
                        size_t nowner, size_t nstandby_of, size_t nprogress)
{
    int32_t **peer_lists[] = {&v->peer_map, &v->peer_order};
    int32_t **task_lists[] = {&v->running, &v->waiting, &v->release, &v->standby};
    int32_t **owner_lists[] = {&v->owner, &v->holder};
    int32_t **standby_lists[] = {&v->standby_of};

    if (strings > v->cap_strings) {
        char *p = realloc(v->strings, strings);
        if (!p) {
            return -1;
        }
        v->strings = p;
        v->cap_strings = strings;
    }
    if (npeers > v->cap_peers) {
        bk_member_peer_t *p = realloc(v->peers, npeers * sizeof(*p));
        if (!p) {
            return -1;
        }
        v->peers = p; /* cap_peers grows with the two lists below */
    }
    if (nprogress > v->cap_progress) {
        bk_member_progress_t *p = realloc(v->progress, nprogress * sizeof(*p));
        if (!p) {
            return -1;
        }
        v->progress = p;
        v->cap_progress = nprogress;
    }
    return grow_i32(peer_lists, 2, &v->cap_peers, npeers) != 0 ||
                   grow_i32(task_lists, 4, &v->cap_tasks, ntasks) != 0 ||
                   grow_i32(owner_lists, 2, &v->cap_owner, nowner) != 0 ||
                   grow_i32(standby_lists, 1, &v->cap_standby_of, nstandby_of) != 0
               ? -1
               : 0;
}

/* The view's index of the incarnation that slot s of the current assignment was bound to,
 * while the member still knows it (in any state); -1 otherwise or for s < 0. */
static int32_t slot_view(const bk_member_t *m, const int32_t *peer_map, int32_t s)
{
    int32_t p = s >= 0 ? m->slot_peer[s] : -1;
    return p >= 0 && m->peers[p].used && m->peers[p].inc == m->slot_inc[s] ? peer_map[p] : -1;
}

/* bk_member_poll and bk_member_poll_force: copies the view under the lock. The copy's cost
 * is the peers, the whole app's task table and the progress lists, which is why a node's
 * loop copies only on a change of version. */
static int poll_view(bk_member_t *m, bk_member_view_t *v, int force)
{
    int32_t self, me_slot = -1, n = 0, nalive = 0, leader, k;
    int32_t *order, *map;
    size_t strings = 1, used = 0, nprogress = 0;
    int rc;

    pthread_mutex_lock(&m->lock);
    k = m->cur ? m->cur->k : 0; /* under the lock: the member thread replaces m->cur */
    if (v->version == m->version && !force) {
        pthread_mutex_unlock(&m->lock);
        return 0;
    }
    rc = v->version != m->version;
    for (int32_t i = 0; i < m->npeers + m->ngone; i++) {
        const peer_t *p = i < m->npeers ? &m->peers[i] : &m->gone[i - m->npeers];
        strings += p->used ? strlen(p->id) + strlen(p->rack) + strlen(p->endpoint) + 3 : 0;
        nprogress += p->used && p->state == BK_MEMBER_ALIVE ? (size_t)p->nprogress : 0;
    }
    v->npeers = v->ntasks = v->k = v->nprogress = 0;
    if (view_reserve(v, (size_t)m->npeers + (size_t)m->ngone + 1,
                     (size_t)m->nown + (size_t)m->ntasks + 1, strings, (size_t)m->nown + 1,
                     (size_t)m->nown * (size_t)k + 1, nprogress + 1) != 0) {
        rc = -1;
        goto done;
    }
    self = m->lost ? -1 : bk_member_self_peer(m);
    leader = bk_member_leader_peer(m);
    v->version = m->version;
    v->incarnation = m->inc;
    v->epoch = m->epoch;
    v->joined = self >= 0;
    v->lost = m->lost;
    v->stable = bk_member_stable(m);
    v->is_leader = self >= 0 && leader == self;
    v->error = m->error;
    v->log_time = m->log_time;
    v->join_ts = m->join_ts;
    v->caught_up = m->caught_up;
    v->next_offset = m->next_offset;
    v->start_from = m->start_from;
    v->start_records = m->start_records;
    v->session_timeout_ms = m->session_ms;
    /* Peers: the live ones in join order, then the ended ones, then an observer's forgotten
     * ones. peer_order maps the view's index to the member's (npeers + i: gone[i]), peer_map
     * the other way. */
    order = v->peer_order;
    map = v->peer_map;
    for (int32_t i = 0; i < m->npeers; i++) {
        map[i] = -1;
        if (bk_member_peer_alive(m, i)) {
            order[nalive++] = i;
        }
    }
    n = nalive;
    for (int32_t i = 0; i < m->npeers; i++) {
        if (m->peers[i].used && m->peers[i].state != BK_MEMBER_ALIVE) {
            order[n++] = i;
        }
    }
    for (int32_t i = 0; i < m->ngone; i++) {
        order[n++] = m->npeers + i;
    }
    /* Join order: insertion sort, the list is short and mostly sorted. */
    for (int32_t x = 1; x < nalive; x++) {
        for (int32_t y = x;
             y > 0 && m->peers[order[y - 1]].join_offset > m->peers[order[y]].join_offset; y--) {
            int32_t tmp = order[y];
            order[y] = order[y - 1];
            order[y - 1] = tmp;
        }
    }
    for (int32_t x = 0; x < n; x++) {
        const peer_t *p =
            order[x] < m->npeers ? &m->peers[order[x]] : &m->gone[order[x] - m->npeers];
        const char *str[3] = {p->id, p->rack, p->endpoint};
        char *s[3];
        for (int j = 0; j < 3; j++) {
            size_t len = strlen(str[j]) + 1;
            s[j] = memcpy(v->strings + used, str[j], len);
            used += len;
        }
        v->peers[x] = (bk_member_peer_t){s[0],     s[1],           s[2],       p->inc,  p->threads,
                                         p->state, p->join_offset, p->last_ts, p->epoch};
        if (order[x] < m->npeers) {
            map[order[x]] = x;
        }
        /* Progress: live peers only, in view order, tasks ascending as heartbeats list them. */
        for (int32_t j = 0; p->state == BK_MEMBER_ALIVE && j < p->nprogress; j++) {
            const progress_t *pr = &p->progress[j];
            v->progress[v->nprogress++] =
                (bk_member_progress_t){x, pr->task, pr->offset, pr->lag, pr->changed_ts};
        }
    }
    v->npeers = n;
    v->leader = leader >= 0 ? map[leader] : -1; /* 0: the live one that joined first */
    /* The app's tasks (docs/cluster.md, Holders). */
    for (int32_t t = 0; t < m->nown; t++) {
        v->owner[t] = slot_view(m, map, m->cur->active[t]);
        v->holder[t] = m->own[t] >= 0 ? map[m->own[t]] : -1;
        for (int32_t j = 0; j < k; j++) {
            size_t at = (size_t)t * (size_t)k + (size_t)j;
            v->standby_of[at] = slot_view(m, map, m->cur->standby[at]);
        }
    }
    v->ntasks = m->nown;
    v->k = k;
    memcpy(v->generations, m->gens, sizeof(v->generations));
    v->ngenerations = m->ngens;
    v->ndrained = 0;
    if ((size_t)m->ndrained > v->cap_drained) {
        int32_t *d = realloc(v->drained, (size_t)m->ndrained * sizeof(*d));
        if (d) {
            v->drained = d;
            v->cap_drained = (size_t)m->ndrained;
        }
    }
    if (m->ndrained > 0 && (size_t)m->ndrained <= v->cap_drained) {
        memcpy(v->drained, m->drained, (size_t)m->ndrained * sizeof(*v->drained));
        v->ndrained = m->ndrained;
    }
    /* This member's tasks. */
    v->nrunning = v->nwaiting = v->nrelease = v->nstandby = 0;
    if (m->lost) {
        memcpy(v->release, m->lost_tasks, (size_t)m->nlost * sizeof(*v->release));
        v->nrelease = m->nlost;
    } else if (self >= 0 && m->cur) {
        for (int32_t s = 0; s < m->cur->nnodes; s++) {
            if (m->slot_peer[s] == self && m->slot_inc[s] == m->inc) {
                me_slot = s;
            }
        }
        for (int32_t t = 0; t < m->nown; t++) {
            int mine = me_slot >= 0 && m->cur->active[t] == me_slot;
            if (mine && m->own[t] == self) {
                v->running[v->nrunning++] = t;
                m->told[t] = 1;
            } else if (mine) {
                v->waiting[v->nwaiting++] = t;
            } else if (m->own[t] == self && !m->rel_sent[t]) {
                v->release[v->nrelease++] = t;
            }
            for (int32_t j = 0; me_slot >= 0 && j < m->cur->k; j++) {
                if (m->cur->standby[(size_t)t * (size_t)m->cur->k + (size_t)j] == me_slot) {
                    v->standby[v->nstandby++] = t;
                }
            }
        }
    }
    qsort(v->release, (size_t)v->nrelease, sizeof(*v->release), bk_member_cmp_i32);

done:
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        v->version = 0; /* try again next time */
        bk_log_error("member %s: out of memory copying the view", m->node_id);
    }
    return rc;
}

void bk_member_set_lease(bk_member_t *member, _Atomic int64_t *lease)
{
    pthread_mutex_lock(&member->lock);
    member->lease = lease;
    pthread_mutex_unlock(&member->lock);
}

uint64_t bk_member_incarnation(bk_member_t *member)
{
    uint64_t inc;
    pthread_mutex_lock(&member->lock);
    inc = member->inc;
    pthread_mutex_unlock(&member->lock);
    return inc;
}

int bk_member_poll(bk_member_t *member, bk_member_view_t *view)
{
    return poll_view(member, view, 0);
}

int bk_member_poll_force(bk_member_t *member, bk_member_view_t *view)
{
    return poll_view(member, view, 1);
}

void bk_member_view_clear(bk_member_view_t *view)
{
    free(view->strings);
    free(view->peers);
    free(view->running);
    free(view->waiting);
    free(view->release);
    free(view->standby);
    free(view->owner);
    free(view->holder);
    free(view->standby_of);
    free(view->progress);
    free(view->peer_map);
    free(view->peer_order);
    free(view->drained);
    memset(view, 0, sizeof(*view));
}
