/* archive.c - the snapshot archive: periodic incremental copies of active tasks' snapshots
 * to a directory, pruned to the newest few, and the recovery from them (archive.h). */
#define _GNU_SOURCE

#include "replica/archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/manifest.h"
#include "replica/archive_dest.h"
#include "replica/install.h"

#define QUEUE 64 /* snapshots waiting for the worker, at most */
#define PRUNE_GRACE_S 600 /* an unreferenced archived file younger than this stays */

struct bk_archive_s {
    bk_archive_dest_t *dest; /* the worker's */
    char *app;
    int64_t every_ms;
    int keep;
    int ntasks;
    bk_task_id_t *tasks;
    uint8_t *logged;  /* [ntasks] the task has a store with a changelog */
    int64_t *next_ms; /* [ntasks] when the task is due again (mono) */

    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bk_snapshot_made_t queue[QUEUE];
    int nqueue, stop, started;
};

/* -- Copies ------------------------------------------------------------------------------ */

/* The archive's name of a snapshot file: its content hash, then its name. */
static void file_key(const bk_manifest_file_t *f, char *buf, size_t size)
{
    snprintf(buf, size, "%016" PRIx64 "-%s", f->xxh3, f->name);
}

static int by_name_desc(const void *a, const void *b)
{
    return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* The task directory's manifests, newest first (their names start with created_ms, zero
 * padded). *n their count (0 after an error, which goes to err); free each and the list. */
static char **manifests(bk_archive_dest_t *d, const char *tdir, int *n, char *err, size_t errsz)
{
    char **list;
    int all, k = 0;
    if (bk_archive_dest_list(d, tdir, &list, &all, err, errsz) != 0) {
        *n = 0;
        return NULL;
    }
    for (int i = 0; i < all; i++) {
        size_t len = strlen(list[i]);
        if (len > 9 && strcmp(list[i] + len - 9, ".manifest") == 0) {
            list[k++] = list[i];
        } else {
            free(list[i]);
        }
    }
    *n = k;
    if (k > 1) {
        qsort(list, (size_t)k, sizeof(*list), by_name_desc);
    }
    return list;
}

/* A manifest of the archive, read and parsed. 0, or -1 with err. */
static int read_manifest(bk_archive_dest_t *d, const char *rel, bk_manifest_t *m, char *err,
                         size_t errsz)
{
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (bk_archive_dest_read(d, rel, 16u << 20, &text, &len, err, errsz) != 0) {
        return -1;
    }
    rc = bk_manifest_parse(text, len, m, err, errsz);
    free(text);
    return rc;
}

static void free_list(char **list, int n)
{
    for (int i = 0; i < n; i++) {
        free(list[i]);
    }
    free(list);
}

/* Keeps the newest `keep` manifests of a task directory (relative to the destination),
 * then the files they name. An error stops it: what it would remove stays. */
static void prune(bk_archive_dest_t *d, const char *tdir, int keep)
{
    int n, nkeys = 0, cap = 0, nfiles = 0;
    char err[1024] = "", path[4096 + 512];
    char **list = manifests(d, tdir, &n, err, sizeof(err)), **keys = NULL, **files = NULL;
    time_t now = time(NULL);

    if (err[0]) {
        goto out; /* without the manifests every file would look unused */
    }
    for (int i = keep; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        if (bk_archive_dest_unlink(d, path, err, sizeof(err)) != 0) {
            goto out;
        }
    }
    for (int i = 0; i < n && i < keep; i++) {
        bk_manifest_t m;
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        if (read_manifest(d, path, &m, err, sizeof(err)) != 0) {
            /* unreadable: nothing is removed, rather than a file it may need */
            bk_log_warn("archive: %s/%s: %s: its files are kept", bk_archive_dest_name(d), path,
                        err);
            goto out;
        }
        for (int f = 0; f < m.nfiles; f++) {
            char k[512];
            if (nkeys == cap) {
                char **more = realloc(keys, (size_t)(cap = cap * 2 + 64) * sizeof(*keys));
                if (!more) {
                    bk_manifest_free(&m);
                    goto out;
                }
                keys = more;
            }
            file_key(&m.files[f], k, sizeof(k));
            keys[nkeys++] = strdup(k);
        }
        bk_manifest_free(&m);
    }
    snprintf(path, sizeof(path), "%s/files", tdir);
    if (bk_archive_dest_list(d, path, &files, &nfiles, err, sizeof(err)) != 0) {
        goto out;
    }
    for (int f = 0; f < nfiles; f++) {
        int used = 0;
        uint64_t size;
        int64_t mtime = 0;
        int st;
        for (int i = 0; !used && i < nkeys; i++) {
            used = keys[i] && strcmp(keys[i], files[f]) == 0;
        }
        snprintf(path, sizeof(path), "%s/files/%s", tdir, files[f]);
        /* a recent file may be another writer's whose manifest is still to come (a
         * task's old and new owner overlap briefly after a move): kept a while */
        if (used) {
            continue;
        }
        st = bk_archive_dest_stat(d, path, &size, &mtime, err, sizeof(err));
        if (st < 0) {
            goto out;
        }
        if (st == 0 && now - mtime > PRUNE_GRACE_S &&
            bk_archive_dest_unlink(d, path, err, sizeof(err)) != 0) {
            goto out;
        }
    }
    err[0] = '\0';
out:
    if (err[0]) {
        bk_log_warn("archive: %s/%s: pruning stopped: %s", bk_archive_dest_name(d), tdir, err);
    }
    free_list(files, nfiles);
    free_list(keys, nkeys);
    free_list(list, n);
}

