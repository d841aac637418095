/* assign.c - scripts/bench/assign's driver: the assignor and its encoding at cluster scale.
 *
 *   assign NODES THREADS RACKS TASKS K REPEAT
 *
 * Builds NODES members (ids "node-000", racks "eu-west-1a".., endpoints "10.0.x.y:8080") and
 * TASKS tasks, then:
 *   scratch  computes with no previous assignment (epoch 1), encodes it in full;
 *   steady   recomputes with epoch 1 as the previous one and the lags its replicas report:
 *            nothing may move;
 *   join     one more node: computes, encodes the delta against epoch 1;
 *   leave    one node gone (node-123, no goodbye): the same.
 * Each compute runs REPEAT times; its time is the median. It checks what it prints
 * (round trips, deltas applied, balance, racks, stability) and exits 1 on a failure.
 * Prints "name value" lines; scripts/bench/assign turns them into figures.
 *
 * Kafka Streams' figure: the bytes of the AssignmentInfo (version 10/11, as
 * StreamsPartitionAssignor writes it) that the group leader sends for every consumer of the
 * same cluster: NODES x THREADS consumers (a KS stream thread is a group member), each
 * getting its own task lists and the whole cluster's partitionsByHost and
 * standbyPartitionsByHost maps (application.server set, as interactive queries need).
 * Assumptions: one source topic of KS_TOPIC_LEN characters, one partition per task, the
 * same hosts as beck's endpoints, tasks and standbys of a node spread evenly over its
 * consumers, no named topologies. The arithmetic is in ks_assignment_info_bytes(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/assign.h"
#include "cluster/assigncodec.h"

#define KS_TOPIC_LEN 24 /* e.g. "orders-enriched-by-store" */

typedef struct cluster {
    int n;
    bk_assign_member_t *members;
    char (*ids)[32];
    char (*racks)[32];
    char (*eps)[32];
} cluster_t;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "assign bench: %s: %s\n", what, why);
    exit(1);
}

/* Members node-<first>.. except `skip`; node i sits in rack i % racks. */
static void make_cluster(cluster_t *c, int n, int skip, int threads, int racks)
{
    static const char *zones = "abcdefghij";
    c->n = 0;
    c->members = calloc((size_t)n, sizeof(*c->members));
    c->ids = calloc((size_t)n, sizeof(*c->ids));
    c->racks = calloc((size_t)n, sizeof(*c->racks));
    c->eps = calloc((size_t)n, sizeof(*c->eps));
    for (int i = 0; i < n; i++) {
        int k = c->n;
        if (i == skip) {
            continue;
        }
        snprintf(c->ids[k], sizeof(c->ids[k]), "node-%03d", i);
        snprintf(c->racks[k], sizeof(c->racks[k]), "eu-west-1%c", zones[i % racks % 10]);
        snprintf(c->eps[k], sizeof(c->eps[k]), "10.0.%d.%d:8080", i / 200, i % 200 + 10);
        c->members[k] = (bk_assign_member_t){c->ids[k], c->racks[k], c->eps[k], threads};
        c->n++;
    }
}

static void free_cluster(cluster_t *c)
{
    free(c->members);
    free(c->ids);
    free(c->racks);
    free(c->eps);
}

/* Runs the assignor `repeat` times on one input; returns the median ms and the last result. */
static double timed(const bk_assign_input_t *in, bk_assign_result_t *res, int repeat)
{
    double *ms = calloc((size_t)repeat, sizeof(*ms)), med;
    char err[256];
    for (int r = 0; r < repeat; r++) {
        double t0;
        bk_assign_result_destroy(res);
        t0 = now_ms();
        if (bk_assign_compute(in, res, err, sizeof(err)) != 0) {
            die("compute", err);
        }
        ms[r] = now_ms() - t0;
    }
    qsort(ms, (size_t)repeat, sizeof(*ms), dcmp);
    med = ms[repeat / 2];
    free(ms);
    return med;
}

/* The invariants the bench relies on; the property spec checks them far more widely. */
static void check(const cluster_t *c, const bk_assign_input_t *in, const bk_assign_result_t *r)
{
    long C = 0;
    for (int m = 0; m < c->n; m++) {
        C += c->members[m].threads;
    }
    for (int m = 0; m < c->n; m++) {
        long th = c->members[m].threads, f = in->ntasks / C, up = in->ntasks % C != 0;
        if (r->active_count[m] < th * f || r->active_count[m] > th * (f + up)) {
            die("check", "actives out of balance");
        }
    }
    for (int t = 0; t < r->ntasks; t++) {
        for (int j = 0; j < r->k; j++) {
            int s = r->standby[t * r->k + j];
            if (s == r->active[t] ||
                strcmp(c->members[s].rack, c->members[r->active[t]].rack) == 0) {
                die("check", "a standby shares its active's node or rack");
            }
        }
    }
}

