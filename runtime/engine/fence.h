/* fence.h - exactly-once's transactional ids, and fencing the producers of a node that is
 * gone (docs/state.md, Exactly once). Each stream thread's producer has the id
 * <app>-<node>-<incarnation>-<thread> (<app>-<node>-<thread> for a node outside a cluster,
 * instance 0): the incarnation is the member's (cluster/member.h), new at each start and
 * rejoin. When a node learns that an incarnation of another ended without leaving (dead, or
 * replaced by a restart), it initializes a producer of each of that incarnation's ids before
 * it starts any task the incarnation held: the broker bumps each id's epoch, aborts its open
 * transaction, and from then on refuses that incarnation's producers (PRODUCER_FENCED), even
 * if the process is only paused and wakes up later. Not on the record path. */
#ifndef BK_FENCE_H
#define BK_FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"

/* The transactional id of thread `thread` of node `node`'s incarnation `instance` (0: none). */
void bk_fence_txn_id(const char *app, const char *node, uint64_t instance, int thread, char *out,
                     size_t size);

/* Fences the ids of threads 0..threads-1 of node's incarnation `instance`: each producer's
 * transactions initialized and the producer closed. Blocks up to ~30 s per id while the
 * transaction coordinator is not reachable. 0, or -1 with err (the ids fenced so far stay
 * fenced). */
int bk_fence_incarnation(const bk_conf_t *conf, const char *app, const char *node,
                         uint64_t instance, int threads, char *err, size_t errsize);

#endif
