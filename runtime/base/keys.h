/* keys.h - the layout of store keys, in one place for the stores (engine/) and for
 * `beck dump` (cmd/), which read it; lua/beck/serde.lua (windowed, session) writes it.
 *
 * On disk every key is [key group: 2 bytes, big-endian][store key] (hash.h: murmur2 mod
 * 4096), so that state can be split and moved by key-group ranges. A window store's key is
 *     [record key length: 4 bytes BE][record key][8-byte BE time][rest]
 * and its index entries are
 *     [ff ff ff ff][8-byte BE time][record key length: 4 bytes BE][record key][rest]
 * A window store key sits under its record key's group, so a window store moves with the
 * record keys and a scan of one record key seeks one group. A length of ff ff ff ff is
 * never a record key's (it marks the index). Any thread. */
#ifndef BK_KEYS_H
#define BK_KEYS_H

#include <stddef.h>

/* The record key inside a window-store key (above); NULL when the key does not have that
 * shape: too short, a length past its end, or a length of 0xffffffff. */
const char *bk_keys_window_record(const char *key, size_t klen, size_t *rlen);
/* The key group of a store key: for a window store (window != 0) whose key has the
 * window shape, its record key's group; else the key's own. */
int bk_keys_group(const char *key, size_t klen, int window);

/* The key of every commit and abort marker in a changelog (engine/changelog.h). A compacted
 * topic refuses records without a key, and the log cleaner keeps the newest record of each
 * key: so all markers of a changelog partition share one key, and the newest marker, the
 * one a reader needs, survives. 0xff is never in UTF-8 text; a store refuses to write this
 * key. */
#define BK_KEYS_MARKER                                                                             \
    "\xff"                                                                                         \
    "beck-marker"
/* Whether a changelog record's key is a marker's (NULL too: markers written before they
 * had a key are still read). */
int bk_keys_is_marker(const void *key, size_t klen);

/* The key of a later generation's task's dedup table in its changelog (engine/dedup.h):
 * which input positions its state has applied. Like a marker's, its newest record is the
 * one a reader needs, and a store refuses to write it. */
#define BK_KEYS_SRC                                                                                \
    "\xff"                                                                                         \
    "beck-src"
int bk_keys_is_src(const void *key, size_t klen);

#endif
