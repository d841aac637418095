/* node_fence.h - exactly-once on a real cluster: a node fences every incarnation of another
 * node that the membership view shows ended without leaving (dead, or replaced by a
 * restart), before it acts on the view that gives that incarnation's tasks away
 * (engine/fence.h; docs/state.md, Exactly once). A node that left cleanly committed
 * everything and is not fenced. Each incarnation is fenced once; the view forgets ended
 * members a session after they ended, and so does this book. */
#ifndef BK_NODE_FENCE_H
#define BK_NODE_FENCE_H

#include <stdint.h>

#include "base/conf.h"
#include "cluster/member.h"

#define BK_NODE_FENCE_BOOK 64

typedef struct bk_node_fence_s {
    struct {
        char node[128];
        uint64_t incarnation;
    } done[BK_NODE_FENCE_BOOK]; /* fenced, a ring */
    int n, next;
} bk_node_fence_t;

/* Fences what view shows ended and was not fenced yet, self's earlier incarnations too
 * (its threads take producers of the new one's ids when it rejoins). 0, or -1 when a fence
 * failed (logged; it is tried again at the next call). */
int bk_node_fence_gone(bk_node_fence_t *f, const bk_conf_t *conf, const char *app,
                       const char *self, const bk_member_view_t *view);

#endif
