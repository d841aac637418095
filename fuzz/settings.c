/* settings.c - fuzz target: settings as they arrive from the command line, the BECK_*
 * environment and a topology (base/conf.c): lines "name=value", each name found by any
 * spelling (bk_conf_lookup) and its value validated (bk_conf_set), and -X key=value pairs
 * (bk_conf_add_kafka_kv). A value that is accepted reads back as a string or an integer
 * without a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *save = NULL, err[512];
    bk_conf_t *conf = bk_conf_new();
    if (!text || !conf) {
        free(text);
        bk_conf_destroy(conf);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        int key;
        if (line[0] == 'X' && line[1] == ' ') {
            bk_conf_add_kafka_kv(conf, line + 2, err, sizeof(err));
            continue;
        }
        if (!eq) {
            continue;
        }
        *eq = '\0';
        key = bk_conf_lookup(line);
        if (key >= 0 && bk_conf_set(conf, (bk_conf_key_t)key, eq + 1, BK_CONF_FROM_CLI, err,
                                    sizeof(err)) == 0) {
            (void)bk_conf_str(conf, (bk_conf_key_t)key);
            (void)bk_conf_int(conf, (bk_conf_key_t)key);
        }
    }
    for (size_t i = 0; i < bk_conf_kafka_count(conf); i++) {
        const char *k, *v;
        bk_conf_kafka_get(conf, i, &k, &v);
        if (!k || !v) {
            abort();
        }
    }
    bk_conf_destroy(conf);
    free(text);
    return 0;
}
