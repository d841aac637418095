/* member_leader.c - what a member writes to the control topic (heartbeats, leave, ticks,
 * releases, notes) and the leader's duty: computing and publishing an assignment when the
 * live set changes (docs/cluster.md, Publishing). Runs on the member thread. */
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

/* -- Producing ---------------------------------------------------------------------------- */

void bk_member_w_header(bk_wire_buf_t *w, const bk_member_t *m, int type)
{
    bk_wire_put_u8(w, WIRE_MAGIC);
    bk_wire_put_u8(w, WIRE_VERSION);
    bk_wire_put_u8(w, (uint8_t)type);
    bk_wire_put_str(w, m->node_id);
    bk_wire_put_uv(w, m->inc);
}

/* Queues a record (w freed); 0 or -1. Non-blocking: safe under the lock. An assignment's
 * delivery report carries the publication's sequence number. */
int bk_member_produce(bk_member_t *m, int type, bk_wire_buf_t *w, int64_t ts)
{
    char key[BK_MEMBER_MAX_ID + 3];
    intptr_t tag = type | (type == REC_ASSIGN ? m->pending_seq << 8 : 0);
    rd_kafka_resp_err_t err;

    if (w->oom) {
        free(w->p);
        bk_log_error("member %s: out of memory building a record", m->node_id);
        return -1;
    }
    if (!m->producer) { /* being renewed (member.c) */
        free(w->p);
        return -1;
    }
    snprintf(key, sizeof(key), "%c/%s", bk_member_rec_key_char[type], m->node_id);
    err = rd_kafka_producev(m->producer, RD_KAFKA_V_TOPIC(m->topic), RD_KAFKA_V_PARTITION(0),
                            RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(w->p, w->len),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_TIMESTAMP(ts),
                            RD_KAFKA_V_OPAQUE((void *)tag), RD_KAFKA_V_END);
    if (err) {
        free(w->p);
        bk_log_warn("member %s: cannot queue a control record: %s", m->node_id,
                    rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

static int prog_cmp(const void *a, const void *b)
{
    const progress_t *x = a, *y = b;
    return (x->task > y->task) - (x->task < y->task);
}

void bk_member_send_heartbeat(bk_member_t *m, int64_t now)
{
    bk_wire_buf_t w = {0};
    int32_t prev = -1;

    bk_member_w_header(&w, m, REC_HEARTBEAT);
    bk_wire_put_str(&w, m->rack);
    bk_wire_put_str(&w, m->endpoint);
    bk_wire_put_uv(&w, (uint64_t)m->threads);
    bk_wire_put_uv(&w, (uint64_t)m->ntasks);
    bk_wire_put_uv(&w, m->layout);
    bk_wire_put_uv(&w, m->epoch);
    pthread_mutex_lock(&m->plock);
    if (m->nprog > 1) {
        qsort(m->prog, (size_t)m->nprog, sizeof(*m->prog), prog_cmp);
    }
    bk_wire_put_uv(&w, (uint64_t)m->nprog);
    for (int32_t i = 0; i < m->nprog; i++) {
        bk_wire_put_uv(&w, (uint64_t)(m->prog[i].task - prev - 1));
        bk_wire_put_sv(&w, m->prog[i].offset);
        bk_wire_put_uv(&w, (uint64_t)m->prog[i].lag);
        prev = m->prog[i].task;
    }
    pthread_mutex_unlock(&m->plock);
    bk_wire_put_uv(&w, (uint64_t)m->hb_ms);
    bk_wire_put_uv(&w, (uint64_t)m->session_ms);
    if (bk_member_produce(m, REC_HEARTBEAT, &w, now) == 0 && !m->first_hb) {
        m->first_hb = now;
    }
}

static void send_tick(bk_member_t *m, int64_t now)
{
    bk_wire_buf_t w = {0};
    bk_member_w_header(&w, m, REC_TICK);
    bk_member_produce(m, REC_TICK, &w, now);
}

/* -- The leader's duty (docs/cluster.md, Publishing) --------------------------------------- */

/* A member's layout; an observer has none of its own and takes the leader's, whose layout is
 * the one that the leader assigns (so its `bk_member_stable` is the leader's). */
static uint32_t own_layout(const bk_member_t *m)
{
    int32_t leader;
    if (!m->observe) {
        return m->layout;
    }
    leader = bk_member_leader_peer(m);
    return leader >= 0 ? m->peers[leader].layout : m->layout;
}

static int eligible(const bk_member_t *m, int32_t i, uint32_t layout)
{
    return bk_member_peer_alive(m, i) && m->peers[i].layout == layout;
}

static int assignable(const bk_member_t *m, int32_t t)
{
    return !m->assignable || m->assignable[t];
}

/* Whether task t gets no standbys (BK_MEMBER_ACTIVE_ONLY). */
static int active_only(const bk_member_t *m, int32_t t)
{
    return m->assignable && m->assignable[t] == BK_MEMBER_ACTIVE_ONLY;
}

/* The current assignment has a row for each of the member's tasks, with an active for
 * exactly those it may assign, and no standby for those that get none. */
static int covers_tasks(const bk_member_t *m)
{
    if (m->cur->ntasks != m->ntasks) {
        return 0;
    }
    for (int32_t t = 0; t < m->ntasks; t++) {
        if ((m->cur->active[t] >= 0) != assignable(m, t) ||
            (active_only(m, t) && m->cur->k > 0 &&
             m->cur->standby[(size_t)t * (size_t)m->cur->k] >= 0)) {
            return 0;
        }
    }
    return 1;
}

/* The assignment of the assignable tasks (ac, compact: its task c is full_of[c]) spread over
 * the whole table of ntasks, the others unassigned. NULL without memory. */
static bk_assigncodec_t *spread(const bk_assigncodec_t *ac, const int32_t *full_of,
                                int32_t ntasks, char *err, size_t errsz)
{
    bk_assigncodec_t *out = bk_assigncodec_new(ac->nnodes, ntasks, ac->k, ac->epoch,
                                               ac->base_epoch);
    if (!out) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    for (int32_t s = 0; s < ac->nnodes; s++) {
        const bk_assigncodec_node_t *n = &ac->nodes[s];
        if (bk_assigncodec_set_node(out, s, n->id, n->rack, n->endpoint, err, errsz) != 0) {
            bk_assigncodec_destroy(out);
            return NULL;
        }
    }
    for (int32_t c = 0; c < ac->ntasks; c++) {
        out->active[full_of[c]] = ac->active[c];
        memcpy(&out->standby[(size_t)full_of[c] * (size_t)ac->k],
               &ac->standby[(size_t)c * (size_t)ac->k], (size_t)ac->k * sizeof(int32_t));
    }
    return out;
}

/* The current assignment covers exactly the eligible live members, each incarnation as it
 * was when the assignment was applied. */
int bk_member_stable(const bk_member_t *m)
{
    int32_t live = 0, slots = 0, valid = 0;
    uint32_t layout = own_layout(m);
    if (!m->cur) {
        for (int32_t i = 0; i < m->npeers; i++) {
            if (eligible(m, i, layout)) {
                return 0;
            }
        }
        return 1;
    }
    /* a member's task table that grew, or tasks that stopped or started being assignable */
    if (!m->observe && !covers_tasks(m)) {
        return 0;
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        live += eligible(m, i, layout);
    }
    for (int32_t s = 0; s < m->cur->nnodes; s++) {
        int32_t p = m->slot_peer[s];
        if (!m->cur->nodes[s].id[0]) {
            continue;
        }
        slots++;
        valid += eligible(m, p, layout) && m->peers[p].inc == m->slot_inc[s];
    }
    return slots == valid && valid == live;
}

static int join_cmp(const void *a, const void *b, void *arg)
{
    const peer_t *peers = arg;
    int64_t x = peers[*(const int32_t *)a].join_offset, y = peers[*(const int32_t *)b].join_offset;
    return (x > y) - (x < y);
}

/* Is next the same assignment as cur (epochs aside)? */
static int same_assignment(const bk_assigncodec_t *cur, bk_assigncodec_t *next)
{
    uint64_t e = next->epoch, b = next->base_epoch;
    int same;
    next->epoch = cur->epoch;
    next->base_epoch = cur->base_epoch;
    same = bk_assigncodec_equal(cur, next);
    next->epoch = e;
    next->base_epoch = b;
    return same;
}

/* Computes the next epoch from the eligible live members and publishes it. A probe
 * (warm-up, KIP-441's probing rebalance) publishes only if the result differs from the
 * current epoch: a warm-up replica caught up, so its task can move now. */
void bk_member_lead(bk_member_t *m, int64_t now, int probe)
{
    int32_t n = 0, nlags = 0, width = m->cur ? m->cur->k : 0;
    int32_t *idx = malloc((size_t)m->npeers * sizeof(*idx) + 1);
    bk_assign_member_t *members = calloc((size_t)m->npeers + 1, sizeof(*members));
    int32_t *pa = malloc(((size_t)m->ntasks + 1) * sizeof(*pa));
    int32_t *ps = malloc(((size_t)m->ntasks * (size_t)width + 1) * sizeof(*ps));
    /* the assignor sees the assignable tasks only, numbered 0..nc-1 (compact_of, full_of) */
    int32_t *full_of = malloc(((size_t)m->ntasks + 1) * sizeof(*full_of));
    int32_t *compact_of = malloc(((size_t)m->ntasks + 1) * sizeof(*compact_of)), nc = 0;
    uint8_t *bare = calloc((size_t)m->ntasks + 1, 1); /* [nc] the assignor's no_standby */
    bk_assign_lag_t *lags = NULL;
    bk_assign_result_t res = {0};
    bk_assign_input_t in;
    bk_assigncodec_t *next = NULL;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    bk_wire_buf_t w = {0};
    char err[256];

    if (!idx || !members || !pa || !ps || !full_of || !compact_of || !bare) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    for (int32_t t = 0; t < m->ntasks; t++) {
        compact_of[t] = assignable(m, t) ? nc : -1;
        if (assignable(m, t)) {
            bare[nc] = (uint8_t)active_only(m, t);
            full_of[nc++] = t;
        }
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        if (eligible(m, i, m->layout)) {
            idx[n++] = i;
            cap += (size_t)m->peers[i].nprogress;
        }
    }
    qsort_r(idx, (size_t)n, sizeof(*idx), join_cmp, m->peers);
    lags = malloc((cap + 1) * sizeof(*lags));
    if (!lags) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    for (int32_t j = 0; j < n; j++) {
        const peer_t *p = &m->peers[idx[j]];
        members[j] = (bk_assign_member_t){p->id, p->rack, p->endpoint, p->threads};
        for (int32_t k = 0; k < p->nprogress; k++) {
            int32_t t = p->progress[k].task;
            if (t < m->ntasks && compact_of[t] >= 0) {
                lags[nlags++] = (bk_assign_lag_t){compact_of[t], j, p->progress[k].lag};
            }
        }
    }
    if (m->cur && bk_assigncodec_to_prev(m->cur, members, n, m->ntasks, pa, ps, width) != 0) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    /* a task never assigned starts where the task it is built from runs (its origin) */
    for (int32_t t = 0; m->cur && m->origin && t < m->ntasks; t++) {
        int32_t h = m->origin[t];
        if (pa[t] < 0 && h >= 0 && h < m->ntasks) {
            pa[t] = pa[h];
        }
    }
    for (int32_t c = 0; m->cur && c < nc; c++) { /* in place: full_of[c] >= c */
        pa[c] = pa[full_of[c]];
        memmove(&ps[(size_t)c * (size_t)width], &ps[(size_t)full_of[c] * (size_t)width],
                (size_t)width * sizeof(*ps));
    }
    in = (bk_assign_input_t){.members = members,
                             .nmembers = n,
                             .ntasks = nc,
                             .standbys = m->standbys,
                             .prev_active = m->cur ? pa : NULL,
                             .prev_standby = m->cur ? ps : NULL,
                             .prev_width = width,
                             .lags = lags,
                             .nlags = nlags,
                             .warmup = m->warmup,
                             .acceptable_lag = m->acceptable_lag,
                             .no_standby = bare};
    if (bk_assign_compute(&in, &res, err, sizeof(err)) != 0) {
        goto fail;
    }
    next = bk_assigncodec_from_result(m->cur, &in, &res, m->epoch + 1, err, sizeof(err));
    if (!next) {
        goto fail;
    }
    if (nc < m->ntasks) {
        bk_assigncodec_t *whole = spread(next, full_of, m->ntasks, err, sizeof(err));
        bk_assigncodec_destroy(next);
        if (!(next = whole)) {
            goto fail;
        }
    }
    m->probe_at = m->warmup && res.warmups > 0 ? now + m->probe_ms : 0;
    if (probe && m->cur && same_assignment(m->cur, next)) {
        bk_log_debug("member %s: probe: %d task(s) still warming up", m->node_id, res.warmups);
        goto done;
    }
    if (m->cur ? bk_assigncodec_delta(m->cur, next, &buf, &len, err, sizeof(err))
               : bk_assigncodec_encode(next, &buf, &len, err, sizeof(err))) {
        goto fail;
    }
    bk_member_w_header(&w, m, REC_ASSIGN);
    bk_wire_put(&w, buf, len);
    m->pending_seq = (m->pending_seq + 1) & 0xffffff;
    if (bk_member_produce(m, REC_ASSIGN, &w, now) != 0) {
        snprintf(err, sizeof(err), "cannot queue it");
        goto fail;
    }
    m->pending = 1;
    m->pending_base = m->epoch;
    m->pending_offset = -1;
    bk_log_info("member %s: leading: epoch %" PRIu64 " for %d members, %d tasks moved (least"
                " %d), %d orphaned, %d warming up, %zu bytes%s%s",
                m->node_id, m->epoch + 1, n, res.moved, res.min_moved, res.orphaned, res.warmups,
                len, m->cur ? " (delta)" : "", probe ? " (warm-up probe)" : "");
    goto done;

fail:
    bk_log_error("member %s: cannot compute epoch %" PRIu64 ": %s", m->node_id, m->epoch + 1, err);
done:
    free(buf);
    bk_assigncodec_destroy(next);
    bk_assign_result_destroy(&res);
    free(lags);
    free(ps);
    free(pa);
    free(full_of);
    free(compact_of);
    free(bare);
    free(members);
    free(idx);
}

/* Writes a tick when someone's session should have ended by now and log time has not got
 * there: the leader first, then the next in join order (docs/cluster.md, Ticks). */
void bk_member_maybe_tick(bk_member_t *m, int32_t self, int64_t now)
{
    int64_t due = INT64_MAX;
    int32_t rank = bk_member_peer_rank(m, self);

    if (rank >= TICK_RANKS) {
        return;
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        if (i != self && bk_member_peer_alive(m, i) &&
            m->peers[i].last_ts + m->session_ms + 1 < due) {
            due = m->peers[i].last_ts + m->session_ms + 1;
        }
    }
    if (due == INT64_MAX) {
        return;
    }
    due += rank * TICK_STAGGER_MS;
    if (m->log_time < due - rank * TICK_STAGGER_MS && now >= due &&
        now - m->last_tick >= TICK_STAGGER_MS) {
        send_tick(m, now);
        m->last_tick = now;
        due = now + TICK_STAGGER_MS; /* again if it has not got through by then */
    }
    if (due < m->next_wake) {
        m->next_wake = due; /* wake then, not at the next poll timeout */
    }
}
