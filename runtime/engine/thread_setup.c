/* thread_setup.c - a stream thread's start-up, in order: its (topic, partition) tables,
 * its tasks' stores, its Kafka clients, its Lua VM and processors, the restore of its
 * stores from their changelogs (and the settling of a previous owner's uncommitted tail),
 * then its input partitions from the committed offsets. Runs on the stream thread. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/ffi.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

void bk_thread_build_tables(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    int cap = 0;

    thr->task_of = calloc((size_t)plan->ntopics, sizeof(int *));
    thr->tp_of = calloc((size_t)plan->ntopics, sizeof(int *));
    for (int t = 0; t < plan->ntopics; t++) {
        int np = plan->topics[t].partitions;
        thr->task_of[t] = malloc((size_t)(np ? np : 1) * sizeof(int));
        thr->tp_of[t] = malloc((size_t)(np ? np : 1) * sizeof(int));
        for (int p = 0; p < np; p++) {
            thr->task_of[t][p] = thr->tp_of[t][p] = -1;
        }
    }
    for (int i = 0; i < thr->ntasks; i++) {
        cap += plan->subs[thr->tasks[i].sub].ntopics;
    }
    thr->tp_topic = calloc((size_t)cap + 1, sizeof(int));
    thr->tp_partition = calloc((size_t)cap + 1, sizeof(int));
    thr->tp_next = calloc((size_t)cap + 1, sizeof(int64_t));
    thr->tp_first = calloc((size_t)cap + 1, sizeof(int64_t));
    thr->tp_dirty = calloc((size_t)cap + 1, 1);
    for (int i = 0; i < thr->ntasks; i++) {
        const bk_plan_sub_t *sub = &plan->subs[thr->tasks[i].sub];
        int p = thr->tasks[i].partition;
        for (int j = 0; j < sub->ntopics; j++) {
            int t = sub->topics[j];
            thr->task_of[t][p] = i;
            thr->tp_of[t][p] = thr->ntp;
            thr->tp_first[thr->ntp] = -1;
            thr->tp_topic[thr->ntp] = t;
            thr->tp_partition[thr->ntp] = p;
            thr->ntp++;
        }
    }
}

static int ref_field(lua_State *L, const char *name)
{
    lua_getfield(L, -1, name);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

int bk_thread_start_lua(bk_thread_t *thr)
{
    lua_State *L = thr->L = bk_vm_new();
    int app;

    if (!L) {
        snprintf(thr->err, sizeof(thr->err), "cannot create a Lua VM");
        return -1;
    }
    if (bk_vm_dofile(L, thr->plan->path, 1, thr->err, sizeof(thr->err)) != 0) {
        return -1;
    }
    app = lua_gettop(L);
    if (bk_vm_load_hooks(L, app, bk_conf_str(thr->conf, BK_CONF_HOOKS), thr->err,
                         sizeof(thr->err)) != 0 ||
        bk_vm_require(L, "beck.internal.runtime", thr->err, sizeof(thr->err)) != 0) {
        return -1;
    }
    lua_getfield(L, -1, "new");
    lua_pushvalue(L, app);
    lua_pushlightuserdata(L, &thr->io);
    lua_pushlightuserdata(L, thr);
    lua_createtable(L, thr->ntasks, 0);
    for (int i = 0; i < thr->ntasks; i++) {
        lua_createtable(L, 2, 0);
        lua_pushinteger(L, thr->tasks[i].sub);
        lua_rawseti(L, -2, 1);
        lua_pushinteger(L, thr->tasks[i].partition);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushinteger(L, bk_conf_int(thr->conf, BK_CONF_CACHE_MAX_BYTES));
    /* runtime.new(app, io, thread, tasks, cache_bytes) -> { run, punctuate, ... } */
    if (bk_vm_pcall(L, 5, 1, 1, thr->err, sizeof(thr->err)) != 0) {
        return -1;
    }
    thr->ref_run = ref_field(L, "run");
    thr->ref_punctuate = ref_field(L, "punctuate");
    thr->ref_close = ref_field(L, "close");
    thr->ref_flush = ref_field(L, "flush");
    thr->ref_hook = ref_field(L, "hook");
    thr->ref_init = ref_field(L, "init");
    lua_settop(L, 0);
    return 0;
}

