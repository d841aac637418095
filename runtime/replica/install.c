/* install.c - check a fetched snapshot and make it a task's DB (install.h). */
#include "replica/install.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/task.h"
#include "engine/db.h"

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* -- Install --------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every entry of fetched_dir is a regular file the manifest lists (or the manifest). */
static int check_entries(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                         size_t errstr_size)
{
    const char **names = malloc(((size_t)m->nfiles + 1) * sizeof(*names));
    DIR *d = opendir(fetched_dir);
    struct dirent *e;
    int rc = 0;
    char nb[80];

    if (!d) {
        snprintf(errstr, errstr_size, "cannot list %s: %s", fetched_dir, strerror(errno));
        free(names);
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        names[i] = m->files[i].name;
    }
    qsort(names, (size_t)m->nfiles, sizeof(*names), cmp_str);
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat sb;
        const char *key = e->d_name;
        if (strcmp(key, ".") == 0 || strcmp(key, "..") == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", fetched_dir, key);
        if (lstat(path, &sb) != 0) {
            snprintf(errstr, errstr_size, "%s: %s", bk_log_shown(key, nb, sizeof(nb)),
                     strerror(errno));
            rc = -1;
        } else if (S_ISLNK(sb.st_mode)) {
            snprintf(errstr, errstr_size, "%s: a symbolic link: refused",
                     bk_log_shown(key, nb, sizeof(nb)));
            rc = -1;
        } else if (!S_ISREG(sb.st_mode)) {
            snprintf(errstr, errstr_size, "%s: not a regular file: refused",
                     bk_log_shown(key, nb, sizeof(nb)));
            rc = -1;
        } else if (strcmp(key, BK_MANIFEST_NAME) != 0 &&
                   !bsearch(&key, names, (size_t)m->nfiles, sizeof(*names), cmp_str)) {
            snprintf(errstr, errstr_size, "%s: not in the manifest: refused",
                     bk_log_shown(key, nb, sizeof(nb)));
            rc = -1;
        }
    }
    closedir(d);
    free(names);
    return rc;
}

/* Size and checksum of every listed file; each is synced, for the install to be durable. */
static int check_files(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                       size_t errstr_size)
{
    for (int i = 0; i < m->nfiles; i++) {
        const bk_manifest_file_t *f = &m->files[i];
        char path[4096], err[512];
        uint64_t h, size;
        int fd, rc;

        if (!bk_manifest_name_ok(f->name) || strcmp(f->name, "rocksdb") == 0 ||
            strcmp(f->name, "checkpoint") == 0 || strcmp(f->name, "checkpoint.tmp") == 0 ||
            strcmp(f->name, BK_MANIFEST_NAME) == 0) {
            /* the last ones are the task directory's own: no RocksDB file has those names */
            snprintf(errstr, errstr_size, "%s: not a name a snapshot file can have: refused",
                     bk_log_shown(f->name, err, sizeof(err)));
            return -1;
        }
        snprintf(path, sizeof(path), "%s/%s", fetched_dir, f->name);
        fd = bk_fs_open_regular(path, f->name, err, sizeof(err));
        if (fd < 0) {
            snprintf(errstr, errstr_size, "%s: refused", err);
            return -1;
        }
        rc = bk_fs_hash_fd(fd, &h, &size, err, sizeof(err));
        if (rc != 0) {
            snprintf(errstr, errstr_size, "%s: %s", f->name, err);
        } else if (size != f->size) {
            snprintf(errstr, errstr_size, "%s: %llu bytes, expected %llu: refused", f->name,
                     (unsigned long long)size, (unsigned long long)f->size);
            rc = -1;
        } else if (h != f->xxh3) {
            snprintf(errstr, errstr_size, "%s: checksum %016llx, expected %016llx: refused",
                     f->name, (unsigned long long)h, (unsigned long long)f->xxh3);
            rc = -1;
        } else if (fsync(fd) != 0) {
            snprintf(errstr, errstr_size, "%s: cannot sync: %s", f->name, strerror(errno));
            rc = -1;
        }
        close(fd);
        if (rc != 0) {
            return -1;
        }
    }
    return 0;
}

/* fetched_dir becomes a task directory: its files move to rocksdb/ and the checkpoint file
 * is written beside. Only fetched_dir changes. */
static int lay_out(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                   size_t errstr_size)
{
    char db[3072];
    bk_checkpoint_line_t *lines;
    int n = 0, rc;

    snprintf(db, sizeof(db), "%s/rocksdb", fetched_dir);
    if (mkdir(db, 0755) != 0) {
        snprintf(errstr, errstr_size, "cannot create %s: %s", db, strerror(errno));
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        char from[4096], to[4096];
        snprintf(from, sizeof(from), "%s/%s", fetched_dir, m->files[i].name);
        snprintf(to, sizeof(to), "%s/%s", db, m->files[i].name);
        if (rename(from, to) != 0) {
            snprintf(errstr, errstr_size, "cannot move %s to %s: %s", from, to, strerror(errno));
            return -1;
        }
    }
    bk_fs_sync_dir(db);
    lines = calloc((size_t)m->nstores + 1, sizeof(*lines));
    for (int i = 0; i < m->nstores; i++) {
        const bk_manifest_store_t *s = &m->stores[i];
        if (s->next >= 0) { /* as bk_db_checkpoint: no line while the offset is unknown */
            assert(s->ninputs >= 0 && s->ninputs <= BK_STORE_MAX_INPUTS);
            lines[n].store = s->name;
            lines[n].next = s->next;
            lines[n].ninputs = s->ninputs;
            lines[n].inputs = s->inputs;
            n++;
        }
    }
    rc = bk_db_checkpoint_file_write(fetched_dir, lines, n, errstr, errstr_size);
    free(lines);
    return rc;
}

