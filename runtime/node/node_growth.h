/* node_growth.h - an input that grows under a subtopology read by input partition, with a
 * changelog (docs/repartitioning.md, Input that grows). Such a subtopology's tasks own the
 * keys that
 * Kafka's partitioner put in their partition: once its input has more partitions, a key's
 * new records may land where another task (or none) reads them, away from its state. So the
 * leader moves it to generation 1 with the task count it has, as `beck repartition` would:
 * its state then goes by key group, and the passthrough the move adds reads every input
 * partition, the new ones from their start. Main thread, the leader's only; a node that
 * becomes leader looks again (the move names the moves it follows: written once). */
#ifndef BK_NODE_GROWTH_H
#define BK_NODE_GROWTH_H

#include "base/conf.h"
#include "cluster/member.h"
#include "engine/plan.h"

typedef struct bk_node_growth_s bk_node_growth_t;

/* NULL without memory. */
bk_node_growth_t *bk_node_growth_new(const bk_plan_t *plan, const bk_conf_t *conf);
void bk_node_growth_destroy(bk_node_growth_t *g);

/* Every turn of the node's loop, after its plan followed the view's moves: every 5 s, when
 * this node leads, reads the input partition counts of the subtopologies still at
 * generation 0 and moves each whose input grew. */
void bk_node_growth_poll(bk_node_growth_t *g, bk_member_t *member, const bk_member_view_t *view);

#endif
