/* embed.h - the Lua modules of lua/ compiled into the binary.
 *
 * The table is generated at build time by tools/embed.c (build/.../embed.c);
 * bk_vm installs a searcher that serves these before the file system, so a
 * beck binary needs nothing installed to find its own Lua. */
#ifndef BK_EMBED_H
#define BK_EMBED_H

#include <stddef.h>

typedef struct bk_embed_s {
    const char *name; /* module name, "beck.app" */
    const char *path; /* source path in the repo, used as the chunk name */
    const char *source;
    size_t size;
} bk_embed_t;

/* Terminated by an entry whose name is NULL. */
extern const bk_embed_t bk_embed_modules[];

#endif
