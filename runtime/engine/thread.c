/* thread.c - the stream thread: consume, run Lua, produce, commit. */
#include "engine/thread.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/ffi.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/store.h"
#include "base/log.h"
#include "engine/snapshot.h"
#include "engine/taskdb.h"
#include "engine/vm.h"

/* spec/01-unit/03-ffi_spec.lua checks the same layout from Lua's side. */
_Static_assert(sizeof(bk_rec_t) == 56, "bk_rec_t layout changed: update the FFI spec");

typedef enum { POLICY_FAIL, POLICY_SKIP, POLICY_DLQ } policy_t;

struct bk_thread_s {
    int index;
    char name[32];
    const bk_plan_t *plan;
    const bk_conf_t *conf;
    bk_node_flags_t *flags;
    bk_task_id_t *tasks;
    int ntasks;
    policy_t policy;
    int batch_size;
    int64_t commit_interval_ms;
    pthread_t tid;
    int started;
    volatile int done;
    int rc;

    lua_State *L;
    int ref_run, ref_punctuate, ref_close, ref_flush, ref_hook, ref_init;

    /* State: one DB per task; store_of[task][plan store] or NULL. */
    bk_db_t **dbs;
    bk_store_t ***store_of;
    rd_kafka_topic_t **changelog_rkts; /* by plan store */

    rd_kafka_t *consumer, *producer;
    rd_kafka_queue_t *queue;
    rd_kafka_topic_t **out_rkts; /* by topic index, sinks only */
    rd_kafka_topic_t *dlq_rkt;

    /* The batch in hand, shared with Lua. */
    bk_io_t io;
    rd_kafka_message_t **msgs;
    int *rec_tp; /* toppar of each record */

    /* Assigned topic-partitions and the next offset to commit of each. */
    int ntp;
    int *tp_topic, *tp_partition;
    int64_t *tp_next;
    int64_t *tp_first; /* first offset processed, -1: none yet */
    char *tp_dirty;
    int **task_of, **tp_of; /* [topic][partition] -> task / toppar, -1 */
    const rd_kafka_topic_t *last_rkt;
    int last_topic;

    int dr_failed;
    int punct_failed;  /* a stream-time punctuation raised under on_error=fail */
    int commit_failed; /* a commit failed: no later commit may succeed it */
    char dr_err[512];
    char err[1024];
    bk_thread_stats_t stats;

    bk_taskdb_pool_t *pool; /* where DBs come from and go back to (NULL: open, close) */
    /* Cold bootstrap, the active's side: snapshots asked for (made after the next commit)
     * and made (taken by the node). Guarded by snap_lock. */
    pthread_mutex_t snap_lock;
    bk_thread_snapshot_t snap_req[BK_THREAD_SNAPSHOTS], snap_done[BK_THREAD_SNAPSHOTS];
    int nsnap_req, nsnap_done;
    volatile int snap_wanted;
    int clean;              /* the final commit went through */

    /* In a cluster (bk_thread_set_cluster). */
    uint64_t epoch;
    int32_t *ids;
    bk_thread_progress_cb progress;
    void *progress_opaque;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* -- FFI: called by Lua on this thread ---------------------------------- */

int64_t bk_ffi_clock_ms(void)
{
    return now_ms();
}

void bk_ffi_log(int level, const char *msg, size_t len)
{
    if (level < BK_LOG_ERROR || level > BK_LOG_DEBUG) {
        level = BK_LOG_INFO;
    }
    bk_log((bk_log_level_t)level, "%.*s", (int)len, msg);
}

const char *bk_ffi_thread_error(bk_thread_t *thr)
{
    return thr->err;
}

static rd_kafka_headers_t *rec_headers(bk_thread_t *thr, int32_t rec)
{
    rd_kafka_headers_t *hdrs = NULL;
    if (rec < 0 || rec >= thr->io.count) {
        return NULL;
    }
    if (rd_kafka_message_headers(thr->msgs[rec], &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return NULL;
    }
    return hdrs;
}

int bk_ffi_thread_send(bk_thread_t *thr, int32_t topic, const char *key, size_t key_len,
                       const char *value, size_t value_len, int64_t timestamp, int32_t rec)
{
    rd_kafka_topic_t *rkt;
    rd_kafka_headers_t *hdrs;
    rd_kafka_resp_err_t err;

    if (topic < 0 || topic >= thr->plan->ntopics || !(rkt = thr->out_rkts[topic])) {
        snprintf(thr->err, sizeof(thr->err), "no sink topic with index %d", (int)topic);
        return BK_FFI_ERR;
    }
    /* Output records carry the headers of the input record in hand, as in
     * Kafka Streams (none from a punctuation). */
    hdrs = rec >= 0 ? rec_headers(thr, rec) : NULL;
    for (;;) {
        rd_kafka_headers_t *copy = hdrs ? rd_kafka_headers_copy(hdrs) : NULL;
        err = rd_kafka_producev(thr->producer, RD_KAFKA_V_RKT(rkt),
                                RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_KEY(key, key_len),
                                RD_KAFKA_V_VALUE((void *)value, value_len),
                                RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0),
                                RD_KAFKA_V_HEADERS(copy), RD_KAFKA_V_END);
        if (!err) {
            thr->stats.out++;
            return BK_FFI_OK;
        }
        if (copy) {
            rd_kafka_headers_destroy(copy); /* not taken over on failure */
        }
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            snprintf(thr->err, sizeof(thr->err), "cannot produce to %s: %s",
                     rd_kafka_topic_name(rkt), rd_kafka_err2str(err));
            return BK_FFI_ERR;
        }
        /* Queue full: serve delivery reports until there is room. */
        rd_kafka_poll(thr->producer, 5);
    }
}

