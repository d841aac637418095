/* jbuf.h - a growing buffer that JSON responses are written into (query/): numbers,
 * strings with JSON's escapes, and bytes that are not UTF-8 text as base64. A buffer that
 * ran out of memory keeps its flag set and ignores what follows; the caller checks it once.
 * @locality the caller's thread */
#ifndef BK_JBUF_H
#define BK_JBUF_H

#include <stddef.h>

typedef struct bk_jbuf_s {
    char *p;
    size_t len, cap;
    int oom;
} bk_jbuf_t;

void bk_jbuf_free(bk_jbuf_t *b);
void bk_jbuf_raw(bk_jbuf_t *b, const char *s, size_t n);
/* A string literal as it is (its length counted by the compiler). */
#define bk_jbuf_lit(b, lit) bk_jbuf_raw((b), "" lit, sizeof(lit) - 1)
void bk_jbuf_printf(bk_jbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a JSON string, quotes included; bytes that are not valid UTF-8 become
 * U+FFFD (use bk_jbuf_bytes where that would lose data). */
void bk_jbuf_str(bk_jbuf_t *b, const char *s, size_t n);
/* Is s[0..n) valid UTF-8 without NUL bytes? */
int bk_jbuf_utf8(const char *s, size_t n);
/* A field for bytes: "name":"text" when they are UTF-8 text, else
 * "name_base64":"<base64>". No comma. */
void bk_jbuf_bytes(bk_jbuf_t *b, const char *name, const char *s, size_t n);
/* Hex of s[0..n) (a cursor: any bytes, safe in a URL), and its inverse: the decoded
 * length, or -1 for what is not hex. out needs n / 2 bytes. */
void bk_jbuf_hex(bk_jbuf_t *b, const char *s, size_t n);
long bk_jbuf_unhex(const char *hex, char *out);

#endif
