/* dedup.h - which records of its input a later generation's task has applied, by their place
 * in the input the passthrough read them from (docs/repartitioning.md, At-least-once through
 * the passthrough).
 *
 * Under at-least-once a passthrough task that dies after forwarding and before committing
 * forwards the same input records again, so a generation's topic holds them twice; a count
 * would count them twice. Each forwarded record carries its input position (the header
 * beck.src: the input topic's index k in the passthrough, the partition p, the offset), and
 * the task skips one below the next position it has applied from (k, p). The table is part
 * of the task's state: its first logged store writes it to the changelog at each commit (a
 * record of key BK_KEYS_SRC, settled by the marker after it, as any write) and into the
 * DB's checkpoint, so a restore, a standby or a promotion carries it on. Owned by the thread
 * that owns the store. */
#ifndef BK_DEDUP_H
#define BK_DEDUP_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#define BK_DEDUP_HEADER "beck.src" /* a forwarded record's input position */
#define BK_DEDUP_HEADER_BYTES 13  /* k (1), partition (4, big-endian), offset (8, big-endian) */

typedef struct bk_dedup_s bk_dedup_t;

/* An empty table, or NULL out of memory. Free with bk_dedup_destroy. */
bk_dedup_t *bk_dedup_new(void);
void bk_dedup_destroy(bk_dedup_t *d);

/* Whether the record from input (k, p) at offset off was applied already (1: skip it). If
 * not, it counts as applied from now on (0). @locality the owning thread */
int bk_dedup_seen(bk_dedup_t *d, int k, int32_t p, int64_t off);

/* The input position a forwarded message carries (its header beck.src): 1 and *k, *p, *off,
 * or 0 when it carries none. */
int bk_dedup_position(const rd_kafka_message_t *m, int *k, int32_t *p, int64_t *off);
/* buf[BK_DEDUP_HEADER_BYTES]: the header's value for input (k, p) at offset off. */
void bk_dedup_encode(char *buf, int k, int32_t p, int64_t off);

/* The table as text, "beck-src 1 <n> <k>:<p>:<next>..." (malloc'd, NUL-terminated; its
 * length in *len), or NULL out of memory. */
char *bk_dedup_text(const bk_dedup_t *d, size_t *len);
/* Entries "<k>:<p>:<next>" of text (of bk_dedup_text, or the checkpoint's lines) into d, each
 * replacing what d held for its (k, p). Text that is not that is ignored. */
void bk_dedup_parse(bk_dedup_t *d, const char *text, size_t len);
/* d := the entries of other (a copy). 0, or -1 out of memory. */
int bk_dedup_copy(bk_dedup_t *d, const bk_dedup_t *other);
/* How many (k, p) it holds; the i-th into *k, *p, *next. */
int bk_dedup_count(const bk_dedup_t *d);
void bk_dedup_entry(const bk_dedup_t *d, int i, int *k, int32_t *p, int64_t *next);
/* Whether it changed since the last bk_dedup_clean (a commit writes it then). */
int bk_dedup_dirty(const bk_dedup_t *d);
void bk_dedup_clean(bk_dedup_t *d);

#endif
