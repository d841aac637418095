/* sftp_internal.h - one SFTP connection (TCP, SSH handshake with the chosen ciphers, host
 * key checked against known_hosts, public-key login, the SFTP channel) as sftp_conn.c makes
 * it, for sftp.c's reads and fetches and sftp_files.c's single files. Shared by those files only. A connection belongs
 * to one thread at a time. */
#ifndef BK_SFTP_INTERNAL_H
#define BK_SFTP_INTERNAL_H

#include <stddef.h>

#include <libssh2.h>
#include <libssh2_sftp.h>

#include "replica/sftp.h"

typedef struct bk_sftp_conn_s {
    int fd;
    LIBSSH2_SESSION *ssh;
    LIBSSH2_SFTP *sftp;
    int broken;      /* timed out or reset: shut down, every further call fails at once */
    char where[300]; /* "host:port", for messages */
} bk_sftp_conn_t;

const char *bk_sftp_conn_errno(int e, char *buf, size_t n);
__attribute__((format(printf, 3, 4))) void bk_sftp_conn_err_set(char *errstr, size_t n,
                                                                const char *fmt, ...);
const char *bk_sftp_conn_sftp_err(bk_sftp_conn_t *conn, long rc);
void bk_sftp_conn_break(bk_sftp_conn_t *conn, long rc);
void bk_sftp_conn_close(bk_sftp_conn_t *conn);
/* A session's connection (sftp.c), for sftp_files.c. */
bk_sftp_conn_t *bk_sftp_session_conn(bk_sftp_session_t *s);
int bk_sftp_conn_open(const bk_sftp_conf_t *conf, bk_sftp_conn_t *conn, char *errstr, size_t n);

#endif