static size_t encoded(const bk_assigncodec_t *ac)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    bk_assigncodec_t *back;
    if (bk_assigncodec_encode(ac, &buf, &len, err, sizeof(err)) != 0) {
        die("encode", err);
    }
    back = bk_assigncodec_decode(buf, len, err, sizeof(err));
    if (!back || !bk_assigncodec_equal(ac, back)) {
        die("decode", back ? "round trip differs" : err);
    }
    bk_assigncodec_destroy(back);
    free(buf);
    return len;
}

static size_t delta(const bk_assigncodec_t *prev, const bk_assigncodec_t *next)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    bk_assigncodec_t *back;
    if (bk_assigncodec_delta(prev, next, &buf, &len, err, sizeof(err)) != 0) {
        die("delta", err);
    }
    back = bk_assigncodec_apply(prev, buf, len, err, sizeof(err));
    if (!back || !bk_assigncodec_equal(next, back)) {
        die("apply", back ? "applied delta differs" : err);
    }
    bk_assigncodec_destroy(back);
    free(buf);
    return len;
}

/* -- Kafka Streams' AssignmentInfo (v10/v11) -------------------------------------------------
 * DataOutputStream: int = 4 bytes, long = 8, writeUTF(s) = 2 + len (ASCII).
 *   int usedVersion, int commonlySupportedVersion                                     8
 *   int #active; per active TaskId: int subtopology, int partition,
 *       int topologyName length (0: no named topology, v >= 10)                      4 + 12 a
 *   int #standby; per standby: TaskId (12), then its partitions: int count,
 *       per partition writeUTF(topic) + int partition                                4 + s (12 + 4
 * + 2 + L + 4) topic dictionary: int count; per topic: int index, writeUTF(topic)                4
 * + 4 + 2 + L partitionsByHost: int #hosts; per host: writeUTF(host), int port, int #partitions,
 * per partition: int topicIndex, int partition                4 + sum(2 + h + 4 + 4) + 8 T
 *   standbyPartitionsByHost: the same with the standby partitions                    4 + sum(2 + h
 * + 4 + 4) + 8 T K int errCode, long nextRebalanceMs 12 (AssignmentInfo.encode,
 * encodeActiveAndStandbyTaskAssignment, encodeActiveAndStandbyHostPartitions in
 * org.apache.kafka.streams.processor.internals. assignment; ConsumerProtocolUtils.writeTaskIdTo.)
 * The ConsumerProtocol envelope around it (each consumer's assigned partitions again) is left out:
 * the figure is a floor. */
static double ks_assignment_info_bytes(const cluster_t *c, const bk_assign_result_t *r,
                                       double *per_consumer)
{
    double hosts = 4, total = 0;
    long consumers = 0;
    for (int m = 0; m < c->n; m++) {
        const char *colon = strrchr(c->eps[m], ':');
        hosts += 2 + (double)(colon - c->eps[m]) + 4 + 4;
    }
    /* What every consumer gets alike: the maps of the whole cluster and the fixed fields. */
    double shared = 8 + 4 + 4 + (4 + 4 + 2 + KS_TOPIC_LEN) + hosts + 8.0 * r->ntasks + hosts +
                    8.0 * r->ntasks * r->k + 12;
    for (int m = 0; m < c->n; m++) {
        int th = c->members[m].threads;
        for (int i = 0; i < th; i++) {
            /* Consumer i of node m: its share of the node's actives and standbys. */
            long a = r->active_count[m] / th + (i < r->active_count[m] % th);
            long s = r->standby_count[m] / th + (i < r->standby_count[m] % th);
            total += shared + 12.0 * a + s * (12.0 + 4 + 2 + KS_TOPIC_LEN + 4);
            consumers++;
        }
    }
    *per_consumer = total / (double)consumers;
    return total;
}

