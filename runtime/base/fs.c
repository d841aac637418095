/* fs.c - directories, durable renames, whole-file reads and file hashes (fs.h). */
#define _GNU_SOURCE /* nftw */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define READ_BUF (1 << 20)

int bk_fs_mkdirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

void bk_fs_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void bk_fs_parent(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, size, ".");
    } else if (slash == path) {
        snprintf(buf, size, "/");
    } else {
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
    }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 ? -1 : 0;
}

int bk_fs_rm_tree(const char *dir)
{
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bk_fs_read_all(const char *path, size_t max, char **buf, size_t *len, char *errstr,
                   size_t errstr_size)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    size_t got = 0;

    *buf = NULL;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        snprintf(errstr, errstr_size, "%s: not a regular file of at most %zu bytes", path, max);
        goto fail;
    }
    *buf = malloc((size_t)sb.st_size + 1);
    if (!*buf) {
        snprintf(errstr, errstr_size, "%s: out of memory", path);
        goto fail;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            snprintf(errstr, errstr_size, "cannot read %s: %s", path,
                     r < 0 ? strerror(errno) : "shorter than it was");
            goto fail;
        }
        got += (size_t)r;
    }
    (*buf)[got] = '\0';
    *len = got;
    close(fd);
    return 0;

fail:
    if (fd >= 0) {
        close(fd);
    }
    free(*buf);
    *buf = NULL;
    return -1;
}

int bk_fs_open_regular(const char *path, const char *name, char *errstr, size_t errstr_size)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "%s: %s", name,
                 errno == ENOENT  ? "missing"
                 : errno == ELOOP ? "a symbolic link"
                                  : strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(errstr, errstr_size, "%s: not a regular file", name);
        close(fd);
        return -1;
    }
    return fd;
}

int bk_fs_hash_fd(int fd, uint64_t *xxh3, uint64_t *size, char *errstr, size_t errstr_size)
{
    XXH3_state_t *xs = XXH3_createState();
    char *buf = malloc(READ_BUF);
    uint64_t total = 0;
    int rc = -1;

    if (!xs || !buf) {
        snprintf(errstr, errstr_size, "out of memory");
        goto out;
    }
    XXH3_64bits_reset(xs);
    for (;;) {
        ssize_t r = read(fd, buf, READ_BUF);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            snprintf(errstr, errstr_size, "read error: %s", strerror(errno));
            goto out;
        }
        if (r == 0) {
            break;
        }
        XXH3_64bits_update(xs, buf, (size_t)r);
        total += (uint64_t)r;
    }
    *xxh3 = XXH3_64bits_digest(xs);
    *size = total;
    rc = 0;
out:
    free(buf);
    XXH3_freeState(xs);
    return rc;
}

int bk_fs_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size, char *errstr,
                    size_t errstr_size)
{
    char err[512];
    int fd = bk_fs_open_regular(path, path, errstr, errstr_size), rc;
    if (fd < 0) {
        return -1;
    }
    rc = bk_fs_hash_fd(fd, xxh3, size, err, sizeof(err));
    if (rc != 0) {
        snprintf(errstr, errstr_size, "%s: %s", path, err);
    }
    close(fd);
    return rc;
}

int bk_fs_copy_file(const char *src, const char *dst, char *errstr, size_t errstr_size)
{
    static long seq;
    char tmp[4096 + 64], buf[1 << 16];
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1, by_hand = 0;

    /* a name of our own: two writers of one file (nodes sharing an archive on a mount) */
    snprintf(tmp, sizeof(tmp), "%s.%ld-%ld.tmp", dst, (long)getpid(),
             __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    if (in < 0) {
        snprintf(errstr, errstr_size, "%s: %s", src, strerror(errno));
        goto done;
    }
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(errstr, errstr_size, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    for (int first = 1;; first = 0) {
        ssize_t n = by_hand ? -1 : copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n < 0 && (by_hand || first)) {
            /* copy_file_range refused (across file systems on old kernels, a file system
             * without it, a seccomp filter): by hand, from the start where nothing moved */
            by_hand = 1;
            n = read(in, buf, sizeof(buf));
            if (n > 0 && write(out, buf, (size_t)n) != n) {
                n = -1;
            }
        }
        if (n == 0) {
            break;
        }
        if (n < 0) {
            snprintf(errstr, errstr_size, "copying %s to %s: %s", src, tmp, strerror(errno));
            goto done;
        }
    }
    {
        int synced = fsync(out) == 0, closed = close(out) == 0;
        out = -1;
        if (!synced || !closed) {
            snprintf(errstr, errstr_size, "%s: %s", tmp, strerror(errno));
            goto done;
        }
    }
    if (rename(tmp, dst) != 0) {
        snprintf(errstr, errstr_size, "rename %s: %s", tmp, strerror(errno));
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
