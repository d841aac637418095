/* snapshot.h - a task's RocksDB checkpoint and its manifest: what cold bootstrap copies.
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
 * (as the checkpoint file of store.c). "file" lines give each file's size in bytes, its
 * XXH3-64 (16 hex digits) and its name. A name is one path component of [A-Za-z0-9._-],
 * at most 255 bytes, neither "." nor "..": the parser refuses anything else (absolute
 * paths, "../escape", "a/b"), so no manifest can make a reader write outside the
 * directory it fetches into. The manifest itself is not listed. "end" closes it: a
 * manifest cut short is refused.
 * @locality bk_snapshot_make: the task's owning stream thread (it reads the open DB);
 * the rest: any thread. */
#ifndef BK_SNAPSHOT_H
#define BK_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/store.h"

#define BK_SNAPSHOT_MANIFEST "beck-manifest"
#define BK_SNAPSHOT_MAX_FILES 100000

typedef struct bk_snapshot_file_s {
    char *name;    /* checked: one safe path component */
    uint64_t size; /* bytes */
    uint64_t xxh3; /* XXH3-64 of the content */
} bk_snapshot_file_t;

typedef struct bk_snapshot_store_s {
    char *name;      /* the store */
    char *changelog; /* its changelog topic */
    int32_t partition;
    int64_t next; /* next changelog offset the snapshot reflects */
    int ninputs;  /* 0: unknown */
    int64_t inputs[BK_STORE_MAX_INPUTS];
} bk_snapshot_store_t;

typedef struct bk_manifest_s {
    char *task; /* "S_P" */
    char *id;   /* unique per snapshot; also its directory's name */
    int64_t created_ms;
    int nstores;
    bk_snapshot_store_t *stores;
    int nfiles;
    bk_snapshot_file_t *files;
    uint64_t total_bytes; /* sum of the files' sizes */
} bk_manifest_t;

/* 1 when name is a safe file name of a manifest (see above), else 0. */
int bk_snapshot_name_ok(const char *name);

/* Parses a manifest. 0, or -1 with errstr saying what and on which line
 * ("manifest line 7: file name '../escape' leaves the snapshot directory: refused").
 * On success free it with bk_manifest_free. */
int bk_manifest_parse(const char *text, size_t len, bk_manifest_t *m, char *errstr,
                      size_t errstr_size);
/* Writes m to path atomically (tmp, fsync, rename). */
int bk_manifest_write(const bk_manifest_t *m, const char *path, char *errstr, size_t errstr_size);
void bk_manifest_free(bk_manifest_t *m);

/* XXH3-64 of a file's content, streaming. */
int bk_snapshot_file_xxh3(const char *path, uint64_t *out, uint64_t *size, char *errstr,
                          size_t errstr_size);

/* Makes a snapshot of the open db of task `task` in root/<id>/ (root is created if
 * missing): RocksDB checkpoint, then the manifest with the stores' changelog next offsets
 * and input offsets as the db has them now. Call between commits (no uncommitted batch).
 * Fills m (free with bk_manifest_free) and dir (the snapshot's directory). */
int bk_snapshot_make(bk_db_t *db, const char *task, const char *root, bk_manifest_t *m,
                     char *dir, size_t dir_size, char *errstr, size_t errstr_size);

/* Removes the snapshots under root created more than ttl_ms before now_ms (and any
 * directory there without a readable manifest, older than ttl_ms by its mtime).
 * Returns how many were removed. */
int bk_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now_ms);
/* Removes one snapshot directory (its files, then itself). */
int bk_snapshot_remove(const char *dir);

/* Makes a fetched snapshot the task's DB: checks every file of m in fetched_dir (size and
 * XXH3 against the manifest; a file not in the manifest is refused), then replaces
 * task_dir with fetched_dir (rename) and writes task_dir's checkpoint file (store.c's
 * format) from the manifest's store lines, so that bk_db_open(task_dir, ...) resumes
 * the changelogs at the manifest's offsets. 0, or -1 with errstr naming the file and
 * what was wrong ("000012.sst: checksum 0123... expected 4567...: refused"); task_dir
 * is untouched on failure. */
int bk_snapshot_install(const bk_manifest_t *m, const char *fetched_dir, const char *task_dir,
                        char *errstr, size_t errstr_size);

#endif
