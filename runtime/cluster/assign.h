/* assign.h - the assignor: a pure, deterministic function from (members with racks and
 * threads, tasks, previous assignment, replica lags, standby count K) to an active and K
 * standbys per task. It neither reads nor publishes anything: the membership code feeds it
 * and assigncodec.h encodes what it returns. docs/assignment.md has the algorithm and proofs.
 *
 * Guarantees of bk_assign_compute() (K' = min(K, nmembers - 1) standbys per task, C = total
 * threads, T = tasks):
 *  - balance: member m with c threads gets between c*floor(T/C) and c*ceil(T/C) actives, so
 *    its threads can each hold floor(T/C) or ceil(T/C): +-1 task per thread cluster-wide.
 *    Standbys (S = T'*K' for the T' tasks that hold state, no_standby) aim at the same
 *    bounds with S for T, but the node and rack rules
 *    below win over them. No single standby move that keeps the rules lowers the excess over
 *    those bounds or the shortfall below them; with K' = 1 the standbys are within their
 *    bounds whenever any placement of them could be (chains of moves, within a work bound
 *    of 32*(S + M^2) steps that the specs and the benchmark never reach);
 *  - stickiness: the number of tasks whose previous active is present yet that move is the
 *    least any balanced assignment needs (exact, see res->min_moved);
 *  - placement: the K'+1 replicas of a task sit on K'+1 distinct members and span
 *    min(R, K'+1) distinct racks (R = distinct racks among members);
 *  - caught-up first: a task whose active changes goes to the member with the lowest lag
 *    that balance lets take it; no single swap to a lower-lag member keeps balance;
 *  - determinism: the result depends on the members' ids, not on their order in the table
 *    (ties are broken by id, then by task index).
 * Cost: O((T*(K+1) + nlags) log + T*K'*M) for M members, plus the bounded chain search when
 * standbys are out of balance; 400 members x 3 threads, 10,000 tasks, K = 1: 9-22 ms for a
 * join or a leave, 21-41 ms from scratch (scripts/bench/assign, docs/assignment.md).
 * Limit: T*(K'+1) < 2^31. */
#ifndef BK_ASSIGN_H
#define BK_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

/* One member (node). Strings are borrowed for the duration of the call. */
typedef struct bk_assign_member {
    const char *id;       /* unique node id, not empty */
    const char *rack;     /* NULL or "": members without a rack share the rack "" */
    const char *endpoint; /* unused by the assignor; carried to assigncodec (may be NULL) */
    int32_t threads;      /* stream threads, >= 1 */
} bk_assign_member_t;

/* A member holds state of a task `lag` records behind its changelogs' end. A member that a
 * task has no entry for holds no state of it, unless it was that task's previous active
 * (lag 0 assumed) or standby (ranked after every reported lag, before no state). */
typedef struct bk_assign_lag {
    int32_t task;
    int32_t member;
    int64_t lag; /* >= 0 */
} bk_assign_lag_t;

/* What the assignor reads; every array is borrowed and left untouched. Member indices in
 * prev_* and lags are indices into members[]; a previous owner that is gone is -1. */
typedef struct bk_assign_input {
    const bk_assign_member_t *members;
    int32_t nmembers;
    int32_t ntasks;              /* tasks are 0..ntasks-1; the caller maps (subtopology,
                                  * partition) to them */
    int32_t standbys;            /* K, >= 0 */
    const int32_t *prev_active;  /* [ntasks] member or -1; NULL: no previous assignment */
    const int32_t *prev_standby; /* [ntasks * prev_width] members, -1 for none; or NULL */
    int32_t prev_width;
    const bk_assign_lag_t *lags; /* [nlags], any order, a (task, member) twice: the least */
    int32_t nlags;
    /* Warm-up (off when 0; needs K' >= 1): a task whose chosen active is more than
     * acceptable_lag behind stays on a member that is not, and the chosen one gets a standby
     * slot of it to warm up in. Balance then holds only once the warm-ups caught up. */
    int warmup;
    int64_t acceptable_lag;
    /* [ntasks] 1: the task holds no state (stateless, or no store logged), so a standby of
     * it would keep nothing: its row of standbys stays empty and it is never held for a
     * warm-up. NULL: every task gets standbys. */
    const uint8_t *no_standby;
} bk_assign_input_t;

/* What it returns. Owned by the result; freed by bk_assign_result_destroy(). */
typedef struct bk_assign_result {
    int32_t ntasks;
    int32_t nmembers;
    int32_t k;              /* standbys per task: min(K, nmembers - 1) */
    int32_t *active;        /* [ntasks] member index */
    int32_t *standby;       /* [ntasks * k], row t = the standbys of task t, -1: none */
    int32_t *active_count;  /* [nmembers] */
    int32_t *standby_count; /* [nmembers] */
    int32_t moved;          /* tasks that left a previous active that is still present */
    int32_t min_moved;      /* the least `moved` of any balanced assignment (== moved) */
    int32_t orphaned;       /* tasks without a present previous active (they all move) */
    int32_t promoted;       /* orphans that went to their lowest-lag present replica */
    int32_t warmups;        /* tasks held on a caught-up replica while another warms up */
} bk_assign_result_t;

/* Computes the assignment of `in` into *res (overwritten; destroy it after use, also after
 * a failure). Pure: reads nothing but `in`, keeps nothing, safe to call from any thread.
 * Returns 0, or -1 with errstr on invalid input (tasks and no member, a duplicate or empty
 * id, threads < 1, an index out of range, a negative lag, too many tasks) or out of memory. */
int bk_assign_compute(const bk_assign_input_t *in, bk_assign_result_t *res, char *errstr,
                      size_t errstr_size);

/* Frees what bk_assign_compute() put in *res (not res itself); a zeroed result is fine. */
void bk_assign_result_destroy(bk_assign_result_t *res);

/* -- The FFI builder (ffi.h, bk_ffi_assign_*) ---------------------------------------------
 * Specs build an input one call at a time, compute, and read the result; the builder owns
 * copies of everything. Not meant for the runtime, which fills bk_assign_input_t itself. */
typedef struct bk_assign_builder_s bk_assign_builder_t;

/* The builder's input (valid until the next add or set) and last result (NULL before a
 * compute; valid until the next compute or free), for assigncodec's FFI. */
const bk_assign_input_t *bk_assign_builder_input(bk_assign_builder_t *b);
const bk_assign_result_t *bk_assign_builder_result(const bk_assign_builder_t *b);

#endif
