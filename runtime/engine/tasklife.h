/* tasklife.h - a task's life on a stream thread, in one place: the named state each of the
 * thread's tasks is in, since when, and the one function that moves it to another
 * (bk_tasklife_to), which checks the move is one of the table's (tasklife.c), logs it,
 * publishes it for /v1/status (livestats.h) and emits a "task" event (docs/events.md).
 *
 * The states, in the order of a task's life (docs/architecture.md, A task's life, draws them):
 *
 *   free ─> opening ─> building ─> restoring ─> live ─> sealing ─> live
 *                                                 │        │
 *                                                 ├─> held ┴─> draining ─> checkpointing ─> drained
 *                                                 └─> parked (a record failed; opened again
 *                                                     once `beck skip` lists it)
 *
 * and every state but free leaves to free (released, moved, retired, started again). The
 * running states, whose records the thread processes or drops, are live to drained
 * (bk_tasklife_running). A standby replica's life is free, opening, (building,) tailing,
 * free: the standby runner keeps one of its own. The thread that holds the tasks is the
 * writer; the published state is read from any thread. */
#ifndef BK_TASKLIFE_H
#define BK_TASKLIFE_H

#include <stdint.h>

#include "engine/livestats.h"

typedef enum {
    BK_LIFE_FREE = 0,      /* not this thread's */
    BK_LIFE_PARKED,        /* closed at a record that raised under on_error=fail, still this
                            * thread's: opened again once `beck skip` lists the record */
    BK_LIFE_OPENING,       /* its job opens its DB (from a checkpoint or a snapshot) */
    BK_LIFE_BUILDING,      /* a later generation's task, built from the one before */
    BK_LIFE_RESTORING,     /* its changelogs replayed past its checkpoint */
    BK_LIFE_LIVE,          /* processing its input */
    BK_LIFE_SEALING,       /* live, a built task writing its whole state to its changelogs */
    BK_LIFE_HELD,          /* generation 0 stopped at a key of another task (its input grew):
                            * nothing more is processed until the move */
    BK_LIFE_DRAINING,      /* a replaced generation's task that read every barrier: drained
                            * at the next commit */
    BK_LIFE_CHECKPOINTING, /* drained by a commit: its checkpoint is made at a later turn */
    BK_LIFE_DRAINED,       /* the node was told: it waits to be released */
    BK_LIFE_TAILING,       /* a standby replica (replica/standby.c) tailing its changelogs */
    BK_LIFE_NSTATES
} bk_life_t;

typedef struct bk_tasklife_s {
    int cap;
    uint8_t *state;  /* [cap] bk_life_t */
    int64_t *since;  /* [cap] mono ms of the last move */
    uint8_t *sealed; /* [cap] its commits say "beck.sealed" (thread_seal.c) */
    int count[BK_LIFE_NSTATES];
    bk_livestats_t *live; /* where the state is published, or NULL */
    int standby;          /* the standby runner's tasks (published as their standby's state) */
    const char *thread;   /* the thread's name, for the log */
} bk_tasklife_t;

/* cap tasks, all free. 0, or -1 without memory. */
int bk_tasklife_init(bk_tasklife_t *l, int cap, bk_livestats_t *live, const char *thread);
void bk_tasklife_free(bk_tasklife_t *l);

/* The state's name ("live", "checkpointing", ...). */
const char *bk_tasklife_name(bk_life_t s);

/* 1 when a task may go from `from` to `to` (the table in tasklife.c), else 0. */
int bk_tasklife_allowed(bk_life_t from, bk_life_t to);

/* Moves task `slot` (named `task`) to `to`: nothing when it is there already. A move the
 * table does not hold is a bug of beck's: it is logged as an error and done anyway, or,
 * with BECK_LIFE_STRICT=1 in the environment (the specs set it), the process aborts. */
void bk_tasklife_to(bk_tasklife_t *l, int slot, const char *task, bk_life_t to);

static inline bk_life_t bk_tasklife_state(const bk_tasklife_t *l, int slot)
{
    return (bk_life_t)l->state[slot];
}

/* Running: its records are processed (or dropped, once held or drained): live to drained. */
static inline int bk_tasklife_running(const bk_tasklife_t *l, int slot)
{
    return l->state[slot] >= BK_LIFE_LIVE && l->state[slot] <= BK_LIFE_DRAINED;
}

/* Opening: its job runs (opening, building, restoring). */
static inline int bk_tasklife_opening(const bk_tasklife_t *l, int slot)
{
    return l->state[slot] >= BK_LIFE_OPENING && l->state[slot] <= BK_LIFE_RESTORING;
}

/* Processing new records: live or sealing (not yet stopped by a move). */
static inline int bk_tasklife_processing(const bk_tasklife_t *l, int slot)
{
    return l->state[slot] == BK_LIFE_LIVE || l->state[slot] == BK_LIFE_SEALING;
}

/* How many of the thread's tasks are in state s. */
static inline int bk_tasklife_count(const bk_tasklife_t *l, bk_life_t s)
{
    return l->count[s];
}

#endif
