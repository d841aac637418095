/* cmd_opts.h - one option parser for every command, driven by a table of its options.
 *
 * Every command reads its arguments the same way: "--name VALUE" or "--name=VALUE", -h and
 * --help, -b/-X/-F for Kafka wherever a command talks to Kafka (one table entry gives all
 * three), every setting of base/conf.h as --setting for `beck run`, positional arguments
 * (after "--" too, for one that starts with a dash), and the same errors, "beck CMD: ...".
 * Values point into argv. */
#ifndef BK_CMD_OPTS_H
#define BK_CMD_OPTS_H

#include "base/conf.h"

typedef enum {
    BK_OPT_FLAG,     /* no value: *(int *)dst = 1 */
    BK_OPT_STR,      /* *(const char **)dst = the value */
    BK_OPT_INT,      /* *(long *)dst = a whole number within [min, max] */
    BK_OPT_LIST,     /* repeatable: appended to *(bk_cmd_list_t *)dst */
    BK_OPT_KAFKA,    /* -b BROKERS, -X key=value, -F FILE, into the conf (name unused) */
    BK_OPT_SETTINGS, /* --SETTING VALUE for every setting base/conf.h knows (name unused) */
} bk_cmd_opt_kind_t;

typedef struct {
    const char *name; /* "--app" */
    bk_cmd_opt_kind_t kind;
    void *dst;
    long min, max; /* BK_OPT_INT */
} bk_cmd_opt_t;

/* A repeated option's values, in order (at most BK_CMD_LIST_MAX). */
#define BK_CMD_LIST_MAX 64
typedef struct {
    const char *v[BK_CMD_LIST_MAX];
    int n;
} bk_cmd_list_t;

typedef struct {
    const char *cmd; /* "run": the errors' prefix, "beck run: " */
    const bk_cmd_opt_t *opts;
    int nopts;
    bk_conf_t *conf; /* where BK_OPT_KAFKA and BK_OPT_SETTINGS go */
    const char **pos; /* positional arguments, at most maxpos (NULL, 0: none taken) */
    int maxpos;
    int npos; /* out: how many there were */
} bk_cmd_args_t;

/* Parses argv[1..argc): 0 when every argument was taken, 1 when -h or --help asked for the
 * command's help (print it), -1 after printing to stderr what was wrong and where. */
int bk_cmd_opts_parse(bk_cmd_args_t *a, int argc, char **argv);

#endif
