/* store_internal.h - the insides of a task's DB and its stores, shared by the files of the
 * store layer only: db.c (open, commit, checkpoint), dbformat.c (the format check at open),
 * store.c (reads and writes of the record path), changelog.c (restore, markers, repair),
 * iter.c (scans) and dbread.c (queries' reads). Nothing else includes it. Every field belongs to the task's owning
 * stream thread, or to the standby runner's thread for a DB it tails (taskdb.h hands a DB
 * to one thread at a time); dbread.c only reads what stays fixed while the DB is open
 * (handles, names, read options). */
#ifndef BK_STORE_INTERNAL_H
#define BK_STORE_INTERNAL_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "base/ffi.h"
#include "base/hash.h"
#include "base/keys.h"
#include "engine/dedup.h"
#include "engine/store.h"

#define KG_BYTES 2

struct bk_store_s {
    bk_db_t *db;
    char *name;
    int logged;
    int window;
    rocksdb_column_family_handle_t *cf;
    rd_kafka_t *producer;
    rd_kafka_topic_t *changelog;
    char *topic; /* the changelog's name when set without a producer (offline tools) */
    int32_t partition;
    int64_t next;   /* next changelog offset reflected, -1 unknown */
    int open_iters; /* writes are refused while > 0 (they would move the batch) */
    /* The owner's scans not yet freed: a scan is freed by Lua's garbage collector, which
     * may come after the DB closed; bk_db_close releases their RocksDB cursors first. */
    bk_store_iter_t *live_iters;
    rocksdb_writebatch_t *restore_batch;
    /* Restore and standby: changelog records after the last commit marker, applied when the
     * next commit marker arrives and dropped by an abort marker (docs/state.md, Markers). */
    rocksdb_writebatch_t *pending;
    int64_t npending;
    /* The changelog keys of the pending records ([u32 length][bytes]...): when a takeover
     * drops them, each is written again with its committed value (bk_changelog_repair), so
     * that the log cleaner, which keeps a key's newest record, never keeps a dropped one. */
    char *pkeys;
    size_t pkeys_len, pkeys_cap;
    int repair; /* pkeys hold the keys of dropped records, to be repaired */
    int marked; /* a marker was read: records wait for theirs from now on */
    int unmarked; /* this active wrote changelog records since its last marker */
    /* The input offsets (next to read, -1: none) that the state corresponds to: from the
     * checkpoint, the last marker applied, or the active's commit. ninput 0: unknown. */
    int64_t input[BK_STORE_MAX_INPUTS];
    int ninput;
    /* A later generation's task under at-least-once: the input positions its state applied
     * (dedup.h), NULL: none; a restore's or standby's newest table record still waiting for
     * its marker (malloc'd text, NULL: none); a takeover dropped one (bk_changelog_repair
     * writes the table again). */
    bk_dedup_t *src;
    char *src_pending;
    size_t src_pending_len;
    int src_dropped;
    char *kbuf, *vbuf; /* prefixed key; last value read */
    size_t kcap, vcap;
    /* TTL (below): the store's clock, its last read's write time, a value being written
     * with its time, and where the background sweep goes on from (a disk key; none: the
     * start). now is read by queries from other threads. */
    int64_t ttl_ms;
    int ttl_wall;
    _Atomic int64_t now;
    int64_t last_wtime;
    char *tbuf, *sweep;
    size_t tcap, sweep_len;
    char err[512];
};

struct bk_db_s {
    char *dir;
    rocksdb_t *rdb;
    rocksdb_options_t *opts;
    rocksdb_readoptions_t *ropts;
    rocksdb_writeoptions_t *wopts_sync, *wopts;
    rocksdb_writebatch_wi_t *batch;
    rocksdb_column_family_handle_t **cfs; /* every family opened, default first */
    int ncfs;
    int nstores;
    bk_store_t *stores;
    /* A write or sync failed: RocksDB must not be asked again (after a
     * failed sync its WAL writer asserts), the node is stopping. */
    char failed[512];
    /* The checkpoint file as last written through this handle, and whether anything was
     * written without sync since: a checkpoint that would write the same text over a
     * synced DB is skipped (bk_db_checkpoint) */
    char *ckpt_last;
    size_t ckpt_len;
    int unsynced;
};

/* A scan (iter.c): committed = 0 reads the owner's batch over the DB (bk_ffi_store_iter_new,
 * the owner's thread only); 1 reads the DB alone and touches nothing of the owner's
 * (dbread.h, any thread). */
