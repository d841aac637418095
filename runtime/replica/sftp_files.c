/* sftp_files.c - one file at a time on a session (sftp.h): the snapshot archive's writes,
 * listings and reads on a remote host. */
#define _GNU_SOURCE
#include "replica/sftp.h"
#include "replica/sftp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <xxhash.h>

#define BUF (1 << 16)

static long put_seq; /* with the pid, the name of an upload's temporary file */

/* The session's connection (sftp.c keeps the struct): -1 with errstr once it is lost. */
static bk_sftp_conn_t *live(bk_sftp_session_t *s, char *errstr, size_t n)
{
    bk_sftp_conn_t *c = bk_sftp_session_conn(s);
    if (c->broken || c->fd < 0) {
        bk_sftp_conn_err_set(errstr, n, "the SSH connection to %s was lost", c->where);
        return NULL;
    }
    return c;
}

int bk_sftp_session_lost(bk_sftp_session_t *s)
{
    bk_sftp_conn_t *c = bk_sftp_session_conn(s);
    return c->broken || c->fd < 0;
}

static int fail_on(bk_sftp_conn_t *c, long rc, const char *what, const char *path, char *errstr,
                   size_t n)
{
    bk_sftp_conn_err_set(errstr, n, "%s %s:%s: %s", what, c->where, path,
                         bk_sftp_conn_sftp_err(c, rc));
    bk_sftp_conn_break(c, rc);
    return -1;
}

int bk_sftp_session_stat(bk_sftp_session_t *s, const char *path, uint64_t *size, int64_t *mtime,
                         char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    LIBSSH2_SFTP_ATTRIBUTES a;
    long rc;
    if (!c) {
        return -1;
    }
    rc = libssh2_sftp_stat_ex(c->sftp, path, (unsigned int)strlen(path), LIBSSH2_SFTP_LSTAT, &a);
    if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL &&
        libssh2_sftp_last_error(c->sftp) == LIBSSH2_FX_NO_SUCH_FILE) {
        return 1;
    }
    if (rc != 0) {
        return fail_on(c, rc, "stat", path, errstr, n);
    }
    *size = (a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? a.filesize : 0;
    if (mtime) {
        *mtime = (a.flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ? (int64_t)a.mtime : 0;
    }
    return 0;
}

int bk_sftp_session_mkdirs(bk_sftp_session_t *s, const char *path, char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    char buf[4096];
    if (!c) {
        return -1;
    }
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        bk_sftp_conn_err_set(errstr, n, "%s: path too long", path);
        return -1;
    }
    /* each prefix in turn; one that is there already is fine */
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char keep = *p;
            LIBSSH2_SFTP_ATTRIBUTES a;
            *p = '\0';
            if (libssh2_sftp_stat_ex(c->sftp, buf, (unsigned int)strlen(buf), LIBSSH2_SFTP_STAT,
                                     &a) != 0) {
                long rc = libssh2_sftp_mkdir_ex(c->sftp, buf, (unsigned int)strlen(buf), 0755);
                /* another node may have made it meanwhile: a directory there is fine */
                if (rc != 0 && (rc != LIBSSH2_ERROR_SFTP_PROTOCOL ||
                                libssh2_sftp_stat_ex(c->sftp, buf, (unsigned int)strlen(buf),
                                                     LIBSSH2_SFTP_STAT, &a) != 0 ||
                                !LIBSSH2_SFTP_S_ISDIR(a.permissions))) {
                    return fail_on(c, rc, "mkdir", buf, errstr, n);
                }
            } else if (!LIBSSH2_SFTP_S_ISDIR(a.permissions)) {
                bk_sftp_conn_err_set(errstr, n, "%s:%s is not a directory", c->where, buf);
                return -1;
            }
            *p = keep;
            if (!keep) {
                return 0;
            }
        }
    }
}

