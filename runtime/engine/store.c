/* store.c - RocksDB stores with key-group prefixes, changelogs, checkpoints. */
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

#include "base/ffi.h"
#include "base/hash.h"
#include "base/fs.h"
#include "base/log.h"

#define KG_BYTES 2
#define RESTORE_BATCH 1000

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
    int64_t next;      /* next changelog offset reflected, -1 unknown */
    int open_iters;    /* writes are refused while > 0 (they would move the batch) */
    rocksdb_writebatch_t *restore_batch;
    /* Restore and standby: changelog records after the last commit marker, applied when the
     * next commit marker arrives and dropped by an abort marker (docs/state.md, Markers). */
    rocksdb_writebatch_t *pending;
    int64_t npending;
    /* The changelog keys of the pending records ([u32 length][bytes]...): when a takeover
     * drops them, each is written again with its committed value (bk_store_repair), so
     * that the log cleaner, which keeps a key's newest record, never keeps a dropped one. */
    char *pkeys;
    size_t pkeys_len, pkeys_cap;
    int repair; /* pkeys hold the keys of dropped records, to be repaired */
    int marked; /* a marker was read: records wait for theirs from now on */
    /* The input offsets (next to read, -1: none) that the state corresponds to: from the
     * checkpoint, the last marker applied, or the active's commit. ninput 0: unknown. */
    int64_t input[BK_STORE_MAX_INPUTS];
    int ninput;
    char *kbuf, *vbuf; /* prefixed key; last value read */
    size_t kcap, vcap;
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
};

/* -- Keys --------------------------------------------------------------- */

static uint32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* The record key inside a window-store key (see store.h); NULL if the key
 * does not have that shape. */
static const char *window_record_key(const char *key, size_t klen, size_t *rlen)
{
    size_t off = 0;
    uint32_t len;
    if (klen >= 4 && be32(key) == 0xffffffffu) {
        off = 12; /* index entry: skip the marker and the time */
    }
    if (klen < off + 4) {
        return NULL;
    }
    len = be32(key + off);
    if (len == 0xffffffffu || klen - off - 4 < len) {
        return NULL;
    }
    *rlen = len;
    return key + off + 4;
}

static int group_of(const bk_store_t *st, const char *key, size_t klen)
{
    if (st->window) {
        size_t rlen;
        const char *rk = window_record_key(key, klen, &rlen);
        if (rk) {
            return bk_hash_key_group(rk, rlen);
        }
    }
    return bk_hash_key_group(key, klen);
}

