/* global.c - the node's global tables (global.h): one RocksDB, one column family a table,
 * one consumer assigned every partition of every table's topic, one thread applying what
 * it reads. */
#include "engine/global.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <librdkafka/rdkafka.h>

#include "base/events.h"
#include "base/clock.h"
#include "base/ffi.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/db.h"
#include "engine/dbread.h"
#include "engine/kafka.h"

/* A commit of the DB (and then the offsets file) at least this often while records come,
 * and after this many records: what a stream thread's join sees is that fresh. */
#define COMMIT_MS 100
#define COMMIT_RECORDS 10000
#define OFFSETS_FILE "offsets"
#define START_TIMEOUT_MS 60000 /* to read the topics' metadata and ends at start */

typedef struct part_s {
    int table;
    int32_t partition;
    int64_t next; /* the next offset to apply; -1: from the start */
    int64_t end;  /* the topic's end at start: caught up once next >= end */
} part_t;

struct bk_global_s {
    const bk_plan_t *plan;
    int ntables;
    bk_db_t *db;
    bk_store_t **stores;
    rd_kafka_t *consumer;
    part_t *parts;
    int nparts;
    char dir[4096];
    pthread_t thread;
    int started;
    atomic_int stop;
    atomic_int ready; /* 0, 1, or -1: failed */
    _Atomic uint64_t *applied;
    _Atomic int64_t *lag;
    char err[1024];
};

static _Atomic(bk_global_t *) current;

bk_global_t *bk_global_current(void)
{
    return atomic_load(&current);
}

int bk_global_count(const bk_global_t *g)
{
    return g ? g->ntables : 0;
}

const char *bk_global_name(const bk_global_t *g, int table)
{
    return g->plan->globals[table].name;
}

const char *bk_global_topic(const bk_global_t *g, int table)
{
    return g->plan->globals[table].topic;
}

