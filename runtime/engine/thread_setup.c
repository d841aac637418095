/* thread_setup.c - what a stream thread sets up once, whatever tasks it runs: its
 * (topic, partition) tables (bk_thread_new, on the caller's thread), its Kafka clients and
 * its Lua VM (on the stream thread). Tasks come and go in thread_tasks.c. */
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
#include "engine/kafka.h"
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
    for (int i = 0; i < thr->cap; i++) {
        cap += plan->subs[thr->tasks[i].sub].ntopics;
    }
    thr->tp_base = calloc((size_t)thr->cap + 1, sizeof(int));
    thr->tp_topic = calloc((size_t)cap + 1, sizeof(int));
    thr->tp_partition = calloc((size_t)cap + 1, sizeof(int));
    thr->tp_next = calloc((size_t)cap + 1, sizeof(int64_t));
    thr->tp_first = calloc((size_t)cap + 1, sizeof(int64_t));
    thr->tp_dirty = calloc((size_t)cap + 1, 1);
    for (int i = 0; i < thr->cap; i++) {
        const bk_plan_sub_t *sub = &plan->subs[thr->tasks[i].sub];
        thr->tp_base[i] = thr->ntp_all;
        for (int j = 0; j < sub->ntopics; j++) {
            thr->tp_first[thr->ntp_all] = thr->tp_next[thr->ntp_all] = -1;
            thr->tp_topic[thr->ntp_all] = sub->topics[j];
            thr->tp_partition[thr->ntp_all] = thr->tasks[i].partition;
            thr->ntp_all++;
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
    bk_plan_settings_to_app(L, app, thr->conf);
    if (bk_vm_load_hooks(L, app, bk_conf_str(thr->conf, BK_CONF_HOOKS), thr->err,
                         sizeof(thr->err)) != 0 ||
        bk_vm_require(L, "beck.internal.runtime", thr->err, sizeof(thr->err)) != 0) {
        return -1;
    }
    lua_getfield(L, -1, "new");
    lua_pushvalue(L, app);
    lua_pushlightuserdata(L, &thr->io);
    lua_pushlightuserdata(L, thr);
    lua_createtable(L, 0, 0); /* no tasks yet: they are added as they go live */
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
    thr->ref_add_task = ref_field(L, "add_task");
    thr->ref_init_task = ref_field(L, "init_task");
    thr->ref_close_task = ref_field(L, "close_task");
    thr->ref_drop_task = ref_field(L, "drop_task");
    lua_settop(L, 0);
    return 0;
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
        if (!thr->plan->topics[t].source) {
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
        if (plan->topics[t].sink || plan->topics[t].keygroups) {
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
    }
    thr->queue = rd_kafka_queue_get_consumer(thr->consumer);
    thr->queue_ready = 1;
    warm_metadata(thr);
    return 0;
}
