/* jbuf.c - JSON text into a growing buffer (jbuf.h). */
#include "query/jbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(bk_jbuf_t *b, size_t more)
{
    size_t cap;
    char *p;
    if (b->oom) {
        return -1;
    }
    if (b->len + more + 1 <= b->cap) {
        return 0;
    }
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        cap *= 2;
    }
    if (!(p = realloc(b->p, cap))) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void bk_jbuf_free(bk_jbuf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void bk_jbuf_raw(bk_jbuf_t *b, const char *s, size_t n)
{
    if (grow(b, n) == 0) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
    }
}

void bk_jbuf_printf(bk_jbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(b, (size_t)n) != 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the UTF-8 sequence at s (n bytes left), 0 if it is not a valid one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t c;
    size_t len;
    if (s[0] < 0x80) {
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2, c = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, c = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4, c = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        c = c << 6 | (s[i] & 0x3f);
    }
    /* overlong forms, surrogates, past U+10FFFF */
    if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
        (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) {
        return 0;
    }
    return len;
}

int bk_jbuf_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = u[i] ? utf8_len(u + i, n - i) : 0;
        if (!l) {
            return 0;
        }
        i += l;
    }
    return 1;
}

void bk_jbuf_str(bk_jbuf_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    bk_jbuf_lit(b, "\"");
    for (size_t i = 0; i < n && !b->oom;) {
        size_t run = i, l;
        /* copy runs of plain bytes at once */
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\') {
            run++;
        }
        if (run > i) {
            bk_jbuf_raw(b, s + i, run - i);
            i = run;
            continue;
        }
        if (u[i] == '"' || u[i] == '\\') {
            char e[2] = {'\\', (char)u[i]};
            bk_jbuf_raw(b, e, 2);
            i++;
        } else if (u[i] < 0x20) {
            bk_jbuf_printf(b, "\\u%04x", u[i]);
            i++;
        } else if ((l = utf8_len(u + i, n - i)) > 0) {
            bk_jbuf_raw(b, s + i, l);
            i += l;
        } else {
            bk_jbuf_lit(b, "\\ufffd");
            i++;
        }
    }
    bk_jbuf_lit(b, "\"");
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void bk_jbuf_bytes(bk_jbuf_t *b, const char *name, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (bk_jbuf_utf8(s, n)) {
        bk_jbuf_printf(b, "\"%s\":", name);
        bk_jbuf_str(b, s, n);
        return;
    }
    bk_jbuf_printf(b, "\"%s_base64\":\"", name);
    if (grow(b, (n + 2) / 3 * 4 + 1) != 0) {
        return;
    }
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)u[i] << 16 | (i + 1 < n ? (uint32_t)u[i + 1] << 8 : 0) |
                     (i + 2 < n ? u[i + 2] : 0);
        char *o = b->p + b->len;
        o[0] = B64[v >> 18 & 63];
        o[1] = B64[v >> 12 & 63];
        o[2] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        o[3] = i + 2 < n ? B64[v & 63] : '=';
        b->len += 4;
    }
    b->p[b->len] = '\0';
    bk_jbuf_lit(b, "\"");
}

void bk_jbuf_hex(bk_jbuf_t *b, const char *s, size_t n)
{
    static const char H[] = "0123456789abcdef";
    if (grow(b, 2 * n) != 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        b->p[b->len++] = H[(unsigned char)s[i] >> 4];
        b->p[b->len++] = H[(unsigned char)s[i] & 15];
    }
    b->p[b->len] = '\0';
}

static int nibble(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

long bk_jbuf_unhex(const char *hex, char *out)
{
    size_t n = strlen(hex);
    if (n % 2) {
        return -1;
    }
    for (size_t i = 0; i < n; i += 2) {
        int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        out[i / 2] = (char)(hi << 4 | lo);
    }
    return (long)(n / 2);
}
