/* replay.c - a main for the fuzz targets without libFuzzer: runs each file named on the
 * command line (or each file of each directory named) through LLVMFuzzerTestOneInput once.
 * Built with the project's compiler and flags (make), so that make test replays the corpora
 * with gcc, and under AddressSanitizer with SAN=1. Prints "<n> inputs" and exits 0; a crash
 * is a crash. */
#define _GNU_SOURCE

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char path[4096];
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.') {
                    continue;
                }
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                if (run_file(path) != 0) {
                    return 1;
                }
                count++;
            }
            if (d) {
                closedir(d);
            }
        } else if (run_file(argv[i]) != 0) {
            return 1;
        } else {
            count++;
        }
    }
    printf("%ld inputs\n", count);
    return 0;
}
