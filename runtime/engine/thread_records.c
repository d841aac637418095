/* thread_records.c - a stream thread's record path: a batch consumed from its queue (in
 * input order, or merged by timestamp for a task of several input partitions), passed on
 * by a passthrough or given to Lua, and what on_error says of a record that raised (skip,
 * dead-letter, park); stream-time punctuations. thread.c's loop calls it. Stream thread
 * only; the hottest code of beck (docs/performance.md). */
#include "engine/thread.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/ffi.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/brokerwatch.h"
#include "engine/dedup.h"
#include "engine/kafka.h"
#include "engine/restore.h"
#include "engine/skips.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/taskdb.h"
#include "engine/thread_internal.h"
#include "engine/vm.h"

static int topic_of(bk_thread_t *thr, const rd_kafka_topic_t *rkt)
{
    const char *name;
    if (rkt == thr->tp.last_rkt) {
        return thr->tp.last_topic;
    }
    name = rd_kafka_topic_name(rkt);
    thr->tp.last_rkt = rkt;
    thr->tp.last_topic = bk_plan_topic_index(thr->plan, name);
    return thr->tp.last_topic;
}

static void first_record(bk_thread_t *thr, int tp, int64_t offset);

/* A later generation's task under at-least-once (thr->slot.dedup): whether the record, forwarded
 * by the passthrough, is one its state applied already (a passthrough that died before its
 * commit forwarded it again): it is then done with, unprocessed. Its input position is
 * taken off the headers the processors and the outputs see. */
static int is_duplicate(bk_thread_t *thr, int slot, rd_kafka_message_t *m, int tp)
{
    rd_kafka_headers_t *h = NULL;
    int k;
    int32_t p;
    int64_t off;
    if (!bk_dedup_position(m, &k, &p, &off)) {
        return 0; /* a barrier, or written before positions were */
    }
    if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_header_remove(h, BK_DEDUP_HEADER);
    }
    if (!bk_dedup_seen(thr->slot.dedup[slot], k, p, off)) {
        return 0;
    }
    if (thr->tp.first[tp] < 0) {
        first_record(thr, tp, m->offset);
    }
    thr->tp.next[tp] = m->offset + 1;
    thr->tp.dirty[tp] = 1;
    if (thr->slot.deduped[slot]++ == 0) {
        bk_log_info("task %s: %s [%d] offset %lld: input %d/%d/%lld, forwarded again by the "
                    "passthrough, is in its state already: skipped (so are any later ones, "
                    "counted at its release)",
                    BK_TASK_NAME(thr->tasks[slot]), thr->plan->topics[thr->tp.topic[tp]].name,
                    (int)m->partition, (long long)m->offset, k, (int)p, (long long)off);
    }
    return 1;
}

/* A passthrough task's record (plan.h): forwarded as it is (key, value, timestamp, headers)
 * to the partition of its generation's topic that owns its key's group, and done with. A
 * record without a key goes to partition 0 (as beck.testing's driver sends it to task 0).
 * 0, or -1 with thr->err set. */