bk_store_iter_t *bk_store_iter_open(bk_store_t *st, int mode, const char *a, size_t alen,
                                    const char *b, size_t blen, int committed);

/* Before the DB closes: the owner's scans still allocated let go of their cursors and read
 * as ended; freeing one later touches nothing of the closed DB. */
void bk_store_iters_detach(bk_store_t *st);

/* The key group of a store key: a window store's keys are under their record key's. */
static inline int bk_store_group_of(const bk_store_t *st, const char *key, size_t klen)
{
    return bk_keys_group(key, klen, st->window);
}

/* [group hi][group lo][key...] into st->kbuf. */
static inline const char *bk_store_prefixed(bk_store_t *st, const char *key, size_t klen,
                                            size_t *out_len)
{
    int g = bk_store_group_of(st, key, klen);
    if (klen + KG_BYTES > st->kcap) {
        st->kcap = (klen + KG_BYTES) * 2;
        st->kbuf = realloc(st->kbuf, st->kcap);
    }
    st->kbuf[0] = (char)(g >> 8);
    st->kbuf[1] = (char)(g & 0xff);
    memcpy(st->kbuf + KG_BYTES, key, klen);
    *out_len = klen + KG_BYTES;
    return st->kbuf;
}

/* -- TTL --------------------------------------------------------------------------------------
 * A key-value store with a time to live (ttl_ms > 0) keeps before each value on disk its write
 * time: 8 bytes, big-endian ms, the record's timestamp (or the wall clock with ttl_wall), which
 * is also its changelog record's timestamp, so that a restore or a standby writes the same
 * bytes. A value is expired when now - its write time >= ttl_ms: reads never return it, and the
 * sweep (bk_ffi_store_expire) deletes it through the changelog. now is the store's clock: the
 * largest record time seen (its writes, the stream time Lua gives it), or with ttl_wall the
 * wall clock Lua gives it (queries from other threads read the real one). */
#define BK_TTL_BYTES 8

static inline int64_t bk_ttl_time(const char *v)
{
    uint64_t t = 0;
    for (int i = 0; i < BK_TTL_BYTES; i++) {
        t = t << 8 | (unsigned char)v[i];
    }
    return (int64_t)t;
}

/* [write time][value] into st->tbuf; its length into *out. NULL without memory. */
static inline const char *bk_ttl_wrap(bk_store_t *st, int64_t t, const char *v, size_t vlen,
                                      size_t *out)
{
    if (vlen + BK_TTL_BYTES > st->tcap) {
        char *b = realloc(st->tbuf, (vlen + BK_TTL_BYTES) * 2);
        if (!b) {
            return NULL;
        }
        st->tbuf = b;
        st->tcap = (vlen + BK_TTL_BYTES) * 2;
    }
    for (int i = 0; i < BK_TTL_BYTES; i++) {
        st->tbuf[i] = (char)((uint64_t)t >> (8 * (BK_TTL_BYTES - 1 - i)));
    }
    memcpy(st->tbuf + BK_TTL_BYTES, v, vlen);
    *out = vlen + BK_TTL_BYTES;
    return st->tbuf;
}

/* A record time seen by the store: its clock moves forward (without ttl_wall). */
static inline void bk_ttl_saw(bk_store_t *st, int64_t t)
{
    if (st->ttl_ms > 0 && !st->ttl_wall && t > atomic_load_explicit(&st->now, memory_order_relaxed)) {
        atomic_store_explicit(&st->now, t, memory_order_relaxed);
    }
}

/* The store's clock; `query`: for a reader on another thread (wall: the real clock). */
int64_t bk_ttl_now(const bk_store_t *st, int query);

/* The live part of a disk value at `now`: NULL when expired; *vlen updated. Values of stores
 * without a TTL are returned as they are. */
static inline const char *bk_ttl_live(const bk_store_t *st, const char *v, size_t *vlen,
                                      int64_t now)
{
    if (st->ttl_ms <= 0 || !v) {
        return v;
    }
    if (*vlen < BK_TTL_BYTES || now - bk_ttl_time(v) >= st->ttl_ms) {
        return NULL;
    }
    *vlen -= BK_TTL_BYTES;
    return v + BK_TTL_BYTES;
}

/* Produces one record to the store's changelog (a no-op for a store without one); blocks
 * while the producer's queue is full. BK_FFI_OK, or BK_FFI_ERR with st->err. */
int bk_store_log_write(bk_store_t *st, const char *key, size_t klen, const char *value, size_t vlen,
                       int64_t timestamp);

#endif
