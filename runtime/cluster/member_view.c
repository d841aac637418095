/* member_view.c - the view every member folds from the control topic's records: peers and
 * their incarnations, the leader, the current assignment and who holds each task
 * (docs/cluster.md). Runs on the member thread under the member's lock. */
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

#include "base/clock.h"
#include "base/log.h"
#include "base/wire.h"
#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"

/* start time in ms and the pid: distinct across restarts, increasing while clocks do. */
uint64_t bk_member_make_incarnation(void)
{
    return (uint64_t)bk_clock_wall_ms() * 1000 + (uint64_t)(getpid() % 1000);
}

uint32_t bk_member_fnv1a(uint32_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 16777619u;
    }
    return h;
}

uint32_t bk_member_id_hash(const char *id)
{
    return bk_member_fnv1a(2166136261u, id, strlen(id));
}

int32_t bk_member_peer_find(const bk_member_t *m, const char *id)
{
    uint32_t h = bk_member_id_hash(id);
    for (int32_t i = 0; i < m->npeers; i++) {
        if (m->peers[i].used && m->peers[i].id_hash == h && strcmp(m->peers[i].id, id) == 0) {
            return i;
        }
    }
    return -1;
}

int bk_member_peer_alive(const bk_member_t *m, int32_t i)
{
    return i >= 0 && m->peers[i].used && m->peers[i].state == BK_MEMBER_ALIVE;
}

/* This incarnation of this member as a peer, alive; -1 otherwise (always for an observer,
 * whatever node ids the log holds). */
int32_t bk_member_self_peer(const bk_member_t *m)
{
    int32_t i = m->observe ? -1 : bk_member_peer_find(m, m->node_id);
    return bk_member_peer_alive(m, i) && m->peers[i].inc == m->inc ? i : -1;
}

/* Leader: the live member that joined first (docs/cluster.md, Leader). */
int32_t bk_member_leader_peer(const bk_member_t *m)
{
    int32_t best = -1;
    for (int32_t i = 0; i < m->npeers; i++) {
        if (bk_member_peer_alive(m, i) &&
            (best < 0 || m->peers[i].join_offset < m->peers[best].join_offset)) {
            best = i;
        }
    }
    return best;
}

/* Rank of peer `i` among the live ones in join order. */
int32_t bk_member_peer_rank(const bk_member_t *m, int32_t i)
{
    int32_t rank = 0;
    for (int32_t j = 0; j < m->npeers; j++) {
        if (j != i && bk_member_peer_alive(m, j) &&
            m->peers[j].join_offset < m->peers[i].join_offset) {
            rank++;
        }
    }
    return rank;
}

/* -- Ownership (docs/cluster.md, Holders) ------------------------------------------------- */

/* The peer the current assignment gives task t to, if that incarnation is alive; else -1. */
static int32_t assignee(const bk_member_t *m, int32_t t)
{
    int32_t s, p;
    if (!m->cur || t >= m->cur->ntasks || (s = m->cur->active[t]) < 0) {
        return -1;
    }
    p = m->slot_peer[s];
    return bk_member_peer_alive(m, p) && m->peers[p].inc == m->slot_inc[s] ? p : -1;
}

/* A task nobody holds goes to its assignee at once. */
static void give(bk_member_t *m, int32_t t)
{
    if (m->own[t] < 0) {
        m->own[t] = assignee(m, t);
    }
    m->rel_sent[t] = 0;
}

/* Task t's holder let go of it (released it, or ended). Views are rebuilt only for changes
 * they show: with 100 members, rebuilding every view on every task moved anywhere cost more
 * than the rest of the membership work. */
static void free_task(bk_member_t *m, int32_t t)
{
    int32_t self = bk_member_self_peer(m);
    if (self >= 0 && (m->own[t] == self || assignee(m, t) == self)) {
        m->version++;
    }
    m->own[t] = -1;
    give(m, t);
}

/* Something may happen once log time passes `at`: expire() must look then. */
static void lower_expiry(bk_member_t *m, int64_t at)
{
    if (at < m->expire_at) {
        m->expire_at = at;
    }
}

