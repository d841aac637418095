/* db.c - a task's RocksDB: open and close, the commit of a write batch, the checkpoint
 * file that records the changelog and input offsets the DB reflects (store.h). */
#include "engine/store.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "base/ffi.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/changelog.h"
#include "engine/db.h"
#include "engine/dbformat.h"
#include "engine/store_internal.h"

/* -- Open and close ----------------------------------------------------- */

/* Lines "<store> <next changelog offset> [<n> <input offset>...]" after the header, and a
 * store's dedup table (dedup.h) in lines "src: <store> <k>:<p>:<next>..." (which readers of
 * the first kind of line skip: a store's name has no colon, a topic's cannot). */
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
        if (sscanf(p, "src: %255s%n", name, &used) == 1) {
            for (int i = 0; i < db->nstores; i++) {
                bk_store_t *st = &db->stores[i];
                if (strcmp(st->name, name) == 0 && bk_store_dedup(st)) {
                    bk_dedup_parse(st->src, p + used, strlen(p + used));
                }
            }
            continue;
        }
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

/* -- Block cache and filters, shared by every DB of the process -------------------------
 * One LRU cache for all of a node's DBs (block_cache_bytes), rather than RocksDB's default of
 * a small one per DB, so that hot tasks get the memory; a whole-key bloom filter (10 bits a
 * key) spares a get of a missing key its reads of data blocks. Queries (dbread.h) spent a
 * third of their time reading blocks the per-DB caches had dropped (scripts/bench/query).
 * Index and filter blocks stay with their table readers, RocksDB's default: putting them in
 * the cache too made scripts/bench/pipe's count case ~7% slower (medians of 4-5 runs, 395k
 * vs 423k records/s). Made once, kept for the process's life. */
void bk_db_start_background(void)
{
    static rocksdb_env_t *env; /* the default Env's handle, kept for the process */
    if (!env && (env = rocksdb_create_default_env())) {
        /* more than the pools hold, so that they start now (2 each: what a DB's default
         * max_background_jobs asks for, and room) */
        rocksdb_env_set_background_threads(env, 2);
        rocksdb_env_set_high_priority_background_threads(env, 2);
    }
}

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static rocksdb_block_based_table_options_t *table_opts;
static size_t cache_bytes = BK_DB_CACHE_DEFAULT;

void bk_db_set_cache_bytes(size_t bytes)
{
    cache_bytes = bytes;
}

static size_t write_buffer_bytes = BK_DB_WRITE_BUFFER_DEFAULT;

void bk_db_set_write_buffer_bytes(size_t bytes)
{
    write_buffer_bytes = bytes;
}

static void make_table_opts(void)
{
    rocksdb_cache_t *cache = rocksdb_cache_create_lru(cache_bytes);
    table_opts = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(table_opts, cache);
    rocksdb_block_based_options_set_filter_policy(table_opts,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_cache_destroy(cache); /* the options hold their own reference */
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
        snprintf(errstr, errstr_size, "cannot create state directory %s: %s", dir, strerror(errno));
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/" BK_DB_ROCKSDB_DIR, dir);
    db->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(db->opts, 1);
    rocksdb_options_set_create_missing_column_families(db->opts, 1);
    /* 8 MB memtables (the default) took puts ~1.7x faster than 64 MB ones (MEASURED.md); a
     * node with many tasks holds one per store of each, and may want them smaller */
    rocksdb_options_set_write_buffer_size(db->opts, write_buffer_bytes);
    rocksdb_options_set_max_open_files(db->opts, 256);
    pthread_once(&table_once, make_table_opts);
    rocksdb_options_set_block_based_table_factory(db->opts, table_opts);
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
        st->ttl_ms = specs[i].window ? 0 : specs[i].ttl_ms;
        st->ttl_wall = specs[i].ttl_wall;
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
    /* a store whose settings changed its bytes on disk is not read with the wrong layout */
    if (bk_dbformat_settle(db, specs, nspecs, errstr, errstr_size) != 0) {
        goto fail;
    }
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
        if (st->live_iters) {
            bk_log_debug("store %s: closed with a scan not yet freed (released)", st->name);
        }
        bk_store_iters_detach(st);
        free(st->pkeys);
        bk_dedup_destroy(st->src);
        free(st->src_pending);
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
        free(st->tbuf);
        free(st->sweep);
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
    free(db->ckpt_last);
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
    return bk_db_commit_sync(db, 1, errstr, errstr_size);
}

int bk_db_commit_sync(bk_db_t *db, int sync, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    if (db_failed(db, errstr, errstr_size)) {
        return -1;
    }
    if (rocksdb_writebatch_wi_count(db->batch) == 0) {
        return 0;
    }
    rocksdb_write_writebatch_wi(db->rdb, sync ? db->wopts_sync : db->wopts, db->batch, &err);
    db->unsynced |= !sync;
    if (err) {
        snprintf(errstr, errstr_size, "cannot write the state store in %s: %s", db->dir, err);
        snprintf(db->failed, sizeof(db->failed), "%s", errstr);
        free(err);
        return -1;
    }
    rocksdb_writebatch_wi_clear(db->batch);
    return 0;
}

#define SRC_PER_LINE 100

/* The checkpoint file's text for `lines` (malloc'd, its length in *len). */
static char *checkpoint_text(const bk_checkpoint_line_t *lines, int n, size_t *len_out)
{
    size_t cap = 32, len;
    char *buf;

    for (int i = 0; i < n; i++) {
        int nsrc = lines[i].src ? bk_dedup_count(lines[i].src) : 0;
        assert(lines[i].ninputs >= 0 && lines[i].ninputs <= BK_STORE_MAX_INPUTS);
        cap += strlen(lines[i].store) + 48 + (size_t)lines[i].ninputs * 24;
        cap += (size_t)(nsrc / SRC_PER_LINE + 1) * (strlen(lines[i].store) + 8) +
               (size_t)nsrc * 48;
    }
    buf = malloc(cap);
    if (!buf) {
        return NULL;
    }
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
        /* the dedup table, SRC_PER_LINE entries a line (the reader's lines are 4 KiB) */
        for (int j = 0; l->src && j < bk_dedup_count(l->src); j++) {
            int k;
            int32_t p;
            int64_t next;
            bk_dedup_entry(l->src, j, &k, &p, &next);
            if (j % SRC_PER_LINE == 0) {
                len += (size_t)snprintf(buf + len, cap - len, "%ssrc: %s", j ? "\n" : "",
                                        l->store);
            }
            len += (size_t)snprintf(buf + len, cap - len, " %d:%d:%lld", k, (int)p,
                                    (long long)next);
            if (j + 1 == bk_dedup_count(l->src)) {
                len += (size_t)snprintf(buf + len, cap - len, "\n");
            }
        }
    }
    *len_out = len;
    return buf;
}

