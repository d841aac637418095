/* assign.c - the assignor (assign.h): balanced, sticky, rack-aware, caught-up first.
 *
 * Members are renumbered by the rank of their id, so that every tie is broken by id and the
 * result does not depend on the order of the member table. Actives first, within exact
 * quotas: keep (as many as any balanced assignment can), promote (lowest lag first), fill
 * (least loaded), swap to lower lags. Standbys second, under the node and rack rules: keep
 * every replica that holds state, fill the empty slots, then move standbys from members over
 * their quota to members under it, one at a time and then along chains of members.
 * docs/assignment.md explains each step and its bound. */
#include "cluster/assign.h"

#include "base/ffi_spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lag keys of candidates: a reported lag is >= 0 and sorts first. */
#define LAG_UNKNOWN (INT64_MAX - 1) /* a previous standby without a report: some state */
#define LAG_NONE INT64_MAX          /* no state at all */
#define NO_SLOT (-2)                /* mark_task(): skip no standby slot */

/* A member that holds (or held) state of a task, with its lag key. */
typedef struct cand {
    int32_t task;
    int32_t member; /* rank */
    int64_t lag;
    int32_t reported; /* only while merging */
    int32_t shed;     /* only while sorting the pool: 0 orphan, 1 shed */
} cand_t;

/* The working state of one computation; every member index in it is a rank. */
typedef struct asg {
    int32_t M, T, R, K; /* members, tasks, distinct racks, standbys per task (K') */
    int64_t C;          /* total threads */
    int32_t *order;     /* [M] rank -> input index */
    int32_t *rank;      /* [M] input index -> rank */
    int32_t *threads;   /* [M] */
    int32_t *rack;      /* [M] rack id, 0..R-1, ordered by rack name */
    int32_t *prev;      /* [T] previous active (rank) when present, else -1 */
    int32_t *cstart;    /* [T+1] candidates of task t: cands[cstart[t] .. cstart[t+1]) */
    cand_t *cands;      /* by task, then by rank */
    int32_t *active;    /* [T] */
    int32_t *standby;   /* [T*K], -1 = empty, filled from the left */
    int32_t *acount;    /* [M] */
    int32_t *scount;    /* [M] */
    int32_t *lo, *hi;   /* [M] quota of the phase at hand */
    int32_t *mstamp;    /* [M] scratch marks: member is a replica of the task at hand */
    int32_t *rstamp;    /* [R] scratch marks: rack is used by the task at hand */
    int32_t stamp;
    int32_t *pair; /* [M*M] or NULL: pair[x*M + m] = standbys on m of x's actives */
} asg_t;

/* Up to this many members the standby fill counts pairs (4 MiB at most). */
#define PAIR_MAX_MEMBERS 1024

static void seterr(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}

/* -- Ranking members and racks ------------------------------------------------------------ */

typedef struct named {
    const char *name;
    int32_t idx;
} named_t;

static int named_cmp(const void *pa, const void *pb)
{
    const named_t *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c != 0) {
        return c;
    }
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Fills order/rank/threads/rack; -1 on a duplicate or empty id or bad threads. */
static int rank_members(asg_t *a, const bk_assign_input_t *in, named_t *tmp, char *errstr,
                        size_t errstr_size)
{
    for (int32_t i = 0; i < a->M; i++) {
        const bk_assign_member_t *mem = &in->members[i];
        if (!mem->id || !mem->id[0]) {
            seterr(errstr, errstr_size, "member %d has no id", (int)i);
            return -1;
        }
        if (mem->threads < 1) {
            seterr(errstr, errstr_size, "member %s has %d threads", mem->id, (int)mem->threads);
            return -1;
        }
        tmp[i].name = mem->id;
        tmp[i].idx = i;
    }
    qsort(tmp, (size_t)a->M, sizeof(*tmp), named_cmp);
    for (int32_t r = 0; r < a->M; r++) {
        if (r > 0 && strcmp(tmp[r - 1].name, tmp[r].name) == 0) {
            seterr(errstr, errstr_size, "member id %s appears twice", tmp[r].name);
            return -1;
        }
        a->order[r] = tmp[r].idx;
        a->rank[tmp[r].idx] = r;
        a->threads[r] = in->members[tmp[r].idx].threads;
        a->C += a->threads[r];
    }
    /* Rack ids in the order of rack names, so that they too are independent of the table. */
    for (int32_t r = 0; r < a->M; r++) {
        const char *rack = in->members[a->order[r]].rack;
        tmp[r].name = rack ? rack : "";
        tmp[r].idx = r;
    }
    qsort(tmp, (size_t)a->M, sizeof(*tmp), named_cmp);
    a->R = 0;
    for (int32_t i = 0; i < a->M; i++) {
        if (i > 0 && strcmp(tmp[i - 1].name, tmp[i].name) != 0) {
            a->R++;
        }
        a->rack[tmp[i].idx] = a->R;
    }
    a->R += a->M > 0;
    return 0;
}

/* -- Candidates: who holds state of which task -------------------------------------------- */

static int cand_task_member_cmp(const void *pa, const void *pb)
{
    const cand_t *a = pa, *b = pb;
    if (a->task != b->task) {
        return a->task < b->task ? -1 : 1;
    }
    return (a->member > b->member) - (a->member < b->member);
}

/* Lowest lag first; among equals orphans before shed tasks, then by task and member. */
static int cand_lag_cmp(const void *pa, const void *pb)
{
    const cand_t *a = pa, *b = pb;
    if (a->lag != b->lag) {
        return a->lag < b->lag ? -1 : 1;
    }
    if (a->shed != b->shed) {
        return a->shed - b->shed;
    }
    if (a->task != b->task) {
        return a->task < b->task ? -1 : 1;
    }
    return (a->member > b->member) - (a->member < b->member);
}

static int valid_member(const bk_assign_input_t *in, int32_t m)
{
    return m >= -1 && m < in->nmembers;
}

