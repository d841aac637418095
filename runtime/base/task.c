/* task.c - naming and parsing tasks (task.h). */
#include "base/task.h"

#include <stdint.h>
#include <stdio.h>

const char *bk_task_name(bk_task_id_t task, char *buf)
{
    snprintf(buf, BK_TASK_NAME_MAX, "%d_%d", task.sub, task.partition);
    return buf;
}

/* Decimal digits only, at most INT32_MAX; *s moves past them. */
static int number(const char **s, int *out)
{
    long long v = 0;
    const char *p = *s;
    if (*p < '0' || *p > '9') {
        return -1;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > INT32_MAX) {
            return -1;
        }
    }
    *out = (int)v;
    *s = p;
    return 0;
}

int bk_task_parse(const char *name, bk_task_id_t *out)
{
    bk_task_id_t t;
    if (number(&name, &t.sub) != 0 || *name++ != '_' || number(&name, &t.partition) != 0 ||
        *name != '\0') {
        return -1;
    }
    *out = t;
    return 0;
}
