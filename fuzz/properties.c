/* properties.c - fuzz target: a librdkafka properties file given with -F (base/conf.c). */
#define _GNU_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    int fd = memfd_create("fuzz-properties", 0);
    bk_conf_t *conf;
    if (fd < 0) {
        return 0;
    }
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    conf = bk_conf_new();
    if (conf) {
        bk_conf_add_kafka_file(conf, path, err, sizeof(err));
        bk_conf_destroy(conf);
    }
    close(fd);
    return 0;
}