/* A peer's incarnation ends (died, left or was replaced): what it held is free. Final. */
static void peer_end(bk_member_t *m, int32_t i, int state)
{
    peer_t *p = &m->peers[i];
    static const char *why[] = {"alive", "died", "left", "was replaced"};

    p->state = state;
    p->end_ts = m->log_time;
    lower_expiry(m, p->end_ts + m->session_ms);
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->own[t] == i) {
            free_task(m, t);
        }
    }
    m->version++;
    /* a death is news to an operator (a node stopped heartbeating); a leave or a restart is
     * what the node itself said */
    if (state == BK_MEMBER_DEAD && !m->observe && m->next_offset > m->catchup_to) {
        bk_log_info("member %s: %s (incarnation %" PRIu64 ") died: no heartbeat for a session"
                    " (%d ms of log time)", m->node_id, p->id, p->inc, m->session_ms);
    } else {
        bk_log_debug("member %s: %s (incarnation %" PRIu64 ") %s", m->node_id, p->id, p->inc,
                     why[state]);
    }
}

static int in_current(const bk_member_t *m, int32_t i)
{
    for (int32_t s = 0; m->cur && s < m->cur->nnodes; s++) {
        if (m->slot_peer[s] == i) {
            return 1;
        }
    }
    return 0;
}

static int32_t gone_find(const bk_member_t *m, const char *id)
{
    for (int32_t i = 0; i < m->ngone; i++) {
        if (strcmp(m->gone[i].id, id) == 0) {
            return i;
        }
    }
    return -1;
}

/* An observer keeps a peer that the rules forget, in place of an older one of its id, else of
 * the one that ended first. Kept apart from the peers, so that the rules stay the members'. */
static void gone_add(bk_member_t *m, const peer_t *p)
{
    int32_t at = gone_find(m, p->id);
    if (at < 0 && m->ngone < GONE_MAX) {
        at = m->ngone++;
    } else if (at < 0) {
        at = 0;
        for (int32_t i = 1; i < m->ngone; i++) {
            if (m->gone[i].end_ts < m->gone[at].end_ts) {
                at = i;
            }
        }
    }
    m->gone[at] = *p;
    m->gone[at].progress = m->gone[at].spare = NULL;
    m->gone[at].nprogress = m->gone[at].cap_progress = m->gone[at].cap_spare = 0;
}

/* A node id joined again: its forgotten incarnation is history. */
static void gone_drop(bk_member_t *m, const char *id)
{
    int32_t at = gone_find(m, id);
    if (at >= 0) {
        m->gone[at] = m->gone[--m->ngone];
        m->version++;
    }
}

/* The log was silent for `gap` ms, longer than half a session: no member wrote, not even a
 * heartbeat (each writes one at least every half session, session > 2 * heartbeat), so the
 * control topic was out of everyone's reach (brokers down) or every node was. The silence
 * proves nobody dead: it does not count toward any session, as a Kafka group coordinator that
 * takes a group over gives every member a fresh session. Every member applies this at the
 * same record, so their views agree. A peer that did die is seen dead a session after the
 * log comes back. */
static void excise_silence(bk_member_t *m, int64_t gap)
{
    int alive = 0;
    for (int32_t i = 0; i < m->npeers; i++) {
        peer_t *p = &m->peers[i];
        if (p->used && p->state == BK_MEMBER_ALIVE) {
            p->last_ts += gap;
            alive++;
        }
    }
    if (alive) {
        m->expire_at = INT64_MIN;
        /* news only when read live, not when a start reads the history */
        bk_log(!m->observe && m->next_offset > m->catchup_to ? BK_LOG_INFO : BK_LOG_DEBUG,
               "member %s: the control topic was silent for %" PRId64 " ms (more than half a"
               " session): not counted toward the sessions of %d member(s)",
               m->node_id, gap, alive);
    }
}

/* Log time moved: sessions that ended are over; peers over for a session are forgotten
 * (docs/cluster.md, Liveness). Runs per record, so every member does it at the same place. */
