/* cmd_dump.c - `beck dump --state-dir DIR --app ID [--store NAME] [--task ID]`. */
#include "cmd/cmd_dump.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "base/keys.h"
#include "base/task.h"
#include "cmd/cmd_opts.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: beck dump --state-dir DIR --app ID [--store NAME] [--task ID]\n\n"
                 "Prints the stores of a stopped node's tasks as JSON lines\n"
                 "{\"task\", \"store\", \"key\", \"value\"}, keys without their key-group\n"
                 "prefix, in on-disk order. Exits 1 if a key is under the wrong key group.\n");
}

/* JSON string: bytes outside printable ASCII as \u00XX, so binary survives. */
static void json_str(FILE *out, const char *s, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20 || c >= 0x7f) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
    fputc('"', out);
}

/* The key group a key is under must be its own, or for a window store's key
 * (base/keys.h) its record key's. dump does not know which stores are window stores:
 * either is accepted. */
static int group_ok(const char *k, size_t kl)
{
    int g = ((unsigned char)k[0] << 8) | (unsigned char)k[1];
    return g == bk_keys_group(k + 2, kl - 2, 0) || g == bk_keys_group(k + 2, kl - 2, 1);
}

static int dump_task(const char *dir, const char *task, const char *only_store, int *bad)
{
    char path[4096], *err = NULL, **names;
    size_t n = 0;
    rocksdb_options_t *opts = rocksdb_options_create();
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    const rocksdb_options_t **cfopts;
    rocksdb_column_family_handle_t **cfs;
    rocksdb_t *db;

    snprintf(path, sizeof(path), "%s/%s/rocksdb", dir, task);
    names = rocksdb_list_column_families(opts, path, &n, &err);
    if (err) {
        fprintf(stderr, "beck dump: %s: %s\n", path, err);
        free(err);
        rocksdb_options_destroy(opts);
        rocksdb_readoptions_destroy(ro);
        return -1;
    }
    cfopts = calloc(n, sizeof(*cfopts));
    cfs = calloc(n, sizeof(*cfs));
    for (size_t i = 0; i < n; i++) {
        cfopts[i] = opts;
    }
    db = rocksdb_open_for_read_only_column_families(opts, path, (int)n, (const char **)names,
                                                    cfopts, cfs, 0, &err);
    if (err) {
        fprintf(stderr, "beck dump: %s: %s\n", path, err);
        free(err);
    } else {
        for (size_t i = 0; i < n; i++) {
            rocksdb_iterator_t *it;
            if (strcmp(names[i], "default") == 0 || (only_store && strcmp(names[i], only_store))) {
                continue;
            }
            it = rocksdb_create_iterator_cf(db, ro, cfs[i]);
            for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
                size_t kl, vl;
                const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
                if (kl < 2 || !group_ok(k, kl)) {
                    fprintf(stderr,
                            "beck dump: task %s store %s: a key under the wrong key "
                            "group\n",
                            task, names[i]);
                    (*bad)++;
                    continue;
                }
                printf("{\"task\":\"%s\",\"store\":", task);
                json_str(stdout, names[i], strlen(names[i]));
                printf(",\"key\":");
                json_str(stdout, k + 2, kl - 2);
                printf(",\"value\":");
                json_str(stdout, v, vl);
                printf("}\n");
            }
            rocksdb_iter_destroy(it);
        }
        for (size_t i = 0; i < n; i++) {
            rocksdb_column_family_handle_destroy(cfs[i]);
        }
        rocksdb_close(db);
    }
    rocksdb_list_column_families_destroy(names, n);
    free(cfopts);
    free(cfs);
    rocksdb_options_destroy(opts);
    rocksdb_readoptions_destroy(ro);
    return db ? 0 : -1;
}

int bk_cmd_dump_main(int argc, char **argv)
{
    const char *state = NULL, *app = NULL, *store = NULL, *task = NULL;
    char dir[4096];
    DIR *d;
    struct dirent *e;
    int bad = 0, rc = 0;

    {
        const bk_cmd_opt_t opts[] = {
            {"--state-dir", BK_OPT_STR, &state, 0, 0},
            {"--app", BK_OPT_STR, &app, 0, 0},
            {"--store", BK_OPT_STR, &store, 0, 0},
            {"--task", BK_OPT_STR, &task, 0, 0},
        };
        bk_cmd_args_t args = {"dump", opts, 4, NULL, NULL, 0, 0};
        int parsed = bk_cmd_opts_parse(&args, argc, argv);
        if (parsed == 1) {
            usage(stdout);
            return 0;
        }
        if (parsed != 0) {
            usage(stderr);
            return 2;
        }
    }
    if (!state || !app) {
        usage(stderr);
        return 2;
    }
    snprintf(dir, sizeof(dir), "%s/%s", state, app);
    if (task) {
        rc = dump_task(dir, task, store, &bad);
    } else if ((d = opendir(dir)) == NULL) {
        fprintf(stderr, "beck dump: no state for app %s in %s\n", app, state);
        return 1;
    } else {
        while ((e = readdir(d)) != NULL) {
            bk_task_id_t id;
            /* task directories only ("S_P"): not snapshots/ or a fetch in progress */
            if (bk_task_parse(e->d_name, &id) != 0) {
                continue;
            }
            if (dump_task(dir, e->d_name, store, &bad) != 0) {
                rc = -1;
            }
        }
        closedir(d);
    }
    fflush(stdout);
    return rc != 0 || bad ? 1 : 0;
}
