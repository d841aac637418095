/* cmd_status_life.c - each task's state in its life, from its active node (cmd_status_life.h). */
#include "cmd/cmd_status_life.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/forward.h"

/* The active entries {"task":"N","role":"active","state":"S","for_ms":M} of body's "tasks"
 * (written by query/query_status.c, whose format this reads) for the tasks whose active is
 * peer p. */
static void take(const bk_member_view_t *v, char **names, int32_t p, const char *body,
                 bk_status_life_t *life)
{
    const char *at = strstr(body, "\"tasks\":[");
    while (at && (at = strstr(at, "{\"task\":\"")) != NULL) {
        char task[64], role[16], state[24];
        long long ms;
        at += strlen("{\"task\":\"");
        if (sscanf(at, "%63[^\"]\",\"role\":\"%15[^\"]\",\"state\":\"%23[^\"]\",\"for_ms\":%lld",
                   task, role, state, &ms) != 4 ||
            strcmp(role, "active") != 0) {
            continue;
        }
        for (int32_t t = 0; t < v->ntasks; t++) {
            if (v->owner[t] == p && strcmp(names[t], task) == 0) {
                snprintf(life[t].state, sizeof(life[t].state), "%s", state);
                life[t].for_ms = ms;
            }
        }
    }
}

void bk_status_life_fetch(const bk_member_view_t *v, char **names, const char *token,
                          long timeout_ms, bk_status_life_t *life)
{
    for (int32_t t = 0; t < v->ntasks; t++) {
        life[t].state[0] = '\0';
        life[t].for_ms = -1;
    }
    for (int32_t p = 0; names && p < v->npeers; p++) {
        bk_forward_resp_t resp;
        char err[512];
        int active = 0;
        for (int32_t t = 0; t < v->ntasks && !active; t++) {
            active = v->owner[t] == p;
        }
        if (!active || v->peers[p].state != BK_MEMBER_ALIVE || !v->peers[p].endpoint[0]) {
            continue;
        }
        memset(&resp, 0, sizeof(resp));
        if (bk_forward_get(v->peers[p].endpoint, "/v1/status", token, 0, timeout_ms, &resp, err,
                           sizeof(err)) != 0) {
            fprintf(stderr, "beck status: node %s (%s) did not say its tasks' states: %s\n",
                    v->peers[p].id, v->peers[p].endpoint, err);
            continue;
        }
        if (resp.status != 200 || !resp.body) {
            fprintf(stderr, "beck status: node %s (%s) did not say its tasks' states: HTTP %ld\n",
                    v->peers[p].id, v->peers[p].endpoint, resp.status);
        } else {
            take(v, names, p, resp.body, life);
        }
        free(resp.body);
    }
}