static void expire(bk_member_t *m)
{
    int64_t next = INT64_MAX;
    if (m->log_time <= m->expire_at) {
        return; /* nothing ends before then (expire_at is a lower bound) */
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        peer_t *p = &m->peers[i];
        if (!p->used) {
            continue;
        }
        if (p->state == BK_MEMBER_ALIVE && m->log_time - p->last_ts > m->session_ms) {
            peer_end(m, i, BK_MEMBER_DEAD);
        } else if (p->state != BK_MEMBER_ALIVE && m->log_time - p->end_ts > m->session_ms &&
                   !in_current(m, i)) {
            if (m->gone) {
                gone_add(m, p);
            }
            free(p->progress);
            free(p->spare);
            memset(p, 0, sizeof(*p));
            m->version++;
        }
    }
    /* The next deadline: a live peer's session end, an ended one's forgetting (one that the
     * current assignment still names waits for the next install, which resets this). */
    for (int32_t i = 0; i < m->npeers; i++) {
        const peer_t *p = &m->peers[i];
        int64_t at = !p->used                          ? INT64_MAX
                     : p->state == BK_MEMBER_ALIVE     ? p->last_ts + m->session_ms
                     : m->log_time - p->end_ts <= m->session_ms ? p->end_ts + m->session_ms
                                                        : INT64_MAX;
        next = at < next ? at : next;
    }
    m->expire_at = next;
}

/* -- Applying records ---------------------------------------------------------------------- */

static int32_t peer_alloc(bk_member_t *m)
{
    for (int32_t i = 0; i < m->npeers; i++) {
        if (!m->peers[i].used) {
            return i;
        }
    }
    if (m->npeers == m->cap_peers) {
        int32_t cap = m->cap_peers ? m->cap_peers * 2 : 16;
        peer_t *p = realloc(m->peers, (size_t)cap * sizeof(*p));
        if (!p) {
            return -1;
        }
        memset(p + m->cap_peers, 0, (size_t)(cap - m->cap_peers) * sizeof(*p));
        m->peers = p;
        m->cap_peers = cap;
    }
    return m->npeers++;
}

/* The heartbeat's progress list replaces the peer's. It is decoded into the spare list, so
 * that each task's offset can be compared with the one before: changed_ts is the log time
 * `now` of the first heartbeat that reported the current offset (both lists are ascending). */
static void apply_progress(peer_t *p, rec_t *rec, int64_t now)
{
    int32_t n = 0, task = -1, j = 0, cap;
    progress_t *swap;
    if (rec->nlist > (uint64_t)rec->list.left) {
        return; /* at least a byte an entry */
    }
    if ((int32_t)rec->nlist > p->cap_spare) {
        progress_t *pr = realloc(p->spare, (size_t)rec->nlist * sizeof(*pr));
        if (!pr) {
            return;
        }
        p->spare = pr;
        p->cap_spare = (int32_t)rec->nlist;
    }
    for (uint64_t k = 0; k < rec->nlist; k++) {
        uint64_t d = bk_wire_get_uv(&rec->list);
        int64_t offset = bk_wire_get_sv(&rec->list), lag = (int64_t)bk_wire_get_uv(&rec->list);
        int64_t changed = now;
        if (rec->list.fault || d > BK_ASSIGNCODEC_MAX_TASKS || lag < 0) {
            break;
        }
        task += (int32_t)d + 1;
        if (task >= BK_ASSIGNCODEC_MAX_TASKS) {
            break;
        }
        while (j < p->nprogress && p->progress[j].task < task) {
            j++;
        }
        if (j < p->nprogress && p->progress[j].task == task && p->progress[j].offset == offset) {
            changed = p->progress[j].changed_ts;
        }
        p->spare[n++] = (progress_t){task, offset, lag, changed};
    }
    swap = p->progress;
    p->progress = p->spare;
    p->spare = swap;
    cap = p->cap_progress;
    p->cap_progress = p->cap_spare;
    p->cap_spare = cap;
    p->nprogress = n;
}

