/* taskdb.c - opening a task's DB, and the node's pool of open ones (taskdb.h). */
#include "engine/taskdb.h"
#include "engine/db.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry_s {
    bk_task_id_t task;
    bk_db_t *db;
} entry_t;

struct bk_taskdb_pool_s {
    pthread_mutex_t lock;
    entry_t *e;
    int n, cap;
};

bk_taskdb_pool_t *bk_taskdb_pool_new(void)
{
    bk_taskdb_pool_t *pool = calloc(1, sizeof(*pool));
    if (pool) {
        pthread_mutex_init(&pool->lock, NULL);
    }
    return pool;
}

void bk_taskdb_pool_keep(bk_taskdb_pool_t *pool, const bk_task_id_t *keep, int n)
{
    int w = 0;
    if (!pool) {
        return;
    }
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->n; i++) {
        int kept = 0;
        for (int j = 0; j < n && !kept; j++) {
            kept = keep[j].sub == pool->e[i].task.sub &&
                   keep[j].partition == pool->e[i].task.partition;
        }
        if (kept) {
            pool->e[w++] = pool->e[i];
        } else {
            bk_db_close(pool->e[i].db);
        }
    }
    pool->n = w;
    pthread_mutex_unlock(&pool->lock);
}

void bk_taskdb_pool_destroy(bk_taskdb_pool_t *pool)
{
    if (!pool) {
        return;
    }
    bk_taskdb_pool_keep(pool, NULL, 0);
    free(pool->e);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

/* The pooled DB of task, removed from the pool; NULL if it holds none. */
static bk_db_t *take(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    bk_db_t *db = NULL;
    if (!pool) {
        return NULL;
    }
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->n; i++) {
        if (pool->e[i].task.sub == task.sub && pool->e[i].task.partition == task.partition) {
            db = pool->e[i].db;
            pool->e[i] = pool->e[--pool->n];
            break;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    return db;
}

bk_db_t *bk_taskdb_open(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                        bk_task_id_t task, bk_store_t **store_of, int *logged, char *errstr,
                        size_t errstr_size)
{
    bk_store_spec_t *specs = calloc((size_t)plan->nstores + 1, sizeof(*specs));
    int *idx = calloc((size_t)plan->nstores + 1, sizeof(int));
    int n = specs && idx ? bk_plan_sub_stores(plan, task.sub, specs, idx) : -1;
    bk_db_t *db = NULL;

    errstr[0] = '\0';
    *logged = 0;
    for (int s = 0; s < plan->nstores; s++) {
        store_of[s] = NULL;
    }
    if (n < 0) {
        snprintf(errstr, errstr_size, "task %s: out of memory", BK_TASK_NAME(task));
    } else if (n > 0) {
        db = take(pool, task);
        if (!db) {
            char dir[4096], err[900];
            bk_plan_task_dir(plan, conf, task, dir, sizeof(dir));
            db = bk_db_open(dir, specs, n, err, sizeof(err));
            if (!db) {
                snprintf(errstr, errstr_size, "task %s: %s", BK_TASK_NAME(task), err);
            }
        }
        for (int i = 0; db && i < n; i++) {
            store_of[idx[i]] = bk_db_store(db, i);
            *logged += specs[i].logged;
        }
    }
    free(specs);
    free(idx);
    return db;
}

void bk_taskdb_release(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int clean)
{
    if (!db) {
        return;
    }
    for (int i = 0; i < bk_db_store_count(db); i++) {
        bk_store_set_changelog(bk_db_store(db, i), NULL, NULL, task.partition);
    }
    if (!pool || !clean) {
        bk_db_close(db);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    if (pool->n == pool->cap) {
        int cap = pool->cap ? pool->cap * 2 : 16;
        entry_t *e = realloc(pool->e, (size_t)cap * sizeof(*e));
        if (!e) {
            pthread_mutex_unlock(&pool->lock);
            bk_db_close(db);
            return;
        }
        pool->e = e;
        pool->cap = cap;
    }
    pool->e[pool->n++] = (entry_t){task, db};
    pthread_mutex_unlock(&pool->lock);
}
