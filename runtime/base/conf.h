/* conf.h - beck's own settings and the librdkafka settings passed through.
 *
 * Every beck setting is declared once in the table of conf.c (name, type,
 * default, help) and has one name in three spellings: `commit_interval_ms` in
 * the topology's beck.app{} table, `--commit-interval-ms` on the command line
 * and BECK_COMMIT_INTERVAL_MS in the environment. Precedence: command line,
 * environment, topology, default. librdkafka settings (-X key=value and -F
 * file.properties, as kcat takes them) are kept in order and applied verbatim
 * after beck's defaults, so a user can override any of them. */
#ifndef BK_CONF_H
#define BK_CONF_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    BK_CONF_APP_ID = 0,
    BK_CONF_BROKERS,
    BK_CONF_STATE_DIR,
    BK_CONF_THREADS,
    BK_CONF_NODE_ID,
    BK_CONF_RACK,
    BK_CONF_COMMIT_INTERVAL_MS,
    BK_CONF_ON_ERROR,
    BK_CONF_DLQ_TOPIC,
    BK_CONF_PARTITIONS,
    BK_CONF_TASKS,
    BK_CONF_REPLICATION_FACTOR,
    BK_CONF_BATCH_SIZE,
    BK_CONF_CACHE_MAX_BYTES,
    BK_CONF_MAX_TASK_IDLE_MS,
    BK_CONF_BLOCK_CACHE_BYTES,
    BK_CONF_WRITE_BUFFER_BYTES,
    BK_CONF_DISK_FREE_WARN_PCT,
    BK_CONF_LOG_LEVEL,
    BK_CONF_EVENTS,
    BK_CONF_HOOKS,
    BK_CONF_CLUSTER,
    BK_CONF_STANDBYS,
    BK_CONF_RECOVERY_LAG,
    BK_CONF_PROBE_MS,
    BK_CONF_HEARTBEAT_MS,
    BK_CONF_SESSION_MS,
    BK_CONF_CONTROL_CHECKPOINT_MS,
    BK_CONF_ENDPOINT,
    BK_CONF_HTTP_LISTEN,
    BK_CONF_HTTP_TOKEN,
    BK_CONF_SSH_KEY,
    BK_CONF_SSH_KNOWN_HOSTS,
    BK_CONF_SSH_USER,
    BK_CONF_SSH_HOST,
    BK_CONF_SSH_PORT,
    BK_CONF_BOOTSTRAP_MIN_RECORDS,
    BK_CONF_BOOTSTRAP_PARALLEL,
    BK_CONF_BOOTSTRAP_RATE,
    BK_CONF_BOOTSTRAP_TIMEOUT_MS,
    BK_CONF_BOOTSTRAP_MAX,
    BK_CONF_SNAPSHOT_TTL_MS,
    BK_CONF_CHANGELOG_RETENTION_MS,
    BK_CONF_SNAPSHOT_ARCHIVE,
    BK_CONF_SNAPSHOT_ARCHIVE_INTERVAL_MS,
    BK_CONF_SNAPSHOT_ARCHIVE_KEEP,
    BK_CONF_PROCESSING_GUARANTEE,
    BK_CONF_REPLACE_NODE,
    BK_CONF__COUNT
} bk_conf_key_t;

/* Where a value came from, highest precedence last. */
typedef enum {
    BK_CONF_FROM_DEFAULT = 0,
    BK_CONF_FROM_TOPOLOGY,
    BK_CONF_FROM_ENV,
    BK_CONF_FROM_CLI
} bk_conf_src_t;

typedef struct bk_conf_s bk_conf_t;

/* Defaults, then the BECK_* environment. Free with bk_conf_destroy(). */
bk_conf_t *bk_conf_new(void);
void bk_conf_destroy(bk_conf_t *conf);

/* Finds a setting by any spelling ("commit_interval_ms", "commit-interval-ms",
 * "commit.interval.ms"); -1 if unknown. */
int bk_conf_lookup(const char *name);
const char *bk_conf_name(bk_conf_key_t key);
const char *bk_conf_help(bk_conf_key_t key);
const char *bk_conf_default(bk_conf_key_t key);

/* Sets a value from `src`; a lower-precedence source never overrides a higher
 * one. Validates the type; -1 with errstr naming the setting when invalid. */
int bk_conf_set(bk_conf_t *conf, bk_conf_key_t key, const char *value, bk_conf_src_t src,
                char *errstr, size_t errstr_size);

/* Values: strings are owned by conf (NULL when unset with no default). */
const char *bk_conf_str(const bk_conf_t *conf, bk_conf_key_t key);
int64_t bk_conf_int(const bk_conf_t *conf, bk_conf_key_t key);
bk_conf_src_t bk_conf_source(const bk_conf_t *conf, bk_conf_key_t key);
/* 1: only a cluster node (cluster=1) reads this setting. */
int bk_conf_cluster_only(bk_conf_key_t key);

/* processing_guarantee = exactly_once (docs/state.md, Exactly once). */
int bk_conf_exactly_once(const bk_conf_t *conf);
/* commit_interval_ms as set, else its default: 5000, or 100 under exactly-once (as in Kafka
 * Streams: each commit ends a transaction, and a read_committed reader sees nothing newer). */
int64_t bk_conf_commit_interval_ms(const bk_conf_t *conf);

/* librdkafka pass-through, kept in the order given. */
void bk_conf_add_kafka(bk_conf_t *conf, const char *key, const char *value);
/* "key=value"; -1 with errstr when there is no '='. */
int bk_conf_add_kafka_kv(bk_conf_t *conf, const char *kv, char *errstr, size_t errstr_size);
/* Reads a Java-style properties file (key=value, # comments). */
int bk_conf_add_kafka_file(bk_conf_t *conf, const char *path, char *errstr, size_t errstr_size);
size_t bk_conf_kafka_count(const bk_conf_t *conf);
void bk_conf_kafka_get(const bk_conf_t *conf, size_t i, const char **key, const char **value);

/* Prints every setting with its default and help, for --help. */
void bk_conf_print_help(void *file);

#endif
