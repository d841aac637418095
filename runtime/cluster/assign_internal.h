/* assign_internal.h - the assignor's working state, shared by assign.c (ranking,
 * candidates, warm-up, actives, the entry point) and assign_standby.c (standby placement)
 * only. One computation runs on one thread; nothing here is shared between computations. */
#ifndef BK_ASSIGN_INTERNAL_H
#define BK_ASSIGN_INTERNAL_H

#include <stdint.h>

#include "cluster/assign.h"

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
    const uint8_t *bare; /* [T] or NULL: 1 for a task that gets no standbys (no_standby) */
    int32_t nbare;
} asg_t;

/* Up to this many members the standby fill counts pairs (4 MiB at most). */
#define PAIR_MAX_MEMBERS 1024

/* Shared by both phases (static inline: each file its own copy, no call between them). */

/* Lowest lag first; among equals orphans before shed tasks, then by task and member. */
static inline int bk_assign_cand_lag_cmp(const void *pa, const void *pb)
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

/* The lag key of member m for task t. */
static inline int64_t bk_assign_lag_of(const asg_t *a, int32_t t, int32_t m)
{
    for (int32_t i = a->cstart[t]; i < a->cstart[t + 1]; i++) {
        if (a->cands[i].member == m) {
            return a->cands[i].lag;
        }
    }
    return LAG_NONE;
}

static inline int64_t bk_assign_set_quota(asg_t *a, int64_t total)
{
    int64_t f = total / a->C, up = total % a->C ? 1 : 0, sum = 0;
    for (int32_t m = 0; m < a->M; m++) {
        a->lo[m] = (int32_t)(a->threads[m] * f);
        a->hi[m] = (int32_t)(a->threads[m] * (f + up));
        sum += a->lo[m];
    }
    return total - sum;
}

static inline int bk_assign_lighter(int32_t x, int32_t cx, int32_t rx, int32_t y, int32_t cy,
                                    int32_t ry)
{
    int64_t l = (int64_t)x * cy, r = (int64_t)y * cx;
    return l != r ? l < r : rx < ry;
}

/* Places every task's standbys (docs/assignment.md, Standbys). 0, or -1 out of memory. */
int bk_assign_standbys(asg_t *a);

#endif
