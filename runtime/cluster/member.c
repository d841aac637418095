/* member.c - membership through the control topic: the record format, the view that every
 * member derives from the log in the same way, the leader's duty and the member thread.
 * The rules are in docs/cluster.md; each one is marked here with its name there. */
#define _GNU_SOURCE

#include "cluster/member.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "cluster/assign.h"
#include "cluster/assigncodec.h"
#include "devbroker/devctl.h"
#include "engine/kafka.h"
#include "base/log.h"
#include "base/wire.h"

/* How long an idle member thread waits for a record before it looks at the clock again:
 * bounds how late a lost verdict or a stop request can be (heartbeats wake it on time). */
#define POLL_MS 100
/* After a batch the thread lets records gather this long before it reads again, instead of
 * waking for each: with 100 members each heartbeating once a second, waking per record was
 * most of the cost (context switches). It adds at most this much to every hop. */
#define BATCH_MS 10
/* Records applied under one lock hold. */
#define MAX_BATCH 256
/* A member that expects someone's session to end writes a tick record so that log time
 * reaches the end without waiting for the next heartbeat. The leader ticks first; the next
 * two in join order follow TICK_STAGGER_MS apart in case the leader is the one that died. */
#define TICK_RANKS 3
#define TICK_STAGGER_MS 50
/* Members forgotten by the rules that an observer still shows (as ended peers), the latest
 * ones: `beck status` should say that a node left a minute ago, not that it never was. */
#define GONE_MAX 32

/* -- Records ---------------------------------------------------------------------------------
 * value: u8 magic, u8 version, u8 type, str node id, uvar incarnation, then by type:
 *   HEARTBEAT str rack, str endpoint, uvar threads, uvar ntasks, uvar layout, uvar epoch,
 *             uvar n, n x (uvar task - previous task, svar offset, uvar lag), tasks ascending,
 *             uvar heartbeat interval ms, uvar session timeout ms (both absent from the
 *             records of members built before they were added)
 *   LEAVE     -
 *   ASSIGN    the rest: an assigncodec message (full or delta; epochs in its header)
 *   RELEASE   uvar epoch, uvar n, n x uvar (task - previous task), tasks ascending
 *   TICK      -
 *   NOTE      str to (a node id, "" for every node), str kind, str text (bk_member_note)
 * uvar: LEB128; svar: zigzag LEB128; str: uvar length + bytes. The key is "<type>/<node id>"
 * ("h/n1"); nothing reads it. A reader ignores bytes past what it knows, and records of a
 * type or version it does not know (docs/cluster.md, Records). */
#define WIRE_MAGIC 0xbe
#define WIRE_VERSION 1
enum { REC_HEARTBEAT = 1, REC_LEAVE = 2, REC_ASSIGN = 3, REC_RELEASE = 4, REC_TICK = 5,
       REC_NOTE = 6 };
static const char rec_key_char[] = "?hlartn";
/* Notes delivered and not yet taken; more are dropped (with a warning): their senders time
 * out and fall back. */
#define NOTES_MAX 64

/* Copies a string into out[BK_MEMBER_MAX_ID + 1]; longer ones, or ones with a NUL, are bad. */
static void r_str(bk_wire_reader_t *r, char *out)
{
    size_t n;
    const char *s = bk_wire_get_str(r, BK_MEMBER_MAX_ID, &n);
    memcpy(out, s, n);
    out[n] = '\0';
}

/* A record as read; strings and lists point into the record or into `tasks`, which the
 * reader owns. */
typedef struct rec {
    int type;
    char id[BK_MEMBER_MAX_ID + 1];
    uint64_t inc;
    /* HEARTBEAT */
    char rack[BK_MEMBER_MAX_ID + 1], endpoint[BK_MEMBER_MAX_ID + 1];
    int32_t threads, ntasks;
    uint32_t layout;
    uint64_t epoch;        /* also RELEASE */
    bk_wire_reader_t list; /* HEARTBEAT progress, RELEASE tasks: decoded by the applier */
    uint64_t nlist;
    int hb_ms, session_ms; /* HEARTBEAT: the sender's settings, 0: not announced */
    /* ASSIGN */
    const uint8_t *payload;
    size_t payload_len;
    /* NOTE */
    char to[BK_MEMBER_MAX_ID + 1], kind[BK_MEMBER_MAX_ID + 1];
    char text[BK_MEMBER_NOTE_MAX + 1];
} rec_t;

/* The settings a heartbeat announces after its progress list (for observers, which have no
 * settings of their own). Read on a copy of the cursor: a record without them, or with a
 * malformed list (which the applier cuts short), is still a heartbeat. */
static void rec_parse_settings(rec_t *rec)
{
    bk_wire_reader_t r = rec->list;
    uint64_t hb, session;

    rec->hb_ms = rec->session_ms = 0;
    if (rec->nlist > (uint64_t)r.left) {
        return; /* at least a byte an entry */
    }
    for (uint64_t k = 0; k < rec->nlist; k++) {
        bk_wire_get_uv(&r);
        bk_wire_get_sv(&r);
        bk_wire_get_uv(&r);
    }
    if (r.fault || r.left == 0) {
        return;
    }
    hb = bk_wire_get_uv(&r);
    session = bk_wire_get_uv(&r);
    /* conf.c's bounds, roughly: nothing a member would send otherwise */
    if (!r.fault && hb > 0 && hb <= 3600 * 1000 && session > 2 * hb &&
        session <= 24 * 3600 * 1000) {
        rec->hb_ms = (int)hb;
        rec->session_ms = (int)session;
    }
}

/* 0, or -1 when the record is not one of ours or is malformed. */
static int rec_parse(const void *buf, size_t len, rec_t *rec)
{
    bk_wire_reader_t r = {buf, len, NULL};
    uint64_t v;

    if (len < 3 || bk_wire_get_u8(&r) != WIRE_MAGIC || bk_wire_get_u8(&r) != WIRE_VERSION) {
        return -1;
    }
    rec->type = bk_wire_get_u8(&r);
    r_str(&r, rec->id);
    rec->inc = bk_wire_get_uv(&r);
    if (r.fault || !rec->id[0]) {
        return -1;
    }
    switch (rec->type) {
    case REC_HEARTBEAT:
        r_str(&r, rec->rack);
        r_str(&r, rec->endpoint);
        v = bk_wire_get_uv(&r);
        rec->threads = v >= 1 && v <= 65536 ? (int32_t)v : 1;
        v = bk_wire_get_uv(&r);
        rec->ntasks = v <= BK_ASSIGNCODEC_MAX_TASKS ? (int32_t)v : 0;
        rec->layout = (uint32_t)bk_wire_get_uv(&r);
        rec->epoch = bk_wire_get_uv(&r);
        rec->nlist = bk_wire_get_uv(&r);
        rec->list = r;
        rec_parse_settings(rec);
        break;
    case REC_RELEASE:
        rec->epoch = bk_wire_get_uv(&r);
        rec->nlist = bk_wire_get_uv(&r);
        rec->list = r;
        break;
    case REC_ASSIGN:
        rec->payload = r.p;
        rec->payload_len = r.left;
        break;
    case REC_NOTE: {
        size_t n;
        const char *text;
        r_str(&r, rec->to);
        r_str(&r, rec->kind);
        text = bk_wire_get_str(&r, BK_MEMBER_NOTE_MAX, &n);
        if (!r.fault) {
            memcpy(rec->text, text, n);
        }
        rec->text[r.fault ? 0 : n] = '\0';
        break;
    }
    case REC_LEAVE:
    case REC_TICK:
        break;
    default:
        return -1; /* a later version's type: not ours to read */
    }
    return r.fault ? -1 : 0;
}

