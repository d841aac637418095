/* node_fence.c - fencing the ended incarnations the membership view shows (node_fence.h). */
#include "node/node_fence.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/log.h"
#include "engine/fence.h"

static int fenced(const bk_node_fence_t *f, const char *node, uint64_t inc)
{
    for (int i = 0; i < f->n; i++) {
        if (f->done[i].incarnation == inc && strcmp(f->done[i].node, node) == 0) {
            return 1;
        }
    }
    return 0;
}

int bk_node_fence_gone(bk_node_fence_t *f, const bk_conf_t *conf, const char *app, const char *self,
                       const bk_member_view_t *view)
{
    int rc = 0;
    for (int32_t i = 0; i < view->npeers; i++) {
        const bk_member_peer_t *p = &view->peers[i];
        char err[512];
        int64_t t0;
        /* this node's own earlier incarnations too: a restart's (what the killed process
         * left open), and one that was taken for dead while this process ran (its threads
         * stop at once instead of at their next look at the view) */
        if ((p->state != BK_MEMBER_DEAD && p->state != BK_MEMBER_REPLACED) ||
            (strcmp(p->id, self) == 0 && p->incarnation == view->incarnation) ||
            fenced(f, p->id, p->incarnation)) {
            continue;
        }
        t0 = bk_clock_mono_ms();
        if (bk_fence_incarnation(conf, app, p->id, p->incarnation, p->threads, err, sizeof(err)) !=
            0) {
            bk_log_warn("exactly-once: cannot fence node %s (incarnation %" PRIu64 "): %s; "
                        "trying again",
                        p->id, p->incarnation, err);
            rc = -1;
            continue;
        }
        bk_log_info("exactly-once: fenced node %s (incarnation %" PRIu64 ", %s): its %d "
                    "transactional producer(s) can commit nothing more, what they left open "
                    "is aborted (%lld ms)",
                    p->id, p->incarnation, p->state == BK_MEMBER_DEAD ? "dead" : "replaced",
                    (int)p->threads, (long long)(bk_clock_mono_ms() - t0));
        bk_events_emit("fenced_node",
                       "\"node\":\"%s\",\"incarnation\":%" PRIu64 ",\"state\":\"%s\",\"ms\":%lld",
                       p->id, p->incarnation, p->state == BK_MEMBER_DEAD ? "dead" : "replaced",
                       (long long)(bk_clock_mono_ms() - t0));
        snprintf(f->done[f->next].node, sizeof(f->done[f->next].node), "%s", p->id);
        f->done[f->next].incarnation = p->incarnation;
        f->next = (f->next + 1) % BK_NODE_FENCE_BOOK;
        if (f->n < BK_NODE_FENCE_BOOK) {
            f->n++;
        }
    }
    return rc;
}