int bk_ffi_thread_header_count(bk_thread_t *thr, int32_t rec)
{
    rd_kafka_headers_t *hdrs = rec_headers(thr, rec);
    return hdrs ? (int)rd_kafka_header_cnt(hdrs) : 0;
}

int bk_ffi_thread_header_get(bk_thread_t *thr, int32_t rec, int32_t idx, const char **name,
                             const char **value, size_t *size)
{
    rd_kafka_headers_t *hdrs = rec_headers(thr, rec);
    const void *v;
    if (!hdrs || rd_kafka_header_get_all(hdrs, (size_t)idx, name, &v, size) != 0) {
        return BK_FFI_ERR;
    }
    *value = v;
    return BK_FFI_OK;
}

void bk_ffi_thread_punctuation_failed(bk_thread_t *thr, const char *msg, size_t len)
{
    bk_log_error("%s: stream-time punctuation failed: %.*s%s", thr->name, (int)len, msg,
                 thr->policy == POLICY_FAIL ? " (on_error=fail: stopping)" : "");
    if (thr->policy == POLICY_FAIL) {
        thr->punct_failed = 1;
    }
}

bk_store_t *bk_ffi_thread_store(bk_thread_t *thr, int32_t task, int32_t store)
{
    if (task < 0 || task >= thr->ntasks || store < 0 || store >= thr->plan->nstores) {
        return NULL;
    }
    return thr->store_of[task][store];
}

/* -- Set-up ------------------------------------------------------------- */

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

bk_thread_t *bk_thread_new(int index, const bk_plan_t *plan, const bk_conf_t *conf,
                           bk_node_flags_t *flags, const bk_task_id_t *tasks, int ntasks)
{
    bk_thread_t *thr = calloc(1, sizeof(*thr));
    const char *pol = bk_conf_str(conf, BK_CONF_ON_ERROR);

    thr->index = index;
    snprintf(thr->name, sizeof(thr->name), "stream-%d", index);
    thr->plan = plan;
    thr->conf = conf;
    thr->flags = flags;
    thr->ntasks = ntasks;
    thr->tasks = calloc((size_t)(ntasks ? ntasks : 1), sizeof(*tasks));
    memcpy(thr->tasks, tasks, (size_t)ntasks * sizeof(*tasks));
    thr->policy = strcmp(pol, "skip") == 0 ? POLICY_SKIP
                  : strcmp(pol, "dlq") == 0 ? POLICY_DLQ
                                            : POLICY_FAIL;
    thr->batch_size = (int)bk_conf_int(conf, BK_CONF_BATCH_SIZE);
    thr->commit_interval_ms = bk_conf_int(conf, BK_CONF_COMMIT_INTERVAL_MS);
    thr->io.next_wall_ms = -1;
    thr->last_topic = -1;
    thr->ref_run = thr->ref_punctuate = thr->ref_close = LUA_NOREF;
    thr->ref_flush = thr->ref_hook = thr->ref_init = LUA_NOREF;
    pthread_mutex_init(&thr->snap_lock, NULL);
    return thr;
}

/* Builds the (topic, partition) -> task / toppar tables for this thread. */
static void build_tables(bk_thread_t *thr)
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

static int start_lua(bk_thread_t *thr)
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
static int init_lua(bk_thread_t *thr)
{
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref_init);
    return bk_vm_pcall(thr->L, 0, 0, 1, thr->err, sizeof(thr->err));
}