/* Calls every processor's init(ctx); errors here stop start-up. */
int bk_thread_init_lua(bk_thread_t *thr)
{
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref_init);
    return bk_vm_pcall(thr->L, 0, 0, 1, thr->err, sizeof(thr->err));
}

/* Opens the DB of every task that has stores: <state_dir>/<app>/<task>. */
int bk_thread_open_stores(bk_thread_t *thr)
{
    thr->dbs = calloc((size_t)thr->ntasks + 1, sizeof(*thr->dbs));
    thr->store_of = calloc((size_t)thr->ntasks + 1, sizeof(*thr->store_of));
    for (int t = 0; t < thr->ntasks; t++) {
        int logged;
        thr->store_of[t] = calloc((size_t)thr->plan->nstores + 1, sizeof(bk_store_t *));
        thr->dbs[t] = bk_taskdb_open(thr->pool, thr->plan, thr->conf, thr->tasks[t],
                                     thr->store_of[t], &logged, thr->err, sizeof(thr->err));
        if (!thr->dbs[t] && thr->err[0]) {
            return -1;
        }
    }
    return 0;
}

static void restore_progress(void *opaque, const bk_restore_progress_t *p)
{
    bk_thread_t *thr = opaque;
    lua_State *L = thr->L;
    char err[1024];

    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref_hook);
    lua_pushstring(L, "on_restore");
    lua_createtable(L, 0, 9);
    lua_pushstring(L, "restore");
    lua_setfield(L, -2, "kind");
    lua_pushnumber(L, (lua_Number)p->records);
    lua_setfield(L, -2, "records");
    lua_pushnumber(L, (lua_Number)p->total);
    lua_setfield(L, -2, "total");
    lua_pushnumber(L, p->total ? 100.0 * (double)p->records / (double)p->total : 100.0);
    lua_setfield(L, -2, "percent");
    lua_pushnumber(L, p->rate);
    lua_setfield(L, -2, "rate");
    lua_pushnumber(L, p->eta_s);
    lua_setfield(L, -2, "eta_s");
    lua_pushnumber(L, p->elapsed_s);
    lua_setfield(L, -2, "elapsed_s");
    lua_pushinteger(L, p->stores);
    lua_setfield(L, -2, "stores");
    lua_pushboolean(L, p->done);
    lua_setfield(L, -2, "done");
    lua_pushinteger(L, thr->index);
    lua_setfield(L, -2, "thread");
    if (bk_vm_pcall(L, 2, 0, 1, err, sizeof(err)) != 0) {
        bk_log_error("%s: on_restore hook failed: %s", thr->name, err);
    }
}

/* The input offsets of task t (next to read, -1: none), in the order of its
 * subtopology's topics: what its markers and checkpoints name. */
int bk_thread_task_inputs(const bk_thread_t *thr, int t, int64_t *offs)
{
    const bk_plan_sub_t *sub = &thr->plan->subs[thr->tasks[t].sub];
    int n = sub->ntopics < BK_STORE_MAX_INPUTS ? sub->ntopics : BK_STORE_MAX_INPUTS;
    for (int j = 0; j < n; j++) {
        int tp = thr->tp_of[sub->topics[j]][thr->tasks[t].partition];
        offs[j] = tp >= 0 ? thr->tp_next[tp] : -1;
    }
    return n;
}

/* Reads the committed input offsets of this thread's partitions into tp_next
 * (-1 where none is committed). */