/* Builds prev[] and the candidate lists; -1 on an index out of range or a negative lag. */
static int build_cands(asg_t *a, const bk_assign_input_t *in, char *errstr, size_t errstr_size)
{
    size_t cap = (size_t)in->nlags + 1;
    size_t n = 0, out = 0;
    cand_t *c;

    if (in->prev_active) {
        cap += (size_t)a->T;
    }
    if (in->prev_standby) {
        cap += (size_t)a->T * (size_t)(in->prev_width > 0 ? in->prev_width : 0);
    }
    c = malloc(cap * sizeof(*c));
    if (!c) {
        seterr(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (int32_t t = 0; t < a->T; t++) {
        int32_t p = in->prev_active ? in->prev_active[t] : -1;
        if (!valid_member(in, p)) {
            seterr(errstr, errstr_size, "task %d: previous active %d out of range", (int)t, (int)p);
            goto fail;
        }
        a->prev[t] = p >= 0 ? a->rank[p] : -1;
        if (p >= 0) {
            c[n++] = (cand_t){t, a->rank[p], 0, 0, 0};
        }
        for (int32_t j = 0; in->prev_standby && j < in->prev_width; j++) {
            int32_t s = in->prev_standby[(size_t)t * (size_t)in->prev_width + (size_t)j];
            if (!valid_member(in, s)) {
                seterr(errstr, errstr_size, "task %d: previous standby %d out of range", (int)t,
                       (int)s);
                goto fail;
            }
            if (s >= 0) {
                c[n++] = (cand_t){t, a->rank[s], LAG_UNKNOWN, 0, 0};
            }
        }
    }
    for (int32_t i = 0; i < in->nlags; i++) {
        const bk_assign_lag_t *l = &in->lags[i];
        if (l->task < 0 || l->task >= a->T || l->member < 0 || l->member >= a->M || l->lag < 0) {
            seterr(errstr, errstr_size, "lag %d (task %d, member %d, lag %lld) is invalid", (int)i,
                   (int)l->task, (int)l->member, (long long)l->lag);
            goto fail;
        }
        c[n++] = (cand_t){l->task, a->rank[l->member], l->lag, 1, 0};
    }
    qsort(c, n, sizeof(*c), cand_task_member_cmp);
    /* One entry per (task, member): a reported lag beats the role's default. */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t rep = LAG_NONE, def = LAG_NONE;
        for (; j < n && c[j].task == c[i].task && c[j].member == c[i].member; j++) {
            if (c[j].reported) {
                rep = c[j].lag < rep ? c[j].lag : rep;
            } else {
                def = c[j].lag < def ? c[j].lag : def;
            }
        }
        c[out] = c[i];
        c[out].lag = rep != LAG_NONE ? rep : def;
        out++;
        i = j;
    }
    memset(a->cstart, 0, ((size_t)a->T + 1) * sizeof(*a->cstart));
    for (size_t i = 0; i < out; i++) {
        a->cstart[c[i].task + 1]++;
    }
    for (int32_t t = 0; t < a->T; t++) {
        a->cstart[t + 1] += a->cstart[t];
    }
    a->cands = c;
    return 0;
fail:
    free(c);
    return -1;
}

/* The lag key of member m for task t. */
static int64_t lag_of(const asg_t *a, int32_t t, int32_t m)
{
    for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
        if (a->cands[i].member == m) {
            return a->cands[i].lag;
        }
    }
    return LAG_NONE;
}

/* -- Warm-up (KIP-441) --------------------------------------------------------------------- */

/* Racks spanned by member `extra` and the row of task t without its slot `skip`. */
static int32_t racks_with(asg_t *a, int32_t t, int32_t skip, int32_t extra, int32_t extra2)
{
    int32_t n = 0;
    a->stamp++;
    for (int32_t j = -2; j < a->K; j++) {
        int32_t m = j == -2 ? extra : j == -1 ? extra2 : (j == skip ? -1 : a->standby[t * a->K + j]);
        if (m >= 0 && a->rstamp[a->rack[m]] != a->stamp) {
            a->rstamp[a->rack[m]] = a->stamp;
            n++;
        }
    }
    return n;
}

/* A task whose new active holds no caught-up state (lag > acceptable) stays active on a
 * replica that does (the lowest lag, then the lowest id), and the member balance chose
 * becomes a standby of it instead: a warm-up replica, which takes the slot of that replica
 * in the row, or else the slot of the standby with the highest lag that keeps the rack rule.
 * The leader recomputes once warm-ups catch up (docs/assignment.md, Warm-up). Balance yields
 * for the time being; the node and rack rules do not. Returns the tasks held back. */
static int32_t warm_up(asg_t *a, int64_t acceptable)
{
    int32_t held = 0, want_racks;
    for (int32_t t = 0; t < a->T; t++) {
        int32_t nw = a->active[t], c = -1, slot = -1;
        int64_t best = LAG_NONE;
        int32_t *row = &a->standby[t * a->K];
        if (lag_of(a, t, nw) <= acceptable) {
            continue;
        }
        for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
            const cand_t *cd = &a->cands[i];
            if (cd->member != nw && cd->lag <= acceptable && cd->lag < best) {
                best = cd->lag;
                c = cd->member;
            }
        }
        if (a->prev[t] >= 0 && a->prev[t] != nw && lag_of(a, t, a->prev[t]) <= acceptable) {
            c = a->prev[t]; /* where it is, if warm there: holding it back moves nothing */
        }
        if (c < 0) {
            continue; /* nobody has it warm: it moves now and restores */
        }
        for (int32_t j = 0; j < a->K; j++) {
            if (row[j] == c) {
                slot = j;
            }
        }
        want_racks = a->R < a->K + 1 ? a->R : a->K + 1;
        if (slot < 0) {
            int64_t worst = -1;
            for (int32_t j = 0; j < a->K; j++) {
                int64_t l = row[j] >= 0 ? lag_of(a, t, row[j]) : LAG_NONE;
                if (l > worst && racks_with(a, t, j, c, nw) >= want_racks) {
                    worst = l;
                    slot = j;
                }
            }
            if (slot < 0) {
                continue;
            }
        }
        if (row[slot] >= 0) {
            a->scount[row[slot]]--;
        }
        row[slot] = nw;
        a->scount[nw]++;
        a->acount[nw]--;
        a->acount[c]++;
        a->active[t] = c;
        held++;
    }
    return held;
}

