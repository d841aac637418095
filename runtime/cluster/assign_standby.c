/* assign_standby.c - the assignor's second phase (assign.h): standby replicas under the
 * node and rack rules. Keep every replica that holds state, fill the empty slots, then move
 * standbys from members over their quota to members under it, one at a time and then along
 * chains of members (docs/assignment.md, Standbys). */
#include "cluster/assign_internal.h"

#include <stdlib.h>
#include <string.h>

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
            if (a->standby[s] >= 0) { /* (a task without standbys has none to move) */
                start[a->standby[s] + 1]++;
            }
        }
        for (int32_t m = 0; m < a->M; m++) {
            start[m + 1] += start[m];
        }
        /* start[m] serves as m's cursor, then shifts back into place. */
        for (size_t s = 0; s < (size_t)a->T * a->K; s++) {
            int32_t m = a->standby[s];
            if (m >= 0) {
                list[start[m]++] =
                    (slotkey_t){bk_assign_lag_of(a, (int32_t)(s / a->K), m), (int32_t)s};
            }
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
                         bk_assign_lighter(a->scount[u], a->threads[u], u, a->scount[best],
                                           a->threads[best], best))) {
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
        if (m < 0) {
            continue; /* a task without standbys */
        }
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

int bk_assign_standbys(asg_t *a)
{
    int64_t budget;
    int32_t n = 0;
    cand_t *c = NULL;

    if (a->K == 0) {
        return 0;
    }
    budget = bk_assign_set_quota(a, (int64_t)(a->T - a->nbare) * a->K);
    /* Keep: every replica that holds state, lowest lag first, as far as the rules allow.
     * No quota here: the local search below moves only what lowers the imbalance, so a
     * placement the rack rule forced out of balance is not reshuffled for nothing. */
    c = malloc(((size_t)a->cstart[a->T] + 1) * sizeof(*c));
    if (!c) {
        return -1;
    }
    for (int32_t i = 0; i < a->cstart[a->T]; i++) {
        if (a->cands[i].lag != LAG_NONE && a->cands[i].member != a->active[a->cands[i].task] &&
            !(a->bare && a->bare[a->cands[i].task])) {
            c[n] = a->cands[i];
            c[n++].shed = 0;
        }
    }
    qsort(c, (size_t)n, sizeof(*c), bk_assign_cand_lag_cmp);
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
        if (a->bare && a->bare[t]) {
            continue; /* it holds no state: a standby would keep nothing */
        }
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