int bk_global_index(const bk_global_t *g, const char *name)
{
    for (int i = 0; g && i < g->ntables; i++) {
        if (strcmp(g->plan->globals[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

bk_db_t *bk_global_db(bk_global_t *g)
{
    return g->db;
}

uint64_t bk_global_applied(const bk_global_t *g, int table)
{
    return atomic_load(&g->applied[table]);
}

int64_t bk_global_lag(const bk_global_t *g, int table)
{
    return atomic_load(&g->lag[table]);
}

int bk_global_ready(const bk_global_t *g)
{
    return atomic_load(&g->ready);
}

const char *bk_global_error(const bk_global_t *g)
{
    return g->err;
}

/* -- The offsets file: "<table> <partition> <next>" a line ---------------------------- */

static void read_offsets(bk_global_t *g)
{
    char path[4200], name[256];
    int part;
    long long next;
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", g->dir, OFFSETS_FILE);
    if (!(f = fopen(path, "r"))) {
        return; /* a first start: every partition from its start */
    }
    while (fscanf(f, "%255s %d %lld", name, &part, &next) == 3) {
        int t = bk_global_index(g, name);
        for (int i = 0; t >= 0 && i < g->nparts; i++) {
            if (g->parts[i].table == t && g->parts[i].partition == part) {
                g->parts[i].next = next;
            }
        }
    }
    fclose(f);
}

/* After the DB's commit: tmp, then rename (not synced: a file lost to a crash takes the
 * table back to older offsets, from which the replay ends at the same values). */
static int write_offsets(bk_global_t *g)
{
    char path[4200], tmp[4210];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", g->dir, OFFSETS_FILE);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        snprintf(g->err, sizeof(g->err), "cannot write %.900s: %s", tmp, strerror(errno));
        return -1;
    }
    for (int i = 0; i < g->nparts; i++) {
        if (g->parts[i].next >= 0) {
            fprintf(f, "%s %d %lld\n", bk_global_name(g, g->parts[i].table),
                    (int)g->parts[i].partition, (long long)g->parts[i].next);
        }
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(g->err, sizeof(g->err), "cannot write %.900s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* -- The thread ------------------------------------------------------------------------ */

static part_t *find(bk_global_t *g, const char *topic, int32_t partition)
{
    for (int i = 0; i < g->nparts; i++) {
        if (g->parts[i].partition == partition &&
            strcmp(bk_global_topic(g, g->parts[i].table), topic) == 0) {
            return &g->parts[i];
        }
    }
    return NULL;
}

static int apply(bk_global_t *g, const rd_kafka_message_t *m)
{
    part_t *p = find(g, rd_kafka_topic_name(m->rkt), m->partition);
    bk_store_t *st;
    int rc = 0;
    if (!p) {
        return 0;
    }
    st = g->stores[p->table];
    if (m->key) {
        /* a tombstone deletes the row, as Kafka Streams' global table does */
        rc = m->payload ? bk_ffi_store_put(st, m->key, m->key_len, m->payload, m->len,
                                           rd_kafka_message_timestamp(m, NULL))
                        : bk_ffi_store_delete(st, m->key, m->key_len,
                                              rd_kafka_message_timestamp(m, NULL));
    } else {
        /* a record without a key has no row to be: skipped, as Kafka Streams does */
        bk_log_warn("global table %s: %s [%d] offset %lld has no key: skipped",
                    bk_global_name(g, p->table), rd_kafka_topic_name(m->rkt), (int)m->partition,
                    (long long)m->offset);
    }
    if (rc != 0) {
        snprintf(g->err, sizeof(g->err), "global table %s: %s [%d] offset %lld: %s",
                 bk_global_name(g, p->table), rd_kafka_topic_name(m->rkt), (int)m->partition,
                 (long long)m->offset, bk_ffi_store_error(st));
        return -1;
    }
    p->next = m->offset + 1;
    atomic_fetch_add(&g->applied[p->table], 1);
    return 0;
}

static int commit(bk_global_t *g)
{
    char err[512];
    if (bk_db_commit_sync(g->db, 1, err, sizeof(err)) != 0) {
        snprintf(g->err, sizeof(g->err), "global tables: %s", err);
        return -1;
    }
    return write_offsets(g);
}

/* Every partition read up to its end at start. The consumer's position counts too: it
 * passes transaction markers and aborted records, which are never applied (a topic written
 * transactionally ends in a marker: its last record is one short of the end). */
static int caught_up(bk_global_t *g)
{
    rd_kafka_topic_partition_list_t *pos = NULL;
    int ok = 1;
    for (int i = 0; i < g->nparts && ok; i++) {
        part_t *p = &g->parts[i];
        if (p->next >= p->end) {
            continue;
        }
        if (!pos) {
            pos = rd_kafka_topic_partition_list_new(g->nparts);
            for (int j = 0; j < g->nparts; j++) {
                rd_kafka_topic_partition_list_add(pos, bk_global_topic(g, g->parts[j].table),
                                                  g->parts[j].partition);
            }
            if (rd_kafka_position(g->consumer, pos) != RD_KAFKA_RESP_ERR_NO_ERROR) {
                ok = 0;
                break;
            }
        }
        ok = pos->elems[i].offset >= 0 && pos->elems[i].offset >= p->end;
    }
    if (pos) {
        rd_kafka_topic_partition_list_destroy(pos);
    }
    return ok;
}

/* Each table's lag: the partitions' ends as the consumer last heard them, past what was
 * applied. */
static void measure_lag(bk_global_t *g)
{
    for (int t = 0; t < g->ntables; t++) {
        int64_t lag = 0;
        for (int i = 0; i < g->nparts; i++) {
            int64_t lo, hi;
            if (g->parts[i].table != t ||
                rd_kafka_get_watermark_offsets(g->consumer, bk_global_topic(g, t),
                                               g->parts[i].partition, &lo, &hi) != 0 ||
                hi < 0) {
                continue;
            }
            int64_t at = g->parts[i].next < 0 ? lo : g->parts[i].next;
            lag += hi > at ? hi - at : 0;
        }
        atomic_store(&g->lag[t], lag);
    }
}

static void *run(void *arg)
{
    bk_global_t *g = arg;
    rd_kafka_message_t *msgs[1000];
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(g->consumer);
    int64_t last_commit = bk_clock_mono_ms(), t0 = last_commit, last_lag = 0;
    long pending = 0;
    int failed = 0;

    if (caught_up(g)) {
        atomic_store(&g->ready, 1);
    }
    while (!atomic_load(&g->stop)) {
        ssize_t got = rd_kafka_consume_batch_queue(q, 100, msgs, 1000);
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = msgs[i];
            if (!failed && m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (apply(g, m) != 0) {
                    failed = 1;
                }
                pending++;
            } else if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                       !bk_kafka_retriable(m->err)) {
                bk_log_warn("global tables: %s", rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        if (failed) {
            break;
        }
        int64_t now = bk_clock_mono_ms();
        if (pending > 0 && (pending >= COMMIT_RECORDS || now - last_commit >= COMMIT_MS ||
                            (!atomic_load(&g->ready) && caught_up(g)))) {
            if (commit(g) != 0) {
                failed = 1;
                break;
            }
            pending = 0;
            last_commit = now;
        }
        if (!atomic_load(&g->ready) && pending == 0 && caught_up(g)) {
            long long n = 0;
            for (int t = 0; t < g->ntables; t++) {
                n += (long long)atomic_load(&g->applied[t]);
            }
            bk_log_info("global tables: caught up in %lld ms (%lld record(s) applied)",
                        (long long)(now - t0), n);
            bk_events_emit("global_caught_up", "\"ms\":%lld,\"records\":%lld",
                           (long long)(now - t0), n);
            atomic_store(&g->ready, 1);
        }
        if (now - last_lag >= 1000) {
            measure_lag(g);
            last_lag = now;
        }
    }
    if (!failed && pending > 0 && commit(g) != 0) {
        failed = 1;
    }
    rd_kafka_queue_destroy(q);
    if (failed) {
        bk_log_error("%s; the global tables stop here", g->err);
        atomic_store(&g->ready, -1);
    }
    return NULL;
}

/* -- Start and stop ---------------------------------------------------------------------- */

static void destroy(bk_global_t *g)
{
    if (g->consumer) {
        rd_kafka_consumer_close(g->consumer);
        rd_kafka_destroy(g->consumer);
    }
    if (g->db) {
        bk_db_close(g->db);
    }
    free(g->stores);
    free(g->parts);
    free((void *)g->applied);
    free((void *)g->lag);
    free(g);
}

/* Every table's partitions, their ends now, and the offsets the DB reflects. */
static int plan_parts(bk_global_t *g, char *errstr, size_t errstr_size)
{
    int *counts = calloc((size_t)g->ntables, sizeof(int));
    const char **topics = calloc((size_t)g->ntables, sizeof(char *));
    const char **ptopics = NULL;
    int32_t *pparts = NULL;
    int64_t *lo = NULL, *hi = NULL;
    int rc = -1, n = 0;
    rd_kafka_resp_err_t err;

    if (!counts || !topics) {
        snprintf(errstr, errstr_size, "out of memory");
        goto done;
    }
    for (int t = 0; t < g->ntables; t++) {
        topics[t] = bk_global_topic(g, t);
    }
    if (bk_kafka_partitions(g->consumer, topics, g->ntables, counts, START_TIMEOUT_MS, errstr,
                            errstr_size) != 0) {
        goto done;
    }
    for (int t = 0; t < g->ntables; t++) {
        if (counts[t] <= 0) {
            snprintf(errstr, errstr_size,
                     "global table '%s': its topic '%s' does not exist (create it first)",
                     bk_global_name(g, t), topics[t]);
            goto done;
        }
        n += counts[t];
    }
    g->parts = calloc((size_t)n, sizeof(*g->parts));
    ptopics = calloc((size_t)n, sizeof(*ptopics));
    pparts = calloc((size_t)n, sizeof(*pparts));
    lo = calloc((size_t)n, sizeof(*lo));
    hi = calloc((size_t)n, sizeof(*hi));
    if (!g->parts || !ptopics || !pparts || !lo || !hi) {
        snprintf(errstr, errstr_size, "out of memory");
        goto done;
    }
    for (int t = 0, i = 0; t < g->ntables; t++) {
        for (int p = 0; p < counts[t]; p++, i++) {
            g->parts[i].table = t;
            g->parts[i].partition = p;
            g->parts[i].next = -1;
            ptopics[i] = topics[t];
            pparts[i] = p;
        }
    }
    g->nparts = n;
    err = bk_kafka_watermarks(g->consumer, ptopics, pparts, n, lo, hi, START_TIMEOUT_MS, NULL);
    if (err) {
        snprintf(errstr, errstr_size, "global tables: cannot read the ends of their topics: %s",
                 rd_kafka_err2str(err));
        goto done;
    }
    read_offsets(g);
    for (int i = 0; i < n; i++) {
        part_t *p = &g->parts[i];
        if (p->next >= 0 && p->next < lo[i]) {
            /* the topic's head was deleted past where the table is: it misses those
             * updates (a global table's topic should be compacted, not deleted) */
            bk_log_warn("global table %s: %s [%d] starts at offset %lld, past %lld where the "
                        "table stands: the records between are lost to it",
                        bk_global_name(g, p->table), ptopics[i], (int)p->partition,
                        (long long)lo[i], (long long)p->next);
            p->next = lo[i];
        }
        p->end = hi[i];
        if (p->next < 0 && lo[i] >= hi[i]) {
            p->next = hi[i]; /* empty: at its end */
        }
    }
    rc = 0;
done:
    free(counts);
    free(topics);
    free(ptopics);
    free(pparts);
    free(lo);
    free(hi);
    return rc;
}

bk_global_t *bk_global_start(const bk_plan_t *plan, const bk_conf_t *conf, char *errstr,
                             size_t errstr_size)
{
    static const char *const settings[] = {"enable.partition.eof", "false", NULL};
    bk_global_t *g;
    bk_store_spec_t *specs;
    rd_kafka_topic_partition_list_t *list;
    char cid[256];

    errstr[0] = '\0';
    if (plan->nglobals == 0) {
        return NULL;
    }
    g = calloc(1, sizeof(*g));
    specs = calloc((size_t)plan->nglobals, sizeof(*specs));
    if (!g || !specs) {
        free(g);
        free(specs);
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    g->plan = plan;
    g->ntables = plan->nglobals;
    g->stores = calloc((size_t)g->ntables, sizeof(*g->stores));
    g->applied = calloc((size_t)g->ntables, sizeof(*g->applied));
    g->lag = calloc((size_t)g->ntables, sizeof(*g->lag));
    snprintf(g->dir, sizeof(g->dir), "%s/%s/global", bk_conf_str(conf, BK_CONF_STATE_DIR),
             plan->id);
    for (int t = 0; t < g->ntables; t++) {
        specs[t].name = plan->globals[t].name;
    }
    if (!g->stores || !g->applied || !g->lag) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (bk_fs_mkdirs(g->dir) != 0) {
        snprintf(errstr, errstr_size, "cannot make %s: %s", g->dir, strerror(errno));
        goto fail;
    }
    if (!(g->db = bk_db_open(g->dir, specs, g->ntables, errstr, errstr_size))) {
        goto fail;
    }
    for (int t = 0; t < g->ntables; t++) {
        g->stores[t] = bk_db_store(g->db, t);
    }
    snprintf(cid, sizeof(cid), "%s-global", plan->id);
    if (!(g->consumer = bk_kafka_new_with(conf, BK_KAFKA_CONSUMER, cid, settings, NULL, NULL,
                                          errstr, errstr_size)) ||
        plan_parts(g, errstr, errstr_size) != 0) {
        goto fail;
    }
    list = rd_kafka_topic_partition_list_new(g->nparts);
    for (int i = 0; i < g->nparts; i++) {
        rd_kafka_topic_partition_list_add(list, bk_global_topic(g, g->parts[i].table),
                                          g->parts[i].partition)
            ->offset = g->parts[i].next < 0 ? RD_KAFKA_OFFSET_BEGINNING : g->parts[i].next;
    }
    if (rd_kafka_assign(g->consumer, list) != 0) {
        rd_kafka_topic_partition_list_destroy(list);
        snprintf(errstr, errstr_size, "global tables: cannot assign their topics' partitions");
        goto fail;
    }
    rd_kafka_topic_partition_list_destroy(list);
    for (int t = 0; t < g->ntables; t++) {
        int64_t behind = 0;
        for (int i = 0; i < g->nparts; i++) {
            if (g->parts[i].table == t) {
                behind += g->parts[i].end - (g->parts[i].next < 0 ? 0 : g->parts[i].next);
            }
        }
        bk_log_info("global table %s: reading %s, %lld record(s) to catch up on", specs[t].name,
                    bk_global_topic(g, t), (long long)(behind > 0 ? behind : 0));
    }
    if (pthread_create(&g->thread, NULL, run, g) != 0) {
        snprintf(errstr, errstr_size, "cannot start the global tables' thread");
        goto fail;
    }
    g->started = 1;
    free(specs);
    atomic_store(&current, g);
    return g;

fail:
    free(specs);
    destroy(g);
    if (!errstr[0]) {
        snprintf(errstr, errstr_size, "cannot open the global tables");
    }
    return NULL;
}

void bk_global_stop(bk_global_t *g)
{
    if (!g) {
        return;
    }
    atomic_store(&current, NULL);
    atomic_store(&g->stop, 1);
    if (g->started) {
        pthread_join(g->thread, NULL);
    }
    destroy(g);
}

/* -- Reads from Lua (base/ffi.h) ------------------------------------------------------- */

int bk_ffi_global_index(const char *name)
{
    return bk_global_index(bk_global_current(), name);
}

int bk_ffi_global_get(int32_t table, const char *key, size_t key_len, const char **value,
                      size_t *value_len, void **pin)
{
    bk_global_t *g = bk_global_current();
    char err[512];
    int rc;
    if (!g || table < 0 || table >= g->ntables) {
        return -1;
    }
    rc = bk_dbread_get_pinned(g->db, table, key, key_len, value, value_len,
                              (bk_dbread_pin_t **)pin, err, sizeof(err));
    if (rc < 0) {
        bk_log_error("%s", err);
    }
    return rc;
}

void bk_ffi_global_unpin(void *pin)
{
    if (pin) {
        bk_dbread_unpin(pin);
    }
}