/* -- Main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int nodes, threads, racks, T, K, repeat, skip;
    cluster_t base, join, leave;
    bk_assign_result_t r0 = {0}, r1 = {0}, rj = {0}, rl = {0};
    bk_assign_input_t in = {0};
    bk_assigncodec_t *ac0, *acj, *acl;
    bk_assign_lag_t *lags;
    int32_t *pa, *ps;
    double ms_scratch, ms_steady, ms_join, ms_leave, ks, ks_each, worst;
    char err[256];
    size_t full, dj, dl;
    unsigned seed = 12345;

    if (argc != 7) {
        fprintf(stderr, "usage: assign NODES THREADS RACKS TASKS K REPEAT\n");
        return 2;
    }
    nodes = atoi(argv[1]);
    threads = atoi(argv[2]);
    racks = atoi(argv[3]);
    T = atoi(argv[4]);
    K = atoi(argv[5]);
    repeat = atoi(argv[6]);
    skip = 123 % nodes;
    make_cluster(&base, nodes, -1, threads, racks);
    make_cluster(&join, nodes + 1, -1, threads, racks);
    make_cluster(&leave, nodes, skip, threads, racks);

    /* Scratch: epoch 1. */
    in = (bk_assign_input_t){base.members, base.n, T, K, NULL, NULL, 0, NULL, 0};
    ms_scratch = timed(&in, &r0, repeat);
    check(&base, &in, &r0);
    ac0 = bk_assigncodec_from_result(NULL, &in, &r0, 1, err, sizeof(err));
    if (!ac0) {
        die("from_result", err);
    }
    full = encoded(ac0);

    /* The previous placement and the lags members report against epoch 1: actives 0, a
     * standby some hundreds of records behind. */
    pa = malloc((size_t)T * sizeof(*pa));
    ps = malloc((size_t)T * (size_t)(K + 1) * sizeof(*ps));
    lags = malloc((size_t)T * (size_t)(K + 1) * sizeof(*lags));

    /* Steady: the same members again; nothing may move. */
    bk_assigncodec_to_prev(ac0, base.members, base.n, T, pa, ps, ac0->k);
    {
        int n = 0;
        for (int t = 0; t < T; t++) {
            lags[n++] = (bk_assign_lag_t){t, pa[t], 0};
            for (int j = 0; j < ac0->k; j++) {
                seed = seed * 1103515245 + 12345;
                lags[n++] = (bk_assign_lag_t){t, ps[t * ac0->k + j], (seed >> 16) % 1000};
            }
        }
        in = (bk_assign_input_t){base.members, base.n, T, K, pa, ps, ac0->k, lags, n};
    }
    ms_steady = timed(&in, &r1, repeat);
    if (r1.moved || memcmp(r1.active, r0.active, (size_t)T * sizeof(int32_t)) ||
        memcmp(r1.standby, r0.standby, (size_t)T * (size_t)r0.k * sizeof(int32_t))) {
        die("steady", "a recompute with nothing changed moved something");
    }

    /* Join and leave: prev and lags mapped to the new member tables by id. */
    for (int which = 0; which < 2; which++) {
        cluster_t *c = which ? &leave : &join;
        bk_assign_result_t *r = which ? &rl : &rj;
        bk_assigncodec_t **ac = which ? &acl : &acj;
        int n = 0;
        bk_assigncodec_to_prev(ac0, c->members, c->n, T, pa, ps, ac0->k);
        seed = 12345;
        for (int t = 0; t < T; t++) {
            if (pa[t] >= 0) {
                lags[n++] = (bk_assign_lag_t){t, pa[t], 0};
            }
            for (int j = 0; j < ac0->k; j++) {
                seed = seed * 1103515245 + 12345;
                if (ps[t * ac0->k + j] >= 0) {
                    lags[n++] = (bk_assign_lag_t){t, ps[t * ac0->k + j], (seed >> 16) % 1000};
                }
            }
        }
        in = (bk_assign_input_t){c->members, c->n, T, K, pa, ps, ac0->k, lags, n};
        if (which) {
            ms_leave = timed(&in, r, repeat);
        } else {
            ms_join = timed(&in, r, repeat);
        }
        check(c, &in, r);
        if (r->moved != r->min_moved) {
            die("stickiness", "moved more actives than balance needs");
        }
        *ac = bk_assigncodec_from_result(ac0, &in, r, 2, err, sizeof(err));
        if (!*ac) {
            die("from_result", err);
        }
        printf("%s_moved %d\n%s_min_moved %d\n%s_orphaned %d\n%s_promoted %d\n",
               which ? "leave" : "join", r->moved, which ? "leave" : "join", r->min_moved,
               which ? "leave" : "join", r->orphaned, which ? "leave" : "join", r->promoted);
    }
    dj = delta(ac0, acj);
    dl = delta(ac0, acl);
    ks = ks_assignment_info_bytes(&base, &r0, &ks_each);
    worst = ms_scratch;
    worst = ms_steady > worst ? ms_steady : worst;
    worst = ms_join > worst ? ms_join : worst;
    worst = ms_leave > worst ? ms_leave : worst;

    printf("full_bytes %zu\n", full);
    printf("delta_join_bytes %zu\n", dj);
    printf("delta_leave_bytes %zu\n", dl);
    printf("compute_ms_scratch %.2f\ncompute_ms_steady %.2f\n", ms_scratch, ms_steady);
    printf("compute_ms_join %.2f\ncompute_ms_leave %.2f\n", ms_join, ms_leave);
    printf("compute_ms %.2f\n", worst);
    printf("kstreams_consumers %d\n", base.n * threads);
    printf("kstreams_bytes_per_consumer %.0f\n", ks_each);
    printf("kstreams_bytes %.0f\n", ks);

    bk_assigncodec_destroy(ac0);
    bk_assigncodec_destroy(acj);
    bk_assigncodec_destroy(acl);
    bk_assign_result_destroy(&r0);
    bk_assign_result_destroy(&r1);
    bk_assign_result_destroy(&rj);
    bk_assign_result_destroy(&rl);
    free(pa);
    free(ps);
    free(lags);
    free_cluster(&base);
    free_cluster(&join);
    free_cluster(&leave);
    return 0;
}
