/* sftp.c - reads and parallel verified fetches over SFTP connections (sftp.h). */
#define _GNU_SOURCE
#include "replica/sftp.h"
#include "replica/sftp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <xxhash.h>

#define BK_SFTP_BUF (2 << 20)
#define BK_SFTP_SYNC_STEP (8u << 20)
#define BK_SFTP_PER_CONN (64ull << 20) /* a smaller snapshot is not worth another handshake */

/* -- One small file -------------------------------------------------------------------- */

/* Reads remote_path whole over an open connection (left open). */
static int read_small_on(bk_sftp_conn_t *connp, const char *remote_path, size_t max, char **buf,
                         size_t *len, char *errstr, size_t errstr_size)
{
    LIBSSH2_SFTP_HANDLE *h = NULL;
    char *data = NULL;
    size_t got = 0;
    ssize_t r;

    h = libssh2_sftp_open_ex(connp->sftp, remote_path, (unsigned int)strlen(remote_path),
                             LIBSSH2_FXF_READ, 0, LIBSSH2_SFTP_OPENFILE);
    if (!h) {
        r = libssh2_session_last_errno(connp->ssh);
        bk_sftp_conn_err_set(errstr, errstr_size, "%s:%s: %s", connp->where, remote_path,
                             bk_sftp_conn_sftp_err(connp, r));
        bk_sftp_conn_break(connp, r);
        goto fail;
    }
    data = malloc(max + 2);
    while ((r = libssh2_sftp_read(h, data + got, max + 1 - got)) > 0) {
        got += (size_t)r;
        if (got > max) {
            bk_sftp_conn_err_set(errstr, errstr_size, "%s:%s: longer than %zu bytes: refused",
                                 connp->where, remote_path, max);
            goto fail;
        }
    }
    if (r < 0) {
        bk_sftp_conn_err_set(errstr, errstr_size, "%s:%s: read failed: %s", connp->where,
                             remote_path, bk_sftp_conn_sftp_err(connp, r));
        bk_sftp_conn_break(connp, r);
        goto fail;
    }
    libssh2_sftp_close_handle(h);
    data[got] = '\0';
    *buf = data;
    *len = got;
    return 0;
fail:
    if (h) {
        libssh2_sftp_close_handle(h);
    }
    free(data);
    return -1;
}

int bk_sftp_read_small(const bk_sftp_conf_t *conf, const char *remote_path, size_t max, char **buf,
                       size_t *len, char *errstr, size_t errstr_size)
{
    bk_sftp_conn_t conn;
    int rc;
    if (bk_sftp_conn_open(conf, &conn, errstr, errstr_size) != 0) {
        return -1;
    }
    rc = read_small_on(&conn, remote_path, max, buf, len, errstr, errstr_size);
    bk_sftp_conn_close(&conn);
    return rc;
}

/* -- A session: one connection for several calls ------------------------------------------ */

struct bk_sftp_session_s {
    const bk_sftp_conf_t *conf;
    bk_sftp_conn_t conn;
};

