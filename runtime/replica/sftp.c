/* sftp.c - fetches a snapshot's files over SFTP (libssh2 1.10) from an OpenSSH sshd. */
#define _GNU_SOURCE
#include "replica/sftp.h"

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

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <xxhash.h>

/* -- Transport choices ----------------------------------------------------------------
 *
 * Measured on 1 GiB (16 x 64 MiB) from a private sshd on 127.0.0.1, 2 cores (scripts/bench/
 * bootstrap-transfer; docs/bootstrap.md has the figures). libssh2 1.10 (OpenSSL 3 backend)
 * offers aes{128,192,256}-ctr and CBC modes (which OpenSSH 9 no longer serves), no
 * chacha20-poly1305 and no AES-GCM (both came in 1.11), no -etm MACs and no umac. Its
 * transport decrypts one 16-byte block per EVP call, so the call overhead dominates and
 * the cipher matters little: aes128-ctr ~2% ahead of aes256-ctr. MACs: hmac-sha1 ~4% ahead
 * of hmac-sha2-256 and hmac-sha2-512 ~6% behind (SHA-NI here); we ask for hmac-sha2-256
 * first all the same: 4% is not worth a SHA-1 finding in every audit, and hardened sshds
 * refuse sha1. The others follow for an sshd that refuses the first choice.
 *
 * Reads: libssh2_sftp_read keeps min(4 x buffer, 8 MiB) of 30000-byte requests in flight.
 * 32 KiB buffers gave ~50 MB/s; 1-2 MiB the best (8 MiB no better). One connection keeps
 * one core busy (libcrypto ~45% of it, copying into the page cache ~17%, libssh2 itself
 * ~6%), so connections (threads) are what scale, as long as the sshd end has cores too:
 * on 2 cores with the sshd on the same host a second connection made it slower (the two
 * sshd processes take the cores), so the default is half the CPUs (1 to 4). */
#define BK_SFTP_CIPHERS "aes128-ctr,aes256-ctr,aes192-ctr"
#define BK_SFTP_MACS "hmac-sha2-256,hmac-sha1,hmac-sha2-512"
#define BK_SFTP_BUF (2 << 20)
#define BK_SFTP_SYNC_STEP (8u << 20)
#define BK_SFTP_PER_CONN (64ull << 20) /* a smaller snapshot is not worth another handshake */
#define BK_SFTP_TIMEOUT_MS 30000

typedef struct bk_sftp_conn_s {
    int fd;
    LIBSSH2_SESSION *ssh;
    LIBSSH2_SFTP *sftp;
    int broken;      /* timed out or reset: shut down, every further call fails at once */
    char where[300]; /* "host:port", for messages */
} bk_sftp_conn_t;

static pthread_once_t bk_sftp_once = PTHREAD_ONCE_INIT;
static int bk_sftp_init_rc;

static void sftp_init_once(void)
{
    bk_sftp_init_rc = libssh2_init(0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *errno_str(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n); /* the GNU one: returns the text */
}

/* Error text; a long one is cut, which is fine for a message. */
__attribute__((format(printf, 3, 4))) static void err_set(char *errstr, size_t n, const char *fmt,
                                                          ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, n, fmt, ap);
    va_end(ap);
}

/* libssh2's last error message of a session (a static or session-owned string). */
static const char *ssh_err(bk_sftp_conn_t *conn)
{
    char *msg = NULL;
    libssh2_session_last_error(conn->ssh, &msg, NULL, 0);
    return msg && *msg ? msg : "unknown error";
}

/* The text of a failed SFTP call: the server's status if it sent one, a lost connection or
 * timeout as such, else libssh2's text. */
static const char *sftp_err(bk_sftp_conn_t *conn, long rc)
{
    switch (rc) {
    case LIBSSH2_ERROR_SFTP_PROTOCOL:
        break;
    case LIBSSH2_ERROR_TIMEOUT:
    case LIBSSH2_ERROR_SOCKET_TIMEOUT:
        return "timed out";
    case LIBSSH2_ERROR_SOCKET_SEND:
    case LIBSSH2_ERROR_SOCKET_RECV:
    case LIBSSH2_ERROR_SOCKET_DISCONNECT:
    case LIBSSH2_ERROR_CHANNEL_CLOSED:
    case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
        return "the SSH connection was lost";
    default:
        return ssh_err(conn);
    }
    switch (libssh2_sftp_last_error(conn->sftp)) {
    case LIBSSH2_FX_NO_SUCH_FILE:
    case LIBSSH2_FX_NO_SUCH_PATH:
        return "no such file";
    case LIBSSH2_FX_PERMISSION_DENIED:
        return "permission denied";
    case LIBSSH2_FX_EOF:
        return "end of file";
    default:
        return "the server reported a failure";
    }
}

