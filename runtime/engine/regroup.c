/* regroup.c - a task's state built from other tasks' state by key-group ranges
 * (regroup.h, docs/repartitioning.md). */
#define _GNU_SOURCE

#include "engine/regroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/hash.h"

#define KG_BYTES 2

/* The first key of group g: [g hi][g lo]. Group BK_HASH_KEY_GROUPS bounds every key. */
static void group_key(int32_t g, char out[KG_BYTES])
{
    out[0] = (char)(g >> 8);
    out[1] = (char)(g & 0xff);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The primary source's files into dst: SST and blob files hard-linked (copied across file
 * systems), the small metadata copied (the new DB writes a new MANIFEST on open, so the
 * source's is never appended to through a link). Not the LOCK, the info logs, the
 * identity (the new DB makes its own) or beck's checkpoint file. */
static int clone_dir(const char *src, const char *dst, int64_t *linked, char *errstr,
                     size_t errstr_size)
{
    DIR *d = opendir(src);
    struct dirent *e;
    char from[4096], to[4096];
    int rc = 0;

    if (!d) {
        snprintf(errstr, errstr_size, "cannot read %s: %s", src, strerror(errno));
        return -1;
    }
    while (rc == 0 && (e = readdir(d))) {
        struct stat stbuf;
        const char *n = e->d_name;
        if (n[0] == '.' || strcmp(n, "LOCK") == 0 || strncmp(n, "LOG", 3) == 0 ||
            strcmp(n, "IDENTITY") == 0 || strncmp(n, "checkpoint", 10) == 0) {
            continue;
        }
        snprintf(from, sizeof(from), "%s/%s", src, n);
        snprintf(to, sizeof(to), "%s/%s", dst, n);
        if (stat(from, &stbuf) != 0 || !S_ISREG(stbuf.st_mode)) {
            continue;
        }
        if (ends_with(n, ".sst") || ends_with(n, ".blob")) {
            if (link(from, to) == 0) {
                *linked += stbuf.st_size;
                continue;
            }
            if (errno != EXDEV && errno != EPERM) {
                snprintf(errstr, errstr_size, "cannot link %s to %s: %s", from, to,
                         strerror(errno));
                rc = -1;
                break;
            }
        }
        rc = bk_fs_copy_file(from, to, errstr, errstr_size);
    }
    closedir(d);
    return rc;
}

/* -- A DB and its column families ---------------------------------------------------------- */

typedef struct rdb {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    char **names;
    size_t n;
    rocksdb_column_family_handle_t **cfs;
} rdb_t;

static void rdb_close(rdb_t *r)
{
    for (size_t i = 0; r->cfs && i < r->n; i++) {
        if (r->cfs[i]) {
            rocksdb_column_family_handle_destroy(r->cfs[i]);
        }
    }
    free(r->cfs);
    if (r->db) {
        rocksdb_close(r->db);
    }
    if (r->names) {
        rocksdb_list_column_families_destroy(r->names, r->n);
    }
    if (r->opts) {
        rocksdb_options_destroy(r->opts);
    }
    memset(r, 0, sizeof(*r));
}

static int rdb_open(rdb_t *r, const char *dir, int read_only, char *errstr, size_t errstr_size)
{
    char *err = NULL;
    const rocksdb_options_t **cfopts;

    memset(r, 0, sizeof(*r));
    r->opts = rocksdb_options_create();
    r->names = rocksdb_list_column_families(r->opts, dir, &r->n, &err);
    if (err) {
        snprintf(errstr, errstr_size, "cannot read the column families of %s: %s", dir, err);
        free(err);
        rdb_close(r); /* frees the (empty) list RocksDB returns with an error too */
        return -1;
    }
    cfopts = calloc(r->n, sizeof(*cfopts));
    r->cfs = calloc(r->n, sizeof(*r->cfs));
    if (!cfopts || !r->cfs) {
        free(cfopts);
        snprintf(errstr, errstr_size, "out of memory");
        rdb_close(r);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++) {
        cfopts[i] = r->opts;
    }
    r->db = read_only ? rocksdb_open_for_read_only_column_families(
                            r->opts, dir, (int)r->n, (const char *const *)r->names, cfopts,
                            r->cfs, 0, &err)
                      : rocksdb_open_column_families(r->opts, dir, (int)r->n,
                                                     (const char *const *)r->names, cfopts,
                                                     r->cfs, &err);
    free(cfopts);
    if (err) {
        snprintf(errstr, errstr_size, "cannot open %s: %s", dir, err);
        free(err);
        r->db = NULL;
        rdb_close(r);
        return -1;
    }
    return 0;
}

static rocksdb_column_family_handle_t *rdb_cf(const rdb_t *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->names[i], name) == 0) {
            return r->cfs[i];
        }
    }
    return NULL;
}

/* -- Build ------------------------------------------------------------------------------------ */

static int32_t overlap(int32_t lo, int32_t hi, int32_t a, int32_t b)
{
    int32_t from = lo > a ? lo : a, to = hi < b ? hi : b;
    return to > from ? to - from : 0;
}

