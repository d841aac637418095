/* fs.h - file-system helpers shared by the stores, snapshots and fetches: directories made
 * and removed, made durable, small files read whole, files hashed. Any thread; errors are
 * returned (errno, or text in errstr), never logged here. */
#ifndef BK_FS_H
#define BK_FS_H

#include <stddef.h>
#include <stdint.h>

/* mkdir -p, mode 0755. 0, or -1 with errno. */
int bk_fs_mkdirs(const char *path);
/* fsync of a directory, so that renames and new entries in it are durable. Best effort. */
void bk_fs_sync_dir(const char *dir);
/* The directory part of path ("." for none, "/" for the root). */
void bk_fs_parent(const char *path, char *buf, size_t size);
/* Removes a tree without following symbolic links. 0, or -1. */
int bk_fs_rm_tree(const char *dir);
/* Reads a whole regular file of at most max bytes (symbolic links refused): *buf is
 * malloc'd and NUL-terminated, *len its length. 0, or -1 with errstr. */
int bk_fs_read_all(const char *path, size_t max, char **buf, size_t *len, char *errstr,
                   size_t errstr_size);
/* Opens a regular file for reading, refusing symbolic links; errors name it as `name`
 * ("missing", "a symbolic link", "not a regular file"). The fd, or -1 with errstr. */
int bk_fs_open_regular(const char *path, const char *name, char *errstr, size_t errstr_size);
/* XXH3-64 and size of what fd reads from its position to its end. 0, or -1 with errstr. */
int bk_fs_hash_fd(int fd, uint64_t *xxh3, uint64_t *size, char *errstr, size_t errstr_size);
/* XXH3-64 and size of a regular file (symbolic links refused). 0, or -1 with errstr. */
int bk_fs_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size, char *errstr,
                    size_t errstr_size);
/* Copies src to dst through a temporary name of its own beside dst (dst.<pid>-<n>.tmp),
 * synced, then renamed over dst: dst is whole or not there. 0, or -1 with errstr naming
 * the file. */
int bk_fs_copy_file(const char *src, const char *dst, char *errstr, size_t errstr_size);

#endif
