/* conf.c - the table of beck settings and the librdkafka pass-through list. */
#include "base/conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_STR, T_INT, T_ENUM } conf_type_t;

typedef struct {
    const char *name; /* canonical spelling: the topology's key */
    conf_type_t type;
    const char *def;
    int64_t min, max;    /* T_INT */
    const char *choices; /* T_ENUM: "a|b|c" */
    const char *help;
} conf_desc_t;

/* -- The settings, in bk_conf_key_t order ------------------------------- */
static const conf_desc_t descs[BK_CONF__COUNT] = {
    {"id", T_STR, NULL, 0, 0, NULL,
     "application id: consumer group, prefix of internal topics (beck.app{ id = ... })"},
    {"brokers", T_STR, NULL, 0, 0, NULL,
     "bootstrap brokers (-b); unset: host an embedded dev broker"},
    {"state_dir", T_STR, "/tmp/beck", 0, 0, NULL, "directory for the node's state"},
    {"threads", T_INT, "1", 1, 256, NULL, "stream threads on this node"},
    {"node_id", T_STR, NULL, 0, 0, NULL, "this node's id (default: hostname-pid)"},
    {"rack", T_STR, NULL, 0, 0, NULL, "this node's rack, for placement"},
    {"commit_interval_ms", T_INT, "5000", 1, 3600000, NULL,
     "how often input offsets are committed (after the producer flushed); 100 under "
     "exactly_once unless set"},
    {"on_error", T_ENUM, "fail", 0, 0, "fail|skip|dlq",
     "when process() raises: stop (fail), log and count (skip), or dead-letter (dlq)"},
    {"dlq_topic", T_STR, NULL, 0, 0, NULL, "dead-letter topic (default: <id>-dlq)"},
    {"partitions", T_INT, "4", 1, 10000, NULL,
     "partitions of topics the runtime creates when it cannot derive a count"},
    {"tasks", T_STR, NULL, 0, 0, NULL,
     "S=N[,S=N...]: run subtopology S with N tasks whatever its input's partitions, fed by "
     "key group through a topic of its own (docs/repartitioning.md)"},
    {"replication_factor", T_INT, "-1", -1, 32, NULL,
     "replication factor of created topics on a real cluster (-1: broker default)"},
    {"batch_size", T_INT, "1000", 1, 100000, NULL, "records handed to Lua per call"},
    {"cache_max_bytes", T_INT, "10485760", 0, INT64_C(1) << 40, NULL,
     "per-thread write-back cache in front of the stores, flushed at commit (0: off)"},
    {"max_task_idle_ms", T_INT, "0", -1, INT64_C(1) << 40, NULL,
     "a task reading several partitions takes the record with the smallest timestamp next; "
     "while one of them is empty it waits for it to reach its end, then this long (-1: "
     "never waits)"},
    {"block_cache_bytes", T_INT, "67108864", 1 << 20, INT64_C(1) << 40, NULL,
     "RocksDB block cache shared by every store of the node"},
    {"write_buffer_bytes", T_INT, "8388608", 65536, INT64_C(1) << 30, NULL,
     "RocksDB memtable of each store of each task: its writes go to an SST file when full"},
    {"disk_free_warn_pct", T_INT, "5", 0, 100, NULL,
     "warn while the state directory's disk has less free space than this % of its size "
     "(0: never)"},
    {"log_level", T_ENUM, "info", 0, 0, "error|warn|info|debug", "log level"},
    {"events", T_STR, NULL, 0, 0, NULL,
     "a file the node appends its events to, one JSON object a line (docs/events.md); they "
     "are on /v1/events too"},
    {"hooks", T_STR, NULL, 0, 0, NULL,
     "a Lua file returning { on_restore = fn, ... }: operational hooks beside the topology's"},
    {"cluster", T_INT, "0", 0, 1, NULL,
     "1: share the app's tasks with its other nodes through <id>-control (docs/cluster.md); "
     "0: take every task"},
    {"num_standby_replicas", T_INT, "0", 0, 8, NULL,
     "K: warm standby replicas per task on other nodes (other racks where possible), "
     "tailing the changelogs (cluster only)"},
    {"acceptable_recovery_lag", T_INT, "10000", 0, INT64_C(1) << 40, NULL,
     "a task moves to a node only once that node's replica is this many changelog records "
     "behind or fewer; until then it stays where it is while the replica warms up"},
    {"probing_rebalance_interval_ms", T_INT, "5000", 100, 86400000, NULL,
     "with standbys: how often the leader looks whether held-back tasks' new nodes have "
     "warmed up, and moves them when they have"},
    {"heartbeat_interval_ms", T_INT, "1000", 10, 600000, NULL,
     "how often a node heartbeats on the control topic (cluster only)"},
    {"session_timeout_ms", T_INT, "10000", 50, 3600000, NULL,
     "a node silent this long is dead and its tasks move; > 2 heartbeat intervals"},
    {"control_checkpoint_ms", T_INT, "600000", 100, 86400000, NULL,
     "cluster only: the leader checkpoints the membership view on the control topic at least "
     "this often; a node starts from the latest checkpoint"},
    {"endpoint", T_STR, NULL, 0, 0, NULL,
     "host:port where this node serves queries, published to the others"},
    {"http_listen", T_STR, NULL, 0, 0, NULL,
     "address:port this node serves queries over HTTP on (docs/queries.md); default: "
     "127.0.0.1 at the endpoint's port; port 0: a free one, published in the endpoint"},
    {"http_token", T_STR, NULL, 0, 0, NULL,
     "a bearer token every query endpoint but /healthz asks for (unset: none)"},
    {"ssh_key", T_STR, NULL, 0, 0, NULL,
     "private key for cold bootstrap over SSH (docs/bootstrap.md); unset: replicas restore "
     "from changelogs only"},
    {"ssh_known_hosts", T_STR, NULL, 0, 0, NULL,
     "known_hosts file the other nodes' sshd host keys are checked against "
     "(default: ~/.ssh/known_hosts)"},
    {"ssh_user", T_STR, NULL, 0, 0, NULL,
     "user to log in as on the other nodes' hosts (default: the user running beck)"},
    {"ssh_host", T_STR, NULL, 0, 0, NULL,
     "host the other nodes reach this node's sshd at (default: endpoint's host, else "
     "127.0.0.1)"},
    {"ssh_port", T_INT, "22", 1, 65535, NULL, "port of this node's sshd"},
    {"bootstrap_min_records", T_INT, "100000", 0, INT64_C(1) << 50, NULL,
     "a replica with more changelog records than this to replay is built by cold bootstrap "
     "(0: only when the changelog lost what it needs, or on `beck bootstrap`)"},
    {"bootstrap_parallel", T_INT, "0", 0, 64, NULL,
     "files a cold bootstrap fetches at once, each on its own connection (0: by CPUs)"},
    {"bootstrap_rate_limit", T_INT, "0", 0, INT64_C(1) << 40, NULL,
     "bytes per second a cold bootstrap may fetch (0: no limit)"},
    {"bootstrap_timeout_ms", T_INT, "60000", 1000, 86400000, NULL,
     "how long a replica waits for a snapshot, and each SSH step may take, before it falls "
     "back to its changelog"},
    {"bootstrap_max_concurrent", T_INT, "2", 1, 64, NULL,
     "cold bootstraps a node runs at once, and snapshots it keeps for others at once"},
    {"snapshot_ttl_ms", T_INT, "600000", 1000, INT64_C(1) << 40, NULL,
     "a snapshot made for a replica is removed once fetched, or after this long"},
    {"changelog_retention_ms", T_INT, "0", 0, INT64_C(1) << 50, NULL,
     "bounded changelogs: key-value stores' changelogs are compact,delete with this retention "
     "(existing ones are altered); needs snapshot_archive, with an interval at most half of it "
     "(docs/state.md); 0: compact only, kept forever"},
    {"snapshot_archive", T_STR, NULL, 0, 0, NULL,
     "a directory (local, or a mount) where each active task's state is archived now and then, "
     "incrementally; a replica whose changelog lost what it needs restores from it"},
    {"snapshot_archive_interval_ms", T_INT, "600000", 1000, INT64_C(1) << 40, NULL,
     "how often each active task's state is archived (snapshot_archive)"},
    {"snapshot_archive_keep", T_INT, "3", 1, 1000, NULL,
     "snapshots the archive keeps per task, the newest"},
    {"processing_guarantee", T_ENUM, "at_least_once", 0, 0, "at_least_once|exactly_once",
     "exactly_once: each commit puts a thread's outputs, changelog writes and input offsets in "
     "one Kafka transaction (docs/state.md); at_least_once: a record's effects may repeat after "
     "a crash"},
    {"replace_node", T_INT, "0", 0, 1, NULL,
     "cluster only: 1 (or --replace-node alone) takes over a node id that a live member holds: "
     "that member is ended (fenced under exactly_once) and stops; 0: such a start is refused"},
};