static int pass_on(bk_thread_t *thr, const rd_kafka_message_t *m, int t, int tp)
{
    const bk_plan_t *plan = thr->plan;
    int to = bk_thread_pass_target(thr, t);
    int32_t part = m->key ? bk_hash_group_owner(bk_hash_key_group(m->key, m->key_len),
                                                plan->topics[to].partitions)
                          : 0;
    rd_kafka_headers_t *hdrs = NULL;
    rd_kafka_resp_err_t err;
    int slot = thr->tp.task_of[t][m->partition];
    char src[BK_DEDUP_HEADER_BYTES];

    if (bk_plan_retired(plan, plan->topics[to].sub)) {
        /* Nothing is written to a retired generation's topic: nobody reads it again, so the
         * record would be lost once its input offset commits (issue 38). The thread stops
         * before that commit; the task starts again elsewhere from its last one. */
        snprintf(thr->err, sizeof(thr->err),
                 "task %s: record %s/%d/%lld would go to %s, of a retired generation: "
                 "stopping before its offset commits",
                 BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name, (int)m->partition,
                 (long long)m->offset, plan->topics[to].name);
        return -1;
    }
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        hdrs = NULL;
    }
    if (!thr->eos) {
        /* at-least-once: a redo forwards these records again, and the generation's tasks
         * know them by their input position (engine/dedup.h); exactly-once's readers never
         * see the first copies */
        bk_dedup_encode(src, bk_plan_passthrough_input(plan, t), m->partition, m->offset);
    }
    for (;;) {
        rd_kafka_headers_t *copy = hdrs ? rd_kafka_headers_copy(hdrs) : NULL;
        if (!thr->eos && (copy || (copy = rd_kafka_headers_new(1)))) {
            rd_kafka_header_add(copy, BK_DEDUP_HEADER, -1, src, sizeof(src));
        }
        err = rd_kafka_producev(
            thr->kafka.producer, RD_KAFKA_V_RKT(thr->kafka.out_rkts[to]),
            RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
            RD_KAFKA_V_TIMESTAMP(
                rd_kafka_message_timestamp(m, NULL) > 0 ? rd_kafka_message_timestamp(m, NULL) : 0),
            RD_KAFKA_V_HEADERS(copy), RD_KAFKA_V_END);
        if (!err) {
            break;
        }
        if (copy) {
            rd_kafka_headers_destroy(copy); /* not taken over on failure */
        }
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            bk_thread_producer_broken(thr); /* then redone, not failed (run_loop) */
            snprintf(thr->err, sizeof(thr->err),
                     "task %s: cannot forward record %s/%d/%lld to %s [%d]: %s",
                     BK_TASK_NAME(thr->tasks[slot]), plan->topics[t].name, (int)m->partition,
                     (long long)m->offset, plan->topics[to].name, (int)part, rd_kafka_err2str(err));
            return -1;
        }
        rd_kafka_poll(thr->kafka.producer, 5);
    }
    if (thr->tp.first[tp] < 0) {
        first_record(thr, tp, m->offset);
    }
    thr->tp.next[tp] = m->offset + 1;
    thr->tp.dirty[tp] = 1;
    thr->stats.in++;
    thr->stats.out++;
    if (thr->live) {
        bk_livestats_add(&thr->live->task[slot].in, 1);
        bk_livestats_add(&thr->live->task[slot].out, 1);
    }
    return 0;
}

/* fill_batch giving up: the messages kept so far ([0, kept)) and those not looked at yet
 * ([from, n)) destroyed. Returns -1. */
static int drop_batch(bk_thread_t *thr, int kept, int from, int n)
{
    for (int k = 0; k < kept; k++) {
        rd_kafka_message_destroy(thr->batch.msgs[k]);
    }
    for (int k = from; k < n; k++) {
        rd_kafka_message_destroy(thr->batch.msgs[k]);
    }
    return -1;
}

/* Does task `slot` read several input partitions, to be merged by timestamp (order.h)? A
 * passthrough's are forwarded as they come: their order is kept per partition downstream. */
static int ordered(const bk_thread_t *thr, int slot)
{
    return thr->tp.nslot[slot] > 1 && !thr->plan->subs[thr->tasks[slot].sub].passthrough;
}

/* Message m of toppar tp (topic t) of a live task: becomes record *j of the batch (*j moves
 * on), or is done with here (a barrier, a duplicate, a passthrough's forward, a record of a
 * drained generation 0). 0, or -1 (m destroyed, thr->err set) when it cannot be forwarded. */