/* -- Quotas ------------------------------------------------------------------------------- */

/* Thread-level bounds for `total` items: each thread floor(total/C) or ceil(total/C), so a
 * member with c threads holds c*floor .. c*ceil. Returns the budget: how many items may
 * still go above the lower bounds (total - sum of lo). */
static int64_t set_quota(asg_t *a, int64_t total)
{
    int64_t f = total / a->C, up = total % a->C ? 1 : 0, sum = 0;
    for (int32_t m = 0; m < a->M; m++) {
        a->lo[m] = (int32_t)(a->threads[m] * f);
        a->hi[m] = (int32_t)(a->threads[m] * (f + up));
        sum += a->lo[m];
    }
    return total - sum;
}

/* Is x/cx below y/cy (load per thread), ties by rank? */
static int lighter(int32_t x, int32_t cx, int32_t rx, int32_t y, int32_t cy, int32_t ry)
{
    int64_t l = (int64_t)x * cy, r = (int64_t)y * cx;
    return l != r ? l < r : rx < ry;
}

/* -- Actives ------------------------------------------------------------------------------ */

/* Room rule shared by every step: below lo always; up to hi while the budget lasts. */
static int take_room(const asg_t *a, const int32_t *count, int32_t m, int64_t *budget)
{
    if (count[m] < a->lo[m]) {
        return 1;
    }
    if (count[m] < a->hi[m] && *budget > 0) {
        (*budget)--;
        return 1;
    }
    return 0;
}

static void give_active(asg_t *a, int32_t t, int32_t m)
{
    a->active[t] = m;
    a->acount[m]++;
}

static int assign_actives(asg_t *a, int32_t *order, bk_assign_result_t *res)
{
    int64_t budget = set_quota(a, a->T);
    int32_t n = 0, npool = 0;
    cand_t *pool = NULL;

    /* Keep order: tasks whose state lives nowhere else first, so that a member over its
     * quota sheds the tasks that have a replica elsewhere (they move cheaply). */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t t = 0; t < a->T; t++) {
            int other = 0;
            for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
                other |= a->cands[i].member != a->prev[t];
            }
            if (other == pass) {
                order[n++] = t;
            }
        }
    }
    /* Keep: first up to every member's lower bound, then up to its upper bound while the
     * budget lasts. Two passes make the kept count the largest any balanced assignment
     * allows (docs/assignment.md), whatever the order. */
    for (int32_t i = 0; i < a->T; i++) {
        int32_t t = order[i], p = a->prev[t];
        if (p >= 0 && a->acount[p] < a->lo[p]) {
            give_active(a, t, p);
        }
    }
    /* Which member keeps above its lower bound does not change the count, so the budget
     * goes first to members that no orphan waits for: a member holding the best replica
     * of an orphan keeps its room for it when it can. demand[m] = such orphans. */
    {
        int32_t *demand = a->mstamp; /* scratch, cleared below */
        for (int32_t t = 0; t < a->T; t++) {
            int64_t best = LAG_NONE;
            if (a->prev[t] >= 0) {
                continue;
            }
            for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
                best = a->cands[i].lag < best ? a->cands[i].lag : best;
            }
            for (int32_t i = a->cstart[t]; i < a->cstart[t + 1] && best != LAG_NONE; i++) {
                demand[a->cands[i].member] += a->cands[i].lag == best;
            }
        }
        for (int pass = 0; pass < 2; pass++) {
            for (int32_t i = 0; i < a->T; i++) {
                int32_t t = order[i], p = a->prev[t];
                if (p >= 0 && a->active[t] < 0 && (demand[p] > 0) == pass &&
                    take_room(a, a->acount, p, &budget)) {
                    give_active(a, t, p);
                }
            }
        }
        memset(demand, 0, (size_t)a->M * sizeof(*demand));
    }
    /* Promote: the tasks left over go to the lowest-lag holder of their state that has room,
     * orphans (previous active gone) before tasks shed by a member over its quota. */
    pool = malloc(((size_t)a->cstart[a->T] + 1) * sizeof(*pool));
    if (!pool) {
        return -1;
    }
    for (int32_t t = 0; t < a->T; t++) {
        if (a->active[t] >= 0) {
            continue;
        }
        for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
            if (a->cands[i].lag != LAG_NONE) {
                pool[npool] = a->cands[i];
                pool[npool++].shed = a->prev[t] >= 0;
            }
        }
    }
    qsort(pool, (size_t)npool, sizeof(*pool), cand_lag_cmp);
    for (int32_t i = 0; i < npool; i++) {
        int32_t t = pool[i].task, m = pool[i].member;
        if (a->active[t] < 0 && take_room(a, a->acount, m, &budget)) {
            give_active(a, t, m);
        }
    }
    free(pool);
    /* Fill: the rest, one by one, to the least loaded member per thread (deficits first).
     * The pool and the room left are equal in size, so a member is always found. */
    for (int32_t t = 0; t < a->T; t++) {
        int32_t best = -1, best_class = 3;
        if (a->active[t] >= 0) {
            continue;
        }
        for (int32_t m = 0; m < a->M; m++) {
            int cls = a->acount[m] < a->lo[m] ? 0 : a->acount[m] < a->hi[m] && budget > 0 ? 1 : 2;
            if (cls < best_class ||
                (cls == best_class && lighter(a->acount[m], a->threads[m], m, a->acount[best],
                                              a->threads[best], best))) {
                best = m;
                best_class = cls;
            }
        }
        budget -= best_class == 1;
        give_active(a, t, best);
    }
    /* Swap to a lower-lag holder while balance allows: the task moves anyway, so it costs
     * nothing in movement. Each swap strictly lowers a task's lag: this ends. */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t t = 0; t < a->T; t++) {
            int32_t y = a->active[t], best = -1;
            int64_t bl;
            if (y == a->prev[t] || a->acount[y] <= a->lo[y]) {
                continue;
            }
            bl = lag_of(a, t, y);
            for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
                int32_t m = a->cands[i].member;
                if (a->cands[i].lag < bl && m != y && a->acount[m] < a->hi[m]) {
                    best = m;
                    bl = a->cands[i].lag;
                }
            }
            if (best >= 0) {
                a->acount[y]--;
                give_active(a, t, best);
                changed = 1;
            }
        }
    }
    /* Figures: moves against the least possible, and how orphans fared. */
    {
        int64_t clamp = 0, forced = 0;
        int32_t *kept = a->mstamp; /* scratch: previous actives per member */
        memset(kept, 0, (size_t)a->M * sizeof(*kept));
        for (int32_t t = 0; t < a->T; t++) {
            int32_t p = a->prev[t];
            if (p < 0) {
                int64_t best = LAG_NONE;
                res->orphaned++;
                for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
                    best = a->cands[i].lag < best ? a->cands[i].lag : best;
                }
                res->promoted += best != LAG_NONE && lag_of(a, t, a->active[t]) == best;
                continue;
            }
            kept[p]++;
            res->moved += a->active[t] != p;
        }
        for (int32_t m = 0; m < a->M; m++) {
            int32_t k = kept[m];
            forced += k > a->hi[m] ? k - a->hi[m] : 0;
            clamp += k < a->lo[m] ? a->lo[m] : k > a->hi[m] ? a->hi[m] : k;
        }
        res->min_moved = (int32_t)(forced + (clamp > a->T ? clamp - a->T : 0));
        memset(kept, 0, (size_t)a->M * sizeof(*kept)); /* mstamp again: no stale marks */
    }
    return 0;
}