int bk_install_snapshot(const bk_manifest_t *m, const char *fetched_dir, const char *task_dir,
                        char *errstr, size_t errstr_size)
{
    static atomic_int seq; /* trash names of one process */
    char parent[4096], trash[4096];
    const char *base = strrchr(task_dir, '/');
    int had_task;

    /* task directories are named after their task (bk_plan_task_dir) */
    if (strcmp(base ? base + 1 : task_dir, m->task) != 0) {
        snprintf(errstr, errstr_size, "a snapshot of task %s cannot become %s: refused", m->task,
                 task_dir);
        return -1;
    }
    if (check_entries(m, fetched_dir, errstr, errstr_size) != 0 ||
        check_files(m, fetched_dir, errstr, errstr_size) != 0 ||
        lay_out(m, fetched_dir, errstr, errstr_size) != 0) {
        return -1;
    }
    bk_fs_parent(task_dir, parent, sizeof(parent));
    if (bk_fs_mkdirs(parent) != 0) {
        snprintf(errstr, errstr_size, "cannot create %s: %s", parent, strerror(errno));
        return -1;
    }
    /* the swap: task_dir aside, fetched_dir in its place, the old one removed */
    had_task = exists(task_dir);
    snprintf(trash, sizeof(trash), "%s.trash-%d-%d", task_dir, (int)getpid(),
             atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed) + 1);
    if (had_task && rename(task_dir, trash) != 0) {
        snprintf(errstr, errstr_size, "cannot move %s aside to %s: %s", task_dir, trash,
                 strerror(errno));
        return -1;
    }
    if (rename(fetched_dir, task_dir) != 0) {
        snprintf(errstr, errstr_size, "cannot rename %s to %s: %s", fetched_dir, task_dir,
                 strerror(errno));
        if (had_task && rename(trash, task_dir) != 0) {
            bk_log_warn("snapshot: cannot move %s back to %s: %s", trash, task_dir,
                        strerror(errno));
        }
        return -1;
    }
    bk_fs_sync_dir(parent);
    if (had_task && bk_fs_rm_tree(trash) != 0) {
        bk_log_warn("snapshot: installed %s, but cannot remove the old state in %s: %s", task_dir,
                    trash, strerror(errno));
    }
    return 0;
}

/* -- After a crash ----------------------------------------------------------------------- */

/* Is name "<task>" followed by suffix (a task name only: nothing else in an app directory
 * is touched)? Copies the task's name into task. */
static int task_then(const char *name, const char *suffix, char *task)
{
    const char *at = strstr(name, suffix);
    bk_task_id_t id;
    size_t n = at ? (size_t)(at - name) : 0;
    if (!at || n == 0 || n >= BK_TASK_NAME_MAX) {
        return 0;
    }
    memcpy(task, name, n);
    task[n] = '\0';
    return bk_task_parse(task, &id) == 0;
}

int bk_install_recover(const char *app_dir)
{
    DIR *d = opendir(app_dir);
    struct dirent *e;
    char **names = NULL;
    int n = 0, cap = 0, fixed = 0;

    if (!d) {
        return errno == ENOENT ? 0 : -1;
    }
    while ((e = readdir(d)) != NULL) { /* names first: the loop below renames */
        if (strstr(e->d_name, ".trash-") || strncmp(e->d_name, ".bootstrap-", 11) == 0 ||
            strstr(e->d_name, ".archive")) {
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                names = realloc(names, (size_t)cap * sizeof(*names));
            }
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    if (n > 0) {
        qsort(names, (size_t)n, sizeof(*names), cmp_str);
    }
    for (int i = 0; i < n; i++) {
        char path[4096], task_dir[4096], task[BK_TASK_NAME_MAX];
        const char *name = names[i];
        snprintf(path, sizeof(path), "%s/%s", app_dir, name);
        if (task_then(name, ".trash-", task)) {
            snprintf(task_dir, sizeof(task_dir), "%s/%s", app_dir, task);
            if (exists(task_dir)) {
                bk_log_info("task %s: removing %s, the old state of an install a crash "
                            "interrupted after its swap",
                            task, path);
            } else if (rename(path, task_dir) == 0) {
                bk_fs_sync_dir(app_dir);
                bk_log_warn("task %s: a crash interrupted the install of a snapshot between "
                            "its two renames: its old state %s is back in place (the snapshot "
                            "will be fetched again)",
                            task, path);
                fixed++;
                continue;
            } else {
                bk_log_warn("task %s: cannot move %s back to %s: %s", task, path, task_dir,
                            strerror(errno));
                continue;
            }
        } else if ((strncmp(name, ".bootstrap-", 11) == 0 &&
                    bk_task_parse(name + 11, &(bk_task_id_t){0}) == 0) ||
                   (task_then(name, ".archive", task) && strcmp(strstr(name, ".archive"),
                                                               ".archive") == 0)) {
            bk_log_info("removing %s, a snapshot fetch a crash interrupted", path);
        } else {
            continue; /* not an install's */
        }
        if (bk_fs_rm_tree(path) != 0) {
            bk_log_warn("cannot remove %s: %s", path, strerror(errno));
            continue;
        }
        fixed++;
    }
    for (int i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    return fixed;
}
