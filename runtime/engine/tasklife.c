/* tasklife.c - a task's life on a stream thread (tasklife.h): the states' names, the moves
 * between them that beck makes, and the one function that makes them. */
#include "engine/tasklife.h"

#include <stdlib.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/log.h"

static const char *const names[BK_LIFE_NSTATES] = {
    [BK_LIFE_FREE] = "free",           [BK_LIFE_PARKED] = "parked",
    [BK_LIFE_OPENING] = "opening",     [BK_LIFE_BUILDING] = "building",
    [BK_LIFE_RESTORING] = "restoring", [BK_LIFE_LIVE] = "live",
    [BK_LIFE_SEALING] = "sealing",     [BK_LIFE_HELD] = "held",
    [BK_LIFE_DRAINING] = "draining",   [BK_LIFE_CHECKPOINTING] = "checkpointing",
    [BK_LIFE_DRAINED] = "drained",     [BK_LIFE_TAILING] = "tailing",
};

/* The moves, as bits of the states a state may go to. Every state leaves to free (the task
 * released, moved, retired, or started again from its last commit: thread_tasks.c), and a
 * running one to parked (a record of its batch raised: it closes at its last commit). */
#define TO(s) (1u << (s))
#define LEAVE (TO(BK_LIFE_FREE))
#define PARK (TO(BK_LIFE_PARKED))
static const unsigned moves[BK_LIFE_NSTATES] = {
    [BK_LIFE_FREE] = TO(BK_LIFE_OPENING),
    [BK_LIFE_PARKED] = LEAVE | TO(BK_LIFE_OPENING),
    [BK_LIFE_OPENING] = LEAVE | TO(BK_LIFE_BUILDING) | TO(BK_LIFE_RESTORING) | TO(BK_LIFE_LIVE) |
                        TO(BK_LIFE_TAILING),
    [BK_LIFE_BUILDING] = LEAVE | TO(BK_LIFE_RESTORING) | TO(BK_LIFE_LIVE) | TO(BK_LIFE_TAILING),
    [BK_LIFE_RESTORING] = LEAVE | TO(BK_LIFE_LIVE),
    [BK_LIFE_LIVE] = LEAVE | PARK | TO(BK_LIFE_SEALING) | TO(BK_LIFE_HELD) | TO(BK_LIFE_DRAINING),
    /* a seal goes on while the task drains (thread_seal.c): it shows as draining */
    [BK_LIFE_SEALING] = LEAVE | PARK | TO(BK_LIFE_LIVE) | TO(BK_LIFE_DRAINING),
    [BK_LIFE_HELD] = LEAVE | PARK | TO(BK_LIFE_DRAINING),
    [BK_LIFE_DRAINING] = LEAVE | PARK | TO(BK_LIFE_CHECKPOINTING),
    [BK_LIFE_CHECKPOINTING] = LEAVE | PARK | TO(BK_LIFE_DRAINED),
    [BK_LIFE_DRAINED] = LEAVE | PARK,
    [BK_LIFE_TAILING] = LEAVE,
};

int bk_tasklife_init(bk_tasklife_t *l, int cap, bk_livestats_t *live, const char *thread)
{
    l->cap = cap;
    l->state = calloc((size_t)cap + 1, 1);
    l->since = calloc((size_t)cap + 1, sizeof(int64_t));
    l->sealed = calloc((size_t)cap + 1, 1);
    for (int s = 0; s < BK_LIFE_NSTATES; s++) {
        l->count[s] = 0;
    }
    l->count[BK_LIFE_FREE] = cap;
    l->live = live;
    l->standby = 0;
    l->thread = thread;
    return l->state && l->since && l->sealed ? 0 : -1;
}

void bk_tasklife_free(bk_tasklife_t *l)
{
    free(l->state);
    free(l->since);
    free(l->sealed);
    l->state = l->sealed = NULL;
    l->since = NULL;
}

const char *bk_tasklife_name(bk_life_t s)
{
    return s >= 0 && s < BK_LIFE_NSTATES ? names[s] : "?";
}

int bk_tasklife_allowed(bk_life_t from, bk_life_t to)
{
    return from >= 0 && from < BK_LIFE_NSTATES && to >= 0 && to < BK_LIFE_NSTATES &&
           (moves[from] & TO(to)) != 0;
}

void bk_tasklife_to(bk_tasklife_t *l, int slot, const char *task, bk_life_t to)
{
    bk_life_t from = (bk_life_t)l->state[slot];
    int64_t now = bk_clock_mono_ms(), after = now - l->since[slot];
    if (from == to) {
        return;
    }
    if (!bk_tasklife_allowed(from, to)) {
        const char *strict = getenv("BECK_LIFE_STRICT");
        bk_log_error("%s: task %s: %s -> %s is not a move of a task's life (a bug of beck's)",
                     l->thread, task, names[from], names[to]);
        bk_events_emit("life_error", "\"task\":\"%s\",\"from\":\"%s\",\"to\":\"%s\"", task,
                       names[from], names[to]);
        if (strict && strict[0] == '1') {
            abort();
        }
    }
    l->count[from]--;
    l->count[to]++;
    l->state[slot] = (uint8_t)to;
    l->since[slot] = now;
    if (l->live && slot < l->live->ntasks) {
        bk_livestats_task_t *ts = &l->live->task[slot];
        bk_livestats_set(l->standby ? &ts->sb_life : &ts->life, to);
        bk_livestats_set(l->standby ? &ts->sb_life_since_ms : &ts->life_since_ms,
                         bk_clock_wall_ms());
    }
    bk_log_debug("%s: task %s: %s -> %s after %lld ms", l->thread, task, names[from], names[to],
                 (long long)after);
    bk_events_emit("task",
                   "\"task\":\"%s\",\"role\":\"%s\",\"from\":\"%s\",\"to\":\"%s\","
                   "\"after_ms\":%lld",
                   task, l->standby ? "standby" : "active", names[from], names[to],
                   (long long)after);
}
