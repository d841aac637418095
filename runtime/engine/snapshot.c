/* snapshot.c - make a task's snapshot from its open DB, and sweep old ones (snapshot.h). */
#include "engine/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "engine/db.h"

#define MAX_NAME 255

int bk_snapshot_remove(const char *dir)
{
    return bk_fs_rm_tree(dir);
}

/* -- Make ------------------------------------------------------------------------------ */

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const bk_manifest_file_t *)a)->name, ((const bk_manifest_file_t *)b)->name);
}

/* The checkpoint's files, sorted by name, with sizes and checksums. */
static int list_files(const char *dir, bk_manifest_t *m, char *errstr, size_t errstr_size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int cap = 0, rc = 0;

    if (!d) {
        snprintf(errstr, errstr_size, "cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[4096];
        bk_manifest_file_t *f;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (!bk_manifest_name_ok(e->d_name) || strcmp(e->d_name, BK_MANIFEST_NAME) == 0) {
            snprintf(errstr, errstr_size, "%s: RocksDB's checkpoint has a file named '%s'", dir,
                     e->d_name);
            rc = -1;
            break;
        }
        if (m->nfiles == BK_MANIFEST_MAX_FILES) {
            snprintf(errstr, errstr_size, "%s: more than %d files", dir, BK_MANIFEST_MAX_FILES);
            rc = -1;
            break;
        }
        if (m->nfiles == cap) {
            cap = cap ? cap * 2 : 16;
            m->files = realloc(m->files, (size_t)cap * sizeof(*m->files));
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = &m->files[m->nfiles];
        rc = bk_fs_file_xxh3(path, &f->xxh3, &f->size, errstr, errstr_size);
        if (rc == 0) {
            f->name = strdup(e->d_name);
            m->total_bytes += f->size;
            m->nfiles++;
        }
    }
    closedir(d);
    if (m->nfiles > 1) {
        qsort(m->files, (size_t)m->nfiles, sizeof(*m->files), cmp_file);
    }
    return rc;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

int bk_snapshot_make(bk_db_t *db, const char *task, const char *root, bk_manifest_t *m, char *dir,
                     size_t dir_size, char *errstr, size_t errstr_size)
{
    char id[MAX_NAME + 1], path[4096];
    int made = 0;

    memset(m, 0, sizeof(*m));
    dir[0] = '\0';
    if (!bk_manifest_name_ok(task) || strlen(task) > 160) {
        snprintf(errstr, errstr_size, "snapshot: bad task name '%s'", task);
        return -1;
    }
    if (bk_fs_mkdirs(root) != 0) {
        snprintf(errstr, errstr_size, "cannot create the snapshot directory %s: %s", root,
                 strerror(errno));
        return -1;
    }
    m->created_ms = bk_clock_wall_ms();
    /* unique under root: RocksDB builds the checkpoint in <dir>.tmp, then renames it */
    for (int k = 0;; k++) {
        char tmp[4096];
        if (k == 0) {
            snprintf(id, sizeof(id), "%s-%lld-%d", task, (long long)m->created_ms, (int)getpid());
        } else {
            snprintf(id, sizeof(id), "%s-%lld-%d-%d", task, (long long)m->created_ms, (int)getpid(),
                     k);
        }
        if ((size_t)snprintf(dir, dir_size, "%s/%s", root, id) >= dir_size) {
            snprintf(errstr, errstr_size, "snapshot: directory name too long under %s", root);
            goto fail;
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
        if (!exists(dir) && !exists(tmp)) {
            break;
        }
    }
    if (bk_db_checkpoint_to(db, dir, errstr, errstr_size) != 0) {
        goto fail;
    }
    made = 1;
    if (list_files(dir, m, errstr, errstr_size) != 0) {
        goto fail;
    }
    m->stores = calloc((size_t)bk_db_store_count(db) + 1, sizeof(*m->stores));
    for (int i = 0; i < bk_db_store_count(db); i++) {
        bk_store_t *st = bk_db_store(db, i);
        bk_manifest_store_t *s = &m->stores[m->nstores];
        int32_t partition;
        const char *topic = bk_store_changelog_topic(st, &partition);
        if (!bk_store_logged(st)) {
            continue; /* no changelog to resume: its state is all in the files */
        }
        if (!topic) {
            snprintf(errstr, errstr_size, "snapshot: store %s has no changelog topic set",
                     bk_store_name(st));
            goto fail;
        }
        s->name = strdup(bk_store_name(st));
        s->changelog = strdup(topic);
        s->partition = partition;
        s->next = bk_store_changelog_next(st);
        s->ninputs = bk_store_input(st, s->inputs);
        m->nstores++;
    }
    m->task = strdup(task);
    m->id = strdup(id);
    /* last: a directory without a manifest is a snapshot cut short */
    snprintf(path, sizeof(path), "%s/%s", dir, BK_MANIFEST_NAME);
    if (bk_manifest_write(m, path, errstr, errstr_size) != 0) {
        goto fail;
    }
    return 0;

fail:
    if (made) {
        bk_snapshot_remove(dir);
    }
    bk_manifest_free(m);
    return -1;
}

/* -- Sweep ----------------------------------------------------------------------------- */

int bk_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now)
{
    DIR *d = opendir(root);
    struct dirent *e;
    char **names = NULL;
    int n = 0, cap = 0, removed = 0;

    if (!d) {
        return 0;
    }
    /* collected first: no removal while the directory is read */
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = realloc(names, (size_t)cap * sizeof(*names));
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char dir[3072], path[4096], err[512], *text;
        size_t len;
        struct stat sb;
        int64_t born;
        bk_manifest_t m;

        snprintf(dir, sizeof(dir), "%s/%s", root, names[i]);
        free(names[i]);
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            continue;
        }
        born = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
        snprintf(path, sizeof(path), "%s/%s", dir, BK_MANIFEST_NAME);
        if (bk_fs_read_all(path, BK_MANIFEST_MAX_BYTES, &text, &len, err, sizeof(err)) == 0) {
            if (bk_manifest_parse(text, len, &m, err, sizeof(err)) == 0) {
                born = m.created_ms;
                bk_manifest_free(&m);
            }
            free(text);
        }
        if (now - born > ttl_ms) {
            if (bk_snapshot_remove(dir) == 0) {
                removed++;
            } else {
                bk_log_warn("snapshot: cannot remove %s: %s", dir, strerror(errno));
            }
        }
    }
    free(names);
    return removed;
}
