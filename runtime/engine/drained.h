/* drained.h - the checkpoint a task of a replaced generation leaves when it drains
 * (docs/repartitioning.md, Building from checkpoints): a snapshot (snapshot.h: RocksDB
 * checkpoint and manifest) of its DB made right after the commit that covered every
 * barrier, before the node says it drained, in <state_dir>/<app>/drained/<S_P>/<id>/. It
 * holds the task's whole state at the moment the generation handed over, so a task of the
 * next generation on the same node is built from such checkpoints by key groups
 * (regroup.h) instead of replaying changelogs. Kept until the generation is cleaned up.
 * @locality bk_drained_make: the task's stream thread (it reads the open DB, between
 * commits); bk_drained_find: any thread. */
#ifndef BK_DRAINED_H
#define BK_DRAINED_H

#include <stddef.h>

#include "base/conf.h"
#include "base/task.h"
#include "engine/db.h"
#include "engine/plan.h"

/* The directory of the task's drained checkpoint(s): <state_dir>/<app>/drained/<S_P>. One
 * fetched from another node (replica/drainfetch.h) is written beside, as <id>.tmp, and
 * renamed to <id> once whole. */
void bk_drained_root(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *buf,
                     size_t size);

/* Replaces the task's drained checkpoint by one of db as it is now. dir gets its
 * directory. 0, or -1 with errstr. */
int bk_drained_make(bk_db_t *db, const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task,
                    char *dir, size_t dir_size, char *errstr, size_t errstr_size);

/* A later generation's task directory holds its state once it was built (from drained
 * checkpoints or changelogs, engine/thread_build.c) or installed from a snapshot of a built
 * one (cold bootstrap): a BUILT file says so, with how. bk_drained_built: 1 when dir has
 * it; bk_drained_mark_built writes it (synced). 0, or -1 with errstr. */
#define BK_DRAINED_BUILT_FILE "BUILT"
int bk_drained_built(const char *taskdir);
int bk_drained_mark_built(const char *taskdir, const char *text, char *errstr, size_t errstr_size);
/* The same for any such mark file `name` in a task directory (SEALED: thread_seal.c). */
int bk_drained_marked(const char *taskdir, const char *name);
int bk_drained_mark(const char *taskdir, const char *name, const char *text, char *errstr,
                    size_t errstr_size);

/* The task's drained checkpoint on this node, whole (its manifest written last): 1 with
 * its directory in dir, 0 when there is none. */
int bk_drained_find(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *dir,
                    size_t dir_size);

#endif
