/* thread.c - the stream thread: its life cycle, the record path (consume a batch, run Lua
 * over it, apply on_error) and its loop (punctuations, commits). Start-up is in
 * thread_setup.c, commit in thread_commit.c, the FFI in thread_ffi.c. */
#include "engine/thread.h"

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
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

/* spec/01-unit/03-ffi_spec.lua checks the same layout from Lua's side. */
_Static_assert(sizeof(bk_rec_t) == 56, "bk_rec_t layout changed: update the FFI spec");

/* -- Set-up ------------------------------------------------------------- */

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
    thr->policy = strcmp(pol, "skip") == 0  ? POLICY_SKIP
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
    bk_log_info("task %s epoch %llu: first record %s [%d] offset %lld", BK_TASK_NAME(*task),
                (unsigned long long)thr->epoch, thr->plan->topics[thr->tp_topic[tp]].name,
                thr->tp_partition[tp], (long long)offset);
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
        err = rd_kafka_producev(
            thr->producer, RD_KAFKA_V_RKT(thr->dlq_rkt), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
            RD_KAFKA_V_TIMESTAMP(rec->timestamp > 0 ? rec->timestamp : 0), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_END);
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
        bk_log_warn("task %s: skipped record %s/%d/%lld: %s", BK_TASK_NAME(*task), topic,
                    (int)rec->partition, (long long)rec->offset, msg);
        return 0;
    case POLICY_DLQ:
        if (dead_letter(thr, idx, msg) != 0) {
            break;
        }
        thr->stats.dlq++;
        bk_log_warn("task %s: record %s/%d/%lld sent to %s: %s", BK_TASK_NAME(*task), topic,
                    (int)rec->partition, (long long)rec->offset, rd_kafka_topic_name(thr->dlq_rkt),
                    msg);
        return 0;
    case POLICY_FAIL:
        break;
    }
    bk_log_error("task %s: process failed on record %s/%d/%lld: %s (on_error=fail: stopping; "
                 "offsets are committed up to the record before)",
                 BK_TASK_NAME(*task), topic, (int)rec->partition, (long long)rec->offset, msg);
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

static int run_loop(bk_thread_t *thr)
{
    int64_t last_commit = bk_clock_wall_ms();
    int rc = 0;

    while (!thr->flags->stop) {
        int64_t now = bk_clock_wall_ms();
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
            if (bk_thread_commit(thr) != 0) {
                rc = -1;
                break;
            }
            last_commit = now;
            if (thr->snap_wanted) {
                bk_thread_make_snapshots(thr);
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
    bk_thread_build_tables(thr);
    thr->io.recs = calloc((size_t)thr->batch_size, sizeof(bk_rec_t));
    thr->msgs = calloc((size_t)thr->batch_size, sizeof(rd_kafka_message_t *));
    thr->rec_tp = calloc((size_t)thr->batch_size, sizeof(int));

    /* Stores open before the clients (changelogs are wired to them), the VM
     * before the restore (its on_restore hook), processors' init after it. */
    /* Each step's end time, for the start-up line (what a failover waits for). */
    int64_t t0 = bk_clock_wall_ms(), t_st = 0, t_kf = 0, t_lua = 0, t_rs = 0;
    if (bk_thread_open_stores(thr) != 0 ||
        (t_st = bk_clock_wall_ms(), bk_thread_start_kafka(thr)) != 0 ||
        (t_kf = bk_clock_wall_ms(), bk_thread_start_lua(thr)) != 0 ||
        (t_lua = bk_clock_wall_ms(), bk_thread_restore(thr)) != 0 ||
        (t_rs = bk_clock_wall_ms(), bk_thread_init_lua(thr)) != 0 ||
        bk_thread_assign_inputs(thr) != 0) {
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
                thr->name, thr->ntasks, thr->ntp, (long long)(bk_clock_wall_ms() - t0),
                (long long)(t_st - t0), (long long)(t_kf - t_st), (long long)(t_lua - t_kf),
                (long long)(t_rs - t_lua), (long long)(bk_clock_wall_ms() - t_rs));
    rc = run_loop(thr);
    /* Processors may forward from close(); what they send is flushed and
     * committed with the rest, unless committing is what failed. */
    close_lua(thr);
    if (!thr->commit_failed && bk_thread_commit(thr) != 0) {
        rc = -1;
    } else if (!thr->commit_failed) {
        for (int i = 0; i < thr->ntp; i++) {
            if (thr->tp_first[i] >= 0) {
                const bk_task_id_t *task =
                    &thr->tasks[thr->task_of[thr->tp_topic[i]][thr->tp_partition[i]]];
                bk_log_info("task %s epoch %llu: last record %s [%d] offset %lld, committed",
                            BK_TASK_NAME(*task), (unsigned long long)thr->epoch,
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
