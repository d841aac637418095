/* route.h - where a query for a task goes: this node, or the node that runs the task (or
 * keeps a standby of it), by its endpoint. Filled from the membership's view on the node's
 * main thread after every change (bk_route_update), read by the HTTP threads.
 *
 * A key's task is found the way its records were partitioned: Kafka's murmur2 of the key
 * modulo the partitions of the store's subtopology (its input topics, co-partitioned), or,
 * for a subtopology in a generation of its own (the `tasks` setting, a move), the task of
 * its latest generation owning the key's group; so a store must be keyed by its records' keys (the DSL's aggregations are)
 * for a key to be found.
 * @locality any thread (a mutex guards the table) */
#ifndef BK_ROUTE_H
#define BK_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "base/task.h"
#include "cluster/member.h"
#include "engine/plan.h"

typedef struct bk_route_s bk_route_t;

/* self_id: this node's id (its own endpoint is never asked). NULL without memory. */
bk_route_t *bk_route_new(const bk_plan_t *plan, const char *self_id);
void bk_route_destroy(bk_route_t *r);
/* A node alone (no cluster): every task is here. */
void bk_route_set_alone(bk_route_t *r);
/* The view's owners, holders, standbys and peers' endpoints; its epoch. */
void bk_route_update(bk_route_t *r, const bk_member_view_t *view);

/* The subtopology serving queries of `sub`'s stores: that of its latest generation (a
 * move's new tasks from the moment the move is planned), else `sub` itself. */
int bk_route_serving_sub(const bk_route_t *r, int sub);
/* The task (app's table index, and its id) of `key` in a store of subtopology `sub` (a
 * topology's own: the serving subtopology's task is given); -1 while the subtopology's
 * partition count is not known. */
int32_t bk_route_task_of(const bk_route_t *r, int sub, const char *key, size_t klen,
                         bk_task_id_t *id);
/* The app's tasks serving subtopology `sub`'s stores: the first's index into *first; their
 * count (0 while not known). */
int bk_route_sub_tasks(const bk_route_t *r, int sub, int32_t *first);
bk_task_id_t bk_route_task_id(const bk_route_t *r, int32_t t);

/* Where to ask for task t: the current epoch's active, then the node holding it when that
 * differs (a handoff in progress; it may be stale), then, with standbys set, the nodes
 * keeping its standbys; nodes not alive are skipped. Up to max targets into node_ids/endpoints
 * (each BK_MEMBER_MAX_ID + 1 bytes); roles[i] is BK_TASKDB_ACTIVE or BK_TASKDB_STANDBY; self[i]
 * whether it is this node. Returns how many. */
typedef struct bk_route_target_s {
    char node[BK_MEMBER_MAX_ID + 1];
    char endpoint[BK_MEMBER_MAX_ID + 1];
    int role;
    int self;
} bk_route_target_t;
int bk_route_targets(bk_route_t *r, int32_t t, int standbys, bk_route_target_t *out, int max);

/* The table as JSON (GET /v1/assignment): epoch, nodes, and each task's active and standbys. */
struct bk_jbuf_s;
void bk_route_json(bk_route_t *r, struct bk_jbuf_s *b);
/* The tasks this node should run as active (for /readyz): their indices into out (room for
 * max); their count. */
int bk_route_mine(bk_route_t *r, int32_t *out, int max);

#endif