/* Opens the DB of every task that has stores: <state_dir>/<app>/<task>. */
static int open_stores(bk_thread_t *thr)
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
static int task_inputs(const bk_thread_t *thr, int t, int64_t *offs)
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
        int n = task_inputs(thr, t, offs);
        for (int s = 0; s < thr->plan->nstores; s++) {
            bk_store_t *st = thr->store_of[t][s];
            int64_t pending;
            int kept;
            if (!st || !bk_store_logged(st)) {
                continue;
            }
            pending = bk_store_restore_pending(st);
            kept = bk_store_restore_resolve(st, offs, n, thr->err, sizeof(thr->err));
            if (kept < 0) {
                return -1;
            }
            if (pending > 0) {
                bk_log_info("task %d_%d store %s: %lld write(s) after the previous owner's last "
                            "commit %s",
                            thr->tasks[t].sub, thr->tasks[t].partition, bk_store_name(st),
                            (long long)pending,
                            kept ? "kept: their input was committed"
                                 : "dropped: their input was not committed");
            }
            bk_store_set_input(st, offs, n);
            if (bk_store_write_marker(st, pending == 0 || kept, offs, n) != 0) {
                snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
                return -1;
            }
            if (pending > 0 && !kept) {
                /* the dropped records' keys again, with their committed values, then a
                 * commit marker for them: in a compacted changelog a dropped record must
                 * not stay the newest of its key (docs/state.md, Markers) */
                int64_t repaired;
                if (bk_store_repair(st, &repaired) != 0 ||
                    bk_store_write_marker(st, 1, offs, n) != 0) {
                    snprintf(thr->err, sizeof(thr->err), "%s", bk_ffi_store_error(st));
                    return -1;
                }
                bk_log_info("task %d_%d store %s: %lld key(s) written again with their "
                            "committed values",
                            thr->tasks[t].sub, thr->tasks[t].partition, bk_store_name(st),
                            (long long)repaired);
            }
        }
    }
    return 0;
}

/* Replays the changelogs of this thread's logged stores from their
 * checkpoints, then checkpoints the result. */
static int restore(bk_thread_t *thr)
{
    const bk_plan_t *plan = thr->plan;
    bk_restore_item_t *items = calloc((size_t)(thr->ntasks * plan->nstores) + 1, sizeof(*items));
    char (*ids)[32] = calloc((size_t)thr->ntasks + 1, 32);
    int n = 0, rc;

    for (int t = 0; t < thr->ntasks; t++) {
        snprintf(ids[t], 32, "%d_%d", thr->tasks[t].sub, thr->tasks[t].partition);
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
    rc = bk_restore_run(thr->consumer, items, n, restore_progress, thr, &thr->flags->stop,
                        thr->err, sizeof(thr->err));
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

static int start_kafka(bk_thread_t *thr)
{
    char cid[128];
    const bk_plan_t *plan = thr->plan;
    const char *dlq = bk_conf_str(thr->conf, BK_CONF_DLQ_TOPIC);

    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "consumer", thr->index);
    thr->consumer = bk_kafka_new(thr->conf, BK_KAFKA_CONSUMER, cid, thr, NULL, thr->err,
                                 sizeof(thr->err));
    if (!thr->consumer) {
        return -1;
    }
    snprintf(cid, sizeof(cid), "%s-%s-%d", plan->id, "producer", thr->index);
    thr->producer = bk_kafka_new(thr->conf, BK_KAFKA_PRODUCER, cid, thr, dr_msg_cb, thr->err,
                                 sizeof(thr->err));
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
            thr->changelog_rkts[s] = rd_kafka_topic_new(thr->producer, plan->stores[s].changelog,
                                                        NULL);
        }
        for (int t = 0; t < thr->ntasks; t++) {
            if (thr->store_of[t][s]) {
                bk_store_set_changelog(thr->store_of[t][s], thr->producer,
                                       thr->changelog_rkts[s], thr->tasks[t].partition);
            }
        }
    }
    thr->queue = rd_kafka_queue_get_consumer(thr->consumer);
    warm_metadata(thr);
    return 0;
}

