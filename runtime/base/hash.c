/* hash.c - murmur2 as Kafka's Java client computes it. */
#include "base/hash.h"

#include "base/ffi.h"

#include <string.h>

#include <xxhash.h>

uint32_t bk_hash_murmur2(const void *key, size_t len)
{
    const uint32_t seed = 0x9747b28c, m = 0x5bd1e995;
    const int r = 24;
    const unsigned char *data = key;
    uint32_t h = seed ^ (uint32_t)len;
    size_t len4 = len / 4;

    for (size_t i = 0; i < len4; i++) {
        uint32_t k;
        memcpy(&k, data + i * 4, 4); /* little-endian, as Java reads it */
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)data[(len & ~(size_t)3) + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[(len & ~(size_t)3) + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[len & ~(size_t)3];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

int bk_hash_partition(const void *key, size_t len, int partitions)
{
    return (int)((bk_hash_murmur2(key, len) & 0x7fffffff) % (uint32_t)partitions);
}

int bk_hash_key_group(const void *key, size_t len)
{
    return (int)((bk_hash_murmur2(key, len) & 0x7fffffff) % BK_HASH_KEY_GROUPS);
}

int32_t bk_ffi_hash_partition(const char *key, size_t key_len, int32_t partitions)
{
    return bk_hash_partition(key, key_len, partitions);
}

void bk_hash_group_range(int32_t task, int32_t ntasks, int32_t *lo, int32_t *hi)
{
    *lo = (int32_t)((int64_t)task * BK_HASH_KEY_GROUPS / ntasks);
    *hi = (int32_t)((int64_t)(task + 1) * BK_HASH_KEY_GROUPS / ntasks);
}

int32_t bk_hash_group_owner(int32_t group, int32_t ntasks)
{
    /* the last task whose lo = floor(task * G / ntasks) is <= group: task < (group + 1) *
     * ntasks / G, so ceil((group + 1) * ntasks / G) - 1 */
    return (int32_t)((((int64_t)group + 1) * ntasks + BK_HASH_KEY_GROUPS - 1) /
                         BK_HASH_KEY_GROUPS -
                     1);
}

int32_t bk_ffi_hash_key_group(const char *key, size_t key_len)
{
    return bk_hash_key_group(key, key_len);
}

void bk_ffi_hash_group_range(int32_t task, int32_t ntasks, int32_t *lo, int32_t *hi)
{
    bk_hash_group_range(task, ntasks, lo, hi);
}

void bk_ffi_hash128(const char *data, size_t len, char *out)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
    memcpy(out, c.digest, sizeof(c.digest));
}
