/* cmd_fetch.c - `beck fetch --host H --user U --key KEY --known-hosts F --remote-dir DIR
 * --dest DIR ...`. */
#include "cmd/cmd_fetch.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/manifest.h"
#include "replica/sftp.h"
#include "cmd/cmd_opts.h"

#define BK_FETCH_MANIFEST_MAX (64u << 20) /* BK_MANIFEST_MAX_FILES lines fit */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: beck fetch --host H [--port P] --user U --key KEYFILE --known-hosts FILE\n"
            "                  --remote-dir DIR --dest DIR [--parallel N]\n"
            "                  [--rate-limit BYTES/s] [--timeout-ms MS]\n\n"
            "Fetches the snapshot in DIR on host H (its beck-manifest, then every file the\n"
            "manifest lists) over SFTP into --dest (new, or an empty directory), checking\n"
            "each file's type, size and XXH3-64. The host key must be in --known-hosts;\n"
            "public-key authentication only (passphrase from $BECK_SSH_PASSPHRASE, if any).\n"
            "--parallel: files at once, each on its own connection (default %d here: half\n"
            "the CPUs, 1 to 4);\n"
            "--rate-limit: all connections together, k/M/G suffixes are powers of 1000\n"
            "(default unlimited); --timeout-ms: connecting and each SSH step (default 30000).\n"
            "Progress goes to stderr about once a second; the last line, on stdout:\n"
            "\"fetched N files, B bytes in MS ms, X MB/s\" (MB = 10^6 bytes).\n"
            "On failure: one line on stderr, exit 1, and no file of the snapshot in --dest.\n",
            bk_sftp_parallel_default());
}

typedef struct fetch_progress_s {
    double start;
} fetch_progress_t;

static void progress_line(void *opaque, uint64_t done, uint64_t total)
{
    fetch_progress_t *p = opaque;
    double t = bk_clock_mono_s() - p->start;
    double rate = t > 0 ? (double)done / t : 0;
    double left = rate > 0 ? (double)(total - done) / rate : 0;

    fprintf(stderr, "beck fetch: %llu of %llu bytes (%.1f%%), %.1f MB/s, %.0f s left\n",
            (unsigned long long)done, (unsigned long long)total,
            total ? 100.0 * (double)done / (double)total : 100.0, rate / 1e6, left);
}

/* "123", "2M", "1.5G" -> bytes; -1 when malformed. */
static int64_t parse_rate(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;

    if (end == s || v < 0) {
        return -1;
    }
    if (*end == 'k' || *end == 'K') {
        mul = 1e3, end++;
    } else if (*end == 'm' || *end == 'M') {
        mul = 1e6, end++;
    } else if (*end == 'g' || *end == 'G') {
        mul = 1e9, end++;
    }
    if (*end == 'B') {
        end++;
    }
    if (strcmp(end, "") != 0 && strcmp(end, "/s") != 0) {
        return -1;
    }
    return (int64_t)(v * mul);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* 1 when dir exists and holds nothing, 0 when it has entries, -1 when it cannot be read. */
static int dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int empty = 1;

    if (!d) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    return empty;
}

int bk_cmd_fetch_main(int argc, char **argv)
{
    bk_sftp_conf_t conf = {0};
    const char *remote_dir = NULL, *dest = NULL, *port = NULL, *parallel = NULL;
    const char *rate = NULL, *timeout = NULL;
    char errstr[1024], path[4096];
    char *text = NULL;
    size_t len = 0;
    bk_manifest_t m;
    int have_m = 0, made_dest = 0, rc = 1, e;
    fetch_progress_t prog;
    double t;

    {
        const bk_cmd_opt_t opts[] = {
            {"--host", BK_OPT_STR, &conf.host, 0, 0},
            {"--port", BK_OPT_STR, &port, 0, 0},
            {"--user", BK_OPT_STR, &conf.user, 0, 0},
            {"--key", BK_OPT_STR, &conf.private_key, 0, 0},
            {"--known-hosts", BK_OPT_STR, &conf.known_hosts, 0, 0},
            {"--remote-dir", BK_OPT_STR, &remote_dir, 0, 0},
            {"--dest", BK_OPT_STR, &dest, 0, 0},
            {"--parallel", BK_OPT_STR, &parallel, 0, 0},
            {"--rate-limit", BK_OPT_STR, &rate, 0, 0},
            {"--timeout-ms", BK_OPT_STR, &timeout, 0, 0},
        };
        bk_cmd_args_t args = {"fetch", opts, 10, NULL, NULL, 0, 0};
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
    if (!conf.host || !conf.user || !conf.private_key || !conf.known_hosts || !remote_dir ||
        !dest) {
        fprintf(stderr, "beck fetch: --host, --user, --key, --known-hosts, --remote-dir and "
                        "--dest are required\n");
        usage(stderr);
        return 2;
    }
    if ((port && parse_int(port, 1, 65535, &conf.port) != 0) ||
        (parallel && parse_int(parallel, 1, 64, &conf.parallel) != 0) ||
        (timeout && parse_int(timeout, 1, 24 * 3600 * 1000, &conf.timeout_ms) != 0) ||
        (rate && (conf.rate_bytes_per_s = parse_rate(rate)) <= 0)) {
        fprintf(stderr, "beck fetch: bad number in --port, --parallel (1-64), --timeout-ms or "
                        "--rate-limit\n");
        return 2;
    }
    conf.passphrase = getenv("BECK_SSH_PASSPHRASE");

    e = dir_empty(dest);
    if (e == 0) {
        fprintf(stderr, "beck fetch: --dest %s is not empty: refused\n", dest);
        return 1;
    }
    if (e < 0) {
        if (errno != ENOENT || mkdir(dest, 0755) != 0) {
            fprintf(stderr, "beck fetch: --dest %s: %s\n", dest, strerror(errno));
            return 1;
        }
        made_dest = 1;
    }

    prog.start = bk_clock_mono_s();
    snprintf(path, sizeof(path), "%s/%s", remote_dir, BK_MANIFEST_NAME);
    if (bk_sftp_read_small(&conf, path, BK_FETCH_MANIFEST_MAX, &text, &len, errstr,
                           sizeof(errstr)) != 0) {
        fprintf(stderr, "beck fetch: %s\n", errstr);
        goto out;
    }
    if (bk_manifest_parse(text, len, &m, errstr, sizeof(errstr)) != 0) {
        fprintf(stderr, "beck fetch: %s:%s:%s: %s\n", conf.host, port ? port : "22", path, errstr);
        goto out;
    }
    have_m = 1;
    if (bk_sftp_fetch(&conf, remote_dir, &m, dest, progress_line, &prog, errstr, sizeof(errstr)) !=
        0) {
        fprintf(stderr, "beck fetch: %s\n", errstr);
        goto out;
    }
    t = bk_clock_mono_s() - prog.start;
    printf("fetched %d files, %llu bytes in %.0f ms, %.1f MB/s\n", m.nfiles,
           (unsigned long long)m.total_bytes, t * 1e3,
           t > 0 ? (double)m.total_bytes / t / 1e6 : 0.0);
    rc = 0;
out:
    if (rc != 0 && made_dest) {
        rmdir(dest);
    }
    if (have_m) {
        bk_manifest_free(&m);
    }
    free(text);
    return rc;
}
