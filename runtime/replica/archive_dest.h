/* archive_dest.h - where the snapshot archive lives (snapshot_archive): a directory (local,
 * or a mount), or `sftp://[user@]host[:port]/path` on another host over the same SFTP
 * transport as cold bootstrap (replica/sftp.h: ssh_key, ssh_known_hosts; the host key must
 * be known, public-key login only). archive.c writes and reads through these calls only, so
 * both kinds hold the same layout (archive.h).
 *
 * Paths given here are relative to the destination's root. Each call returns 0, or -1 with
 * err naming the destination and the path. An SFTP destination connects on first use and
 * again on the next call after a connection was lost. Not for two threads at once. */
#ifndef BK_ARCHIVE_DEST_H
#define BK_ARCHIVE_DEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"

typedef struct bk_archive_dest_s bk_archive_dest_t;

/* The destination `where` names (NULL with err for a malformed sftp:// or one without
 * ssh_key). Nothing is touched yet. */
bk_archive_dest_t *bk_archive_dest_open(const char *where, const bk_conf_t *conf, char *err,
                                        size_t n);
void bk_archive_dest_close(bk_archive_dest_t *d);
/* For messages: the directory, or sftp://user@host:port/path. */
const char *bk_archive_dest_name(const bk_archive_dest_t *d);

int bk_archive_dest_mkdirs(bk_archive_dest_t *d, const char *rel, char *err, size_t n);
/* Size and modification time (s) of rel; 1 when there is none. */
int bk_archive_dest_stat(bk_archive_dest_t *d, const char *rel, uint64_t *size, int64_t *mtime,
                         char *err, size_t n);
/* The local file becomes rel, whole or not at all (a temporary name, synced, renamed). */
int bk_archive_dest_put(bk_archive_dest_t *d, const char *local, const char *rel, char *err,
                        size_t n);
/* rel becomes the local file, refused unless it has `size` bytes and XXH3-64 `xxh3`. */
int bk_archive_dest_get(bk_archive_dest_t *d, const char *rel, const char *local, uint64_t size,
                        uint64_t xxh3, char *err, size_t n);
/* rel read whole (at most max bytes) into *buf (malloc'd, NUL-terminated). */
int bk_archive_dest_read(bk_archive_dest_t *d, const char *rel, size_t max, char **buf,
                         size_t *len, char *err, size_t n);
/* The names in directory rel (none when it is not there), each malloc'd, and the list. */
int bk_archive_dest_list(bk_archive_dest_t *d, const char *rel, char ***names, int *count,
                         char *err, size_t n);
int bk_archive_dest_unlink(bk_archive_dest_t *d, const char *rel, char *err, size_t n);

#endif