static int read_committed(bk_thread_t *thr)
{
    rd_kafka_topic_partition_list_t *list =
        rd_kafka_topic_partition_list_new(thr->ntp ? thr->ntp : 1);
    rd_kafka_resp_err_t err;
    for (int i = 0; i < thr->ntp; i++) {
        rd_kafka_topic_partition_list_add(list, thr->plan->topics[thr->tp_topic[i]].name,
                                          thr->tp_partition[i]);
    }
    err = thr->ntp > 0 ? rd_kafka_committed(thr->consumer, list, 10000) : 0;
    for (int i = 0; !err && i < list->cnt; i++) {
        thr->tp_next[i] = list->elems[i].offset >= 0 ? list->elems[i].offset : -1;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        snprintf(thr->err, sizeof(thr->err), "cannot read the committed input offsets: %s",
                 rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* After the restore, a task's previous owner may have left changelog records after its
 * last commit marker (it was killed, or failed between committing its input and writing
 * the marker). Their fate follows the committed input offsets: kept if those moved past
 * the last marker, dropped if not. Then a marker here says so to every other reader. */
static int settle(bk_thread_t *thr)
{
    if (read_committed(thr) != 0) {
        return -1;
    }
    for (int t = 0; t < thr->ntasks; t++) {
        int64_t offs[BK_STORE_MAX_INPUTS];
        int n = bk_thread_task_inputs(thr, t, offs);
        for (int s = 0; s < thr->plan->nstores; s++) {
            bk_store_t *st = thr->store_of[t][s];
            int64_t pending;
            int kept;
            if (!st || !bk_store_logged(st)) {
                continue;
            }
            pending = bk_changelog_pending(st);
            kept = bk_changelog_resolve(st, offs, n, thr->err, sizeof(thr->err));
            if (kept < 0) {
                return -1;
            }
            if (pending > 0) {
                bk_log_info("task %s store %s: %lld write(s) after the previous owner's last "
                            "commit %s",
                            BK_TASK_NAME(thr->tasks[t]), bk_store_name(st), (long long)pending,
                            kept ? "kept: their input was committed"
                                 : "dropped: their input was not committed");
            }
            bk_store_set_input(st, offs, n);
            if (bk_changelog_write_marker(st, pending == 0 || kept, offs, n) != 0) {
                snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
                return -1;
            }
            if (pending > 0 && !kept) {
                /* the dropped records' keys again, with their committed values, then a
                 * commit marker for them: in a compacted changelog a dropped record must
                 * not stay the newest of its key (docs/state.md, Markers) */
                int64_t repaired;
                if (bk_changelog_repair(st, &repaired) != 0 ||
                    bk_changelog_write_marker(st, 1, offs, n) != 0) {
                    snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
                    return -1;
                }
                bk_log_info("task %s store %s: %lld key(s) written again with their "
                            "committed values",
                            BK_TASK_NAME(thr->tasks[t]), bk_store_name(st), (long long)repaired);
            }
        }
    }
    return 0;
}

/* Replays the changelogs of this thread's logged stores from their
 * checkpoints, then checkpoints the result. */
int bk_thread_restore(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    bk_restore_item_t *items = calloc((size_t)(thr->ntasks * plan->nstores) + 1, sizeof(*items));
    char(*ids)[32] = calloc((size_t)thr->ntasks + 1, 32);
    int n = 0, rc;

    for (int t = 0; t < thr->ntasks; t++) {
        snprintf(ids[t], 32, "%s", BK_TASK_NAME(thr->tasks[t]));
        for (int s = 0; s < plan->nstores; s++) {
            bk_store_t *st = thr->store_of[t][s];
            if (st && bk_store_logged(st)) {
                items[n++] = (bk_restore_item_t){st, plan->stores[s].changelog,
                                                 thr->tasks[t].partition, ids[t]};
            }
        }
    }
    int64_t *before = calloc((size_t)n + 1, sizeof(*before));
    char *moved = calloc((size_t)thr->ntasks + 1, 1);
    for (int i = 0; i < n; i++) {
        before[i] = bk_store_changelog_next(items[i].st);
    }
    rc = bk_restore_run(thr->consumer, items, n, restore_progress, thr, &thr->flags->stop, thr->err,
                        sizeof(thr->err));
    for (int i = 0, t = 0; i < n; i++) {
        while (t < thr->ntasks && strcmp(ids[t], items[i].task) != 0) {
            t++;
        }
        if (t < thr->ntasks && bk_store_changelog_next(items[i].st) != before[i]) {
            moved[t] = 1;
        }
    }
    if (rc == 0) {
        rc = settle(thr);
    }
    /* Checkpoint what the restore replayed (a DB it did not move keeps its checkpoint,
     * which is as good: each costs two fsyncs, most of a promotion's start-up). */
    for (int t = 0; rc == 0 && t < thr->ntasks; t++) {
        if (thr->dbs[t] && moved[t] &&
            bk_db_checkpoint(thr->dbs[t], thr->err, sizeof(thr->err)) != 0) {
            rc = -1;
        }
    }
    free(before);
    free(moved);
    free(items);
    free(ids);
    return rc;
}

/* Asks the consumer's broker for the metadata of the input topics now. Without it a
 * fresh consumer learns of a topic it was assigned only at librdkafka's next scan of
 * unknown topics, once a second: that second was most of a failover's time to the first
 * record (scripts/bench/failover). A failure here only costs that second. */
static void warm_metadata(bk_thread_t *thr)
{
    for (int t = 0; t < thr->plan->ntopics; t++) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *rkt;
        int mine = 0;
        for (int i = 0; i < thr->ntasks && !mine; i++) {
            const bk_plan_sub_t *sub = &thr->plan->subs[thr->tasks[i].sub];
            for (int j = 0; j < sub->ntopics; j++) {
                mine |= sub->topics[j] == t;
            }
        }
        if (!mine) {
            continue;
        }
        rkt = rd_kafka_topic_new(thr->consumer, thr->plan->topics[t].name, NULL);
        if (rkt && rd_kafka_metadata(thr->consumer, 0, rkt, &md, 5000) == 0) {
            rd_kafka_metadata_destroy(md);
        }
        if (rkt) {
            rd_kafka_topic_destroy(rkt);
        }
    }
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    bk_thread_t *thr = opaque;
    (void)rk;
    if (!msg->err && msg->_private) {
        bk_store_acked(msg->_private, msg->offset); /* a changelog record */
    }
    if (msg->err && !thr->dr_failed) {
        thr->dr_failed = 1;
        snprintf(thr->dr_err, sizeof(thr->dr_err), "delivery to %s failed: %s",
                 rd_kafka_topic_name(msg->rkt), rd_kafka_err2str(msg->err));
    }
}

int bk_thread_start_kafka(bk_thread_t *thr)
{
    char cid[128];
    const bk_plan_t *plan = thr->plan;
    const char *dlq = bk_conf_str(thr->conf, BK_CONF_DLQ_TOPIC);

    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "consumer", thr->index);
    thr->consumer =
        bk_kafka_new(thr->conf, BK_KAFKA_CONSUMER, cid, thr, NULL, thr->err, sizeof(thr->err));
    if (!thr->consumer) {
        return -1;
    }
    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "producer", thr->index);
    thr->producer =
        bk_kafka_new(thr->conf, BK_KAFKA_PRODUCER, cid, thr, dr_msg_cb, thr->err, sizeof(thr->err));
    if (!thr->producer) {
        return -1;
    }
    thr->out_rkts = calloc((size_t)plan->ntopics, sizeof(*thr->out_rkts));
    for (int t = 0; t < plan->ntopics; t++) {
        if (plan->topics[t].sink) {
            thr->out_rkts[t] = rd_kafka_topic_new(thr->producer, plan->topics[t].name, NULL);
        }
    }
    if (thr->policy == POLICY_DLQ) {
        thr->dlq_rkt = rd_kafka_topic_new(thr->producer, dlq, NULL);
    }
    thr->changelog_rkts = calloc((size_t)plan->nstores + 1, sizeof(*thr->changelog_rkts));
    for (int s = 0; s < plan->nstores; s++) {
        if (plan->stores[s].logged) {
            thr->changelog_rkts[s] =
                rd_kafka_topic_new(thr->producer, plan->stores[s].changelog, NULL);
        }
        for (int t = 0; t < thr->ntasks; t++) {
            if (thr->store_of[t][s]) {
                bk_store_set_changelog(thr->store_of[t][s], thr->producer, thr->changelog_rkts[s],
                                       thr->tasks[t].partition);
            }
        }
    }
    thr->queue = rd_kafka_queue_get_consumer(thr->consumer);
    warm_metadata(thr);
    return 0;
}

int bk_thread_assign_inputs(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t err;

    list = rd_kafka_topic_partition_list_new(thr->ntp ? thr->ntp : 1);
    for (int i = 0; i < thr->ntp; i++) {
        /* from the committed offset read at start-up (settle), saving the consumer
         * its own look-up; none: INVALID, auto.offset.reset (earliest) */
        rd_kafka_topic_partition_list_add(list, plan->topics[thr->tp_topic[i]].name,
                                          thr->tp_partition[i])
            ->offset = thr->tp_next[i] >= 0 ? thr->tp_next[i] : RD_KAFKA_OFFSET_INVALID;
    }
    err = rd_kafka_assign(thr->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) {
        snprintf(thr->err, sizeof(thr->err), "cannot assign partitions: %s", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}