int bk_sftp_session_put(bk_sftp_session_t *s, const char *local, const char *remote,
                        char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    LIBSSH2_SFTP_HANDLE *h = NULL;
    char part[4096 + 64], eb[128], *buf = NULL;
    int fd = -1, rc = -1;
    long r;
    uint64_t size;

    if (!c) {
        return -1;
    }
    /* a name of our own: an old and a new owner of a task may upload the same file at once */
    if (snprintf(part, sizeof(part), "%s.%ld-%ld.part", remote, (long)getpid(),
                 __atomic_add_fetch(&put_seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(part)) {
        bk_sftp_conn_err_set(errstr, n, "%s: path too long", remote);
        return -1;
    }
    if ((fd = open(local, O_RDONLY | O_CLOEXEC)) < 0) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s", local, bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        return -1;
    }
    h = libssh2_sftp_open_ex(c->sftp, part, (unsigned int)strlen(part),
                             LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC, 0644,
                             LIBSSH2_SFTP_OPENFILE);
    if (!h) {
        fail_on(c, libssh2_session_last_errno(c->ssh), "cannot create", part, errstr, n);
        goto out;
    }
    if (!(buf = malloc(BUF))) {
        bk_sftp_conn_err_set(errstr, n, "out of memory");
        goto out;
    }
    for (;;) {
        ssize_t got = read(fd, buf, BUF);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            bk_sftp_conn_err_set(errstr, n, "reading %s: %s", local,
                                 bk_sftp_conn_errno(errno, eb, sizeof(eb)));
            goto out;
        }
        if (got == 0) {
            break;
        }
        for (ssize_t off = 0; off < got;) {
            ssize_t w = libssh2_sftp_write(h, buf + off, (size_t)(got - off));
            if (w < 0) {
                fail_on(c, w, "writing", part, errstr, n);
                goto out;
            }
            off += w;
        }
    }
    /* fsync@openssh.com where the server has it: the archive must be on its disk before a
     * manifest names the file. A server without it says so; any other failure is one. */
    r = libssh2_sftp_fsync(h);
    if (r != 0 && (r != LIBSSH2_ERROR_SFTP_PROTOCOL ||
                   libssh2_sftp_last_error(c->sftp) != LIBSSH2_FX_OP_UNSUPPORTED)) {
        fail_on(c, r, "syncing", part, errstr, n);
        goto out;
    }
    r = libssh2_sftp_close_handle(h);
    h = NULL;
    if (r != 0) {
        fail_on(c, r, "closing", part, errstr, n);
        goto out;
    }
    /* SFTP v3 (OpenSSH's) renames onto no existing name, and libssh2 has no posix-rename. Names
     * are content hashes or unique: one already there with our size is our file, uploaded
     * by another writer; one of another size (cut short before this writer's time) goes. */
    for (int tries = 0;; tries++) {
        int st;
        r = libssh2_sftp_rename_ex(c->sftp, part, (unsigned int)strlen(part), remote,
                                   (unsigned int)strlen(remote),
                                   LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
                                       LIBSSH2_SFTP_RENAME_NATIVE);
        if (r != LIBSSH2_ERROR_SFTP_PROTOCOL || tries > 0) {
            break;
        }
        st = bk_sftp_session_stat(s, remote, &size, NULL, errstr, n);
        if (st < 0) {
            goto out;
        }
        if (st == 1) {
            break; /* not there: the rename failed for another reason */
        }
        if (size == (uint64_t)lseek(fd, 0, SEEK_END)) {
            libssh2_sftp_unlink_ex(c->sftp, part, (unsigned int)strlen(part));
            r = 0;
            break;
        }
        if (libssh2_sftp_unlink_ex(c->sftp, remote, (unsigned int)strlen(remote)) != 0) {
            break;
        }
    }
    if (r != 0) {
        fail_on(c, r, "renaming", part, errstr, n);
        goto out;
    }
    rc = 0;
out:
    if (h) {
        libssh2_sftp_close_handle(h);
    }
    if (rc != 0 && !c->broken) {
        libssh2_sftp_unlink_ex(c->sftp, part, (unsigned int)strlen(part));
    }
    free(buf);
    close(fd);
    return rc;
}

