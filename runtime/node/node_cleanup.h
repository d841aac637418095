/* node_cleanup.h - removing what a finished move left behind (docs/repartitioning.md,
 * Cleanup). A generation is *retired* once a later one exists and every one of its tasks
 * has drained (the view's drained list): nothing runs it again. Then on every node:
 * - its tasks' directories go (their state lives on in the drained checkpoints and the
 *   changelogs), each once no owner here has its DB out (bk_taskdb_pool_remove);
 * - its input topic, the generation's `-repartition-g<N>`, is emptied on real Kafka (its
 *   records deleted; the topic stays: engine/kafka.h says why); every node does it once
 *   per run (idempotent, and one that started after the move may have made it again);
 * - once the generation after it is retired too, its drained checkpoints go: every task of
 *   that later generation was built and has drained, so no build reads them again;
 * - on real Kafka, once every task of a later generation is sealed (its commits' metadata
 *   says so: engine/thread_seal.c), its changelogs are emptied too (and its drained
 *   checkpoints go): no task restores or is built from them again.
 * The node marks it retired in the plan as it applies the view (node.c, retire_replaced:
 * bk_plan_set_retired, so that a passthrough task going live writes no barrier to it);
 * the cleanup follows the plan's marks. Generation 0's input is the user's: never emptied.
 * Main thread. */
#ifndef BK_NODE_CLEANUP_H
#define BK_NODE_CLEANUP_H

#include "base/conf.h"
#include "cluster/member.h"
#include "engine/plan.h"
#include "engine/taskdb.h"

typedef struct bk_node_cleanup_s bk_node_cleanup_t;

/* On a dev broker (bk_kafka_dev_broker) no records are deleted. NULL without memory. */
bk_node_cleanup_t *bk_node_cleanup_new(bk_plan_t *plan, const bk_conf_t *conf,
                                       bk_taskdb_pool_t *pool);
void bk_node_cleanup_destroy(bk_node_cleanup_t *c);

/* After each view the node applied (its plan grown by the view's moves, its generations
 * retired): those newly retired are cleaned now, what is still in use is tried again by
 * bk_node_cleanup_poll. */
void bk_node_cleanup_view(bk_node_cleanup_t *c, const bk_member_view_t *view);
/* Every turn of the node's loop: a directory in use is tried again every 2 s. */
void bk_node_cleanup_poll(bk_node_cleanup_t *c);

#endif
