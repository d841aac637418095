/* ffi.h - everything Lua reaches through LuaJIT's FFI, in one place.
 *
 * These are the per-record paths (STYLE.md 4-5): plain exported functions of
 * scalars and pointers, an int status, never a call back into Lua. The part
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
    int32_t task;      /* index of the task in the thread's table, 0-based */
    int32_t topic;     /* index of the topic in the topology's topic table */
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
const char *bk_ffi_store_error(bk_store_t *st);
/* range: keys in [a, b] (b NULL: to the end); prefix: keys starting with a;
 * all: every key. In key order. Writes to the store fail while one is open. */
bk_store_iter_t *bk_ffi_store_iter_new(bk_store_t *st, int mode, const char *a, size_t a_len,
                                       const char *b, size_t b_len);
int bk_ffi_store_iter_next(bk_store_iter_t *it, const char **key, size_t *key_len,
                           const char **value, size_t *value_len);
void bk_ffi_store_iter_free(bk_store_iter_t *it);

/* The test driver's stores (driver.h): one DB per task, no Kafka. */
typedef struct bk_driver_s bk_driver_t;
bk_driver_t *bk_ffi_driver_new(int32_t ntasks);
enum { BK_FFI_STORE_LOGGED = 1, BK_FFI_STORE_WINDOW = 2 };
/* Opens task `task`'s DB in dir with n stores; flags: BK_FFI_STORE_*. */
int bk_ffi_driver_open_task(bk_driver_t *d, int32_t task, const char *dir,
                            const char *const *names, const int32_t *flags, int32_t n);
bk_store_t *bk_ffi_driver_store(bk_driver_t *d, int32_t task, int32_t i);
/* Writes every task's batch (synced) and checkpoint. */
int bk_ffi_driver_commit(bk_driver_t *d);
const char *bk_ffi_driver_error(bk_driver_t *d);
void bk_ffi_driver_free(bk_driver_t *d);
/* Wall clock in ms since the epoch. */
int64_t bk_ffi_clock_ms(void);
/* Kafka's partitioner (murmur2, as the Java client) and beck's key group. */
int32_t bk_ffi_hash_partition(const char *key, size_t key_len, int32_t partitions);
int32_t bk_ffi_hash_key_group(const char *key, size_t key_len);
/* -- Assignor (assign.h) and its published form (assigncodec.h) -------------------------
 * For specs: build an assignor input a call at a time, compute, read the result; build,
 * encode, decode, diff and apply published assignments. Not on any per-record path.
 * Member and slot indices are 0-based; -1 is "none". Errors: bk_ffi_assign_error(b), or
 * *err pointing at thread-local text valid until the next call. Buffers from encode and
 * delta are freed with bk_ffi_assigncodec_buf_free(). */
typedef struct bk_assign_builder_s bk_assign_builder_t;
typedef struct bk_assigncodec_s bk_assigncodec_t;
/* Assignor (assign.h): ntasks tasks, `standbys` standbys each (K). */
bk_assign_builder_t *bk_ffi_assign_new(int32_t ntasks, int32_t standbys);
/* Returns the member's index, or BK_FFI_ERR. rack and endpoint may be NULL. */
int32_t bk_ffi_assign_add_member(bk_assign_builder_t *b, const char *id, const char *rack,
                                 const char *endpoint, int32_t threads);
int bk_ffi_assign_set_prev(bk_assign_builder_t *b, int32_t task, int32_t active,
                           const int32_t *standby, int32_t n);
