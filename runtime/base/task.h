/* task.h - the identity of a task: partition `partition` of subtopology `sub`, named "S_P"
 * (state directories, logs, snapshots, the control topic's notes, `beck` options). This is
 * the one place that formats and parses that name.
 *
 * Modules that hold a table of an app's tasks (the plan's order, the assignment's) pass a
 * task's index in that table as an int32_t; bk_task_id_t is what the index stands for. */
#ifndef BK_TASK_H
#define BK_TASK_H

#include <stdint.h>

typedef struct bk_task_id_s {
    int sub;
    int partition;
} bk_task_id_t;

/* "2147483647_2147483647" and its NUL. */
#define BK_TASK_NAME_MAX 24

/* Writes "S_P" into buf (at least BK_TASK_NAME_MAX bytes) and returns buf, so that it can
 * sit in a printf argument list. */
const char *bk_task_name(bk_task_id_t task, char *buf);
/* The name of task t in a buffer that lives until the end of the enclosing block, for a
 * printf argument list: bk_log_info("task %s: ...", BK_TASK_NAME(t)). */
#define BK_TASK_NAME(t) bk_task_name((t), (char[BK_TASK_NAME_MAX]){0})
/* Parses "S_P" (two non-negative decimal numbers, nothing else). 0, or -1. */
int bk_task_parse(const char *name, bk_task_id_t *out);

#endif
