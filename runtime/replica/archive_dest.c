/* archive_dest.c - the snapshot archive's directory or SFTP destination (archive_dest.h). */
#define _GNU_SOURCE

#include "replica/archive_dest.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "replica/sftp.h"

struct bk_archive_dest_s {
    char root[4096]; /* the directory, local or on the remote host */
    char name[4700]; /* for messages */
    int remote;
    bk_sftp_conf_t sc;
    char host[256], user[256], known[4096];
    bk_sftp_session_t *session; /* NULL: not connected (yet, or since a loss) */
};

/* sftp://[user@]host[:port]/path: 0, or -1 with err. */
static int parse_sftp(bk_archive_dest_t *d, const char *url, char *err, size_t n)
{
    const char *p = url + strlen("sftp://"), *slash = strchr(p, '/'), *at, *colon;
    size_t hostlen;

    if (!slash || slash == p || !slash[1]) {
        snprintf(err, n, "snapshot_archive %s: expected sftp://[user@]host[:port]/path", url);
        return -1;
    }
    at = memchr(p, '@', (size_t)(slash - p));
    if (at) {
        if (at == p || (size_t)(at - p) >= sizeof(d->user)) {
            snprintf(err, n, "snapshot_archive %s: the user before '@' is empty or too long", url);
            return -1;
        }
        memcpy(d->user, p, (size_t)(at - p));
        d->user[at - p] = '\0';
        p = at + 1;
    }
    colon = memchr(p, ':', (size_t)(slash - p));
    hostlen = (size_t)((colon ? colon : slash) - p);
    if (hostlen == 0 || hostlen >= sizeof(d->host)) {
        snprintf(err, n, "snapshot_archive %s: no host", url);
        return -1;
    }
    memcpy(d->host, p, hostlen);
    d->host[hostlen] = '\0';
    d->sc.port = 22;
    if (colon) {
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (end != slash || port < 1 || port > 65535) {
            snprintf(err, n, "snapshot_archive %s: the port is not a number from 1 to 65535", url);
            return -1;
        }
        d->sc.port = (int)port;
    }
    snprintf(d->root, sizeof(d->root), "%s", slash);
    return 0;
}

bk_archive_dest_t *bk_archive_dest_open(const char *where, const bk_conf_t *conf, char *err,
                                        size_t n)
{
    bk_archive_dest_t *d = calloc(1, sizeof(*d));
    char user[256];

    if (!d) {
        snprintf(err, n, "out of memory");
        return NULL;
    }
    if (strncmp(where, "sftp://", 7) != 0) {
        snprintf(d->root, sizeof(d->root), "%s", where);
        snprintf(d->name, sizeof(d->name), "%s", where);
        return d;
    }
    d->remote = 1;
    if (parse_sftp(d, where, err, n) != 0) {
        free(d);
        return NULL;
    }
    bk_sftp_conf_settings(conf, &d->sc, user, sizeof(user), d->known, sizeof(d->known));
    if (d->user[0]) {
        d->sc.user = d->user;
    } else {
        snprintf(d->user, sizeof(d->user), "%s", user);
        d->sc.user = d->user;
    }
    d->sc.host = d->host;
    d->sc.parallel = 1;
    if (!d->sc.private_key) {
        snprintf(err, n, "snapshot_archive %s needs ssh_key: the key beck logs in with", where);
        free(d);
        return NULL;
    }
    snprintf(d->name, sizeof(d->name), "sftp://%s@%s:%d%s", d->user, d->host, d->sc.port,
             d->root);
    return d;
}

void bk_archive_dest_close(bk_archive_dest_t *d)
{
    if (d) {
        bk_sftp_disconnect(d->session);
        free(d);
    }
}

const char *bk_archive_dest_name(const bk_archive_dest_t *d)
{
    return d->name;
}

/* root/rel into buf; -1 with err when it does not fit. */
static int full(const bk_archive_dest_t *d, const char *rel, char *buf, size_t size, char *err,
                size_t n)
{
    if (snprintf(buf, size, "%s/%s", d->root, rel) >= (int)size) {
        snprintf(err, n, "%s/%.200s...: path too long", d->name, rel);
        return -1;
    }
    return 0;
}

