/* node.h - one node of an app, once `beck run` (cmd/cmd_run.c) has loaded its topology and
 * made its topics. Alone (no --cluster), it runs every task of the app on one crew of
 * stream threads (engine/crew.h). In a cluster, it joins the app's membership
 * (cluster/member.h) and, on each new view, applies what cluster/reconcile.h says: its
 * crew, its standby runner (replica/standby.h), cold bootstrap (replica/bootstrap.h), the
 * pool of open DBs (engine/taskdb.h) and the node's hooks. It runs on the process's main
 * thread until SIGINT/SIGTERM (a second signal aborts) or a failure. */
#ifndef BK_NODE_H
#define BK_NODE_H

#include <lua.h>

#include "base/conf.h"
#include "engine/hooks.h"
#include "engine/plan.h"

/* L: the VM the plan was loaded in (bk_plan_load), in which it grows by the app's moves
 * (bk_plan_grow). Returns the process exit status: 0 clean stop, 1 failure. */
int bk_node_run(bk_plan_t *plan, const bk_conf_t *conf, bk_hooks_t *hooks, lua_State *L);

#endif