/* What only a cluster node reads: given to a node on its own, a setting of these is a
 * mistake (it was meant to join a cluster, or expects standbys it will not have). */
static const bk_conf_key_t cluster_only[] = {
    BK_CONF_RACK,          BK_CONF_STANDBYS,     BK_CONF_RECOVERY_LAG,
    BK_CONF_PROBE_MS,      BK_CONF_HEARTBEAT_MS, BK_CONF_SESSION_MS,
    BK_CONF_CONTROL_CHECKPOINT_MS, BK_CONF_SSH_HOST, BK_CONF_SSH_PORT,
    BK_CONF_BOOTSTRAP_MIN_RECORDS, BK_CONF_BOOTSTRAP_MAX, BK_CONF_SNAPSHOT_TTL_MS,
    BK_CONF_REPLACE_NODE,
};

int bk_conf_cluster_only(bk_conf_key_t key)
{
    for (size_t i = 0; i < sizeof(cluster_only) / sizeof(cluster_only[0]); i++) {
        if (cluster_only[i] == key) {
            return 1;
        }
    }
    return 0;
}

struct bk_conf_s {
    char *values[BK_CONF__COUNT];
    bk_conf_src_t srcs[BK_CONF__COUNT];
    char **kafka; /* key, value, key, value, ... */
    size_t kafka_cnt, kafka_cap;
};

