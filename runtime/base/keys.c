/* keys.c - the store key layout: window keys and key groups (keys.h). */
#include "base/keys.h"

#include <stdint.h>
#include <string.h>

#include "base/hash.h"

#define INDEX_MARK 0xffffffffu
#define TIME_BYTES 8

static uint32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

const char *bk_keys_window_record(const char *key, size_t klen, size_t *rlen)
{
    size_t off = 0;
    uint32_t len;
    if (klen >= 4 && be32(key) == INDEX_MARK) {
        off = 4 + TIME_BYTES; /* index entry: skip the mark and the time */
    }
    if (klen < off + 4) {
        return NULL;
    }
    len = be32(key + off);
    if (len == INDEX_MARK || klen - off - 4 < len) {
        return NULL;
    }
    *rlen = len;
    return key + off + 4;
}

int bk_keys_group(const char *key, size_t klen, int window)
{
    if (window) {
        size_t rlen;
        const char *rk = bk_keys_window_record(key, klen, &rlen);
        if (rk) {
            return bk_hash_key_group(rk, rlen);
        }
    }
    return bk_hash_key_group(key, klen);
}

int bk_keys_is_src(const void *key, size_t klen)
{
    return key && klen == sizeof(BK_KEYS_SRC) - 1 && memcmp(key, BK_KEYS_SRC, klen) == 0;
}

int bk_keys_is_marker(const void *key, size_t klen)
{
    return !key || (klen == sizeof(BK_KEYS_MARKER) - 1 && memcmp(key, BK_KEYS_MARKER, klen) == 0);
}