/* -- State -------------------------------------------------------------------------------- */

typedef struct progress {
    int32_t task;
    int64_t offset, lag;
    int64_t changed_ts; /* a peer's: log time when its reported offset last changed */
} progress_t;

/* What the log says about one node id: its latest incarnation. */
typedef struct peer {
    int used;
    char id[BK_MEMBER_MAX_ID + 1], rack[BK_MEMBER_MAX_ID + 1], endpoint[BK_MEMBER_MAX_ID + 1];
    uint64_t inc;
    int32_t threads, ntasks;
    uint32_t layout;
    int state;
    int64_t join_offset, last_ts, end_ts;
    uint64_t epoch;
    progress_t *progress; /* from its latest heartbeat, tasks ascending */
    int32_t nprogress, cap_progress;
    progress_t *spare; /* the list before, while the next heartbeat is decoded; then swapped */
    int32_t cap_spare;
} peer_t;

enum { PH_START, PH_CATCHUP, PH_RUN, PH_FAILED };

struct bk_member_s {
    /* Set by bk_member_new, read-only afterwards. */
    const bk_conf_t *conf;
    char node_id[BK_MEMBER_MAX_ID + 1], rack[BK_MEMBER_MAX_ID + 1];
    char endpoint[BK_MEMBER_MAX_ID + 1], topic[BK_MEMBER_MAX_ID + 16];
    int32_t threads, ntasks, standbys;
    int warmup;             /* assign.h warm-up, with acceptable_lag */
    int64_t acceptable_lag;
    int probe_ms;           /* warm-up: how often the leader looks whether replicas caught up */
    uint32_t layout; /* hash of the task count and names: members that differ share nothing */
    int hb_ms, session_ms, dev_port;
    int observe;           /* never joins or writes (bk_member_conf_t) */
    int session_announced; /* an observer's session_ms follows the heartbeats' */
    void (*on_change)(void *opaque);
    void *opaque;
    rd_kafka_t *consumer, *producer;
    pthread_t thread;
    int started;
    volatile int stop;

    pthread_mutex_t lock; /* guards everything below */
    uint64_t version;
    /* What the log says (docs/cluster.md, The view). */
    int64_t log_time, next_offset;
    peer_t *peers;
    int32_t npeers, cap_peers;
    peer_t *gone; /* an observer's [GONE_MAX] forgotten peers, for show only (no progress) */
    int32_t ngone;
    bk_assigncodec_t *cur; /* the current assignment, NULL before the first */
    uint64_t epoch;
    int32_t *slot_peer; /* [cur->nnodes] peer that a slot meant when cur was applied, -1 */
    uint64_t *slot_inc; /* [cur->nnodes] its incarnation then */
    int32_t nown;       /* cur->ntasks */
    int32_t *own;       /* [nown] the peer that holds the task, -1: nobody */
    uint8_t *rel_sent;  /* [nown] this member published a release of it, not yet seen */
    uint8_t *told;      /* [nown] a view listed it in running; the node has not released it */
    /* This member. */
    uint64_t inc;
    int phase;
    int caught_up; /* latched: read up to where the log ended at start (bk_member_view_t) */
    const char *error;
    int64_t catchup_to, next_hb, first_hb, join_ts;
    int joined_once; /* this incarnation's heartbeat was seen in the log */
    int lost;
    int64_t lost_at, backoff;
    int32_t nlost, *lost_tasks; /* tasks held when lost that the node has not released */
    /* The leader's publication in flight (docs/cluster.md, Publishing). */
    int pending;
    uint64_t pending_base;
    int64_t pending_offset;
    intptr_t pending_seq; /* tags the publication, so that a late report of the one before
                           * cannot clear this one (it did: epoch 2 went out twice) */
    int64_t last_tick;
    /* Warm-up probing: when the leader recomputes the current epoch to see whether warm-up
     * replicas caught up (0: no probe due). Set at every epoch (a new leader does not know
     * whether the one before held tasks back), kept while the result holds tasks back. */
    int64_t probe_at;
    int64_t next_wake; /* when the member thread must look again: heartbeat, tick */
    int leave_state;   /* 0 in flight, 1 delivered, -1 failed */
    uint64_t notified;

    bk_member_note_t *notes; /* [NOTES_MAX] delivered, not taken yet (under lock) */
    int32_t nnotes;

    pthread_mutex_t plock; /* guards the progress this node reports */
    progress_t *prog;
    int32_t nprog, cap_prog;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* start time in ms and the pid: distinct across restarts, increasing while clocks do. */
static uint64_t make_incarnation(void)
{
    return (uint64_t)now_ms() * 1000 + (uint64_t)(getpid() % 1000);
}

static uint32_t fnv1a(uint32_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 16777619u;
    }
    return h;
}

static int32_t peer_find(const bk_member_t *m, const char *id)
{
    for (int32_t i = 0; i < m->npeers; i++) {
        if (m->peers[i].used && strcmp(m->peers[i].id, id) == 0) {
            return i;
        }
    }
    return -1;
}

static int peer_alive(const bk_member_t *m, int32_t i)
{
    return i >= 0 && m->peers[i].used && m->peers[i].state == BK_MEMBER_ALIVE;
}

/* This incarnation of this member as a peer, alive; -1 otherwise (always for an observer,
 * whatever node ids the log holds). */
static int32_t self_peer(const bk_member_t *m)
{
    int32_t i = m->observe ? -1 : peer_find(m, m->node_id);
    return peer_alive(m, i) && m->peers[i].inc == m->inc ? i : -1;
}

/* Leader: the live member that joined first (docs/cluster.md, Leader). */
static int32_t leader_peer(const bk_member_t *m)
{
    int32_t best = -1;
    for (int32_t i = 0; i < m->npeers; i++) {
        if (peer_alive(m, i) &&
            (best < 0 || m->peers[i].join_offset < m->peers[best].join_offset)) {
            best = i;
        }
    }
    return best;
}