static void apply_heartbeat(bk_member_t *m, rec_t *rec, int64_t offset, int64_t ts)
{
    int32_t i = bk_member_peer_find(m, rec->id);
    peer_t *p;

    if (i >= 0 && m->peers[i].inc == rec->inc) {
        p = &m->peers[i];
        if (p->state != BK_MEMBER_ALIVE) {
            return; /* an ended incarnation stays ended */
        }
    } else {
        if (i >= 0 && m->peers[i].inc > rec->inc) {
            return; /* an older incarnation's */
        }
        if (m->log_time - ts > m->session_ms) {
            return; /* it would be dead on arrival */
        }
        if (i >= 0 && m->peers[i].state == BK_MEMBER_ALIVE) {
            peer_end(m, i, BK_MEMBER_REPLACED);
        }
        if (i < 0 && (i = peer_alloc(m)) < 0) {
            bk_log_error("member %s: out of memory for peer %s", m->node_id, rec->id);
            return;
        }
        p = &m->peers[i];
        free(p->progress);
        free(p->spare);
        memset(p, 0, sizeof(*p));
        p->used = 1;
        memcpy(p->id, rec->id, sizeof(p->id));
        p->id_hash = bk_member_id_hash(p->id);
        p->inc = rec->inc;
        p->state = BK_MEMBER_ALIVE;
        p->join_offset = offset;
        m->version++;
        if (m->gone) {
            gone_drop(m, p->id);
        }
        if (strcmp(p->id, m->node_id) == 0 && p->inc == m->inc) {
            m->joined_once = 1;
            m->join_ts = ts;
            m->backoff = m->hb_ms;
        }
        bk_log_debug("member %s: %s (incarnation %" PRIu64 ") joined at offset %" PRId64,
                     m->node_id, p->id, p->inc, offset);
    }
    if (strcmp(p->rack, rec->rack) != 0 || strcmp(p->endpoint, rec->endpoint) != 0 ||
        p->threads != rec->threads) {
        m->version++; /* not for its epoch or last_ts: they change all the time */
    }
    memcpy(p->rack, rec->rack, sizeof(p->rack));
    memcpy(p->endpoint, rec->endpoint, sizeof(p->endpoint));
    p->threads = rec->threads;
    p->ntasks = rec->ntasks;
    p->layout = rec->layout;
    p->epoch = rec->epoch;
    if (ts > p->last_ts) {
        p->last_ts = ts;
    }
    lower_expiry(m, p->last_ts + m->session_ms);
    apply_progress(p, rec, m->log_time);
}

static void apply_leave(bk_member_t *m, const rec_t *rec)
{
    int32_t i = bk_member_peer_find(m, rec->id);
    if (bk_member_peer_alive(m, i) && m->peers[i].inc == rec->inc) {
        peer_end(m, i, BK_MEMBER_LEFT);
    }
}

static void apply_release(bk_member_t *m, rec_t *rec)
{
    int32_t i = bk_member_peer_find(m, rec->id), t = -1;
    if (!bk_member_peer_alive(m, i) || m->peers[i].inc != rec->inc) {
        return;
    }
    for (uint64_t k = 0; k < rec->nlist; k++) {
        uint64_t d = bk_wire_get_uv(&rec->list);
        if (rec->list.fault || d >= (uint64_t)m->nown) {
            break;
        }
        t += (int32_t)d + 1;
        if (t >= m->nown) {
            break;
        }
        if (m->own[t] == i) {
            free_task(m, t);
        }
    }
}

void bk_member_free_assignment(bk_member_t *m)
{
    bk_assigncodec_destroy(m->cur);
    free(m->slot_peer);
    free(m->slot_inc);
    free(m->own);
    free(m->rel_sent);
    free(m->told);
    m->cur = NULL;
    m->slot_peer = NULL;
    m->slot_inc = NULL;
    m->own = NULL;
    m->rel_sent = NULL;
    m->told = NULL;
}

int bk_member_tables_alloc(bk_member_t *m, const bk_assigncodec_t *a, bk_member_tables_t *t)
{
    int32_t *lost = realloc(m->lost_tasks, (size_t)(a->ntasks + m->nown + 1) * sizeof(*lost));

    if (lost) {
        m->lost_tasks = lost;
    }
    t->slot_peer = malloc((size_t)(a->nnodes + 1) * sizeof(*t->slot_peer));
    t->slot_inc = malloc((size_t)(a->nnodes + 1) * sizeof(*t->slot_inc));
    t->own = malloc((size_t)(a->ntasks + 1) * sizeof(*t->own));
    t->rel_sent = calloc((size_t)a->ntasks + 1, 1);
    t->told = calloc((size_t)a->ntasks + 1, 1);
    if (!lost || !t->slot_peer || !t->slot_inc || !t->own || !t->rel_sent || !t->told) {
        bk_member_tables_free(t);
        return -1;
    }
    return 0;
}