/* -- Connecting ------------------------------------------------------------------------ */

static int conf_port(const bk_sftp_conf_t *conf)
{
    return conf->port > 0 ? conf->port : 22;
}

static int conf_timeout(const bk_sftp_conf_t *conf)
{
    return conf->timeout_ms > 0 ? conf->timeout_ms : BK_SFTP_TIMEOUT_MS;
}

/* A TCP connection, connect bounded by the timeout; the socket is blocking afterwards. */
static int tcp_connect(const bk_sftp_conf_t *conf, const char *where, char *errstr, size_t n)
{
    struct addrinfo hints = {0}, *res = NULL, *ai;
    char port[16], eb[128];
    int fd = -1, rc, err = 0, one = 1, tmo = conf_timeout(conf);

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", conf_port(conf));
    if ((rc = getaddrinfo(conf->host, port, &hints, &res)) != 0) {
        err_set(errstr, n, "cannot resolve %s: %s", conf->host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        double deadline = now_s() + tmo / 1000.0;
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            break;
        }
        err = errno;
        while (err == EINPROGRESS || err == EINTR) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int left = (int)((deadline - now_s()) * 1000);
            rc = poll(&p, 1, left > 0 ? left : 0);
            if (rc == 1) {
                socklen_t sl = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl);
            } else {
                err = rc == 0 ? ETIMEDOUT : errno;
            }
        }
        if (err != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (err == ETIMEDOUT) {
            err_set(errstr, n, "cannot connect to %s: no answer within %d ms", where, tmo);
        } else {
            err_set(errstr, n, "cannot connect to %s: %s", where, errno_str(err, eb, sizeof(eb)));
        }
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Reads an OpenSSH known_hosts file line by line: a line libssh2 cannot parse (a key type
 * it does not know, a @cert-authority marker) is skipped instead of failing the file, so
 * it never vouches for anything. Returns the entries read, or -1 if the file cannot be
 * read. */
static int known_hosts_read(LIBSSH2_KNOWNHOSTS *kh, const char *path)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int count = 0;

    if (!f) {
        return -1;
    }
    while ((len = getline(&line, &cap, f)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len > 0 && line[0] != '#' && line[0] != '@' &&
            libssh2_knownhost_readline(kh, line, (size_t)len, LIBSSH2_KNOWNHOST_FILE_OPENSSH) ==
                0) {
            count++;
        }
    }
    free(line);
    fclose(f);
    return count;
}

/* Host key algorithms to ask for: those known_hosts has for this host (hashed names
 * count for every host). Without this libssh2 prefers ecdsa and would call a host whose
 * known ed25519 key is the only one listed "unknown". Empty when none is listed. */
