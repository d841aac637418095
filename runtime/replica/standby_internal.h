/* standby_internal.h - the standby runner's insides, shared by standby.c (its DBs, tailing,
 * reports, scrub, its thread) and standby_build.c (a later generation's replicas built from
 * the changelogs of the generations before). Nothing else includes it. The runner's thread
 * only, but where a comment says otherwise. */
#ifndef BK_STANDBY_INTERNAL_H
#define BK_STANDBY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "engine/db.h"
#include "engine/dbverify.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/tasklife.h"
#include "replica/standby.h"

/* One logged store of one task: a changelog partition to tail. */
typedef struct {
    bk_store_t *st; /* NULL while the task's DB is not open yet (open_dbs: fresh) */
    int store;      /* index into the plan's stores */
    const char *topic;
    int32_t partition;
    int task;     /* index into the runner's tasks */
    int64_t lo;   /* the changelog's start when the runner began */
    int64_t hi;   /* its end, as the latest fetch saw it */
    int64_t goal; /* its end when the runner began; -1 once applied up to there */
} item_t;

struct bk_standby_s {
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_task_id_t *tasks;
    int32_t *ids;
    int ntasks;
    bk_standby_progress_cb cb;
    void *opaque;
    bk_taskdb_pool_t *pool; /* where DBs come from and go back to (taskdb.h), or NULL */
    /* Cold bootstrap (bk_standby_set_bootstrap): per task the node's mode, and for a task
     * handed to it the lag reported meanwhile (-1: tailed here). */
    int boot_on;
    int64_t boot_min;
    int *boot_mode;
    int64_t *boot_lag;
    bk_standby_boot_cb boot_cb;
    void *boot_opaque;
    bk_thread_recover_cb recover; /* the archive (bk_standby_set_recover), or NULL */
    void *recover_opaque;

    bk_db_t **dbs; /* [ntasks], NULL for a task without a logged store */
    char *corrupt; /* [ntasks] 1: its store was found damaged (bk_standby_corrupt) */
    bk_dbverify_t *scrub;
    int scrub_t;    /* the replica being scrubbed */
    char *fresh;    /* [ntasks] 1: no state on disk yet, DB opened only if kept here */
    char *unbuilt;  /* [ntasks] 1: a later generation's task not built here */
    char *build;    /* [ntasks] 1: ... that this runner builds from changelogs (build_task) */
    uint8_t *ready; /* [ntasks] bk_standby_set_ready's */
    item_t *items;
    int nitems;
    int64_t *applied;    /* [ntasks] records applied since the start */
    int64_t *applied_ms; /* [ntasks] when the last one was applied (monotonic), 0: never */
    rd_kafka_t *consumer;

    pthread_t tid;
    int started;
    atomic_int stop;
    int retriable; /* it failed for an error that passes (bk_kafka_retriable) */
    atomic_int done;
    int failed;
    char err[1024];
    int64_t t0; /* when the runner began (monotonic ms) */
    /* each replica's life (engine/tasklife.h: opening, building, tailing), by app task
     * index (ids[t]), published as its standby's state for /v1/status */
    bk_tasklife_t life;
};

/* standby.c: the changelog partitions of the opened tasks assigned to the consumer, and one
 * turn of tailing; each 0, or -1 with sb->err. */
int bk_standby_assign(bk_standby_t *sb);
int bk_standby_tail(bk_standby_t *sb);
/* Replica t (the runner's index) moves to state `to` of its life. */
void bk_standby_life(bk_standby_t *sb, int t, bk_life_t to);
/* standby_build.c: the later generation's tasks this runner builds (sb->build), each built
 * from the changelogs of the generations before it (0, or -1 with sb->err); one of them;
 * the tasks whose DBs were never opened dropped from the items. */
int bk_standby_build_all(bk_standby_t *sb);
int bk_standby_build_task(bk_standby_t *sb, int t);
void bk_standby_drop_unopened(bk_standby_t *sb);

#endif
