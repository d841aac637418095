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
#include "cluster/assign_internal.h"


#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* -- Warm-up (KIP-441) --------------------------------------------------------------------- */

/* Racks spanned by member `extra` and the row of task t without its slot `skip`. */
static int32_t racks_with(asg_t *a, int32_t t, int32_t skip, int32_t extra, int32_t extra2)
{
    int32_t n = 0;
    a->stamp++;
    for (int32_t j = -2; j < a->K; j++) {
        int32_t m = j == -2   ? extra
                    : j == -1 ? extra2
                              : (j == skip ? -1 : a->standby[t * a->K + j]);
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
        if ((a->bare && a->bare[t]) || bk_assign_lag_of(a, t, nw) <= acceptable) {
            continue;
        }
        for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
            const cand_t *cd = &a->cands[i];
            if (cd->member != nw && cd->lag <= acceptable && cd->lag < best) {
                best = cd->lag;
                c = cd->member;
            }
        }
        if (a->prev[t] >= 0 && a->prev[t] != nw &&
            bk_assign_lag_of(a, t, a->prev[t]) <= acceptable) {
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
                int64_t l = row[j] >= 0 ? bk_assign_lag_of(a, t, row[j]) : LAG_NONE;
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
/* Is x/cx below y/cy (load per thread), ties by rank? */
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
    int64_t budget = bk_assign_set_quota(a, a->T);
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
    qsort(pool, (size_t)npool, sizeof(*pool), bk_assign_cand_lag_cmp);
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
                (cls == best_class && bk_assign_lighter(a->acount[m], a->threads[m], m,
                                                        a->acount[best], a->threads[best], best))) {
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
            bl = bk_assign_lag_of(a, t, y);
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
                res->promoted += best != LAG_NONE && bk_assign_lag_of(a, t, a->active[t]) == best;
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
        a.nbare += in->no_standby && in->no_standby[t];
    }
    a.bare = in->no_standby;
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
    if (a.T > 0 && (assign_actives(&a, torder, res) != 0 || bk_assign_standbys(&a) != 0)) {
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
        res->standby[s] = a.standby[s] >= 0 ? a.order[a.standby[s]] : -1;
        if (res->standby[s] >= 0) {
            res->standby_count[res->standby[s]]++;
        }
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
