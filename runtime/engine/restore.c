/* restore.c - changelog replay into the stores. */
#include "engine/restore.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/keys.h"
#include "base/log.h"
#include "engine/changelog.h"
#include "engine/fetchkick.h"
#include "engine/kafka.h"

#define STALL_MS 120000

typedef struct {
    bk_restore_item_t *item;
    int64_t start, end; /* [start, end) to apply */
    int done;
} work_t;

static work_t *find(work_t *w, int n, const char *topic, int32_t partition)
{
    for (int i = 0; i < n; i++) {
        if (w[i].item->partition == partition && strcmp(w[i].item->topic, topic) == 0) {
            return &w[i];
        }
    }
    return NULL;
}

static void report(bk_restore_progress_cb cb, void *opaque, bk_restore_progress_t *p, double t0,
                   int done)
{
    p->elapsed_s = bk_clock_mono_s() - t0;
    p->rate = p->elapsed_s > 0 ? (double)p->records / p->elapsed_s : 0;
    p->eta_s = p->rate > 0 ? (double)(p->total - p->records) / p->rate : 0;
    p->done = done;
    bk_log_info(
        "restore: %lld of %lld records (%.1f%%) into %d store(s), %.0f rec/s, %.1f s left%s",
        (long long)p->records, (long long)p->total,
        p->total ? 100.0 * (double)p->records / (double)p->total : 100.0, p->stores, p->rate,
        p->eta_s, done ? ", done" : "");
    if (done) {
        bk_events_emit("restore_done", "\"records\":%lld,\"total\":%lld,\"stores\":%d,\"ms\":%lld",
                       (long long)p->records, (long long)p->total, p->stores,
                       (long long)(p->elapsed_s * 1000));
    }
    if (cb) {
        cb(opaque, p);
    }
}

/* A changelog key the item keeps: any, without a group range; else a marker (which settles
 * what came before it) or a key of the range's groups, and never another task's dedup
 * table (a build of a later generation starts its own). */
static int in_groups(const bk_restore_item_t *item, const void *key, size_t klen)
{
    int g;
    if (item->group_hi <= item->group_lo || !key || bk_keys_is_marker(key, klen)) {
        return 1;
    }
    if (bk_keys_is_src(key, klen)) {
        return 0;
    }
    g = bk_keys_group(key, klen, bk_store_window(item->st));
    return g >= item->group_lo && g < item->group_hi;
}

