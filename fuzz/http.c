/* http.c - fuzz target: the bytes of an HTTP request to a node's query server
 * (query/query.c, libmicrohttpd), as any client on the network may send them. The server
 * runs in this process on 127.0.0.1 (any free port) for a node alone with a count by key,
 * every task's RocksDB open and served; each input is written to a new connection, whose
 * write side is then closed, and whatever comes back is read (for 200 ms without an answer,
 * 20 ms after one). Beyond "no crash": an answer, if any, starts with an HTTP/1.x status
 * line. Network traffic goes to 127.0.0.1 only; BECK_FUZZ_SHOW=1 prints the answers. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lua.h>

#include "base/conf.h"
#include "base/fs.h"
#include "engine/plan.h"
#include "engine/taskdb.h"
#include "engine/vm.h"
#include "query/query.h"
#include "query/route.h"

/* A topology with a logged key-value store, as the query server sees one. */
static const char TOPOLOGY[] =
    "local beck = require 'beck'\n"
    "local app = beck.app { id = 'fuzzhttp' }\n"
    "app:stream('in'):group_by_key():count { store = 'counts' }:to('out')\n"
    "return app\n";

static int port;
static char state[64];

static void remove_state(void)
{
    bk_fs_rm_tree(state);
}

static void setup(void)
{
    static bk_query_env_t env;
    char path[] = "/tmp/beck-fuzz-http-XXXXXX.lua", err[1024];
    int fd = mkstemps(path, 4);
    bk_conf_t *conf = bk_conf_new();
    lua_State *L;
    bk_plan_t *plan;
    bk_route_t *route;
    bk_query_t *q;

    if (fd < 0 || write(fd, TOPOLOGY, sizeof(TOPOLOGY) - 1) != (ssize_t)(sizeof(TOPOLOGY) - 1)) {
        fprintf(stderr, "http fuzz: cannot write %s\n", path);
        abort();
    }
    close(fd);
    L = bk_vm_new();
    plan = L && conf ? bk_plan_load(L, path, conf, err, sizeof(err)) : NULL;
    unlink(path);
    bk_vm_destroy(L); /* the plan is C's: the VM's memory would read as leaked (LuaJIT's own
                       * arena is not scanned for pointers) */
    for (int i = 0; plan && i < plan->nsubs; i++) {
        plan->subs[i].partitions = 4; /* as a start learns them from the broker */
    }
    /* the app's task table, as a start makes it once the partitions are known */
    if (!plan || bk_plan_make_task_table(plan) != 0 || !(route = bk_route_new(plan, "fuzz"))) {
        fprintf(stderr, "http fuzz: no plan: %s\n", plan ? "out of memory" : err);
        abort();
    }
    bk_route_set_alone(route);
    env = (bk_query_env_t){plan, conf, bk_taskdb_pool_new(), route, "fuzz", NULL};
    /* every task's DB open and served, as an active's: gets and scans read real RocksDBs */
    snprintf(state, sizeof(state), "/tmp/beck-fuzz-http-XXXXXX");
    if (!mkdtemp(state) ||
        bk_conf_set(conf, BK_CONF_STATE_DIR, state, BK_CONF_FROM_CLI, err, sizeof(err)) != 0) {
        fprintf(stderr, "http fuzz: no state directory\n");
        abort();
    }
    atexit(remove_state);
    for (int i = 0; i < plan->nsubs; i++) {
        for (int p = 0; p < plan->subs[i].partitions; p++) {
            bk_task_id_t t = {i, p};
            /* room for every store the plan may come to have, as bk_taskdb_open fills */
            bk_store_t **store_of = calloc((size_t)plan->cap_stores + 1, sizeof(*store_of));
            int logged = 0;
            bk_db_t *db = store_of ? bk_taskdb_open(env.pool, plan, conf, t, store_of, &logged,
                                                    err, sizeof(err))
                                   : NULL;
            if (db) {
                bk_taskdb_serve(env.pool, t, db, BK_TASKDB_ACTIVE);
            }
            free(store_of);
        }
    }
    if (!(q = bk_query_start(&env, "127.0.0.1", 0, err, sizeof(err)))) {
        fprintf(stderr, "http fuzz: %s\n", err);
        abort();
    }
    port = bk_query_port(q); /* it serves until the process ends */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sockaddr_in a = {0};
    char reply[4096], scratch[4096];
    size_t got = 0;
    int fd;

    if (!port) {
        setup();
    }
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        fprintf(stderr, "http fuzz: cannot connect to the server: %s\n", strerror(errno));
        abort(); /* the server stopped listening */
    }
    for (size_t off = 0; off < size;) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) {
            break; /* it closed on us: an answer may still be there */
        }
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;
        /* libmicrohttpd keeps a connection (kept alive, or with a request cut short) open
         * after our side closed, until its timeout: a pause of 20 ms after an answer, or
         * 200 ms without one, ends the wait (a local answer takes about a millisecond) */
        if (poll(&p, 1, got ? 20 : 200) <= 0) {
            break;
        }
        /* the first 4 KiB kept, the rest read and dropped */
        r = got < sizeof(reply) ? recv(fd, reply + got, sizeof(reply) - got, 0)
                                : recv(fd, scratch, sizeof(scratch), 0);
        if (r <= 0) {
            break;
        }
        got = got < sizeof(reply) ? got + (size_t)r : got;
    }
    close(fd);
    if (getenv("BECK_FUZZ_SHOW")) { /* what the server answered, for a look */
        fprintf(stderr, "%.*s\n--\n", (int)(got < sizeof(reply) ? got : sizeof(reply)), reply);
    }
    if (got > 0 && (got < 9 || memcmp(reply, "HTTP/1.", 7) != 0)) {
        fprintf(stderr, "http fuzz: an answer that is no HTTP status line: %.*s\n",
                (int)(got < 40 ? got : 40), reply);
        abort();
    }
    return 0;
}