/* [group hi][group lo][key...] into st->kbuf. */
static const char *prefixed(bk_store_t *st, const char *key, size_t klen, size_t *out_len)
{
    int g = group_of(st, key, klen);
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

/* -- Open and close ----------------------------------------------------- */

/* Lines "<store> <next changelog offset> [<n> <input offset>...]" after the header. */
static void read_checkpoint(bk_db_t *db)
{
    char path[4096], line[4096], name[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/checkpoint", db->dir);
    f = fopen(path, "r");
    if (!f) {
        return;
    }
    if (!fgets(line, sizeof(line), f) || strncmp(line, "beck-checkpoint ", 16) != 0) {
        fclose(f);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        char *p = line, *end;
        long long off, n;
        int used = 0;
        if (sscanf(p, "%255s %lld%n", name, &off, &used) != 2) {
            continue;
        }
        p += used;
        for (int i = 0; i < db->nstores; i++) {
            bk_store_t *st = &db->stores[i];
            if (strcmp(st->name, name) != 0) {
                continue;
            }
            st->next = off;
            n = strtoll(p, &end, 10);
            if (end != p && n > 0 && n <= BK_STORE_MAX_INPUTS) {
                st->ninput = (int)n;
                for (int j = 0; j < st->ninput; j++) {
                    p = end;
                    st->input[j] = strtoll(p, &end, 10);
                }
            }
        }
    }
    fclose(f);
}

bk_db_t *bk_db_open(const char *dir, const bk_store_spec_t *specs, int nspecs, char *errstr,
                    size_t errstr_size)
{
    bk_db_t *db = calloc(1, sizeof(*db));
    char path[4096], *err = NULL, **existing = NULL;
    size_t nexisting = 0;
    const char **names;
    const rocksdb_options_t **cfopts;
    int n = 0;

    db->dir = strdup(dir);
    if (bk_fs_mkdirs(dir) != 0) {
        snprintf(errstr, errstr_size, "cannot create state directory %s: %s", dir,
                 strerror(errno));
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/rocksdb", dir);
    db->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(db->opts, 1);
    rocksdb_options_set_create_missing_column_families(db->opts, 1);
    /* 8 MB memtables took puts ~1.7x faster than 64 MB ones (MEASURED.md). */
    rocksdb_options_set_write_buffer_size(db->opts, 8 << 20);
    rocksdb_options_set_max_open_files(db->opts, 256);
    /* RocksDB's own LOG shares the state directory: when the disk fills,
     * Debian's build (assertions on) aborts writing an error to a LOG whose
     * last write failed. Errors reach beck's log through returned statuses,
     * so the LOG keeps only its header (options). */
    rocksdb_options_set_info_log_level(db->opts, 5);
    rocksdb_options_set_keep_log_file_num(db->opts, 2);
    db->ropts = rocksdb_readoptions_create();
    db->wopts = rocksdb_writeoptions_create();
    db->wopts_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(db->wopts_sync, 1);

    /* Every family on disk must be opened, also stores the topology dropped. */
    existing = rocksdb_list_column_families(db->opts, path, &nexisting, &err);
    if (err) {
        free(err); /* a new DB has none */
        err = NULL;
        nexisting = 0;
    }
    names = calloc(nexisting + (size_t)nspecs + 1, sizeof(char *));
    names[n++] = "default";
    for (size_t i = 0; i < nexisting; i++) {
        if (strcmp(existing[i], "default") != 0) {
            names[n++] = existing[i];
        }
    }
    for (int i = 0; i < nspecs; i++) {
        int found = 0;
        for (int j = 0; j < n; j++) {
            found |= strcmp(names[j], specs[i].name) == 0;
        }
        if (!found) {
            names[n++] = specs[i].name;
        }
    }
    cfopts = calloc((size_t)n, sizeof(*cfopts));
    for (int i = 0; i < n; i++) {
        cfopts[i] = db->opts;
    }
    db->cfs = calloc((size_t)n, sizeof(*db->cfs));
    db->ncfs = n;
    db->rdb = rocksdb_open_column_families(db->opts, path, n, names, cfopts, db->cfs, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot open the state store %s: %s", path, err);
        free(err);
        free(cfopts);
        free(names);
        db->ncfs = 0;
        goto fail;
    }
    db->batch = rocksdb_writebatch_wi_create(0, 1);
    db->nstores = nspecs;
    db->stores = calloc((size_t)(nspecs ? nspecs : 1), sizeof(bk_store_t));
    for (int i = 0; i < nspecs; i++) {
        bk_store_t *st = &db->stores[i];
        st->db = db;
        st->name = strdup(specs[i].name);
        st->logged = specs[i].logged;
        st->window = specs[i].window;
        st->next = -1;
        for (int j = 0; j < n; j++) {
            if (strcmp(names[j], specs[i].name) == 0) {
                st->cf = db->cfs[j];
            }
        }
    }
    free(cfopts);
    free(names);
    if (existing) {
        rocksdb_list_column_families_destroy(existing, nexisting);
    }
    read_checkpoint(db);
    return db;

fail:
    if (existing) {
        rocksdb_list_column_families_destroy(existing, nexisting);
    }
    bk_db_close(db);
    return NULL;
}

void bk_db_close(bk_db_t *db)
{
    if (!db) {
        return;
    }
    for (int i = 0; i < db->nstores; i++) {
        bk_store_t *st = &db->stores[i];
        free(st->pkeys);
        if (st->pending) {
            rocksdb_writebatch_destroy(st->pending);
        }
        if (st->restore_batch) {
            rocksdb_writebatch_destroy(st->restore_batch);
        }
        free(st->name);
        free(st->topic);
        free(st->kbuf);
        free(st->vbuf);
    }
    if (db->rdb && db->ncfs > 0) {
        /* Flush the memtables so that the next open (a restart, or the active opening
         * the DB its standby filled) finds SST files and no WAL to replay: replaying a
         * standby's whole WAL took most of a failover's time. */
        rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
        char *err = NULL;
        rocksdb_flushoptions_set_wait(fo, 1);
        for (int i = 0; i < db->ncfs && !err; i++) {
            rocksdb_flush_cf(db->rdb, fo, db->cfs[i], &err);
        }
        if (err) {
            bk_log_warn("store: flush at close failed (the next open replays the WAL): %s", err);
            free(err);
        }
        rocksdb_flushoptions_destroy(fo);
    }
    for (int i = 0; i < db->ncfs; i++) {
        rocksdb_column_family_handle_destroy(db->cfs[i]);
    }
    if (db->rdb) {
        rocksdb_close(db->rdb);
    }
    if (db->batch) {
        rocksdb_writebatch_wi_destroy(db->batch);
    }
    if (db->opts) {
        rocksdb_options_destroy(db->opts);
        rocksdb_readoptions_destroy(db->ropts);
        rocksdb_writeoptions_destroy(db->wopts);
        rocksdb_writeoptions_destroy(db->wopts_sync);
    }
    free(db->cfs);
    free(db->stores);
    free(db->dir);
    free(db);
}

int bk_db_store_count(const bk_db_t *db)
{
    return db->nstores;
}

bk_store_t *bk_db_store(bk_db_t *db, int i)
{
    return &db->stores[i];
}

const char *bk_store_name(const bk_store_t *st)
{
    return st->name;
}

int bk_store_logged(const bk_store_t *st)
{
    return st->logged;
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

/* -- Commit and checkpoint ------------------------------------------------ */

static int db_failed(bk_db_t *db, char *errstr, size_t errstr_size)
{
    if (db->failed[0]) {
        snprintf(errstr, errstr_size, "%s", db->failed);
        return 1;
    }
    return 0;
}

int bk_db_commit(bk_db_t *db, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (db_failed(db, errstr, errstr_size)) {
        return -1;
    }
    if (rocksdb_writebatch_wi_count(db->batch) == 0) {
        return 0;
    }
    rocksdb_write_writebatch_wi(db->rdb, db->wopts_sync, db->batch, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", db->dir, err);
        snprintf(db->failed, sizeof(db->failed), "%s", errstr);
        free(err);
        return -1;
    }
    rocksdb_writebatch_wi_clear(db->batch);
    return 0;
}

int bk_db_checkpoint_file_write(const char *dir, const bk_checkpoint_line_t *lines, int n,
                                char *errstr, size_t errstr_size)
{
    char tmp[4096], path[4096], *buf;
    size_t cap = 32, len;
    int fd, dfd, rc = -1;

    for (int i = 0; i < n; i++) {
        assert(lines[i].ninputs >= 0 && lines[i].ninputs <= BK_STORE_MAX_INPUTS);
        cap += strlen(lines[i].store) + 48 + (size_t)lines[i].ninputs * 24;
    }
    buf = malloc(cap);
    len = (size_t)snprintf(buf, cap, "beck-checkpoint 1\n");
    for (int i = 0; i < n; i++) {
        const bk_checkpoint_line_t *l = &lines[i];
        len += (size_t)snprintf(buf + len, cap - len, "%s %lld", l->store, (long long)l->next);
        if (l->ninputs > 0) {
            len += (size_t)snprintf(buf + len, cap - len, " %d", l->ninputs);
            for (int j = 0; j < l->ninputs; j++) {
                len += (size_t)snprintf(buf + len, cap - len, " %lld", (long long)l->inputs[j]);
            }
        }
        len += (size_t)snprintf(buf + len, cap - len, "\n");
    }
    snprintf(tmp, sizeof(tmp), "%s/checkpoint.tmp", dir);
    snprintf(path, sizeof(path), "%s/checkpoint", dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) != 0) {
        snprintf(errstr, errstr_size, "cannot write checkpoint %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        goto out;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(errstr, errstr_size, "cannot rename %s: %s", tmp, strerror(errno));
        goto out;
    }
    /* The rename itself is durable only once the directory is synced. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

int bk_db_checkpoint(bk_db_t *db, char *errstr, size_t errstr_size)
{
    bk_checkpoint_line_t *lines;
    char *err = NULL;
    int n = 0, rc;

    if (db_failed(db, errstr, errstr_size)) {
        return -1;
    }
    /* Restored records were written without sync: make them durable before
     * a checkpoint claims them. */
    rocksdb_flush_wal(db->rdb, 1, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot sync the state store in %s: %s", db->dir, err);
        snprintf(db->failed, sizeof(db->failed), "%s", errstr);
        free(err);
        return -1;
    }
    lines = calloc((size_t)db->nstores + 1, sizeof(*lines));
    for (int i = 0; i < db->nstores; i++) {
        const bk_store_t *st = &db->stores[i];
        if (st->logged && st->next >= 0) {
            lines[n].store = st->name;
            lines[n].next = st->next;
            lines[n].ninputs = st->ninput;
            lines[n].inputs = st->input;
            n++;
        }
    }
    rc = bk_db_checkpoint_file_write(db->dir, lines, n, errstr, errstr_size);
    free(lines);
    return rc;
}

int bk_db_checkpoint_to(bk_db_t *db, const char *dir, char *errstr, size_t errstr_size)
{
    rocksdb_checkpoint_t *cp;
    char *err = NULL;

    if (db_failed(db, errstr, errstr_size)) {
        return -1;
    }
    if (rocksdb_writebatch_wi_count(db->batch) > 0) {
        snprintf(errstr, errstr_size,
                 "the state store in %s has uncommitted writes: a RocksDB checkpoint is taken "
                 "between commits",
                 db->dir);
        return -1;
    }
    /* Restored records a store counts in its next offset but has not written yet. */
    for (int i = 0; i < db->nstores; i++) {
        if (bk_store_restore_flush(&db->stores[i], errstr, errstr_size) != 0) {
            return -1;
        }
    }
    cp = rocksdb_checkpoint_object_create(db->rdb, &err);
    if (!err) {
        /* log_size_for_flush 0: memtables are flushed first, so the checkpoint holds SST
         * files and no WAL to replay */
        rocksdb_checkpoint_create(cp, dir, 0, &err);
    }
    if (cp) {
        rocksdb_checkpoint_object_destroy(cp);
    }
    if (err) {
        snprintf(errstr, errstr_size, "cannot make a RocksDB checkpoint of %s in %s: %s", db->dir,
                 dir, err);
        free(err);
        return -1;
    }
    return 0;
}

/* -- Restore -------------------------------------------------------------- */

/* "beck-commit 1 <n> <o>..." or "beck-abort 1 <n> <o>...": 1 commit, 0 abort, -1 not a
 * marker. Offsets into offs[BK_STORE_MAX_INPUTS], their count into *n. */
static int parse_marker(const void *value, size_t vlen, int64_t *offs, int *n)
{
    char buf[512], *p, *end;
    int kind;
    long long cnt;
    if (vlen < 12 || vlen >= sizeof(buf) || memcmp(value, "beck-", 5) != 0) {
        return -1;
    }
    memcpy(buf, value, vlen);
    buf[vlen] = '\0';
    if (strncmp(buf, "beck-commit 1 ", 14) == 0) {
        kind = 1;
        p = buf + 14;
    } else if (strncmp(buf, "beck-abort 1 ", 13) == 0) {
        kind = 0;
        p = buf + 13;
    } else {
        return -1;
    }
    cnt = strtoll(p, &end, 10);
    if (end == p || cnt < 0 || cnt > BK_STORE_MAX_INPUTS) {
        return -1;
    }
    for (int i = 0; i < cnt; i++) {
        p = end;
        offs[i] = strtoll(p, &end, 10);
        if (end == p) {
            return -1;
        }
    }
    *n = (int)cnt;
    return kind;
}

/* A changelog record into a write batch: a put, or a delete for a tombstone. */
static void batch_write(rocksdb_writebatch_t *b, bk_store_t *st, const char *pk, size_t plen,
                        const void *value, size_t vlen)
{
    if (value) {
        rocksdb_writebatch_put_cf(b, st->cf, pk, plen, value, vlen);
    } else {
        rocksdb_writebatch_delete_cf(b, st->cf, pk, plen);
    }
}

static int write_pending(bk_store_t *st, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (!st->pending || st->npending == 0) {
        return 0;
    }
    rocksdb_write(st->db->rdb, st->db->wopts, st->pending, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", st->db->dir,
                 err);
        free(err);
        return -1;
    }
    rocksdb_writebatch_clear(st->pending);
    st->npending = 0;
    st->pkeys_len = 0;
    return 0;
}

static void drop_pending(bk_store_t *st)
{
    if (st->pending) {
        rocksdb_writebatch_clear(st->pending);
    }
    st->npending = 0;
    st->pkeys_len = 0;
}

static void remember_key(bk_store_t *st, const void *key, size_t klen)
{
    uint32_t len = (uint32_t)klen;
    if (st->pkeys_len + sizeof(len) + klen > st->pkeys_cap) {
        st->pkeys_cap = (st->pkeys_len + sizeof(len) + klen) * 2 + 256;
        st->pkeys = realloc(st->pkeys, st->pkeys_cap);
    }
    memcpy(st->pkeys + st->pkeys_len, &len, sizeof(len));
    memcpy(st->pkeys + st->pkeys_len + sizeof(len), key, klen);
    st->pkeys_len += sizeof(len) + klen;
}

int bk_store_is_marker(const void *key, size_t klen)
{
    return !key || (klen == sizeof(BK_STORE_MARKER_KEY) - 1 &&
                    memcmp(key, BK_STORE_MARKER_KEY, klen) == 0);
}

int bk_store_restore_apply(bk_store_t *st, const void *key, size_t klen, const void *value,
                           size_t vlen, int64_t offset, char *errstr, size_t errstr_size)
{
    size_t plen;
    const char *pk;
    int64_t offs[BK_STORE_MAX_INPUTS];
    int n = 0, kind;

    if (bk_store_is_marker(key, klen) && value &&
        (kind = parse_marker(value, vlen, offs, &n)) >= 0) {
        /* what came before a marker is settled: legacy direct writes go first */
        if (bk_store_restore_flush(st, errstr, errstr_size) != 0) {
            return -1;
        }
        if (kind == 1 && write_pending(st, errstr, errstr_size) != 0) {
            return -1;
        }
        drop_pending(st);
        st->marked = 1;
        st->ninput = n;
        memcpy(st->input, offs, (size_t)n * sizeof(*offs));
        st->next = offset + 1;
        return 0;
    }
    if (!key) {
        return 0; /* a record without a key is none of ours */
    }
    pk = prefixed(st, key, klen, &plen);
    if (st->marked || st->ninput > 0) {
        /* wait for the commit marker that says these records' input was committed */
        if (!st->pending) {
            st->pending = rocksdb_writebatch_create();
        }
        batch_write(st->pending, st, pk, plen, value, vlen);
        st->npending++;
        remember_key(st, key, klen);
        return 0;
    }
    /* a changelog written before markers existed: every record counts */
    if (!st->restore_batch) {
        st->restore_batch = rocksdb_writebatch_create();
    }
    batch_write(st->restore_batch, st, pk, plen, value, vlen);
    st->next = offset + 1;
    if (rocksdb_writebatch_count(st->restore_batch) >= RESTORE_BATCH) {
        return bk_store_restore_flush(st, errstr, errstr_size);
    }
    return 0;
}

int64_t bk_store_restore_pending(const bk_store_t *st)
{
    return st->npending;
}

int bk_store_restore_resolve(bk_store_t *st, const int64_t *committed, int n, char *errstr,
                             size_t errstr_size)
{
    int ahead = 0;
    if (st->npending == 0) {
        return 0;
    }
    if (st->ninput != n) {
        ahead = 1; /* cannot compare: keep what was written, as before markers */
    } else {
        for (int i = 0; i < n; i++) {
            ahead |= committed[i] > st->input[i];
        }
    }
    if (!ahead) {
        size_t keys = st->pkeys_len;
        drop_pending(st);
        st->pkeys_len = keys; /* kept for bk_store_repair */
        st->repair = 1;
        return 0;
    }
    if (write_pending(st, errstr, errstr_size) != 0) {
        return -1;
    }
    st->ninput = n;
    memcpy(st->input, committed, (size_t)n * sizeof(*committed));
    return 1;
}

void bk_store_set_input(bk_store_t *st, const int64_t *offsets, int n)
{
    if (n > BK_STORE_MAX_INPUTS) {
        n = 0;
    }
    st->ninput = n;
    memcpy(st->input, offsets, (size_t)n * sizeof(*offsets));
}

static int log_write(bk_store_t *st, const char *key, size_t klen, const char *value, size_t vlen,
                     int64_t timestamp);

int bk_store_write_marker(bk_store_t *st, int commit, const int64_t *offsets, int n)
{
    char buf[512];
    int len;
    if (!st->logged || !st->changelog || n > BK_STORE_MAX_INPUTS) {
        return BK_FFI_OK;
    }
    len = snprintf(buf, sizeof(buf), "%s 1 %d", commit ? "beck-commit" : "beck-abort", n);
    for (int i = 0; i < n; i++) {
        len += snprintf(buf + len, sizeof(buf) - (size_t)len, " %lld", (long long)offsets[i]);
    }
    return log_write(st, BK_STORE_MARKER_KEY, sizeof(BK_STORE_MARKER_KEY) - 1, buf, (size_t)len,
                     0);
}

int bk_store_repair(bk_store_t *st, int64_t *written)
{
    size_t off = 0;
    *written = 0;
    if (!st->repair) {
        return BK_FFI_OK;
    }
    while (off < st->pkeys_len) {
        uint32_t klen;
        const char *key, *pk;
        char *v, *err = NULL;
        size_t plen, vlen = 0;
        int rc;
        memcpy(&klen, st->pkeys + off, sizeof(klen));
        key = st->pkeys + off + sizeof(klen);
        off += sizeof(klen) + klen;
        pk = prefixed(st, key, klen, &plen);
        v = rocksdb_get_cf(st->db->rdb, st->db->ropts, st->cf, pk, plen, &vlen, &err);
        if (err) {
            snprintf(st->err, sizeof(st->err), "store %s: get failed: %s", st->name, err);
            free(err);
            return BK_FFI_ERR;
        }
        rc = log_write(st, key, klen, v, v ? vlen : 0, 0);
        free(v);
        if (rc != BK_FFI_OK) {
            return rc;
        }
        (*written)++;
    }
    st->pkeys_len = 0;
    st->repair = 0;
    return BK_FFI_OK;
}

int bk_store_restore_flush(bk_store_t *st, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (!st->restore_batch || rocksdb_writebatch_count(st->restore_batch) == 0) {
        return 0;
    }
    rocksdb_write(st->db->rdb, st->db->wopts, st->restore_batch, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", st->db->dir,
                 err);
        free(err);
        return -1;
    }
    rocksdb_writebatch_clear(st->restore_batch);
    return 0;
}

/* -- FFI: the per-record calls -------------------------------------------- */

const char *bk_ffi_store_error(bk_store_t *st)
{
    return st->err;
}

int bk_ffi_store_get(bk_store_t *st, const char *key, size_t klen, const char **value,
                     size_t *vlen)
{
    size_t plen;
    const char *pk = prefixed(st, key, klen, &plen);
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
    /* Copied into the store's buffer so that Lua needs no second call to
     * free it; valid until the next get on this store. */
    if (*vlen > st->vcap) {
        st->vcap = *vlen * 2 + 64;
        st->vbuf = realloc(st->vbuf, st->vcap);
    }
    memcpy(st->vbuf, v, *vlen);
    free(v);
    *value = st->vbuf;
    return 1;
}

static int log_write(bk_store_t *st, const char *key, size_t klen, const char *value, size_t vlen,
                     int64_t timestamp)
{
    rd_kafka_resp_err_t err;
    if (!st->logged || !st->changelog) {
        return BK_FFI_OK;
    }
    for (;;) {
        err = rd_kafka_producev(st->producer, RD_KAFKA_V_RKT(st->changelog),
                                RD_KAFKA_V_PARTITION(st->partition),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)value, vlen),
                                RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0),
                                RD_KAFKA_V_OPAQUE(st), RD_KAFKA_V_END);
        if (!err) {
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
    if (klen == sizeof(BK_STORE_MARKER_KEY) - 1 && bk_store_is_marker(key, klen)) {
        snprintf(st->err, sizeof(st->err), "store %s: the key \\xffbeck-marker is reserved for "
                 "the changelog's commit markers", st->name);
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
    pk = prefixed(st, key, klen, &plen);
    rocksdb_writebatch_wi_put_cf(st->db->batch, st->cf, pk, plen, value, vlen);
    return log_write(st, key, klen, value, vlen, timestamp);
}

int bk_ffi_store_delete(bk_store_t *st, const char *key, size_t klen, int64_t timestamp)
{
    size_t plen;
    const char *pk;
    if (check_writable(st, key, klen) != 0) {
        return BK_FFI_ERR;
    }
    pk = prefixed(st, key, klen, &plen);
    rocksdb_writebatch_wi_delete_cf(st->db->batch, st->cf, pk, plen);
    return log_write(st, key, klen, NULL, 0, timestamp);
}

int64_t bk_ffi_store_approximate_count(bk_store_t *st)
{
    uint64_t n = 0;
    rocksdb_property_int_cf(st->db->rdb, st->cf, "rocksdb.estimate-num-keys", &n);
    return (int64_t)n + rocksdb_writebatch_wi_count(st->db->batch);
}

/* -- FFI: iterators --------------------------------------------------------
 * Keys are ordered by key group first, so a scan in user-key order merges
 * one cursor per key group present (a binary heap on the current user key).
 * Each cursor reads the batch over the DB, so uncommitted writes show. */

typedef struct {
    rocksdb_iterator_t *it;
    unsigned char group[KG_BYTES];
} cursor_t;

struct bk_store_iter_s {
    bk_store_t *st;
    int mode;
    char *lo, *hi; /* user keys; range: [lo, hi], prefix: lo */
    size_t lolen, hilen;
    cursor_t *cur;
    int ncur;
    int *heap, nheap;
    int last; /* cursor returned last, advanced on the next call */
    int closed;
};

static rocksdb_iterator_t *new_iter(bk_store_t *st)
{
    rocksdb_iterator_t *base = rocksdb_create_iterator_cf(st->db->rdb, st->db->ropts, st->cf);
    /* takes over base */
    return rocksdb_writebatch_wi_create_iterator_with_base_cf(st->db->batch, base, st->cf);
}

/* Is the cursor on a key of its group that the scan wants? */
static int cursor_ok(bk_store_iter_t *it, cursor_t *c)
{
    size_t klen;
    const char *k;
    if (!rocksdb_iter_valid(c->it)) {
        return 0;
    }
    k = rocksdb_iter_key(c->it, &klen);
    if (klen < KG_BYTES || memcmp(k, c->group, KG_BYTES) != 0) {
        return 0;
    }
    k += KG_BYTES;
    klen -= KG_BYTES;
    if (it->mode == BK_FFI_ITER_PREFIX) {
        return klen >= it->lolen && memcmp(k, it->lo, it->lolen) == 0;
    }
    if (it->mode == BK_FFI_ITER_RANGE && it->hi) {
        size_t m = klen < it->hilen ? klen : it->hilen;
        int c2 = memcmp(k, it->hi, m);
        return c2 < 0 || (c2 == 0 && klen <= it->hilen);
    }
    return 1;
}

static int key_less(cursor_t *a, cursor_t *b)
{
    size_t la, lb, m;
    const char *ka = rocksdb_iter_key(a->it, &la) + KG_BYTES;
    const char *kb = rocksdb_iter_key(b->it, &lb) + KG_BYTES;
    int c;
    la -= KG_BYTES;
    lb -= KG_BYTES;
    m = la < lb ? la : lb;
    c = memcmp(ka, kb, m);
    return c < 0 || (c == 0 && la < lb);
}

static void sift_down(bk_store_iter_t *it, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i, t;
        if (l < it->nheap && key_less(&it->cur[it->heap[l]], &it->cur[it->heap[m]])) {
            m = l;
        }
        if (r < it->nheap && key_less(&it->cur[it->heap[r]], &it->cur[it->heap[m]])) {
            m = r;
        }
        if (m == i) {
            return;
        }
        t = it->heap[i];
        it->heap[i] = it->heap[m];
        it->heap[m] = t;
        i = m;
    }
}

static void seek_start(bk_store_iter_t *it, cursor_t *c)
{
    size_t n = KG_BYTES + (it->mode == BK_FFI_ITER_ALL ? 0 : it->lolen);
    char *k = malloc(n + 1);
    memcpy(k, c->group, KG_BYTES);
    if (n > KG_BYTES) {
        memcpy(k + KG_BYTES, it->lo, it->lolen);
    }
    rocksdb_iter_seek(c->it, k, n);
    free(k);
}

/* Does the scan stay within one record key of a window store? For a prefix,
 * when it holds a whole [length][key]; for a range, when both bounds hold
 * the same one. */
static int single_group(const bk_store_iter_t *it)
{
    size_t la, lb;
    const char *ka, *kb;
    if (it->mode == BK_FFI_ITER_ALL || !it->lo ||
        !(ka = window_record_key(it->lo, it->lolen, &la))) {
        return 0;
    }
    if (it->mode == BK_FFI_ITER_PREFIX) {
        return 1;
    }
    if (!it->hi || !(kb = window_record_key(it->hi, it->hilen, &lb))) {
        return 0;
    }
    return la == lb && ka - it->lo == kb - it->hi &&
           memcmp(it->lo, it->hi, (size_t)(ka - it->lo) + la) == 0;
}

bk_store_iter_t *bk_ffi_store_iter_new(bk_store_t *st, int mode, const char *a, size_t alen,
                                       const char *b, size_t blen)
{
    bk_store_iter_t *it = calloc(1, sizeof(*it));
    int cap = 16;

    it->st = st;
    it->mode = mode;
    it->last = -1;
    if (a) {
        it->lo = malloc(alen + 1);
        memcpy(it->lo, a, alen);
        it->lolen = alen;
    }
    if (b) {
        it->hi = malloc(blen + 1);
        memcpy(it->hi, b, blen);
        it->hilen = blen;
    }
    if (mode != BK_FFI_ITER_ALL && !it->lo) {
        it->lo = calloc(1, 1); /* range from the first key */
    }
    it->cur = calloc((size_t)cap, sizeof(cursor_t));
    if (st->window && single_group(it)) {
        /* one record key: its group is the only one to read */
        int g = group_of(st, it->lo, it->lolen);
        it->cur[0].group[0] = (unsigned char)(g >> 8);
        it->cur[0].group[1] = (unsigned char)(g & 0xff);
        it->ncur = 1;
    } else {
        /* Find the groups present: jump from one to the next with seeks. */
        rocksdb_iterator_t *probe = new_iter(st);
        rocksdb_iter_seek_to_first(probe);
        while (rocksdb_iter_valid(probe)) {
            size_t klen;
            const unsigned char *k = (const unsigned char *)rocksdb_iter_key(probe, &klen);
            int g;
            unsigned char next[KG_BYTES];
            if (klen < KG_BYTES) {
                rocksdb_iter_next(probe);
                continue;
            }
            g = k[0] << 8 | k[1];
            if (it->ncur == cap) {
                cap *= 2;
                it->cur = realloc(it->cur, (size_t)cap * sizeof(cursor_t));
            }
            it->cur[it->ncur].group[0] = k[0];
            it->cur[it->ncur].group[1] = k[1];
            it->cur[it->ncur].it = NULL;
            it->ncur++;
            if (g + 1 >= 65536) {
                break;
            }
            next[0] = (unsigned char)((g + 1) >> 8);
            next[1] = (unsigned char)((g + 1) & 0xff);
            rocksdb_iter_seek(probe, (const char *)next, KG_BYTES);
        }
        rocksdb_iter_destroy(probe);
    }
    it->heap = calloc((size_t)(it->ncur ? it->ncur : 1), sizeof(int));
    for (int i = 0; i < it->ncur; i++) {
        cursor_t *c = &it->cur[i];
        c->it = new_iter(st);
        seek_start(it, c);
        if (cursor_ok(it, c)) {
            it->heap[it->nheap++] = i;
        }
    }
    for (int i = it->nheap / 2 - 1; i >= 0; i--) {
        sift_down(it, i);
    }
    st->open_iters++;
    return it;
}

int bk_ffi_store_iter_next(bk_store_iter_t *it, const char **key, size_t *klen,
                           const char **value, size_t *vlen)
{
    cursor_t *c;
    if (it->closed) {
        return 0;
    }
    if (it->last >= 0) {
        c = &it->cur[it->last];
        rocksdb_iter_next(c->it);
        if (!cursor_ok(it, c)) {
            it->heap[0] = it->heap[--it->nheap];
        }
        sift_down(it, 0);
        it->last = -1;
    }
    if (it->nheap == 0) {
        it->closed = 1;
        it->st->open_iters--;
        return 0;
    }
    c = &it->cur[it->heap[0]];
    it->last = it->heap[0];
    *key = rocksdb_iter_key(c->it, klen) + KG_BYTES;
    *klen -= KG_BYTES;
    *value = rocksdb_iter_value(c->it, vlen);
    return 1;
}

void bk_ffi_store_iter_free(bk_store_iter_t *it)
{
    if (!it) {
        return;
    }
    if (!it->closed) {
        it->st->open_iters--;
    }
    for (int i = 0; i < it->ncur; i++) {
        if (it->cur[i].it) {
            rocksdb_iter_destroy(it->cur[i].it);
        }
    }
    free(it->cur);
    free(it->heap);
    free(it->lo);
    free(it->hi);
    free(it);
}
