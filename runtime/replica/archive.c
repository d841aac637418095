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
#include "replica/install.h"

#define QUEUE 64 /* snapshots waiting for the worker, at most */
#define PRUNE_GRACE_S 600 /* an unreferenced archived file younger than this stays */

struct bk_archive_s {
    char *root; /* <archive>/<app> */
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
    int nqueue, stop;
};

/* -- Copies ------------------------------------------------------------------------------ */

/* Copies src to dst: to dst.tmp, synced, renamed. 0, or -1 with err. */
static int copy_file(const char *src, const char *dst, char *err, size_t errsz)
{
    char tmp[4096 + 8];
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    struct stat sb;
    char buf[1 << 16];

    snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
    if (in < 0 || fstat(in, &sb) != 0) {
        snprintf(err, errsz, "%s: %s", src, strerror(errno));
        goto done;
    }
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(err, errsz, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL)) {
            n = read(in, buf, sizeof(buf)); /* across file systems on old kernels: by hand */
            if (n > 0 && write(out, buf, (size_t)n) != n) {
                n = -1;
            }
        }
        if (n == 0) {
            break;
        }
        if (n < 0) {
            snprintf(err, errsz, "copying %s to %s: %s", src, tmp, strerror(errno));
            goto done;
        }
    }
    if (fsync(out) != 0 || close(out) != 0) {
        out = -1;
        snprintf(err, errsz, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    out = -1;
    if (rename(tmp, dst) != 0) {
        snprintf(err, errsz, "rename %s: %s", tmp, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (in >= 0) {
        close(in);
    }
    if (out >= 0) {
        close(out);
    }
    if (rc != 0) {
        unlink(tmp);
    }
    return rc;
}

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
 * padded). *n their count; free each and the list. */
static char **manifests(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **list = NULL;
    int cap = 0;
    *n = 0;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 9 && strcmp(e->d_name + len - 9, ".manifest") == 0) {
            if (*n == cap) {
                char **more = realloc(list, (size_t)(cap = cap * 2 + 8) * sizeof(*list));
                if (!more) {
                    break;
                }
                list = more;
            }
            list[(*n)++] = strdup(e->d_name);
        }
    }
    if (d) {
        closedir(d);
    }
    if (*n > 1) {
        qsort(list, (size_t)*n, sizeof(*list), by_name_desc);
    }
    return list;
}

static void free_list(char **list, int n)
{
    for (int i = 0; i < n; i++) {
        free(list[i]);
    }
    free(list);
}

