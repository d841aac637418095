/* cmd_opts.c - one option parser for every command (cmd_opts.h). */
#include "cmd/cmd_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry of `opts` named `name` (len bytes: "--x" of "--x=v"), or NULL. */
static const bk_cmd_opt_t *find(const bk_cmd_args_t *a, const char *name, size_t len)
{
    for (int i = 0; i < a->nopts; i++) {
        const bk_cmd_opt_t *o = &a->opts[i];
        if (o->name && strlen(o->name) == len && strncmp(o->name, name, len) == 0) {
            return o;
        }
    }
    return NULL;
}

static int takes(const bk_cmd_args_t *a, bk_cmd_opt_kind_t kind)
{
    for (int i = 0; i < a->nopts; i++) {
        if (a->opts[i].kind == kind) {
            return 1;
        }
    }
    return 0;
}

static int positional(bk_cmd_args_t *a, const char *v)
{
    if (a->npos >= a->maxpos) {
        if (a->maxpos == 0) {
            fprintf(stderr, "beck %s: unexpected argument %s (see beck %s --help)\n", a->cmd, v,
                    a->cmd);
        } else {
            fprintf(stderr, "beck %s: too many arguments: %s (see beck %s --help)\n", a->cmd, v,
                    a->cmd);
        }
        return -1;
    }
    a->pos[a->npos++] = v;
    return 0;
}

/* Stores value v of option o (named `shown` on the command line). */
static int store(const bk_cmd_args_t *a, const bk_cmd_opt_t *o, const char *shown, const char *v)
{
    char *end;
    long x;
    bk_cmd_list_t *l;
    switch (o->kind) {
    case BK_OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case BK_OPT_INT:
        errno = 0;
        x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < o->min || x > o->max) {
            fprintf(stderr, "beck %s: %s %s: a whole number from %ld to %ld is needed\n", a->cmd,
                    shown, v, o->min, o->max);
            return -1;
        }
        *(long *)o->dst = x;
        return 0;
    case BK_OPT_LIST:
        l = o->dst;
        if (l->n >= BK_CMD_LIST_MAX) {
            fprintf(stderr, "beck %s: %s: at most %d of them\n", a->cmd, shown, BK_CMD_LIST_MAX);
            return -1;
        }
        l->v[l->n++] = v;
        return 0;
    default:
        return -1;
    }
}

/* -b, -X, -F: 1 when `arg` is one of them (its value taken), 0 when not, -1 on an error. */
static int kafka(const bk_cmd_args_t *a, const char *arg, int argc, char **argv, int *i)
{
    char err[512];
    int rc;
    if (!takes(a, BK_OPT_KAFKA) ||
        (strcmp(arg, "-b") != 0 && strcmp(arg, "-X") != 0 && strcmp(arg, "-F") != 0)) {
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "beck %s: %s needs a value (see beck %s --help)\n", a->cmd, arg, a->cmd);
        return -1;
    }
    const char *v = argv[++*i];
    rc = arg[1] == 'b'   ? bk_conf_set(a->conf, BK_CONF_BROKERS, v, BK_CONF_FROM_CLI, err,
                                       sizeof(err))
         : arg[1] == 'X' ? bk_conf_add_kafka_kv(a->conf, v, err, sizeof(err))
                         : bk_conf_add_kafka_file(a->conf, v, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "beck %s: %s\n", a->cmd, err);
        return -1;
    }
    return 1;
}

int bk_cmd_opts_parse(bk_cmd_args_t *a, int argc, char **argv)
{
    a->npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq, *v;
        const bk_cmd_opt_t *o;
        size_t len;
        int rc;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            return 1;
        }
        if (strcmp(arg, "--") == 0) { /* the next argument is positional, dash or not */
            if (i + 1 >= argc) {
                fprintf(stderr, "beck %s: -- needs an argument after it\n", a->cmd);
                return -1;
            }
            if (positional(a, argv[++i]) != 0) {
                return -1;
            }
            continue;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (positional(a, arg) != 0) {
                return -1;
            }
            continue;
        }
        if ((rc = kafka(a, arg, argc, argv, &i)) != 0) {
            if (rc < 0) {
                return -1;
            }
            continue;
        }
        eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        len = eq ? (size_t)(eq - arg) : strlen(arg);
        o = find(a, arg, len);
        if (!o && takes(a, BK_OPT_SETTINGS) && strncmp(arg, "--", 2) == 0) {
            char name[64], err[512];
            int key;
            snprintf(name, sizeof(name), "%.*s", (int)(len - 2), arg + 2);
            if ((key = bk_conf_lookup(name)) >= 0) {
                if (eq) {
                    v = eq + 1;
                } else if (i + 1 < argc) {
                    v = argv[++i];
                } else {
                    fprintf(stderr, "beck %s: %s needs a value (see beck %s --help)\n", a->cmd,
                            arg, a->cmd);
                    return -1;
                }
                if (bk_conf_set(a->conf, key, v, BK_CONF_FROM_CLI, err, sizeof(err)) != 0) {
                    fprintf(stderr, "beck %s: %s\n", a->cmd, err);
                    return -1;
                }
                continue;
            }
        }
        if (!o) {
            fprintf(stderr, "beck %s: unknown option %.*s (see beck %s --help)\n", a->cmd,
                    (int)len, arg, a->cmd);
            return -1;
        }
        if (o->kind == BK_OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "beck %s: %.*s takes no value\n", a->cmd, (int)len, arg);
                return -1;
            }
            *(int *)o->dst = 1;
            continue;
        }
        if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "beck %s: %s needs a value (see beck %s --help)\n", a->cmd, arg,
                    a->cmd);
            return -1;
        }
        if (store(a, o, o->name, v) != 0) {
            return -1;
        }
    }
    return 0;
}
