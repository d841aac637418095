/* node_internal.h - a cluster node's insides, shared by the files that make it up:
 * node.c (the node alone or as a member: views applied, its loop) and node_replicas.c (its
 * standby runner, and what a task assigned here waits for before it starts). Nothing else
 * includes it. Main thread only. */
#ifndef BK_NODE_INTERNAL_H
#define BK_NODE_INTERNAL_H

#include <stdint.h>

#include <lua.h>

#include "cluster/member.h"
#include "cluster/reconcile.h"
#include "engine/crew.h"
#include "engine/hooks.h"
#include "engine/livestats.h"
#include "engine/plan.h"
#include "engine/taskdb.h"
#include "node/node_cleanup.h"
#include "node/node_fence.h"
#include "node/node_growth.h"
#include "replica/archive.h"
#include "replica/bootstrap.h"
#include "replica/drainfetch.h"
#include "replica/standby.h"

/* The snapshot archive (replica/archive.h): what the recovery of a task needs. */
typedef struct recover_ctx_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
} recover_ctx_t;

/* What a cluster node runs: its active crew and its standby runner. */
/* Rebuilds of damaged replicas: more than REBUILDS_MAX within REBUILDS_WINDOW_MS and the
 * disk is likelier failing than a file damaged once; the replicas are dropped instead. */
#define REBUILDS_MAX 3
#define REBUILDS_WINDOW_MS (10 * 60 * 1000)

typedef struct member_node_s {
    bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_hooks_t *hooks;
    bk_member_t *member;
    const bk_task_id_t *tasks; /* the plan's task table: it grows with the moves */
    char **names;              /* [cap] */
    int ntasks, cap;           /* the per-task arrays below have room for cap */
    lua_State *L;              /* the main VM, which describes the plan when it grows */
    bk_crew_t crew;
    int32_t *running, *standing, *scratch;
    /* [cap] tasks of a later generation assigned here that wait until the tasks of the
     * generation before whose key groups overlap theirs have drained (build_ready) */
    int32_t *held;
    int nheld;
    /* [cap] what the member was last told it may assign (retire_replaced), of told_tasks */
    uint8_t *assignable;
    int32_t *origin; /* [cap] bk_node_moves_origins: where a new task is best placed */
    int32_t *told;   /* [plan->cap_subs] bk_node_moves_progress */
    int told_tasks;
    bk_reconcile_actions_t actions; /* apply_view's, kept to spare allocations */
    int nrun, nstand;
    uint64_t logged_epoch;      /* the last epoch a line was logged for */
    bk_taskdb_pool_t *pool;     /* DBs kept open from one owner (thread, standby) to the next */
    bk_bootstrap_t *boot;       /* cold bootstrap, both sides */
    bk_drainfetch_t *fetch;     /* drained checkpoints brought here, and served */
    bk_node_cleanup_t *cleanup; /* retired generations' directories, topics, checkpoints */
    int was_lost;               /* the last view applied said the member was lost */
    bk_node_growth_t *growth;   /* inputs grown under generation 0: moved (the leader) */
    uint8_t *was_sb;            /* [ntasks] a standby here, not started as active since */
    bk_standby_t *standby;
    bk_livestats_t *live; /* the node's live counters (task states too), or NULL */
    /* [cap] per standing task: 1 when the runner was told it may build it (standby_ready);
     * sb_waiting counts those it was not, which a view's drains make ready (restart_ready) */
    uint8_t *sb_ready;
    int sb_waiting;
    int64_t sb_ready_at; /* when restart_ready first saw one of them ready (mono), 0: not */
    const bk_member_view_t *view;     /* the latest view (run_member's) */
    bk_archive_t *arch;               /* the snapshot archive, or NULL */
    recover_ctx_t rctx;               /* what recovering from it needs */
    int64_t rebuilt_at[REBUILDS_MAX]; /* when damaged replicas were last rebuilt (mono) */
    int nrebuilt;
    int64_t restarted_at[REBUILDS_MAX]; /* ... when the runner was started again after another
                                         * failure */
    int nrestarted;
    int32_t *due; /* [ntasks] archive_ask's */
    bk_thread_stats_t total;
    uint64_t instance; /* the member's incarnation the threads' transactional ids name */
    int fence;         /* exactly-once on a real cluster: fence gone incarnations */
    bk_node_fence_t fenced;
    int fence_held; /* a fence failed: the view waits, tried again at fence_at (mono) */
    int64_t fence_at;
} member_node_t;

/* The standby runner (node_replicas.c): started on `n` tasks `which` (each told whether it may
 * build yet: bk_node_start_ready's gates), stopped, and after it ended by itself, started
 * again on the same tasks (their damaged replicas removed first) or dropped until the next
 * change (rebuild_or_drop: why in node_replicas.c). restart_ready starts it again once
 * standbys that waited for drains may build. */
void bk_node_start_standby(member_node_t *mn, const int32_t *which, int n);
void bk_node_stop_standby(member_node_t *mn);
void bk_node_rebuild_or_drop_standbys(member_node_t *mn);
void bk_node_restart_ready(member_node_t *mn);
/* The tasks `ids` the view gives this node to run: those ready start on the crew (a
 * passthrough once the generation it feeds can take its records, a later generation's task
 * once the tasks of the one before whose key groups overlap its have drained); the others
 * are held until a later view. 0, or 1 when the crew could not take them. */
int bk_node_start_ready(member_node_t *mn, const bk_member_view_t *view, const int32_t *ids, int n);
/* The active's side of cold bootstrap: a snapshot asked of the thread running `task`, and
 * the snapshots made (those for the archive go to it on the way). */
int bk_node_crew_ask(void *opaque, int32_t task, const char *req);
int bk_node_crew_take(void *opaque, bk_snapshot_made_t *out);
/* A task's state recovered from the snapshot archive (replica/archive.h; opaque: a
 * recover_ctx_t). */
int bk_node_archive_recover(void *opaque, const char *task, const char *task_dir,
                            char *const *changelogs, const int64_t *lo, int n, char *what,
                            size_t what_size, char *err, size_t err_size);
/* x in the sorted list; how many alive nodes of the view are not `self`. */
int bk_node_in_sorted(const int32_t *list, int32_t n, int32_t x);
int bk_node_others(const bk_member_view_t *view, const char *self);

#endif