static int take(bk_thread_t *thr, rd_kafka_message_t *m, int t, int tp, int *j)
{
    int slot;
    bk_rec_t *rec;
    if (!m->key && !m->payload && thr->plan->topics[t].keygroups) {
        /* a barrier of a move, maybe: counted, its offset done, not processed */
        int b = bk_thread_moves_barrier(thr, m, t);
        if (b != 0) {
            thr->tp.next[tp] = m->offset + 1;
            thr->tp.dirty[tp] = 1;
            rd_kafka_message_destroy(m);
            return b < 0 ? -1 : 0;
        }
    }
    slot = thr->tp.task_of[t][m->partition];
    if (thr->moves.keycheck[slot] && m->key && m->key_len > 0 &&
        bk_hash_partition(m->key, m->key_len, thr->plan->subs[thr->tasks[slot].sub].partitions) !=
            m->partition) {
        bk_thread_moves_foreign(thr, slot, t, m);
    }
    if (bk_tasklife_state(&thr->life, slot) >= BK_LIFE_HELD &&
        thr->plan->subs[thr->tasks[slot].sub].generation == 0) {
        /* generation 0 of a moved subtopology, past the offsets it drains at: the
         * passthrough reads on from its committed offset (thread_moves.c) */
        rd_kafka_message_destroy(m);
        return 0;
    }
    if (thr->slot.dedup[slot] && is_duplicate(thr, slot, m, tp)) {
        rd_kafka_message_destroy(m);
        return 0;
    }
    if (thr->plan->subs[thr->tasks[slot].sub].passthrough) {
        int rc = pass_on(thr, m, t, tp);
        rd_kafka_message_destroy(m);
        return rc;
    }
    rec = &thr->io.recs[*j];
    rec->key = m->key;
    rec->key_len = (int32_t)m->key_len;
    rec->value = m->payload;
    rec->value_len = (int32_t)m->len;
    rec->task = slot;
    rec->topic = t;
    rec->partition = m->partition;
    rec->offset = m->offset;
    rec->timestamp = rd_kafka_message_timestamp(m, NULL);
    if (rec->timestamp > thr->slot.time[slot]) {
        thr->slot.time[slot] = rec->timestamp;
    }
    thr->batch.rec_tp[*j] = tp;
    if (rd_kafka_message_headers(m, &thr->batch.rec_hdrs[*j]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        thr->batch.rec_hdrs[*j] = NULL;
    }
    thr->batch.msgs[(*j)++] = m;
    return 0;
}

/* The held records of tasks with several input partitions, by timestamp, into the batch
 * after its first j, as far as it has room and no task must wait (order.h). The new count,
 * or -1 (the batch destroyed, thr->err set). */
static int take_ordered(bk_thread_t *thr, int j)
{
    int64_t now = bk_clock_mono_ms();
    for (int k = 0; k < thr->ntasks && j < thr->opt.batch_size; k++) {
        int s = thr->owned[k], tp;
        rd_kafka_message_t *m;
        if (!ordered(thr, s)) {
            continue;
        }
        while (
            j < thr->opt.batch_size && bk_tasklife_running(&thr->life, s) &&
            (m = bk_order_next(&thr->batch.order, thr->tp.slot[s], thr->tp.nslot[s], now, &tp))) {
            if (take(thr, m, thr->tp.topic[tp], tp, &j) != 0) {
                return drop_batch(thr, j, 0, 0);
            }
        }
    }
    return j;
}

/* Turns fetched messages into bk_rec_t, dropping errors and strays; a passthrough task's
 * records are forwarded here and not kept; a task's with several input partitions are held
 * and come in by timestamp. -1 (every message destroyed, thr->err set) when one cannot be
 * forwarded. */
int bk_thread_fill_batch(bk_thread_t *thr, int n)
{
    int j = 0;
    for (int i = 0; i < n; i++) {
        rd_kafka_message_t *m = thr->batch.msgs[i];
        int t, tp;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                bk_log_warn("consumer: %s [%d]: %s", m->rkt ? rd_kafka_topic_name(m->rkt) : "-",
                            (int)m->partition, rd_kafka_message_errstr(m));
            } else if (thr->batch.merges && m->rkt && (t = topic_of(thr, m->rkt)) >= 0 &&
                       m->partition < thr->tp.parts[t] && (tp = thr->tp.of[t][m->partition]) >= 0) {
                bk_order_eof(&thr->batch.order,
                             tp); /* at its end: a task waiting for it may go on */
            }
            rd_kafka_message_destroy(m);
            continue;
        }
        t = topic_of(thr, m->rkt);
        if (t < 0 || m->partition >= thr->tp.parts[t] || (tp = thr->tp.of[t][m->partition]) < 0) {
            rd_kafka_message_destroy(m); /* not ours: cannot happen with assign() */
            continue;
        }
        if (thr->batch.merges && ordered(thr, thr->tp.task_of[t][m->partition])) {
            if (bk_order_push(&thr->batch.order, tp, m) != 0) {
                rd_kafka_message_destroy(m);
                snprintf(thr->err, sizeof(thr->err), "out of memory holding records");
                return drop_batch(thr, j, i + 1, n);
            }
            continue;
        }
        if (take(thr, m, t, tp, &j) != 0) {
            return drop_batch(thr, j, i + 1, n);
        }
    }
    return thr->batch.order.held > 0 ? take_ordered(thr, j) : j;
}

/* The "first record" line of an input partition: with the "last record" line of the final
 * commit, it bounds when this node processed the task (docs/cluster.md). */
