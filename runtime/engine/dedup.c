/* dedup.c - the input positions a generation's task has applied (dedup.h). A few entries
 * (one per input partition of the passthrough), looked up per record: kept sorted by
 * (k, p) with the last hit remembered, since a task's records come in runs of one
 * partition. */
#include "engine/dedup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int k;
    int32_t p;
    int64_t next; /* the next offset not applied yet */
} entry_t;

struct bk_dedup_s {
    entry_t *e;
    int n, cap;
    int last; /* the entry of the last lookup */
    int dirty;
};

bk_dedup_t *bk_dedup_new(void)
{
    return calloc(1, sizeof(bk_dedup_t));
}

void bk_dedup_destroy(bk_dedup_t *d)
{
    if (d) {
        free(d->e);
        free(d);
    }
}

/* The entry of (k, p), made (next 0) when missing; NULL out of memory. */
static entry_t *find(bk_dedup_t *d, int k, int32_t p)
{
    int lo = 0, hi = d->n;
    if (d->last < d->n && d->e[d->last].k == k && d->e[d->last].p == p) {
        return &d->e[d->last];
    }
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const entry_t *m = &d->e[mid];
        if (m->k < k || (m->k == k && m->p < p)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == d->n || d->e[lo].k != k || d->e[lo].p != p) {
        if (d->n == d->cap) {
            int cap = d->cap * 2 + 8;
            entry_t *more = realloc(d->e, (size_t)cap * sizeof(*more));
            if (!more) {
                return NULL;
            }
            d->e = more;
            d->cap = cap;
        }
        memmove(&d->e[lo + 1], &d->e[lo], (size_t)(d->n - lo) * sizeof(*d->e));
        d->e[lo] = (entry_t){k, p, 0};
        d->n++;
    }
    d->last = lo;
    return &d->e[lo];
}

int bk_dedup_seen(bk_dedup_t *d, int k, int32_t p, int64_t off)
{
    entry_t *e = find(d, k, p);
    if (!e) {
        return 0; /* out of memory: applied, as without the table */
    }
    if (off < e->next) {
        return 1;
    }
    e->next = off + 1;
    d->dirty = 1;
    return 0;
}

void bk_dedup_encode(char *buf, int k, int32_t p, int64_t off)
{
    uint32_t up = (uint32_t)p;
    uint64_t uo = (uint64_t)off;
    buf[0] = (char)k;
    for (int i = 0; i < 4; i++) {
        buf[1 + i] = (char)(up >> (24 - 8 * i));
    }
    for (int i = 0; i < 8; i++) {
        buf[5 + i] = (char)(uo >> (56 - 8 * i));
    }
}

int bk_dedup_position(const rd_kafka_message_t *m, int *k, int32_t *p, int64_t *off)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;
    const unsigned char *b;
    uint32_t up = 0;
    uint64_t uo = 0;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, BK_DEDUP_HEADER, &v, &len) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        !v || len != BK_DEDUP_HEADER_BYTES) {
        return 0;
    }
    b = v;
    for (int i = 0; i < 4; i++) {
        up = up << 8 | b[1 + i];
    }
    for (int i = 0; i < 8; i++) {
        uo = uo << 8 | b[5 + i];
    }
    *k = b[0];
    *p = (int32_t)up;
    *off = (int64_t)uo;
    return 1;
}

char *bk_dedup_text(const bk_dedup_t *d, size_t *len)
{
    size_t cap = 32 + (size_t)d->n * 48, at;
    char *buf = malloc(cap);
    if (!buf) {
        return NULL;
    }
    at = (size_t)snprintf(buf, cap, "beck-src 1 %d", d->n);
    for (int i = 0; i < d->n; i++) {
        at += (size_t)snprintf(buf + at, cap - at, " %d:%d:%lld", d->e[i].k, (int)d->e[i].p,
                               (long long)d->e[i].next);
    }
    *len = at;
    return buf;
}

void bk_dedup_parse(bk_dedup_t *d, const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        char item[64];
        size_t j = i;
        int k, p, used = 0;
        long long next;
        while (j < len && text[j] != ' ' && text[j] != '\n') {
            j++;
        }
        if (j - i > 0 && j - i < sizeof(item)) {
            memcpy(item, text + i, j - i);
            item[j - i] = '\0';
            if (sscanf(item, "%d:%d:%lld%n", &k, &p, &next, &used) == 3 && used == (int)(j - i) &&
                k >= 0 && k < 256 && p >= 0 && next >= 0) {
                entry_t *e = find(d, k, p);
                if (e) {
                    e->next = next;
                }
            }
        }
        i = j + 1;
    }
}

int bk_dedup_copy(bk_dedup_t *d, const bk_dedup_t *other)
{
    if (other->n > d->cap) {
        entry_t *more = realloc(d->e, (size_t)other->n * sizeof(*more));
        if (!more) {
            return -1;
        }
        d->e = more;
        d->cap = other->n;
    }
    if (other->n > 0) {
        memcpy(d->e, other->e, (size_t)other->n * sizeof(*d->e));
    }
    d->n = other->n;
    d->last = 0;
    return 0;
}

int bk_dedup_count(const bk_dedup_t *d)
{
    return d->n;
}

void bk_dedup_entry(const bk_dedup_t *d, int i, int *k, int32_t *p, int64_t *next)
{
    *k = d->e[i].k;
    *p = d->e[i].p;
    *next = d->e[i].next;
}

int bk_dedup_dirty(const bk_dedup_t *d)
{
    return d->dirty;
}

void bk_dedup_clean(bk_dedup_t *d)
{
    d->dirty = 0;
}
