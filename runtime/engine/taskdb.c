/* taskdb.c - opening a task's DB, and the node's pool of open ones (taskdb.h). */
#include "engine/taskdb.h"
#include "engine/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"

typedef struct entry_s {
    bk_task_id_t task;
    bk_db_t *db;
} entry_t;

/* A served DB. Allocated alone: a reader holds it while the list changes. */
typedef struct served_s {
    bk_task_id_t task;
    bk_db_t *db;
    int role;
    int64_t lag;
    int readers;
    int gone; /* off the list: the last reader wakes the releaser */
} served_t;

struct bk_taskdb_pool_s {
    pthread_mutex_t lock;
    pthread_cond_t idle; /* a reader of a gone entry ended */
    entry_t *e;
    int n, cap;
    served_t **sv;
    int nsv, capsv;
    /* the tasks whose DB an owner has out (opened, not released): never removed under it */
    bk_task_id_t *out;
    int nout, capout;
    int lost; /* out of memory, a DB taken was not listed: nothing is removed any more */
};

bk_taskdb_pool_t *bk_taskdb_pool_new(void)
{
    bk_taskdb_pool_t *pool = calloc(1, sizeof(*pool));
    if (pool) {
        pthread_mutex_init(&pool->lock, NULL);
        pthread_cond_init(&pool->idle, NULL);
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
    for (int i = 0; i < pool->nsv; i++) {
        free(pool->sv[i]); /* owners that never released (a failed node): nobody reads now */
    }
    free(pool->sv);
    free(pool->out);
    pthread_cond_destroy(&pool->idle);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

/* The pooled DB of task, removed from the pool; NULL if it holds none. With the lock held. */
static bk_db_t *take_locked(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    for (int i = 0; i < pool->n; i++) {
        if (pool->e[i].task.sub == task.sub && pool->e[i].task.partition == task.partition) {
            bk_db_t *db = pool->e[i].db;
            pool->e[i] = pool->e[--pool->n];
            return db;
        }
    }
    return NULL;
}

static bk_db_t *take(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    bk_db_t *db;
    if (!pool) {
        return NULL;
    }
    pthread_mutex_lock(&pool->lock);
    db = take_locked(pool, task);
    pthread_mutex_unlock(&pool->lock);
    return db;
}

void bk_taskdb_pool_close(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    bk_db_t *db = take(pool, task);
    if (db) {
        bk_db_close(db);
    }
}

/* An owner took task's DB out / gave it back (pool set). Called with the lock held. */
static void took_locked(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    if (pool->nout == pool->capout) {
        int cap = pool->capout ? pool->capout * 2 : 16;
        bk_task_id_t *o = realloc(pool->out, (size_t)cap * sizeof(*o));
        if (!o) {
            pool->lost = 1;
            return;
        }
        pool->out = o;
        pool->capout = cap;
    }
    pool->out[pool->nout++] = task;
}

/* Takes task's pooled DB (NULL: none) and marks the task out in one step, before any file
 * of it is opened: a removal (bk_taskdb_pool_remove) that came between the two would move
 * the directory away from under the DB being opened (make test saw a standby's checkpoint
 * fail in a directory the cleanup of a retired generation had just removed). */
static bk_db_t *take_out(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    bk_db_t *db;
    pthread_mutex_lock(&pool->lock);
    db = take_locked(pool, task);
    took_locked(pool, task);
    pthread_mutex_unlock(&pool->lock);
    return db;
}

static void gave(bk_taskdb_pool_t *pool, bk_task_id_t task)
{
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->nout; i++) {
        if (pool->out[i].sub == task.sub && pool->out[i].partition == task.partition) {
            pool->out[i] = pool->out[--pool->nout];
            break;
        }
    }
    pthread_mutex_unlock(&pool->lock);
}

int bk_taskdb_pool_remove(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                          bk_task_id_t task, char *errstr, size_t errstr_size)
{
    char dir[4096], away[4200];
    bk_db_t *db = NULL;
    int busy, rc = 1;

    bk_plan_task_dir(plan, conf, task, dir, sizeof(dir));
    snprintf(away, sizeof(away), "%s.removing", dir);
    pthread_mutex_lock(&pool->lock);
    busy = pool->lost;
    for (int i = 0; i < pool->nout && !busy; i++) {
        busy = pool->out[i].sub == task.sub && pool->out[i].partition == task.partition;
    }
    if (!busy) {
        for (int i = 0; i < pool->n; i++) {
            if (pool->e[i].task.sub == task.sub && pool->e[i].task.partition == task.partition) {
                db = pool->e[i].db;
                pool->e[i] = pool->e[--pool->n];
                break;
            }
        }
        if (db) {
            bk_db_close(db);
        }
        /* renamed under the lock: an open after this makes a new, empty directory */
        if (rename(dir, away) != 0 && errno != ENOENT) {
            snprintf(errstr, errstr_size, "%s: %s", dir, strerror(errno));
            rc = -1;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    if (busy) {
        return 0;
    }
    if (rc == 1 && bk_fs_rm_tree(away) != 0 && errno != ENOENT) {
        snprintf(errstr, errstr_size, "%s: %s", away, strerror(errno));
        rc = -1;
    }
    return rc;
}

bk_db_t *bk_taskdb_open(bk_taskdb_pool_t *pool, const bk_plan_t *plan, const bk_conf_t *conf,
                        bk_task_id_t task, bk_store_t **store_of, int *logged, char *errstr,
                        size_t errstr_size)
{
    bk_store_spec_t *specs = calloc((size_t)plan->cap_stores + 1, sizeof(*specs));
    int *idx = calloc((size_t)plan->cap_stores + 1, sizeof(int));
    int n = specs && idx ? bk_plan_sub_stores(plan, task.sub, specs, idx) : -1;
    bk_db_t *db = NULL;

    errstr[0] = '\0';
    *logged = 0;
    for (int s = 0; s < plan->cap_stores; s++) {
        store_of[s] = NULL;
    }
    if (n < 0) {
        snprintf(errstr, errstr_size, "task %s: out of memory", BK_TASK_NAME(task));
    } else if (n > 0) {
        db = pool ? take_out(pool, task) : NULL;
        if (!db) {
            char dir[4096], err[900];
            bk_plan_task_dir(plan, conf, task, dir, sizeof(dir));
            db = bk_db_open(dir, specs, n, err, sizeof(err));
            if (!db) {
                snprintf(errstr, errstr_size, "task %s: %s", BK_TASK_NAME(task), err);
                if (pool) {
                    gave(pool, task);
                }
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

static int same_task(bk_task_id_t a, bk_task_id_t b)
{
    return a.sub == b.sub && a.partition == b.partition;
}

/* Takes db off the served list and waits for its readers. */
static void unserve(bk_taskdb_pool_t *pool, bk_db_t *db)
{
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->nsv; i++) {
        served_t *e = pool->sv[i];
        if (e->db != db) {
            continue;
        }
        pool->sv[i] = pool->sv[--pool->nsv];
        e->gone = 1;
        while (e->readers > 0) {
            pthread_cond_wait(&pool->idle, &pool->lock);
        }
        free(e);
        break;
    }
    pthread_mutex_unlock(&pool->lock);
}

void bk_taskdb_serve(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int role)
{
    served_t *e;
    if (!pool || !db) {
        return;
    }
    unserve(pool, db); /* a standby runner restarted with the same DB lists it again */
    if (!(e = calloc(1, sizeof(*e)))) {
        return; /* not served: queries say so */
    }
    e->task = task;
    e->db = db;
    e->role = role;
    e->lag = role == BK_TASKDB_ACTIVE ? 0 : INT64_MAX; /* unknown until its owner says */
    pthread_mutex_lock(&pool->lock);
    if (pool->nsv == pool->capsv) {
        int cap = pool->capsv ? pool->capsv * 2 : 16;
        served_t **sv = realloc(pool->sv, (size_t)cap * sizeof(*sv));
        if (!sv) {
            pthread_mutex_unlock(&pool->lock);
            free(e);
            return;
        }
        pool->sv = sv;
        pool->capsv = cap;
    }
    pool->sv[pool->nsv++] = e;
    pthread_mutex_unlock(&pool->lock);
}

void bk_taskdb_set_lag(bk_taskdb_pool_t *pool, bk_task_id_t task, int64_t lag)
{
    if (!pool) {
        return;
    }
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->nsv; i++) {
        if (same_task(pool->sv[i]->task, task) && pool->sv[i]->role == BK_TASKDB_STANDBY) {
            pool->sv[i]->lag = lag;
        }
    }
    pthread_mutex_unlock(&pool->lock);
}

int bk_taskdb_read_begin(bk_taskdb_pool_t *pool, bk_task_id_t task, int roles,
                         bk_taskdb_read_t *r)
{
    served_t *best = NULL;
    if (!pool) {
        return -1;
    }
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->nsv; i++) {
        served_t *e = pool->sv[i];
        if (same_task(e->task, task) && (e->role & roles) &&
            (!best || e->role == BK_TASKDB_ACTIVE)) {
            best = e;
        }
    }
    if (best) {
        best->readers++;
        r->db = best->db;
        r->role = best->role;
        r->lag = best->role == BK_TASKDB_ACTIVE ? 0 : best->lag;
        r->entry = best;
    }
    pthread_mutex_unlock(&pool->lock);
    return best ? 0 : -1;
}

void bk_taskdb_read_end(bk_taskdb_pool_t *pool, bk_taskdb_read_t *r)
{
    served_t *e = r->entry;
    if (!e) {
        return;
    }
    pthread_mutex_lock(&pool->lock);
    if (--e->readers == 0 && e->gone) {
        pthread_cond_broadcast(&pool->idle);
    }
    pthread_mutex_unlock(&pool->lock);
    r->entry = NULL;
    r->db = NULL;
}

int bk_taskdb_served(bk_taskdb_pool_t *pool, bk_task_id_t *tasks, int *roles, int max)
{
    int n = 0;
    if (!pool) {
        return 0;
    }
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->nsv && n < max; i++, n++) {
        tasks[n] = pool->sv[i]->task;
        roles[n] = pool->sv[i]->role;
    }
    pthread_mutex_unlock(&pool->lock);
    return n;
}

void bk_taskdb_release(bk_taskdb_pool_t *pool, bk_task_id_t task, bk_db_t *db, int clean)
{
    if (!db) {
        return;
    }
    if (pool) {
        unserve(pool, db);
        gave(pool, task);
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