/* -- Standbys ----------------------------------------------------------------------------- */

/* Tie-breaks between equally loaded members. Ranks alone would send every standby of one
 * member's tasks to the same neighbour, and when that member failed its whole load would
 * fall on that one node, too full to take it: the orphans would start cold elsewhere. So
 * first the member holding the fewest standbys of this task's active's tasks (pair counts),
 * then a mix (murmur3's finaliser) of task index and rank, which depends on ids only. */
static uint32_t spread(int32_t t, int32_t m)
{
    uint32_t h = (uint32_t)t * 0x9e3779b1u ^ (uint32_t)m * 0x85ebca77u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* Is m a better standby target than best for task t: lower class, then load per thread,
 * then spread()? */
static int better_standby(const asg_t *a, int32_t t, int32_t m, int cls, int32_t best,
                          int best_class)
{
    int64_t l, r;
    if (cls != best_class) {
        return cls < best_class;
    }
    l = (int64_t)a->scount[m] * a->threads[best];
    r = (int64_t)a->scount[best] * a->threads[m];
    if (l != r) {
        return l < r;
    }
    if (a->pair) {
        const int32_t *row = &a->pair[(size_t)a->active[t] * (size_t)a->M];
        if (row[m] != row[best]) {
            return row[m] < row[best];
        }
    }
    return spread(t, m) < spread(t, best) || (spread(t, m) == spread(t, best) && m < best);
}

/* Marks the replicas of task t (but standby slot `skip`, NO_SLOT: none) and their racks
 * with a fresh stamp; returns how many distinct racks they span. */
static int32_t mark_task(asg_t *a, int32_t t, int32_t skip)
{
    int32_t racks = 0;
    a->stamp++;
    for (int32_t j = -1; j < a->K; j++) {
        int32_t m = j < 0 ? a->active[t] : a->standby[(size_t)t * a->K + j];
        if (m < 0 || j == skip) {
            continue;
        }
        a->mstamp[m] = a->stamp;
        if (a->rstamp[a->rack[m]] != a->stamp) {
            a->rstamp[a->rack[m]] = a->stamp;
            racks++;
        }
    }
    return racks;
}

static int32_t standby_fill(const asg_t *a, int32_t t)
{
    int32_t n = 0;
    while (n < a->K && a->standby[(size_t)t * a->K + n] >= 0) {
        n++;
    }
    return n;
}

/* May member m become the next standby of task t (after mark_task(t, NO_SLOT))? Not on a
 * replica's node; in an unused rack whenever the slots left are needed to reach every rack
 * (or K'+1 racks), which keeps min(R, K'+1) racks reachable after every step. */
static int standby_ok(const asg_t *a, int32_t m, int32_t filled, int32_t racks)
{
    int32_t unused = a->R - racks, after = a->K - filled - 1;
    if (a->mstamp[m] == a->stamp) {
        return 0;
    }
    return a->rstamp[a->rack[m]] != a->stamp || unused <= after;
}

static void count_pair(asg_t *a, int32_t t, int32_t m, int32_t d)
{
    if (a->pair) {
        a->pair[(size_t)a->active[t] * (size_t)a->M + (size_t)m] += d;
    }
}

static void give_standby(asg_t *a, int32_t t, int32_t filled, int32_t m)
{
    a->standby[(size_t)t * a->K + filled] = m;
    a->scount[m]++;
    count_pair(a, t, m, 1);
}

typedef struct slotkey {
    int64_t lag;
    int32_t slot; /* t * K + j */
} slotkey_t;

/* Least caught up first: those are the cheapest standbys to move. */
static int slotkey_cmp(const void *pa, const void *pb)
{
    const slotkey_t *a = pa, *b = pb;
    if (a->lag != b->lag) {
        return a->lag > b->lag ? -1 : 1;
    }
    return (a->slot > b->slot) - (a->slot < b->slot);
}

/* Moves standbys from members over their quota to members under it while one move keeps the
 * rules; each move lowers the total excess + shortfall, so this ends. */
static int balance_standbys(asg_t *a)
{
    int32_t want = a->R < a->K + 1 ? a->R : a->K + 1; /* racks a task must span */
    int32_t *start = NULL;
    slotkey_t *list = NULL;
    int rc = -1;

    start = malloc(((size_t)a->M + 1) * sizeof(*start));
    list = malloc(((size_t)a->T * a->K + 1) * sizeof(*list));
    if (!start || !list) {
        goto fail;
    }
    for (;;) {
        int32_t over = 0, under = 0, moves = 0;
        for (int32_t m = 0; m < a->M; m++) {
            over += a->scount[m] > a->hi[m];
            under += a->scount[m] < a->lo[m];
        }
        if (!over && !under) {
            break;
        }
        /* Each member's standby slots (t*K + j), rebuilt per round. */
        memset(start, 0, ((size_t)a->M + 1) * sizeof(*start));
        for (size_t s = 0; s < (size_t)a->T * a->K; s++) {
            start[a->standby[s] + 1]++;
        }
        for (int32_t m = 0; m < a->M; m++) {
            start[m + 1] += start[m];
        }
        /* start[m] serves as m's cursor, then shifts back into place. */
        for (size_t s = 0; s < (size_t)a->T * a->K; s++) {
            int32_t m = a->standby[s];
            list[start[m]++] = (slotkey_t){lag_of(a, (int32_t)(s / a->K), m), (int32_t)s};
        }
        for (int32_t m = a->M; m > 0; m--) {
            start[m] = start[m - 1];
        }
        start[0] = 0;
        for (int32_t o = 0; o < a->M; o++) {
            if (a->scount[o] > a->lo[o]) {
                qsort(list + start[o], (size_t)(start[o + 1] - start[o]), sizeof(*list),
                      slotkey_cmp);
            }
            for (int32_t i = start[o]; i < start[o + 1]; i++) {
                int32_t s = list[i].slot, t = s / a->K, j = s % a->K, best = -1, racks;
                int over_o = a->scount[o] > a->hi[o];
                if (a->scount[o] <= a->lo[o] || (!over_o && !under)) {
                    break;
                }
                racks = mark_task(a, t, j);
                for (int32_t u = 0; u < a->M; u++) {
                    int under_u = a->scount[u] < a->lo[u];
                    if (!(under_u || (over_o && a->scount[u] < a->hi[u])) ||
                        a->mstamp[u] == a->stamp ||
                        (racks < want && a->rstamp[a->rack[u]] == a->stamp)) {
                        continue;
                    }
                    if (best < 0 || (under_u && a->scount[best] >= a->lo[best]) ||
                        (under_u == (a->scount[best] < a->lo[best]) &&
                         lighter(a->scount[u], a->threads[u], u, a->scount[best], a->threads[best],
                                 best))) {
                        best = u;
                    }
                }
                if (best >= 0) {
                    under -= a->scount[best] == a->lo[best] - 1;
                    count_pair(a, t, o, -1);
                    count_pair(a, t, best, 1);
                    a->standby[s] = best;
                    a->scount[o]--;
                    a->scount[best]++;
                    moves++;
                }
            }
        }
        if (!moves) {
            break;
        }
    }
    rc = 0;
fail:
    free(start);
    free(list);
    return rc;
}

/* Can standby slot s (task s / K) move to member y under the node and rack rules? */
static int movable(asg_t *a, int32_t s, int32_t y, int32_t want)
{
    int32_t t = s / a->K, racks = mark_task(a, t, s % a->K);
    return a->mstamp[y] != a->stamp && (racks >= want || a->rstamp[a->rack[y]] != a->stamp);
}

/* Chains of moves, o -> x1 -> ... -> u, each passing one standby on, for what single moves
 * cannot fix: with racks A, B, C, a member in A over its quota may hold only standbys of
 * actives in B, which no member in B may take, while one in C may, and gives one of its own
 * to B instead. Breadth-first from every member over (or above its lower bound) to one
 * under; the intermediate members keep their counts. Each chain lowers the imbalance by
 * one. Work is bounded (a few times S + M^2 steps); the single-move pass runs after it. */
static int chain_standbys(asg_t *a)
{
    int32_t want = a->R < a->K + 1 ? a->R : a->K + 1, M = a->M;
    size_t S = (size_t)a->T * a->K;
    int64_t work = 0, limit = 32 * ((int64_t)S + (int64_t)M * M);
    int32_t *head = malloc(((size_t)M + 1) * sizeof(int32_t));
    int32_t *next = malloc((S + 1) * sizeof(int32_t)), *prev = malloc((S + 1) * sizeof(int32_t));
    int32_t *parent = malloc(((size_t)M + 1) * sizeof(int32_t));
    int32_t *via = malloc(((size_t)M + 1) * sizeof(int32_t));
    int32_t *queue = malloc(((size_t)M + 1) * sizeof(int32_t));
    int32_t *seen = calloc((size_t)M + 1, sizeof(int32_t)), round = 0;
    int rc = -1;

    if (!head || !next || !prev || !parent || !via || !queue || !seen) {
        goto fail;
    }
    for (int32_t m = 0; m < M; m++) {
        head[m] = -1;
    }
    for (size_t s = 0; s < S; s++) {
        int32_t m = a->standby[s];
        prev[s] = -1;
        next[s] = head[m];
        if (head[m] >= 0) {
            prev[head[m]] = (int32_t)s;
        }
        head[m] = (int32_t)s;
    }
    while (work < limit) {
        int found = -1;
        for (int phase = 0; phase < 2 && found < 0; phase++) {
            /* phase 0: from above lo to below lo; phase 1: from above hi to below hi. */
            const int32_t *bound = phase ? a->hi : a->lo;
            int32_t qh = 0, qt = 0, sinks = 0;
            round++;
            for (int32_t m = 0; m < M; m++) {
                sinks += a->scount[m] < bound[m];
                if (a->scount[m] > bound[m]) {
                    seen[m] = round;
                    parent[m] = -1;
                    queue[qt++] = m;
                }
            }
            if (!sinks) {
                continue;
            }
            while (qh < qt && found < 0 && work < limit) {
                int32_t x = queue[qh++];
                for (int32_t y = 0; y < M && found < 0; y++) {
                    if (seen[y] == round) {
                        continue;
                    }
                    for (int32_t s = head[x]; s >= 0; s = next[s]) {
                        work += a->K + 1;
                        if (movable(a, s, y, want)) {
                            seen[y] = round;
                            parent[y] = x;
                            via[y] = s;
                            queue[qt++] = y;
                            found = a->scount[y] < bound[y] ? y : -1;
                            break;
                        }
                    }
                }
            }
        }
        if (found < 0) {
            break;
        }
        /* A move only changes its own task's replicas, so the witnesses found on the way
         * all still hold unless two belong to one task (K' > 1): then stop here. */
        for (int32_t y = found; parent[y] >= 0; y = parent[y]) {
            for (int32_t z = parent[y]; parent[z] >= 0; z = parent[z]) {
                if (via[z] / a->K == via[y] / a->K) {
                    rc = 0;
                    goto fail;
                }
            }
        }
        /* Pass the standbys on, from the sink back to the source. */
        for (int32_t y = found; parent[y] >= 0; y = parent[y]) {
            int32_t s = via[y], x = parent[y], t = s / a->K;
            if (prev[s] >= 0) {
                next[prev[s]] = next[s];
            } else {
                head[x] = next[s];
            }
            if (next[s] >= 0) {
                prev[next[s]] = prev[s];
            }
            prev[s] = -1;
            next[s] = head[y];
            if (head[y] >= 0) {
                prev[head[y]] = s;
            }
            head[y] = s;
            count_pair(a, t, x, -1);
            count_pair(a, t, y, 1);
            a->standby[s] = y;
            a->scount[x]--;
            a->scount[y]++;
        }
    }
    rc = 0;
fail:
    free(head);
    free(next);
    free(prev);
    free(parent);
    free(via);
    free(queue);
    free(seen);
    return rc;
}

static int assign_standbys(asg_t *a)
{
    int64_t budget;
    int32_t n = 0;
    cand_t *c = NULL;

    if (a->K == 0) {
        return 0;
    }
    budget = set_quota(a, (int64_t)a->T * a->K);
    /* Keep: every replica that holds state, lowest lag first, as far as the rules allow.
     * No quota here: the local search below moves only what lowers the imbalance, so a
     * placement the rack rule forced out of balance is not reshuffled for nothing. */
    c = malloc(((size_t)a->cstart[a->T] + 1) * sizeof(*c));
    if (!c) {
        return -1;
    }
    for (int32_t i = 0; i < a->cstart[a->T]; i++) {
        if (a->cands[i].lag != LAG_NONE && a->cands[i].member != a->active[a->cands[i].task]) {
            c[n] = a->cands[i];
            c[n++].shed = 0;
        }
    }
    qsort(c, (size_t)n, sizeof(*c), cand_lag_cmp);
    for (int32_t i = 0; i < n; i++) {
        int32_t t = c[i].task, m = c[i].member, filled = standby_fill(a, t), racks;
        if (filled == a->K) {
            continue;
        }
        racks = mark_task(a, t, NO_SLOT);
        if (standby_ok(a, m, filled, racks)) {
            give_standby(a, t, filled, m);
        }
    }
    free(c);
    /* What the keeps took beyond the lower bounds comes out of the fill's budget. */
    for (int32_t m = 0; m < a->M; m++) {
        budget -= a->scount[m] > a->lo[m] ? a->scount[m] - a->lo[m] : 0;
    }
    /* Fill: each empty slot to the allowed member with the lowest load per thread, members
     * under their lower bound first, then those the budget lets above it. */
    for (int32_t t = 0; t < a->T; t++) {
        for (int32_t filled = standby_fill(a, t); filled < a->K; filled++) {
            int32_t racks = mark_task(a, t, NO_SLOT), best = -1, best_class = 3;
            for (int32_t m = 0; m < a->M; m++) {
                int cls;
                if (!standby_ok(a, m, filled, racks)) {
                    continue;
                }
                cls = a->scount[m] < a->lo[m] ? 0 : a->scount[m] < a->hi[m] && budget > 0 ? 1 : 2;
                if (best < 0 || better_standby(a, t, m, cls, best, best_class)) {
                    best = m;
                    best_class = cls;
                }
            }
            budget -= best_class == 1;
            give_standby(a, t, filled, best);
        }
    }
    if (balance_standbys(a) != 0 || chain_standbys(a) != 0 || balance_standbys(a) != 0) {
        return -1;
    }
    /* A row in rank (id) order: the same set of standbys always reads the same, and a
     * delta does not list a task whose standbys merely came in another order. */
    for (int32_t t = 0; t < a->T; t++) {
        int32_t *row = &a->standby[(size_t)t * a->K];
        for (int32_t i = 1; i < a->K; i++) {
            for (int32_t j = i; j > 0 && row[j - 1] > row[j]; j--) {
                int32_t x = row[j];
                row[j] = row[j - 1];
                row[j - 1] = x;
            }
        }
    }
    return 0;
}

/* -- Entry point -------------------------------------------------------------------------- */

static void asg_free(asg_t *a)
{
    free(a->order);
    free(a->rank);
    free(a->threads);
    free(a->rack);
    free(a->prev);
    free(a->cstart);
    free(a->cands);
    free(a->active);
    free(a->standby);
    free(a->acount);
    free(a->scount);
    free(a->lo);
    free(a->hi);
    free(a->mstamp);
    free(a->rstamp);
    free(a->pair);
}

int bk_assign_compute(const bk_assign_input_t *in, bk_assign_result_t *res, char *errstr,
                      size_t errstr_size)
{
    asg_t a = {0};
    named_t *tmp = NULL;
    int32_t *torder = NULL;
    size_t M1, T1;

    memset(res, 0, sizeof(*res));
    if (in->nmembers < 0 || in->ntasks < 0 || in->standbys < 0 || in->nlags < 0 ||
        (in->prev_standby && in->prev_width < 0)) {
        seterr(errstr, errstr_size, "negative count in the assignor's input");
        return -1;
    }
    if (in->nmembers == 0 && in->ntasks > 0) {
        seterr(errstr, errstr_size, "%d tasks and no member", (int)in->ntasks);
        return -1;
    }
    a.M = in->nmembers;
    a.T = in->ntasks;
    a.K = in->standbys < a.M - 1 ? in->standbys : (a.M > 0 ? a.M - 1 : 0);
    if ((int64_t)a.T * (a.K + 1) > INT32_MAX) {
        seterr(errstr, errstr_size, "%d tasks x %d replicas is too many", (int)a.T, (int)a.K + 1);
        return -1;
    }
    M1 = (size_t)a.M + 1;
    T1 = (size_t)a.T + 1;
    tmp = malloc(M1 * sizeof(*tmp));
    torder = malloc(T1 * sizeof(*torder));
    a.order = malloc(M1 * sizeof(int32_t));
    a.rank = malloc(M1 * sizeof(int32_t));
    a.threads = malloc(M1 * sizeof(int32_t));
    a.rack = malloc(M1 * sizeof(int32_t));
    a.prev = malloc(T1 * sizeof(int32_t));
    a.cstart = malloc((T1 + 1) * sizeof(int32_t));
    a.active = malloc(T1 * sizeof(int32_t));
    a.standby = malloc((T1 * (size_t)a.K + 1) * sizeof(int32_t));
    a.acount = calloc(M1, sizeof(int32_t));
    a.scount = calloc(M1, sizeof(int32_t));
    a.lo = malloc(M1 * sizeof(int32_t));
    a.hi = malloc(M1 * sizeof(int32_t));
    a.mstamp = calloc(M1, sizeof(int32_t));
    a.rstamp = calloc(M1, sizeof(int32_t));
    res->active = malloc(T1 * sizeof(int32_t));
    res->standby = malloc((T1 * (size_t)a.K + 1) * sizeof(int32_t));
    res->active_count = calloc(M1, sizeof(int32_t));
    res->standby_count = calloc(M1, sizeof(int32_t));
    if (!tmp || !torder || !a.order || !a.rank || !a.threads || !a.rack || !a.prev || !a.cstart ||
        !a.active || !a.standby || !a.acount || !a.scount || !a.lo || !a.hi || !a.mstamp ||
        !a.rstamp || !res->active || !res->standby || !res->active_count || !res->standby_count) {
        seterr(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (rank_members(&a, in, tmp, errstr, errstr_size) != 0 ||
        build_cands(&a, in, errstr, errstr_size) != 0) {
        goto fail;
    }
    for (int32_t t = 0; t < a.T; t++) {
        a.active[t] = -1;
    }
    for (size_t s = 0; s < (size_t)a.T * a.K; s++) {
        a.standby[s] = -1;
    }
    if (a.K > 0 && a.M <= PAIR_MAX_MEMBERS) {
        a.pair = calloc((size_t)a.M * (size_t)a.M, sizeof(int32_t));
        if (!a.pair) {
            seterr(errstr, errstr_size, "out of memory");
            goto fail;
        }
    }
    if (a.T > 0 && (assign_actives(&a, torder, res) != 0 || assign_standbys(&a) != 0)) {
        seterr(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (in->warmup && a.K > 0) {
        res->warmups = warm_up(&a, in->acceptable_lag);
    }
    /* Back from ranks to the caller's member indices. */
    res->ntasks = a.T;
    res->nmembers = a.M;
    res->k = a.K;
    for (int32_t t = 0; t < a.T; t++) {
        res->active[t] = a.order[a.active[t]];
        res->active_count[res->active[t]]++;
    }
    for (size_t s = 0; s < (size_t)a.T * a.K; s++) {
        res->standby[s] = a.order[a.standby[s]];
        res->standby_count[res->standby[s]]++;
    }
    free(tmp);
    free(torder);
    asg_free(&a);
    return 0;
fail:
    free(tmp);
    free(torder);
    asg_free(&a);
    bk_assign_result_destroy(res);
    return -1;
}

void bk_assign_result_destroy(bk_assign_result_t *res)
{
    free(res->active);
    free(res->standby);
    free(res->active_count);
    free(res->standby_count);
    memset(res, 0, sizeof(*res));
}

/* -- The FFI builder ---------------------------------------------------------------------- */

struct bk_assign_builder_s {
    bk_assign_input_t in; /* points into the arrays below while computing */
    bk_assign_result_t res;
    bk_assign_member_t *members; /* strings owned */
    int32_t mcap;
    int32_t *prev_active;  /* [ntasks] */
    int32_t *prev_standby; /* [ntasks * prev_width] */
    int32_t prev_width;
    bk_assign_lag_t *lags;
    int32_t lcap;
    int computed;
    char err[256];
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d) {
        memcpy(d, s ? s : "", n);
    }
    return d;
}

bk_assign_builder_t *bk_ffi_assign_new(int32_t ntasks, int32_t standbys)
{
    bk_assign_builder_t *b;
    if (ntasks < 0 || standbys < 0) {
        return NULL;
    }
    b = calloc(1, sizeof(*b));
    if (!b) {
        return NULL;
    }
    b->in.ntasks = ntasks;
    b->in.standbys = standbys;
    b->prev_active = malloc(((size_t)ntasks + 1) * sizeof(int32_t));
    if (!b->prev_active) {
        free(b);
        return NULL;
    }
    for (int32_t t = 0; t < ntasks; t++) {
        b->prev_active[t] = -1;
    }
    return b;
}

int32_t bk_ffi_assign_add_member(bk_assign_builder_t *b, const char *id, const char *rack,
                                 const char *endpoint, int32_t threads)
{
    bk_assign_member_t *mem;
    if (b->in.nmembers == b->mcap) {
        int32_t cap = b->mcap ? b->mcap * 2 : 16;
        bk_assign_member_t *m = realloc(b->members, (size_t)cap * sizeof(*m));
        if (!m) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        b->members = m;
        b->mcap = cap;
    }
    mem = &b->members[b->in.nmembers];
    mem->id = dupstr(id);
    mem->rack = dupstr(rack);
    mem->endpoint = dupstr(endpoint);
    mem->threads = threads;
    if (!mem->id || !mem->rack || !mem->endpoint) {
        free((char *)mem->id);
        free((char *)mem->rack);
        free((char *)mem->endpoint);
        snprintf(b->err, sizeof(b->err), "out of memory");
        return BK_FFI_ERR;
    }
    return b->in.nmembers++;
}

/* The previous placement of a task: its active (-1: none or gone) and n standbys. */
int bk_ffi_assign_set_prev(bk_assign_builder_t *b, int32_t task, int32_t active,
                           const int32_t *standby, int32_t n)
{
    if (task < 0 || task >= b->in.ntasks || n < 0) {
        snprintf(b->err, sizeof(b->err), "set_prev: task %d or count %d out of range", (int)task,
                 (int)n);
        return BK_FFI_ERR;
    }
    if (n > b->prev_width) {
        /* Widen every row; new cells are empty. */
        size_t T = (size_t)b->in.ntasks;
        int32_t *w = malloc((T * (size_t)n + 1) * sizeof(*w));
        if (!w) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        for (size_t t = 0; t < T; t++) {
            for (int32_t j = 0; j < n; j++) {
                w[t * (size_t)n + (size_t)j] =
                    j < b->prev_width ? b->prev_standby[t * (size_t)b->prev_width + (size_t)j] : -1;
            }
        }
        free(b->prev_standby);
        b->prev_standby = w;
        b->prev_width = n;
    }
    b->prev_active[task] = active;
    for (int32_t j = 0; j < b->prev_width; j++) {
        b->prev_standby[(size_t)task * (size_t)b->prev_width + (size_t)j] = j < n ? standby[j] : -1;
    }
    return BK_FFI_OK;
}

int bk_ffi_assign_add_lag(bk_assign_builder_t *b, int32_t task, int32_t member, int64_t lag)
{
    if (b->in.nlags == b->lcap) {
        int32_t cap = b->lcap ? b->lcap * 2 : 64;
        bk_assign_lag_t *l = realloc(b->lags, (size_t)cap * sizeof(*l));
        if (!l) {
            snprintf(b->err, sizeof(b->err), "out of memory");
            return BK_FFI_ERR;
        }
        b->lags = l;
        b->lcap = cap;
    }
    b->lags[b->in.nlags++] = (bk_assign_lag_t){task, member, lag};
    return BK_FFI_OK;
}

const bk_assign_input_t *bk_assign_builder_input(bk_assign_builder_t *b)
{
    b->in.members = b->members;
    b->in.prev_active = b->prev_active;
    b->in.prev_standby = b->prev_standby;
    b->in.prev_width = b->prev_width;
    b->in.lags = b->lags;
    return &b->in;
}

int bk_ffi_assign_set_warmup(bk_assign_builder_t *b, int on, int64_t acceptable_lag)
{
    b->in.warmup = on;
    b->in.acceptable_lag = acceptable_lag;
    return BK_FFI_OK;
}

int32_t bk_ffi_assign_warmups(const bk_assign_builder_t *b)
{
    return b->computed ? b->res.warmups : BK_FFI_ERR;
}

int bk_ffi_assign_compute(bk_assign_builder_t *b)
{
    bk_assign_builder_input(b);
    bk_assign_result_destroy(&b->res);
    b->computed = bk_assign_compute(&b->in, &b->res, b->err, sizeof(b->err)) == 0;
    return b->computed ? BK_FFI_OK : BK_FFI_ERR;
}

/* The last result: actives [ntasks]; standbys [ntasks * *k]. NULL before a compute. */
const int32_t *bk_ffi_assign_active(const bk_assign_builder_t *b)
{
    return b->computed ? b->res.active : NULL;
}

const int32_t *bk_ffi_assign_standby(const bk_assign_builder_t *b, int32_t *k)
{
    *k = b->computed ? b->res.k : 0;
    return b->computed ? b->res.standby : NULL;
}

int bk_ffi_assign_stats(const bk_assign_builder_t *b, int32_t *moved, int32_t *min_moved,
                        int32_t *orphaned, int32_t *promoted)
{
    if (!b->computed) {
        return BK_FFI_ERR;
    }
    *moved = b->res.moved;
    *min_moved = b->res.min_moved;
    *orphaned = b->res.orphaned;
    *promoted = b->res.promoted;
    return BK_FFI_OK;
}

const char *bk_ffi_assign_error(const bk_assign_builder_t *b)
{
    return b->err;
}

void bk_ffi_assign_free(bk_assign_builder_t *b)
{
    if (!b) {
        return;
    }
    for (int32_t i = 0; i < b->in.nmembers; i++) {
        free((char *)b->members[i].id);
        free((char *)b->members[i].rack);
        free((char *)b->members[i].endpoint);
    }
    bk_assign_result_destroy(&b->res);
    free(b->members);
    free(b->prev_active);
    free(b->prev_standby);
    free(b->lags);
    free(b);
}

const bk_assign_result_t *bk_assign_builder_result(const bk_assign_builder_t *b)
{
    return b->computed ? &b->res : NULL;
}