int bk_sftp_session_get(bk_sftp_session_t *s, const char *remote, const char *local,
                        uint64_t size, uint64_t xxh3, char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    LIBSSH2_SFTP_HANDLE *h = NULL;
    XXH3_state_t *xs = XXH3_createState();
    char part[4096 + 8], eb[128], *buf = malloc(BUF);
    uint64_t got = 0;
    int fd = -1, rc = -1;

    snprintf(part, sizeof(part), "%s.part", local);
    if (!c || !xs || !buf) {
        if (c) {
            bk_sftp_conn_err_set(errstr, n, "out of memory");
        }
        goto out;
    }
    h = libssh2_sftp_open_ex(c->sftp, remote, (unsigned int)strlen(remote), LIBSSH2_FXF_READ, 0,
                             LIBSSH2_SFTP_OPENFILE);
    if (!h) {
        fail_on(c, libssh2_session_last_errno(c->ssh), "cannot open", remote, errstr, n);
        goto out;
    }
    fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        bk_sftp_conn_err_set(errstr, n, "cannot create %s: %s", part,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    XXH3_64bits_reset(xs);
    for (;;) {
        uint64_t left = size - got + 1; /* one more to see the end (as sftp.c's fetch) */
        ssize_t r = libssh2_sftp_read(h, buf, left < BUF ? (size_t)left : BUF);
        if (r == 0) {
            break;
        }
        if (r < 0) {
            fail_on(c, r, "reading", remote, errstr, n);
            goto out;
        }
        got += (uint64_t)r;
        if (got > size) {
            break;
        }
        XXH3_64bits_update(xs, buf, (size_t)r);
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(fd, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w < 0) {
                bk_sftp_conn_err_set(errstr, n, "writing %s: %s", part,
                                     bk_sftp_conn_errno(errno, eb, sizeof(eb)));
                goto out;
            }
            off += w;
        }
    }
    if (got != size || XXH3_64bits_digest(xs) != xxh3) {
        bk_sftp_conn_err_set(errstr, n, "%s:%s is not the file its manifest names (%llu bytes, "
                             "expected %llu, or another checksum): refused",
                             c->where, remote, (unsigned long long)got, (unsigned long long)size);
        goto out;
    }
    {
        int synced = fdatasync(fd) == 0, closed = close(fd) == 0;
        fd = -1;
        if (!synced || !closed) {
            bk_sftp_conn_err_set(errstr, n, "syncing %s: %s", part,
                                 bk_sftp_conn_errno(errno, eb, sizeof(eb)));
            goto out;
        }
    }
    if (rename(part, local) != 0) {
        bk_sftp_conn_err_set(errstr, n, "renaming %s: %s", part,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    rc = 0;
out:
    if (h) {
        libssh2_sftp_close_handle(h);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (rc != 0 && c) {
        unlink(part);
    }
    XXH3_freeState(xs);
    free(buf);
    return rc;
}

int bk_sftp_session_list(bk_sftp_session_t *s, const char *dir, char ***names, int *count,
                         char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    LIBSSH2_SFTP_HANDLE *h;
    char name[1024];
    LIBSSH2_SFTP_ATTRIBUTES a;
    int cap = 0, oom = 0;
    long r;

    *names = NULL;
    *count = 0;
    if (!c) {
        return -1;
    }
    h = libssh2_sftp_open_ex(c->sftp, dir, (unsigned int)strlen(dir), 0, 0, LIBSSH2_SFTP_OPENDIR);
    if (!h) {
        r = libssh2_session_last_errno(c->ssh);
        if (r == LIBSSH2_ERROR_SFTP_PROTOCOL &&
            libssh2_sftp_last_error(c->sftp) == LIBSSH2_FX_NO_SUCH_FILE) {
            return 0; /* no directory: nothing in it */
        }
        return fail_on(c, r, "cannot list", dir, errstr, n);
    }
    while ((r = libssh2_sftp_readdir(h, name, sizeof(name), &a)) > 0) {
        if (name[0] == '.') {
            continue;
        }
        if (*count == cap) {
            char **more = realloc(*names, (size_t)(cap = cap * 2 + 16) * sizeof(char *));
            if (!more) {
                oom = 1;
                break;
            }
            *names = more;
        }
        if (!((*names)[*count] = strdup(name))) {
            oom = 1;
            break;
        }
        (*count)++;
    }
    libssh2_sftp_close_handle(h);
    if (r < 0 || oom) {
        for (int i = 0; i < *count; i++) {
            free((*names)[i]);
        }
        free(*names);
        *names = NULL;
        *count = 0;
        if (oom) {
            bk_sftp_conn_err_set(errstr, n, "out of memory");
            return -1;
        }
        return fail_on(c, r, "listing", dir, errstr, n);
    }
    return 0;
}

int bk_sftp_session_unlink(bk_sftp_session_t *s, const char *path, char *errstr, size_t n)
{
    bk_sftp_conn_t *c = live(s, errstr, n);
    long rc;
    if (!c) {
        return -1;
    }
    rc = libssh2_sftp_unlink_ex(c->sftp, path, (unsigned int)strlen(path));
    if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL &&
        libssh2_sftp_last_error(c->sftp) == LIBSSH2_FX_NO_SUCH_FILE) {
        return 0; /* gone already (another node pruning the same task) */
    }
    return rc == 0 ? 0 : fail_on(c, rc, "cannot remove", path, errstr, n);
}