/* The SFTP session, connected; a lost one is dropped and made again. NULL with err. */
/* Runs `call` (an expression using the session `s`) on the SFTP session; once more on a new
 * connection when the first one turned out lost (a NAT dropping an idle connection between
 * two archive rounds): every call here can be repeated. Returns from the function. */
#define ON_SESSION(d, err, n, call)                                                     \
    do {                                                                                  \
        for (int attempt = 0; attempt < 2; attempt++) {                                   \
            bk_sftp_session_t *s = session(d, err, n);                                    \
            int rc_;                                                                      \
            if (!s) {                                                                     \
                return -1;                                                                \
            }                                                                             \
            rc_ = (call);                                                                 \
            if (rc_ >= 0 || !bk_sftp_session_lost(s)) {                                   \
                return rc_;                                                               \
            }                                                                             \
        }                                                                                 \
        return -1;                                                                        \
    } while (0)

static bk_sftp_session_t *session(bk_archive_dest_t *d, char *err, size_t n)
{
    if (d->session && !bk_sftp_session_lost(d->session)) {
        return d->session;
    }
    bk_sftp_disconnect(d->session);
    d->session = bk_sftp_connect(&d->sc, err, n);
    return d->session;
}

int bk_archive_dest_mkdirs(bk_archive_dest_t *d, const char *rel, char *err, size_t n)
{
    char path[8400];
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_mkdirs(s, path, err, n));
    }
    if (bk_fs_mkdirs(path) != 0) {
        snprintf(err, n, "cannot make %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int bk_archive_dest_stat(bk_archive_dest_t *d, const char *rel, uint64_t *size, int64_t *mtime,
                         char *err, size_t n)
{
    char path[8400];
    struct stat sb;
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_stat(s, path, size, mtime, err, n));
    }
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) {
            return 1;
        }
        snprintf(err, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    *size = (uint64_t)sb.st_size;
    if (mtime) {
        *mtime = (int64_t)sb.st_mtime;
    }
    return 0;
}

int bk_archive_dest_put(bk_archive_dest_t *d, const char *local, const char *rel, char *err,
                        size_t n)
{
    char path[8400], dir[8400];
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_put(s, local, path, err, n));
    }
    if (bk_fs_copy_file(local, path, err, n) != 0) {
        return -1;
    }
    bk_fs_parent(path, dir, sizeof(dir));
    bk_fs_sync_dir(dir);
    return 0;
}

int bk_archive_dest_get(bk_archive_dest_t *d, const char *rel, const char *local, uint64_t size,
                        uint64_t xxh3, char *err, size_t n)
{
    char path[8400];
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_get(s, path, local, size, xxh3, err, n));
    }
    /* the install checks each file's size and hash against the manifest */
    return bk_fs_copy_file(path, local, err, n);
}

int bk_archive_dest_read(bk_archive_dest_t *d, const char *rel, size_t max, char **buf,
                         size_t *len, char *err, size_t n)
{
    char path[8400];
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_read_small(s, path, max, buf, len, err, n));
    }
    return bk_fs_read_all(path, max, buf, len, err, n);
}

int bk_archive_dest_list(bk_archive_dest_t *d, const char *rel, char ***names, int *count,
                         char *err, size_t n)
{
    char path[8400];
    DIR *dir;
    struct dirent *e;
    int cap = 0;

    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    *names = NULL;
    *count = 0;
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_list(s, path, names, count, err, n));
    }
    if (!(dir = opendir(path))) {
        if (errno == ENOENT) {
            return 0;
        }
        snprintf(err, n, "cannot list %s: %s", path, strerror(errno));
        return -1;
    }
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (*count == cap) {
            char **more = realloc(*names, (size_t)(cap = cap * 2 + 16) * sizeof(char *));
            if (!more) {
                break;
            }
            *names = more;
        }
        if (((*names)[*count] = strdup(e->d_name))) {
            (*count)++;
        }
    }
    closedir(dir);
    return 0;
}

int bk_archive_dest_unlink(bk_archive_dest_t *d, const char *rel, char *err, size_t n)
{
    char path[8400];
    if (full(d, rel, path, sizeof(path), err, n) != 0) {
        return -1;
    }
    if (d->remote) {
        ON_SESSION(d, err, n, bk_sftp_session_unlink(s, path, err, n));
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, n, "cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