/* One snapshot into the archive. 0, or -1 with err. */
static int archive_one(bk_archive_t *a, const bk_snapshot_made_t *made, char *err, size_t errsz)
{
    bk_manifest_t m;
    char path[4096 + 512], tdir[4096 + 64], dst[4096 + 1024];
    int64_t t0 = bk_clock_mono_ms();
    uint64_t copied = 0;
    int ncopied = 0, rc = -1;

    snprintf(path, sizeof(path), "%s/%s", made->dir, BK_MANIFEST_NAME);
    if (bk_manifest_read(path, &m, err, errsz) != 0) {
        return -1;
    }
    snprintf(tdir, sizeof(tdir), "%s/%s", a->app, m.task);
    snprintf(path, sizeof(path), "%s/files", tdir);
    if (bk_archive_dest_mkdirs(a->dest, path, err, errsz) != 0) {
        goto out;
    }
    for (int i = 0; i < m.nfiles; i++) {
        char k[512];
        uint64_t size;
        int st;
        file_key(&m.files[i], k, sizeof(k));
        snprintf(dst, sizeof(dst), "%s/files/%s", tdir, k);
        st = bk_archive_dest_stat(a->dest, dst, &size, NULL, err, errsz);
        if (st < 0) {
            goto out;
        }
        if (st == 0 && size == m.files[i].size) {
            continue; /* archived with an earlier snapshot */
        }
        snprintf(path, sizeof(path), "%s/%s", made->dir, m.files[i].name);
        if (bk_archive_dest_put(a->dest, path, dst, err, errsz) != 0) {
            goto out;
        }
        copied += m.files[i].size;
        ncopied++;
    }
    /* the manifest last: it names only files that are there */
    snprintf(dst, sizeof(dst), "%s/%013lld-%s.manifest", tdir, (long long)m.created_ms, m.id);
    snprintf(path, sizeof(path), "%s/%s", made->dir, BK_MANIFEST_NAME);
    if (bk_archive_dest_put(a->dest, path, dst, err, errsz) != 0) {
        goto out;
    }
    prune(a->dest, tdir, a->keep);
    bk_log_info("archive: task %s: snapshot %s archived in %lld ms: %d file(s), %d new "
                "(%llu bytes)",
                m.task, m.id, (long long)(bk_clock_mono_ms() - t0), m.nfiles, ncopied,
                (unsigned long long)copied);
    rc = 0;
out:
    bk_manifest_free(&m);
    return rc;
}