/* Rank of peer `i` among the live ones in join order. */
static int32_t peer_rank(const bk_member_t *m, int32_t i)
{
    int32_t rank = 0;
    for (int32_t j = 0; j < m->npeers; j++) {
        if (j != i && peer_alive(m, j) && m->peers[j].join_offset < m->peers[i].join_offset) {
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
    return peer_alive(m, p) && m->peers[p].inc == m->slot_inc[s] ? p : -1;
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
    int32_t self = self_peer(m);
    if (self >= 0 && (m->own[t] == self || assignee(m, t) == self)) {
        m->version++;
    }
    m->own[t] = -1;
    give(m, t);
}

/* A peer's incarnation ends (died, left or was replaced): what it held is free. Final. */
static void peer_end(bk_member_t *m, int32_t i, int state)
{
    peer_t *p = &m->peers[i];
    static const char *why[] = {"alive", "died", "left", "was replaced"};

    p->state = state;
    p->end_ts = m->log_time;
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->own[t] == i) {
            free_task(m, t);
        }
    }
    m->version++;
    bk_log_debug("member %s: %s (incarnation %" PRIu64 ") %s", m->node_id, p->id, p->inc,
                 why[state]);
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

/* Log time moved: sessions that ended are over; peers over for a session are forgotten
 * (docs/cluster.md, Liveness). Runs per record, so every member does it at the same place. */
static void expire(bk_member_t *m)
{
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
    int32_t i = peer_find(m, rec->id);
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
    apply_progress(p, rec, m->log_time);
}

static void apply_leave(bk_member_t *m, const rec_t *rec)
{
    int32_t i = peer_find(m, rec->id);
    if (peer_alive(m, i) && m->peers[i].inc == rec->inc) {
        peer_end(m, i, BK_MEMBER_LEFT);
    }
}

static void apply_release(bk_member_t *m, rec_t *rec)
{
    int32_t i = peer_find(m, rec->id), t = -1;
    if (!peer_alive(m, i) || m->peers[i].inc != rec->inc) {
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

/* Makes `next` (owned from now on) the current assignment, applied at `offset`. */
static int install(bk_member_t *m, bk_assigncodec_t *next, int64_t offset)
{
    int32_t *slot_peer = malloc((size_t)(next->nnodes + 1) * sizeof(*slot_peer));
    uint64_t *slot_inc = malloc((size_t)(next->nnodes + 1) * sizeof(*slot_inc));
    int32_t *own = malloc((size_t)(next->ntasks + 1) * sizeof(*own));
    uint8_t *rel_sent = calloc((size_t)next->ntasks + 1, 1);
    uint8_t *told = calloc((size_t)next->ntasks + 1, 1);
    int32_t *lost_tasks =
        realloc(m->lost_tasks, (size_t)(next->ntasks + m->nown + 1) * sizeof(*lost_tasks));
    int32_t self;

    if (lost_tasks) {
        m->lost_tasks = lost_tasks;
    }
    if (!slot_peer || !slot_inc || !own || !rel_sent || !told || !lost_tasks) {
        free(slot_peer);
        free(slot_inc);
        free(own);
        free(rel_sent);
        free(told);
        return -1;
    }
    /* A slot means the incarnation of its id that is alive where the assignment is applied:
     * the same in every view, as the position is. */
    for (int32_t s = 0; s < next->nnodes; s++) {
        int32_t p = next->nodes[s].id[0] ? peer_find(m, next->nodes[s].id) : -1;
        slot_peer[s] = peer_alive(m, p) ? p : -1;
        slot_inc[s] = slot_peer[s] >= 0 ? m->peers[p].inc : 0;
    }
    for (int32_t t = 0; t < next->ntasks; t++) {
        own[t] = t < m->nown ? m->own[t] : -1;
        rel_sent[t] = t < m->nown ? m->rel_sent[t] : 0;
        told[t] = t < m->nown ? m->told[t] : 0;
    }
    bk_assigncodec_destroy(m->cur);
    free(m->slot_peer);
    free(m->slot_inc);
    free(m->own);
    free(m->rel_sent);
    free(m->told);
    m->cur = next;
    m->epoch = next->epoch;
    m->slot_peer = slot_peer;
    m->slot_inc = slot_inc;
    m->own = own;
    m->rel_sent = rel_sent;
    m->told = told;
    m->nown = next->ntasks;
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->own[t] < 0) {
            give(m, t);
        }
    }
    m->version++;
    m->probe_at = m->warmup ? now_ms() + m->probe_ms : 0;
    self = self_peer(m);
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
    int32_t author = peer_find(m, rec->id);
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
    if (author < 0 || author != leader_peer(m) || m->peers[author].inc != rec->inc) {
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

/* A note for this node (or every node), written after this member started reading: older
 * ones were meant for an earlier run. An observer takes none. */
static void apply_note(bk_member_t *m, const rec_t *rec, int64_t offset)
{
    bk_member_note_t *n;
    if (m->observe || offset < m->catchup_to || (rec->to[0] && strcmp(rec->to, m->node_id)) ||
        (strcmp(rec->id, m->node_id) == 0 && rec->inc == m->inc)) {
        return;
    }
    if (m->nnotes >= NOTES_MAX) {
        bk_log_warn("member %s: note '%s' from %s dropped: %d not taken yet", m->node_id,
                    rec->kind, rec->id, NOTES_MAX);
        return;
    }
    n = &m->notes[m->nnotes++];
    snprintf(n->from, sizeof(n->from), "%s", rec->id);
    snprintf(n->kind, sizeof(n->kind), "%s", rec->kind);
    snprintf(n->text, sizeof(n->text), "%s", rec->text);
    m->version++;
}

static void apply(bk_member_t *m, const rd_kafka_message_t *msg)
{
    int64_t ts = rd_kafka_message_timestamp(msg, NULL);
    rec_t rec;

    m->next_offset = msg->offset + 1;
    if (rec_parse(msg->payload, msg->len, &rec) != 0) {
        bk_log_debug("member %s: record at offset %" PRId64 " is not a member record: skipped",
                     m->node_id, msg->offset);
        return;
    }
    /* An observer has no session timeout of its own: it applies the one the members announce
     * (they must all agree on it), from before log time moves, as they would. */
    if (m->session_announced && rec.type == REC_HEARTBEAT && rec.session_ms > 0 &&
        rec.session_ms != m->session_ms) {
        m->session_ms = rec.session_ms;
        m->version++;
    }
    /* Log time: the largest timestamp of a member record seen (docs/cluster.md, Log time). */
    if (ts > m->log_time) {
        m->log_time = ts;
        expire(m);
    }
    switch (rec.type) {
    case REC_HEARTBEAT:
        apply_heartbeat(m, &rec, msg->offset, ts);
        break;
    case REC_LEAVE:
        apply_leave(m, &rec);
        break;
    case REC_ASSIGN:
        apply_assign(m, &rec, msg->offset);
        break;
    case REC_RELEASE:
        apply_release(m, &rec);
        break;
    case REC_NOTE:
        apply_note(m, &rec, msg->offset);
        break;
    default:
        break;
    }
}

/* -- Producing ---------------------------------------------------------------------------- */

static void w_header(bk_wire_buf_t *w, const bk_member_t *m, int type)
{
    bk_wire_put_u8(w, WIRE_MAGIC);
    bk_wire_put_u8(w, WIRE_VERSION);
    bk_wire_put_u8(w, (uint8_t)type);
    bk_wire_put_str(w, m->node_id);
    bk_wire_put_uv(w, m->inc);
}

/* Queues a record (w freed); 0 or -1. Non-blocking: safe under the lock. An assignment's
 * delivery report carries the publication's sequence number. */
static int produce(bk_member_t *m, int type, bk_wire_buf_t *w, int64_t ts)
{
    char key[BK_MEMBER_MAX_ID + 3];
    intptr_t tag = type | (type == REC_ASSIGN ? m->pending_seq << 8 : 0);
    rd_kafka_resp_err_t err;

    if (w->oom) {
        free(w->p);
        bk_log_error("member %s: out of memory building a record", m->node_id);
        return -1;
    }
    snprintf(key, sizeof(key), "%c/%s", rec_key_char[type], m->node_id);
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

static void send_heartbeat(bk_member_t *m, int64_t now)
{
    bk_wire_buf_t w = {0};
    int32_t prev = -1;

    w_header(&w, m, REC_HEARTBEAT);
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
    if (produce(m, REC_HEARTBEAT, &w, now) == 0 && !m->first_hb) {
        m->first_hb = now;
    }
}

static void send_tick(bk_member_t *m, int64_t now)
{
    bk_wire_buf_t w = {0};
    w_header(&w, m, REC_TICK);
    produce(m, REC_TICK, &w, now);
}

/* -- The leader's duty (docs/cluster.md, Publishing) --------------------------------------- */

/* A member's layout; an observer has none of its own and takes the leader's, whose layout is
 * the one that the leader assigns (so its `stable` is the leader's). */
static uint32_t own_layout(const bk_member_t *m)
{
    int32_t leader;
    if (!m->observe) {
        return m->layout;
    }
    leader = leader_peer(m);
    return leader >= 0 ? m->peers[leader].layout : m->layout;
}

static int eligible(const bk_member_t *m, int32_t i, uint32_t layout)
{
    return peer_alive(m, i) && m->peers[i].layout == layout;
}

/* The current assignment covers exactly the eligible live members, each incarnation as it
 * was when the assignment was applied. */
static int stable(const bk_member_t *m)
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
static void lead(bk_member_t *m, int64_t now, int probe)
{
    int32_t n = 0, nlags = 0, width = m->cur ? m->cur->k : 0;
    int32_t *idx = malloc((size_t)m->npeers * sizeof(*idx) + 1);
    bk_assign_member_t *members = calloc((size_t)m->npeers + 1, sizeof(*members));
    int32_t *pa = malloc(((size_t)m->ntasks + 1) * sizeof(*pa));
    int32_t *ps = malloc(((size_t)m->ntasks * (size_t)width + 1) * sizeof(*ps));
    bk_assign_lag_t *lags = NULL;
    bk_assign_result_t res = {0};
    bk_assign_input_t in;
    bk_assigncodec_t *next = NULL;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    bk_wire_buf_t w = {0};
    char err[256];

    if (!idx || !members || !pa || !ps) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
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
            if (p->progress[k].task < m->ntasks) {
                lags[nlags++] = (bk_assign_lag_t){p->progress[k].task, j, p->progress[k].lag};
            }
        }
    }
    if (m->cur && bk_assigncodec_to_prev(m->cur, members, n, m->ntasks, pa, ps, width) != 0) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    in = (bk_assign_input_t){.members = members,
                             .nmembers = n,
                             .ntasks = m->ntasks,
                             .standbys = m->standbys,
                             .prev_active = m->cur ? pa : NULL,
                             .prev_standby = m->cur ? ps : NULL,
                             .prev_width = width,
                             .lags = lags,
                             .nlags = nlags,
                             .warmup = m->warmup,
                             .acceptable_lag = m->acceptable_lag};
    if (bk_assign_compute(&in, &res, err, sizeof(err)) != 0) {
        goto fail;
    }
    next = bk_assigncodec_from_result(m->cur, &in, &res, m->epoch + 1, err, sizeof(err));
    if (!next) {
        goto fail;
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
    w_header(&w, m, REC_ASSIGN);
    bk_wire_put(&w, buf, len);
    m->pending_seq = (m->pending_seq + 1) & 0xffffff;
    if (produce(m, REC_ASSIGN, &w, now) != 0) {
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
    free(members);
    free(idx);
}

/* Writes a tick when someone's session should have ended by now and log time has not got
 * there: the leader first, then the next in join order (docs/cluster.md, Ticks). */
static void maybe_tick(bk_member_t *m, int32_t self, int64_t now)
{
    int64_t due = INT64_MAX;
    int32_t rank = peer_rank(m, self);

    if (rank >= TICK_RANKS) {
        return;
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        if (i != self && peer_alive(m, i) && m->peers[i].last_ts + m->session_ms + 1 < due) {
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

/* -- This member's life: join, lost, rejoin (docs/cluster.md, Lost) ------------------------ */

static void become_lost(bk_member_t *m, const char *why, int64_t now)
{
    int32_t self = peer_find(m, m->node_id);
    int64_t lo = 0, hi = 0;

    m->lost = 1;
    m->lost_at = now;
    m->nlost = 0;
    /* What the node may be running: what a view told it to run and it has not released,
     * and whatever else this incarnation still holds (the log may have ended it already). */
    for (int32_t t = 0; t < m->nown; t++) {
        if (m->told[t] || (self >= 0 && m->peers[self].inc == m->inc && m->own[t] == self)) {
            m->lost_tasks[m->nlost++] = t;
        }
    }
    m->version++;
    rd_kafka_get_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi);
    bk_log_warn("member %s: lost (%s): stop every active task (%d held); read up to offset"
                " %" PRId64 " of %" PRId64 ", log time %" PRId64 " ms behind the clock",
                m->node_id, why, m->nlost, m->next_offset, hi, now - m->log_time);
}

static void check_self(bk_member_t *m, int64_t now, int caught_up)
{
    int32_t self = self_peer(m);
    int64_t limit = m->session_ms - m->hb_ms;

    if (m->lost) {
        if (m->nlost == 0 && caught_up && !m->error && now >= m->lost_at + m->backoff) {
            uint64_t inc = make_incarnation();
            m->inc = inc > m->inc ? inc : m->inc + 1;
            m->lost = 0;
            m->joined_once = 0;
            m->first_hb = 0;
            m->join_ts = 0;
            m->next_hb = now;
            m->backoff =
                m->backoff * 2 < 8 * (int64_t)m->session_ms ? m->backoff * 2 : 8 * m->session_ms;
            m->version++;
            bk_log_info("member %s: rejoining as incarnation %" PRIu64, m->node_id, m->inc);
        }
        return;
    }
    if (m->joined_once) {
        int32_t other = peer_find(m, m->node_id);
        if (self < 0 && peer_alive(m, other) && m->peers[other].inc > m->inc) {
            /* Rejoining would replace it, and it us, for ever. */
            m->error = "another member uses this node id";
            become_lost(m, m->error, now);
        } else if (self < 0) {
            become_lost(m, "the log ended this incarnation", now);
        } else if (now - m->peers[self].last_ts > limit) {
            become_lost(m, "own heartbeats not seen back in time", now);
        }
    } else if (m->first_hb && now - m->first_hb > limit) {
        become_lost(m, "own heartbeats never seen back", now);
    }
}

/* After a batch: phase, self, leader duty, ticks, heartbeat. Under the lock. */
static void after_batch(bk_member_t *m, int64_t now)
{
    int64_t lo = 0, hi = 0;
    int32_t self;
    int caught_up;

    m->next_wake = now + POLL_MS;
    /* Caught up: read to where the log ended when we started and to the end the last fetch
     * saw. A member joins, and rejoins after it was lost, only then: one that joins behind
     * may never see its own heartbeats in time (on the dev broker, which hands out one
     * record per fetch, joiners of a busy log fell further behind, were lost, rejoined and
     * dragged the others down with the churn). */
    rd_kafka_get_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi);
    caught_up = m->phase != PH_START && m->phase != PH_FAILED && m->next_offset >= hi &&
                m->next_offset >= m->catchup_to;
    if (caught_up && !m->caught_up) {
        m->caught_up = 1;
        m->version++;
    }
    if (m->observe) {
        return; /* it reads, and that is all */
    }
    if (m->phase == PH_CATCHUP && caught_up) {
        m->phase = PH_RUN; /* join */
        m->next_hb = now;
        m->version++;
    }
    if (m->phase != PH_RUN) {
        return;
    }
    if (m->pending && ((m->pending_offset >= 0 && m->next_offset > m->pending_offset) ||
                       m->epoch != m->pending_base)) {
        m->pending = 0;
    }
    check_self(m, now, caught_up);
    if (m->lost) {
        return;
    }
    self = self_peer(m);
    /* The leader need not have read to the end: it is the only one that writes epochs, its
     * own record in flight is `pending`, and an assignment computed on a view a few records
     * old is replaced by the next one. Waiting to catch up cost ~70 ms a change with 100
     * members on the dev broker, which hands out one record per fetch. */
    if (self >= 0 && leader_peer(m) == self && !m->pending) {
        if (!stable(m)) {
            lead(m, now, 0);
        } else if (m->probe_at > 0 && now >= m->probe_at && caught_up) {
            lead(m, now, 1);
        }
    }
    if (m->probe_at > 0 && m->probe_at < m->next_wake) {
        m->next_wake = m->probe_at;
    }
    /* A tick from a view behind the log is harmless (the heartbeats it has not read come
     * first in the log) but would be repeated until it catches up. */
    if (self >= 0 && caught_up) {
        maybe_tick(m, self, now);
    }
    if (now >= m->next_hb) {
        send_heartbeat(m, now);
        m->next_hb = now + m->hb_ms;
    }
    if (m->next_hb < m->next_wake) {
        m->next_wake = m->next_hb;
    }
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    bk_member_t *m = opaque;
    intptr_t tag = (intptr_t)msg->_private;
    int type = (int)(tag & 0xff);
    (void)rk;

    pthread_mutex_lock(&m->lock);
    if (type == REC_ASSIGN && (!m->pending || tag >> 8 != m->pending_seq)) {
        /* the report of an earlier publication: not about the one in flight */
    } else if (msg->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
               msg->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
        /* bk_member_destroy() dropped it on purpose */
    } else if (msg->err) {
        bk_log_warn("member %s: a control record was not delivered: %s", m->node_id,
                    rd_kafka_err2str(msg->err));
        if (type == REC_RELEASE && m->nown) {
            memset(m->rel_sent, 0, (size_t)m->nown); /* list them again */
            m->version++;
        } else if (type == REC_ASSIGN) {
            m->pending = 0;
        } else if (type == REC_LEAVE) {
            m->leave_state = -1;
        }
    } else if (type == REC_ASSIGN) {
        m->pending_offset = msg->offset;
    } else if (type == REC_LEAVE) {
        m->leave_state = 1;
    }
    pthread_mutex_unlock(&m->lock);
}

/* -- The member thread --------------------------------------------------------------------- */

/* Where the log ends now; a log that does not start at 0 lost records the view needs. */
static void start_reading(bk_member_t *m)
{
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(m->consumer, m->topic, 0, &lo, &hi, 2000);
    if (err) {
        bk_log_warn("member %s: cannot read the end of %s yet: %s", m->node_id, m->topic,
                    rd_kafka_err2str(err));
        return;
    }
    pthread_mutex_lock(&m->lock);
    if (lo > 0) {
        m->phase = PH_FAILED;
        m->error = "the control topic lost its first records (retention): the view cannot be"
                   " rebuilt (docs/cluster.md, Retention)";
        bk_log_error("member %s: %s starts at offset %" PRId64 ": %s", m->node_id, m->topic, lo,
                     m->error);
    } else {
        m->phase = PH_CATCHUP;
        m->catchup_to = hi;
    }
    m->version++;
    pthread_mutex_unlock(&m->lock);
}

static void *member_main(void *arg)
{
    bk_member_t *m = arg;
    rd_kafka_message_t *msgs[MAX_BATCH];
    int busy = 0;

    bk_log_set_thread_name("member");
    while (!m->stop) {
        int timeout = POLL_MS, n = 0;
        int64_t now = now_ms();
        uint64_t version;

        if (m->phase == PH_START) {
            start_reading(m);
        }
        if (m->phase == PH_RUN && m->next_wake - now < timeout) {
            timeout = m->next_wake > now ? (int)(m->next_wake - now) : 0;
        }
        if (busy && timeout > 0) {
            struct timespec ts = {0, (long)(timeout < BATCH_MS ? timeout : BATCH_MS) * 1000000};
            nanosleep(&ts, NULL);
            timeout = 0;
        }
        /* Waits for the first record only; then takes what is already there. */
        for (rd_kafka_message_t *msg = rd_kafka_consumer_poll(m->consumer, timeout); msg;
             msg = n < MAX_BATCH ? rd_kafka_consumer_poll(m->consumer, 0) : NULL) {
            msgs[n++] = msg;
        }
        busy = n > 0;
        now = now_ms();
        pthread_mutex_lock(&m->lock);
        for (int i = 0; i < n; i++) {
            if (msgs[i]->err) {
                bk_log_debug("member %s: %s: %s", m->node_id, m->topic,
                             rd_kafka_err2str(msgs[i]->err));
            } else if (m->phase != PH_FAILED) {
                apply(m, msgs[i]);
            }
        }
        after_batch(m, now);
        version = m->version;
        pthread_mutex_unlock(&m->lock);
        for (int i = 0; i < n; i++) {
            rd_kafka_message_destroy(msgs[i]);
        }
        if (m->producer) {
            rd_kafka_poll(m->producer, 0);
        }
        if (m->on_change && version != m->notified) {
            m->notified = version;
            m->on_change(m->opaque);
        }
    }
    return NULL;
}

/* -- API ----------------------------------------------------------------------------------- */

/* The control topic's clients get these under the user's -X/-F settings, on top of beck's
 * defaults (kafka.c), which suit stream threads. A real broker answers a fetch as soon as a
 * record arrives, so a long fetch wait costs no latency there and keeps an idle member's
 * requests few; the dev broker (librdkafka's mock) answers an empty fetch only after the
 * whole wait (MEASURED.md), so it adds up to that much per hop. 100 ms keeps 100 members'
 * idle fetches at ~1,000/s against the mock (10 ms: 10,000/s, which saturated two cores).
 * Control records are few and latency matters more than batching: no linger. */
static const char *consumer_settings[] = {"fetch.wait.max.ms", "100", NULL};
static const char *producer_settings[] = {"linger.ms", "0", NULL};

static rd_kafka_t *client_new(bk_member_t *m, const char *app_id, bk_kafka_role_t role,
                              char *errstr, size_t errstr_size)
{
    const char **defs = role == BK_KAFKA_CONSUMER ? consumer_settings : producer_settings;
    bk_conf_t *conf = bk_conf_new();
    char cid[BK_MEMBER_MAX_ID + 32];
    rd_kafka_t *rk = NULL;

    if (!conf) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (bk_conf_set(conf, BK_CONF_BROKERS, bk_conf_str(m->conf, BK_CONF_BROKERS), BK_CONF_FROM_CLI,
                    errstr, errstr_size) != 0 ||
        bk_conf_set(conf, BK_CONF_APP_ID, app_id, BK_CONF_FROM_CLI, errstr, errstr_size) != 0) {
        goto done;
    }
    for (int i = 0; defs[i]; i += 2) {
        bk_conf_add_kafka(conf, defs[i], defs[i + 1]);
    }
    for (size_t i = 0; i < bk_conf_kafka_count(m->conf); i++) {
        const char *k, *v;
        bk_conf_kafka_get(m->conf, i, &k, &v);
        bk_conf_add_kafka(conf, k, v);
    }
    snprintf(cid, sizeof(cid), "beck-member-%s", m->node_id);
    rk = bk_kafka_new(conf, role, cid, m, role == BK_KAFKA_PRODUCER ? dr_msg_cb : NULL, errstr,
                      errstr_size);
done:
    bk_conf_destroy(conf);
    return rk;
}

static int copy_str(char *dst, const char *src, const char *what, char *errstr, size_t errstr_size)
{
    size_t n = src ? strlen(src) : 0;
    if (n > BK_MEMBER_MAX_ID) {
        snprintf(errstr, errstr_size, "member: %s is longer than %d bytes", what, BK_MEMBER_MAX_ID);
        return -1;
    }
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

bk_member_t *bk_member_new(const bk_member_conf_t *mconf, char *errstr, size_t errstr_size)
{
    bk_member_t *m = calloc(1, sizeof(*m));
    char name[16];

    if (!m) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->plock, NULL);
    m->observe = mconf->observe;
    if (!mconf->app_id || !mconf->app_id[0] ||
        (!m->observe && (!mconf->node_id || !mconf->node_id[0]))) {
        snprintf(errstr, errstr_size, "member: an app id and a node id are needed");
        goto fail;
    }
    if (copy_str(m->node_id, mconf->node_id && mconf->node_id[0] ? mconf->node_id : "observer",
                 "the node id", errstr, errstr_size) != 0 ||
        copy_str(m->rack, mconf->rack, "the rack", errstr, errstr_size) != 0 ||
        copy_str(m->endpoint, mconf->endpoint, "the endpoint", errstr, errstr_size) != 0 ||
        copy_str(m->topic, mconf->app_id, "the app id", errstr, errstr_size) != 0) {
        goto fail;
    }
    strcat(m->topic, "-control");
    if ((mconf->threads < 1 && !m->observe) || mconf->ntasks < 0 ||
        mconf->ntasks > BK_ASSIGNCODEC_MAX_TASKS || mconf->standbys < 0 ||
        mconf->standbys > BK_ASSIGNCODEC_MAX_K) {
        snprintf(errstr, errstr_size,
                 "member: threads >= 1, 0 <= tasks <= %d and 0 <= standbys"
                 " <= %d are needed",
                 BK_ASSIGNCODEC_MAX_TASKS, BK_ASSIGNCODEC_MAX_K);
        goto fail;
    }
    m->conf = mconf->conf;
    m->threads = mconf->threads > 0 ? mconf->threads : 1;
    m->ntasks = mconf->ntasks;
    m->standbys = mconf->standbys;
    m->warmup = mconf->warmup;
    m->probe_ms = mconf->probe_interval_ms > 0 ? mconf->probe_interval_ms : 5000;
    m->acceptable_lag = mconf->acceptable_lag;
    m->hb_ms =
        mconf->heartbeat_interval_ms > 0 ? mconf->heartbeat_interval_ms : BK_MEMBER_HEARTBEAT_MS;
    m->session_ms =
        mconf->session_timeout_ms > 0 ? mconf->session_timeout_ms : BK_MEMBER_SESSION_MS;
    m->session_announced = m->observe && mconf->session_timeout_ms <= 0;
    if (m->session_ms <= 2 * m->hb_ms) {
        snprintf(errstr, errstr_size,
                 "member: the session timeout (%d ms) must exceed two"
                 " heartbeat intervals (%d ms)",
                 m->session_ms, m->hb_ms);
        goto fail;
    }
    m->dev_port = mconf->dev_port;
    m->on_change = mconf->on_change;
    m->opaque = mconf->opaque;
    m->lost_tasks = malloc(((size_t)m->ntasks + 1) * sizeof(*m->lost_tasks));
    m->notes = calloc(NOTES_MAX, sizeof(*m->notes));
    m->gone = m->observe ? calloc(GONE_MAX, sizeof(*m->gone)) : NULL;
    if (!m->lost_tasks || !m->notes || (m->observe && !m->gone)) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    m->layout = fnv1a(2166136261u, &m->ntasks, sizeof(m->ntasks));
    for (int32_t t = 0; t < m->ntasks; t++) {
        const char *tn = name;
        if (mconf->task_names) {
            tn = mconf->task_names[t];
        } else {
            snprintf(name, sizeof(name), "%d", t);
        }
        m->layout = fnv1a(m->layout, tn, strlen(tn) + 1);
    }
    m->inc = make_incarnation();
    m->backoff = m->hb_ms;
    m->version = 1;
    m->phase = PH_START;
    m->consumer = client_new(m, mconf->app_id, BK_KAFKA_CONSUMER, errstr, errstr_size);
    if (!m->consumer) {
        goto fail;
    }
    /* An observer writes nothing: without a producer it cannot, by mistake either. */
    m->producer =
        m->observe ? NULL : client_new(m, mconf->app_id, BK_KAFKA_PRODUCER, errstr, errstr_size);
    if (!m->producer && !m->observe) {
        goto fail;
    }
    return m;

fail:
    bk_member_destroy(m);
    return NULL;
}

/* A member rebuilds its view from the whole control topic and refuses one whose first
 * records are gone (docs/cluster.md, Retention): so nothing may delete them. The rules
 * read log time: the broker's clock, not each node's. */
static const char *const control_configs[] = {
    "cleanup.policy", "delete",
    "retention.ms", "-1",
    "retention.bytes", "-1",
    "message.timestamp.type", "LogAppendTime",
    NULL,
};

/* A control topic made by hand with other configs works until its first records are
 * deleted, and then no member can start: say so while it is still fixable. */
static void warn_control_configs(rd_kafka_t *rk, const char *topic)
{
    char values[4][BK_KAFKA_CONFIG_MAX], err[256];
    const char *names[4];
    for (int i = 0; i < 4; i++) {
        names[i] = control_configs[2 * i];
    }
    if (bk_kafka_topic_configs(rk, topic, names, 4, values, 10000, err, sizeof(err)) != 0) {
        bk_log_warn("cannot check the configs of control topic %s: %s", topic, err);
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (values[i][0] && strcmp(values[i], control_configs[2 * i + 1]) != 0) {
            bk_log_warn("control topic %s has %s=%s, beck wants %s: %s", topic, names[i],
                        values[i], control_configs[2 * i + 1],
                        i < 3 ? "once its first records are deleted no member can start "
                                "(docs/cluster.md, Retention)"
                              : "the membership rules read the nodes' clocks instead of the "
                                "broker's");
        }
    }
}

int bk_member_start(bk_member_t *member, char *errstr, size_t errstr_size)
{
    bk_member_t *m = member;
    const char *topics[1] = {m->topic};
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t err;
    int port = m->dev_port, count = 0;

    /* Never ask a dev broker about the topic by name before it exists: that would make it
     * with 4 partitions. bk_kafka_partitions() reads all topics. */
    if (m->observe) {
        if (bk_kafka_partitions(m->consumer, topics, 1, &count, 10000, errstr, errstr_size) != 0) {
            return -1;
        }
        if (count == 0) {
            snprintf(errstr, errstr_size,
                     "control topic %s does not exist: no node of this app has run with"
                     " --cluster 1 on this cluster",
                     m->topic);
            return -1;
        }
    } else if (port == 0 &&
               (port = bk_devctl_discover(m->producer, 10000, errstr, errstr_size)) < 0) {
        return -1;
    } else if (bk_kafka_partitions(m->producer, topics, 1, &count, 10000, errstr, errstr_size) !=
               0) {
        return -1;
    }
    if (count == 0 && bk_kafka_create_topic(m->producer, port > 0 ? port : 0, m->topic, 1,
                                            (int)bk_conf_int(m->conf, BK_CONF_REPLICATION_FACTOR),
                                            control_configs, errstr, errstr_size) != 0) {
        return -1;
    }
    if (count > 1) {
        snprintf(errstr, errstr_size, "control topic %s has %d partitions: it must have one",
                 m->topic, count);
        return -1;
    }
    if (count == 1 && !m->observe && port <= 0) { /* observers (beck status) stay quiet */
        warn_control_configs(m->consumer, m->topic);
    }
    list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, m->topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    err = rd_kafka_assign(m->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        snprintf(errstr, errstr_size, "cannot read %s: %s", m->topic, rd_kafka_err2str(err));
        return -1;
    }
    if (pthread_create(&m->thread, NULL, member_main, m) != 0) {
        snprintf(errstr, errstr_size, "cannot start the member thread");
        return -1;
    }
    m->started = 1;
    bk_log_info("member %s: reading %s (heartbeat %d ms, session %d ms)%s", m->node_id, m->topic,
                m->hb_ms, m->session_ms, m->observe ? " as an observer" : "");
    return 0;
}

static int cmp_i32(const void *a, const void *b)
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
    self = m->lost ? -1 : self_peer(m);
    leader = leader_peer(m);
    v->version = m->version;
    v->incarnation = m->inc;
    v->epoch = m->epoch;
    v->joined = self >= 0;
    v->lost = m->lost;
    v->stable = stable(m);
    v->is_leader = self >= 0 && leader == self;
    v->error = m->error;
    v->log_time = m->log_time;
    v->join_ts = m->join_ts;
    v->caught_up = m->caught_up;
    v->next_offset = m->next_offset;
    v->session_timeout_ms = m->session_ms;
    /* Peers: the live ones in join order, then the ended ones, then an observer's forgotten
     * ones. peer_order maps the view's index to the member's (npeers + i: gone[i]), peer_map
     * the other way. */
    order = v->peer_order;
    map = v->peer_map;
    for (int32_t i = 0; i < m->npeers; i++) {
        map[i] = -1;
        if (peer_alive(m, i)) {
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
    qsort(v->release, (size_t)v->nrelease, sizeof(*v->release), cmp_i32);

done:
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        v->version = 0; /* try again next time */
        bk_log_error("member %s: out of memory copying the view", m->node_id);
    }
    return rc;
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
    memset(view, 0, sizeof(*view));
}

void bk_member_set_progress(bk_member_t *member, int32_t task, int64_t offset, int64_t lag)
{
    bk_member_t *m = member;
    int32_t i;

    pthread_mutex_lock(&m->plock);
    for (i = 0; i < m->nprog && m->prog[i].task != task; i++) {
    }
    if (lag < 0) {
        if (i < m->nprog) {
            m->prog[i] = m->prog[--m->nprog];
        }
    } else if (i < m->nprog) {
        m->prog[i].offset = offset;
        m->prog[i].lag = lag;
    } else if (task >= 0 && task < m->ntasks) {
        if (m->nprog == m->cap_prog) {
            int32_t cap = m->cap_prog ? m->cap_prog * 2 : 16;
            progress_t *p = realloc(m->prog, (size_t)cap * sizeof(*p));
            if (!p) {
                pthread_mutex_unlock(&m->plock);
                return; /* reported as unknown: the assignor ranks it last */
            }
            m->prog = p;
            m->cap_prog = cap;
        }
        m->prog[m->nprog++] = (progress_t){task, offset, lag, 0};
    }
    pthread_mutex_unlock(&m->plock);
}

int bk_member_released(bk_member_t *member, uint64_t epoch, const int32_t *tasks, int32_t n)
{
    bk_member_t *m = member;
    int32_t self, count = 0, prev = -1;
    int32_t *list = malloc(((size_t)n + 1) * sizeof(*list));
    bk_wire_buf_t w = {0};
    int rc = 0;

    if (!list) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    for (int32_t k = 0; k < n; k++) {
        if (tasks[k] >= 0 && tasks[k] < m->nown) {
            m->told[tasks[k]] = 0;
        }
    }
    if (m->lost) {
        /* Nothing to publish: the node has stopped them, which is what rejoining waits for. */
        for (int32_t k = 0; k < n; k++) {
            for (int32_t i = 0; i < m->nlost; i++) {
                if (m->lost_tasks[i] == tasks[k]) {
                    m->lost_tasks[i] = m->lost_tasks[--m->nlost];
                    m->version++;
                    break;
                }
            }
        }
        goto done;
    }
    self = self_peer(m);
    for (int32_t k = 0; k < n && self >= 0; k++) {
        int32_t t = tasks[k];
        if (t >= 0 && t < m->nown && m->own[t] == self && !m->rel_sent[t]) {
            list[count++] = t;
        }
    }
    if (count == 0) {
        goto done;
    }
    qsort(list, (size_t)count, sizeof(*list), cmp_i32);
    w_header(&w, m, REC_RELEASE);
    bk_wire_put_uv(&w, epoch);
    bk_wire_put_uv(&w, (uint64_t)count);
    for (int32_t k = 0; k < count; k++) {
        bk_wire_put_uv(&w, (uint64_t)(list[k] - prev - 1));
        prev = list[k];
    }
    if (produce(m, REC_RELEASE, &w, now_ms()) != 0) {
        rc = -1;
        goto done;
    }
    for (int32_t k = 0; k < count; k++) {
        m->rel_sent[list[k]] = 1;
    }
    m->version++;
    bk_log_debug("member %s: released %d tasks of epoch %" PRIu64, m->node_id, count, epoch);

done:
    pthread_mutex_unlock(&m->lock);
    free(list);
    return rc;
}

static void put_note(bk_wire_buf_t *w, const char *to, const char *kind, const char *text)
{
    bk_wire_put_str(w, to ? to : "");
    bk_wire_put_str(w, kind);
    bk_wire_put_str(w, text ? text : "");
}

int bk_member_note(bk_member_t *member, const char *to, const char *kind, const char *text)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc;
    if (m->observe || strlen(kind) > BK_MEMBER_MAX_ID || (to && strlen(to) > BK_MEMBER_MAX_ID) ||
        (text && strlen(text) > BK_MEMBER_NOTE_MAX)) {
        return -1;
    }
    pthread_mutex_lock(&m->lock);
    w_header(&w, m, REC_NOTE);
    put_note(&w, to, kind, text);
    rc = produce(m, REC_NOTE, &w, now_ms());
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int bk_member_note_encode(const char *from, const char *to, const char *kind, const char *text,
                          uint8_t **buf, size_t *len)
{
    bk_wire_buf_t w = {0};
    if (strlen(from) > BK_MEMBER_MAX_ID || strlen(kind) > BK_MEMBER_MAX_ID ||
        (to && strlen(to) > BK_MEMBER_MAX_ID) || (text && strlen(text) > BK_MEMBER_NOTE_MAX)) {
        return -1;
    }
    bk_wire_put_u8(&w, WIRE_MAGIC);
    bk_wire_put_u8(&w, WIRE_VERSION);
    bk_wire_put_u8(&w, REC_NOTE);
    bk_wire_put_str(&w, from);
    bk_wire_put_uv(&w, make_incarnation());
    put_note(&w, to, kind, text);
    if (w.oom) {
        free(w.p);
        return -1;
    }
    *buf = w.p;
    *len = w.len;
    return 0;
}

int bk_member_take_note(bk_member_t *member, bk_member_note_t *note)
{
    bk_member_t *m = member;
    int got = 0;
    pthread_mutex_lock(&m->lock);
    if (m->nnotes > 0) {
        *note = m->notes[0];
        memmove(m->notes, m->notes + 1, (size_t)(m->nnotes - 1) * sizeof(*m->notes));
        m->nnotes--;
        got = 1;
    }
    pthread_mutex_unlock(&m->lock);
    return got;
}

int bk_member_stop(bk_member_t *member, int leave)
{
    bk_member_t *m = member;
    bk_wire_buf_t w = {0};
    int rc = 0, send;

    if (m->started) {
        m->stop = 1;
        pthread_join(m->thread, NULL);
        m->started = 0;
    }
    if (!leave) {
        return 0;
    }
    pthread_mutex_lock(&m->lock);
    send = m->phase == PH_RUN && !m->lost && m->first_hb && m->producer;
    m->leave_state = 0;
    if (send) {
        w_header(&w, m, REC_LEAVE);
        send = produce(m, REC_LEAVE, &w, now_ms()) == 0;
        rc = send ? 0 : -1;
    }
    pthread_mutex_unlock(&m->lock);
    if (send) {
        rd_kafka_flush(m->producer, m->session_ms);
        pthread_mutex_lock(&m->lock);
        rc = m->leave_state == 1 ? 0 : -1;
        pthread_mutex_unlock(&m->lock);
        bk_log_info("member %s: %s", m->node_id,
                    rc == 0 ? "left" : "the leave notice was not delivered");
    }
    return rc;
}

void bk_member_destroy(bk_member_t *member)
{
    bk_member_t *m = member;
    if (!m) {
        return;
    }
    bk_member_stop(m, 0);
    if (m->consumer) {
        rd_kafka_consumer_close(m->consumer);
        rd_kafka_destroy(m->consumer);
    }
    if (m->producer) {
        /* Whatever is still queued would only tell the others we are alive. */
        rd_kafka_purge(m->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(m->producer, 1000); /* serves the purged messages' reports */
        rd_kafka_destroy(m->producer);
    }
    for (int32_t i = 0; i < m->npeers; i++) {
        free(m->peers[i].progress);
        free(m->peers[i].spare);
    }
    free(m->peers);
    free(m->gone);
    bk_assigncodec_destroy(m->cur);
    free(m->slot_peer);
    free(m->slot_inc);
    free(m->own);
    free(m->rel_sent);
    free(m->told);
    free(m->lost_tasks);
    free(m->notes);
    free(m->prog);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->plock);
    free(m);
}
