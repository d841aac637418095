/* scanpage.c - a task's page of a range scan between nodes (scanpage.h). */
#include "query/scanpage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int bk_scanpage_add(bk_scanpage_t *p, const char *k, size_t kl, const char *v, size_t vl)
{
    bk_scanpage_ent_t *e;
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        if (!(e = realloc(p->e, (size_t)cap * sizeof(*e)))) {
            return -1;
        }
        p->e = e;
        p->cap = cap;
    }
    e = &p->e[p->n];
    e->k = malloc(kl + 1);
    e->v = malloc(vl + 1);
    if (!e->k || !e->v) {
        free(e->k);
        free(e->v);
        return -1;
    }
    memcpy(e->k, k, kl);
    memcpy(e->v, v, vl);
    e->k[kl] = e->v[vl] = '\0';
    e->kl = kl;
    e->vl = vl;
    p->n++;
    return 0;
}

void bk_scanpage_free(bk_scanpage_t *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->e[i].k);
        free(p->e[i].v);
    }
    free(p->e);
    memset(p, 0, sizeof(*p));
}

static void put_u32(bk_jbuf_t *b, size_t n)
{
    char x[4] = {(char)(n >> 24), (char)(n >> 16), (char)(n >> 8), (char)n};
    bk_jbuf_raw(b, x, 4);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void bk_scanpage_encode(const bk_scanpage_t *p, bk_jbuf_t *b)
{
    bk_jbuf_printf(b, "beck-scan %d %d %lld\n", p->more ? 1 : 0, p->role, p->lag);
    for (int i = 0; i < p->n; i++) {
        put_u32(b, p->e[i].kl);
        bk_jbuf_raw(b, p->e[i].k, p->e[i].kl);
        put_u32(b, p->e[i].vl);
        bk_jbuf_raw(b, p->e[i].v, p->e[i].vl);
    }
}

/* A decimal number at *s (before end), optionally negative, then one `sep`: its value in
 * *out and *s past the separator; -1 when there is none. */
static int number(const char **s, const char *end, char sep, long long *out)
{
    const char *c = *s;
    int neg = 0, digits = 0;
    long long v = 0;
    if (c < end && *c == '-') {
        neg = 1;
        c++;
    }
    while (c < end && *c >= '0' && *c <= '9' && digits < 18) {
        v = v * 10 + (*c++ - '0');
        digits++;
    }
    if (!digits || c >= end || *c != sep) {
        return -1;
    }
    *out = neg ? -v : v;
    *s = c + 1;
    return 0;
}

int bk_scanpage_parse(const char *body, size_t len, bk_scanpage_t *p)
{
    static const char magic[] = "beck-scan ";
    const char *c = body, *end = body + len;
    const unsigned char *u, *uend = (const unsigned char *)end;
    long long more, role, lag;

    memset(p, 0, sizeof(*p));
    if (len < sizeof(magic) - 1 || memcmp(body, magic, sizeof(magic) - 1) != 0) {
        return -1;
    }
    c += sizeof(magic) - 1;
    if (number(&c, end, ' ', &more) != 0 || number(&c, end, ' ', &role) != 0 ||
        number(&c, end, '\n', &lag) != 0 || (more != 0 && more != 1) || role < 0 || role > 3) {
        return -1;
    }
    p->more = (int)more;
    p->role = (int)role;
    p->lag = lag;
    u = (const unsigned char *)c;
    while (u < uend) {
        uint32_t kl, vl;
        const unsigned char *k, *v;
        if (uend - u < 4 || (kl = get_u32(u), (size_t)(uend - u - 4) < kl)) {
            goto bad;
        }
        k = u + 4;
        u = k + kl;
        if (uend - u < 4 || (vl = get_u32(u), (size_t)(uend - u - 4) < vl)) {
            goto bad;
        }
        v = u + 4;
        u = v + vl;
        if (bk_scanpage_add(p, (const char *)k, kl, (const char *)v, vl) != 0) {
            goto bad;
        }
    }
    return 0;
bad:
    bk_scanpage_free(p);
    return -1;
}
