/* manifest.h - a snapshot's manifest: what a task's snapshot holds, and the offsets it
reflects. engine/snapshot.h makes snapshots; replica/install.h installs fetched ones.
 *
 * An active makes a snapshot of a task between two commits: a RocksDB checkpoint (hard
 * links of the SST files, memtables flushed first, so no WAL) in its own directory
 * <state-dir>/<app>/snapshots/<id>/, and in it a manifest, the file "beck-manifest":
 *
 *     beck-snapshot 1
 *     task 0_3
 *     id 0_3-1764729600000-4242
 *     created_ms 1764729600000
 *     store count changelog wc-count-changelog 3 next 12345 inputs 1 999
 *     file 1048576 0123456789abcdef 000012.sst
 *     ...
 *     end
 *
 * "store" lines give, per store of the task, its changelog (topic, partition), the next
 * changelog offset the snapshot reflects, and the task's input offsets at that commit
 * (as the checkpoint file of db.c). "file" lines give each file's size in bytes, its
 * XXH3-64 (16 hex digits) and its name. A name is one path component of [A-Za-z0-9._-],
 * at most 255 bytes, neither "." nor "..": the parser refuses anything else (absolute
 * paths, "../escape", "a/b"), so no manifest can make a reader write outside the
 * directory it fetches into. The manifest itself is not listed. "end" closes it: a
 * manifest cut short is refused.
 * Any thread. */
#ifndef BK_MANIFEST_H
#define BK_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "engine/store.h"

#define BK_MANIFEST_NAME "beck-manifest"
#define BK_MANIFEST_MAX_FILES 100000
#define BK_MANIFEST_MAX_BYTES (256u << 20) /* 100,000 file lines are ~10 MB */

typedef struct bk_manifest_file_s {
    char *name;    /* checked: one safe path component */
    uint64_t size; /* bytes */
    uint64_t xxh3; /* XXH3-64 of the content */
} bk_manifest_file_t;

typedef struct bk_manifest_store_s {
    char *name;      /* the store */
    char *changelog; /* its changelog topic */
    int32_t partition;
    int64_t next; /* next changelog offset the snapshot reflects */
    int ninputs;  /* 0: unknown */
    int64_t inputs[BK_STORE_MAX_INPUTS];
} bk_manifest_store_t;

typedef struct bk_manifest_s {
    char *task; /* "S_P" */
    char *id;   /* unique per snapshot; also its directory's name */
    int64_t created_ms;
    int nstores;
    bk_manifest_store_t *stores;
    int nfiles;
    bk_manifest_file_t *files;
    uint64_t total_bytes; /* sum of the files' sizes */
} bk_manifest_t;

/* 1 when name is a safe file name of a manifest (see above), else 0. */
int bk_manifest_name_ok(const char *name);

/* Parses a manifest. 0, or -1 with errstr saying what and on which line
 * ("manifest line 7: file name '../escape' leaves the snapshot directory: refused").
 * On success free it with bk_manifest_free. */
int bk_manifest_parse(const char *text, size_t len, bk_manifest_t *m, char *errstr,
                      size_t errstr_size);
/* Reads the manifest file at path (at most BK_MANIFEST_MAX_BYTES) and parses it. */
int bk_manifest_read(const char *path, bk_manifest_t *m, char *errstr, size_t errstr_size);
/* Writes m to path atomically (tmp, fsync, rename). */
int bk_manifest_write(const bk_manifest_t *m, const char *path, char *errstr, size_t errstr_size);
void bk_manifest_free(bk_manifest_t *m);

#endif
