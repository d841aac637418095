/* wire.c - growable buffers, checked cursors, varints and strings. */
#include "base/wire.h"

#include <stdlib.h>
#include <string.h>

void bk_wire_put(bk_wire_buf_t *w, const void *src, size_t n)
{
    if (w->oom) {
        return;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        uint8_t *p;
        while (cap < w->len + n) {
            cap *= 2;
        }
        p = realloc(w->p, cap);
        if (!p) {
            w->oom = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

void bk_wire_put_u8(bk_wire_buf_t *w, uint8_t v)
{
    bk_wire_put(w, &v, 1);
}

/* Unsigned LEB128, as protobuf: 7 bits a byte, low bits first, high bit = more. */
void bk_wire_put_uv(bk_wire_buf_t *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    bk_wire_put(w, b, n);
}

/* Zig-zag, so that small negative numbers stay short. */
void bk_wire_put_sv(bk_wire_buf_t *w, int64_t v)
{
    bk_wire_put_uv(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void bk_wire_put_str(bk_wire_buf_t *w, const char *s)
{
    size_t n = strlen(s);
    bk_wire_put_uv(w, n);
    bk_wire_put(w, s, n);
}

void bk_wire_reader_init(bk_wire_reader_t *r, const void *p, size_t n)
{
    r->p = p;
    r->left = n;
    r->fault = NULL;
}

static void fault(bk_wire_reader_t *r, const char *why)
{
    if (!r->fault) {
        r->fault = why;
    }
}

uint8_t bk_wire_get_u8(bk_wire_reader_t *r)
{
    if (r->fault || r->left == 0) {
        fault(r, "truncated");
        return 0;
    }
    r->left--;
    return *r->p++;
}

uint64_t bk_wire_get_uv(bk_wire_reader_t *r)
{
    uint64_t v = 0;
    if (r->fault) {
        return 0;
    }
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b;
        if (r->left == 0) {
            fault(r, "truncated");
            return 0;
        }
        b = *r->p++;
        r->left--;
        if (shift == 63 && b > 1) {
            break; /* bits past 64 */
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return v;
        }
    }
    fault(r, "varint overflows 64 bits");
    return 0;
}

int64_t bk_wire_get_sv(bk_wire_reader_t *r)
{
    uint64_t u = bk_wire_get_uv(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

uint64_t bk_wire_get_uvmax(bk_wire_reader_t *r, uint64_t max, const char *what)
{
    uint64_t v = bk_wire_get_uv(r);
    if (!r->fault && v > max) {
        fault(r, what);
        return 0;
    }
    return v;
}

const char *bk_wire_get_str(bk_wire_reader_t *r, size_t max, size_t *n)
{
    const char *s;
    *n = (size_t)bk_wire_get_uvmax(r, max, "string too long");
    if (r->fault) {
        *n = 0;
        return "";
    }
    if (*n > r->left) {
        fault(r, "truncated string");
        *n = 0;
        return "";
    }
    if (memchr(r->p, '\0', *n)) {
        fault(r, "NUL byte in a string");
        *n = 0;
        return "";
    }
    s = (const char *)r->p;
    r->p += *n;
    r->left -= *n;
    return s;
}