/* Drops from one column family of dst everything outside [lo, hi): whole files first (no
 * rewrite), then range tombstones for what is left (compactions remove it later). */
static int drop_outside(rdb_t *d, size_t i, int32_t lo, int32_t hi, rocksdb_writeoptions_t *wo,
                        char *errstr, size_t errstr_size)
{
    char a[KG_BYTES], b[KG_BYTES], *err = NULL;
    group_key(lo, a);
    group_key(hi, b);
    /* Keys start with a group < BK_HASH_KEY_GROUPS (0x1000): "\x10\x00" and past holds
     * none, but a range to "\xff\xff\xff" costs nothing and covers anything. */
    rocksdb_delete_file_in_range_cf(d->db, d->cfs[i], "", 0, a, KG_BYTES, &err);
    if (!err) {
        rocksdb_delete_file_in_range_cf(d->db, d->cfs[i], b, KG_BYTES, "\xff\xff\xff", 3, &err);
    }
    if (!err) {
        rocksdb_delete_range_cf(d->db, wo, d->cfs[i], "", 0, a, KG_BYTES, &err);
    }
    if (!err) {
        rocksdb_delete_range_cf(d->db, wo, d->cfs[i], b, KG_BYTES, "\xff\xff\xff", 3, &err);
    }
    if (err) {
        snprintf(errstr, errstr_size, "cannot drop key groups outside [%d, %d) of %s: %s", lo, hi,
                 d->names[i], err);
        free(err);
        return -1;
    }
    return 0;
}

/* Copies source `src`'s keys of groups [lo, hi) in one column family into an SST file and
 * ingests it into dst (moved, not copied again). */
static int copy_range(rdb_t *d, size_t i, rdb_t *s, const char *tmp, int32_t lo, int32_t hi,
                      bk_regroup_stats_t *stats, char *errstr, size_t errstr_size)
{
    rocksdb_column_family_handle_t *scf = rdb_cf(s, d->names[i]);
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it;
    rocksdb_envoptions_t *eo;
    rocksdb_sstfilewriter_t *w;
    char a[KG_BYTES], b[KG_BYTES], *err = NULL;
    int64_t keys = 0;
    int rc = 0;

    if (!scf) {
        return 0; /* a store the source never had: nothing of it to copy */
    }
    group_key(lo, a);
    group_key(hi, b);
    ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_upper_bound(ro, b, KG_BYTES);
    rocksdb_readoptions_set_fill_cache(ro, 0);
    eo = rocksdb_envoptions_create();
    w = rocksdb_sstfilewriter_create(eo, d->opts);
    it = rocksdb_create_iterator_cf(s->db, ro, scf);
    for (rocksdb_iter_seek(it, a, KG_BYTES); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
        if (keys == 0) {
            rocksdb_sstfilewriter_open(w, tmp, &err);
            if (err) {
                break;
            }
        }
        rocksdb_sstfilewriter_put(w, k, kl, v, vl, &err);
        if (err) {
            break;
        }
        keys++;
        stats->copied_bytes += (int64_t)(kl + vl);
    }
    if (!err) {
        rocksdb_iter_get_error(it, &err);
    }
    if (!err && keys > 0) {
        rocksdb_sstfilewriter_finish(w, &err);
    }
    if (!err && keys > 0) {
        rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
        const char *files[1] = {tmp};
        rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
        rocksdb_ingest_external_file_cf(d->db, d->cfs[i], files, 1, io, &err);
        rocksdb_ingestexternalfileoptions_destroy(io);
    }
    if (err) {
        snprintf(errstr, errstr_size, "cannot copy key groups [%d, %d) of %s: %s", lo, hi,
                 d->names[i], err);
        free(err);
        rc = -1;
    }
    stats->copied_keys += keys;
    unlink(tmp); /* moved when ingested; left behind when something failed */
    rocksdb_iter_destroy(it);
    rocksdb_sstfilewriter_destroy(w);
    rocksdb_envoptions_destroy(eo);
    rocksdb_readoptions_destroy(ro);
    return rc;
}

static int64_t count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int64_t n = 0;
    while (d && (e = readdir(d))) {
        n += ends_with(e->d_name, suffix);
    }
    if (d) {
        closedir(d);
    }
    return n;
}

