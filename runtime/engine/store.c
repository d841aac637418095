/* store.c - one store of a task: its names and offsets, and the per-record reads and
 * writes Lua makes through FFI (get, put, delete), each write also produced to the store's
 * changelog (store.h). */
#include "engine/store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "base/clock.h"
#include "base/ffi.h"
#include "base/fs.h"
#include "base/keys.h"
#include "base/log.h"
#include "engine/changelog.h"
#include "engine/store_internal.h"

const char *bk_store_name(const bk_store_t *st)
{
    return st->name;
}

int bk_store_logged(const bk_store_t *st)
{
    return st->logged;
}

int bk_store_window(const bk_store_t *st)
{
    return st->window;
}

void bk_store_set_changelog(bk_store_t *st, rd_kafka_t *producer, rd_kafka_topic_t *rkt,
                            int32_t partition)
{
    st->producer = producer;
    st->changelog = rkt;
    st->partition = partition;
}

void bk_store_set_changelog_topic(bk_store_t *st, const char *topic, int32_t partition)
{
    free(st->topic);
    st->topic = strdup(topic);
    st->partition = partition;
}

const char *bk_store_changelog_topic(const bk_store_t *st, int32_t *partition)
{
    *partition = st->partition;
    if (st->topic) {
        return st->topic;
    }
    return st->changelog ? rd_kafka_topic_name(st->changelog) : NULL;
}

int64_t bk_store_changelog_next(const bk_store_t *st)
{
    return st->next;
}

void bk_store_set_input(bk_store_t *st, const int64_t *offsets, int n)
{
    if (n > BK_STORE_MAX_INPUTS) {
        n = 0;
    }
    st->ninput = n;
    memcpy(st->input, offsets, (size_t)n * sizeof(*offsets));
}

int bk_store_input(const bk_store_t *st, int64_t *offsets)
{
    memcpy(offsets, st->input, (size_t)st->ninput * sizeof(*offsets));
    return st->ninput;
}

void bk_store_acked(bk_store_t *st, int64_t offset)
{
    if (offset + 1 > st->next) {
        st->next = offset + 1;
    }
}

/* -- FFI: the per-record calls -------------------------------------------- */

const char *bk_ffi_store_error(bk_store_t *st)
{
    return st->err;
}

int bk_ffi_store_get(bk_store_t *st, const char *key, size_t klen, const char **value, size_t *vlen)
{
    size_t plen;
    const char *pk = bk_store_prefixed(st, key, klen, &plen);
    char *err = NULL, *v;

    v = rocksdb_writebatch_wi_get_from_batch_and_db_cf(st->db->batch, st->db->rdb, st->db->ropts,
                                                       st->cf, pk, plen, vlen, &err);
    if (err) {
        snprintf(st->err, sizeof(st->err), "store %s: get failed: %s", st->name, err);
        free(err);
        return BK_FFI_ERR;
    }
    if (!v) {
        return 0;
    }
    {
        const char *live = bk_ttl_live(st, v, vlen, bk_ttl_now(st, 0));
        if (!live) {
            free(v);
            return 0;
        }
        if (st->ttl_ms > 0) {
            st->last_wtime = bk_ttl_time(v);
        }
        /* Copied into the store's buffer so that Lua needs no second call to
         * free it; valid until the next get on this store. */
        if (*vlen > st->vcap) {
            st->vcap = *vlen * 2 + 64;
            st->vbuf = realloc(st->vbuf, st->vcap);
        }
        memcpy(st->vbuf, live, *vlen);
    }
    free(v);
    *value = st->vbuf;
    return 1;
}

/* -- TTL (store_internal.h) -------------------------------------------------------------------- */

int64_t bk_ttl_now(const bk_store_t *st, int query)
{
    if (st->ttl_wall && query) {
        return bk_clock_wall_ms();
    }
    return atomic_load_explicit(&((bk_store_t *)st)->now, memory_order_relaxed);
}

void bk_ffi_store_set_ttl(bk_store_t *st, int64_t ttl_ms, int32_t wall)
{
    st->ttl_ms = st->window ? 0 : ttl_ms;
    st->ttl_wall = wall != 0;
}

void bk_ffi_store_set_now(bk_store_t *st, int64_t now)
{
    if (st->ttl_wall) {
        atomic_store_explicit(&st->now, now, memory_order_relaxed);
    } else {
        bk_ttl_saw(st, now);
    }
}

int64_t bk_ffi_store_last_wtime(bk_store_t *st)
{
    return st->last_wtime;
}

/* The sweep: from where the last one stopped, up to max_keys entries are looked at and the
 * expired ones deleted (tombstones in the changelog, at the store's clock). The keys are
 * collected first: a write moves the batch the iterator reads. */