static void hostkey_pref(LIBSSH2_KNOWNHOSTS *kh, const char *host, int port, char *out, size_t n)
{
    struct libssh2_knownhost *kn = NULL, *prev = NULL;
    char bracketed[300];
    int have[8] = {0};
    static const struct {
        int key;
        const char *algs;
    } order[] = {
        {LIBSSH2_KNOWNHOST_KEY_ED25519, "ssh-ed25519"},
        {LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ecdsa-sha2-nistp256"},
        {LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ecdsa-sha2-nistp384"},
        {LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ecdsa-sha2-nistp521"},
        {LIBSSH2_KNOWNHOST_KEY_SSHRSA, "rsa-sha2-512,rsa-sha2-256,ssh-rsa"},
    };

    snprintf(bracketed, sizeof(bracketed), "[%s]:%d", host, port);
    while (libssh2_knownhost_get(kh, &kn, prev) == 0) {
        int hashed = (kn->typemask & LIBSSH2_KNOWNHOST_TYPE_MASK) != LIBSSH2_KNOWNHOST_TYPE_PLAIN;
        int key = (kn->typemask & LIBSSH2_KNOWNHOST_KEY_MASK) >> LIBSSH2_KNOWNHOST_KEY_SHIFT;
        if (hashed || (kn->name && (strcmp(kn->name, bracketed) == 0 ||
                                    (port == 22 && strcmp(kn->name, host) == 0)))) {
            if (key >= 0 && key < 8) {
                have[key] = 1;
            }
        }
        prev = kn;
    }
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (have[order[i].key >> LIBSSH2_KNOWNHOST_KEY_SHIFT]) {
            size_t l = strlen(out);
            snprintf(out + l, n - l, "%s%s", l ? "," : "", order[i].algs);
        }
    }
}

static int hostkey_check(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, LIBSSH2_KNOWNHOSTS *kh,
                         char *errstr, size_t n)
{
    size_t klen = 0;
    int ktype = 0, bits, rc;
    const char *key = libssh2_session_hostkey(conn->ssh, &klen, &ktype);
    struct libssh2_knownhost *found = NULL;

    switch (ktype) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
        bits = LIBSSH2_KNOWNHOST_KEY_SSHRSA;
        break;
    case LIBSSH2_HOSTKEY_TYPE_DSS:
        bits = LIBSSH2_KNOWNHOST_KEY_SSHDSS;
        break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
        bits = LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
        break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
        bits = LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
        break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
        bits = LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
        break;
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
        bits = LIBSSH2_KNOWNHOST_KEY_ED25519;
        break;
    default:
        err_set(errstr, n, "host %s offers a host key of unknown type: refused", conn->where);
        return -1;
    }
    if (!key) {
        err_set(errstr, n, "host %s: no host key: %s", conn->where, ssh_err(conn));
        return -1;
    }
    rc = libssh2_knownhost_checkp(
        kh, conf->host, conf_port(conf), key, klen,
        LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bits, &found);
    switch (rc) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
        return 0;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
        err_set(errstr, n, "host key of %s does not match known_hosts %s (changed key?): refused",
                conn->where, conf->known_hosts);
        return -1;
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
        err_set(errstr, n, "host %s is not in known_hosts %s: refused", conn->where,
                conf->known_hosts);
        return -1;
    default:
        err_set(errstr, n, "checking the host key of %s failed: refused", conn->where);
        return -1;
    }
}

static int authenticate(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, char *errstr, size_t n)
{
    char pub[4096], eb[128];
    const char *pubp = conf->public_key;
    int rc;

    if (access(conf->private_key, R_OK) != 0) {
        err_set(errstr, n, "private key %s: %s", conf->private_key,
                errno_str(errno, eb, sizeof(eb)));
        return -1;
    }
    if (!pubp) {
        /* NULL lets libssh2 derive the public key from the private one. */
        snprintf(pub, sizeof(pub), "%s.pub", conf->private_key);
        pubp = access(pub, R_OK) == 0 ? pub : NULL;
    }
    rc = libssh2_userauth_publickey_fromfile_ex(conn->ssh, conf->user,
                                                (unsigned int)strlen(conf->user), pubp,
                                                conf->private_key, conf->passphrase);
    if (rc == 0) {
        return 0;
    }
    if (rc == LIBSSH2_ERROR_FILE) {
        /* libssh2's text names neither the key nor the passphrase. */
        err_set(errstr, n, "private key %s cannot be used (wrong passphrase or format?): %s",
                conf->private_key, ssh_err(conn));
    } else if (rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED ||
               rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED) {
        err_set(errstr, n,
                "%s refused public-key authentication of user %s with key %s "
                "(not in authorized_keys?)",
                conn->where, conf->user, conf->private_key);
    } else {
        err_set(errstr, n, "authentication of user %s at %s failed: %s", conf->user, conn->where,
                ssh_err(conn));
    }
    return -1;
}

/* After a timeout or a reset: shuts the socket down (it stays open, so its number cannot
 * be reused under libssh2), so that the goodbyes below fail at once instead of waiting
 * for the timeout again, and libssh2 still frees everything. */
static void conn_break(bk_sftp_conn_t *conn, long rc)
{
    if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL && conn->fd >= 0) {
        shutdown(conn->fd, SHUT_RDWR);
        conn->broken = 1;
    }
}