/* Canonical form: lower case, '-' and '.' become '_'. */
static void canon(const char *in, char *out, size_t size)
{
    size_t i;
    for (i = 0; in[i] && i + 1 < size; i++) {
        char c = (char)tolower((unsigned char)in[i]);
        out[i] = (c == '-' || c == '.') ? '_' : c;
    }
    out[i] = '\0';
}

int bk_conf_lookup(const char *name)
{
    char c[64];
    canon(name, c, sizeof(c));
    if (strcmp(c, "app_id") == 0) {
        return BK_CONF_APP_ID;
    }
    for (int i = 0; i < BK_CONF__COUNT; i++) {
        if (strcmp(c, descs[i].name) == 0) {
            return i;
        }
    }
    return -1;
}

const char *bk_conf_name(bk_conf_key_t key)
{
    return descs[key].name;
}

const char *bk_conf_help(bk_conf_key_t key)
{
    return descs[key].help;
}

const char *bk_conf_default(bk_conf_key_t key)
{
    return descs[key].def;
}

static int validate(const conf_desc_t *d, const char *value, char *errstr, size_t errstr_size)
{
    if (d->type == T_INT) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < d->min || v > d->max) {
            snprintf(errstr, errstr_size, "setting %s: \"%s\" is not an integer in [%lld, %lld]",
                     d->name, value, (long long)d->min, (long long)d->max);
            return -1;
        }
    } else if (d->type == T_ENUM) {
        const char *p = d->choices;
        size_t n = strlen(value);
        while (p) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (len == n && strncmp(p, value, n) == 0) {
                return 0;
            }
            p = bar ? bar + 1 : NULL;
        }
        snprintf(errstr, errstr_size, "setting %s: \"%s\" is not one of %s", d->name, value,
                 d->choices);
        return -1;
    }
    return 0;
}

int bk_conf_set(bk_conf_t *conf, bk_conf_key_t key, const char *value, bk_conf_src_t src,
                char *errstr, size_t errstr_size)
{
    if (conf->values[key] && conf->srcs[key] > src) {
        return 0;
    }
    if (validate(&descs[key], value, errstr, errstr_size) != 0) {
        return -1;
    }
    free(conf->values[key]);
    conf->values[key] = strdup(value);
    conf->srcs[key] = src;
    return 0;
}

bk_conf_t *bk_conf_new(void)
{
    bk_conf_t *conf = calloc(1, sizeof(*conf));
    char env[96], errstr[256];

    for (int i = 0; i < BK_CONF__COUNT; i++) {
        const char *v;
        size_t j;
        snprintf(env, sizeof(env), "BECK_%s", descs[i].name);
        for (j = 5; env[j]; j++) {
            env[j] = (char)toupper((unsigned char)env[j]);
        }
        v = getenv(env);
        if (i == BK_CONF_APP_ID && !v) {
            v = getenv("BECK_APP_ID");
        }
        if (v && *v && bk_conf_set(conf, i, v, BK_CONF_FROM_ENV, errstr, sizeof(errstr)) != 0) {
            fprintf(stderr, "beck: ignoring %s: %s\n", env, errstr);
        }
    }
    return conf;
}