int bk_restore_run(rd_kafka_t *consumer, bk_restore_item_t *items, int n, bk_restore_progress_cb cb,
                   void *opaque, atomic_int *stop, char *errstr, size_t errstr_size)
{
    work_t *w = calloc((size_t)(n ? n : 1), sizeof(*w));
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(n ? n : 1);
    rd_kafka_queue_t *q = NULL;
    rd_kafka_message_t *msgs[1000];
    bk_restore_progress_t p;
    double t0 = bk_clock_mono_s(), last_report = t0, last_progress = t0;
    int pending = 0, rc = -1;
    int64_t *los = NULL, *his = NULL;
    bk_fetchkick_t kick;

    bk_fetchkick_init(&kick);
    memset(&p, 0, sizeof(p));
    {
        const char **topics = calloc((size_t)n + 1, sizeof(*topics));
        int32_t *parts = calloc((size_t)n + 1, sizeof(*parts));
        rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__FAIL;
        for (int i = 0; topics && parts && i < n; i++) {
            topics[i] = items[i].topic;
            parts[i] = items[i].partition;
        }
        los = calloc((size_t)n + 1, sizeof(*los));
        his = calloc((size_t)n + 1, sizeof(*his));
        if (topics && parts && los && his) {
            /* a broker down or a leader moving while a task opens passes: tried again
             * for as long as a broker takes to come back (issue 38) */
            err = bk_kafka_watermarks(consumer, topics, parts, n, los, his, BK_RESTORE_OFFSETS_MS,
                                      stop);
        }
        free(topics);
        free(parts);
        if (err) {
            snprintf(errstr, errstr_size,
                     "cannot read the offsets of %d changelog partition(s): %s", n,
                     rd_kafka_err2str(err));
            if (bk_kafka_retriable(err) && !(stop && atomic_load(stop))) {
                rc = -2;
            }
            goto done;
        }
    }
    for (int i = 0; i < n; i++) {
        int64_t lo = los[i], hi = his[i], next = bk_store_changelog_next(items[i].st);
        w[i].item = &items[i];
        w[i].start = next < 0 ? lo : next;
        w[i].end = hi;
        if (next >= 0 && next < lo) {
            /* The changelog no longer holds what this replica needs: its
             * head was deleted. Replaying from lo would silently lose the
             * updates in between. A standby is rebuilt by cold bootstrap
             * instead (standby.c, bootstrap.h); an active has no peer to
             * copy from here: say so loudly. */
            bk_log_error("task %s: changelog %s [%d] starts at offset %lld but the store needs "
                         "%lld: %lld update(s) are lost to this replica",
                         items[i].task, items[i].topic, (int)items[i].partition, (long long)lo,
                         (long long)next, (long long)(lo - next));
            w[i].start = lo;
        } else if (next < 0 && lo > 0) {
            bk_log_warn("task %s: changelog %s [%d] starts at %lld, not 0: its head was deleted",
                        items[i].task, items[i].topic, (int)items[i].partition, (long long)lo);
        }
        /* One line per store: after a promotion it shows that only the standby's lag is
         * replayed, not the changelog (spec/02-integration/10-standby_spec.lua). */
        bk_log_info("restore: task %s store %s: replaying %lld record(s) of %s [%d], offsets "
                    "%lld to %lld (the changelog holds %lld)",
                    items[i].task, bk_store_name(items[i].st),
                    (long long)(w[i].end > w[i].start ? w[i].end - w[i].start : 0), items[i].topic,
                    (int)items[i].partition, (long long)w[i].start, (long long)w[i].end - 1,
                    (long long)(w[i].end - lo));
        bk_events_emit("restore_store",
                       "\"task\":\"%s\",\"store\":\"%s\",\"topic\":\"%s\",\"partition\":%d,"
                       "\"records\":%lld,\"from\":%lld,\"held\":%lld",
                       items[i].task, bk_store_name(items[i].st), items[i].topic,
                       (int)items[i].partition,
                       (long long)(w[i].end > w[i].start ? w[i].end - w[i].start : 0),
                       (long long)w[i].start, (long long)(w[i].end - lo));
        if (w[i].start >= w[i].end) {
            w[i].done = 1;
            if (next < 0) {
                bk_store_acked(items[i].st, w[i].end - 1); /* nothing to apply: at the end */
            }
            continue;
        }
        p.total += w[i].end - w[i].start;
        p.stores++;
        pending++;
        rd_kafka_topic_partition_list_add(list, items[i].topic, items[i].partition)->offset =
            w[i].start;
    }
    if (pending == 0) {
        if (n > 0) {
            report(cb, opaque, &p, t0, 1); /* nothing to replay: say so, once */
        }
        rc = 0;
        goto done;
    }
    report(cb, opaque, &p, t0, 0);
    if (rd_kafka_assign(consumer, list) != 0) {
        snprintf(errstr, errstr_size, "cannot assign changelog partitions");
        goto done;
    }
    q = rd_kafka_queue_get_consumer(consumer);
    while (pending > 0) {
        ssize_t got;
        double now;
        if (stop && *stop) {
            snprintf(errstr, errstr_size, "restore interrupted");
            goto done;
        }
        /* A batch call waits its whole timeout unless the batch fills: drain what is
         * there, and block for one message only when nothing is (the last records of a
         * short restore arrived in ~1 ms but were handed over 100 ms later). */
        got = rd_kafka_consume_batch_queue(q, 0, msgs, 1000);
        if (got == 0) {
            /* after waking the fetcher if it stopped on a full queue (fetchkick.h) */
            got = rd_kafka_consume_batch_queue(q, bk_fetchkick_idle(&kick, consumer, 100), msgs, 1);
        }
        bk_fetchkick_took(&kick, msgs, got > 0 ? (size_t)got : 0);
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = msgs[i];
            work_t *x = m->err ? NULL : find(w, n, rd_kafka_topic_name(m->rkt), m->partition);
            if (x && !x->done && m->offset < x->end && !in_groups(x->item, m->key, m->key_len)) {
                p.records++; /* another task's key: read, not kept */
                if (m->offset + 1 >= x->end) {
                    x->done = 1;
                    pending--;
                }
            } else if (x && !x->done && m->offset < x->end) {
                if (bk_changelog_apply(x->item->st, m->key, m->key_len, m->payload, m->len,
                                       m->offset, rd_kafka_message_timestamp(m, NULL), errstr,
                                       errstr_size) != 0) {
                    for (ssize_t j = i; j < got; j++) {
                        rd_kafka_message_destroy(msgs[j]);
                    }
                    goto done;
                }
                p.records++;
                if (m->offset + 1 >= x->end) {
                    x->done = 1;
                    pending--;
                }
            } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                /* At the end: under exactly-once a changelog's last offsets can be a
                 * transaction's control records, or records it aborted, which no consumer
                 * is handed (the end is the last stable offset then). */
                x = find(w, n, rd_kafka_topic_name(m->rkt), m->partition);
                if (x && !x->done && m->offset >= x->end) {
                    x->done = 1;
                    pending--;
                }
            } else if (m->err) {
                bk_log_warn("restore: %s", rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        now = bk_clock_mono_s();
        if (got > 0) {
            last_progress = now;
        } else if ((now - last_progress) * 1000 > STALL_MS) {
            snprintf(errstr, errstr_size, "restore made no progress for %d s", STALL_MS / 1000);
            goto done;
        }
        if (now - last_report >= 1.0 && pending > 0) {
            report(cb, opaque, &p, t0, 0);
            last_report = now;
        }
    }
    for (int i = 0; i < n; i++) {
        if (bk_changelog_flush(w[i].item->st, errstr, errstr_size) != 0) {
            goto done;
        }
    }
    report(cb, opaque, &p, t0, 1);
    rc = 0;

done:
    bk_fetchkick_free(&kick);
    if (q) {
        rd_kafka_queue_destroy(q);
    }
    rd_kafka_assign(consumer, NULL);
    rd_kafka_topic_partition_list_destroy(list);
    free(w);
    free(los);
    free(his);
    return rc;
}