static void first_record(bk_thread_t *thr, int tp, int64_t offset)
{
    int slot = thr->tp.task_of[thr->tp.topic[tp]][thr->tp.partition[tp]];
    thr->tp.first[tp] = offset;
    bk_log_info("task %s epoch %llu: first record %s [%d] offset %lld",
                BK_TASK_NAME(thr->tasks[slot]), (unsigned long long)thr->slot.epoch[slot],
                thr->plan->topics[thr->tp.topic[tp]].name, thr->tp.partition[tp],
                (long long)offset);
    bk_events_emit("first_record",
                   "\"task\":\"%s\",\"epoch\":%llu,\"topic\":\"%s\",\"partition\":%d,"
                   "\"offset\":%lld",
                   BK_TASK_NAME(thr->tasks[slot]), (unsigned long long)thr->slot.epoch[slot],
                   thr->plan->topics[thr->tp.topic[tp]].name, thr->tp.partition[tp],
                   (long long)offset);
}

static void mark_done(bk_thread_t *thr, int from, int to)
{
    for (int i = from; i < to; i++) {
        int tp = thr->batch.rec_tp[i];
        if (thr->tp.first[tp] < 0) {
            first_record(thr, tp, thr->io.recs[i].offset);
        }
        thr->tp.next[tp] = thr->io.recs[i].offset + 1;
        thr->tp.dirty[tp] = 1;
        if (thr->live) {
            bk_livestats_add(&thr->live->task[thr->io.recs[i].task].in, 1);
        }
    }
    if (thr->live && to > from && thr->io.recs[to - 1].timestamp > 0) {
        const bk_rec_t *last = &thr->io.recs[to - 1];
        bk_livestats_set(&thr->live->task[last->task].e2e_ms, bk_clock_wall_ms() - last->timestamp);
    }
    thr->stats.in += (uint64_t)(to - from);
}

static int dead_letter(bk_thread_t *thr, int idx, const char *msg)
{
    rd_kafka_message_t *m = thr->batch.msgs[idx];
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
        err = rd_kafka_producev(thr->kafka.producer, RD_KAFKA_V_RKT(thr->kafka.dlq_rkt),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_KEY(m->key, m->key_len),
                                RD_KAFKA_V_VALUE(m->payload, m->len),
                                RD_KAFKA_V_TIMESTAMP(rec->timestamp > 0 ? rec->timestamp : 0),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            break;
        }
        rd_kafka_poll(thr->kafka.producer, 5);
    }
    if (err) {
        rd_kafka_headers_destroy(hdrs);
        if (bk_thread_producer_broken(thr)) {
            return 0; /* the batch is dropped and done again (run_loop) */
        }
        bk_log_error("cannot write to the dead-letter topic %s: %s",
                     rd_kafka_topic_name(thr->kafka.dlq_rkt), rd_kafka_err2str(err));
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

    switch (thr->opt.policy) {
    case POLICY_SKIP:
        thr->stats.skipped++;
        if (thr->live) {
            bk_livestats_add(&thr->live->task[rec->task].skipped, 1);
        }
        bk_log_warn("task %s: skipped record %s/%d/%lld: %s", BK_TASK_NAME(*task), topic,
                    (int)rec->partition, (long long)rec->offset, msg);
        return 0;
    case POLICY_DLQ:
        if (dead_letter(thr, idx, msg) != 0) {
            break;
        }
        thr->stats.dlq++;
        if (thr->live) {
            bk_livestats_add(&thr->live->task[rec->task].dlq, 1);
        }
        bk_log_warn("task %s: record %s/%d/%lld sent to %s: %s", BK_TASK_NAME(*task), topic,
                    (int)rec->partition, (long long)rec->offset,
                    rd_kafka_topic_name(thr->kafka.dlq_rkt), msg);
        return 0;
    case POLICY_FAIL:
        break;
    }
    {
        char note[512];
        if (bk_skips_listed(thr->flags->skips, topic, rec->partition, rec->offset, SKIPS_AGE_MS,
                            note, sizeof(note))) {
            thr->stats.skipped++;
            if (thr->live) {
                bk_livestats_add(&thr->live->task[rec->task].skipped, 1);
            }
            bk_log_warn("task %s: skipped record %s/%d/%lld, listed by beck skip (%s): %s",
                        BK_TASK_NAME(*task), topic, (int)rec->partition, (long long)rec->offset,
                        note, msg);
            {
                char t[600], e[1100];
                bk_events_emit("skipped",
                               "\"task\":\"%s\",\"topic\":%s,\"partition\":%d,\"offset\":%lld,"
                               "\"error\":%s",
                               BK_TASK_NAME(*task), bk_events_str(t, sizeof(t), topic),
                               (int)rec->partition, (long long)rec->offset,
                               bk_events_str(e, sizeof(e), msg));
            }
            return 0;
        }
    }
    {
        char t[600], m[2200];
        bk_events_emit("parked",
                       "\"task\":\"%s\",\"topic\":%s,\"partition\":%d,\"offset\":%lld,"
                       "\"error\":%s",
                       BK_TASK_NAME(*task), bk_events_str(t, sizeof(t), topic), (int)rec->partition,
                       (long long)rec->offset, bk_events_str(m, sizeof(m), msg));
    }
    bk_log_error("task %s: process failed on record %s/%d/%lld: %s. on_error=fail: this task "
                 "stops at its last commit, the others go on. To go past the record: beck skip "
                 "-b %s --app %s --topic %s --partition %d --offset %lld [--to-dlq] (the task "
                 "goes on within %d s); or fix the topology and restart the node",
                 BK_TASK_NAME(*task), topic, (int)rec->partition, (long long)rec->offset, msg,
                 bk_conf_str(thr->conf, BK_CONF_BROKERS), thr->plan->id, topic, (int)rec->partition,
                 (long long)rec->offset, PARKED_CHECK_MS / 1000);
    if (!thr->park.task[rec->task].on) {
        thr->park.task[rec->task] =
            (bk_thread_parked_t){1, rec->task, rec->topic, rec->partition, rec->offset};
        thr->park.n++;
    }
    thr->park.pending = 1;
    return -2;
}

