/* skips.h - the records an operator told the app to skip (`beck skip`), read from the topic
 * <app>-skips: a record that raises under on_error=fail stops its task only (it is parked,
 * docs/reliability.md, Poison records), and the task goes on past it once it is listed.
 * One per node, shared by its stream threads. */
#ifndef BK_SKIPS_H
#define BK_SKIPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"

typedef struct bk_skips_s bk_skips_t;

/* The topic the list lives in: "<app>-skips" (compacted, one partition). */
void bk_skips_topic(const char *app, char *out, size_t size);

/* The key of a listed record: "topic/partition/offset" (topic names have no '/'). */
void bk_skips_key(const char *topic, int32_t partition, int64_t offset, char *out, size_t size);

/* Nothing is read until the first bk_skips_listed. conf must outlive it. NULL: out of memory. */
bk_skips_t *bk_skips_new(const bk_conf_t *conf, const char *app);
void bk_skips_destroy(bk_skips_t *s);

/* Whether the record is listed, after reading what was added to the topic since the last
 * read if that was more than max_age_ms ago (a read waits up to a few seconds on the
 * brokers; while none answers, the list as last read). 1 with the listing's text (who, when,
 * why) in note, or 0. @locality any thread */
int bk_skips_listed(bk_skips_t *s, const char *topic, int32_t partition, int64_t offset,
                    int max_age_ms, char *note, size_t note_size);

#endif
