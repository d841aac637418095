/* ffi.h - what beck's own Lua (lua/beck/) reaches through LuaJIT's FFI: the record path of
 * a stream thread, its stores, and the test driver's stores behind beck.testing.
 *
 * Plain exported functions of scalars and pointers, an int status, never a call back into
 * Lua (STYLE.md 4-5); each is defined by the module named beside it. What only specs
 * drive is in ffi_spec.h. bin/beck exports bk_ffi_* and nothing else (runtime/exports). The part
 * between the CDEF markers is cut out by the Makefile and embedded as the Lua
 * module beck.internal.cdef, so the declarations Lua uses are this header's
 * own; it must therefore stay plain C declarations (no macros, no includes). */
#ifndef BK_FFI_H
#define BK_FFI_H

#include <stddef.h>
#include <stdint.h>

/* BK_FFI_CDEF_BEGIN */
/* One input record, pointing into librdkafka's message (valid for one batch). */
typedef struct bk_rec {
    const char *key;   /* NULL: no key */
    const char *value; /* NULL: tombstone */
    int32_t key_len;
    int32_t value_len;
    int32_t task;  /* index of the task in the thread's table, 0-based */
    int32_t topic; /* index of the topic in the topology's topic table */
    int32_t partition;
    int32_t _pad;
    int64_t offset;
    int64_t timestamp; /* ms since the epoch, -1 when the record has none */
} bk_rec_t;

/* What a stream thread and its VM share. C fills recs/count/now_ms before it
 * calls into Lua; Lua writes cur (the record in hand, so that C knows which
 * one failed) and next_wall_ms (earliest wall-clock punctuation, -1: none). */
typedef struct bk_io {
    bk_rec_t *recs;
    int32_t count;
    int32_t cur;
    int64_t now_ms;
    int64_t next_wall_ms;
} bk_io_t;

typedef struct bk_thread_s bk_thread_t;

/* Status codes, mirrored by lua/beck/internal/runtime.lua. */
enum { BK_FFI_OK = 0, BK_FFI_ERR = -1 };

/* Produces to sink topic `topic` (index in the topology's topic table),
 * carrying the headers of record `rec` of the batch (-1: none, as from a
 * punctuation). Copies key and value; blocks while the producer queue is
 * full. BK_FFI_ERR: see bk_ffi_thread_error(). */
int bk_ffi_thread_send(bk_thread_t *thr, int32_t topic, const char *key, size_t key_len,
                       const char *value, size_t value_len, int64_t timestamp, int32_t rec);
/* A stream-time punctuation raised: logged; under on_error=fail the thread
 * stops after the batch in hand. */
void bk_ffi_thread_punctuation_failed(bk_thread_t *thr, const char *msg, size_t len);
/* Task `task` (a slot of the thread) dropped n records as late for store `store` (index in
 * the topology's store table): counted for /metrics. */
void bk_ffi_thread_late(bk_thread_t *thr, int32_t task, int32_t store, int64_t n);
/* Text of the last error of this thread (static or thread-owned). */
const char *bk_ffi_thread_error(bk_thread_t *thr);
/* Headers of record `rec` of the current batch: count, then each by index. */
int bk_ffi_thread_header_count(bk_thread_t *thr, int32_t rec);
int bk_ffi_thread_header_get(bk_thread_t *thr, int32_t rec, int32_t idx, const char **name,
                             const char **value, size_t *size);
void bk_ffi_log(int level, const char *msg, size_t len);

/* Stores (store.h). Keys and values are copied; a value returned by get is
 * valid until the next get on the same store. get returns 1 found, 0 not. */
typedef struct bk_store_s bk_store_t;
typedef struct bk_store_iter_s bk_store_iter_t;
enum { BK_FFI_ITER_ALL = 0, BK_FFI_ITER_RANGE = 1, BK_FFI_ITER_PREFIX = 2 };
/* Store `store` (index in the topology's store table) of the thread's task
 * `task`; NULL if that task has no such store. */
bk_store_t *bk_ffi_thread_store(bk_thread_t *thr, int32_t task, int32_t store);
int bk_ffi_store_get(bk_store_t *st, const char *key, size_t key_len, const char **value,
                     size_t *value_len);
int bk_ffi_store_put(bk_store_t *st, const char *key, size_t key_len, const char *value,
                     size_t value_len, int64_t timestamp);
int bk_ffi_store_delete(bk_store_t *st, const char *key, size_t key_len, int64_t timestamp);
int64_t bk_ffi_store_approximate_count(bk_store_t *st);
/* A key-value store's time to live (engine/store_internal.h, TTL): set_ttl gives a store
 * opened without it one (the test driver's); set_now moves its clock (the task's stream time,
 * or the wall clock with `wall`); last_wtime is the write time of the last value get returned;
 * expire deletes expired entries, up to max_keys looked at from where the last call stopped:
 * how many, or BK_FFI_ERR. */