static void *worker(void *arg)
{
    bk_archive_t *a = arg;
    bk_log_set_thread_name("archive");
    pthread_mutex_lock(&a->lock);
    for (;;) {
        bk_snapshot_made_t made;
        char err[1024];
        while (!a->stop && a->nqueue == 0) {
            pthread_cond_wait(&a->cond, &a->lock);
        }
        if (a->stop) {
            break;
        }
        made = a->queue[0];
        memmove(a->queue, a->queue + 1, (size_t)(--a->nqueue) * sizeof(made));
        pthread_mutex_unlock(&a->lock);
        if (archive_one(a, &made, err, sizeof(err)) != 0) {
            bk_log_error("archive: task %s: the snapshot was not archived: %s",
                         BK_TASK_NAME(a->tasks[made.id]), err);
        }
        bk_snapshot_remove(made.dir);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* -- The node's side ------------------------------------------------------------------------- */

bk_archive_t *bk_archive_new(const bk_plan_t *plan, const bk_conf_t *conf)
{
    const char *where = bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE);
    bk_archive_t *a;
    char err[1024];

    if (!where || !*where) {
        return NULL;
    }
    if (!(a = calloc(1, sizeof(*a)))) {
        bk_log_error("archive: out of memory: nothing is archived");
        return NULL;
    }
    if (!(a->dest = bk_archive_dest_open(where, conf, err, sizeof(err)))) {
        bk_log_error("archive: %s: nothing is archived", err);
        free(a);
        return NULL;
    }
    a->app = strdup(plan->id);
    a->every_ms = bk_conf_int(conf, BK_CONF_SNAPSHOT_ARCHIVE_INTERVAL_MS);
    a->keep = (int)bk_conf_int(conf, BK_CONF_SNAPSHOT_ARCHIVE_KEEP);
    a->tasks = bk_plan_tasks(plan, &a->ntasks);
    a->logged = calloc((size_t)a->ntasks + 1, 1);
    a->next_ms = calloc((size_t)a->ntasks + 1, sizeof(int64_t));
    for (int t = 0; a->tasks && t < a->ntasks; t++) {
        for (int s = 0; s < plan->nstores; s++) {
            a->logged[t] |= plan->stores[s].logged && plan->stores[s].sub == a->tasks[t].sub;
        }
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    a->started = a->app && a->tasks && a->logged && a->next_ms &&
                 pthread_create(&a->tid, NULL, worker, a) == 0;
    if (!a->started) {
        bk_log_error("archive: cannot start: %s: nothing is archived", strerror(errno));
        bk_archive_destroy(a);
        return NULL;
    }
    bk_log_info("archive: each active task's state goes to %s/%s every %lld ms, the newest %d "
                "kept",
                bk_archive_dest_name(a->dest), a->app, (long long)a->every_ms, a->keep);
    return a;
}

void bk_archive_destroy(bk_archive_t *a)
{
    if (!a) {
        return;
    }
    if (a->started) {
        pthread_mutex_lock(&a->lock);
        a->stop = 1;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->tid, NULL);
    }
    for (int i = 0; i < a->nqueue; i++) {
        bk_snapshot_remove(a->queue[i].dir);
    }
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cond);
    bk_archive_dest_close(a->dest);
    free(a->app);
    free(a->tasks);
    free(a->logged);
    free(a->next_ms);
    free(a);
}

int bk_archive_due(bk_archive_t *a, const int32_t *running, int n, int32_t *due)
{
    int64_t now = bk_clock_mono_ms();
    int k = 0;
    if (!a) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int32_t t = running[i];
        if (t < 0 || t >= a->ntasks || !a->logged[t]) {
            continue;
        }
        if (a->next_ms[t] == 0) {
            /* first seen here (a start, a failover): archived within a quarter interval,
             * spread over 2 s by task, so that a restart does not archive every task at
             * once and a new owner does not leave the changelog uncovered for long */
            a->next_ms[t] = now + a->every_ms / 4 + (t % 8) * 250;
        } else if (now >= a->next_ms[t]) {
            a->next_ms[t] = now + a->every_ms;
            due[k++] = t;
        }
    }
    return k;
}

void bk_archive_retry(bk_archive_t *a, int32_t task)
{
    if (a && task >= 0 && task < a->ntasks) {
        a->next_ms[task] = bk_clock_mono_ms() + 1000;
    }
}

void bk_archive_put(bk_archive_t *a, const bk_snapshot_made_t *made)
{
    if (!made->ok) {
        bk_log_warn("archive: task %s: no snapshot: %s", BK_TASK_NAME(a->tasks[made->id]),
                    made->err);
        bk_archive_retry(a, made->id);
        return;
    }
    pthread_mutex_lock(&a->lock);
    if (a->nqueue < QUEUE) {
        a->queue[a->nqueue++] = *made;
        pthread_cond_signal(&a->cond);
        made = NULL;
    }
    pthread_mutex_unlock(&a->lock);
    if (made) {
        bk_log_warn("archive: task %s: %d snapshots wait already: this one is dropped",
                    BK_TASK_NAME(a->tasks[made->id]), QUEUE);
        bk_snapshot_remove(made->dir);
    }
}

/* -- Recovery -------------------------------------------------------------------------------- */