void bk_conf_destroy(bk_conf_t *conf)
{
    if (!conf) {
        return;
    }
    for (int i = 0; i < BK_CONF__COUNT; i++) {
        free(conf->values[i]);
    }
    for (size_t i = 0; i < conf->kafka_cnt * 2; i++) {
        free(conf->kafka[i]);
    }
    free(conf->kafka);
    free(conf);
}

const char *bk_conf_str(const bk_conf_t *conf, bk_conf_key_t key)
{
    return conf->values[key] ? conf->values[key] : descs[key].def;
}

int64_t bk_conf_int(const bk_conf_t *conf, bk_conf_key_t key)
{
    const char *v = bk_conf_str(conf, key);
    return v ? strtoll(v, NULL, 10) : 0;
}

bk_conf_src_t bk_conf_source(const bk_conf_t *conf, bk_conf_key_t key)
{
    return conf->values[key] ? conf->srcs[key] : BK_CONF_FROM_DEFAULT;
}

int bk_conf_exactly_once(const bk_conf_t *conf)
{
    return strcmp(bk_conf_str(conf, BK_CONF_PROCESSING_GUARANTEE), "exactly_once") == 0;
}

int64_t bk_conf_commit_interval_ms(const bk_conf_t *conf)
{
    if (!conf->values[BK_CONF_COMMIT_INTERVAL_MS] && bk_conf_exactly_once(conf)) {
        return 100;
    }
    return bk_conf_int(conf, BK_CONF_COMMIT_INTERVAL_MS);
}

/* -- librdkafka pass-through ------------------------------------------- */

void bk_conf_add_kafka(bk_conf_t *conf, const char *key, const char *value)
{
    if (conf->kafka_cnt == conf->kafka_cap) {
        conf->kafka_cap = conf->kafka_cap ? conf->kafka_cap * 2 : 8;
        conf->kafka = realloc(conf->kafka, conf->kafka_cap * 2 * sizeof(char *));
    }
    conf->kafka[conf->kafka_cnt * 2] = strdup(key);
    conf->kafka[conf->kafka_cnt * 2 + 1] = strdup(value);
    conf->kafka_cnt++;
}

int bk_conf_add_kafka_kv(bk_conf_t *conf, const char *kv, char *errstr, size_t errstr_size)
{
    const char *eq = strchr(kv, '=');
    char key[256];
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key)) {
        snprintf(errstr, errstr_size, "-X %s: expected key=value", kv);
        return -1;
    }
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = '\0';
    bk_conf_add_kafka(conf, key, eq + 1);
    return 0;
}

static char *trim(char *s)
{
    char *e;
    while (isspace((unsigned char)*s)) {
        s++;
    }
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) {
        *--e = '\0';
    }
    return s;
}

int bk_conf_add_kafka_file(bk_conf_t *conf, const char *path, char *errstr, size_t errstr_size)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int lineno = 0;

    if (!f) {
        snprintf(errstr, errstr_size, "-F %s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        char *s = trim(line), *eq;
        lineno++;
        if (!*s || *s == '#' || *s == '!') {
            continue;
        }
        eq = strchr(s, '=');
        if (!eq) {
            snprintf(errstr, errstr_size, "%s:%d: expected key=value", path, lineno);
            fclose(f);
            return -1;
        }
        *eq = '\0';
        bk_conf_add_kafka(conf, trim(s), trim(eq + 1));
    }
    fclose(f);
    return 0;
}

size_t bk_conf_kafka_count(const bk_conf_t *conf)
{
    return conf->kafka_cnt;
}

void bk_conf_kafka_get(const bk_conf_t *conf, size_t i, const char **key, const char **value)
{
    *key = conf->kafka[i * 2];
    *value = conf->kafka[i * 2 + 1];
}

void bk_conf_print_help(void *file)
{
    FILE *out = file;
    fprintf(out, "Settings (topology key / --flag / BECK_ENV):\n");
    for (int i = 0; i < BK_CONF__COUNT; i++) {
        char flag[64];
        size_t j;
        snprintf(flag, sizeof(flag), "%s", descs[i].name);
        for (j = 0; flag[j]; j++) {
            if (flag[j] == '_') {
                flag[j] = '-';
            }
        }
        fprintf(out, "  --%-22s %s%s%s%s\n", flag, descs[i].help, descs[i].def ? " [" : "",
                descs[i].def ? descs[i].def : "", descs[i].def ? "]" : "");
    }
}
