/* global.h - the node's global tables (app:global_table, Kafka Streams' GlobalKTable): every
 * node holds the whole of each, read from all partitions of its topic by a thread of its
 * own, with no changelog (the topic is the log). Their RocksDB is <state_dir>/<app>/global,
 * a column family a table; the source offsets the DB reflects are in its file `offsets`,
 * written after each commit of the DB (a crash between the two replays a suffix of the
 * topic, which leaves each key at its newest value again). The node starts its stream
 * threads once every table has caught up to its topic's end as it was at start
 * (bk_global_ready): a join then never misses a row that was written before the node came.
 * @locality one global thread writes; reads (bk_global_get, dbread.h on bk_global_db) from
 * any thread, of what the last commit holds. */
#ifndef BK_GLOBAL_H
#define BK_GLOBAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/conf.h"
#include "engine/plan.h"

typedef struct bk_global_s bk_global_t;
typedef struct bk_db_s bk_db_t;

/* Opens the DB, checks that every table's topic exists and starts the thread that reads
 * them. NULL with errstr (a topic missing names the table and the topic). A plan without
 * global tables gets NULL with errstr empty. */
bk_global_t *bk_global_start(const bk_plan_t *plan, const bk_conf_t *conf, char *errstr,
                             size_t errstr_size);
/* 1: every table has caught up to its topic's end as it was at start; 0: not yet; -1: the
 * thread failed (bk_global_error says why). */
int bk_global_ready(const bk_global_t *g);
const char *bk_global_error(const bk_global_t *g);
/* Stops the thread (after a last commit) and closes the DB. NULL is fine. */
void bk_global_stop(bk_global_t *g);

/* The node's tables while they are open (set by bk_global_start, cleared by bk_global_stop):
 * what the stream threads' Lua and the query API read. NULL: none. */
bk_global_t *bk_global_current(void);
int bk_global_count(const bk_global_t *g);
const char *bk_global_name(const bk_global_t *g, int table);
const char *bk_global_topic(const bk_global_t *g, int table);
/* The table named `name`, -1: none. */
int bk_global_index(const bk_global_t *g, const char *name);
/* The DB (its store `table` is the table), for dbread.h's reads. */
bk_db_t *bk_global_db(bk_global_t *g);
/* Records applied to a table since the process started, and how many its topic holds past
 * what was applied at the last look at its end (the lag). */
uint64_t bk_global_applied(const bk_global_t *g, int table);
int64_t bk_global_lag(const bk_global_t *g, int table);

#endif