bk_sftp_session_t *bk_sftp_connect(const bk_sftp_conf_t *conf, char *errstr, size_t errstr_size)
{
    bk_sftp_session_t *s = calloc(1, sizeof(*s));
    if (!s) {
        bk_sftp_conn_err_set(errstr, errstr_size, "out of memory");
        return NULL;
    }
    s->conf = conf;
    if (bk_sftp_conn_open(conf, &s->conn, errstr, errstr_size) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

bk_sftp_conn_t *bk_sftp_session_conn(bk_sftp_session_t *s)
{
    return &s->conn;
}

void bk_sftp_disconnect(bk_sftp_session_t *s)
{
    if (s) {
        bk_sftp_conn_close(&s->conn);
        free(s);
    }
}

int bk_sftp_session_read_small(bk_sftp_session_t *s, const char *remote_path, size_t max,
                               char **buf, size_t *len, char *errstr, size_t errstr_size)
{
    if (s->conn.broken || s->conn.fd < 0) {
        bk_sftp_conn_err_set(errstr, errstr_size, "the SSH connection to %s was lost",
                             s->conn.where);
        return -1;
    }
    return read_small_on(&s->conn, remote_path, max, buf, len, errstr, errstr_size);
}

/* -- Many files, several at once ------------------------------------------------------- */

typedef struct bk_sftp_bucket_s {
    pthread_mutex_t lock;
    double rate;   /* bytes per second; 0: unlimited */
    double tokens; /* may go negative: a debt that the next taker sleeps off */
    double burst;
    double last;
} bk_sftp_bucket_t;

typedef struct bk_sftp_fetch_s {
    const bk_sftp_conf_t *conf;
    const char *remote_dir;
    const char *local_dir;
    const bk_manifest_t *m;
    int *order;           /* file indexes, largest first: the long ones start early */
    unsigned char *state; /* per file: 0 not taken, 1 taken, 2 complete (renamed) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int next;          /* in order */
    int running;       /* workers not finished */
    atomic_int failed; /* the first failure stops everyone */
    atomic_uint_fast64_t done;
    char err[1024]; /* the first failure's text */
    bk_sftp_bucket_t bucket;
} bk_sftp_fetch_t;

typedef struct bk_sftp_worker_s {
    bk_sftp_fetch_t *fetch;
    bk_sftp_conn_t conn; /* fd -1: the worker opens its own */
    int lent;            /* conn is a session's: left open at the end */
    pthread_t thread;
} bk_sftp_worker_t;

static void fetch_fail(bk_sftp_fetch_t *fetch, const char *msg)
{
    pthread_mutex_lock(&fetch->lock);
    if (!atomic_load(&fetch->failed)) {
        bk_sftp_conn_err_set(fetch->err, sizeof(fetch->err), "%s", msg);
        atomic_store(&fetch->failed, 1);
    }
    pthread_mutex_unlock(&fetch->lock);
}

/* Takes n bytes from the shared bucket, sleeping off any debt (in short naps, so that a
 * failure elsewhere stops us soon). @locality any worker */
static void bucket_take(bk_sftp_fetch_t *fetch, size_t n)
{
    bk_sftp_bucket_t *b = &fetch->bucket;
    double wait, t;

    if (b->rate <= 0) {
        return;
    }
    pthread_mutex_lock(&b->lock);
    t = bk_clock_mono_s();
    b->tokens += (t - b->last) * b->rate;
    if (b->tokens > b->burst) {
        b->tokens = b->burst;
    }
    b->last = t;
    b->tokens -= (double)n;
    wait = b->tokens < 0 ? -b->tokens / b->rate : 0;
    pthread_mutex_unlock(&b->lock);
    while (wait > 0 && !atomic_load(&fetch->failed)) {
        double nap = wait < 0.1 ? wait : 0.1;
        struct timespec ts = {(time_t)nap, (long)((nap - (time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
        wait -= nap;
    }
}

/* Fetches file i into local_dir/NAME.part, verifies it, renames it. 0; -1 with errstr;
 * 1 when stopped by another's failure. The .part file never survives. */
static int fetch_file(bk_sftp_worker_t *w, int i, char *buf, size_t bufsize, XXH3_state_t *xs,
                      char *errstr, size_t n)
{
    bk_sftp_fetch_t *fetch = w->fetch;
    bk_sftp_conn_t *conn = &w->conn;
    const bk_manifest_file_t *f = &fetch->m->files[i];
    LIBSSH2_SFTP_ATTRIBUTES a;
    LIBSSH2_SFTP_HANDLE *h = NULL;
    char remote[4096], part[4096], final[4096], eb[128];
    uint64_t got = 0, synced = 0, sum;
    ssize_t r;
    int fd = -1, rc = -1;

    if (!bk_manifest_name_ok(f->name)) {
        bk_sftp_conn_err_set(errstr, n, "manifest file name '%s' is not a safe file name: refused",
                             f->name);
        return -1;
    }
    if (snprintf(remote, sizeof(remote), "%s/%s", fetch->remote_dir, f->name) >=
            (int)sizeof(remote) ||
        snprintf(final, sizeof(final), "%s/%s", fetch->local_dir, f->name) >=
            (int)sizeof(final) - 5 ||
        snprintf(part, sizeof(part), "%s.part", final) >= (int)sizeof(part)) {
        bk_sftp_conn_err_set(errstr, n, "%s: path too long", f->name);
        return -1;
    }

    /* lstat: a symlink could point anywhere on the active's host. */
    r = libssh2_sftp_stat_ex(conn->sftp, remote, (unsigned int)strlen(remote), LIBSSH2_SFTP_LSTAT,
                             &a);
    if (r != 0) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s:%s: %s", f->name, conn->where, remote,
                             bk_sftp_conn_sftp_err(conn, r));
        bk_sftp_conn_break(conn, r);
        return -1;
    }
    if (!(a.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) || !(a.flags & LIBSSH2_SFTP_ATTR_SIZE)) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s:%s: the server gave no type or size: refused",
                             f->name, conn->where, remote);
        return -1;
    }
    if (LIBSSH2_SFTP_S_ISLNK(a.permissions)) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s:%s is a symlink: refused", f->name, conn->where,
                             remote);
        return -1;
    }
    if (!LIBSSH2_SFTP_S_ISREG(a.permissions)) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s:%s is not a regular file: refused", f->name,
                             conn->where, remote);
        return -1;
    }
    if (a.filesize != f->size) {
        bk_sftp_conn_err_set(errstr, n, "%s: %s:%s has %llu bytes, the manifest says %llu: refused",
                             f->name, conn->where, remote, (unsigned long long)a.filesize,
                             (unsigned long long)f->size);
        return -1;
    }
    h = libssh2_sftp_open_ex(conn->sftp, remote, (unsigned int)strlen(remote), LIBSSH2_FXF_READ, 0,
                             LIBSSH2_SFTP_OPENFILE);
    if (!h) {
        r = libssh2_session_last_errno(conn->ssh);
        bk_sftp_conn_err_set(errstr, n, "%s: cannot open %s:%s: %s", f->name, conn->where, remote,
                             bk_sftp_conn_sftp_err(conn, r));
        bk_sftp_conn_break(conn, r);
        return -1;
    }
    unlink(part); /* a leftover of an earlier, killed fetch */
    fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        bk_sftp_conn_err_set(errstr, n, "%s: cannot create %s: %s", f->name, part,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    XXH3_64bits_reset(xs);
    for (;;) {
        if (atomic_load(&fetch->failed)) {
            rc = 1;
            goto out;
        }
        /* No more than what is left, plus one byte to see the end (or a file that grew):
         * libssh2 1.10 keeps up to four buffers of requests in flight past the end, and a
         * 16-byte file cost ~280 round trips with a 2 MiB buffer. */
        uint64_t left = f->size - got + 1;
        r = libssh2_sftp_read(h, buf, left < bufsize ? (size_t)left : bufsize);
        if (r == 0) {
            break;
        }
        if (r < 0) {
            bk_sftp_conn_err_set(errstr, n, "%s: reading %s:%s failed after %llu bytes: %s",
                                 f->name, conn->where, remote, (unsigned long long)got,
                                 bk_sftp_conn_sftp_err(conn, r));
            bk_sftp_conn_break(conn, r);
            goto out;
        }
        got += (uint64_t)r;
        if (got > f->size) {
            bk_sftp_conn_err_set(errstr, n,
                                 "%s: %s:%s grew past the manifest's %llu bytes: refused", f->name,
                                 conn->where, remote, (unsigned long long)f->size);
            goto out;
        }
        XXH3_64bits_update(xs, buf, (size_t)r);
        for (ssize_t off = 0; off < r;) {
            ssize_t wr = write(fd, buf + off, (size_t)(r - off));
            if (wr < 0 && errno == EINTR) {
                continue;
            }
            if (wr < 0) {
                bk_sftp_conn_err_set(errstr, n, "%s: writing %s: %s", f->name, part,
                                     bk_sftp_conn_errno(errno, eb, sizeof(eb)));
                goto out;
            }
            off += wr;
        }
        if (got - synced >= BK_SFTP_SYNC_STEP) {
            /* Start writing back what we have; fdatasync at the end then waits only for
             * the tail instead of the whole file while the connection idles. */
            sync_file_range(fd, (off_t)synced, (off_t)(got - synced), SYNC_FILE_RANGE_WRITE);
            synced = got;
        }
        atomic_fetch_add(&fetch->done, (uint64_t)r);
        bucket_take(fetch, (size_t)r);
    }
    if (got != f->size) {
        bk_sftp_conn_err_set(
            errstr, n, "%s: %s:%s ended after %llu bytes, the manifest says %llu: refused", f->name,
            conn->where, remote, (unsigned long long)got, (unsigned long long)f->size);
        goto out;
    }
    sum = XXH3_64bits_digest(xs);
    if (sum != f->xxh3) {
        bk_sftp_conn_err_set(
            errstr, n, "%s: checksum %016llx, expected %016llx: refused (fetched from %s:%s)",
            f->name, (unsigned long long)sum, (unsigned long long)f->xxh3, conn->where, remote);
        goto out;
    }
    /* The snapshot becomes a live DB: its files must be on disk before we say so. */
    if (fdatasync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        bk_sftp_conn_err_set(errstr, n, "%s: syncing %s: %s", f->name, part,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    fd = -1;
    if (rename(part, final) != 0) {
        bk_sftp_conn_err_set(errstr, n, "%s: renaming %s: %s", f->name, part,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (rc != 0) {
        unlink(part);
    }
    libssh2_sftp_close_handle(h);
    return rc;
}

/* Takes files, largest first, until none is left or someone failed. @locality own thread */
static void *fetch_worker(void *arg)
{
    bk_sftp_worker_t *w = arg;
    bk_sftp_fetch_t *fetch = w->fetch;
    size_t bufsize = BK_SFTP_BUF;
    char errstr[1024];
    char *buf = NULL;
    XXH3_state_t *xs = NULL;

    if (w->conn.fd < 0 && bk_sftp_conn_open(fetch->conf, &w->conn, errstr, sizeof(errstr)) != 0) {
        /* The first connection worked, so this is a limit (sshd's MaxStartups) or a
         * hiccup: the other workers carry on with the files. */
        goto done;
    }
    if (fetch->bucket.rate > 0) {
        /* libssh2 reads ahead 4 buffers: keep that to about half a second's worth. */
        size_t want = (size_t)(fetch->bucket.rate / 8);
        bufsize = want < 32768 ? 32768 : want < bufsize ? want : bufsize;
    }
    buf = malloc(bufsize);
    xs = XXH3_createState();
    if (!buf || !xs) {
        fetch_fail(fetch, "out of memory");
        goto done;
    }
    for (;;) {
        int i, rc;
        pthread_mutex_lock(&fetch->lock);
        i = fetch->next < fetch->m->nfiles && !atomic_load(&fetch->failed)
                ? fetch->order[fetch->next++]
                : -1;
        if (i >= 0) {
            fetch->state[i] = 1;
        }
        pthread_mutex_unlock(&fetch->lock);
        if (i < 0) {
            break;
        }
        rc = fetch_file(w, i, buf, bufsize, xs, errstr, sizeof(errstr));
        if (rc < 0) {
            fetch_fail(fetch, errstr);
        }
        if (rc != 0) {
            break;
        }
        pthread_mutex_lock(&fetch->lock);
        fetch->state[i] = 2;
        pthread_mutex_unlock(&fetch->lock);
    }
done:
    if (!w->lent) {
        bk_sftp_conn_close(&w->conn);
    }
    free(buf);
    XXH3_freeState(xs);
    pthread_mutex_lock(&fetch->lock);
    fetch->running--;
    pthread_cond_signal(&fetch->cond);
    pthread_mutex_unlock(&fetch->lock);
    return NULL;
}

int bk_sftp_parallel_default(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus >= 8 ? 4 : cpus >= 2 ? (int)(cpus / 2) : 1;
}

static const bk_manifest_t *by_size_m; /* qsort has no context argument; set under lock */
static pthread_mutex_t by_size_lock = PTHREAD_MUTEX_INITIALIZER;

static int by_size_desc(const void *a, const void *b)
{
    uint64_t sa = by_size_m->files[*(const int *)a].size;
    uint64_t sb = by_size_m->files[*(const int *)b].size;
    return sa < sb ? 1 : sa > sb ? -1 : *(const int *)a - *(const int *)b;
}

static int fetch_with(const bk_sftp_conf_t *conf, bk_sftp_conn_t *lent, const char *remote_dir,
                      const bk_manifest_t *m, const char *local_dir,
                      void (*progress)(void *opaque, uint64_t done, uint64_t total), void *opaque,
                      char *errstr, size_t errstr_size);

int bk_sftp_fetch(const bk_sftp_conf_t *conf, const char *remote_dir, const bk_manifest_t *m,
                  const char *local_dir,
                  void (*progress)(void *opaque, uint64_t done, uint64_t total), void *opaque,
                  char *errstr, size_t errstr_size)
{
    return fetch_with(conf, NULL, remote_dir, m, local_dir, progress, opaque, errstr, errstr_size);
}

int bk_sftp_session_fetch(bk_sftp_session_t *s, const char *remote_dir, const bk_manifest_t *m,
                          const char *local_dir,
                          void (*progress)(void *opaque, uint64_t done, uint64_t total),
                          void *opaque, char *errstr, size_t errstr_size)
{
    if (s->conn.broken || s->conn.fd < 0) {
        bk_sftp_conn_err_set(errstr, errstr_size, "the SSH connection to %s was lost",
                             s->conn.where);
        return -1;
    }
    return fetch_with(s->conf, &s->conn, remote_dir, m, local_dir, progress, opaque, errstr,
                      errstr_size);
}

/* The fetch; with `lent`, its first worker uses that open connection and leaves it open. */
static int fetch_with(const bk_sftp_conf_t *conf, bk_sftp_conn_t *lent, const char *remote_dir,
                      const bk_manifest_t *m, const char *local_dir,
                      void (*progress)(void *opaque, uint64_t done, uint64_t total), void *opaque,
                      char *errstr, size_t errstr_size)
{
    bk_sftp_fetch_t fetch = {0};
    bk_sftp_worker_t *workers = NULL;
    int nworkers = conf->parallel > 0 ? conf->parallel : bk_sftp_parallel_default();
    int started = 0, dfd = -1, rc = -1;
    char eb[128];

    dfd = open(local_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        bk_sftp_conn_err_set(errstr, errstr_size, "local directory %s: %s", local_dir,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        return -1;
    }
    if (m->nfiles == 0) {
        close(dfd);
        if (progress) {
            progress(opaque, 0, 0);
        }
        return 0;
    }
    if (nworkers > m->nfiles) {
        nworkers = m->nfiles;
    }
    if (conf->parallel <= 0 && (uint64_t)nworkers > 1 + m->total_bytes / BK_SFTP_PER_CONN) {
        nworkers = (int)(1 + m->total_bytes / BK_SFTP_PER_CONN);
    }
    fetch.conf = conf;
    fetch.remote_dir = remote_dir;
    fetch.local_dir = local_dir;
    fetch.m = m;
    fetch.order = malloc(sizeof(int) * (size_t)m->nfiles);
    fetch.state = calloc((size_t)m->nfiles, 1);
    workers = calloc((size_t)nworkers, sizeof(*workers));
    pthread_mutex_init(&fetch.lock, NULL);
    pthread_cond_init(&fetch.cond, NULL);
    pthread_mutex_init(&fetch.bucket.lock, NULL);
    fetch.bucket.rate = (double)conf->rate_bytes_per_s;
    fetch.bucket.burst = fetch.bucket.rate / 10;
    fetch.bucket.last = bk_clock_mono_s();
    for (int i = 0; i < m->nfiles; i++) {
        fetch.order[i] = i;
    }
    pthread_mutex_lock(&by_size_lock);
    by_size_m = m;
    qsort(fetch.order, (size_t)m->nfiles, sizeof(int), by_size_desc);
    pthread_mutex_unlock(&by_size_lock);

    /* The first connection here: a refused host key or login is one clear error, not one
     * per worker. */
    for (int i = 0; i < nworkers; i++) {
        workers[i].fetch = &fetch;
        workers[i].conn.fd = -1;
    }
    if (lent) {
        workers[0].conn = *lent;
        workers[0].lent = 1;
    } else if (bk_sftp_conn_open(conf, &workers[0].conn, errstr, errstr_size) != 0) {
        goto out;
    }
    for (; started < nworkers; started++) {
        pthread_mutex_lock(&fetch.lock);
        fetch.running++;
        pthread_mutex_unlock(&fetch.lock);
        if (pthread_create(&workers[started].thread, NULL, fetch_worker, &workers[started]) != 0) {
            pthread_mutex_lock(&fetch.lock);
            fetch.running--;
            pthread_mutex_unlock(&fetch.lock);
            if (started == 0) {
                if (!lent) {
                    bk_sftp_conn_close(&workers[0].conn);
                }
                fetch_fail(&fetch, "cannot start a fetch thread");
            }
            break;
        }
    }
    pthread_mutex_lock(&fetch.lock);
    while (fetch.running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        if (pthread_cond_timedwait(&fetch.cond, &fetch.lock, &ts) == ETIMEDOUT && progress &&
            !atomic_load(&fetch.failed)) {
            pthread_mutex_unlock(&fetch.lock);
            progress(opaque, atomic_load(&fetch.done), m->total_bytes);
            pthread_mutex_lock(&fetch.lock);
        }
    }
    pthread_mutex_unlock(&fetch.lock);
    for (int i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
    }
    if (lent) {
        *lent = workers[0].conn; /* it may have broken meanwhile */
    }
    if (!atomic_load(&fetch.failed) && fetch.next < m->nfiles) {
        /* Every worker lost its connection before the files ran out (the first one failed
         * after the others could not connect). */
        fetch_fail(&fetch, "no connection left to fetch the remaining files");
    }
    for (int i = 0; !atomic_load(&fetch.failed) && i < m->nfiles; i++) {
        if (fetch.state[i] != 2) {
            fetch_fail(&fetch, "a file was not fetched");
        }
    }
    if (atomic_load(&fetch.failed)) {
        bk_sftp_conn_err_set(errstr, errstr_size, "%s", fetch.err);
        goto out;
    }
    if (fsync(dfd) != 0) {
        bk_sftp_conn_err_set(errstr, errstr_size, "syncing %s: %s", local_dir,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
        goto out;
    }
    if (progress) {
        progress(opaque, atomic_load(&fetch.done), m->total_bytes);
    }
    rc = 0;
out:
    if (rc != 0) {
        /* No file of the manifest stays: a half-fetched snapshot is no snapshot. */
        for (int i = 0; i < m->nfiles; i++) {
            if (fetch.state[i] == 2) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", local_dir, m->files[i].name);
                unlink(path);
            }
        }
    }
    close(dfd);
    pthread_mutex_destroy(&fetch.bucket.lock);
    pthread_cond_destroy(&fetch.cond);
    pthread_mutex_destroy(&fetch.lock);
    free(workers);
    free(fetch.state);
    free(fetch.order);
    return rc;
}