void bk_member_tables_free(bk_member_tables_t *t)
{
    free(t->slot_peer);
    free(t->slot_inc);
    free(t->own);
    free(t->rel_sent);
    free(t->told);
    memset(t, 0, sizeof(*t));
}

void bk_member_tables_take(bk_member_t *m, bk_assigncodec_t *a, bk_member_tables_t *t)
{
    bk_member_free_assignment(m);
    m->cur = a;
    m->epoch = a ? a->epoch : 0;
    m->slot_peer = t->slot_peer;
    m->slot_inc = t->slot_inc;
    m->own = t->own;
    m->rel_sent = t->rel_sent;
    m->told = t->told;
    m->nown = a ? a->ntasks : 0;
    memset(t, 0, sizeof(*t));
}

/* Makes `next` (owned from now on) the current assignment, applied at `offset`. */
static int install(bk_member_t *m, bk_assigncodec_t *next, int64_t offset)
{
    bk_member_tables_t t;
    int32_t self;

    if (bk_member_tables_alloc(m, next, &t) != 0) {
        return -1;
    }
    /* A slot means the incarnation of its id that is alive where the assignment is applied:
     * the same in every view, as the position is. */
    for (int32_t s = 0; s < next->nnodes; s++) {
        int32_t p = next->nodes[s].id[0] ? bk_member_peer_find(m, next->nodes[s].id) : -1;
        t.slot_peer[s] = bk_member_peer_alive(m, p) ? p : -1;
        t.slot_inc[s] = t.slot_peer[s] >= 0 ? m->peers[p].inc : 0;
    }
    for (int32_t i = 0; i < next->ntasks; i++) {
        t.own[i] = i < m->nown ? m->own[i] : -1;
        t.rel_sent[i] = i < m->nown ? m->rel_sent[i] : 0;
        t.told[i] = i < m->nown ? m->told[i] : 0;
    }
    bk_member_tables_take(m, next, &t);
    m->expire_at = INT64_MIN; /* peers it no longer names may be forgotten now */
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->own[t] < 0) {
            give(m, t);
        }
    }
    m->version++;
    m->probe_at = m->warmup ? bk_clock_wall_ms() + m->probe_ms : 0;
    self = bk_member_self_peer(m);
    if (self >= 0) {
        int32_t act = 0, wait = 0, rel = 0;
        for (int32_t t = 0; t < m->nown; t++) {
            int32_t a = assignee(m, t);
            act += a == self;
            wait += a == self && m->own[t] != self;
            rel += a != self && m->own[t] == self;
        }
        bk_log_info("member %s: epoch %" PRIu64 " at offset %" PRId64 ": %d active (%d waiting"
                    " for release), %d to release",
                    m->node_id, m->epoch, offset, act, wait, rel);
    }
    return 0;
}

