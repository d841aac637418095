/* scanpage.h - one task's page of a range scan, as a node gathering a range gets it from the
 * node serving the task (GET /v1/internal/scan, query_stores.c): a header line
 * "beck-scan <more> <role> <lag>\n", then per entry [u32 key length][key][u32 value
 * length][value], lengths big-endian. The bytes come from another process: parse checks
 * every length against what is there (fuzz/scanpage.c). @locality the caller's thread */
#ifndef BK_SCANPAGE_H
#define BK_SCANPAGE_H

#include <stddef.h>

#include "query/jbuf.h"

typedef struct bk_scanpage_ent_s {
    char *k, *v; /* owned, each with a NUL after its bytes */
    size_t kl, vl;
} bk_scanpage_ent_t;

typedef struct bk_scanpage_s {
    bk_scanpage_ent_t *e;
    int n, cap;
    int more; /* the task has entries past this page */
    int role; /* the replica's (engine/taskdb.h's BK_TASKDB_*) */
    long long lag;
} bk_scanpage_t;

/* Appends a copy of an entry. 0, or -1 without memory. */
int bk_scanpage_add(bk_scanpage_t *p, const char *k, size_t kl, const char *v, size_t vl);
/* Frees the entries and zeroes p. */
void bk_scanpage_free(bk_scanpage_t *p);
void bk_scanpage_encode(const bk_scanpage_t *p, bk_jbuf_t *b);
/* Fills an empty p from body[0..len) (which need not end in a NUL). 0, or -1 (p freed)
 * for bytes that are not a page. */
int bk_scanpage_parse(const char *body, size_t len, bk_scanpage_t *p);

#endif