/* The batch's records of task `slot` from index `from` on leave it, their messages destroyed
 * (a parked task's: none of them is processed, the next commit stops before them). The new
 * count. */
static int drop_task_records(bk_thread_t *thr, int from, int n, int32_t slot)
{
    int j = from;
    for (int i = from; i < n; i++) {
        if (thr->io.recs[i].task == slot) {
            rd_kafka_message_destroy(thr->batch.msgs[i]);
            continue;
        }
        thr->batch.msgs[j] = thr->batch.msgs[i];
        thr->io.recs[j] = thr->io.recs[i];
        thr->batch.rec_tp[j] = thr->batch.rec_tp[i];
        j++;
    }
    thr->io.count = j;
    return j;
}

/* Runs Lua over the batch; returns -1 when the thread must stop, -2 when (exactly-once) a
 * record's task is to be parked now (thr->park.pending). */
int bk_thread_process_batch(bk_thread_t *thr, int n)
{
    lua_State *L = thr->L;
    int start = 0, rc;

    thr->io.count = n;
    while (start < n) {
        const char *msg;
        char err[1024];
        int cur;
        lua_rawgeti(L, LUA_REGISTRYINDEX, thr->ref.run);
        lua_pushinteger(L, start);
        if (lua_pcall(L, 1, 0, 0) == 0) {
            mark_done(thr, start, n);
            return 0;
        }
        msg = lua_tostring(L, -1);
        snprintf(err, sizeof(err), "%s", msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
        if (bk_thread_producer_broken(thr)) {
            return 0; /* not the record's fault: the loop drops the interval and redoes it */
        }
        cur = thr->io.cur;
        if (cur < start || cur >= n) {
            bk_log_error("%s: Lua failed outside any record: %s", thr->name, err);
            return -1;
        }
        mark_done(thr, start, cur);
        rc = handle_error(thr, cur, err);
        if (rc == -2 && !thr->eos) {
            /* at-least-once: the others' records go on; that task's wait for its parking
             * (run_loop), which commits up to the record before this one */
            n = drop_task_records(thr, cur, n, thr->io.recs[cur].task);
            start = cur;
            continue;
        }
        if (rc != 0) {
            return rc; /* exactly-once: parked by a redo (run_loop), the interval aborted */
        }
        mark_done(thr, cur, cur + 1);
        start = cur + 1;
    }
    return 0;
}

int bk_thread_punctuate(bk_thread_t *thr, int64_t now)
{
    char err[1024];
    thr->io.now_ms = now;
    thr->io.count = 0;
    lua_rawgeti(thr->L, LUA_REGISTRYINDEX, thr->ref.punctuate);
    lua_pushnumber(thr->L, (lua_Number)now);
    if (bk_vm_pcall(thr->L, 1, 0, 0, err, sizeof(err)) != 0) {
        if (bk_thread_producer_broken(thr)) {
            return 0; /* the producer's failure: the interval is redone (run_loop) */
        }
        bk_log_error("%s: punctuation failed: %s", thr->name, err);
        return thr->opt.policy == POLICY_FAIL ? -1 : 0;
    }
    return 0;
}