int bk_regroup_build(const char *dst, const char *const *srcs, const int32_t *groups, int nsrc,
                     int32_t lo, int32_t hi, bk_regroup_stats_t *stats, char *errstr,
                     size_t errstr_size)
{
    rdb_t d = {0};
    rocksdb_writeoptions_t *wo = NULL;
    int64_t t0 = bk_clock_mono_ms(), before;
    int32_t primary = 0;
    char tmp[4096], *err = NULL;
    struct stat stbuf;

    memset(stats, 0, sizeof(*stats));
    stats->primary = -1;
    if (nsrc < 1 || lo < 0 || hi > BK_HASH_KEY_GROUPS || lo >= hi) {
        snprintf(errstr, errstr_size, "regroup: key groups [%d, %d) from %d sources", lo, hi,
                 nsrc);
        return -1;
    }
    if (stat(dst, &stbuf) == 0) {
        snprintf(errstr, errstr_size, "regroup: %s exists", dst);
        return -1;
    }
    for (int k = 1; k < nsrc; k++) {
        if (overlap(lo, hi, groups[2 * k], groups[2 * k + 1]) >
            overlap(lo, hi, groups[2 * primary], groups[2 * primary + 1])) {
            primary = k;
        }
    }
    if (bk_fs_mkdirs(dst) != 0) {
        snprintf(errstr, errstr_size, "cannot create %s: %s", dst, strerror(errno));
        return -1;
    }
    if (clone_dir(srcs[primary], dst, &stats->linked_bytes, errstr, errstr_size) != 0 ||
        rdb_open(&d, dst, 0, errstr, errstr_size) != 0) {
        goto fail;
    }
    stats->primary = primary;
    before = count_files(dst, ".sst");
    wo = rocksdb_writeoptions_create();
    for (size_t i = 0; i < d.n; i++) {
        if (drop_outside(&d, i, lo, hi, wo, errstr, errstr_size) != 0) {
            goto fail;
        }
    }
    stats->dropped_files = before - count_files(dst, ".sst");
    stats->sources_used = overlap(lo, hi, groups[2 * primary], groups[2 * primary + 1]) > 0;
    for (int k = 0; k < nsrc; k++) {
        int32_t a = lo > groups[2 * k] ? lo : groups[2 * k];
        int32_t b = hi < groups[2 * k + 1] ? hi : groups[2 * k + 1];
        rdb_t s;
        int64_t keys = stats->copied_keys;
        if (k == primary || a >= b) {
            continue;
        }
        if (rdb_open(&s, srcs[k], 1, errstr, errstr_size) != 0) {
            goto fail;
        }
        for (size_t i = 0; i < d.n; i++) {
            snprintf(tmp, sizeof(tmp), "%s/regroup-%d-%zu.sst.tmp", dst, k, i);
            if (copy_range(&d, i, &s, tmp, a, b, stats, errstr, errstr_size) != 0) {
                rdb_close(&s);
                goto fail;
            }
        }
        rdb_close(&s);
        stats->sources_used += stats->copied_keys > keys;
    }
    /* Durable before anyone relies on it: the range deletes went through the WAL; flushing
     * leaves the directory a DB without a WAL to replay, like the sources. */
    {
        rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
        rocksdb_flushoptions_set_wait(fo, 1);
        for (size_t i = 0; i < d.n && !err; i++) {
            rocksdb_flush_cf(d.db, fo, d.cfs[i], &err);
        }
        rocksdb_flushoptions_destroy(fo);
    }
    if (err) {
        snprintf(errstr, errstr_size, "cannot flush %s: %s", dst, err);
        free(err);
        goto fail;
    }
    rocksdb_writeoptions_destroy(wo);
    rdb_close(&d);
    bk_fs_sync_dir(dst);
    stats->elapsed_ms = bk_clock_mono_ms() - t0;
    return 0;

fail:
    if (wo) {
        rocksdb_writeoptions_destroy(wo);
    }
    rdb_close(&d);
    bk_fs_rm_tree(dst);
    return -1;
}

int bk_regroup_check(const char *dir, int32_t lo, int32_t hi, int32_t *first_bad, int64_t *nkeys,
                     char *errstr, size_t errstr_size)
{
    rdb_t r;
    int ok = 1;
    char *err = NULL;

    if (rdb_open(&r, dir, 1, errstr, errstr_size) != 0) {
        return -1;
    }
    if (nkeys) {
        *nkeys = 0;
    }
    for (size_t i = 0; i < r.n; i++) {
        rocksdb_readoptions_t *ro;
        rocksdb_iterator_t *it;
        if (strcmp(r.names[i], "default") == 0) {
            continue; /* no store's: the stores' formats (dbformat.h) */
        }
        ro = rocksdb_readoptions_create();
        it = rocksdb_create_iterator_cf(r.db, ro, r.cfs[i]);
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
            size_t kl;
            const unsigned char *k = (const unsigned char *)rocksdb_iter_key(it, &kl);
            int32_t g = kl >= KG_BYTES ? (int32_t)(k[0] << 8 | k[1]) : -1;
            if (nkeys) {
                (*nkeys)++;
            }
            if ((g < lo || g >= hi) && ok) {
                ok = 0;
                if (first_bad) {
                    *first_bad = g;
                }
            }
        }
        rocksdb_iter_get_error(it, &err);
        rocksdb_iter_destroy(it);
        rocksdb_readoptions_destroy(ro);
        if (err) {
            snprintf(errstr, errstr_size, "cannot read %s: %s", dir, err);
            free(err);
            rdb_close(&r);
            return -1;
        }
    }
    rdb_close(&r);
    return ok;
}
