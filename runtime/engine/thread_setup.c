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

/* Room for `more` toppars. 0, or -1 without memory. */
static int tp_room(bk_thread_t *thr, int more)
{
    int cap = thr->tp.cap;
    if (thr->tp.n + more <= cap) {
        return 0;
    }
    while (cap < thr->tp.n + more) {
        cap = cap * 2 + 16;
    }
#define GROW(a)                                                                                    \
    do {                                                                                           \
        void *p = realloc(thr->a, (size_t)cap * sizeof(*thr->a));                                  \
        if (!p) {                                                                                  \
            return -1;                                                                             \
        }                                                                                          \
        thr->a = p;                                                                                \
    } while (0)
    GROW(tp.topic);
    GROW(tp.partition);
    GROW(tp.next);
    GROW(tp.first);
    GROW(tp.dirty);
#undef GROW
    thr->tp.cap = cap;
    return 0;
}

/* Partitions [from, to) of topic t: their tables and toppar ids. 0, or -1 without memory. */
static int add_partitions(bk_thread_t *thr, int t, int from, int to)
{
    int *task_of = realloc(thr->tp.task_of[t], (size_t)(to ? to : 1) * sizeof(int));
    int *tp_of = task_of ? realloc(thr->tp.of[t], (size_t)(to ? to : 1) * sizeof(int)) : NULL;
    int *ids = tp_of ? realloc(thr->tp.id[t], (size_t)(to ? to : 1) * sizeof(int)) : NULL;
    if (task_of) {
        thr->tp.task_of[t] = task_of;
    }
    if (tp_of) {
        thr->tp.of[t] = tp_of;
    }
    if (!ids || tp_room(thr, to - from) != 0) {
        if (ids) {
            thr->tp.id[t] = ids;
        }
        return -1;
    }
    thr->tp.id[t] = ids;
    for (int p = from; p < to; p++) {
        int id = thr->tp.n++;
        task_of[p] = tp_of[p] = -1;
        ids[p] = id;
        thr->tp.topic[id] = t;
        thr->tp.partition[id] = p;
        thr->tp.next[id] = thr->tp.first[id] = -1;
        thr->tp.dirty[id] = 0;
    }
    thr->tp.parts[t] = to;
    return 0;
}

int bk_thread_slot_tps(bk_thread_t *thr, int slot)
{
    const bk_plan_sub_t *sub = &thr->plan->subs[thr->tasks[slot].sub];
    int q = thr->tasks[slot].partition, n = 0, cap = 0, *list = NULL;
    /* a passthrough task reads every partition p with p mod (its task count) = q: an input
     * that grows adds to it, and its subtopology keeps its task count */
    int step = sub->passthrough ? sub->partitions : 0;
    for (int j = 0; j < sub->ntopics; j++) {
        int t = sub->topics[j];
        for (int p = q; p < thr->tp.parts[t]; p += step) {
            if (n == cap) {
                int *more = realloc(list, (size_t)(cap = cap * 2 + 4) * sizeof(int));
                if (!more) {
                    free(list);
                    return -1;
                }
                list = more;
            }
            list[n++] = thr->tp.id[t][p];
            if (!step) {
                break;
            }
        }
    }
    free(thr->tp.slot[slot]);
    thr->tp.slot[slot] = list;
    thr->tp.nslot[slot] = n;
    return 0;
}

void bk_thread_build_tables(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    int ntasks, cap;

    /* by the plan's room: a later generation adds topics while the thread runs */
    thr->tp.task_of = calloc((size_t)plan->cap_topics, sizeof(int *));
    thr->tp.of = calloc((size_t)plan->cap_topics, sizeof(int *));
    thr->tp.id = calloc((size_t)plan->cap_topics, sizeof(int *));
    thr->tp.parts = calloc((size_t)plan->cap_topics, sizeof(int));
    thr->tp.slot = calloc((size_t)thr->cap + 1, sizeof(int *));
    thr->tp.nslot = calloc((size_t)thr->cap + 1, sizeof(int));
    thr->seen.topics = plan->ntopics;
    thr->seen.stores = plan->nstores;
    bk_plan_task_table(plan, &ntasks, &cap);
    thr->seen.tasks = ntasks;
    thr->seen.gens = plan->generations;
    thr->seen.ready = atomic_load(&plan->nready);
    for (int t = 0; t < thr->seen.topics; t++) {
        add_partitions(thr, t, 0, plan->topics[t].source ? plan->topics[t].partitions : 0);
    }
    for (int i = 0; i < thr->seen.tasks; i++) {
        bk_thread_slot_tps(thr, i);
    }
}