static void apply_assign(bk_member_t *m, const rec_t *rec, int64_t offset)
{
    int kind;
    uint64_t epoch, base;
    int32_t author = bk_member_peer_find(m, rec->id);
    bk_assigncodec_t *next;
    char err[256];

    if (bk_assigncodec_peek(rec->payload, rec->payload_len, &kind, &epoch, &base, err,
                            sizeof(err)) != 0) {
        bk_log_warn("member %s: assignment at offset %" PRId64 " unreadable: %s", m->node_id,
                    offset, err);
        return;
    }
    /* Rule "based on": the first assignment based on the current epoch wins. */
    if (base != m->epoch) {
        bk_log_debug("member %s: epoch %" PRIu64 " at offset %" PRId64 " is based on %" PRIu64
                     ", not on the current %" PRIu64 ": ignored",
                     m->node_id, epoch, offset, base, m->epoch);
        return;
    }
    /* Rule "author": only the leader of the position where it lands may assign. */
    if (author < 0 || author != bk_member_leader_peer(m) || m->peers[author].inc != rec->inc) {
        bk_log_debug("member %s: epoch %" PRIu64 " at offset %" PRId64 " is from %s, not the"
                     " leader: ignored",
                     m->node_id, epoch, offset, rec->id);
        return;
    }
    if (kind == BK_ASSIGNCODEC_DELTA) {
        next = m->cur
                   ? bk_assigncodec_apply(m->cur, rec->payload, rec->payload_len, err, sizeof(err))
                   : NULL;
        if (!m->cur) {
            snprintf(err, sizeof(err), "a delta without its base");
        }
    } else {
        next = bk_assigncodec_decode(rec->payload, rec->payload_len, err, sizeof(err));
    }
    if (!next) {
        bk_log_error("member %s: epoch %" PRIu64 " at offset %" PRId64 " cannot be read: %s",
                     m->node_id, epoch, offset, err);
        return;
    }
    if (install(m, next, offset) != 0) {
        bk_log_error("member %s: out of memory applying epoch %" PRIu64, m->node_id, epoch);
        bk_assigncodec_destroy(next);
    }
}

/* Appends "S=N" to the list of moves; -1 if it would not fit. */
int bk_member_gens_append(bk_member_t *m, uint64_t sub, uint64_t tasks)
{
    char item[48];
    size_t have = strlen(m->gens);
    int n = snprintf(item, sizeof(item), "%s%llu=%llu", have ? "," : "", (unsigned long long)sub,
                     (unsigned long long)tasks);
    if (n < 0 || have + (size_t)n > GENS_MAX) {
        return -1;
    }
    memcpy(m->gens + have, item, (size_t)n + 1);
    m->ngens++;
    return 0;
}

