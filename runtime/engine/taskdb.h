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

/* The DB of task (sub, partition): taken from the pool when it holds it (pool may be NULL),
 * else opened (created as needed) under the task's state directory. store_of[plan store]
 * is set for the task's stores, NULL elsewhere; *logged counts its logged stores. Returns
 * NULL with errstr empty when the task has no stores, NULL with errstr on failure. */
bk_db_t *bk_taskdb_open(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                        bk_task_id_t task, bk_store_t **store_of, int *logged, char *errstr,
                        size_t errstr_size);
/* Gives a DB back: into the pool when clean (its interval committed, nothing half done)
 * and pool is set, else closed. Its stores lose their producer. */
void bk_taskdb_release(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int clean);

#endif