/* A later generation's topics: read (its own topic, by its tasks) or written (the topic a
 * passthrough switches to). */
static void follow_topic(bk_thread_t *thr, int t)
{
    const bk_plan_topic_t *topic = &thr->plan->topics[t];
    add_partitions(thr, t, 0, topic->source ? topic->partitions : 0);
}

/* The producer's handles of the topics and changelogs the thread knows of that exist on the
 * cluster (bk_plan_set_ready), made once: a handle asks for its topic's metadata, and the
 * dev broker makes a topic it is asked for, with its own width. Looked at again whenever
 * the marks or what the thread follows of the plan changed. */
static void make_handles(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    int ready = atomic_load(&plan->nready), nstores = atomic_load(&plan->ready_nstores);
    if (!thr->kafka.producer || !thr->kafka.out_rkts || !thr->kafka.changelog_rkts ||
        (ready == thr->handles.ready && thr->seen.topics == thr->handles.topics &&
         thr->seen.stores == thr->handles.stores)) {
        return;
    }
    for (int t = 0; t < thr->seen.topics; t++) {
        const bk_plan_topic_t *topic = &plan->topics[t];
        if ((topic->sink || topic->keygroups) && !thr->kafka.out_rkts[t] &&
            bk_plan_topic_ready(plan, t)) {
            thr->kafka.out_rkts[t] = rd_kafka_topic_new(thr->kafka.producer, topic->name, NULL);
        }
    }
    for (int s = 0; s < thr->seen.stores && s < nstores; s++) {
        if (plan->stores[s].logged && !thr->kafka.changelog_rkts[s]) {
            thr->kafka.changelog_rkts[s] =
                rd_kafka_topic_new(thr->kafka.producer, plan->stores[s].changelog, NULL);
        }
    }
    thr->handles.ready = ready;
    thr->handles.topics = thr->seen.topics;
    thr->handles.stores = thr->seen.stores;
}

int bk_thread_follow_plan(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    const char *gens = plan->generations;
    int ntopics, nstores, ntasks, cap;
    lua_State *L = thr->L;

    if (gens == thr->seen.gens) {
        make_handles(thr);
        return 0;
    }
    /* the counts after the list: bk_plan_grow writes the list last, so these are at
     * least the list's, and a count covers complete entries */
    nstores = plan->nstores;
    ntopics = plan->ntopics;
    bk_plan_task_table(plan, &ntasks, &cap);
    for (int t = thr->seen.topics; t < ntopics; t++) {
        follow_topic(thr, t);
    }
    for (int i = thr->seen.tasks; i < ntasks; i++) {
        if (bk_thread_slot_tps(thr, i) != 0) {
            snprintf(thr->err, sizeof(thr->err), "out of memory");
            return -1;
        }
    }
    thr->seen.topics = ntopics;
    thr->seen.stores = nstores;
    thr->seen.tasks = ntasks;
    thr->seen.gens = gens;
    make_handles(thr);
    if (!L) {
        return 0;
    }
    /* the VM describes the plan again with the generations: its tasks of them are built
     * from that description */
    lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref.regrow);
    lua_pushstring(L, gens ? gens : "");
    return bk_vm_pcall(L, 1, 0, 1, thr->err, sizeof(thr->err));
}