static void conn_close(bk_sftp_conn_t *conn)
{
    if (conn->sftp) {
        libssh2_sftp_shutdown(conn->sftp);
    }
    if (conn->ssh) {
        if (!conn->broken) {
            libssh2_session_disconnect(conn->ssh, "done");
        }
        libssh2_session_free(conn->ssh);
    }
    if (conn->fd >= 0) {
        close(conn->fd);
    }
    conn->sftp = NULL;
    conn->ssh = NULL;
    conn->fd = -1;
}

/* TCP, SSH handshake with our cipher/MAC choice, host key check, public-key
 * authentication, SFTP. 0, or -1 with errstr (and conn closed). */
static int conn_open(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, char *errstr, size_t n)
{
    LIBSSH2_KNOWNHOSTS *kh = NULL;
    char hostkeys[256];
    int rc;

    memset(conn, 0, sizeof(*conn));
    conn->fd = -1;
    if (!conf->host || !conf->user || !conf->private_key || !conf->known_hosts) {
        /* settings, not code: say which is missing */
        err_set(errstr, n, "no %s given: cannot fetch over SFTP",
                !conf->host          ? "host"
                : !conf->user        ? "user"
                : !conf->private_key ? "private key file"
                                     : "known_hosts file");
        return -1;
    }
    snprintf(conn->where, sizeof(conn->where), "%s:%d", conf->host, conf_port(conf));
    pthread_once(&bk_sftp_once, sftp_init_once);
    if (bk_sftp_init_rc != 0) {
        err_set(errstr, n, "libssh2_init failed (%d)", bk_sftp_init_rc);
        return -1;
    }
    if ((conn->fd = tcp_connect(conf, conn->where, errstr, n)) < 0) {
        goto fail;
    }
    if (!(conn->ssh = libssh2_session_init())) {
        err_set(errstr, n, "libssh2_session_init failed");
        goto fail;
    }
    libssh2_session_set_blocking(conn->ssh, 1);
    libssh2_session_set_timeout(conn->ssh, conf_timeout(conf));
    if (!(kh = libssh2_knownhost_init(conn->ssh))) {
        err_set(errstr, n, "libssh2_knownhost_init failed");
        goto fail;
    }
    if (known_hosts_read(kh, conf->known_hosts) < 0) {
        char eb[128];
        err_set(errstr, n, "known_hosts %s: %s", conf->known_hosts,
                errno_str(errno, eb, sizeof(eb)));
        goto fail;
    }
    hostkey_pref(kh, conf->host, conf_port(conf), hostkeys, sizeof(hostkeys));
    if (hostkeys[0]) {
        libssh2_session_method_pref(conn->ssh, LIBSSH2_METHOD_HOSTKEY, hostkeys);
    }
    libssh2_session_method_pref(conn->ssh, LIBSSH2_METHOD_CRYPT_CS, BK_SFTP_CIPHERS);
    libssh2_session_method_pref(conn->ssh, LIBSSH2_METHOD_CRYPT_SC, BK_SFTP_CIPHERS);
    libssh2_session_method_pref(conn->ssh, LIBSSH2_METHOD_MAC_CS, BK_SFTP_MACS);
    libssh2_session_method_pref(conn->ssh, LIBSSH2_METHOD_MAC_SC, BK_SFTP_MACS);
    if ((rc = libssh2_session_handshake(conn->ssh, conn->fd)) != 0) {
        err_set(errstr, n, "SSH handshake with %s failed: %s", conn->where,
                rc == LIBSSH2_ERROR_TIMEOUT ? "timed out" : ssh_err(conn));
        goto fail;
    }
    if (hostkey_check(conf, conn, kh, errstr, n) != 0) {
        goto fail;
    }
    libssh2_knownhost_free(kh);
    kh = NULL;
    if (authenticate(conf, conn, errstr, n) != 0) {
        goto fail;
    }
    if (!(conn->sftp = libssh2_sftp_init(conn->ssh))) {
        err_set(errstr, n, "cannot start SFTP on %s: %s", conn->where, ssh_err(conn));
        goto fail;
    }
    return 0;
fail:
    if (kh) {
        libssh2_knownhost_free(kh);
    }
    if (conn->fd >= 0) {
        shutdown(conn->fd, SHUT_RDWR);
    }
    conn->broken = 1;
    conn_close(conn);
    return -1;
}

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
        err_set(errstr, errstr_size, "%s:%s: %s", connp->where, remote_path, sftp_err(connp, r));
        conn_break(connp, r);
        goto fail;
    }
    data = malloc(max + 2);
    while ((r = libssh2_sftp_read(h, data + got, max + 1 - got)) > 0) {
        got += (size_t)r;
        if (got > max) {
            err_set(errstr, errstr_size, "%s:%s: longer than %zu bytes: refused", connp->where,
                    remote_path, max);
            goto fail;
        }
    }
    if (r < 0) {
        err_set(errstr, errstr_size, "%s:%s: read failed: %s", connp->where, remote_path,
                sftp_err(connp, r));
        conn_break(connp, r);
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
    if (conn_open(conf, &conn, errstr, errstr_size) != 0) {
        return -1;
    }
    rc = read_small_on(&conn, remote_path, max, buf, len, errstr, errstr_size);
    conn_close(&conn);
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
        err_set(errstr, errstr_size, "out of memory");
        return NULL;
    }
    s->conf = conf;
    if (conn_open(conf, &s->conn, errstr, errstr_size) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void bk_sftp_disconnect(bk_sftp_session_t *s)
{
    if (s) {
        conn_close(&s->conn);
        free(s);
    }
}

int bk_sftp_session_read_small(bk_sftp_session_t *s, const char *remote_path, size_t max,
                               char **buf, size_t *len, char *errstr, size_t errstr_size)
{
    if (s->conn.broken || s->conn.fd < 0) {
        err_set(errstr, errstr_size, "the SSH connection to %s was lost", s->conn.where);
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
        err_set(fetch->err, sizeof(fetch->err), "%s", msg);
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
    t = now_s();
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
        err_set(errstr, n, "manifest file name '%s' is not a safe file name: refused", f->name);
        return -1;
    }
    if (snprintf(remote, sizeof(remote), "%s/%s", fetch->remote_dir, f->name) >=
            (int)sizeof(remote) ||
        snprintf(final, sizeof(final), "%s/%s", fetch->local_dir, f->name) >=
            (int)sizeof(final) - 5 ||
        snprintf(part, sizeof(part), "%s.part", final) >= (int)sizeof(part)) {
        err_set(errstr, n, "%s: path too long", f->name);
        return -1;
    }

    /* lstat: a symlink could point anywhere on the active's host. */
    r = libssh2_sftp_stat_ex(conn->sftp, remote, (unsigned int)strlen(remote), LIBSSH2_SFTP_LSTAT,
                             &a);
    if (r != 0) {
        err_set(errstr, n, "%s: %s:%s: %s", f->name, conn->where, remote, sftp_err(conn, r));
        conn_break(conn, r);
        return -1;
    }
    if (!(a.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) || !(a.flags & LIBSSH2_SFTP_ATTR_SIZE)) {
        err_set(errstr, n, "%s: %s:%s: the server gave no type or size: refused", f->name,
                conn->where, remote);
        return -1;
    }
    if (LIBSSH2_SFTP_S_ISLNK(a.permissions)) {
        err_set(errstr, n, "%s: %s:%s is a symlink: refused", f->name, conn->where, remote);
        return -1;
    }
    if (!LIBSSH2_SFTP_S_ISREG(a.permissions)) {
        err_set(errstr, n, "%s: %s:%s is not a regular file: refused", f->name, conn->where,
                remote);
        return -1;
    }
    if (a.filesize != f->size) {
        err_set(errstr, n, "%s: %s:%s has %llu bytes, the manifest says %llu: refused", f->name,
                conn->where, remote, (unsigned long long)a.filesize, (unsigned long long)f->size);
        return -1;
    }
    h = libssh2_sftp_open_ex(conn->sftp, remote, (unsigned int)strlen(remote), LIBSSH2_FXF_READ, 0,
                             LIBSSH2_SFTP_OPENFILE);
    if (!h) {
        r = libssh2_session_last_errno(conn->ssh);
        err_set(errstr, n, "%s: cannot open %s:%s: %s", f->name, conn->where, remote,
                sftp_err(conn, r));
        conn_break(conn, r);
        return -1;
    }
    unlink(part); /* a leftover of an earlier, killed fetch */
    fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        err_set(errstr, n, "%s: cannot create %s: %s", f->name, part,
                errno_str(errno, eb, sizeof(eb)));
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
            err_set(errstr, n, "%s: reading %s:%s failed after %llu bytes: %s", f->name,
                    conn->where, remote, (unsigned long long)got, sftp_err(conn, r));
            conn_break(conn, r);
            goto out;
        }
        got += (uint64_t)r;
        if (got > f->size) {
            err_set(errstr, n, "%s: %s:%s grew past the manifest's %llu bytes: refused", f->name,
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
                err_set(errstr, n, "%s: writing %s: %s", f->name, part,
                        errno_str(errno, eb, sizeof(eb)));
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
        err_set(errstr, n, "%s: %s:%s ended after %llu bytes, the manifest says %llu: refused",
                f->name, conn->where, remote, (unsigned long long)got, (unsigned long long)f->size);
        goto out;
    }
    sum = XXH3_64bits_digest(xs);
    if (sum != f->xxh3) {
        err_set(errstr, n, "%s: checksum %016llx, expected %016llx: refused (fetched from %s:%s)",
                f->name, (unsigned long long)sum, (unsigned long long)f->xxh3, conn->where, remote);
        goto out;
    }
    /* The snapshot becomes a live DB: its files must be on disk before we say so. */
    if (fdatasync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        err_set(errstr, n, "%s: syncing %s: %s", f->name, part, errno_str(errno, eb, sizeof(eb)));
        goto out;
    }
    fd = -1;
    if (rename(part, final) != 0) {
        err_set(errstr, n, "%s: renaming %s: %s", f->name, part, errno_str(errno, eb, sizeof(eb)));
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

    if (w->conn.fd < 0 && conn_open(fetch->conf, &w->conn, errstr, sizeof(errstr)) != 0) {
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
        conn_close(&w->conn);
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
                      void (*progress)(void *opaque, uint64_t done, uint64_t total),
                      void *opaque, char *errstr, size_t errstr_size);

int bk_sftp_fetch(const bk_sftp_conf_t *conf, const char *remote_dir, const bk_manifest_t *m,
                  const char *local_dir,
                  void (*progress)(void *opaque, uint64_t done, uint64_t total), void *opaque,
                  char *errstr, size_t errstr_size)
{
    return fetch_with(conf, NULL, remote_dir, m, local_dir, progress, opaque, errstr,
                      errstr_size);
}

int bk_sftp_session_fetch(bk_sftp_session_t *s, const char *remote_dir, const bk_manifest_t *m,
                          const char *local_dir,
                          void (*progress)(void *opaque, uint64_t done, uint64_t total),
                          void *opaque, char *errstr, size_t errstr_size)
{
    if (s->conn.broken || s->conn.fd < 0) {
        err_set(errstr, errstr_size, "the SSH connection to %s was lost", s->conn.where);
        return -1;
    }
    return fetch_with(s->conf, &s->conn, remote_dir, m, local_dir, progress, opaque, errstr,
                      errstr_size);
}

/* The fetch; with `lent`, its first worker uses that open connection and leaves it open. */
static int fetch_with(const bk_sftp_conf_t *conf, bk_sftp_conn_t *lent, const char *remote_dir,
                      const bk_manifest_t *m, const char *local_dir,
                      void (*progress)(void *opaque, uint64_t done, uint64_t total),
                      void *opaque, char *errstr, size_t errstr_size)
{
    bk_sftp_fetch_t fetch = {0};
    bk_sftp_worker_t *workers = NULL;
    int nworkers = conf->parallel > 0 ? conf->parallel : bk_sftp_parallel_default();
    int started = 0, dfd = -1, rc = -1;
    char eb[128];

    dfd = open(local_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        err_set(errstr, errstr_size, "local directory %s: %s", local_dir,
                errno_str(errno, eb, sizeof(eb)));
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
    fetch.bucket.last = now_s();
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
    } else if (conn_open(conf, &workers[0].conn, errstr, errstr_size) != 0) {
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
                    conn_close(&workers[0].conn);
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
        err_set(errstr, errstr_size, "%s", fetch.err);
        goto out;
    }
    if (fsync(dfd) != 0) {
        err_set(errstr, errstr_size, "syncing %s: %s", local_dir, errno_str(errno, eb, sizeof(eb)));
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