static int assign_inputs(bk_thread_t *thr)
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
        snprintf(thr->err, sizeof(thr->err), "cannot assign partitions: %s",
                 rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* -- The record path ---------------------------------------------------- */

static int topic_of(bk_thread_t *thr, const rd_kafka_topic_t *rkt)
{
    const char *name;
    if (rkt == thr->last_rkt) {
        return thr->last_topic;
    }
    name = rd_kafka_topic_name(rkt);
    thr->last_rkt = rkt;
    thr->last_topic = bk_plan_topic_index(thr->plan, name);
    return thr->last_topic;
}

/* Turns fetched messages into bk_rec_t, dropping errors and strays. */
static int fill_batch(bk_thread_t *thr, int n)
{
    int j = 0;
    for (int i = 0; i < n; i++) {
        rd_kafka_message_t *m = thr->msgs[i];
        int t, tp;
        bk_rec_t *rec;
        if (m->err) {
            bk_log_warn("consumer: %s [%d]: %s", m->rkt ? rd_kafka_topic_name(m->rkt) : "-",
                        (int)m->partition, rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        t = topic_of(thr, m->rkt);
        if (t < 0 || m->partition >= thr->plan->topics[t].partitions ||
            (tp = thr->tp_of[t][m->partition]) < 0) {
            rd_kafka_message_destroy(m); /* not ours: cannot happen with assign() */
            continue;
        }
        rec = &thr->io.recs[j];
        rec->key = m->key;
        rec->key_len = (int32_t)m->key_len;
        rec->value = m->payload;
        rec->value_len = (int32_t)m->len;
        rec->task = thr->task_of[t][m->partition];
        rec->topic = t;
        rec->partition = m->partition;
        rec->offset = m->offset;
        rec->timestamp = rd_kafka_message_timestamp(m, NULL);
        thr->rec_tp[j] = tp;
        thr->msgs[j++] = m;
    }
    return j;
}

/* The "first record" line of an input partition: with the "last record" line of the final
 * commit, it bounds when this node processed the task (docs/cluster.md). */
static void first_record(bk_thread_t *thr, int tp, int64_t offset)
{
    const bk_task_id_t *task = &thr->tasks[thr->task_of[thr->tp_topic[tp]][thr->tp_partition[tp]]];
    thr->tp_first[tp] = offset;
    bk_log_info("task %d_%d epoch %llu: first record %s [%d] offset %lld", task->sub,
                task->partition, (unsigned long long)thr->epoch,
                thr->plan->topics[thr->tp_topic[tp]].name, thr->tp_partition[tp],
                (long long)offset);
}

static void mark_done(bk_thread_t *thr, int from, int to)
{
    for (int i = from; i < to; i++) {
        int tp = thr->rec_tp[i];
        if (thr->tp_first[tp] < 0) {
            first_record(thr, tp, thr->io.recs[i].offset);
        }
        thr->tp_next[tp] = thr->io.recs[i].offset + 1;
        thr->tp_dirty[tp] = 1;
    }
    thr->stats.in += (uint64_t)(to - from);
}

static int dead_letter(bk_thread_t *thr, int idx, const char *msg)
{
    rd_kafka_message_t *m = thr->msgs[idx];
    const bk_rec_t *rec = &thr->io.recs[idx];
    rd_kafka_headers_t *orig = NULL, *hdrs;
    char num[32];
    rd_kafka_resp_err_t err;

    hdrs = rd_kafka_message_headers(m, &orig) == 0 ? rd_kafka_headers_copy(orig)
                                                  : rd_kafka_headers_new(4);
    rd_kafka_header_add(hdrs, "beck.error", -1, msg, -1);
    rd_kafka_header_add(hdrs, "beck.topic", -1, thr->plan->topics[rec->topic].name, -1);
    snprintf(num, sizeof(num), "%d", (int)rec->partition);
    rd_kafka_header_add(hdrs, "beck.partition", -1, num, -1);
    snprintf(num, sizeof(num), "%lld", (long long)rec->offset);
    rd_kafka_header_add(hdrs, "beck.offset", -1, num, -1);
    for (;;) {
        err = rd_kafka_producev(thr->producer, RD_KAFKA_V_RKT(thr->dlq_rkt),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
                                RD_KAFKA_V_TIMESTAMP(rec->timestamp > 0 ? rec->timestamp : 0),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            break;
        }
        rd_kafka_poll(thr->producer, 5);
    }
    if (err) {
        rd_kafka_headers_destroy(hdrs);
        bk_log_error("cannot write to the dead-letter topic %s: %s",
                     rd_kafka_topic_name(thr->dlq_rkt), rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* A record raised in process(): apply on_error. Returns -1 to stop. */
static int handle_error(bk_thread_t *thr, int idx, const char *msg)
{
    const bk_rec_t *rec = &thr->io.recs[idx];
    const bk_task_id_t *task = &thr->tasks[rec->task];
    const char *topic = thr->plan->topics[rec->topic].name;

    switch (thr->policy) {
    case POLICY_SKIP:
        thr->stats.skipped++;
        bk_log_warn("task %d_%d: skipped record %s/%d/%lld: %s", task->sub, task->partition, topic,
                    (int)rec->partition, (long long)rec->offset, msg);
        return 0;
    case POLICY_DLQ:
        if (dead_letter(thr, idx, msg) != 0) {
            break;
        }
        thr->stats.dlq++;
        bk_log_warn("task %d_%d: record %s/%d/%lld sent to %s: %s", task->sub, task->partition,
                    topic, (int)rec->partition, (long long)rec->offset,
                    rd_kafka_topic_name(thr->dlq_rkt), msg);
        return 0;
    case POLICY_FAIL:
        break;
    }
    bk_log_error("task %d_%d: process failed on record %s/%d/%lld: %s (on_error=fail: stopping; "
                 "offsets are committed up to the record before)",
                 task->sub, task->partition, topic, (int)rec->partition, (long long)rec->offset,
                 msg);
    return -1;
}

/* Runs Lua over the batch; returns -1 when the thread must stop. */
static int process_batch(bk_thread_t *thr, int n)
{
    lua_State *L = thr->L;
    int start = 0;

    thr->io.count = n;
    while (start < n) {
        const char *msg;
        char err[1024];
        int cur;
        lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref_run);
        lua_pushinteger(L, start);
        if (lua_pcall(L, 1, 0, 0) == 0) {
            mark_done(thr, start, n);
            return 0;
        }
        msg = lua_tostring(L, -1);
        snprintf(err, sizeof(err), "%s", msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
        cur = thr->io.cur;
        if (cur < start || cur >= n) {
            bk_log_error("%s: Lua failed outside any record: %s", thr->name, err);
            return -1;
        }
        mark_done(thr, start, cur);
        if (handle_error(thr, cur, err) != 0) {
            return -1;
        }
        mark_done(thr, cur, cur + 1);
        start = cur + 1;
    }
    return 0;
}

static int punctuate(bk_thread_t *thr, int64_t now)
{
    char err[1024];
    thr->io.now_ms = now;
    thr->io.count = 0;
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref_punctuate);
    lua_pushnumber(thr->L, (lua_Number)now);
    if (bk_vm_pcall(thr->L, 1, 0, 0, err, sizeof(err)) != 0) {
        bk_log_error("%s: punctuation failed: %s", thr->name, err);
        return thr->policy == POLICY_FAIL ? -1 : 0;
    }
    return 0;
}

/* Tells the node each task's next input offset (its first input partition's). */
static void report_progress(bk_thread_t *thr)
{
    if (!thr->progress) {
        return;
    }
    for (int t = 0; t < thr->ntasks; t++) {
        const bk_plan_sub_t *sub = &thr->plan->subs[thr->tasks[t].sub];
        int tp = sub->ntopics > 0 ? thr->tp_of[sub->topics[0]][thr->tasks[t].partition] : -1;
        thr->progress(thr->progress_opaque, thr->ids[t], tp >= 0 ? thr->tp_next[tp] : -1);
    }
}

/* After an offset commit: a commit marker in each changelog of each task whose input moved,
 * so that standbys and restores apply the writes before it (store.h, Markers). */
static int write_markers(bk_thread_t *thr)
{
    for (int t = 0; t < thr->ntasks; t++) {
        const bk_plan_sub_t *sub = &thr->plan->subs[thr->tasks[t].sub];
        int64_t offs[BK_STORE_MAX_INPUTS];
        int dirty = 0, n;
        if (!thr->dbs[t]) {
            continue;
        }
        for (int j = 0; j < sub->ntopics; j++) {
            int tp = thr->tp_of[sub->topics[j]][thr->tasks[t].partition];
            dirty |= tp >= 0 && thr->tp_dirty[tp];
        }
        if (!dirty) {
            continue;
        }
        n = task_inputs(thr, t, offs);
        for (int s = 0; s < thr->plan->nstores; s++) {
            bk_store_t *st = thr->store_of[t][s];
            if (st && bk_store_logged(st) && bk_store_write_marker(st, 1, offs, n) != 0) {
                bk_log_error("%s: %s", thr->name, bk_ffi_store_error(st));
                return -1;
            }
        }
    }
    return 0;
}

/* At-least-once: offsets are committed only once everything the records
 * before them caused has been acknowledged by the brokers. */
static int commit_steps(bk_thread_t *thr)
{
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t kerr;

    char err[1024];

    /* 1. the record cache: dirty entries to the stores and their changelogs */
    if (thr->ref_flush != LUA_NOREF) {
        lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref_flush);
        if (bk_vm_pcall(thr->L, 0, 0, 1, err, sizeof(err)) != 0) {
            bk_log_error("%s: flushing the record cache failed: %s; not committing", thr->name,
                         err);
            return -1;
        }
    }
    /* 2. the producer: outputs and changelog records acknowledged */
    while (rd_kafka_outq_len(thr->producer) > 0 && !thr->dr_failed) {
        rd_kafka_flush(thr->producer, 500);
    }
    if (thr->dr_failed) {
        bk_log_error("%s: %s; not committing input offsets", thr->name, thr->dr_err);
        return -1;
    }
    /* 3. the stores' writes durable, 4. checkpoints of the changelog offsets and of the
     * input offsets that state corresponds to */
    for (int t = 0; t < thr->ntasks; t++) {
        int64_t offs[BK_STORE_MAX_INPUTS];
        int n = thr->dbs[t] ? task_inputs(thr, t, offs) : 0;
        for (int s = 0; thr->dbs[t] && s < thr->plan->nstores; s++) {
            if (thr->store_of[t][s]) {
                bk_store_set_input(thr->store_of[t][s], offs, n);
            }
        }
        if (thr->dbs[t] && (bk_db_commit(thr->dbs[t], err, sizeof(err)) != 0 ||
                            bk_db_checkpoint(thr->dbs[t], err, sizeof(err)) != 0)) {
            bk_log_error("%s: task %d_%d: %s; not committing input offsets", thr->name,
                         thr->tasks[t].sub, thr->tasks[t].partition, err);
            return -1;
        }
    }
    /* 5. input offsets */
    list = rd_kafka_topic_partition_list_new(thr->ntp ? thr->ntp : 1);
    for (int i = 0; i < thr->ntp; i++) {
        if (thr->tp_dirty[i]) {
            rd_kafka_topic_partition_list_add(list, thr->plan->topics[thr->tp_topic[i]].name,
                                              thr->tp_partition[i])
                ->offset = thr->tp_next[i];
        }
    }
    if (list->cnt > 0) {
        kerr = rd_kafka_commit(thr->consumer, list, 0);
        if (kerr) {
            /* Not fatal: the next commit carries the same offsets. */
            bk_log_warn("%s: offset commit failed: %s", thr->name, rd_kafka_err2str(kerr));
        } else if (write_markers(thr) != 0) {
            rd_kafka_topic_partition_list_destroy(list);
            return -1;
        } else {
            memset(thr->tp_dirty, 0, (size_t)thr->ntp);
            thr->stats.commits++;
            report_progress(thr);
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
    return 0;
}

static int commit(bk_thread_t *thr)
{
    if (commit_steps(thr) != 0) {
        thr->commit_failed = 1;
        return -1;
    }
    return 0;
}

/* Makes the snapshots asked for. Called right after a commit: no write is in a batch, and
 * the stores' changelog and input offsets are those of that commit. */
static void make_snapshots(bk_thread_t *thr)
{
    bk_thread_snapshot_t reqs[BK_THREAD_SNAPSHOTS];
    int n;
    char root[4096];

    pthread_mutex_lock(&thr->snap_lock);
    n = thr->nsnap_req;
    memcpy(reqs, thr->snap_req, (size_t)n * sizeof(*reqs));
    thr->nsnap_req = 0;
    thr->snap_wanted = 0;
    pthread_mutex_unlock(&thr->snap_lock);
    bk_plan_snapshot_dir(thr->plan, thr->conf, root, sizeof(root));
    for (int i = 0; i < n; i++) {
        bk_thread_snapshot_t *r = &reqs[i];
        int t = -1;
        for (int k = 0; k < thr->ntasks; k++) {
            if (thr->ids && thr->ids[k] == r->id) {
                t = k;
            }
        }
        r->ok = 0;
        if (t < 0 || !thr->dbs[t]) {
            snprintf(r->err, sizeof(r->err), "task not active on this thread, or without state");
        } else {
            bk_manifest_t m;
            char name[32], dir[4096];
            int64_t t0 = now_ms();
            snprintf(name, sizeof(name), "%d_%d", thr->tasks[t].sub, thr->tasks[t].partition);
            if (bk_snapshot_make(thr->dbs[t], name, root, &m, dir, sizeof(dir), r->err,
                                 sizeof(r->err)) == 0) {
                r->ok = 1;
                if (!realpath(dir, r->dir)) {
                    snprintf(r->dir, sizeof(r->dir), "%s", dir);
                }
                bk_log_info("task %s: snapshot %s for %s: %d file(s), %llu bytes, in %lld ms",
                            name, m.id, r->req, m.nfiles, (unsigned long long)m.total_bytes,
                            (long long)(now_ms() - t0));
                bk_manifest_free(&m);
            }
        }
        if (!r->ok) {
            bk_log_warn("%s: snapshot for %s failed: %s", thr->name, r->req, r->err);
        }
        pthread_mutex_lock(&thr->snap_lock);
        if (thr->nsnap_done < BK_THREAD_SNAPSHOTS) {
            thr->snap_done[thr->nsnap_done++] = *r;
        }
        pthread_mutex_unlock(&thr->snap_lock);
    }
}

int bk_thread_request_snapshot(bk_thread_t *thr, int32_t id, const char *req)
{
    int found = 0, rc = -1;
    for (int k = 0; k < thr->ntasks; k++) {
        found |= thr->ids && thr->ids[k] == id;
    }
    if (!found) {
        return -1;
    }
    pthread_mutex_lock(&thr->snap_lock);
    if (thr->nsnap_req < BK_THREAD_SNAPSHOTS) {
        bk_thread_snapshot_t *r = &thr->snap_req[thr->nsnap_req++];
        memset(r, 0, sizeof(*r));
        r->id = id;
        snprintf(r->req, sizeof(r->req), "%s", req);
        thr->snap_wanted = 1;
        rc = 0;
    }
    pthread_mutex_unlock(&thr->snap_lock);
    return rc;
}

int bk_thread_take_snapshot(bk_thread_t *thr, bk_thread_snapshot_t *out)
{
    int got = 0;
    pthread_mutex_lock(&thr->snap_lock);
    if (thr->nsnap_done > 0) {
        *out = thr->snap_done[0];
        memmove(thr->snap_done, thr->snap_done + 1,
                (size_t)(thr->nsnap_done - 1) * sizeof(*out));
        thr->nsnap_done--;
        got = 1;
    }
    pthread_mutex_unlock(&thr->snap_lock);
    return got;
}

static int run_loop(bk_thread_t *thr)
{
    int64_t last_commit = now_ms();
    int rc = 0;

    while (!thr->flags->stop) {
        int64_t now = now_ms();
        int wait = 100, n;
        if (thr->io.next_wall_ms >= 0) {
            if (now >= thr->io.next_wall_ms && punctuate(thr, now) != 0) {
                rc = -1;
                break;
            }
            if (thr->io.next_wall_ms >= 0 && thr->io.next_wall_ms - now < wait) {
                wait = (int)(thr->io.next_wall_ms > now ? thr->io.next_wall_ms - now : 0);
            }
        }
        /* Drain what is there; block for one message only when idle. */
        n = (int)rd_kafka_consume_batch_queue(thr->queue, 0, thr->msgs, (size_t)thr->batch_size);
        if (n == 0) {
            n = (int)rd_kafka_consume_batch_queue(thr->queue, wait, thr->msgs, 1);
        }
        rd_kafka_poll(thr->producer, 0);
        if (n > 0) {
            int kept = fill_batch(thr, n);
            thr->io.now_ms = now;
            rc = process_batch(thr, kept);
            for (int i = 0; i < kept; i++) {
                rd_kafka_message_destroy(thr->msgs[i]);
            }
            thr->io.count = 0;
            if (rc == 0 && thr->punct_failed) {
                rc = -1;
            }
            if (rc != 0) {
                break;
            }
        }
        if (thr->dr_failed) {
            bk_log_error("%s: %s", thr->name, thr->dr_err);
            rc = -1;
            break;
        }
        if (now - last_commit >= thr->commit_interval_ms || thr->snap_wanted) {
            if (commit(thr) != 0) {
                rc = -1;
                break;
            }
            last_commit = now;
            if (thr->snap_wanted) {
                make_snapshots(thr);
            }
        }
    }
    return rc;
}

static void close_lua(bk_thread_t *thr)
{
    char err[1024];
    if (thr->ref_close == LUA_NOREF) {
        return;
    }
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref_close);
    if (bk_vm_pcall(thr->L, 0, 0, 1, err, sizeof(err)) != 0) {
        bk_log_error("%s: close: %s", thr->name, err);
    }
    thr->ref_close = LUA_NOREF;
}

static void *thread_main(void *arg)
{
    bk_thread_t *thr = arg;
    int rc;

    bk_log_set_thread_name(thr->name);
    build_tables(thr);
    thr->io.recs = calloc((size_t)thr->batch_size, sizeof(bk_rec_t));
    thr->msgs = calloc((size_t)thr->batch_size, sizeof(rd_kafka_message_t *));
    thr->rec_tp = calloc((size_t)thr->batch_size, sizeof(int));

    /* Stores open before the clients (changelogs are wired to them), the VM
     * before the restore (its on_restore hook), processors' init after it. */
    /* Each step's end time, for the start-up line (what a failover waits for). */
    int64_t t0 = now_ms(), t_st = 0, t_kf = 0, t_lua = 0, t_rs = 0;
    if (open_stores(thr) != 0 || (t_st = now_ms(), start_kafka(thr)) != 0 ||
        (t_kf = now_ms(), start_lua(thr)) != 0 || (t_lua = now_ms(), restore(thr)) != 0 ||
        (t_rs = now_ms(), init_lua(thr)) != 0 || assign_inputs(thr) != 0) {
        if (thr->flags->stop && !thr->flags->failed) {
            /* asked to stop while starting (a restore cut short by a new
             * assignment or a signal): nothing was processed, nothing to commit */
            bk_log_info("%s: stopped while starting (%s)", thr->name, thr->err);
            thr->rc = 0;
            thr->commit_failed = 1; /* no commit: the restore did not finish */
        } else {
            bk_log_error("%s: cannot start: %s", thr->name, thr->err);
            thr->rc = -1;
        }
        goto done;
    }
    bk_log_info("%s: running %d task(s) over %d partition(s), started in %lld ms (stores %lld, "
                "clients %lld, Lua %lld, restore %lld, init %lld)",
                thr->name, thr->ntasks, thr->ntp, (long long)(now_ms() - t0),
                (long long)(t_st - t0), (long long)(t_kf - t_st), (long long)(t_lua - t_kf),
                (long long)(t_rs - t_lua), (long long)(now_ms() - t_rs));
    rc = run_loop(thr);
    /* Processors may forward from close(); what they send is flushed and
     * committed with the rest, unless committing is what failed. */
    close_lua(thr);
    if (!thr->commit_failed && commit(thr) != 0) {
        rc = -1;
    } else if (!thr->commit_failed) {
        for (int i = 0; i < thr->ntp; i++) {
            if (thr->tp_first[i] >= 0) {
                const bk_task_id_t *task =
                    &thr->tasks[thr->task_of[thr->tp_topic[i]][thr->tp_partition[i]]];
                bk_log_info("task %d_%d epoch %llu: last record %s [%d] offset %lld, committed",
                            task->sub, task->partition, (unsigned long long)thr->epoch,
                            thr->plan->topics[thr->tp_topic[i]].name, thr->tp_partition[i],
                            (long long)thr->tp_next[i] - 1);
            }
        }
        bk_log_info("%s: final commit: outputs flushed, stores synced, offsets of %d "
                    "partition(s) committed",
                    thr->name, thr->ntp);
        thr->clean = rc == 0;
    }
    thr->rc = rc;

done:
    close_lua(thr);
    if (thr->rc != 0) {
        thr->flags->failed = 1;
        thr->flags->stop = 1;
    }
    bk_log_info("%s: stopped: %llu in, %llu out, %llu skipped, %llu dead-lettered", thr->name,
                (unsigned long long)thr->stats.in, (unsigned long long)thr->stats.out,
                (unsigned long long)thr->stats.skipped, (unsigned long long)thr->stats.dlq);
    thr->done = 1;
    return NULL;
}

void bk_thread_set_pool(bk_thread_t *thr, struct bk_taskdb_pool_s *pool)
{
    thr->pool = pool;
}

void bk_thread_set_cluster(bk_thread_t *thr, uint64_t epoch, const int32_t *ids,
                           bk_thread_progress_cb cb, void *opaque)
{
    thr->epoch = epoch;
    free(thr->ids);
    thr->ids = calloc((size_t)thr->ntasks + 1, sizeof(int32_t));
    if (ids && thr->ntasks > 0) {
        memcpy(thr->ids, ids, (size_t)thr->ntasks * sizeof(int32_t));
    }
    thr->progress = cb;
    thr->progress_opaque = opaque;
}

int bk_thread_start(bk_thread_t *thr)
{
    if (pthread_create(&thr->tid, NULL, thread_main, thr) != 0) {
        return -1;
    }
    thr->started = 1;
    return 0;
}

int bk_thread_done(const bk_thread_t *thr)
{
    return thr->done;
}

int bk_thread_join(bk_thread_t *thr, bk_thread_stats_t *stats)
{
    if (thr->started) {
        pthread_join(thr->tid, NULL);
        thr->started = 0;
    }
    if (stats) {
        *stats = thr->stats;
    }
    return thr->rc;
}

void bk_thread_destroy(bk_thread_t *thr)
{
    if (!thr) {
        return;
    }
    /* Lua first (its iterators point into the DBs), the DBs last (the
     * producer's delivery reports point into the stores). */
    bk_vm_destroy(thr->L);
    if (thr->out_rkts) {
        for (int t = 0; t < thr->plan->ntopics; t++) {
            if (thr->out_rkts[t]) {
                rd_kafka_topic_destroy(thr->out_rkts[t]);
            }
        }
    }
    if (thr->dlq_rkt) {
        rd_kafka_topic_destroy(thr->dlq_rkt);
    }
    if (thr->queue) {
        rd_kafka_queue_destroy(thr->queue);
    }
    if (thr->consumer) {
        rd_kafka_consumer_close(thr->consumer);
        rd_kafka_destroy(thr->consumer);
    }
    if (thr->changelog_rkts) {
        for (int s = 0; s < thr->plan->nstores; s++) {
            if (thr->changelog_rkts[s]) {
                rd_kafka_topic_destroy(thr->changelog_rkts[s]);
            }
        }
    }
    if (thr->producer) {
        rd_kafka_flush(thr->producer, 5000);
        rd_kafka_destroy(thr->producer);
        thr->producer = NULL;
    }
    for (int t = 0; thr->dbs && t < thr->ntasks; t++) {
        /* open for the next crew only after a clean final commit */
        bk_taskdb_release(thr->pool, thr->tasks[t], thr->dbs[t], thr->rc == 0 && thr->clean);
        if (thr->store_of[t]) {
            free(thr->store_of[t]);
        }
    }
    free(thr->dbs);
    free(thr->store_of);
    free(thr->changelog_rkts);
    if (thr->task_of) {
        for (int t = 0; t < thr->plan->ntopics; t++) {
            free(thr->task_of[t]);
            free(thr->tp_of[t]);
        }
    }
    free(thr->task_of);
    free(thr->tp_of);
    free(thr->out_rkts);
    free(thr->tp_topic);
    free(thr->tp_partition);
    free(thr->tp_next);
    free(thr->tp_first);
    free(thr->ids);
    pthread_mutex_destroy(&thr->snap_lock);
    free(thr->tp_dirty);
    free(thr->io.recs);
    free(thr->msgs);
    free(thr->rec_tp);
    free(thr->tasks);
    free(thr);
}