int bk_thread_grow_topic(bk_thread_t *thr, int t, int partitions)
{
    if (add_partitions(thr, t, thr->tp.parts[t], partitions) != 0) {
        return -1;
    }
    for (int i = 0; i < thr->cap; i++) {
        if (thr->plan->subs[thr->tasks[i].sub].passthrough &&
            thr->plan->topics[t].sub == thr->tasks[i].sub && bk_thread_slot_tps(thr, i) != 0) {
            return -1;
        }
    }
    return 0;
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
    bk_plan_settings_to_app(L, app, thr->conf, thr->plan->generations);
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
    thr->ref.run = ref_field(L, "run");
    thr->ref.punctuate = ref_field(L, "punctuate");
    thr->ref.close = ref_field(L, "close");
    thr->ref.flush = ref_field(L, "flush");
    thr->ref.hook = ref_field(L, "hook");
    thr->ref.init = ref_field(L, "init");
    thr->ref.add_task = ref_field(L, "add_task");
    thr->ref.init_task = ref_field(L, "init_task");
    thr->ref.close_task = ref_field(L, "close_task");
    thr->ref.drop_task = ref_field(L, "drop_task");
    thr->ref.regrow = ref_field(L, "regrow");
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
        rkt = rd_kafka_topic_new(thr->kafka.consumer, thr->plan->topics[t].name, NULL);
        if (rkt && rd_kafka_metadata(thr->kafka.consumer, 0, rkt, &md, 5000) == 0) {
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
    if (!msg->err && msg->_private) {
        bk_store_acked(msg->_private, msg->offset); /* a changelog record */
    }
    if (msg->err && !thr->fail.delivery) {
        char why[400] = "";
        if (rd_kafka_fatal_error(rk, why, sizeof(why)) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(why, sizeof(why), "%s", rd_kafka_err2str(msg->err));
        }
        thr->fail.delivery = 1;
        snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err), "delivery to %s failed: %s",
                 rd_kafka_topic_name(msg->rkt), why);
    }
}

int bk_thread_producer_broken(bk_thread_t *thr)
{
    char why[400];
    rd_kafka_resp_err_t code =
        thr->kafka.producer ? rd_kafka_fatal_error(thr->kafka.producer, why, sizeof(why)) : 0;
    if (bk_thread_fenced_err(code)) {
        thr->txn.fenced = 1;
    }
    if (thr->fail.delivery) {
        return 1;
    }
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR) {
        return 0;
    }
    thr->fail.delivery = 1;
    snprintf(thr->fail.dr_err, sizeof(thr->fail.dr_err), "the producer failed for good: %s", why);
    return 1;
}

/* The producer and its topic handles: outputs, the dead-letter topic, changelogs. */
static int start_producer(bk_thread_t *thr)
{
    char cid[128];
    const bk_plan_t *plan = thr->plan;
    const char *dlq = bk_conf_str(thr->conf, BK_CONF_DLQ_TOPIC);

    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "producer", thr->index);
    if (thr->eos) {
        /* Kafka Streams' 10 s: what a node that died left open blocks read_committed
         * readers of its partitions that long at most, if nobody fences it sooner */
        char tid[512];
        const char *extra[] = {"transactional.id", tid, "transaction.timeout.ms", "10000", NULL};
        thr->txn.inc_used = atomic_load(&thr->txn.inc);
        bk_thread_txn_id(thr, tid, sizeof(tid));
        thr->kafka.producer = bk_kafka_new_with(thr->conf, BK_KAFKA_PRODUCER, cid, extra, thr,
                                                dr_msg_cb, thr->err, sizeof(thr->err));
    } else {
        thr->kafka.producer = bk_kafka_new(thr->conf, BK_KAFKA_PRODUCER, cid, thr, dr_msg_cb,
                                           thr->err, sizeof(thr->err));
    }
    if (!thr->kafka.producer) {
        return -1;
    }
    if (thr->eos && bk_thread_txn_start(thr) != 0) {
        snprintf(thr->err, sizeof(thr->err), "%s", thr->fail.dr_err);
        return -1;
    }
    thr->kafka.out_rkts = calloc((size_t)plan->cap_topics, sizeof(*thr->kafka.out_rkts));
    if (thr->opt.policy == POLICY_DLQ) {
        thr->kafka.dlq_rkt = rd_kafka_topic_new(thr->kafka.producer, dlq, NULL);
    }
    thr->kafka.changelog_rkts =
        calloc((size_t)plan->cap_stores + 1, sizeof(*thr->kafka.changelog_rkts));
    thr->handles.ready = -1;
    make_handles(thr);
    return 0;
}

