/* main.c - the beck command: dispatches to its commands (run, broker, status, skip, ...). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <luajit.h>

#include "cmd/cmd_bootstrap.h"
#include "cmd/cmd_repartition.h"
#include "cmd/cmd_broker.h"
#include "cmd/cmd_describe.h"
#include "cmd/cmd_dump.h"
#include "cmd/cmd_fetch.h"
#include "cmd/cmd_query.h"
#include "cmd/cmd_run.h"
#include "cmd/cmd_skip.h"
#include "cmd/cmd_snapshot.h"
#include "cmd/cmd_status.h"
#include "cmd/cmd_test.h"

#define BK_VERSION "0.1.0"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: beck COMMAND [ARGS]\n\n"
        "  run TOPOLOGY.lua [-b BROKERS] ...  run a topology as one node of its app\n"
        "  broker [--brokers N] ...           host a dev broker (librdkafka's mock cluster)\n"
        "  status -b BROKERS --app ID ...     print an app's cluster: nodes, epoch, tasks\n"
        "  get -b BROKERS --app ID STORE KEY  read a key of an app's state from any node\n"
        "  scan -b BROKERS --app ID STORE ... read a range of an app's state, in key order\n"
        "  test [PATH...]                     run busted specs inside the runtime\n"
        "  describe TOPOLOGY.lua              print a topology's subtopologies, stores, topics\n"
        "  dump --state-dir DIR --app ID      print a stopped node's stores\n"
        "  bootstrap -b BROKERS --app ID --task S_P  rebuild a standby by cold bootstrap\n"
        "  repartition -b BROKERS --app ID --subtopology S --partitions N  move it to N tasks\n"
        "  skip -b BROKERS --app ID --topic T --partition P --offset O  go past a poison record\n"
        "  fetch --host H --remote-dir DIR ...  fetch a snapshot over SFTP\n"
        "  snapshot --state-dir DIR --app ID --task S_P  snapshot a stopped node's task\n"
        "  version                            print the version\n\n"
        "`beck COMMAND --help` tells more.\n");
}

/* Each command's entry: argv[0] is the command's name; returns the exit status. */
static const struct {
    const char *name;
    int (*main)(int argc, char **argv);
} commands[] = {
    {"run", bk_cmd_run_main},       {"broker", bk_cmd_broker_main},
    {"status", bk_cmd_status_main}, {"describe", bk_cmd_describe_main},
    {"dump", bk_cmd_dump_main},     {"bootstrap", bk_cmd_bootstrap_main},
    {"fetch", bk_cmd_fetch_main},   {"snapshot", bk_cmd_snapshot_main},
    {"test", bk_cmd_test_main},     {"get", bk_cmd_get_main},
    {"scan", bk_cmd_scan_main},     {"repartition", bk_cmd_repartition_main},
    {"skip", bk_cmd_skip_main},
};

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;

    /* glibc returns the top of a thread's arena to the kernel as soon as it
     * shrinks past 128 KiB, and takes it back a moment later: with the
     * record path's churn of strings and messages that cost ~18k
     * mprotect calls (and TLB flushes) per million records. Keep it. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);

    if (!cmd || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(cmd ? stdout : stderr);
        return cmd ? 0 : 2;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            return commands[i].main(argc - 1, argv + 1);
        }
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            printf("usage: beck version\n\nPrints beck's version and its libraries'.\n");
            return 0;
        }
        printf("beck %s (librdkafka %s, %s)\n", BK_VERSION, rd_kafka_version_str(), LUAJIT_VERSION);
        return 0;
    }
    fprintf(stderr, "beck: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
