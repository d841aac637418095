/* sftp_conn.c - an SFTP connection: TCP, SSH, host key, login, channel (sftp_internal.h). */
#define _GNU_SOURCE
#include "base/clock.h"
#include "replica/sftp_internal.h"

#include <pwd.h>

#include "base/conf.h"

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
#define BK_SFTP_TIMEOUT_MS 30000

static pthread_once_t bk_sftp_once = PTHREAD_ONCE_INIT;
static int bk_sftp_init_rc;

static void sftp_init_once(void)
{
    bk_sftp_init_rc = libssh2_init(0);
}

const char *bk_sftp_conn_errno(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n); /* the GNU one: returns the text */
}

/* Error text; a long one is cut, which is fine for a message. */
__attribute__((format(printf, 3, 4))) void bk_sftp_conn_err_set(char *errstr, size_t n,
                                                                const char *fmt, ...)
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
const char *bk_sftp_conn_sftp_err(bk_sftp_conn_t *conn, long rc)
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
        bk_sftp_conn_err_set(errstr, n, "cannot resolve %s: %s", conf->host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        double deadline = bk_clock_mono_s() + tmo / 1000.0;
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
            int left = (int)((deadline - bk_clock_mono_s()) * 1000);
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
            bk_sftp_conn_err_set(errstr, n, "cannot connect to %s: no answer within %d ms", where,
                                 tmo);
        } else {
            bk_sftp_conn_err_set(errstr, n, "cannot connect to %s: %s", where,
                                 bk_sftp_conn_errno(err, eb, sizeof(eb)));
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
        bk_sftp_conn_err_set(errstr, n, "host %s offers a host key of unknown type: refused",
                             conn->where);
        return -1;
    }
    if (!key) {
        bk_sftp_conn_err_set(errstr, n, "host %s: no host key: %s", conn->where, ssh_err(conn));
        return -1;
    }
    rc = libssh2_knownhost_checkp(
        kh, conf->host, conf_port(conf), key, klen,
        LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bits, &found);
    switch (rc) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
        return 0;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
        bk_sftp_conn_err_set(errstr, n,
                             "host key of %s does not match known_hosts %s (changed key?): refused",
                             conn->where, conf->known_hosts);
        return -1;
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
        bk_sftp_conn_err_set(errstr, n, "host %s is not in known_hosts %s: refused", conn->where,
                             conf->known_hosts);
        return -1;
    default:
        bk_sftp_conn_err_set(errstr, n, "checking the host key of %s failed: refused", conn->where);
        return -1;
    }
}

static int authenticate(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, char *errstr, size_t n)
{
    char pub[4096], eb[128];
    const char *pubp = conf->public_key;
    int rc;

    if (access(conf->private_key, R_OK) != 0) {
        bk_sftp_conn_err_set(errstr, n, "private key %s: %s", conf->private_key,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
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
        bk_sftp_conn_err_set(errstr, n,
                             "private key %s cannot be used (wrong passphrase or format?): %s",
                             conf->private_key, ssh_err(conn));
    } else if (rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED ||
               rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED) {
        bk_sftp_conn_err_set(errstr, n,
                             "%s refused public-key authentication of user %s with key %s "
                             "(not in authorized_keys?)",
                             conn->where, conf->user, conf->private_key);
    } else {
        bk_sftp_conn_err_set(errstr, n, "authentication of user %s at %s failed: %s", conf->user,
                             conn->where, ssh_err(conn));
    }
    return -1;
}

/* After a timeout or a reset: shuts the socket down (it stays open, so its number cannot
 * be reused under libssh2), so that the goodbyes below fail at once instead of waiting
 * for the timeout again, and libssh2 still frees everything. */
void bk_sftp_conn_break(bk_sftp_conn_t *conn, long rc)
{
    if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL && conn->fd >= 0) {
        shutdown(conn->fd, SHUT_RDWR);
        conn->broken = 1;
    }
}

void bk_sftp_conn_close(bk_sftp_conn_t *conn)
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
int bk_sftp_conn_open(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, char *errstr, size_t n)
{
    LIBSSH2_KNOWNHOSTS *kh = NULL;
    char hostkeys[256];
    int rc;

    memset(conn, 0, sizeof(*conn));
    conn->fd = -1;
    if (!conf->host || !conf->user || !conf->private_key || !conf->known_hosts) {
        /* settings, not code: say which is missing */
        bk_sftp_conn_err_set(errstr, n, "no %s given: cannot fetch over SFTP",
                             !conf->host          ? "host"
                             : !conf->user        ? "user"
                             : !conf->private_key ? "private key file"
                                                  : "known_hosts file");
        return -1;
    }
    snprintf(conn->where, sizeof(conn->where), "%s:%d", conf->host, conf_port(conf));
    pthread_once(&bk_sftp_once, sftp_init_once);
    if (bk_sftp_init_rc != 0) {
        bk_sftp_conn_err_set(errstr, n, "libssh2_init failed (%d)", bk_sftp_init_rc);
        return -1;
    }
    if ((conn->fd = tcp_connect(conf, conn->where, errstr, n)) < 0) {
        goto fail;
    }
    if (!(conn->ssh = libssh2_session_init())) {
        bk_sftp_conn_err_set(errstr, n, "libssh2_session_init failed");
        goto fail;
    }
    libssh2_session_set_blocking(conn->ssh, 1);
    libssh2_session_set_timeout(conn->ssh, conf_timeout(conf));
    if (!(kh = libssh2_knownhost_init(conn->ssh))) {
        bk_sftp_conn_err_set(errstr, n, "libssh2_knownhost_init failed");
        goto fail;
    }
    if (known_hosts_read(kh, conf->known_hosts) < 0) {
        char eb[128];
        bk_sftp_conn_err_set(errstr, n, "known_hosts %s: %s", conf->known_hosts,
                             bk_sftp_conn_errno(errno, eb, sizeof(eb)));
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
        bk_sftp_conn_err_set(errstr, n, "SSH handshake with %s failed: %s", conn->where,
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
        bk_sftp_conn_err_set(errstr, n, "cannot start SFTP on %s: %s", conn->where, ssh_err(conn));
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
    bk_sftp_conn_close(conn);
    return -1;
}

void bk_sftp_conf_settings(const bk_conf_t *settings, bk_sftp_conf_t *conf, char *user,
                           size_t user_size, char *known, size_t known_size)
{
    const char *u = bk_conf_str(settings, BK_CONF_SSH_USER);
    const char *k = bk_conf_str(settings, BK_CONF_SSH_KNOWN_HOSTS);
    const char *home = getenv("HOME");
    struct passwd pwbuf, *pw = NULL;
    char pwtext[2048];

    /* _r: stream threads recovering from an archive call this at once */
    if ((!u || (!k && !home)) &&
        getpwuid_r(getuid(), &pwbuf, pwtext, sizeof(pwtext), &pw) != 0) {
        pw = NULL;
    }

    snprintf(user, user_size, "%s", u ? u : pw ? pw->pw_name : "root");
    if (k) {
        snprintf(known, known_size, "%s", k);
    } else {
        snprintf(known, known_size, "%s/.ssh/known_hosts", home ? home : pw ? pw->pw_dir : "");
    }
    conf->user = user;
    conf->known_hosts = known;
    conf->private_key = bk_conf_str(settings, BK_CONF_SSH_KEY);
    conf->timeout_ms = (int)bk_conf_int(settings, BK_CONF_BOOTSTRAP_TIMEOUT_MS);
}
