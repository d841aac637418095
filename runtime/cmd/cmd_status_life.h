/* cmd_status_life.h - `beck status`'s look at each task's life (engine/tasklife.h): its
 * active node's /v1/status, asked over HTTP, says the task's state there and for how long.
 * The control topic does not carry it (a state changes many times a second in a move). */
#ifndef BK_CMD_STATUS_LIFE_H
#define BK_CMD_STATUS_LIFE_H

#include <stdint.h>

#include "cluster/member.h"

typedef struct bk_status_life_s {
    char state[24]; /* "" when its active did not say (no endpoint, no answer) */
    int64_t for_ms;
} bk_status_life_t;

/* Asks every alive node that has an endpoint and is some task's active, at most timeout_ms
 * each, with `token` (NULL: none), and fills life[t] for each task t of the view whose name
 * (names[t]) its active lists. Nodes that do not answer are named on stderr. */
void bk_status_life_fetch(const bk_member_view_t *v, char **names, const char *token,
                          long timeout_ms, bk_status_life_t *life);

#endif
