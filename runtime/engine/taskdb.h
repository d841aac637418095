/* taskdb.h - a task's RocksDB as the node opens it, and the pool that keeps it open from
 * one owner to the next.
 *
 * A task moves between owners on a node: the standby runner (restarted when the standby
 * set changes), a stream thread, another stream thread. Closing and reopening its DB each
 * time cost most of a failover (each open ~40 ms with its fsyncs, each close a flush): so an
 * owner that gives a task up gives its DB back to the node's pool, and the next one takes
 * it from there, open, with its in-memory state (changelog offsets, held records of a
 * standby) intact. A DB handed back after a failure
 * is closed instead. The pool closes the DBs of tasks the node no longer keeps when told
 * (bk_taskdb_pool_keep) and all of them when destroyed.
 * @locality any thread (a mutex guards the pool); a DB belongs to whoever took it. */
#ifndef BK_TASKDB_H
#define BK_TASKDB_H

#include "base/conf.h"
#include "engine/plan.h"
#include "engine/store.h"

typedef struct bk_taskdb_pool_s bk_taskdb_pool_t;

bk_taskdb_pool_t *bk_taskdb_pool_new(void);
void bk_taskdb_pool_destroy(bk_taskdb_pool_t *pool);
/* Closes the pooled DBs of every task not in keep[0..n). */
void bk_taskdb_pool_keep(bk_taskdb_pool_t *pool, const bk_task_id_t *keep, int n);
/* Closes the pooled DB of task, if the pool holds it (its directory is about to be
 * replaced). */
void bk_taskdb_pool_close(bk_taskdb_pool_t *pool, bk_task_id_t task);

/* Removes task's directory (a retired task's: docs/repartitioning.md, Cleanup) unless an
 * owner has its DB out (a stream thread, the standby runner): its pooled DB is closed and
 * the directory renamed away under the pool's lock, then deleted. 1: removed (or there was
 * none), 0: in use now (try later), -1 with errstr. */
int bk_taskdb_pool_remove(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                          bk_task_id_t task, char *errstr, size_t errstr_size);

/* The DB of task (sub, partition): taken from the pool when it holds it (pool may be NULL),
 * else opened (created as needed) under the task's state directory. store_of (room for
 * plan->cap_stores, the stores the plan may grow to) gets, per plan store, the task's
 * store or NULL; *logged counts its logged stores. Returns
 * NULL with errstr empty when the task has no stores, NULL with errstr on failure. */
bk_db_t *bk_taskdb_open(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                        bk_task_id_t task, bk_store_t **store_of, int *logged, char *errstr,
                        size_t errstr_size);
/* Gives a DB back: into the pool when clean (its interval committed, nothing half done)
 * and pool is set, else closed. Its stores lose their producer. */
void bk_taskdb_release(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int clean);

/* -- Serving reads (query/): which of the node's DBs answer queries ---------------------
 * An owner lists its DB once its state is usable: a stream thread when the task goes live
 * (an active: role ACTIVE), the standby runner when it has opened its replicas (STANDBY).
 * bk_taskdb_release takes it off first, waiting for the reads in progress to end (a get or
 * one page of a scan), so a DB is never closed under a reader. A task that is not listed
 * (restoring, moving between owners) is not served here. */
enum { BK_TASKDB_ACTIVE = 1, BK_TASKDB_STANDBY = 2 };
void bk_taskdb_serve(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int role);
/* How many changelog records a served standby is behind (its owner's latest figure). */
void bk_taskdb_set_lag(bk_taskdb_pool_t *pool, bk_task_id_t task, int64_t lag);
typedef struct bk_taskdb_read_s {
    bk_db_t *db;
    int role;
    int64_t lag; /* records behind the changelogs' end: 0 for an active */
    void *entry; /* internal */
} bk_taskdb_read_t;
/* Takes the served DB of `task` for reading (roles: a mask of BK_TASKDB_*): 0 and *r, or
 * -1 when none is served. Give it back with bk_taskdb_read_end soon: a release waits. */
int bk_taskdb_read_begin(bk_taskdb_pool_t *pool, bk_task_id_t task, int roles,
                         bk_taskdb_read_t *r);
void bk_taskdb_read_end(bk_taskdb_pool_t *pool, bk_taskdb_read_t *r);
/* The tasks served here and their roles, into tasks/roles (room for max); their count. */
int bk_taskdb_served(bk_taskdb_pool_t *pool, bk_task_id_t *tasks, int *roles, int max);

#endif