/* buf written durably as dir/checkpoint: a file synced, renamed over, the directory synced. */
static int write_checkpoint_text(const char *dir, const char *buf, size_t len, char *errstr,
                                 size_t errstr_size)
{
    char tmp[4096], path[4096];
    int fd, dfd;

    snprintf(tmp, sizeof(tmp), "%s/checkpoint.tmp", dir);
    snprintf(path, sizeof(path), "%s/checkpoint", dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) != 0) {
        snprintf(errstr, errstr_size, "cannot write checkpoint %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(errstr, errstr_size, "cannot rename %s: %s", tmp, strerror(errno));
        return -1;
    }
    /* The rename itself is durable only once the directory is synced. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int bk_db_checkpoint_file_write(const char *dir, const bk_checkpoint_line_t *lines, int n,
                                char *errstr, size_t errstr_size)
{
    size_t len;
    char *buf = checkpoint_text(lines, n, &len);
    int rc;
    if (!buf) {
        snprintf(errstr, errstr_size, "cannot write checkpoint in %s: out of memory", dir);
        return -1;
    }
    rc = write_checkpoint_text(dir, buf, len, errstr, errstr_size);
    free(buf);
    return rc;
}

int bk_db_checkpoint(bk_db_t *db, char *errstr, size_t errstr_size)
{
    bk_checkpoint_line_t *lines;
    char *err = NULL, *text;
    size_t len;
    int n = 0, rc;

    if (db_failed(db, errstr, errstr_size)) {
        return -1;
    }
    lines = calloc((size_t)db->nstores + 1, sizeof(*lines));
    if (!lines) {
        snprintf(errstr, errstr_size, "cannot checkpoint %s: out of memory", db->dir);
        return -1;
    }
    for (int i = 0; i < db->nstores; i++) {
        const bk_store_t *st = &db->stores[i];
        if (st->logged && st->next >= 0) {
            lines[n].store = st->name;
            lines[n].next = st->next;
            lines[n].ninputs = st->ninput;
            lines[n].inputs = st->input;
            lines[n].src = st->src;
            n++;
        }
    }
    text = checkpoint_text(lines, n, &len);
    free(lines);
    if (!text) {
        snprintf(errstr, errstr_size, "cannot checkpoint %s: out of memory", db->dir);
        return -1;
    }
    /* Nothing written since the last checkpoint (a task that read nothing, a drained one
     * released): the file on disk says it already, and three fsyncs a DB are skipped */
    if (!db->unsynced && db->ckpt_last && db->ckpt_len == len &&
        memcmp(db->ckpt_last, text, len) == 0) {
        free(text);
        return 0;
    }
    /* Restored records were written without sync: make them durable before
     * a checkpoint claims them. */
    rocksdb_flush_wal(db->rdb, 1, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot sync the state store in %s: %s", db->dir, err);
        snprintf(db->failed, sizeof(db->failed), "%s", errstr);
        free(err);
        free(text);
        return -1;
    }
    db->unsynced = 0;
    rc = write_checkpoint_text(db->dir, text, len, errstr, errstr_size);
    free(db->ckpt_last);
    db->ckpt_last = rc == 0 ? text : NULL;
    db->ckpt_len = rc == 0 ? len : 0;
    if (rc != 0) {
        free(text);
    }
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
        if (bk_changelog_flush(&db->stores[i], errstr, errstr_size) != 0) {
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