void bk_thread_purge_producer(bk_thread_t *thr)
{
    int64_t until = bk_clock_mono_ms() + 10000;
    rd_kafka_purge(thr->kafka.producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    while (rd_kafka_outq_len(thr->kafka.producer) > 0 && bk_clock_mono_ms() < until) {
        rd_kafka_poll(thr->kafka.producer, 100); /* the purged records' reports */
    }
}

void bk_thread_stop_producer(bk_thread_t *thr)
{
    if (thr->kafka.out_rkts) {
        for (int t = 0; t < thr->plan->cap_topics; t++) {
            if (thr->kafka.out_rkts[t]) {
                rd_kafka_topic_destroy(thr->kafka.out_rkts[t]);
            }
        }
        free(thr->kafka.out_rkts);
        thr->kafka.out_rkts = NULL;
    }
    if (thr->kafka.dlq_rkt) {
        rd_kafka_topic_destroy(thr->kafka.dlq_rkt);
        thr->kafka.dlq_rkt = NULL;
    }
    if (thr->kafka.changelog_rkts) {
        for (int s = 0; s < thr->plan->cap_stores; s++) {
            if (thr->kafka.changelog_rkts[s]) {
                rd_kafka_topic_destroy(thr->kafka.changelog_rkts[s]);
            }
        }
        free(thr->kafka.changelog_rkts);
        thr->kafka.changelog_rkts = NULL;
    }
    if (thr->kafka.producer) {
        if (thr->eos) {
            /* what the open transaction holds (nothing after a commit) is aborted now, not
             * at its timeout: read_committed readers of its partitions wait for it */
            rd_kafka_error_t *e = rd_kafka_abort_transaction(thr->kafka.producer, 5000);
            if (e) {
                bk_log_debug("%s: aborting the open transaction: %s", thr->name,
                             rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
            }
        }
        if (bk_node_stop_overdue(thr->flags, bk_clock_mono_ms())) {
            /* a stop that waited its time for the brokers: what is queued is not sent (its
             * interval was not committed, and is processed again) */
            rd_kafka_purge(thr->kafka.producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            rd_kafka_poll(thr->kafka.producer, 0);
        } else {
            rd_kafka_flush(thr->kafka.producer, 5000);
        }
        rd_kafka_destroy(thr->kafka.producer);
        thr->kafka.producer = NULL;
    }
}

int bk_thread_renew_producer(bk_thread_t *thr)
{
    bk_thread_stop_producer(thr);
    return start_producer(thr);
}

/* A partition's end comes as an EOF message: a task reading several partitions waits for an
 * empty one until it reached its end (order.h); a plan without such tasks needs none */
static const char *const eof_settings[] = {"enable.partition.eof", "true", NULL};

int bk_thread_start_kafka(bk_thread_t *thr)
{
    char cid[128];
    const bk_plan_t *plan = thr->plan;

    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "consumer", thr->index);
    thr->kafka.consumer = bk_kafka_new_with(thr->conf, BK_KAFKA_CONSUMER, cid,
                                            thr->batch.merges ? eof_settings : NULL, thr, NULL,
                                            thr->err, sizeof(thr->err));
    if (!thr->kafka.consumer) {
        return -1;
    }
    bk_order_init(&thr->batch.order, thr->kafka.consumer,
                  bk_conf_int(thr->conf, BK_CONF_MAX_TASK_IDLE_MS));
    if (start_producer(thr) != 0) {
        return -1;
    }
    thr->kafka.queue = rd_kafka_queue_get_consumer(thr->kafka.consumer);
    thr->kafka.queue_ready = 1;
    warm_metadata(thr);
    return 0;
}