int bk_ffi_assign_add_lag(bk_assign_builder_t *b, int32_t task, int32_t member, int64_t lag);
/* Warm-up (assign.h): on, and the acceptable recovery lag. */
int bk_ffi_assign_set_warmup(bk_assign_builder_t *b, int on, int64_t acceptable_lag);
int bk_ffi_assign_compute(bk_assign_builder_t *b);
/* After a compute: tasks held on a caught-up replica while another warms up. */
int32_t bk_ffi_assign_warmups(const bk_assign_builder_t *b);
/* After a compute: actives [ntasks], standbys [ntasks * *k], and the movement figures. */
const int32_t *bk_ffi_assign_active(const bk_assign_builder_t *b);
const int32_t *bk_ffi_assign_standby(const bk_assign_builder_t *b, int32_t *k);
int bk_ffi_assign_stats(const bk_assign_builder_t *b, int32_t *moved, int32_t *min_moved,
                        int32_t *orphaned, int32_t *promoted);
const char *bk_ffi_assign_error(const bk_assign_builder_t *b);
void bk_ffi_assign_free(bk_assign_builder_t *b);
/* Published assignments (assigncodec.h). */
bk_assigncodec_t *bk_ffi_assigncodec_new(int32_t nnodes, int32_t ntasks, int32_t k,
                                         uint64_t epoch, uint64_t base_epoch);
int bk_ffi_assigncodec_set_node(bk_assigncodec_t *ac, int32_t slot, const char *id,
                                const char *rack, const char *endpoint, const char **err);
int bk_ffi_assigncodec_set_task(bk_assigncodec_t *ac, int32_t task, int32_t active,
                                const int32_t *standby, int32_t n);
int bk_ffi_assigncodec_validate(const bk_assigncodec_t *ac, const char **err);
int bk_ffi_assigncodec_encode(const bk_assigncodec_t *ac, char **buf, size_t *len,
                              const char **err);
int bk_ffi_assigncodec_delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next,
                             char **buf, size_t *len, const char **err);
void bk_ffi_assigncodec_buf_free(char *buf);
int bk_ffi_assigncodec_peek(const char *buf, size_t len, int32_t *kind, uint64_t *epoch,
                            uint64_t *base_epoch, const char **err);
bk_assigncodec_t *bk_ffi_assigncodec_decode(const char *buf, size_t len, const char **err);
bk_assigncodec_t *bk_ffi_assigncodec_apply(const bk_assigncodec_t *prev, const char *buf,
                                           size_t len, const char **err);
int bk_ffi_assigncodec_equal(const bk_assigncodec_t *a, const bk_assigncodec_t *b);
void bk_ffi_assigncodec_info(const bk_assigncodec_t *ac, int32_t *nnodes, int32_t *ntasks,
                             int32_t *k, uint64_t *epoch, uint64_t *base_epoch);
const char *bk_ffi_assigncodec_node(const bk_assigncodec_t *ac, int32_t slot,
                                    const char **rack, const char **endpoint);
int32_t bk_ffi_assigncodec_task(const bk_assigncodec_t *ac, int32_t task, int32_t *standby);
bk_assigncodec_t *bk_ffi_assigncodec_from_assign(const bk_assigncodec_t *prev,
                                                 bk_assign_builder_t *b, uint64_t epoch,
                                                 const char **err);
int bk_ffi_assigncodec_to_prev(const bk_assigncodec_t *ac, bk_assign_builder_t *b);
void bk_ffi_assigncodec_free(bk_assigncodec_t *ac);
/* -- Snapshots (snapshot.h), for specs ---------------------------------------------------
 * *err points at thread-local text valid until the next call. */
/* Parses the manifest in file in_path and, unless out_path is NULL, writes it to out_path
 * with bk_manifest_write. The number of files it lists, or BK_FFI_ERR. */
int bk_ffi_snapshot_manifest_rewrite(const char *in_path, const char *out_path,
                                     const char **err);
/* Parses fetched_dir's manifest and installs fetched_dir as task_dir (bk_snapshot_install). */
int bk_ffi_snapshot_install(const char *fetched_dir, const char *task_dir, const char **err);
/* bk_snapshot_sweep: how many snapshots were removed. */
int bk_ffi_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now_ms);
int bk_ffi_snapshot_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size,
                              const char **err);
/* BK_FFI_CDEF_END */

#endif
