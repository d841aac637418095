/* wire.h - the byte-level encoding shared by beck's own binary records (the
 * assignment codec, the control topic's records): a growable write buffer and
 * a bounds-checked read cursor over untrusted bytes, with LEB128 varints
 * (zig-zag for signed) and length-prefixed strings. It knows no record layout. */
#ifndef BK_WIRE_H
#define BK_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Zero it to start; `p` is malloc'd and the caller's to free. After an
 * allocation failure `oom` is set and further writes do nothing. */
typedef struct bk_wire_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} bk_wire_buf_t;

void bk_wire_put(bk_wire_buf_t *w, const void *src, size_t n);
void bk_wire_put_u8(bk_wire_buf_t *w, uint8_t v);
void bk_wire_put_uv(bk_wire_buf_t *w, uint64_t v);
void bk_wire_put_sv(bk_wire_buf_t *w, int64_t v);
void bk_wire_put_str(bk_wire_buf_t *w, const char *s);

/* A cursor: every read checks what is left first. On the first fault `fault`
 * says why (static text) and every later read returns 0 / "". */
typedef struct bk_wire_reader {
    const uint8_t *p;
    size_t left;
    const char *fault;
} bk_wire_reader_t;

void bk_wire_reader_init(bk_wire_reader_t *r, const void *p, size_t n);
uint8_t bk_wire_get_u8(bk_wire_reader_t *r);
uint64_t bk_wire_get_uv(bk_wire_reader_t *r);
int64_t bk_wire_get_sv(bk_wire_reader_t *r);
/* A varint that must be <= max; `what` is the fault otherwise. */
uint64_t bk_wire_get_uvmax(bk_wire_reader_t *r, uint64_t max, const char *what);
/* A length-prefixed string of at most max bytes without NUL: points into the
 * buffer, *n bytes, not terminated. */
const char *bk_wire_get_str(bk_wire_reader_t *r, size_t max, size_t *n);

#endif
