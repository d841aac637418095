/* store.h - a task's state: one RocksDB per task, one column family per store.
 *
 * Every key on disk is prefixed with its key group (2 bytes, big-endian;
 * hash.h) so that state can later be split and moved by ranges. Writes of a
 * commit interval collect in a write batch with index (reads see them) and
 * reach the DB only at commit, after the producer has flushed their
 * changelog records: so the DB never holds a write that its changelog lacks,
 * and a restore from the checkpoint's offsets rebuilds exactly the changelog's
 * state. Each write of a logged store is also produced to the store's
 * changelog topic (<app>-<store>-changelog, partition = the task's).
 * @locality the owning stream thread only. */
#ifndef BK_STORE_H
#define BK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

typedef struct bk_db_s bk_db_t;       /* one task's RocksDB */
typedef struct bk_store_s bk_store_t; /* one store of one task */

typedef struct bk_store_spec_s {
    const char *name;
    int logged; /* has a changelog */
    int window; /* a window store: its keys have base/keys.h's window layout and sit
                 * under their record key's group */
    int64_t ttl_ms; /* a key-value store's time to live, 0: none (store_internal.h, TTL) */
    int ttl_wall;   /* the TTL counts wall-clock time, not the records' */
} bk_store_spec_t;

const char *bk_store_name(const bk_store_t *st);
int bk_store_logged(const bk_store_t *st);
/* A window store: its changelog deletes its head by design (compact,delete). */
int bk_store_window(const bk_store_t *st);
/* Where the changelog goes; producer and rkt are the thread's. */
void bk_store_set_changelog(bk_store_t *st, rd_kafka_t *producer, rd_kafka_topic_t *rkt,
                            int32_t partition);
/* Next changelog offset the DB reflects: from the checkpoint, restore and
 * acknowledged writes; -1 when unknown (no checkpoint yet). */
int64_t bk_store_changelog_next(const bk_store_t *st);
/* The changelog's topic (NULL: none set yet) and partition, as bk_store_set_changelog or
 * bk_store_set_changelog_topic set them. */
const char *bk_store_changelog_topic(const bk_store_t *st, int32_t *partition);
/* Names the changelog without a producer, for offline tools (beck snapshot); copied. */
void bk_store_set_changelog_topic(bk_store_t *st, const char *topic, int32_t partition);
/* The store wrote changelog records since its last marker (a punctuation's writes do so
 * without input moving: they need a marker all the same). */
int bk_store_unmarked(const bk_store_t *st);
/* The producer acknowledged a changelog record of this store at `offset`. */
void bk_store_acked(bk_store_t *st, int64_t offset);
#define BK_STORE_MAX_INPUTS 16 /* input partitions a task's markers can name */

/* The dedup table of a later generation's task (engine/dedup.h) that this store keeps
 * (the task's first logged store does), made empty when it has none; NULL out of memory.
 * Owned by the store: its changelog and checkpoint carry it. */
struct bk_dedup_s *bk_store_dedup(bk_store_t *st);

/* The input offsets the store's state corresponds to, for the next checkpoint. */
void bk_store_set_input(bk_store_t *st, const int64_t *offsets, int n);
/* Copies the input offsets the store's state corresponds to into offsets (room for
 * BK_STORE_MAX_INPUTS); returns their count, 0: unknown. */
int bk_store_input(const bk_store_t *st, int64_t *offsets);

#endif
