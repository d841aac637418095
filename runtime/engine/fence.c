/* fence.c - transactional ids and the fencing of a gone node's producers (fence.h). */
#include "engine/fence.h"

#include <inttypes.h>
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "engine/kafka.h"

void bk_fence_txn_id(const char *app, const char *node, uint64_t instance, int thread, char *out,
                     size_t size)
{
    if (instance) {
        snprintf(out, size, "%s-%s-%" PRIu64 "-%d", app, node, instance, thread);
    } else {
        snprintf(out, size, "%s-%s-%d", app, node, thread);
    }
}

int bk_fence_incarnation(const bk_conf_t *conf, const char *app, const char *node,
                         uint64_t instance, int threads, char *err, size_t errsize)
{
    for (int t = 0; t < threads; t++) {
        char id[512], cid[600];
        const char *extra[] = {"transactional.id", id, NULL};
        rd_kafka_t *rk;
        rd_kafka_error_t *e;
        bk_fence_txn_id(app, node, instance, t, id, sizeof(id));
        snprintf(cid, sizeof(cid), "%s-fence", app);
        rk = bk_kafka_new_with(conf, BK_KAFKA_PRODUCER, cid, extra, NULL, NULL, err, errsize);
        if (!rk) {
            return -1;
        }
        /* InitProducerId: the id's epoch goes up, its open transaction is aborted */
        e = rd_kafka_init_transactions(rk, 30000);
        if (e) {
            snprintf(err, errsize, "fencing transactional id %s: %s", id,
                     rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            rd_kafka_destroy(rk);
            return -1;
        }
        rd_kafka_destroy(rk);
    }
    return 0;
}