int64_t bk_ffi_store_expire(bk_store_t *st, int32_t max_keys)
{
    rocksdb_iterator_t *base, *it;
    int64_t now = bk_ttl_now(st, 0), n = 0;
    char **keys;
    size_t *lens;
    int nk = 0, end = 1;

    if (st->ttl_ms <= 0 || st->open_iters > 0 || max_keys <= 0) {
        return 0;
    }
    keys = calloc((size_t)max_keys, sizeof(*keys));
    lens = calloc((size_t)max_keys, sizeof(*lens));
    if (!keys || !lens) {
        free(keys);
        free(lens);
        snprintf(st->err, sizeof(st->err), "store %s: out of memory", st->name);
        return BK_FFI_ERR;
    }
    base = rocksdb_create_iterator_cf(st->db->rdb, st->db->ropts, st->cf);
    it = rocksdb_writebatch_wi_create_iterator_with_base_cf(st->db->batch, base, st->cf);
    if (st->sweep_len) {
        rocksdb_iter_seek(it, st->sweep, st->sweep_len);
    } else {
        rocksdb_iter_seek_to_first(it);
    }
    for (int seen = 0; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
        if (seen++ == max_keys) {
            /* the next sweep starts here */
            char *s = realloc(st->sweep, kl + 1);
            if (s) {
                memcpy(s, k, kl);
                st->sweep = s;
                st->sweep_len = kl;
                end = 0;
            }
            break;
        }
        if (kl > KG_BYTES && !bk_ttl_live(st, v, &vl, now) && (keys[nk] = malloc(kl))) {
            memcpy(keys[nk], k + KG_BYTES, kl - KG_BYTES);
            lens[nk++] = kl - KG_BYTES;
        }
    }
    if (end) {
        st->sweep_len = 0; /* round again from the start next time */
    }
    rocksdb_iter_destroy(it);
    for (int i = 0; i < nk; i++) {
        if (n >= 0 && bk_ffi_store_delete(st, keys[i], lens[i], now) != BK_FFI_OK) {
            n = BK_FFI_ERR;
        } else if (n >= 0) {
            n++;
        }
        free(keys[i]);
    }
    free(keys);
    free(lens);
    return n;
}

int bk_store_log_write(bk_store_t *st, const char *key, size_t klen, const char *value, size_t vlen,
                       int64_t timestamp)
{
    rd_kafka_resp_err_t err;
    if (!st->logged || !st->changelog) {
        return BK_FFI_OK;
    }
    for (;;) {
        err = rd_kafka_producev(st->producer, RD_KAFKA_V_RKT(st->changelog),
                                RD_KAFKA_V_PARTITION(st->partition),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, klen),
                                RD_KAFKA_V_VALUE((void *)value, vlen),
                                RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0),
                                RD_KAFKA_V_OPAQUE(st), RD_KAFKA_V_END);
        if (!err) {
            st->unmarked = !bk_keys_is_marker(key, klen);
            return BK_FFI_OK;
        }
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            snprintf(st->err, sizeof(st->err), "store %s: cannot write its changelog %s: %s",
                     st->name, rd_kafka_topic_name(st->changelog), rd_kafka_err2str(err));
            return BK_FFI_ERR;
        }
        rd_kafka_poll(st->producer, 5);
    }
}

static int check_writable(bk_store_t *st, const char *key, size_t klen)
{
    if (klen == sizeof(BK_KEYS_MARKER) - 1 && bk_keys_is_marker(key, klen)) {
        snprintf(st->err, sizeof(st->err),
                 "store %s: the key \\xffbeck-marker is reserved for "
                 "the changelog's commit markers",
                 st->name);
        return BK_FFI_ERR;
    }
    if (bk_keys_is_src(key, klen)) {
        snprintf(st->err, sizeof(st->err),
                 "store %s: the key \\xffbeck-src is reserved for the changelog's record of "
                 "the input applied",
                 st->name);
        return BK_FFI_ERR;
    }
    if (st->open_iters > 0) {
        snprintf(st->err, sizeof(st->err),
                 "store %s: cannot write while an iterator over it is open (read it to the end "
                 "or close it first)",
                 st->name);
        return BK_FFI_ERR;
    }
    return BK_FFI_OK;
}

int bk_ffi_store_put(bk_store_t *st, const char *key, size_t klen, const char *value, size_t vlen,
                     int64_t timestamp)
{
    size_t plen;
    const char *pk;
    if (check_writable(st, key, klen) != 0) {
        return BK_FFI_ERR;
    }
    pk = bk_store_prefixed(st, key, klen, &plen);
    if (st->ttl_ms > 0) {
        size_t tlen;
        const char *tv;
        /* a record without a time (a punctuation before any record): the store's clock,
         * else the wall clock, so that its changelog record carries the same time */
        if (timestamp < 0) {
            timestamp = bk_ttl_now(st, 0);
            timestamp = timestamp > 0 ? timestamp : bk_clock_wall_ms();
        }
        tv = bk_ttl_wrap(st, timestamp, value, vlen, &tlen);
        if (!tv) {
            snprintf(st->err, sizeof(st->err), "store %s: out of memory", st->name);
            return BK_FFI_ERR;
        }
        bk_ttl_saw(st, timestamp);
        rocksdb_writebatch_wi_put_cf(st->db->batch, st->cf, pk, plen, tv, tlen);
    } else {
        rocksdb_writebatch_wi_put_cf(st->db->batch, st->cf, pk, plen, value, vlen);
    }
    return bk_store_log_write(st, key, klen, value, vlen, timestamp);
}

int bk_ffi_store_delete(bk_store_t *st, const char *key, size_t klen, int64_t timestamp)
{
    size_t plen;
    const char *pk;
    if (check_writable(st, key, klen) != 0) {
        return BK_FFI_ERR;
    }
    pk = bk_store_prefixed(st, key, klen, &plen);
    rocksdb_writebatch_wi_delete_cf(st->db->batch, st->cf, pk, plen);
    return bk_store_log_write(st, key, klen, NULL, 0, timestamp);
}

int64_t bk_ffi_store_approximate_count(bk_store_t *st)
{
    uint64_t n = 0;
    rocksdb_property_int_cf(st->db->rdb, st->cf, "rocksdb.estimate-num-keys", &n);
    return (int64_t)n + rocksdb_writebatch_wi_count(st->db->batch);
}

struct bk_dedup_s *bk_store_dedup(bk_store_t *st)
{
    if (!st->src) {
        st->src = bk_dedup_new();
    }
    return st->src;
}

int bk_store_unmarked(const bk_store_t *st)
{
    return st->unmarked;
}
