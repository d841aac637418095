/* node_moves.h - a node's part in repartitioning (docs/repartitioning.md): its leader takes
 * `beck repartition`'s note and adds the move to the control topic, and every node grows its
 * plan and makes the new generation's topics when the view's list of moves grows. node.c
 * then grows its own per-task tables and tells its member (cluster/member.h). */
#ifndef BK_NODE_MOVES_H
#define BK_NODE_MOVES_H

#include <lua.h>
#include <stddef.h>

#include "base/conf.h"
#include "cluster/member.h"
#include "engine/hooks.h"
#include "engine/plan.h"

/* The kind of `beck repartition`'s note; its text is "sub=S tasks=N". The leader answers
 * one it refuses with a note of the second kind to its sender, whose text says why. */
#define BK_NODE_MOVES_NOTE "repartition"
#define BK_NODE_MOVES_REFUSED "repartition-refused"

/* A "repartition" note, as any node takes it: only the leader acts (the note goes to every
 * node, as the command does not know who leads). It checks the move against the plan (S is
 * a subtopology with a task count of its own, the `tasks` setting; N is 1 to 4,096 and not
 * its count now; the node's tables have room) and adds it (bk_member_add_generation).
 * What it did or why it refused goes to the log. */
void bk_node_moves_on_note(const bk_plan_t *plan, bk_member_t *member, const bk_member_view_t *view,
                           const bk_member_note_t *note);

/* How many tasks subtopology `sub` (a topology's own) runs in its latest generation; 0 when
 * it has none of its own (it reads its input by partition). */
int bk_node_moves_tasks_of(const bk_plan_t *plan, int sub);

/* origin[t] for the tasks t of [from, to) of the plan's task table: for a later generation's
 * task, the task of the generation before whose key groups overlap its own the most (the
 * one its build takes whole, engine/regroup.h); -1 for the others. The leader places a new
 * task beside its origin (bk_member_set_tasks). */
void bk_node_moves_origins(const bk_plan_t *plan, int32_t *origin, int from, int to);

/* A move's progress as the view shows it, to the log and to the on_repartition hook
 * (hooks.h; hooks may be NULL): the move (a new generation), each task of the generation it
 * replaces that drained, and its end (all drained). told[s] (room for plan->cap_subs, -1
 * at first) is the drained count last told of generation subtopology s. Main thread. */
void bk_node_moves_progress(const bk_plan_t *plan, const bk_member_view_t *view, bk_hooks_t *hooks,
                            int32_t *told);

/* The view's list of moves (generations) is longer than the plan's: the plan grows by them
 * (bk_plan_grow, the topology described again in L) and their topics are made
 * (bk_topics_ensure_grown, through an admin client of conf's). Main thread. 0 (also when
 * there is nothing to add), or -1 with err: the plan may have grown without its topics,
 * and the node cannot run the new tasks. */
int bk_node_moves_follow(bk_plan_t *plan, const bk_conf_t *conf, lua_State *L,
                         const char *generations, char *err, size_t errsz);

#endif