/* Whether manifest m covers the changelogs from lo on: each has a store line whose next
 * offset the changelog still holds from. */
static int covers(const bk_manifest_t *m, char *const *changelogs, const int64_t *lo, int n,
                  char *why, size_t whysz)
{
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int s = 0; s < m->nstores; s++) {
            if (strcmp(m->stores[s].changelog, changelogs[i]) != 0) {
                continue;
            }
            found = 1;
            if (m->stores[s].next < lo[i]) {
                snprintf(why, whysz, "its snapshot %s needs %s from offset %lld, which starts at "
                         "%lld",
                         m->id, changelogs[i], (long long)m->stores[s].next, (long long)lo[i]);
                return 0;
            }
        }
        if (!found) {
            snprintf(why, whysz, "its snapshot %s has no store on %s", m->id, changelogs[i]);
            return 0;
        }
    }
    return 1;
}

int bk_archive_recover(const bk_conf_t *conf, const char *app, const char *task,
                       const char *task_dir, char *const *changelogs, const int64_t *lo, int n,
                       char *what, size_t what_size, char *err, size_t err_size)
{
    const char *where = bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE);
    bk_archive_dest_t *d;
    char tdir[4096], path[4096 + 1024], fetched[4096 + 32];
    char **list;
    int nm, rc = 0;

    if (!where || !*where) {
        snprintf(what, what_size, "no snapshot_archive is set");
        return 0;
    }
    if (!(d = bk_archive_dest_open(where, conf, err, err_size))) {
        return -1;
    }
    snprintf(tdir, sizeof(tdir), "%s/%s", app, task);
    err[0] = '\0';
    list = manifests(d, tdir, &nm, err, err_size);
    if (err[0]) {
        bk_archive_dest_close(d);
        return -1; /* unreachable: not "no snapshot" */
    }
    snprintf(what, what_size, "the archive %s/%s holds no snapshot of it",
             bk_archive_dest_name(d), tdir);
    for (int i = 0; i < nm && rc == 0; i++) {
        bk_manifest_t m;
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        if (read_manifest(d, path, &m, err, err_size) != 0) {
            bk_log_warn("archive: %s/%s: %s: trying an older one", bk_archive_dest_name(d), path,
                        err);
            continue;
        }
        if (!covers(&m, changelogs, lo, n, what, what_size)) {
            bk_manifest_free(&m);
            break; /* older ones start earlier still */
        }
        /* its files beside the task's directory (same file system: the install renames) */
        snprintf(fetched, sizeof(fetched), "%s.archive", task_dir);
        bk_fs_rm_tree(fetched);
        rc = bk_fs_mkdirs(fetched) == 0 ? 0 : -1;
        if (rc != 0) {
            snprintf(err, err_size, "cannot make %s: %s", fetched, strerror(errno));
        }
        for (int f = 0; rc == 0 && f < m.nfiles; f++) {
            char k[512], dst[4096 + 512];
            if (!bk_manifest_name_ok(m.files[f].name)) {
                snprintf(err, err_size, "manifest file name '%s' is not a safe file name: refused",
                         m.files[f].name);
                rc = -1;
                break;
            }
            file_key(&m.files[f], k, sizeof(k));
            snprintf(path, sizeof(path), "%s/files/%s", tdir, k);
            snprintf(dst, sizeof(dst), "%s/%s", fetched, m.files[f].name);
            rc = bk_archive_dest_get(d, path, dst, m.files[f].size, m.files[f].xxh3, err,
                                     err_size);
        }
        if (rc != 0 && i + 1 < nm) {
            /* pruned under us, say: an older snapshot may still do */
            bk_log_warn("archive: task %s: snapshot %s: %s: trying an older one", task, m.id, err);
            bk_fs_rm_tree(fetched);
            bk_manifest_free(&m);
            rc = 0;
            continue;
        }
        if (rc == 0 && bk_install_snapshot(&m, fetched, task_dir, err, err_size) != 0) {
            rc = -1;
        }
        if (rc == 0) {
            snprintf(what, what_size, "archived snapshot %s (%d file(s), %llu bytes) from %s", m.id,
                     m.nfiles, (unsigned long long)m.total_bytes, bk_archive_dest_name(d));
            rc = 1;
        }
        bk_fs_rm_tree(fetched);
        bk_manifest_free(&m);
    }
    free_list(list, nm);
    bk_archive_dest_close(d);
    return rc;
}