void bk_ffi_store_set_ttl(bk_store_t *st, int64_t ttl_ms, int32_t wall);
void bk_ffi_store_set_now(bk_store_t *st, int64_t now);
int64_t bk_ffi_store_last_wtime(bk_store_t *st);
int64_t bk_ffi_store_expire(bk_store_t *st, int32_t max_keys);
const char *bk_ffi_store_error(bk_store_t *st);
/* range: keys in [a, b] (b NULL: to the end); prefix: keys starting with a;
 * all: every key. In key order. Writes to the store fail while one is open. */
bk_store_iter_t *bk_ffi_store_iter_new(bk_store_t *st, int mode, const char *a, size_t a_len,
                                       const char *b, size_t b_len);
int bk_ffi_store_iter_next(bk_store_iter_t *it, const char **key, size_t *key_len,
                           const char **value, size_t *value_len);
void bk_ffi_store_iter_free(bk_store_iter_t *it);

/* The node's global tables (engine/global.h), from any stream thread: the index of the
 * table `name` (-1: none), and a key's value as the table's last commit holds it: 1 found
 * (*value valid until bk_ffi_global_unpin(*pin)), 0 not, -1 error (logged). */
int bk_ffi_global_index(const char *name);
int bk_ffi_global_get(int32_t table, const char *key, size_t key_len, const char **value,
                      size_t *value_len, void **pin);
void bk_ffi_global_unpin(void *pin);

/* The test driver's stores (driver.h): one DB per task, no Kafka. */
typedef struct bk_driver_s bk_driver_t;
bk_driver_t *bk_ffi_driver_new(int32_t ntasks);
enum { BK_FFI_STORE_LOGGED = 1, BK_FFI_STORE_WINDOW = 2 };
/* Opens task `task`'s DB in dir with n stores; flags: BK_FFI_STORE_*. */
int bk_ffi_driver_open_task(bk_driver_t *d, int32_t task, const char *dir, const char *const *names,
                            const int32_t *flags, int32_t n);
bk_store_t *bk_ffi_driver_store(bk_driver_t *d, int32_t task, int32_t i);
/* Writes every task's batch (synced) and checkpoint. */
int bk_ffi_driver_commit(bk_driver_t *d);
const char *bk_ffi_driver_error(bk_driver_t *d);
void bk_ffi_driver_free(bk_driver_t *d);
/* Repartitioning in the driver (docs/repartitioning.md): room for ntasks tasks; a task's DB
 * committed and closed; a task's RocksDB built in dst from closed ones by key groups
 * (engine/regroup.h: groups[2k], groups[2k + 1] bound source k's). Errors in
 * bk_ffi_driver_error. */
int bk_ffi_driver_grow(bk_driver_t *d, int32_t ntasks);
int bk_ffi_driver_close_task(bk_driver_t *d, int32_t task);
int bk_ffi_driver_regroup(bk_driver_t *d, const char *dst, const char *const *srcs,
                          const int32_t *groups, int32_t nsrc, int32_t lo, int32_t hi);
/* Wall clock in ms since the epoch. */
int64_t bk_ffi_clock_ms(void);
/* Kafka's partitioner (murmur2, as the Java client's). */
int32_t bk_ffi_hash_partition(const char *key, size_t key_len, int32_t partitions);
/* Key groups (hash.h): a key's group, and the groups [lo, hi) task `task` of `ntasks` owns
 * in a range-owned generation (docs/repartitioning.md). */
int32_t bk_ffi_hash_key_group(const char *key, size_t key_len);
void bk_ffi_hash_group_range(int32_t task, int32_t ntasks, int32_t *lo, int32_t *hi);
/* XXH3's 128-bit hash of data[0..len) into out[0..16), big-endian (a foreign-key join's
 * fingerprint of a row: lua/beck/internal/dsl/fkjoin.lua). */
void bk_ffi_hash128(const char *data, size_t len, char *out);
/* The query server of this process (docs/queries.md, query/query.c): a GET of `path` (escaped,
 * with its query) sent to it as a client would, with its token. Returns the body (free it with
 * bk_ffi_query_free) and *status: the HTTP status, 0 when there was no answer (the body says
 * why), -1 when this process serves no queries (NULL body). */
char *bk_ffi_query_get(const char *path, int32_t *status, size_t *body_len);
void bk_ffi_query_free(char *body);
/* BK_FFI_CDEF_END */

#endif
