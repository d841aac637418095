/* sftp.h - cold bootstrap's transport: fetches a snapshot's files (snapshot.h) over SFTP
 * (libssh2) from the active's host, as its own OpenSSH sshd serves them.
 *
 * Security: the host key must be in known_hosts (no trust on first use); public-key
 * authentication only; every name is checked with bk_manifest_name_ok; a remote file must
 * be a regular file (lstat: no symlink) of the manifest's size and XXH3-64. Files are
 * written as NAME.part and renamed when complete and verified. It does not open or install
 * the snapshot (bk_install_snapshot does) and keeps no state between calls. */
#ifndef BK_SFTP_H
#define BK_SFTP_H

#include <stddef.h>
#include <stdint.h>

#include "engine/manifest.h"

typedef struct bk_sftp_conf_s {
    const char *host; /* name or address of the active's host */
    int port;         /* <= 0: 22 */
    const char *user;
    const char *private_key;  /* file: OpenSSH or PEM format */
    const char *public_key;   /* NULL: private_key + ".pub" if it exists, else derived */
    const char *passphrase;   /* NULL: none. Never logged */
    const char *known_hosts;  /* OpenSSH format; the host's key must be there */
    int timeout_ms;           /* connect and each blocking SSH step; <= 0: 30000 */
    int64_t rate_bytes_per_s; /* all files together; 0: unlimited */
    int parallel;             /* files at once, each on its own connection; <= 0: the default */
} bk_sftp_conf_t;

/* The login half of conf from beck's settings (docs/settings.md): user ssh_user (else the
 * user running beck), private_key ssh_key, known_hosts ssh_known_hosts (else
 * ~/.ssh/known_hosts), timeout_ms bootstrap_timeout_ms. user and known point into the
 * caller's buffers. host, port and the rest are left as they are. */
struct bk_conf_s;
void bk_sftp_conf_settings(const struct bk_conf_s *settings, bk_sftp_conf_t *conf, char *user,
                           size_t user_size, char *known, size_t known_size);

/* The default of conf->parallel: half the online CPUs, 1 to 4 (each connection keeps a core
 * busy at each end), and by default no more connections than one per 64 MiB of snapshot
 * (a handshake costs ~0.1 s). An explicit conf->parallel is capped by the file count only. */
int bk_sftp_parallel_default(void);

/* Reads a small remote file (the manifest) whole into *buf (malloc'd, NUL-terminated,
 * caller frees) and *len. Refuses a file longer than max. 0, or -1 with errstr. */
int bk_sftp_read_small(const bk_sftp_conf_t *conf, const char *remote_path, size_t max, char **buf,
                       size_t *len, char *errstr, size_t errstr_size);

/* Fetches every file of m from remote_dir into local_dir (which must exist), conf->parallel
 * files at once, verifying type, size and XXH3-64 of each. progress (may be NULL) is called
 * about once a second and once at the end, on the calling thread. 0, or -1 with errstr
 * saying what failed and where; on failure no file of m (complete or partial) is left in
 * local_dir. */
int bk_sftp_fetch(const bk_sftp_conf_t *conf, const char *remote_dir, const bk_manifest_t *m,
                  const char *local_dir,
                  void (*progress)(void *opaque, uint64_t done, uint64_t total), void *opaque,
                  char *errstr, size_t errstr_size);

/* A session: one connection (TCP, SSH, SFTP, checked and logged in as above) for several
 * calls, so that fetching many small snapshots does not pay a handshake each. A fetch on a
 * session runs its first worker on the session's connection and opens the others (if
 * conf->parallel asks for more). After a failure that broke the connection, every call
 * fails at once ("... was lost"): disconnect and connect again. Not for two threads at
 * once. */
typedef struct bk_sftp_session_s bk_sftp_session_t;
bk_sftp_session_t *bk_sftp_connect(const bk_sftp_conf_t *conf, char *errstr, size_t errstr_size);
void bk_sftp_disconnect(bk_sftp_session_t *s);
int bk_sftp_session_read_small(bk_sftp_session_t *s, const char *remote_path, size_t max,
                               char **buf, size_t *len, char *errstr, size_t errstr_size);
int bk_sftp_session_fetch(bk_sftp_session_t *s, const char *remote_dir, const bk_manifest_t *m,
                          const char *local_dir,
                          void (*progress)(void *opaque, uint64_t done, uint64_t total),
                          void *opaque, char *errstr, size_t errstr_size);

/* One file at a time on a session (sftp_files.c), for the snapshot archive on a remote host.
 * Each returns 0, or -1 with errstr naming the host and path (a broken connection fails
 * every later call: connect again). */
/* Whether the session's connection was lost (every call fails then: connect again). */
int bk_sftp_session_lost(bk_sftp_session_t *s);
/* Size and modification time (s) of path (not following a symlink); 1 when there is none. */
int bk_sftp_session_stat(bk_sftp_session_t *s, const char *path, uint64_t *size, int64_t *mtime,
                         char *errstr, size_t n);
/* Makes path and its missing parents. */
int bk_sftp_session_mkdirs(bk_sftp_session_t *s, const char *path, char *errstr, size_t n);
/* Uploads local to remote: written as remote.part, synced (where the server does fsync),
 * renamed to remote (an existing remote is removed first: SFTP v3 renames onto no existing
 * name). */
int bk_sftp_session_put(bk_sftp_session_t *s, const char *local, const char *remote,
                        char *errstr, size_t n);
/* Downloads remote to local (through local.part, synced, renamed) only when it has `size`
 * bytes and XXH3-64 `xxh3`. */
int bk_sftp_session_get(bk_sftp_session_t *s, const char *remote, const char *local,
                        uint64_t size, uint64_t xxh3, char *errstr, size_t n);
/* The names in dir (without . entries), malloc'd each and the list; none when dir is not
 * there. */
int bk_sftp_session_list(bk_sftp_session_t *s, const char *dir, char ***names, int *count,
                         char *errstr, size_t n);
int bk_sftp_session_unlink(bk_sftp_session_t *s, const char *path, char *errstr, size_t n);

#endif