int bk_member_drained_add(bk_member_t *m, int32_t t)
{
    int32_t lo = 0, hi = m->ndrained;
    while (lo < hi) { /* the first >= t */
        int32_t mid = lo + (hi - lo) / 2;
        if (m->drained[mid] < t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < m->ndrained && m->drained[lo] == t) {
        return 0;
    }
    if (m->ndrained == m->cap_drained) {
        int32_t cap = m->cap_drained ? m->cap_drained * 2 : 16;
        int32_t *d = realloc(m->drained, (size_t)cap * sizeof(*d));
        if (!d) {
            return -1;
        }
        m->drained = d;
        m->cap_drained = cap;
    }
    memmove(&m->drained[lo + 1], &m->drained[lo], (size_t)(m->ndrained - lo) * sizeof(int32_t));
    m->drained[lo] = t;
    m->ndrained++;
    return 0;
}

/* Rule "drained" (docs/cluster.md): a task of a generation that a move replaces read the
 * barriers of every passthrough task and committed what came before them. Whoever ran it
 * says so, from any incarnation: the statement stays true, and a repeat adds nothing. */
static void apply_drained(bk_member_t *m, const rec_t *rec, int64_t offset)
{
    if (bk_member_drained_add(m, rec->drained) != 0) {
        bk_log_error("member %s: out of memory applying the drained record at offset %" PRId64,
                     m->node_id, offset);
        return;
    }
    m->version++;
}

/* Rule "generation" (docs/cluster.md): the leader of the record's position adds the next
 * generation of a subtopology; the record names how many moves it follows, so that of two
 * written on the same list (two leaders, or a leader's retry) only the first counts. */
static void apply_generation(bk_member_t *m, const rec_t *rec, int64_t offset)
{
    int32_t author = bk_member_peer_find(m, rec->id);
    if (author < 0 || author != bk_member_leader_peer(m) || m->peers[author].inc != rec->inc) {
        bk_log_debug("member %s: generation at offset %" PRId64 " is from %s, not the leader: "
                     "ignored", m->node_id, offset, rec->id);
        return;
    }
    if (rec->gen_index != (uint64_t)m->ngens || rec->gen_tasks < 1) {
        bk_log_debug("member %s: generation at offset %" PRId64 " follows %" PRIu64 " move(s), "
                     "not %d: ignored", m->node_id, offset, rec->gen_index, (int)m->ngens);
        return;
    }
    if (bk_member_gens_append(m, rec->gen_sub, rec->gen_tasks) != 0) {
        bk_log_error("member %s: generation at offset %" PRId64 ": more moves than a view "
                     "keeps (%d bytes): ignored", m->node_id, offset, GENS_MAX);
        return;
    }
    if (!m->observe) { /* an observer (beck status) replays history: not news */
        bk_log_info("member %s: subtopology %llu moves to %llu task(s) (moves: %s)", m->node_id,
                    (unsigned long long)rec->gen_sub, (unsigned long long)rec->gen_tasks,
                    m->gens);
    }
    m->version++;
}

/* A note for this node (or every node), written after this member started reading: older
 * ones were meant for an earlier run. An observer takes none. */
static void apply_note(bk_member_t *m, const rec_t *rec, int64_t offset)
{
    bk_member_note_t *n;
    /* an observer takes only the notes sent to it by name (answers to a command) */
    if ((m->observe && !rec->to[0]) || offset < m->catchup_to ||
        (rec->to[0] && strcmp(rec->to, m->node_id)) ||
        (strcmp(rec->id, m->node_id) == 0 && rec->inc == m->inc)) {
        return;
    }
    if (m->nnotes >= NOTES_MAX) {
        bk_log_warn("member %s: note '%s' from %s dropped: %d not taken yet", m->node_id, rec->kind,
                    rec->id, NOTES_MAX);
        return;
    }
    n = &m->notes[m->nnotes++];
    snprintf(n->from, sizeof(n->from), "%s", rec->id);
    snprintf(n->kind, sizeof(n->kind), "%s", rec->kind);
    snprintf(n->text, sizeof(n->text), "%s", rec->text);
    m->version++;
}

void bk_member_apply(bk_member_t *m, const rd_kafka_message_t *msg)
{
    bk_member_apply_record(m, msg->payload, msg->len, msg->offset,
                           rd_kafka_message_timestamp(msg, NULL));
}

void bk_member_apply_record(bk_member_t *m, const void *payload, size_t len, int64_t offset,
                            int64_t ts)
{
    rec_t rec;

    m->next_offset = offset + 1;
    m->ckpt_bytes += (int64_t)len;
    if (bk_member_rec_parse(payload, len, &rec) != 0) {
        bk_log_debug("member %s: record at offset %" PRId64 " is not a member record: skipped",
                     m->node_id, offset);
        return;
    }
    /* A checkpoint is only noted, before log time moves: members built before checkpoints
     * skip it as a type they do not know, and their log time must agree with ours. */
    if (rec.type == REC_CHECKPOINT) {
        m->ckpt_offset = offset;
        m->ckpt_log_time = m->log_time;
        m->ckpt_bytes = 0;
        return;
    }
    /* An observer has no session timeout of its own: it applies the one the members announce
     * (they must all agree on it), from before log time moves, as they would. */
    if (m->session_announced && rec.type == REC_HEARTBEAT && rec.session_ms > 0 &&
        rec.session_ms != m->session_ms) {
        m->session_ms = rec.session_ms;
        m->expire_at = INT64_MIN;
        m->version++;
    }
    /* Log time: the largest timestamp of a member record seen (docs/cluster.md, Log time). */
    if (m->log_time > 0 && ts - m->log_time > m->session_ms / 2) {
        excise_silence(m, ts - m->log_time);
    }
    if (ts > m->log_time) {
        m->log_time = ts;
        expire(m);
    }
    switch (rec.type) {
    case REC_HEARTBEAT:
        apply_heartbeat(m, &rec, offset, ts);
        break;
    case REC_LEAVE:
        apply_leave(m, &rec);
        break;
    case REC_ASSIGN:
        apply_assign(m, &rec, offset);
        break;
    case REC_RELEASE:
        apply_release(m, &rec);
        break;
    case REC_NOTE:
        apply_note(m, &rec, offset);
        break;
    case REC_GENERATION:
        apply_generation(m, &rec, offset);
        break;
    case REC_DRAINED:
        apply_drained(m, &rec, offset);
        break;
    default:
        break;
    }
}
