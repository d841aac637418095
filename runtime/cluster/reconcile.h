/* reconcile.h - what a node must do to go from what it runs now to what a membership view
 * (member.h) asks: a pure function, diff(view, current) -> actions, with no I/O, no clock,
 * no threads. node/node.c executes the actions in the order they are listed below; specs
 * drive the function directly (spec/01-unit/33-reconcile_spec.lua).
 *
 * Tasks are indices into the app's task table (the plan's order, member.h's). */
#ifndef BK_RECONCILE_H
#define BK_RECONCILE_H

#include <stdint.h>

#include "cluster/member.h"

/* What the node runs now. */
typedef struct bk_reconcile_now_s {
    int32_t ntasks;         /* the app's task count */
    const int32_t *running; /* its active tasks */
    int32_t nrunning;
    const int32_t *standing; /* its standby replicas */
    int32_t nstanding;
    /* [ntasks] 1: this node held a standby of the task and has not started it as active
     * since (a task it starts while this is 1 is a promotion) */
    const uint8_t *was_standby;
    uint64_t logged_epoch; /* the last epoch the node logged a line for */
} bk_reconcile_now_t;

/* The actions, in the order they must run. Arrays are the caller's, sized ntasks + 1 each
 * (bk_reconcile_actions_new). */
typedef struct bk_reconcile_actions_s {
    int changed;        /* 0: nothing to do but, if log_unchanged, log the epoch */
    int log_unchanged;  /* 1: an unchanged epoch not logged yet */
    int change_actives; /* 1. the active set changed, or tasks must be released: the crew
                         *    gives up `revoked` (each commits and closes alone) */
    int stop_standbys;  /* 2. the standby set changed: the standby runner stops */
    int32_t *keep;      /* 3. the DBs to keep open: new actives, standbys, waiting ones */
    int32_t nkeep;
    int32_t *release; /* 4. tasks to publish as released (the view's) */
    int32_t nrelease;
    int32_t *revoked; /* 5. actives given up: on_revoke */
    int32_t nrevoked;
    int32_t *forget; /* 6. tasks no longer kept here at all: progress forgotten */
    int32_t nforget;
    int32_t *standbys; /* 7. the new standby set, started if stop_standbys */
    int32_t nstandbys;
    int32_t *promoted; /* 8. gained actives this node kept a standby of: on_promote */
    int32_t npromoted;
    uint8_t *was_standby; /* 9. the node's new was_standby [ntasks] */
    int32_t *gained;      /* 10. actives gained: on_assign, then given to the crew */
    int32_t ngained;
    int32_t *running; /* 11. the new active set */
    int32_t nrunning;
} bk_reconcile_actions_t;

/* Allocates the arrays of a for an app of ntasks tasks. 0, or -1 out of memory. */
int bk_reconcile_actions_new(bk_reconcile_actions_t *a, int32_t ntasks);
void bk_reconcile_actions_free(bk_reconcile_actions_t *a);

/* Fills a (made by bk_reconcile_actions_new for now->ntasks) with what applying view to now
 * takes. A lost view (the control plane is out of reach) stops every task. */
void bk_reconcile_diff(const bk_member_view_t *view, const bk_reconcile_now_t *now,
                       bk_reconcile_actions_t *a);

#endif
