/* hash.h - Kafka's murmur2 (the Java client's default partitioner) and the
 * key groups built on it. The same functions place a key on a partition and
 * in a key group, so beck agrees with every other Kafka client. */
#ifndef BK_HASH_H
#define BK_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Key groups of an app: fixed for the app's life (DESIGN.md, Repartitioning). */
#define BK_HASH_KEY_GROUPS 4096

/* murmur2 exactly as org.apache.kafka.common.utils.Utils.murmur2. */
uint32_t bk_hash_murmur2(const void *key, size_t len);

/* The partition a Java producer picks for a non-empty key. */
int bk_hash_partition(const void *key, size_t len, int partitions);

/* The key group of a key: toPositive(murmur2(key)) mod BK_HASH_KEY_GROUPS. */
int bk_hash_key_group(const void *key, size_t len);

/* The key groups task `task` of `ntasks` owns under range ownership (a generation's
 * repartition topic, docs/repartitioning.md): [task * G / ntasks, (task + 1) * G / ntasks),
 * contiguous, sizes differing by one at most. */
void bk_hash_group_range(int32_t task, int32_t ntasks, int32_t *lo, int32_t *hi);

/* The task of `ntasks` whose range holds key group `group`: bk_hash_group_range's inverse. */
int32_t bk_hash_group_owner(int32_t group, int32_t ntasks);

#endif
