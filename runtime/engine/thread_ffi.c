/* thread_ffi.c - the functions Lua calls on a stream thread through FFI (base/ffi.h): send
 * to a sink, read a record's headers, report an error, find a task's store, log. Each runs
 * on the calling stream thread only. */
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

int64_t bk_ffi_clock_ms(void)
{
    return bk_clock_wall_ms();
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
    if (rec < 0 || rec >= thr->io.count) {
        return NULL;
    }
    return thr->batch.rec_hdrs[rec]; /* fill_batch's */
}

int bk_ffi_thread_send(bk_thread_t *thr, int32_t topic, const char *key, size_t key_len,
                       const char *value, size_t value_len, int64_t timestamp, int32_t rec)
{
    rd_kafka_topic_t *rkt;
    rd_kafka_headers_t *hdrs;
    rd_kafka_resp_err_t err;

    if (topic < 0 || topic >= thr->plan->ntopics || !(rkt = thr->kafka.out_rkts[topic])) {
        snprintf(thr->err, sizeof(thr->err), "no sink topic with index %d", (int)topic);
        return BK_FFI_ERR;
    }
    /* Output records carry the headers of the input record in hand, as in
     * Kafka Streams (none from a punctuation). */
    hdrs = rec >= 0 ? rec_headers(thr, rec) : NULL;
    for (;;) {
        rd_kafka_headers_t *copy = hdrs ? rd_kafka_headers_copy(hdrs) : NULL;
        err = rd_kafka_producev(
            thr->kafka.producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_len),
            RD_KAFKA_V_VALUE((void *)value, value_len),
            RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0), RD_KAFKA_V_HEADERS(copy),
            RD_KAFKA_V_END);
        if (!err) {
            thr->stats.out++;
            if (thr->live && rec >= 0) {
                bk_livestats_add(&thr->live->task[thr->io.recs[rec].task].out, 1);
            }
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
        rd_kafka_poll(thr->kafka.producer, 5);
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
    if (bk_thread_producer_broken(thr)) {
        return; /* the producer's failure, not the punctuation's: the interval is redone */
    }
    bk_log_error("%s: stream-time punctuation failed: %.*s%s", thr->name, (int)len, msg,
                 thr->opt.policy == POLICY_FAIL ? " (on_error=fail: stopping)" : "");
    if (thr->opt.policy == POLICY_FAIL) {
        thr->fail.punct = 1;
    }
}

void bk_ffi_thread_late(bk_thread_t *thr, int32_t task, int32_t store, int64_t n)
{
    const bk_livestats_t *live = thr->live;
    if (live && task >= 0 && task < live->ntasks && store >= 0 && store < live->nstores && n > 0) {
        bk_livestats_add(&live->late[(size_t)task * (size_t)live->nstores + (size_t)store],
                         (uint64_t)n);
    }
}

bk_store_t *bk_ffi_thread_store(bk_thread_t *thr, int32_t task, int32_t store)
{
    if (task < 0 || task >= thr->cap || !thr->store_of[task] || store < 0 ||
        store >= thr->plan->nstores) {
        return NULL;
    }
    return thr->store_of[task][store];
}
