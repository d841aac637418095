/* drained.c - a drained task's checkpoint, made and found (drained.h). */
#include "engine/drained.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/manifest.h"
#include "engine/snapshot.h"

void bk_drained_root(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *buf,
                     size_t size)
{
    snprintf(buf, size, "%s/%s/drained/%s", bk_conf_str(conf, BK_CONF_STATE_DIR), plan->id,
             BK_TASK_NAME(task));
}

int bk_drained_make(bk_db_t *db, const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task,
                    char *dir, size_t dir_size, char *errstr, size_t errstr_size)
{
    char root[4096];
    bk_manifest_t m;

    bk_drained_root(plan, conf, task, root, sizeof(root));
    /* one per task: a task drained again (its node restarted before it said so) leaves the
     * newer state */
    if (access(root, F_OK) == 0 && bk_fs_rm_tree(root) != 0) {
        snprintf(errstr, errstr_size, "cannot remove %s: %s", root, strerror(errno));
        return -1;
    }
    if (bk_snapshot_make(db, BK_TASK_NAME(task), root, &m, dir, dir_size, errstr, errstr_size) !=
        0) {
        return -1;
    }
    bk_manifest_free(&m);
    return 0;
}

int bk_drained_find(const bk_plan_t *plan, const bk_conf_t *conf, bk_task_id_t task, char *dir,
                    size_t dir_size)
{
    char root[4096];
    struct dirent *e;
    DIR *d;
    int found = 0;

    bk_drained_root(plan, conf, task, root, sizeof(root));
    if (!(d = opendir(root))) {
        return 0;
    }
    while (!found && (e = readdir(d)) != NULL) {
        char path[4600];
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s/%s", root, e->d_name, BK_MANIFEST_NAME);
        if (access(path, R_OK) == 0 &&
            (size_t)snprintf(dir, dir_size, "%s/%s", root, e->d_name) < dir_size) {
            found = 1;
        }
    }
    closedir(d);
    return found;
}

int bk_drained_marked(const char *taskdir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", taskdir, name);
    return access(path, F_OK) == 0;
}

int bk_drained_built(const char *taskdir)
{
    return bk_drained_marked(taskdir, BK_DRAINED_BUILT_FILE);
}

int bk_drained_mark_built(const char *taskdir, const char *text, char *errstr, size_t errstr_size)
{
    return bk_drained_mark(taskdir, BK_DRAINED_BUILT_FILE, text, errstr, errstr_size);
}

int bk_drained_mark(const char *taskdir, const char *name, const char *text, char *errstr,
                    size_t errstr_size)
{
    char path[4200];
    ssize_t len = (ssize_t)strlen(text);
    int fd;
    snprintf(path, sizeof(path), "%s/%s", taskdir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, (size_t)len) != len || fsync(fd) != 0) {
        snprintf(errstr, errstr_size, "cannot write %.900s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    bk_fs_sync_dir(taskdir);
    return 0;
}
