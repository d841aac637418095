/* cmd_snapshot.c - `beck snapshot --state-dir DIR --app ID --task S_P [--out ROOT]
 * [--topology T.lua]`. */
#include "cmd/cmd_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rocksdb/c.h>

#include "base/conf.h"
#include "base/task.h"
#include "engine/db.h"
#include "engine/plan.h"
#include "engine/snapshot.h"
#include "engine/store.h"
#include "engine/vm.h"
#include "cmd/cmd_opts.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: beck snapshot --state-dir DIR --app ID --task S_P [--out ROOT] "
                 "[--topology T.lua]\n\n"
                 "Makes a snapshot of task S_P of a stopped node: a RocksDB checkpoint of its\n"
                 "stores and the manifest beck-manifest (files, sizes, XXH3-64, the changelogs'\n"
                 "offsets) in ROOT/<id>/, ROOT by default DIR/ID/snapshots. Prints the snapshot's\n"
                 "directory, then its id, files, bytes and store lines. Without --topology every\n"
                 "store on disk is taken as logged to <ID>-<store>-changelog.\n");
}

/* The stores of the task as the topology declares them, or as found on disk. Names and
 * changelogs are malloc'd into names[]/changelogs[]; returns the count, -1 on error. */
static int task_stores(const char *topology, const char *app, const char *task_dir, int sub,
                       bk_store_spec_t **specs, char ***changelogs, char *err, size_t errsize)
{
    int n = 0;

    if (topology) {
        bk_conf_t *conf = bk_conf_new();
        lua_State *L = bk_vm_new();
        bk_plan_t *plan = bk_plan_load(L, topology, conf, err, errsize);
        int *idx;
        if (!plan) {
            n = -1;
        } else if (strcmp(plan->id, app) != 0) {
            snprintf(err, errsize, "%s is app '%s', not '%s'", topology, plan->id, app);
            n = -1;
        } else if (sub >= plan->nsubs) {
            snprintf(err, errsize, "%s has no subtopology %d", topology, sub);
            n = -1;
        } else {
            *specs = calloc((size_t)plan->nstores + 1, sizeof(**specs));
            *changelogs = calloc((size_t)plan->nstores + 1, sizeof(char *));
            idx = calloc((size_t)plan->nstores + 1, sizeof(int));
            n = bk_plan_sub_stores(plan, sub, *specs, idx);
            for (int i = 0; i < n; i++) {
                (*specs)[i].name = strdup((*specs)[i].name); /* the plan goes */
                (*changelogs)[i] = strdup(plan->stores[idx[i]].changelog);
            }
            free(idx);
        }
        bk_plan_destroy(plan);
        bk_vm_destroy(L);
        bk_conf_destroy(conf);
        return n;
    }
    {
        char path[2100], *rerr = NULL, **cfs;
        size_t ncfs = 0;
        rocksdb_options_t *opts = rocksdb_options_create();
        snprintf(path, sizeof(path), "%s/rocksdb", task_dir);
        cfs = rocksdb_list_column_families(opts, path, &ncfs, &rerr);
        rocksdb_options_destroy(opts);
        if (rerr) {
            snprintf(err, errsize, "%s: %s", path, rerr);
            free(rerr);
            return -1;
        }
        *specs = calloc(ncfs + 1, sizeof(**specs));
        *changelogs = calloc(ncfs + 1, sizeof(char *));
        for (size_t i = 0; i < ncfs; i++) {
            size_t len = strlen(app) + strlen(cfs[i]) + 16;
            if (strcmp(cfs[i], "default") == 0) {
                continue;
            }
            (*specs)[n].name = strdup(cfs[i]);
            (*specs)[n].logged = 1;
            (*changelogs)[n] = malloc(len);
            snprintf((*changelogs)[n], len, "%s-%s-changelog", app, cfs[i]);
            n++;
        }
        rocksdb_list_column_families_destroy(cfs, ncfs);
    }
    return n;
}

int bk_cmd_snapshot_main(int argc, char **argv)
{
    const char *state = NULL, *app = NULL, *task = NULL, *out = NULL, *topology = NULL;
    char task_dir[2048], root[2048], dir[4096], path[4096], err[4096];
    bk_store_spec_t *specs = NULL;
    char **changelogs = NULL;
    bk_db_t *db = NULL;
    bk_manifest_t m;
    struct stat sb;
    int n = 0, rc = 1;
    bk_task_id_t id;

    {
        const bk_cmd_opt_t opts[] = {
            {"--state-dir", BK_OPT_STR, &state, 0, 0},
            {"--app", BK_OPT_STR, &app, 0, 0},
            {"--task", BK_OPT_STR, &task, 0, 0},
            {"--out", BK_OPT_STR, &out, 0, 0},
            {"--topology", BK_OPT_STR, &topology, 0, 0},
        };
        bk_cmd_args_t args = {"snapshot", opts, 5, NULL, NULL, 0, 0};
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
    if (!state || !app || !task) {
        usage(stderr);
        return 2;
    }
    if (bk_task_parse(task, &id) != 0) {
        fprintf(stderr, "beck snapshot: --task takes SUBTOPOLOGY_PARTITION, as 0_3\n");
        return 2;
    }
    snprintf(task_dir, sizeof(task_dir), "%s/%s/%s", state, app, task);
    if (out) {
        snprintf(root, sizeof(root), "%s", out);
    } else {
        snprintf(root, sizeof(root), "%s/%s/snapshots", state, app);
    }
    /* bk_db_open would make an empty DB where there is none */
    snprintf(path, sizeof(path), "%s/rocksdb/CURRENT", task_dir);
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "beck snapshot: no state of task %s in %s\n", task, task_dir);
        return 1;
    }
    n = task_stores(topology, app, task_dir, id.sub, &specs, &changelogs, err, sizeof(err));
    if (n < 0) {
        fprintf(stderr, "beck snapshot: %s\n", err);
        goto out;
    }
    /* a running node holds the DB's lock: the open fails */
    db = bk_db_open(task_dir, specs, n, err, sizeof(err));
    if (!db) {
        fprintf(stderr, "beck snapshot: %s (is a node running on it?)\n", err);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        bk_store_set_changelog_topic(bk_db_store(db, i), changelogs[i], id.partition);
    }
    if (bk_snapshot_make(db, task, root, &m, dir, sizeof(dir), err, sizeof(err)) != 0) {
        fprintf(stderr, "beck snapshot: %s\n", err);
        goto out;
    }
    printf("%s\nid %s\nfiles %d\nbytes %llu\n", dir, m.id, m.nfiles,
           (unsigned long long)m.total_bytes);
    for (int i = 0; i < m.nstores; i++) {
        const bk_manifest_store_t *s = &m.stores[i];
        printf("store %s changelog %s %d next %lld inputs %d", s->name, s->changelog,
               (int)s->partition, (long long)s->next, s->ninputs);
        for (int j = 0; j < s->ninputs; j++) {
            printf(" %lld", (long long)s->inputs[j]);
        }
        printf("\n");
    }
    bk_manifest_free(&m);
    rc = 0;
out:
    bk_db_close(db);
    for (int i = 0; i < n; i++) {
        free((char *)specs[i].name);
        free(changelogs[i]);
    }
    free(specs);
    free(changelogs);
    return rc;
}