/* Keeps the newest `keep` manifests of a task directory, then the files they name. */
static void prune(const char *tdir, int keep)
{
    int n, nkeys = 0, cap = 0;
    char **list = manifests(tdir, &n), **keys = NULL, path[4096 + 512];
    DIR *d;
    struct dirent *e;

    for (int i = keep; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        unlink(path);
    }
    for (int i = 0; i < n && i < keep; i++) {
        bk_manifest_t m;
        char err[256];
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        if (bk_manifest_read(path, &m, err, sizeof(err)) != 0) {
            /* unreadable: nothing is removed, rather than a file it may need */
            bk_log_warn("archive: %s: %s: its files are kept", path, err);
            free_list(keys, nkeys);
            free_list(list, n);
            return;
        }
        for (int f = 0; f < m.nfiles; f++) {
            char k[512];
            if (nkeys == cap) {
                char **more = realloc(keys, (size_t)(cap = cap * 2 + 64) * sizeof(*keys));
                if (!more) {
                    bk_manifest_free(&m);
                    free_list(keys, nkeys);
                    free_list(list, n);
                    return;
                }
                keys = more;
            }
            file_key(&m.files[f], k, sizeof(k));
            keys[nkeys++] = strdup(k);
        }
        bk_manifest_free(&m);
    }
    snprintf(path, sizeof(path), "%s/files", tdir);
    if ((d = opendir(path))) {
        while ((e = readdir(d))) {
            int used = e->d_name[0] == '.';
            char f[4096 + 512];
            struct stat sb;
            for (int i = 0; !used && i < nkeys; i++) {
                used = keys[i] && strcmp(keys[i], e->d_name) == 0;
            }
            snprintf(f, sizeof(f), "%s/files/%s", tdir, e->d_name);
            /* a recent file may be another writer's whose manifest is still to come (a
             * task's old and new owner overlap briefly after a move): kept a while */
            if (!used && stat(f, &sb) == 0 && time(NULL) - sb.st_mtime > PRUNE_GRACE_S) {
                unlink(f);
            }
        }
        closedir(d);
    }
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
    int ncopied = 0;

    snprintf(path, sizeof(path), "%s/%s", made->dir, BK_MANIFEST_NAME);
    if (bk_manifest_read(path, &m, err, errsz) != 0) {
        return -1;
    }
    snprintf(tdir, sizeof(tdir), "%s/%s", a->root, m.task);
    snprintf(path, sizeof(path), "%s/files", tdir);
    if (bk_fs_mkdirs(path) != 0) {
        snprintf(err, errsz, "cannot make %.900s: %s", path, strerror(errno));
        bk_manifest_free(&m);
        return -1;
    }
    for (int i = 0; i < m.nfiles; i++) {
        char k[512];
        struct stat sb;
        file_key(&m.files[i], k, sizeof(k));
        snprintf(dst, sizeof(dst), "%s/files/%s", tdir, k);
        if (stat(dst, &sb) == 0 && (uint64_t)sb.st_size == m.files[i].size) {
            continue; /* archived with an earlier snapshot */
        }
        snprintf(path, sizeof(path), "%s/%s", made->dir, m.files[i].name);
        if (copy_file(path, dst, err, errsz) != 0) {
            bk_manifest_free(&m);
            return -1;
        }
        copied += m.files[i].size;
        ncopied++;
    }
    snprintf(path, sizeof(path), "%s/files", tdir);
    bk_fs_sync_dir(path);
    /* the manifest last: it names only files that are there */
    snprintf(dst, sizeof(dst), "%s/%013lld-%s.manifest", tdir, (long long)m.created_ms, m.id);
    if (bk_manifest_write(&m, dst, err, errsz) != 0) {
        bk_manifest_free(&m);
        return -1;
    }
    bk_fs_sync_dir(tdir);
    prune(tdir, a->keep);
    bk_log_info("archive: task %s: snapshot %s archived in %lld ms: %d file(s), %d new "
                "(%llu bytes)",
                m.task, m.id, (long long)(bk_clock_mono_ms() - t0), m.nfiles, ncopied,
                (unsigned long long)copied);
    bk_manifest_free(&m);
    return 0;
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
    const char *dir = bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE);
    bk_archive_t *a;
    char root[4096];

    if (!dir || !*dir) {
        return NULL;
    }
    if (!(a = calloc(1, sizeof(*a)))) {
        bk_log_error("archive: out of memory: nothing is archived");
        return NULL;
    }
    snprintf(root, sizeof(root), "%s/%s", dir, plan->id);
    a->root = strdup(root);
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
    if (!a->root || !a->tasks || !a->logged || !a->next_ms || bk_fs_mkdirs(a->root) != 0 ||
        pthread_create(&a->tid, NULL, worker, a) != 0) {
        bk_log_error("archive: cannot use %s: %s: nothing is archived", root, strerror(errno));
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->cond);
        free(a->root);
        free(a->tasks);
        free(a->logged);
        free(a->next_ms);
        free(a);
        return NULL;
    }
    bk_log_info("archive: each active task's state goes to %s every %lld ms, the newest %d "
                "kept",
                root, (long long)a->every_ms, a->keep);
    return a;
}

void bk_archive_destroy(bk_archive_t *a)
{
    if (!a) {
        return;
    }
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->tid, NULL);
    for (int i = 0; i < a->nqueue; i++) {
        bk_snapshot_remove(a->queue[i].dir);
    }
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cond);
    free(a->root);
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
    const char *dir = bk_conf_str(conf, BK_CONF_SNAPSHOT_ARCHIVE);
    char tdir[4096], path[4096 + 1024], fetched[4096 + 32];
    char **list;
    int nm, rc = 0;

    if (!dir || !*dir) {
        snprintf(what, what_size, "no snapshot_archive is set");
        return 0;
    }
    snprintf(tdir, sizeof(tdir), "%s/%s/%s", dir, app, task);
    list = manifests(tdir, &nm);
    snprintf(what, what_size, "the archive %s holds no snapshot of it", tdir);
    for (int i = 0; i < nm && rc == 0; i++) {
        bk_manifest_t m;
        snprintf(path, sizeof(path), "%s/%s", tdir, list[i]);
        if (bk_manifest_read(path, &m, err, err_size) != 0) {
            bk_log_warn("archive: %s: %s: trying an older one", path, err);
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
            file_key(&m.files[f], k, sizeof(k));
            snprintf(path, sizeof(path), "%s/files/%s", tdir, k);
            snprintf(dst, sizeof(dst), "%s/%s", fetched, m.files[f].name);
            rc = copy_file(path, dst, err, err_size);
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
            snprintf(what, what_size, "archived snapshot %s (%d file(s), %llu bytes)", m.id,
                     m.nfiles, (unsigned long long)m.total_bytes);
            rc = 1;
        }
        bk_fs_rm_tree(fetched);
        bk_manifest_free(&m);
    }
    free_list(list, nm);
    return rc;
}
